#!/usr/bin/env bash
# Make sure a Prometheus Pushgateway binary is here for the --pushgateway e2e test:
# Debian's prometheus-pushgateway package (installed with apt-get when missing; needs root).
# The last line printed on success is always
#   PUSHGATEWAY=<absolute path>
set -euo pipefail
BIN=/usr/bin/prometheus-pushgateway
if [[ ! -x $BIN ]]; then
  command -v apt-get >/dev/null || { echo "install-pushgateway.sh: no apt-get: install prometheus-pushgateway" >&2; exit 1; }
  [[ $(id -u) == 0 ]] || { echo "install-pushgateway.sh: apt-get needs root: install prometheus-pushgateway" >&2; exit 1; }
  # The package's service is not started here: the test runs its own on 127.0.0.1.
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus-pushgateway; } >&2
fi
"$BIN" --version 2>&1 | head -1 >&2
echo "PUSHGATEWAY=$BIN"
