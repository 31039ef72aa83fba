#!/usr/bin/env bash
# Build (once) syft, the SBOM generator scripts/release.sh and the image e2e use:
#   syft (github.com/anchore/syft/cmd/syft) from e2e/cluster/gomod/syft
# into ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/tools-syft-<version>/bin/.
# Idempotent and locked, like scripts/build-tools.sh. The last line printed on success is
#   SYFT=<absolute path>
# Usage: scripts/build-syft.sh [--path]   (--path: only print SYFT=..., no build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/e2e/cluster/gomod/syft"
VERSION="$(awk '($1 == "github.com/anchore/syft") {print $2; exit}' "$MOD/go.mod")"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build-syft.sh: no syft version in $MOD/go.mod" >&2; exit 2; }
CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
OUT="$CACHE_ROOT/tools-syft-$VERSION"
BIN="$OUT/bin/syft"
if [[ "${1:-}" == "--path" ]]; then echo "SYFT=$BIN"; exit 0; fi
if [[ -x "$BIN" ]]; then echo "build-syft.sh: cached: syft $VERSION"; echo "SYFT=$BIN"; exit 0; fi

mkdir -p "$OUT/bin"
exec 9>"$OUT/.lock"
flock -w 3600 9 || { echo "build-syft.sh: could not take $OUT/.lock" >&2; exit 1; }
if [[ -x "$BIN" ]]; then echo "build-syft.sh: cached: syft $VERSION (built by a concurrent run)"; echo "SYFT=$BIN"; exit 0; fi
command -v go >/dev/null || { echo "build-syft.sh: go not found on PATH" >&2; exit 1; }
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
T0=$SECONDS
echo "build-syft.sh: $(go version); building syft $VERSION"
ld="-s -w -X main.version=${VERSION#v}"
(cd "$MOD" && go mod download && go build -trimpath -ldflags "$ld" -o "$OUT/bin/syft.tmp" github.com/anchore/syft/cmd/syft)
mv -f "$OUT/bin/syft.tmp" "$BIN"
echo "build-syft.sh: [$(( SECONDS - T0 ))s] done: syft $VERSION"
echo "SYFT=$BIN"
