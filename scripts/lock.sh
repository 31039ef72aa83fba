#!/usr/bin/env bash
# Regenerate the lock files from pyproject.toml with pip-tools (pip-compile), hashes included:
#   requirements.lock        the runtime dependencies, every one pinned (the image installs it
#                            with --require-hashes --no-deps; CI installs it before the dev tools)
#   requirements-build.lock  the build backend the image builds the wheel with
# Run after changing [project].dependencies or [build-system].requires; tests/test_lock.py fails
# until the lock matches. pip-tools runs in a throwaway venv, so nothing here depends on it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/python" -m pip install -q --disable-pip-version-check "pip-tools==7.6.2"
common=(--quiet --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url
        --no-emit-find-links --no-emit-trusted-host --resolver=backtracking)
export CUSTOM_COMPILE_COMMAND="scripts/lock.sh"
"$tools/bin/pip-compile" "${common[@]}" --output-file=requirements.lock pyproject.toml
build_in=$(mktemp --suffix=.in)
python3 - >"$build_in" <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["build-system"]["requires"]))
PY
"$tools/bin/pip-compile" "${common[@]}" --output-file=requirements-build.lock "$build_in"
rm -f "$build_in"
# pip-compile names its temporary input file; name the source instead.
sed -i "s|# via -r /tmp/tmp[^ ]*\.in|# via [build-system].requires|" requirements-build.lock
echo "lock.sh: requirements.lock and requirements-build.lock written"
