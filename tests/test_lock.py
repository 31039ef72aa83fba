"""The lock files match pyproject.toml; a dependency added without a lock is caught."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_check_lock() -> Any:
    """scripts/check_lock.py, imported (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("check_lock", ROOT / "scripts" / "check_lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_lock"] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


check_lock = _load_check_lock()

LOCK = """\
#    scripts/lock.sh
#
alpha==1.2.0 \\
    --hash=sha256:{a}
    # via rebalancer (pyproject.toml)
beta-pkg==0.5 \\
    --hash=sha256:{b} \\
    --hash=sha256:{c}
    # via alpha
gamma==3.0
""".format(a="a" * 64, b="b" * 64, c="c" * 64)


def test_parse_lock_reads_pins_and_counts_hashes() -> None:
    """Names are canonical, versions exact, and each pin's hashes counted (hand-read table)."""
    pins = check_lock.parse_lock(LOCK)
    assert {n: (p.version, p.hashes) for n, p in pins.items()} == {
        "alpha": ("1.2.0", 1),
        "beta-pkg": ("0.5", 2),
        "gamma": ("3.0", 0),
    }


def test_check_pins_names_each_problem() -> None:
    """Missing, outside the specifier, marker-excluded and hash-less pins, each said once."""
    pins = check_lock.parse_lock(LOCK)
    problems = check_lock.check_pins(
        [
            "Alpha>=1.0",  # fine (name case differs)
            "Beta_Pkg>=1.0",  # locked at 0.5: outside
            "delta>=2",  # not locked
            "epsilon>=1; python_version < '3.0'",  # never needed here
        ],
        pins,
        "x.lock",
    )
    assert problems == [
        "x.lock: Beta_Pkg==0.5 is outside 'Beta_Pkg>=1.0': run scripts/lock.sh",
        "x.lock: delta (delta>=2) is not locked: run scripts/lock.sh",
        "x.lock: gamma==3.0 has no hash",
    ]


def test_the_repository_locks_match_pyproject() -> None:
    """requirements.lock and requirements-build.lock pin every dependency, hashed and closed."""
    assert check_lock.check(ROOT, installed=False) == []
    runtime = check_lock.parse_lock((ROOT / "requirements.lock").read_text())
    _, checked = check_lock.check_closed(runtime, "requirements.lock")
    assert checked > 0, "no locked package is installed at its locked version here"


def test_a_dependency_added_without_a_lock_fails(tmp_path: Path) -> None:
    """The CI check fails, naming the package, when pyproject.toml gains an unlocked one."""
    for name in ("requirements.lock", "requirements-build.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    text = (ROOT / "pyproject.toml").read_text()
    marker = "dependencies = [\n"
    assert marker in text
    (tmp_path / "pyproject.toml").write_text(
        text.replace(marker, marker + '    "left-pad-unlocked>=1.0",\n', 1)
    )
    problems = check_lock.check(tmp_path, installed=False)
    assert problems == [
        "requirements.lock: left-pad-unlocked (left-pad-unlocked>=1.0) is not locked: "
        "run scripts/lock.sh"
    ]


def test_a_tightened_specifier_fails(tmp_path: Path) -> None:
    """Raising a dependency's floor above its locked version fails until the lock follows."""
    for name in ("requirements.lock", "requirements-build.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    text = (ROOT / "pyproject.toml").read_text()
    assert '"structlog>=24.1",' in text
    (tmp_path / "pyproject.toml").write_text(
        text.replace('"structlog>=24.1",', '"structlog>=999",', 1)
    )
    problems = check_lock.check(tmp_path, installed=False)
    assert len(problems) == 1
    assert problems[0].startswith("requirements.lock: structlog==")
    assert "outside 'structlog>=999'" in problems[0]


def test_the_lock_is_closed_over_installed_metadata(tmp_path: Path) -> None:
    """Dropping a locked package that another locked package needs is found (kubernetes needs
    urllib3: a hand-known edge of the graph)."""
    text = (ROOT / "requirements.lock").read_text()
    pins = check_lock.parse_lock(text)
    assert "urllib3" in pins and "kubernetes" in pins
    without = {n: p for n, p in pins.items() if n != "urllib3"}
    problems, checked = check_lock.check_closed(without, "requirements.lock")
    if checked == 0:
        pytest.skip("no locked package is installed at its locked version here")
    assert any("needs 'urllib3" in p for p in problems), problems
