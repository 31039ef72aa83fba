"""This build's identity: version, commit and Python (``rebalancer version`` and the
``rebalancer_build_info`` metric, so a dashboard and the command agree).

The commit comes from ``rebalancer/BUILD_COMMIT``, which the image build writes from its
``REBALANCER_COMMIT`` argument (the file is not in the repository); a source checkout asks
git; otherwise it is ``unknown``.
"""

from __future__ import annotations

import platform
import subprocess
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Final

from rebalancer import __version__

COMMIT_FILE: Final = "BUILD_COMMIT"
UNKNOWN: Final = "unknown"


@dataclass(frozen=True, slots=True)
class BuildInfo:
    """What this build of rebalancer is."""

    version: str
    commit: str
    python: str


@cache
def build_info() -> BuildInfo:
    """This build's version, commit and Python version (read once per process)."""
    return BuildInfo(version=__version__, commit=_commit(), python=platform.python_version())


def _commit() -> str:
    try:
        text = resources.files("rebalancer").joinpath(COMMIT_FILE).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        text = ""
    commit = text.strip()
    if _is_commit(commit):
        return commit
    return _git_commit(Path(__file__).resolve().parents[2]) or UNKNOWN


def _git_commit(top: Path) -> str | None:
    """The checked-out commit of a source checkout at ``top``, or None."""
    if not (top / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(top), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and _is_commit(commit) else None


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
