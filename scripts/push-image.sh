#!/usr/bin/env bash
# Build the rebalancer image from the Dockerfile and push it to your registry, for the chart.
#
#   scripts/push-image.sh --registry HOST[:PORT][/PATH] [--tool docker|podman|buildah]
#                         [--plain-http] [--values FILE]
#                         [--base IMAGE | --base-archive TAR] [-- BUILD-OPTION...]
#
# Builds with docker (when its daemon answers), else podman, else buildah, or with the one
# --tool names; pushes HOST[:PORT][/PATH]/rebalancer:<version>; prints the chart values that
# install it by digest, as YAML (written to FILE too with --values, for `helm install -f FILE`)
# and as --set flags. The last two lines printed are IMAGE_REPOSITORY=... and IMAGE_DIGEST=...
#   --plain-http      the registry speaks HTTP (a local one). docker takes this from its
#                     daemon's insecure-registries (127.0.0.1 and localhost are so already).
#   --base, --base-archive   another base image than the Dockerfile's (its PYTHON_IMAGE): by
#                     name, or a docker-archive tarball of one.
#   -- BUILD-OPTION   passed to the tool's build as they are (a proxy's --build-arg, a -v).
# Every timestamp of the build is the commit's and the image names the commit, as in
# scripts/release.sh. Log in first where the registry asks for it (docker/podman/buildah login).
# Exit 0 pushed; 1 no build tool, the registry unreachable, the build failed or the push was
# refused; 2 bad arguments.
set -euo pipefail
ROOT="$(cd "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/.." && pwd)"
# shellcheck source=scripts/image-lib.sh
source "$ROOT/scripts/image-lib.sh"

TOOLS=(docker podman buildah)
REGISTRY=""
TOOL=""
PLAIN_HTTP=0
VALUES=""
BASE=""
BASE_ARCHIVE=""
EXTRA=()
usage_error() { echo "push-image.sh: $*" >&2; exit 2; }
fail() { echo "push-image.sh: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || usage_error "$1 needs a value (see --help)"; }
while (($#)); do
  case "$1" in
    --registry) need_value "$@"; REGISTRY="$2"; shift 2 ;;
    --tool) need_value "$@"; TOOL="$2"; shift 2 ;;
    --plain-http) PLAIN_HTTP=1; shift ;;
    --values) need_value "$@"; VALUES="$2"; shift 2 ;;
    --base) need_value "$@"; BASE="$2"; shift 2 ;;
    --base-archive) need_value "$@"; BASE_ARCHIVE="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) usage_error "unknown argument $1 (see --help)" ;;
  esac
done

[[ -n "$REGISTRY" ]] || usage_error "--registry is required: the registry to push to, HOST[:PORT][/PATH]"
if [[ "$REGISTRY" == *://* || "$REGISTRY" == */ || "$REGISTRY" == /* || "$REGISTRY" == *" "* ]]; then
  usage_error "--registry $REGISTRY: give HOST[:PORT][/PATH], without a scheme or a trailing /"
fi
if [[ -n "$TOOL" && " ${TOOLS[*]} " != *" $TOOL "* ]]; then
  usage_error "--tool $TOOL: one of ${TOOLS[*]}"
fi
[[ -z "$BASE" || -z "$BASE_ARCHIVE" ]] || usage_error "--base and --base-archive: give one"
if [[ -n "$BASE_ARCHIVE" ]]; then
  [[ -f "$BASE_ARCHIVE" ]] || usage_error "--base-archive $BASE_ARCHIVE: no such file"
  BASE_ARCHIVE="$(realpath "$BASE_ARCHIVE")"
fi
if [[ -n "$VALUES" ]]; then
  [[ -d "$(dirname "$VALUES")" ]] || usage_error "--values $VALUES: no directory $(dirname "$VALUES")"
fi

# docker counts only when its daemon answers: the client alone builds nothing.
usable() { # usable TOOL: the tool is on PATH (and for docker, its daemon answers)
  command -v "$1" >/dev/null || return 1
  [[ "$1" != docker ]] || docker info >/dev/null 2>&1
}
if [[ -n "$TOOL" ]]; then
  command -v "$TOOL" >/dev/null || fail "--tool $TOOL: $TOOL is not on PATH"
  usable "$TOOL" || fail "--tool docker: the docker daemon does not answer (docker info)"
else
  skipped=""
  for t in "${TOOLS[@]}"; do
    if usable "$t"; then TOOL="$t"; break; fi
    command -v "$t" >/dev/null && skipped=" (docker is on PATH but its daemon does not answer: docker info)"
  done
  [[ -n "$TOOL" ]] || fail "no image build tool found: looked for docker, podman and buildah on PATH$skipped"
fi

HOST="${REGISTRY%%/*}"
scheme=https; [[ $PLAIN_HTTP == 1 ]] && scheme=http
# The registry's API root answers (200, or 401 before a login) when the registry is there.
if command -v curl >/dev/null; then
  rc=0
  why="$(curl -sS -o /dev/null --connect-timeout 10 --max-time 20 "$scheme://$HOST/v2/" 2>&1)" || rc=$?
  case $rc in
    0) ;;
    6|7|28) fail "registry $HOST unreachable ($scheme://$HOST/v2/): ${why#curl: }" ;;
    *) echo "push-image.sh: $scheme://$HOST/v2/ did not answer cleanly (${why#curl: }); pushing anyway" >&2 ;;
  esac
