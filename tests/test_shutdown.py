"""The command line against a silent or trickling API server on 127.0.0.1: exit 3 with one
clear line past the deadlines; SIGTERM during the RBAC pre-flight: one log line and exit 0
(issue 11 §3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.fakes import HANG_GUARD, server, silence, trickle

ROOT = Path(__file__).resolve().parent.parent


def kubeconfig(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def start(*args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "REBALANCER_POLICY")}
    return subprocess.Popen(
        [sys.executable, "-m", "rebalancer", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def test_plan_against_a_trickling_server_exits_3_with_one_line(tmp_path: Path) -> None:
    """A server sending one byte at a time: plan gives up at --request-timeout, exit 3."""
    with server(trickle) as port:
        proc = start("plan", "--kubeconfig", str(kubeconfig(tmp_path, port)),
                     "--request-timeout", "2s")  # fmt: skip
        out, err = proc.communicate(timeout=HANG_GUARD)
    assert proc.returncode == 3, err
    assert out == ""
    lines = [line for line in err.splitlines() if line.startswith("rebalancer:")]
    assert len(lines) == 1, err
    assert "no complete answer" in lines[0]
    assert "within 2s (--request-timeout)" in lines[0]
    assert "Traceback" not in err


def test_sigterm_during_the_rbac_preflight_exits_0_with_a_log_line(tmp_path: Path) -> None:
    """run hangs in its first SelfSubjectAccessReview (a silent server); SIGTERM: exit 0."""
    with server(silence) as port:
        proc = start("run", "--kubeconfig", str(kubeconfig(tmp_path, port)))
        time.sleep(2.5)  # connected and waiting for the pre-flight's answer
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG_GUARD)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    stops = [e for e in events if e.get("event") == "shutdown.requested"]
    assert len(stops) == 1, err
    assert stops[0]["signal"] == "SIGTERM"
    assert out == ""
