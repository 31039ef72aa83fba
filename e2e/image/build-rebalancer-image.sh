#!/usr/bin/env bash
# Build the rebalancer image from the repo's Dockerfile, without any registry, for the e2e
# tests on real nodes; cache it as a docker-archive tarball that `ctr images import` loads.
#
#   1. The base: the Dockerfile's default base (a public Python image) cannot be pulled here,
#      so a Debian rootfs with python3 + python3-venv + python-is-python3 is made with
#      mmdebstrap (from the host's own apt sources) and packed as an image by
#      e2e/image/pack.py. It is passed as the build arg PYTHON_IMAGE; the Dockerfile keeps its
#      public default for everyone else.
#   2. buildah (Debian) builds the unmodified Dockerfile: vfs storage, chroot isolation, no
#      daemon. Its RUN steps get the host's CA bundle and a pip.conf naming it as read-only
#      volumes (not part of the image), so pip reaches the package index the way the host does.
#   3. The image is written as a docker-archive tarball; the buildah storage is pruned.
#
# Idempotent and locked; cached by the content of Dockerfile, pyproject.toml, README.md and
# rebalancer/. The last three lines printed on success are
#   BASE_TAR=<absolute path of the base image's docker-archive>
#   IMAGE_REF=rebalancer.local/rebalancer:<version>-<hash>
#   IMAGE_TAR=<absolute path>
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE_ROOT="${REBALANCER_E2E_CACHE:-$HOME/.cache/rebalancer-e2e}"
OUT="$CACHE_ROOT/images"
SUITE=bookworm
BASE_PKGS=python3,python3-venv,python-is-python3,ca-certificates
BASE_KEY="$(printf '%s %s v1' "$SUITE" "$BASE_PKGS" | sha256sum | cut -c1-12)"
BASE_REF="rebalancer.local/e2e/python-base:$SUITE-$BASE_KEY"
BASE_TAR="$OUT/python-base-$SUITE-$BASE_KEY.tar"

src_key() {
  (
    cd "$ROOT"
    { echo "$BASE_KEY"; sha256sum Dockerfile .dockerignore pyproject.toml README.md
      sha256sum requirements.lock requirements-build.lock
      find rebalancer -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name BUILD_COMMIT -print0 \
        | sort -z | xargs -0 sha256sum
    } | sha256sum | cut -c1-12
  )
}
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)"
KEY="$(src_key)"
IMAGE_REF="rebalancer.local/rebalancer:$VERSION-$KEY"
IMAGE_TAR="$OUT/rebalancer-$VERSION-$KEY.tar"

done_msg() { echo "BASE_TAR=$BASE_TAR"; echo "IMAGE_REF=$IMAGE_REF"; echo "IMAGE_TAR=$IMAGE_TAR"; }
if [[ -s "$IMAGE_TAR" ]]; then
  echo "build-rebalancer-image.sh: cached: $IMAGE_REF"; done_msg; exit 0
fi

T0=$SECONDS
phase_start=$SECONDS
phase() { echo "build-rebalancer-image.sh: [$(( SECONDS - T0 ))s] $*"; phase_start=$SECONDS; }
phase_done() { echo "build-rebalancer-image.sh: [$(( SECONDS - T0 ))s]   done in $(( SECONDS - phase_start ))s: $*"; }

if ! command -v buildah >/dev/null || ! command -v mmdebstrap >/dev/null; then
  phase "apt-get install buildah mmdebstrap"
  [[ $(id -u) == 0 ]] || { echo "build-rebalancer-image.sh: need root to install buildah mmdebstrap" >&2; exit 1; }
  exec 8>/var/lib/apt/rebalancer-e2e.lock
  flock -w 1800 8
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends buildah mmdebstrap >/dev/null
  exec 8>&-
  phase_done "apt-get"
