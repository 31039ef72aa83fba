#!/usr/bin/env bash
# Build (once) the packaging tools the chart and monitoring tests use:
#   helm      (helm.sh/helm/v3/cmd/helm)                    from e2e/cluster/gomod/helm
#   promtool  (github.com/prometheus/prometheus/cmd/promtool) from e2e/cluster/gomod/promtool
# into ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/tools-<versions>/bin/.
#
# Idempotent: a binary already in the cache is not rebuilt. A lock serialises concurrent
# invocations, and the two tools are built one after the other (one Go build at a time).
# The last line printed on success is always
#   BIN_DIR=<absolute path>
# Usage:
#   scripts/build-tools.sh            build what is missing, print timings and BIN_DIR=...
#   scripts/build-tools.sh --bin-dir  only print the bin dir (no build)
#   scripts/build-tools.sh --force    rebuild both
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOMOD="$ROOT/e2e/cluster/gomod"
# shellcheck source=lib/gobuild.sh
source "$ROOT/scripts/lib/gobuild.sh"

# Versions come from the wrapper go.mod files (single source of truth).
HELM_VERSION="$(gb_modver "$GOMOD/helm" helm.sh/helm/v3)"
PROM_VERSION="$(gb_modver "$GOMOD/promtool" github.com/prometheus/prometheus)"
HELM_CLIENT_GO="$(gb_modver "$GOMOD/helm" k8s.io/client-go)"
for v in "$HELM_VERSION" "$PROM_VERSION" "$HELM_CLIENT_GO"; do
  [[ "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "build-tools.sh: cannot read versions from $GOMOD/{helm,promtool}/go.mod" >&2; exit 2; }
done

CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
KEY="tools-helm-${HELM_VERSION}_promtool-${PROM_VERSION}"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"

FORCE=0
case "${1:-}" in
  --bin-dir) echo "$BIN"; exit 0 ;;
  --force) FORCE=1 ;;
  "") ;;
  *) echo "usage: $0 [--bin-dir|--force]" >&2; exit 2 ;;
esac

ALL_BINS=(helm promtool)
have() { [[ -x "$BIN/$1" && -s "$BIN/$1" ]]; }
all_present() { local b; for b in "${ALL_BINS[@]}"; do have "$b" || return 1; done; }

gb_start build-tools.sh "$KEY" "$OUT" "BIN_DIR=$BIN" "$FORCE"
gb_cached_or_lock
mkdir -p "$BIN"
gb_go_env
echo "build-tools.sh: $(go version); building $KEY into $BIN"
gb_timer
gb_tmp

gobuild() { # gobuild MODDIR OUTFILE LDFLAGS PKG
  (cd "$1" && go mod download && go build -trimpath -ldflags "$3" -o "$2" "$4")
}

if [[ $FORCE == 1 ]] || ! have helm; then
  phase "build helm $HELM_VERSION"
  # helm's own release build stamps its version and the Kubernetes version it assumes for
  # `helm lint` and `.Capabilities` when no cluster is asked (that of its client-go).
  kver="${HELM_CLIENT_GO#v}"; kminor="${kver#*.}"; kminor="${kminor%%.*}"
  ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ld+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ld+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$kminor"
  done
  gobuild "$GOMOD/helm" "$TMP/helm" "$ld" helm.sh/helm/v3/cmd/helm
  mv -f "$TMP/helm" "$BIN/helm"
  phase_done "helm"
fi

if [[ $FORCE == 1 ]] || ! have promtool; then
  phase "build promtool $PROM_VERSION"
  ld="-s -w -X github.com/prometheus/common/version.Version=${PROM_VERSION#v}"
  ld+=" -X github.com/prometheus/common/version.Branch=release"
  gobuild "$GOMOD/promtool" "$TMP/promtool" "$ld" github.com/prometheus/prometheus/cmd/promtool
  mv -f "$TMP/promtool" "$BIN/promtool"
  phase_done "promtool"
fi

all_present || { echo "build-tools.sh: some binaries are missing after the build" >&2; ls -l "$BIN" >&2; exit 1; }
printf '%s\n' "helm=$HELM_VERSION" "promtool=$PROM_VERSION" "go=$(go env GOVERSION)" >"$OUT/VERSIONS"
echo "build-tools.sh: [$(gb_elapsed)s] all built: $(cd "$BIN" && ls | tr '\n' ' ')"
du -sh "$BIN" | sed 's/^/build-tools.sh: size /'
echo "$GB_RESULT"
