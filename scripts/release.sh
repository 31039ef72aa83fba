#!/usr/bin/env bash
# One command from a clone to a release: everything a release ships, into one folder.
#
#   scripts/release.sh [--out DIR] [--base IMAGE | --base-archive TAR] [--registry HOST[:PORT]]
#                      [--plain-http] [--skip-plugin]
#
# writes into DIR (default dist/release-<version>):
#   rebalancer-<version>.oci.tar          the image (OCI archive), reproducible: built twice with
#                                         every timestamp at the commit's time, one image id
#   rebalancer-<version>-py3-none-any.whl, rebalancer-<version>.tar.gz   the wheel and sdist
#   rebalancer-<version>.tgz              the Helm chart
#   kubectl-rebalance-linux-amd64         the single-file kubectl plugin (--skip-plugin: none)
#   sbom.cdx.json                         CycloneDX SBOM of the image (its Python and OS packages)
#   IMAGE_ID, SHA256SUMS                  the image id, and the checksums of every file above
# With --registry it then pushes the image and the chart (OCI) there and prints the exact
# `helm install` line, the image pinned by digest; the chart it packages then has that image,
# by digest, as its default (values.yaml's image.repository and image.digest). --plain-http: the registry speaks HTTP
# (a local one). The base image is the Dockerfile's (pinned by digest) unless --base names
# another, or --base-archive a docker-archive tarball of one (a registry that cannot be reached
# from here, as in the e2e: e2e/image/build-rebalancer-image.sh makes such a base).
# Needs buildah (Debian's package; installed when missing and root), helm (scripts/build-tools.sh)
# and syft (scripts/build-gotool.sh syft); both are built from Go modules when missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
# shellcheck source=scripts/image-lib.sh
source "$ROOT/scripts/image-lib.sh"

VERSION="$(image_version)"
OUT="$ROOT/dist/release-$VERSION"
BASE=""
BASE_ARCHIVE=""
REGISTRY=""
PLAIN_HTTP=0
PLUGIN=1
while (($#)); do
  case "$1" in
    --out) OUT="$(realpath -m "$2")"; shift 2 ;;
    --base) BASE="$2"; shift 2 ;;
    --base-archive) BASE_ARCHIVE="$(realpath "$2")"; shift 2 ;;
    --registry) REGISTRY="$2"; shift 2 ;;
    --plain-http) PLAIN_HTTP=1; shift ;;
    --skip-plugin) PLUGIN=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

COMMIT="$(git rev-parse HEAD)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "release.sh: the work tree has uncommitted changes: a release is built from a commit" >&2
  exit 2
fi
# Every timestamp of the build is the commit's (no earlier than 1980, which a zip cannot hold).
SOURCE_DATE_EPOCH="$(image_epoch)"
export SOURCE_DATE_EPOCH
T0=$SECONDS
say() { echo "release.sh: [$(( SECONDS - T0 ))s] $*"; }