fi

VERSION="$(image_version)"
COMMIT="$(image_commit)"
EPOCH="$(image_epoch)"
REPOSITORY="$REGISTRY/rebalancer"
REF="$REPOSITORY:$VERSION"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
say() { echo "push-image.sh: $*" >&2; }

# buildah builds in a storage of its own, removed afterwards (the image lives in the registry).
T=("$TOOL")
[[ $TOOL == buildah ]] && T=(buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)
if [[ -n "$BASE_ARCHIVE" ]]; then
  if [[ $TOOL == buildah ]]; then
    BASE="$("${T[@]}" pull -q "docker-archive:$BASE_ARCHIVE")" || fail "could not load $BASE_ARCHIVE"
  else
    loaded="$("${T[@]}" load -i "$BASE_ARCHIVE")" || fail "could not load $BASE_ARCHIVE"
    BASE="$(sed -n 's/^Loaded image[^:]*: *//p' <<<"$loaded" | head -1)"
    [[ -n "$BASE" ]] || fail "$TOOL load -i $BASE_ARCHIVE named no image: $loaded"
  fi
fi

build=(--build-arg "REBALANCER_COMMIT=$COMMIT" --build-arg "SOURCE_DATE_EPOCH=$EPOCH")
[[ -n "$BASE" ]] && build+=(--build-arg "PYTHON_IMAGE=$BASE")
case $TOOL in
  docker) build=(build "${build[@]}") ;;
  podman) build=(build --timestamp "$EPOCH" "${build[@]}") ;;
  buildah) build=(bud --isolation chroot --layers=false --timestamp "$EPOCH" "${build[@]}") ;;
esac
say "building $REF with $TOOL (commit $COMMIT)"
"${T[@]}" "${build[@]}" "${EXTRA[@]}" -t "$REF" -f "$ROOT/Dockerfile" "$ROOT" >"$WORK/build.log" 2>&1 \
  || { tail -n 40 "$WORK/build.log" >&2; fail "$TOOL could not build the image (the lines above are the end of its log)"; }

say "pushing $REF"
tls=(); [[ $PLAIN_HTTP == 1 ]] && tls=(--tls-verify=false)
case $TOOL in
  docker) push=(push "$REF") ;;
  podman) push=(push "${tls[@]}" --digestfile "$WORK/digest" "$REF") ;;
  buildah) push=(push "${tls[@]}" --digestfile "$WORK/digest" "$REF" "docker://$REF") ;;
esac
if ! "${T[@]}" "${push[@]}" >"$WORK/push.log" 2>&1; then
  tail -n 20 "$WORK/push.log" >&2
  fail "$REGISTRY refused the push of $REF (log in with $TOOL login $HOST if it needs credentials)"
fi
if [[ $TOOL == docker ]]; then
  # docker push ends with "<tag>: digest: sha256:... size: N"
  sed -n 's/.*digest: \(sha256:[0-9a-f]\{64\}\).*/\1/p' "$WORK/push.log" | tail -1 >"$WORK/digest"
fi
DIGEST="$(cat "$WORK/digest" 2>/dev/null || true)"
[[ "$DIGEST" =~ ^sha256:[0-9a-f]{64}$ ]] || fail "$TOOL pushed $REF but gave no digest: $(tail -n 5 "$WORK/push.log")"

if [[ -n "$VALUES" ]]; then
  { echo "# The rebalancer image scripts/push-image.sh pushed, pinned by digest."
    image_values "$REPOSITORY" "$DIGEST"; } >"$VALUES"
fi
echo "Pushed $REF ($DIGEST). Install it by digest with these chart values${VALUES:+ (written to $VALUES)}:"
echo
image_values "$REPOSITORY" "$DIGEST"
echo
echo "or as flags:"
echo
image_set_flags "$REPOSITORY" "$DIGEST"
echo
echo "IMAGE_REPOSITORY=$REPOSITORY"
echo "IMAGE_DIGEST=$DIGEST"
