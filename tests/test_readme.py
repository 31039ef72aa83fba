"""README's sample plan is exactly what the command prints for the bundled example."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rebalancer.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "$ rebalancer plan --snapshot examples/skewed-cluster.yaml\n"


def test_readme_sample_plan_is_current(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block under 'Reading a plan' equals a fresh plan of examples/skewed-cluster.yaml."""
    monkeypatch.delenv("REBALANCER_POLICY", raising=False)
    readme = (ROOT / "README.md").read_text()
    start = readme.index(COMMAND) + len(COMMAND)
    sample = readme[start : readme.index("```", start)]
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--snapshot", os.path.join("examples", "skewed-cluster.yaml")]) == 0
    assert capsys.readouterr().out == sample
