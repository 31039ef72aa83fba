#!/usr/bin/env bash
# Build the krew archives of `kubectl rebalance` and their manifest:
#   deploy/krew/package.sh BASE_URL [OUT_DIR] [HOMEPAGE]
# builds OUT_DIR (default dist/plugin)/<os>-<arch>/kubectl-rebalance for every krew platform
# (scripts/build_plugin.py; PLATFORMS="linux/amd64 ..." limits them) and writes OUT_DIR/krew/:
# kubectl-rebalance-<version>-<os>-<arch>.tar.gz (reproducible: same file, same bytes) and
# rebalance.yaml with uri BASE_URL/<archive>, each archive's sha256 and homepage HOMEPAGE
# (default BASE_URL).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE_URL="${1:?usage: $0 BASE_URL [OUT_DIR] [HOMEPAGE]}"
OUT="${2:-$ROOT/dist/plugin}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
args=()
for p in ${PLATFORMS:-}; do args+=(--platform "$p"); done
"$PY" "$ROOT/scripts/build_plugin.py" -o "$OUT" "${args[@]}" --krew "$BASE_URL" --homepage "${3:-$BASE_URL}"
