#!/usr/bin/env bash
# Build (once) actionlint, the linter tests/test_release_workflow.py runs on .github/workflows/release.yml:
#   actionlint (github.com/rhysd/actionlint/cmd/actionlint) from e2e/cluster/gomod/actionlint
# into ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/tools-actionlint-<version>/bin/.
# Idempotent and locked, like scripts/build-tools.sh. The last line printed on success is
#   ACTIONLINT=<absolute path>
# Usage: scripts/build-actionlint.sh [--path]   (--path: only print ACTIONLINT=..., no build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/e2e/cluster/gomod/actionlint"
VERSION="$(awk '($1 == "github.com/rhysd/actionlint") {print $2; exit}' "$MOD/go.mod")"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build-actionlint.sh: no actionlint version in $MOD/go.mod" >&2; exit 2; }
CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
OUT="$CACHE_ROOT/tools-actionlint-$VERSION"
BIN="$OUT/bin/actionlint"
if [[ "${1:-}" == "--path" ]]; then echo "ACTIONLINT=$BIN"; exit 0; fi
if [[ -x "$BIN" ]]; then echo "build-actionlint.sh: cached: actionlint $VERSION"; echo "ACTIONLINT=$BIN"; exit 0; fi

mkdir -p "$OUT/bin"
exec 9>"$OUT/.lock"
flock -w 3600 9 || { echo "build-actionlint.sh: could not take $OUT/.lock" >&2; exit 1; }
if [[ -x "$BIN" ]]; then echo "build-actionlint.sh: cached: actionlint $VERSION (built by a concurrent run)"; echo "ACTIONLINT=$BIN"; exit 0; fi
command -v go >/dev/null || { echo "build-actionlint.sh: go not found on PATH" >&2; exit 1; }
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
T0=$SECONDS
echo "build-actionlint.sh: $(go version); building actionlint $VERSION"
ld="-s -w -X github.com/rhysd/actionlint.version=${VERSION}"
(cd "$MOD" && go mod download && go build -trimpath -ldflags "$ld" -o "$OUT/bin/actionlint.tmp" github.com/rhysd/actionlint/cmd/actionlint)
mv -f "$OUT/bin/actionlint.tmp" "$BIN"
echo "build-actionlint.sh: [$(( SECONDS - T0 ))s] done: actionlint $VERSION"
echo "ACTIONLINT=$BIN"
