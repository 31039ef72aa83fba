#!/usr/bin/env bash
# Build (once) the upstream Go descheduler (sigs.k8s.io/descheduler, cmd/descheduler) used by
# bench/compare.py, from the wrapper Go module in bench/descheduler/gomod, into
#   ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/descheduler-<version>/bin/descheduler
#
# Idempotent: a cached binary is not rebuilt. A lock serialises concurrent invocations.
# The last line printed on success is always  BIN=<absolute path of the binary>
# Usage:
#   bench/descheduler/build.sh          build if missing, print timings and BIN=...
#   bench/descheduler/build.sh --bin    only print the binary path (no build)
#   bench/descheduler/build.sh --force  rebuild
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GOMOD="$HERE/gomod"
VERSION="$(awk '($1 == "require" && $2 == "sigs.k8s.io/descheduler") {print $3; exit}
                ($1 == "sigs.k8s.io/descheduler") {print $2; exit}' "$GOMOD/go.mod")"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "build.sh: cannot read the descheduler version from $GOMOD/go.mod" >&2; exit 2; }

CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
OUT="$CACHE_ROOT/descheduler-$VERSION"
BIN="$OUT/bin/descheduler"

FORCE=0
case "${1:-}" in
  --bin) echo "$BIN"; exit 0 ;;
  --force) FORCE=1 ;;
  "") ;;
  *) echo "usage: $0 [--bin|--force]" >&2; exit 2 ;;
esac

have() { [[ -x "$BIN" && -s "$BIN" ]]; }
if [[ $FORCE == 0 ]] && have; then
  echo "build.sh: cached: descheduler $VERSION (nothing to do)"
  echo "BIN=$BIN"
  exit 0
fi

mkdir -p "$OUT/bin"
exec 9>"$OUT/.lock"
flock -w 3600 9 || { echo "build.sh: could not take $OUT/.lock within 3600 s" >&2; exit 1; }
if [[ $FORCE == 0 ]] && have; then
  echo "build.sh: cached: descheduler $VERSION (built by a concurrent run)"
  echo "BIN=$BIN"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: go not found on PATH" >&2; exit 1; }
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"
echo "build.sh: $(go version); building descheduler $VERSION into $BIN"

T0=$SECONDS
ps=$SECONDS
phase() { echo "build.sh: [$(( SECONDS - T0 ))s] $*"; ps=$SECONDS; }
phase_done() { echo "build.sh: [$(( SECONDS - T0 ))s]   done in $(( SECONDS - ps ))s: $*"; }

TMP="$(mktemp -d "$OUT/tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

phase "download modules"
(cd "$GOMOD" && go mod download)
phase_done "download modules"

phase "build descheduler $VERSION (slow when cold)"
PKG=sigs.k8s.io/descheduler/pkg/version
LD="-s -w -X $PKG.version=$VERSION -X $PKG.buildDate=1970-01-01T00:00:00Z -X $PKG.gitbranch=release -X $PKG.gitsha1=none"
LOG="$TMP/build.log"
if ! (cd "$GOMOD" && go build -trimpath -ldflags "$LD" -o "$TMP/descheduler" sigs.k8s.io/descheduler/cmd/descheduler) >"$LOG" 2>&1; then
  # kube-openapi of this release fails on Go >= 1.27: "undefined: json.SkipFunc" (descheduler #1925)
  if grep -q 'json.SkipFunc' "$LOG" && [[ -z "${GOEXPERIMENT:-}" ]]; then
    echo "build.sh: retrying with GOEXPERIMENT=nojsonv2"
    (cd "$GOMOD" && GOEXPERIMENT=nojsonv2 go build -trimpath -ldflags "$LD" -o "$TMP/descheduler" sigs.k8s.io/descheduler/cmd/descheduler) >"$LOG" 2>&1 \
      || { cat "$LOG" >&2; exit 1; }
  else
    cat "$LOG" >&2; exit 1
  fi
fi
cat "$LOG"
mv -f "$TMP/descheduler" "$BIN"
phase_done "descheduler"
printf '%s\n' "descheduler=$VERSION" "go=$(go env GOVERSION)" >"$OUT/VERSIONS"
du -sh "$BIN" | sed 's/^/build.sh: size /'
echo "BIN=$BIN"
