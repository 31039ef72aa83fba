#!/usr/bin/env bash
# Run rebalancer's e2e tests against a kind cluster (real kubelets and containers)
# instead of the local kwok control plane. Needs docker (or podman), kind and python.
#   e2e/kind/run.sh [extra pytest args]
# Env: KIND_CLUSTER_NAME (default rebalancer-e2e), KIND_NODE_IMAGE (e.g. kindest/node:v1.35.x;
#      default: kind's own), KEEP_CLUSTER=1 to leave the cluster running,
#      REBALANCER_E2E_IMAGE (test pod image, default busybox:1.36).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NAME="${KIND_CLUSTER_NAME:-rebalancer-e2e}"
KUBECONFIG_FILE="$(mktemp -t kind-rebalancer-e2e.XXXXXX)"

cleanup() {
  if [[ "${KEEP_CLUSTER:-0}" != 1 ]]; then
    kind delete cluster --name "$NAME" || true
    rm -f "$KUBECONFIG_FILE"
  else
    echo "kept cluster $NAME; kubeconfig: $KUBECONFIG_FILE"
  fi
}
trap cleanup EXIT

image_args=()
[[ -n "${KIND_NODE_IMAGE:-}" ]] && image_args=(--image "$KIND_NODE_IMAGE")
kind create cluster --name "$NAME" --config "$ROOT/e2e/kind/kind-config.yaml" \
  --kubeconfig "$KUBECONFIG_FILE" --wait 180s "${image_args[@]}"
kubectl --kubeconfig "$KUBECONFIG_FILE" wait --for=condition=Ready nodes --all --timeout=180s

cd "$ROOT"
# The fixture uses this kubeconfig as is: it starts and tears down nothing, and its guard
# accepts exactly this cluster's server. Tests that need kwok or the audit log skip.
REBALANCER_E2E_KUBECONFIG="$KUBECONFIG_FILE" python -m pytest e2e --e2e -v "$@"
