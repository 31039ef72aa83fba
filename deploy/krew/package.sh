#!/usr/bin/env bash
# Build the krew archive of `kubectl rebalance` and its manifest:
#   deploy/krew/package.sh BASE_URL [OUT_DIR]
# writes OUT_DIR (default dist/krew)/kubectl-rebalance-<version>.tar.gz and rebalance.yaml, the
# manifest of deploy/krew/rebalance.yaml with uri BASE_URL/<archive> and the archive's sha256.
# The archive is reproducible: same files, same bytes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/deploy/krew"
BASE_URL="${1:?usage: $0 BASE_URL [OUT_DIR]}"
OUT="${2:-$ROOT/dist/krew}"
VERSION="$(awk '$1 == "version:" {print $2; exit}' "$HERE/rebalance.yaml")"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "package.sh: bad spec.version: $VERSION" >&2; exit 2; }
mkdir -p "$OUT"
ARCHIVE="kubectl-rebalance-$VERSION.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --mode='u+rwX,go+rX,go-w' \
  -C "$HERE" -cf - kubectl-rebalance | gzip -n >"$OUT/$ARCHIVE"
SHA="$(sha256sum "$OUT/$ARCHIVE" | cut -d' ' -f1)"
sed -e "s|@URI@|${BASE_URL%/}/$ARCHIVE|" -e "s|@SHA256@|$SHA|" "$HERE/rebalance.yaml" >"$OUT/rebalance.yaml"
echo "$OUT/$ARCHIVE sha256 $SHA"
echo "$OUT/rebalance.yaml"
