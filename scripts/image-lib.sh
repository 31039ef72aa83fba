# shellcheck shell=bash
# What scripts/release.sh and scripts/push-image.sh build the image with, in one place: the
# version, the commit and the time every timestamp of the build is set to. Sourced, not run;
# each function reads the repository at $ROOT.

# The project's version (pyproject.toml), the image's tag.
image_version() {
  sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1
}

# The commit built (stamped into the image), or "unknown" outside a git clone.
image_commit() {
  git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown
}

# The commit's time, for SOURCE_DATE_EPOCH: no earlier than 1980, which a zip cannot hold.
image_epoch() {
  local t
  t="$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || true)"
  [[ "$t" =~ ^[0-9]+$ ]] || t=0
  (( t >= 315532800 )) || t=315532800
  echo "$t"
}

# The chart values that install REPOSITORY@DIGEST: a values file and the same as --set flags.
image_values() { # image_values REPOSITORY DIGEST
  printf 'image:\n  repository: %s\n  digest: "%s"\n' "$1" "$2"
}
image_set_flags() { # image_set_flags REPOSITORY DIGEST
  printf -- '--set image.repository=%s --set image.digest=%s\n' "$1" "$2"
}
