# The cached build every Go build script shares (e2e/cluster/build.sh, build-nodes.sh,
# build-karpenter.sh, scripts/build-tools.sh, build-gotool.sh, build-krew.sh). Sourced, not run:
#
#   source "$ROOT/scripts/lib/gobuild.sh"
#   gb_start "build-tools.sh" "$KEY" "$OUT" "BIN_DIR=$BIN" "$FORCE"
#   all_present() { ...; }        # the script's own test that everything is in $OUT
#   gb_cached_or_lock            # the "cached" line and the last line, exit 0; or the lock
#   gb_go_env [TOOLCHAIN]        # go on PATH, and the build environment
#   gb_timer                     # where the timings count from (also set by gb_start)
#   phase "build x"; ...; phase_done "x"
#   gb_tmp                       # $TMP under $OUT, removed on exit
#   ...; echo "$GB_RESULT"       # the last line callers read
#
# The cache key (the directory $OUT, named by the versions built) is the script's: a version
# bump builds into a new directory, and an unchanged one keeps its cache.

# modver DIR MODULE: the version of MODULE that DIR/go.mod requires.
gb_modver() {
  awk -v m="$2" '($1 == "require" && $2 == m) {print $3; exit} ($1 == m) {print $2; exit}' "$1/go.mod"
}

# gb_start NAME KEY OUT RESULT [FORCE]: the name lines start with, what the cache holds (KEY,
# in directory OUT), the last line printed on success, and 1 to rebuild whatever is cached.
gb_start() {
  GB_NAME="$1" GB_KEY="$2" GB_OUT="$3" GB_RESULT="$4" GB_FORCE="${5:-0}"
  gb_timer
}

# gb_timer: the timings of phase, phase_done and gb_elapsed count from now.
gb_timer() { GB_T0=$SECONDS GB_PHASE=$SECONDS; }

# gb_cached NOTE: when all_present (and no --force), "NAME: cached: KEY (NOTE)", the result
# line, and exit 0.
gb_cached() {
  if [[ $GB_FORCE == 0 ]] && all_present; then
    echo "$GB_NAME: cached: $GB_KEY ($1)"
    echo "$GB_RESULT"
    exit 0
  fi
}

# gb_cached_or_lock: done when cached; else take OUT/.lock (one build at a time) and look
# again, as another run may have finished the build while this one waited.
gb_cached_or_lock() {
  gb_cached "nothing to do"
  mkdir -p "$GB_OUT"
  exec 9>"$GB_OUT/.lock"
  if ! flock -w 3600 9; then
    echo "$GB_NAME: could not take $GB_OUT/.lock within 3600 s" >&2
    exit 1
  fi
  gb_cached "built by a concurrent run"
}

# gb_go_env [TOOLCHAIN]: go on PATH, and static reproducible builds from the wrapper modules
# only (GOTOOLCHAIN local unless given).
gb_go_env() {
  command -v go >/dev/null || { echo "$GB_NAME: go not found on PATH" >&2; exit 1; }
  export GOWORK=off GOTOOLCHAIN="${1:-local}" CGO_ENABLED=0
  export GOFLAGS="-mod=readonly -buildvcs=false"
}

# phase WHAT / phase_done WHAT: one timed line as a step starts, one as it ends.
phase() { echo "$GB_NAME: [$(( SECONDS - GB_T0 ))s] $*"; GB_PHASE=$SECONDS; }
phase_done() { echo "$GB_NAME: [$(( SECONDS - GB_T0 ))s]   done in $(( SECONDS - GB_PHASE ))s: $*"; }

# gb_elapsed: seconds since gb_timer.
gb_elapsed() { echo "$(( SECONDS - GB_T0 ))"; }

# gb_tmp: TMP, a directory under OUT (same file system: binaries are moved in whole), removed
# on exit.
gb_tmp() {
  TMP="$(mktemp -d "$GB_OUT/tmp.XXXXXX")"
  trap 'rm -rf "$TMP"' EXIT
}
