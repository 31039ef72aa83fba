"""The release workflow (.github/workflows/release.yml) passes actionlint and runs the release
the way scripts/release.sh is tested here; it cannot run on this machine, so it is checked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.packaging_tools import wait_for_build

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def _actionlint() -> str:
    wait_for_build("build-gotool.sh", "actionlint")
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-gotool.sh"), "actionlint", "--path"],
        capture_output=True,
        text=True,
        check=True,
    )
    path = proc.stdout.strip().removeprefix("ACTIONLINT=")
    if not Path(path).is_file():
        pytest.skip(
            "actionlint is not built (bash scripts/build-gotool.sh actionlint; CI builds it)"
        )
    return path


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_actionlint(), "-no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_release_workflow_passes_actionlint() -> None:
    """actionlint finds nothing in the release workflow."""
    proc = _lint(WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: an unknown context and a job without runs-on are reported."""
    broken = WORKFLOW.read_text().replace("github.ref_name", "github.refname", 1)
    broken = broken.replace("    runs-on: ubuntu-24.04\n", "", 1)
    assert broken != WORKFLOW.read_text()
    copy = tmp_path / ".github" / "workflows" / "release.yml"
    copy.parent.mkdir(parents=True)
    copy.write_text(broken)
    proc = _lint(copy)
    assert proc.returncode != 0
    assert "runs-on" in proc.stdout


def test_the_workflow_releases_a_tag_with_the_locked_dependencies() -> None:
    """On a version tag, it installs requirements.lock with hashes, runs scripts/release.sh
    against the registry of a repository variable, and names no registry host itself."""
    text = WORKFLOW.read_text()
    workflow = yaml.safe_load(text)
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert on == {"push": {"tags": ["v*.*.*"]}}
    steps = workflow["jobs"]["release"]["steps"]
    runs = "\n".join(str(step.get("run", "")) for step in steps)
    assert "--require-hashes --no-deps -r requirements.lock" in runs
    assert "scripts/check_lock.py --installed" in runs
    assert 'bash scripts/release.sh --registry "$REGISTRY"' in runs
    assert workflow["jobs"]["release"]["env"]["REGISTRY"] == "${{ vars.REBALANCER_REGISTRY }}"
    pushed = [line for line in text.splitlines() if "--registry" in line]
    assert pushed and all('"$REGISTRY"' in line for line in pushed)