fi

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock -w 3600 9 || { echo "build-rebalancer-image.sh: could not take $OUT/.lock" >&2; exit 1; }
if [[ -s "$IMAGE_TAR" ]]; then
  echo "build-rebalancer-image.sh: cached: $IMAGE_REF (built by a concurrent run)"; done_msg; exit 0
fi
TMP="$(mktemp -d "$OUT/tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
STORE="$OUT/buildah"
B=(buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs)

if [[ ! -s "$BASE_TAR" ]]; then
  phase "base image: mmdebstrap $SUITE + $BASE_PKGS"
  sources=()
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [[ -s "$f" ]] && grep -q "^[^#]*$SUITE" "$f"; then sources=("$f"); break; fi
  done
  mmdebstrap --quiet --variant=minbase --include="$BASE_PKGS" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$SUITE" "$TMP/rootfs.tar" "${sources[@]}"
  (cd "$ROOT" && python3 - "$TMP/rootfs.tar" "$TMP/base.tar" "$BASE_REF" <<'PY'
import sys
from pathlib import Path
from e2e.image.pack import write_docker_archive
rootfs, out, ref = sys.argv[1:]
env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
write_docker_archive(Path(out), [ref], [Path(rootfs).read_bytes()], {"Env": env, "Cmd": ["python3"]})
PY
  )
  mv -f "$TMP/base.tar" "$BASE_TAR"
  rm -f "$TMP/rootfs.tar"
  phase_done "base image"
fi

phase "buildah bud (Dockerfile, PYTHON_IMAGE=$BASE_REF)"
"${B[@]}" rmi --all --force >/dev/null 2>&1 || true
"${B[@]}" pull -q "docker-archive:$BASE_TAR" >/dev/null
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$TMP/pip.conf"
# Built twice from scratch with every timestamp set to SOURCE_DATE_EPOCH (default 1980-01-01,
# the earliest a wheel's zip holds: the cached e2e image does not depend on the commit): the
# two image ids must be equal, or the Dockerfile has lost its reproducibility and the build fails.
epoch="${SOURCE_DATE_EPOCH:-315532800}"
bud() {
  "${B[@]}" bud --quiet --isolation chroot --layers=false --no-cache --timestamp "$epoch" \
    -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
    -v "$TMP/pip.conf:/etc/pip.conf:ro" --iidfile "$1" \
    --build-arg "PYTHON_IMAGE=$BASE_REF" --build-arg "REBALANCER_COMMIT=${REBALANCER_COMMIT:-unknown}" --build-arg "SOURCE_DATE_EPOCH=$epoch" \
    -t "$IMAGE_REF" -f "$ROOT/Dockerfile" "$ROOT" >"$TMP/bud.log" 2>&1 \
    || { cat "$TMP/bud.log" >&2; exit 1; }
}
bud "$TMP/iid.1"
"${B[@]}" rmi --force "$IMAGE_REF" >/dev/null
bud "$TMP/iid.2"
if ! cmp -s "$TMP/iid.1" "$TMP/iid.2"; then
  echo "build-rebalancer-image.sh: NOT REPRODUCIBLE: two builds gave $(cat "$TMP/iid.1") and $(cat "$TMP/iid.2")" >&2
  exit 1
fi
phase_done "two builds, one image id: $(cat "$TMP/iid.2")"
"${B[@]}" push -q "$IMAGE_REF" "docker-archive:$TMP/image.tar:$IMAGE_REF" >/dev/null
"${B[@]}" rmi --all --force >/dev/null 2>&1 || true
mv -f "$TMP/image.tar" "$IMAGE_TAR"
phase_done "image $IMAGE_REF"
# Keep the newest two images only.
ls -1t "$OUT"/rebalancer-*.tar 2>/dev/null | tail -n +3 | xargs -r rm -f
echo "build-rebalancer-image.sh: [$(( SECONDS - T0 ))s] $(du -h "$IMAGE_TAR" | cut -f1) $IMAGE_TAR"
done_msg
