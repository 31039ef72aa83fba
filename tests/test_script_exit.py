"""scripts/test.sh ends with the exit status of its last step: its EXIT trap (which stops the
background build lane and the second e2e track) neither fails a passing run nor hides a failing
one, also when both have already ended. CI once failed a
run whose every test passed, because the lane was already stopped and reaped when the trap's
`kill` ran under `set -e`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "test.sh"


def _trap_line() -> str:
    lines: list[str] = re.findall(r"^trap .* EXIT$", SCRIPT.read_text(), re.MULTILINE)
    (line,) = lines
    return line


def _run(last_step: str) -> int:
    # the options of scripts/test.sh, a lane that has already ended, then the last step
    body = "\n".join(
        [
            "set -euo pipefail",
            "sleep 0 & builds=$!",
            'side=""',
            _trap_line(),
            "setsid sleep 0 & side=$!",
            'kill -- -"$builds" 2>/dev/null || true',
            'wait "$builds" "$side" 2>/dev/null || true',
            last_step,
        ]
    )
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run([bash, "-c", body], check=False, timeout=30).returncode


@pytest.mark.parametrize(("last_step", "status"), [("true", 0), ("false", 1), ("exit 5", 5)])
def test_the_exit_trap_keeps_the_last_step_s_status(last_step: str, status: int) -> None:
    assert _run(last_step) == status


def _side_track(tmp_path: Path, lane: str, fail_on: str = "") -> tuple[int, list[str]]:
    """scripts/test.sh's side track, run with a stand-in for Python that logs each pytest call
    with the lane's markers present at that moment (and fails the call naming ``fail_on``),
    beside a stand-in lane running ``lane``."""
    text = SCRIPT.read_text()
    block = text[text.index("side_log=$(mktemp)") : text.index("side=$!") + len("side=$!")]
    calls = tmp_path / "calls"
    py = tmp_path / "py"
    py.write_text(
        "#!/bin/bash\n"
        f'echo "$* | $(cd {tmp_path} && ls -1 built.* 2>/dev/null | tr "\\n" " ")" >> {calls}\n'
        f'case "$*" in *"{fail_on or "no such test"}"*) exit 1;; esac\n'
    )
    py.chmod(0o755)
    body = "\n".join(
        [
            "set -euo pipefail",
            f"cd {tmp_path}",
            f"PY={py} built={tmp_path}/built",
            f"( {lane} ) & builds=$!",
            "KARPENTER_TESTS=(e2e/test_karpenter.py e2e/test_capacity.py)",
            "REAL_NODE_TESTS=(e2e/test_realnodes.py e2e/test_release.py)",
            block,
            'st=0; wait "$side" || st=$?; kill "$builds" 2>/dev/null || true; exit "$st"',
        ]
    )
    bash = shutil.which("bash")
    assert bash is not None
    status = subprocess.run([bash, "-c", body], check=False, timeout=120).returncode
    return status, calls.read_text().splitlines()


def test_the_side_track_waits_for_the_lane_s_karpenter_then_syft(tmp_path: Path) -> None:
    """Karpenter's tests skip when its controller is not built: a cold run once started them
    before the lane had built it, and all 11 skipped."""
    lane = "sleep 1; touch built.karpenter; sleep 11; touch built.syft; sleep 60"
    status, calls = _side_track(tmp_path, lane)
    assert status == 0
    assert calls == [
        "-m pytest e2e/test_karpenter.py e2e/test_capacity.py --e2e -v -rs | built.karpenter ",
        "-m pytest e2e/test_realnodes.py e2e/test_release.py --e2e -v -rsP"
        " | built.karpenter built.syft ",
    ]


def test_a_lane_that_ended_is_not_waited_for_and_a_failure_fails_the_track(
    tmp_path: Path,
) -> None:
    status, calls = _side_track(tmp_path, "true", fail_on="test_karpenter")
    assert status == 1
    assert [c.split(" | ")[0].split()[2] for c in calls] == [
        "e2e/test_karpenter.py",
        "e2e/test_realnodes.py",
    ]
