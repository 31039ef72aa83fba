"""Where the packaging tools (helm, promtool) built by scripts/build-tools.sh are."""

from __future__ import annotations

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


def tool(name: str) -> str:
    """The built tool, else one on PATH; skips the test, saying how to build it, if neither."""
    built = bin_dir() / name
    if built.is_file():
        return str(built)
    found = shutil.which(name)
    if found:
        return found
    pytest.skip(
        f"{name} is not built: run `bash scripts/build-tools.sh` (scripts/test.sh and .ci/run "
        "build it before the unit tests, so CI never skips this)"
    )


def run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a tool; never raises on its exit code."""
    return subprocess.run(
        list(argv), capture_output=True, text=True, check=False, timeout=timeout, cwd=ROOT
    )
