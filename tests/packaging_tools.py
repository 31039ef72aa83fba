"""Where the packaging tools (helm, promtool) built by scripts/build-tools.sh are."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_TOOLS = ROOT / "scripts" / "build-tools.sh"


def bin_dir() -> Path:
    """The cache directory build-tools.sh builds into (whether built or not)."""
    out = subprocess.run(
        ["bash", str(BUILD_TOOLS), "--bin-dir"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    return Path(out)


BUILDING_ENV = "REBALANCER_TOOLS_BUILDING"
"""Set (to 1) by scripts/test.sh while its background lane builds the tools beside the unit
tests: a test that needs one not built yet then waits for that build (the build scripts are
locked: a second call waits for the first, or finds the tool cached) instead of skipping."""


def wait_for_build(script: str, *args: str) -> None:
    """Under :data:`BUILDING_ENV`, run ``scripts/<script> args`` (it waits for the lane's build,
    or builds); otherwise nothing."""
    if os.environ.get(BUILDING_ENV) == "1":
        subprocess.run(
            ["bash", str(ROOT / "scripts" / script), *args],
            capture_output=True,
            check=False,
            timeout=3600,
        )


def tool(name: str) -> str:
    """The built tool, else one on PATH; skips the test, saying how to build it, if neither."""
    built = bin_dir() / name
    if not built.is_file():
        wait_for_build("build-tools.sh")
    if built.is_file():
        return str(built)
    found = shutil.which(name)
    if found:
        return found
    pytest.skip(
        f"{name} is not built: run `bash scripts/build-tools.sh` (scripts/test.sh and .ci/run "
        "build it beside the unit tests, which wait for it, so CI never skips this)"
    )


def run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a tool; never raises on its exit code."""
    return subprocess.run(
        list(argv), capture_output=True, text=True, check=False, timeout=timeout, cwd=ROOT
    )
