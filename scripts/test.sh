#!/usr/bin/env bash
# The test command (README): lint, unit and property tests, then e2e against a local control
# plane. Set REBALANCER_SKIP_E2E=1 to stop after the unit tests. helm and promtool (for the chart
# and alert-rule tests) are built from Go modules and cached, beside the unit tests (below);
# REBALANCER_SKIP_TOOLS=1 skips that build (those tests then skip, saying so).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
BIN=$(dirname "$PY")

start=$(date +%s)
phase() { printf '\n=== %s (t+%ss)\n' "$1" "$(( $(date +%s) - start ))"; }

# Every binary the tests need builds in one background lane from the start (nice 10, cached,
# each build script locked, so a second call waits for the first or finds it cached), while lint
# and the unit tests run in the foreground: on a machine where nothing is cached yet the builds
# overlap the tests instead of preceding them. The order is what the tests need first: helm and
# promtool (the chart and alert-rule tests, which run last and wait for them) and actionlint;
# then the 1.35 control plane, the real nodes and the rebalancer image, Karpenter's kwok
# provider, syft (the release's SBOM), and the 1.32, 1.37 and 1.38 control planes (1.38 the
# costliest: Go 1.27.3 compiles every dependency again). Each step touches "$built.<name>" when
# done; past REBALANCER_VERSIONS_BUDGET seconds of this script (default 2400) the foreground
# stops waiting, the lane is stopped, and the scenarios whose binaries are not built yet are
# skipped, saying so; Go's build cache keeps what was compiled, so the next run finishes them.
# REBALANCER_SKIP_TOOLS=1 builds no packaging tool (those tests then skip, saying so).
VERSION_MINORS=(1.32 1.37 1.38)
KARPENTER_TESTS=(e2e/test_karpenter.py e2e/test_capacity.py e2e/test_capacity_infra.py)
REAL_NODE_TESTS=(e2e/test_realnodes.py e2e/test_realnodes_steer.py e2e/test_realnodes_lifecycle.py
                 e2e/test_release.py)
builds_log=$(mktemp)
built=$(mktemp -u)
tools=1; [ "${REBALANCER_SKIP_TOOLS:-0}" = "1" ] && tools=0
e2e=1; [ "${REBALANCER_SKIP_E2E:-0}" = "1" ] && e2e=0
# Real kubelet nodes need root and cgroup v1 controllers; without them the real-node tests
# skip themselves with the reason (shown by -rs).
real_nodes_unsupported=$("$PY" -c 'from e2e.cluster.realnodes import host_support; print(host_support() or "")')
setsid -w bash -c 'built=$1 tools=$2 e2e=$3 real=$4; shift 4
                   step() { name=$1; shift; nice -n 10 "$@" || exit 1; touch "$built.$name"; }
                   if [ "$tools" = 1 ]; then
                     step tools bash scripts/build-tools.sh
                     step actionlint bash scripts/build-gotool.sh actionlint
                   fi
                   [ "$e2e" = 1 ] || exit 0
                   step 1.35 bash e2e/cluster/build.sh
                   if [ -z "$real" ]; then
                     step nodes bash e2e/cluster/build-nodes.sh
                     step image bash e2e/image/build-rebalancer-image.sh
                   fi
                   step karpenter bash e2e/cluster/build-karpenter.sh
                   step syft bash scripts/build-gotool.sh syft
                   for minor in "$@"; do step "$minor" bash e2e/cluster/build.sh --k8s "$minor"; done' \
  _ "$built" "$tools" "$e2e" "$real_nodes_unsupported" "${VERSION_MINORS[@]}" >"$builds_log" 2>&1 &
builds=$!
side=""  # the second e2e track (below), its own process group
# set -e holds in the trap too: a lane already stopped and reaped (below) must not turn a
# passing run into exit 1.
trap 'kill -- -"$builds" 2>/dev/null || true; [ -z "$side" ] || kill -- -"$side" 2>/dev/null || true' EXIT
versions_budget=${REBALANCER_VERSIONS_BUDGET:-2400}
# e2e/test_versions.py compares each minor's plans with those the other minors wrote in this
# run: results an earlier run (older code) left behind must not count.
REBALANCER_E2E_RESULTS=$(mktemp -d)
export REBALANCER_E2E_RESULTS
# wait_built NAME: until the lane has built NAME, has failed, or the budget is spent; true when
# NAME is built.
wait_built() {
  while [ ! -e "$built.$1" ] && kill -0 "$builds" 2>/dev/null \
      && (( $(date +%s) - start < versions_budget )); do
    sleep 10
  done
  [ -e "$built.$1" ]
}

phase "lint"
"$BIN/ruff" check .
"$BIN/ruff" format --check .
"$BIN/mypy" --strict rebalancer tests e2e bench scripts
"$BIN/lint-imports"

phase "browser for the HTML report test"
# tests/test_html.py renders the report in Debian's chromium (headless); skipped without it.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -q >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } \
      || echo "could not install chromium: the browser tests will be skipped"
  else
    echo "chromium is missing and apt-get needs root: the browser tests will be skipped"
  fi
fi
command -v chromium >/dev/null 2>&1 && chromium --version 2>/dev/null

phase "terminal for the table test"
# tests/test_terminal_names.py reads the plan table back from a tmux pane; skipped without it.
if ! command -v tmux >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -q >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q tmux >/dev/null; } \
      || echo "could not install tmux: the terminal test will be skipped"
  else
    echo "tmux is missing and apt-get needs root: the terminal test will be skipped"
  fi
