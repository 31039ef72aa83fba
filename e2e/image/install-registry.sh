#!/usr/bin/env bash
# Make sure an OCI registry binary is here for the release e2e (e2e/test_release.py): Debian's
# docker-registry package (the CNCF distribution registry; installed with apt-get when
# missing, needs root). Its service is not started: the test runs its own on 127.0.0.1.
# The last line printed on success is always
#   REGISTRY=<absolute path>
set -euo pipefail
BIN=/usr/bin/docker-registry
if [[ ! -x $BIN ]]; then
  command -v apt-get >/dev/null || { echo "install-registry.sh: no apt-get: install docker-registry" >&2; exit 1; }
  [[ $(id -u) == 0 ]] || { echo "install-registry.sh: apt-get needs root: install docker-registry" >&2; exit 1; }
  exec 8>/var/lib/apt/rebalancer-e2e.lock
  flock -w 1800 8
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker-registry; } >&2
  # The package starts its own service on :5000; this project runs its own registries only.
  { systemctl stop docker-registry 2>/dev/null || service docker-registry stop 2>/dev/null || true; } >&2
  pkill -x docker-registry 2>/dev/null || true
fi
echo "REGISTRY=$BIN"
