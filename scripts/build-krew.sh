#!/usr/bin/env bash
# Build (once) krew, for the kubectl plugin's install test (e2e/test_packaging.py):
#   krew (sigs.k8s.io/krew/cmd/krew) from e2e/cluster/gomod/krew
# into ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/krew-<version>/bin/kubectl-krew
# (the name kubectl finds it by as `kubectl krew`). Idempotent and locked like build-tools.sh.
# The last line printed on success is always
#   BIN_DIR=<absolute path>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/e2e/cluster/gomod/krew"
VERSION="$(awk '($1 == "require" && $2 == "sigs.k8s.io/krew") {print $3; exit} ($1 == "sigs.k8s.io/krew") {print $2; exit}' "$MOD/go.mod")"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build-krew.sh: cannot read the krew version from $MOD/go.mod" >&2; exit 2; }
OUT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/krew-$VERSION"
BIN="$OUT/bin"
if [[ -x "$BIN/kubectl-krew" ]]; then echo "build-krew.sh: cached: krew $VERSION"; echo "BIN_DIR=$BIN"; exit 0; fi
mkdir -p "$BIN"
exec 9>"$OUT/.lock"
flock -w 3600 9 || { echo "build-krew.sh: could not take $OUT/.lock" >&2; exit 1; }
if [[ -x "$BIN/kubectl-krew" ]]; then echo "build-krew.sh: cached: krew $VERSION"; echo "BIN_DIR=$BIN"; exit 0; fi
command -v go >/dev/null || { echo "build-krew.sh: go not found on PATH" >&2; exit 1; }
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
T0=$SECONDS
echo "build-krew.sh: $(go version); building krew $VERSION"
TMP="$(mktemp -d "$OUT/tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
# krew stamps its version like its release build does (krew version shows it).
(cd "$MOD" && go mod download && go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$VERSION" \
  -o "$TMP/kubectl-krew" sigs.k8s.io/krew/cmd/krew)
mv -f "$TMP/kubectl-krew" "$BIN/kubectl-krew"
echo "build-krew.sh: [$(( SECONDS - T0 ))s] built krew $VERSION"
echo "BIN_DIR=$BIN"
