#!/usr/bin/env bash
# Build (once) krew, for the kubectl plugin's install test (e2e/test_packaging.py):
#   krew (sigs.k8s.io/krew/cmd/krew) from e2e/cluster/gomod/krew
# into ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/krew-<version>/bin/kubectl-krew
# (the name kubectl finds it by as `kubectl krew`). Idempotent and locked like build-tools.sh.
# The last line printed on success is always
#   BIN_DIR=<absolute path>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/gobuild.sh
source "$ROOT/scripts/lib/gobuild.sh"
MOD="$ROOT/e2e/cluster/gomod/krew"
VERSION="$(gb_modver "$MOD" sigs.k8s.io/krew)"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build-krew.sh: cannot read the krew version from $MOD/go.mod" >&2; exit 2; }
OUT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/krew-$VERSION"
BIN="$OUT/bin"
all_present() { [[ -x "$BIN/kubectl-krew" ]]; }
gb_start build-krew.sh "krew $VERSION" "$OUT" "BIN_DIR=$BIN"
gb_cached_or_lock
mkdir -p "$BIN"
gb_go_env
gb_timer
echo "build-krew.sh: $(go version); building krew $VERSION"
gb_tmp
# krew stamps its version like its release build does (krew version shows it).
(cd "$MOD" && go mod download && go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$VERSION" \
  -o "$TMP/kubectl-krew" sigs.k8s.io/krew/cmd/krew)
mv -f "$TMP/kubectl-krew" "$BIN/kubectl-krew"
echo "build-krew.sh: [$(gb_elapsed)s] built krew $VERSION"
echo "$GB_RESULT"
