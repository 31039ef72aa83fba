#!/usr/bin/env bash
# Build (once) what rebalancer's e2e tests need for REAL kubelet nodes, next to the
# control plane that build.sh builds:
#   kubelet, kube-proxy                       (k8s.io/kubernetes, the same wrapper module)
#   containerd, containerd-shim-runc-v2, ctr  (github.com/containerd/containerd/v2)
#   testimage                                 (e2e/image/testimage: PID 1 of the test image
#                                              and of the nodes' pause image)
# and installs the Debian packages the nodes use: runc, containernetworking-plugins
# (bridge, host-local in /usr/lib/cni), iptables, iproute2.
#
# Output: ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/nodes_<versions>/bin/
# Idempotent and locked like build.sh; runs build.sh first (the control plane is
# needed anyway, and the kubelet build then reuses its Go build cache).
# The last line printed on success is always  NODES_BIN_DIR=<absolute path>
# Usage:
#   e2e/cluster/build-nodes.sh            build what is missing
#   e2e/cluster/build-nodes.sh --bin-dir  only print the bin dir (no build)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GOMOD="$HERE/gomod"
IMAGE_SRC="$HERE/../image/testimage"
# shellcheck source=../../scripts/lib/gobuild.sh
source "$HERE/../../scripts/lib/gobuild.sh"

K8S_VERSION="$(gb_modver "$GOMOD/kubernetes" k8s.io/kubernetes)"
CTRD_VERSION="$(gb_modver "$GOMOD/containerd" github.com/containerd/containerd/v2)"
for v in "$K8S_VERSION" "$CTRD_VERSION"; do
  [[ "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "build-nodes.sh: cannot read versions from $GOMOD/*/go.mod" >&2; exit 2; }
done

CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
KEY="nodes_k8s-${K8S_VERSION}_containerd-${CTRD_VERSION}"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"

case "${1:-}" in
  --bin-dir) echo "$BIN"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--bin-dir]" >&2; exit 2 ;;
esac

gb_start build-nodes.sh "$KEY" "$OUT" "NODES_BIN_DIR=$BIN"

# ---- Debian packages (root; the real nodes need root anyway)
DEB_PKGS=(runc containernetworking-plugins iptables iproute2)
debs_present() {
  command -v runc >/dev/null && [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] \
    && command -v iptables >/dev/null && command -v ip >/dev/null
}
if ! debs_present; then
  phase "apt-get install ${DEB_PKGS[*]}"
  [[ $(id -u) == 0 ]] || { echo "build-nodes.sh: need root to install ${DEB_PKGS[*]}" >&2; exit 1; }
  exec 8>/var/lib/apt/rebalancer-e2e.lock
  flock -w 1800 8
  if ! debs_present; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${DEB_PKGS[@]}" >/dev/null
  fi
  exec 8>&-
  debs_present || { echo "build-nodes.sh: ${DEB_PKGS[*]} still missing after apt-get" >&2; exit 1; }
  phase_done "apt-get"
fi

# ---- the control plane first (waits for a concurrent build; warms the Go build cache)
phase "control plane (build.sh)"
bash "$HERE/build.sh" | sed 's/^/  /'
phase_done "control plane"

GO_BINS=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr)
have() { [[ -x "$BIN/$1" && -s "$BIN/$1" ]]; }
img_hash() { cat "$IMAGE_SRC/go.mod" "$IMAGE_SRC"/*.go | sha256sum | cut -c1-16; }
all_present() {
  local b; for b in "${GO_BINS[@]}"; do have "$b" || return 1; done
  have testimage && [[ "$(cat "$BIN/testimage.src" 2>/dev/null)" == "$(img_hash)" ]]
}

gb_cached_or_lock
mkdir -p "$BIN"
gb_go_env  # the timings count from gb_start: the apt-get and control plane phases included
gb_tmp

gobuild() { # gobuild MODDIR OUT LDFLAGS TAGS PKG...
  local moddir="$1" out="$2" ldflags="$3" tags="$4"; shift 4
  (cd "$moddir" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out" "$@")
}

need=()
for b in kubelet kube-proxy; do have "$b" || need+=("$b"); done
if (( ${#need[@]} )); then
  phase "build Kubernetes $K8S_VERSION: ${need[*]}"
  (cd "$GOMOD/kubernetes" && go mod download)
  ver="${K8S_VERSION#v}"; major="${ver%%.*}"; rest="${ver#*.}"; minor="${rest%%.*}"
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=(); for b in "${need[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  gobuild "$GOMOD/kubernetes" "$TMP/" "$ld" "" "${pkgs[@]}"
  for b in "${need[@]}"; do mv -f "$TMP/$b" "$BIN/$b"; done
  phase_done "${need[*]}"
fi

need=()
for b in containerd containerd-shim-runc-v2 ctr; do have "$b" || need+=("$b"); done
if (( ${#need[@]} )); then
  phase "build containerd $CTRD_VERSION: ${need[*]}"
  (cd "$GOMOD/containerd" && go mod download)
  pkgs=(); for b in "${need[@]}"; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b"); done
  gobuild "$GOMOD/containerd" "$TMP/" \
    "-s -w -X github.com/containerd/containerd/v2/version.Version=$CTRD_VERSION" \
    "no_btrfs no_devmapper no_zfs" "${pkgs[@]}"
  for b in "${need[@]}"; do mv -f "$TMP/$b" "$BIN/$b"; done
  phase_done "containerd"
fi

phase "build testimage"
gobuild "$IMAGE_SRC" "$TMP/testimage" "-s -w" "" .
mv -f "$TMP/testimage" "$BIN/testimage"
img_hash >"$BIN/testimage.src"
phase_done "testimage"

all_present || { echo "build-nodes.sh: some binaries are missing after the build" >&2; ls -l "$BIN" >&2; exit 1; }
printf '%s\n' "k8s=$K8S_VERSION" "containerd=$CTRD_VERSION" "go=$(go env GOVERSION)" \
  "runc=$(dpkg-query -W -f='${Version}' runc 2>/dev/null || echo unknown)" \
  "cni=$(dpkg-query -W -f='${Version}' containernetworking-plugins 2>/dev/null || echo unknown)" >"$OUT/VERSIONS"
echo "build-nodes.sh: [$(gb_elapsed)s] all built: $(cd "$BIN" && ls | tr '\n' ' ')"
echo "$GB_RESULT"