TOOLS="$(bash scripts/build-tools.sh --bin-dir)"
HELM="$TOOLS/helm"
SYFT="$(bash scripts/build-gotool.sh syft | sed -n 's/^SYFT=//p')"
[[ -x "$HELM" ]] || HELM="$(bash scripts/build-tools.sh | sed -n 's/^BIN_DIR=//p')/helm"
if ! command -v buildah >/dev/null; then
  [[ $(id -u) == 0 ]] || { echo "release.sh: buildah is missing (apt-get install buildah)" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah >/dev/null
fi

rm -rf "$OUT"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
B=(buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)
if [[ -n "$BASE_ARCHIVE" ]]; then
  BASE="$("${B[@]}" pull -q "docker-archive:$BASE_ARCHIVE")"
fi
base_arg=()
[[ -n "$BASE" ]] && base_arg=(--build-arg "PYTHON_IMAGE=$BASE")
IMAGE="rebalancer:$VERSION"

build_image() { # build_image IIDFILE
  "${B[@]}" bud --quiet --isolation chroot --layers=false --no-cache \
    --timestamp "$SOURCE_DATE_EPOCH" --iidfile "$1" \
    -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
    "${base_arg[@]}" --build-arg "REBALANCER_COMMIT=$COMMIT" --build-arg "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH" \
    -t "$IMAGE" -f Dockerfile . >"$WORK/bud.log" 2>&1 || { cat "$WORK/bud.log" >&2; exit 1; }
}
say "image: two builds of $COMMIT (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)"
build_image "$WORK/iid.1"
"${B[@]}" rmi --force "$IMAGE" >/dev/null
build_image "$WORK/iid.2"
if ! cmp -s "$WORK/iid.1" "$WORK/iid.2"; then
  echo "release.sh: NOT REPRODUCIBLE: $(cat "$WORK/iid.1") then $(cat "$WORK/iid.2")" >&2
  exit 1
fi
cp "$WORK/iid.2" "$OUT/IMAGE_ID"
say "image id $(cat "$OUT/IMAGE_ID") from both builds"
"${B[@]}" push -q "$IMAGE" "oci-archive:$OUT/rebalancer-$VERSION.oci.tar:$IMAGE" >/dev/null

say "SBOM (syft, CycloneDX)"
SYFT_CHECK_FOR_APP_UPDATE=false "$SYFT" scan -q "oci-archive:$OUT/rebalancer-$VERSION.oci.tar" \
  -o "cyclonedx-json=$OUT/sbom.cdx.json"

say "wheel and sdist"
"$PY" -m build --sdist --wheel --outdir "$OUT" . >"$WORK/build.log" 2>&1 \
  || { cat "$WORK/build.log" >&2; exit 1; }

tls=(); helm_http=()
if [[ -n "$REGISTRY" ]]; then
  if [[ $PLAIN_HTTP == 1 ]]; then tls=(--tls-verify=false); helm_http=(--plain-http); fi
  say "push image to $REGISTRY"
  "${B[@]}" push -q "${tls[@]}" --digestfile "$WORK/digest" "$IMAGE" \
    "docker://$REGISTRY/rebalancer:$VERSION" >/dev/null
  DIGEST="$(cat "$WORK/digest")"
  echo "$DIGEST" >"$OUT/IMAGE_DIGEST"
fi

say "chart"
chart=charts/rebalancer
if [[ -n "$REGISTRY" ]]; then
  # The released chart's default image is the one just pushed, pinned by its digest.
  cp -r charts/rebalancer "$WORK/chart"
  chart="$WORK/chart"
  sed -i -e "s|^  repository: rebalancer .*|  repository: $REGISTRY/rebalancer|" \
    -e "s|^  digest: \"\" .*|  digest: \"$DIGEST\"|" "$chart/values.yaml"
  grep -q "^  digest: \"$DIGEST\"" "$chart/values.yaml" \
    || { echo "release.sh: could not set the chart's default image" >&2; exit 1; }
fi
"$HELM" package "$chart" --version "$VERSION" --app-version "$VERSION" \
  --destination "$OUT" >/dev/null

if [[ $PLUGIN == 1 ]]; then
  say "kubectl plugin (linux/amd64)"
  "$PY" scripts/build_plugin.py --platform linux/amd64 -o "$WORK/plugin" >"$WORK/plugin.log" 2>&1 \
    || { cat "$WORK/plugin.log" >&2; exit 1; }
  cp "$WORK/plugin/linux-amd64/kubectl-rebalance" "$OUT/kubectl-rebalance-linux-amd64"
fi

(cd "$OUT" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | sort \
  | xargs sha256sum >SHA256SUMS)
say "wrote $OUT:"
(cd "$OUT" && ls -1)

if [[ -n "$REGISTRY" ]]; then
  say "push chart to $REGISTRY"
  "$HELM" push "${helm_http[@]}" "$OUT/rebalancer-$VERSION.tgz" "oci://$REGISTRY/charts" >/dev/null
  plain=""; [[ $PLAIN_HTTP == 1 ]] && plain=" --plain-http"
  echo "HELM_INSTALL=helm install rebalancer oci://$REGISTRY/charts/rebalancer --version $VERSION$plain" \
    "--set image.repository=$REGISTRY/rebalancer --set image.digest=$DIGEST"
fi
