#!/usr/bin/env bash
# Build (once) Karpenter's kwok provider for rebalancer's e2e tests: the controller of
# sigs.k8s.io/karpenter (package kwok/) that turns NodeClaims into plain Node objects
# the e2e kwok keeps Ready, from the wrapper Go module e2e/cluster/gomod/karpenter, into
#   ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/karpenter-<version>/bin/karpenter-kwok
# and copies the CRDs it serves (NodePool, NodeClaim, NodeOverlay, CapacityBuffer from
# pkg/apis/crds, KWOKNodeClass from kwok/apis/crds) out of the module into
#   .../karpenter-<version>/crds/
#
# Karpenter v1.15 needs Go >= 1.26.9: the build runs with GOTOOLCHAIN (default go1.27.3,
# fetched through the Go module proxy by the local go command when it is older).
# Idempotent and locked like build.sh. The last line printed on success is always
#   KARPENTER_DIR=<absolute path>
# Usage:
#   e2e/cluster/build-karpenter.sh            build what is missing
#   e2e/cluster/build-karpenter.sh --dir      only print the output dir (no build)
#   e2e/cluster/build-karpenter.sh --force    rebuild
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD="$HERE/gomod/karpenter"
# shellcheck source=../../scripts/lib/gobuild.sh
source "$HERE/../../scripts/lib/gobuild.sh"
TOOLCHAIN="${REBALANCER_KARPENTER_GOTOOLCHAIN:-go1.27.3}"

KARP_VERSION="$(awk '($1 == "sigs.k8s.io/karpenter") {print $2; exit}' "$MOD/go.mod")"
[[ "$KARP_VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || {
  echo "build-karpenter.sh: cannot read the Karpenter version from $MOD/go.mod" >&2; exit 2; }

CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
KEY="karpenter-${KARP_VERSION}"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"
CRDS="$OUT/crds"
CRD_FILES=(
  karpenter.sh_nodepools.yaml karpenter.sh_nodeclaims.yaml karpenter.sh_nodeoverlays.yaml
  autoscaling.x-k8s.io_capacitybuffers.yaml karpenter.kwok.sh_kwoknodeclasses.yaml
)

FORCE=0
case "${1:-}" in
  --dir) echo "$OUT"; exit 0 ;;
  --force) FORCE=1 ;;
  "") ;;
  *) echo "usage: $0 [--dir|--force]" >&2; exit 2 ;;
esac

all_present() {
  [[ -x "$BIN/karpenter-kwok" && -s "$BIN/karpenter-kwok" ]] || return 1
  local f; for f in "${CRD_FILES[@]}"; do [[ -s "$CRDS/$f" ]] || return 1; done
}

gb_start build-karpenter.sh "$KEY" "$OUT" "KARPENTER_DIR=$OUT" "$FORCE"
gb_cached_or_lock
mkdir -p "$BIN" "$CRDS"
gb_go_env "$TOOLCHAIN"
gb_timer

phase "toolchain and modules ($TOOLCHAIN, sigs.k8s.io/karpenter $KARP_VERSION)"
(cd "$MOD" && go version && go list -deps sigs.k8s.io/karpenter/kwok >/dev/null)
SRC="$(cd "$MOD" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
phase_done "modules"

gb_tmp

if [[ $FORCE == 1 || ! -x "$BIN/karpenter-kwok" || ! -s "$BIN/karpenter-kwok" ]]; then
  phase "build karpenter-kwok (slow when cold)"
  (cd "$MOD" && go build -trimpath -ldflags "-s -w" -o "$TMP/karpenter-kwok" sigs.k8s.io/karpenter/kwok)
  mv -f "$TMP/karpenter-kwok" "$BIN/karpenter-kwok"
  phase_done "karpenter-kwok"
fi

for f in "${CRD_FILES[@]}"; do
  src="$SRC/pkg/apis/crds/$f"
  [[ -f "$src" ]] || src="$SRC/kwok/apis/crds/$f"
  [[ -f "$src" ]] || { echo "build-karpenter.sh: $f not found in $SRC" >&2; exit 1; }
  install -m 0644 "$src" "$CRDS/$f"
done

all_present || { echo "build-karpenter.sh: something is missing after the build" >&2; ls -lR "$OUT" >&2; exit 1; }
printf '%s\n' "karpenter=$KARP_VERSION" "go=$(cd "$MOD" && go env GOVERSION)" >"$OUT/VERSIONS"
echo "build-karpenter.sh: [$(gb_elapsed)s] built: $BIN/karpenter-kwok, CRDs: ${CRD_FILES[*]}"
du -sh "$BIN" | sed 's/^/build-karpenter.sh: size /'
echo "$GB_RESULT"
