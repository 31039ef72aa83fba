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
