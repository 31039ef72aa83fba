#!/usr/bin/env bash
# Build (once) one of the Go tools the release and its checks use, from its wrapper module
# e2e/cluster/gomod/NAME, into ${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}/tools-NAME-<version>/bin/:
#   syft        the SBOM generator scripts/release.sh and the release e2e use
#               (github.com/anchore/syft/cmd/syft)
#   actionlint  the linter tests/test_release_workflow.py runs on .github/workflows/release.yml
#               (github.com/rhysd/actionlint/cmd/actionlint)
# Idempotent and locked, like scripts/build-tools.sh. The last line printed on success is
#   SYFT=<absolute path>   or   ACTIONLINT=<absolute path>
# Usage: scripts/build-gotool.sh NAME [--path]   (--path: only print NAME=..., no build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/gobuild.sh
source "$ROOT/scripts/lib/gobuild.sh"
NAME="${1:-}"
case "$NAME" in
  syft)
    UPSTREAM=github.com/anchore/syft
    PKG=github.com/anchore/syft/cmd/syft ;;
  actionlint)
    UPSTREAM=github.com/rhysd/actionlint
    PKG=github.com/rhysd/actionlint/cmd/actionlint ;;
  *)
    echo "build-gotool.sh: usage: scripts/build-gotool.sh syft|actionlint [--path] (got ${NAME:-nothing})" >&2
    exit 2 ;;
esac
ME="build-gotool.sh $NAME"
VAR="$(tr '[:lower:]' '[:upper:]' <<<"$NAME")"
MOD="$ROOT/e2e/cluster/gomod/$NAME"
VERSION="$(awk -v m="$UPSTREAM" '($1 == m) {print $2; exit}' "$MOD/go.mod")"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "$ME: no $NAME version in $MOD/go.mod" >&2; exit 2; }
CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
OUT="$CACHE_ROOT/tools-$NAME-$VERSION"
BIN="$OUT/bin/$NAME"
if [[ "${2:-}" == "--path" ]]; then echo "$VAR=$BIN"; exit 0; fi
all_present() { [[ -x "$BIN" ]]; }
gb_start "$ME" "$NAME $VERSION" "$OUT" "$VAR=$BIN"
gb_cached_or_lock
mkdir -p "$OUT/bin"
gb_go_env
gb_timer
echo "$ME: $(go version); building $NAME $VERSION"
case "$NAME" in  # each tool's own variable for the version it reports
  syft) ld="-s -w -X main.version=${VERSION#v}" ;;
  actionlint) ld="-s -w -X github.com/rhysd/actionlint.version=${VERSION}" ;;
esac
(cd "$MOD" && go mod download && go build -trimpath -ldflags "$ld" -o "$OUT/bin/$NAME.tmp" "$PKG")
mv -f "$OUT/bin/$NAME.tmp" "$BIN"
echo "$ME: [$(gb_elapsed)s] done: $NAME $VERSION"
echo "$GB_RESULT"
