#!/usr/bin/env bash
# Build (once) the real control-plane binaries used by rebalancer's e2e tests:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (k8s.io/kubernetes)
#   etcd                                                              (go.etcd.io/etcd/server/v3)
#   kwok                                                              (sigs.k8s.io/kwok/cmd/kwok)
# from the wrapper Go modules in e2e/cluster/gomod/*, into
#   ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/<versions>/bin/
#
# Idempotent: binaries already in the cache are not rebuilt. A lock serialises
# concurrent invocations. The last line printed on success is always
#   BIN_DIR=<absolute path>
# Usage:
#   e2e/cluster/build.sh            build what is missing, print timings and BIN_DIR=...
#   e2e/cluster/build.sh --bin-dir  only print the bin dir (no build)
#   e2e/cluster/build.sh --force    rebuild everything
# The Kubernetes minor comes from REBALANCER_E2E_K8S (1.32, 1.35, 1.37 or 1.38; default 1.35),
# or from --k8s MINOR given first (e.g. `build.sh --k8s 1.32 --bin-dir`).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GOMOD="$HERE/gomod"
# shellcheck source=../../scripts/lib/gobuild.sh
source "$HERE/../../scripts/lib/gobuild.sh"

K8S_MINOR="${REBALANCER_E2E_K8S:-1.35}"
if [[ "${1:-}" == "--k8s" ]]; then K8S_MINOR="${2:-}"; shift 2 || shift $#; fi
# One wrapper module per Kubernetes minor, with the etcd that fits it; kwok is shared.
# K8S_GO is the Go toolchain of the Kubernetes module: 1.38's go.mod says go 1.27.0, newer
# than the local Go, so the go command fetches that toolchain (cached in the module cache).
K8S_GO=local
case "$K8S_MINOR" in
  1.32) K8S_MOD=kubernetes-1.32 ETCD_MOD=etcd-3.5 ;;
  1.35) K8S_MOD=kubernetes ETCD_MOD=etcd ;;
  1.37) K8S_MOD=kubernetes-1.37 ETCD_MOD=etcd-3.7 ;;
  1.38) K8S_MOD=kubernetes-1.38 ETCD_MOD=etcd-3.7 K8S_GO=go1.27.3 ;;
  *) echo "build.sh: REBALANCER_E2E_K8S/--k8s must be 1.32, 1.35, 1.37 or 1.38, got '$K8S_MINOR'" >&2; exit 2 ;;
esac