fi
command -v tmux >/dev/null 2>&1 && tmux -V

phase "unit tests (those needing helm, promtool or actionlint last, waiting for their build)"
# pytest exits 5 when it collects nothing; set -e turns that into a failure.
REBALANCER_TOOLS_BUILDING=$tools "$PY" -m pytest tests -q
if [ "$tools" = 1 ]; then
  grep -E 'build-tools.sh: .*(done in|cached)|build-gotool.sh actionlint: .*(done|cached)' \
    "$builds_log" || true
else
  echo "packaging tools not built (REBALANCER_SKIP_TOOLS=1): chart and alert tests skipped"
fi

if [ "${REBALANCER_SKIP_E2E:-0}" = "1" ]; then
  echo "e2e skipped (REBALANCER_SKIP_E2E=1)"
  exit 0
fi

phase "e2e: build control plane (cached; the lane above builds it)"
bash e2e/cluster/build.sh

if [ -z "$real_nodes_unsupported" ]; then
  phase "e2e: build real nodes: kubelet, kube-proxy, containerd, test image (cached)"
  bash e2e/cluster/build-nodes.sh
  phase "e2e: build the rebalancer image from the Dockerfile, twice: one image id (cached)"
  bash e2e/image/build-rebalancer-image.sh
else
  echo "real-node e2e scenarios will be SKIPPED: $real_nodes_unsupported"
fi

# The e2e scenarios run in two tracks at once, each with its own control plane on its own free
# ports: they mostly wait (for kube-controller-manager, kubelets, Karpenter's batches, a wave's
# timeout), so two tracks on two cores take little more than the longer one.
#   this track: the kwok scenarios on 1.35, then those marked k8s_versions on the other minors;
#   the side track: Karpenter's kwok provider beside rebalancer, once the lane has built it (its
#   tests skip when it is not built), then the real nodes and the release, once the lane has
#   built syft (the release's SBOM); its output is printed when this track is done.
side_log=$(mktemp)
setsid -w bash -c 'py=$1 built=$2 builds=$3 nk=$4; shift 4
                   karpenter=("${@:1:$nk}"); real=("${@:$((nk + 1))}")
                   t0=$(date +%s)
                   phase() { printf "\n=== %s (side track, +%ss)\n" "$1" "$(( $(date +%s) - t0 ))"; }
                   # until the lane has built NAME or has ended (what is not built then skips)
                   lane_built() {
                     while [ ! -e "$built.$1" ] && kill -0 "$builds" 2>/dev/null; do sleep 10; done
                   }
                   status=0
                   lane_built karpenter
                   phase "e2e tests (Karpenter'"'"'s kwok provider beside rebalancer)"
                   "$py" -m pytest "${karpenter[@]}" --e2e -v -rs || status=1
                   lane_built syft
                   phase "e2e tests (real nodes, and the release)"
                   # -rP: the eviction timelines, the CronJob summary line and who deleted each pod.
                   "$py" -m pytest "${real[@]}" --e2e -v -rsP || status=1
                   phase "side track done"
                   exit "$status"' \
  _ "$PY" "$built" "$builds" "${#KARPENTER_TESTS[@]}" "${KARPENTER_TESTS[@]}" \
  "${REAL_NODE_TESTS[@]}" >"$side_log" 2>&1 &
side=$!

phase "e2e tests (kwok nodes)"
"$PY" -m pytest e2e --e2e -v "${REAL_NODE_TESTS[@]/#/--ignore=}" "${KARPENTER_TESTS[@]/#/--ignore=}"

# The scenarios that differ by Kubernetes version (marked k8s_versions) again on the oldest and
# the newest supported minors; the full set above ran on the default, 1.35. Real nodes stay on
# 1.35. On 1.38 the EvictionRequest scenarios run once more with the API's gate on.
for minor in "${VERSION_MINORS[@]}"; do
  phase "e2e: wait for the $minor control-plane build"
  if ! wait_built "$minor"; then
    if ! kill -0 "$builds" 2>/dev/null && (( $(date +%s) - start < versions_budget )); then
      cat "$builds_log"; exit 1  # the lane failed
    fi
    echo "e2e on Kubernetes $minor SKIPPED: its first (cold) build was not done after" \
      "${versions_budget}s of this script; the next run finishes it from Go's build cache"
    continue
  fi
  phase "e2e: build control plane $minor (cached)"
  bash e2e/cluster/build.sh --k8s "$minor"
  phase "e2e tests on Kubernetes $minor (kwok nodes, -m k8s_versions)"
  "$PY" -m pytest e2e --e2e -v --k8s "$minor" -m k8s_versions "${REAL_NODE_TESTS[@]/#/--ignore=}"
  if [ "$minor" = 1.38 ]; then
    phase "e2e tests on Kubernetes 1.38 with the EvictionRequest API on"
    REBALANCER_E2E_EVICTION_REQUESTS=1 \
      "$PY" -m pytest e2e/test_eviction_requests.py --e2e -v -s --k8s "$minor"
  fi
done
kill -- -"$builds" 2>/dev/null || true
wait "$builds" 2>/dev/null || true
grep -E 'done in|cached|KARPENTER_DIR=|SYFT=' "$builds_log" || true

phase "e2e: wait for the side track (Karpenter, then real nodes and the release)"
side_status=0
wait "$side" || side_status=$?
side=""
cat "$side_log"
if [ "$side_status" != 0 ]; then
  echo "the side track failed (exit $side_status): see its tests above"
  exit 1
fi

phase "tests done"
