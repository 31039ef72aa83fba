"""The pre-commit hooks run exactly the lint commands of scripts/test.sh."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _lint_commands() -> list[str]:
    """The tool commands of the "lint" phase of scripts/test.sh (its first block of lines),
    with "$BIN/" as ".venv/bin/"."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    block = script.split('phase "lint"\n', 1)[1].split("\n\n", 1)[0]
    return [re.sub(r'^"\$BIN/([^"]+)"', r".venv/bin/\1", line) for line in block.splitlines()]


def test_hooks_match_the_lint_phase() -> None:
    """Every lint command is a local hook (and nothing else is), so a commit checks what CI
    checks, with no hook repository fetched."""
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    entries = [hook["entry"] for hook in config["repos"][0]["hooks"]]
    assert entries == _lint_commands()
    assert len(entries) >= 4