# Versions come from the wrapper go.mod files (single source of truth).
K8S_VERSION="$(gb_modver "$GOMOD/$K8S_MOD" k8s.io/kubernetes)"
ETCD_VERSION="$(gb_modver "$GOMOD/$ETCD_MOD" go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(gb_modver "$GOMOD/kwok" sigs.k8s.io/kwok)"
for v in "$K8S_VERSION" "$ETCD_VERSION" "$KWOK_VERSION"; do
  [[ "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "build.sh: cannot read versions from $GOMOD/*/go.mod" >&2; exit 2; }
done

CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
KEY="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"

FORCE=0
case "${1:-}" in
  --bin-dir) echo "$BIN"; exit 0 ;;
  --force) FORCE=1 ;;
  "") ;;
  *) echo "usage: $0 [--k8s 1.32|1.35|1.37|1.38] [--bin-dir|--force]" >&2; exit 2 ;;
esac

K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
ALL_BINS=("${K8S_BINS[@]}" etcd kwok)

have() { [[ -x "$BIN/$1" && -s "$BIN/$1" ]]; }
all_present() { local b; for b in "${ALL_BINS[@]}"; do have "$b" || return 1; done; }

gb_start build.sh "$KEY" "$OUT" "BIN_DIR=$BIN" "$FORCE"
gb_cached_or_lock
mkdir -p "$BIN"
gb_go_env
echo "build.sh: $(go version), Kubernetes with $(GOTOOLCHAIN=$K8S_GO go version); building $KEY into $BIN"
gb_timer

# go build with a fallback for newer Go toolchains where the vendored
# kube-openapi fails with "undefined: json.SkipFunc" (descheduler #1925).
gobuild() { # gobuild MODDIR OUT(file, or dir/) LDFLAGS PKG...
  local moddir="$1" out="$2" ldflags="$3"; shift 3
  local log; log="$(mktemp)"
  if ! (cd "$moddir" && go build -trimpath -ldflags "$ldflags" -o "$out" "$@") >"$log" 2>&1; then
    if grep -q 'json.SkipFunc' "$log" && [[ -z "${GOEXPERIMENT:-}" ]]; then
      echo "build.sh: retrying with GOEXPERIMENT=nojsonv2"
      if ! (cd "$moddir" && GOEXPERIMENT=nojsonv2 go build -trimpath -ldflags "$ldflags" -o "$out" "$@") >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; return 1
      fi
    else
      cat "$log" >&2; rm -f "$log"; return 1
    fi
  fi
  cat "$log"; rm -f "$log"
}

gb_tmp

install_bins() { local b; for b in "$@"; do mv -f "$TMP/$b" "$BIN/$b"; done; }

phase "download modules"
# Only the modules the binaries need: some unused staging modules (sample-*) of
# older releases are not served by the module proxy, so `go mod download` would fail.
(cd "$GOMOD/$ETCD_MOD" && go list -deps go.etcd.io/etcd/server/v3 >/dev/null)
(cd "$GOMOD/kwok" && go list -deps sigs.k8s.io/kwok/cmd/kwok >/dev/null)
(cd "$GOMOD/$K8S_MOD" && GOTOOLCHAIN=$K8S_GO go list -deps $(printf 'k8s.io/kubernetes/cmd/%s ' "${K8S_BINS[@]}") >/dev/null)
phase_done "download modules"

if [[ $FORCE == 1 ]] || ! have etcd; then
  phase "build etcd $ETCD_VERSION"
  gobuild "$GOMOD/$ETCD_MOD" "$TMP/etcd" "-s -w" go.etcd.io/etcd/server/v3
  install_bins etcd
  phase_done "etcd"
fi

if [[ $FORCE == 1 ]] || ! have kwok; then
  phase "build kwok $KWOK_VERSION"
  gobuild "$GOMOD/kwok" "$TMP/" "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" sigs.k8s.io/kwok/cmd/kwok
  install_bins kwok
  phase_done "kwok"
fi

need_k8s=()
for b in "${K8S_BINS[@]}"; do
  if [[ $FORCE == 1 ]] || ! have "$b"; then need_k8s+=("$b"); fi
done
if (( ${#need_k8s[@]} )); then
  phase "build Kubernetes $K8S_VERSION: ${need_k8s[*]} (slow when cold)"
  ver="${K8S_VERSION#v}"; major="${ver%%.*}"; rest="${ver#*.}"; minor="${rest%%.*}"
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=()
  for b in "${need_k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  GOTOOLCHAIN=$K8S_GO gobuild "$GOMOD/$K8S_MOD" "$TMP/" "$ld" "${pkgs[@]}"
  install_bins "${need_k8s[@]}"
  phase_done "Kubernetes"
fi

all_present || { echo "build.sh: some binaries are missing after the build" >&2; ls -l "$BIN" >&2; exit 1; }
printf '%s\n' "k8s=$K8S_VERSION" "etcd=$ETCD_VERSION" "kwok=$KWOK_VERSION" "go=$(go env GOVERSION)" "go-kubernetes=$(GOTOOLCHAIN=$K8S_GO go env GOVERSION)" >"$OUT/VERSIONS"
echo "build.sh: [$(gb_elapsed)s] all built: $(cd "$BIN" && ls | tr '\n' ' ')"
du -sh "$BIN" | sed 's/^/build.sh: size /'
echo "$GB_RESULT"
