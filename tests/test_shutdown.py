"""Signals: after SIGTERM or SIGINT nothing more is sent, and rebalancer exits within 2 s
wherever it was (issue 11 §3, issue 34 §2).

The real command line in a subprocess against a local API server (tests/hostile.py): the server
stamps every request on arrival, so each test lists the requests that came after the signal
(none may, but a request already on the wire when it came), and the time the process took to
exit. Then the parts that make it so, in-process: the switch that cuts the sockets of requests
in flight, the retries that end, the executor that abandons the eviction in flight.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from rebalancer.cli.shutdown import install_stop_handlers
from rebalancer.cluster.act.executor import Executor, ExecutorSettings
from rebalancer.cluster.act.outcome import Outcome
from rebalancer.cluster.api import deadline
from rebalancer.cluster.api.retry import RetryPolicy, retrying
from rebalancer.core.model import ZONE_KEY
from rebalancer.core.plan import Eviction, SkipCode
from tests import hostile
from tests.builders import NS, api_pod
from tests.fakes import HANG_GUARD, FakeApi, FakeClock, server, silence, trickle

ROOT = Path(__file__).resolve().parent.parent
STOP_BOUND = 2.0
"""The longest a stopped process may take to exit (issue 34: "exits within 2 s")."""
ON_THE_WIRE = 0.1
"""A request stamped this soon after the signal may have been sent before it."""
SETTLE = 0.3
"""How long the client is left in the state under test (waiting on a hung answer, ...)."""


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


def start(*args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "REBALANCER_POLICY")}
    return subprocess.Popen(
        [sys.executable, "-m", "rebalancer", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def wait_until_handled(proc: subprocess.Popen[str], signum: int, timeout: float = 60) -> None:
    """Wait until ``proc`` has installed its handler for ``signum`` (its SigCgt mask in
    /proc), so a signal sent next is the command's to handle, however slowly a loaded machine
    started the interpreter. Python catches SIGINT from its start: wait for SIGTERM, which
    only the command's own handlers (installed together) catch."""
    bit = 1 << (signum - 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the command ended before handling signals"
        with open(f"/proc/{proc.pid}/status") as f:
            caught = next(line for line in f if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & bit:
            return
        time.sleep(0.02)
    raise AssertionError(f"no handler for signal {signum} within {timeout}s")


@pytest.fixture(autouse=True)
def _stop_undone() -> Iterator[None]:
    """The in-process tests throw the process's stop switch: put it back for the next test."""
    yield
    deadline._stopping[0] = False  # a process stops once; tests go on
    deadline._wake.clear()
    structlog.reset_defaults()


# --- the command line against a local API server --------------------------------------------

EXAMPLE = yaml.safe_load((ROOT / "examples" / "skewed-cluster.yaml").read_text())["items"]
"""A cluster whose plan evicts 5 pods, the first wave 2 (shop/web-..., shop/api-...)."""


@dataclass
class Stopped:
    """What a signalled command did: its exit, its output, and the requests after the signal."""

    code: int
    out: str
    err: str
    seconds: float  # from the signal to the process's end
    after: list[tuple[float, str, str]]  # (seconds after the signal, method, path)

    def lines(self, prefix: str = "rebalancer: ") -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith(prefix)]

    def events(self, name: str) -> list[dict[str, Any]]:
        logged = [json.loads(line) for line in self.err.splitlines() if line.startswith("{")]
        return [e for e in logged if e.get("event") == name]


def signalled(
    tmp_path: Path,
    scenario: hostile.Scenario,
    args: list[str],
    ready: Callable[[hostile.Server], bool],
    signum: int = signal.SIGTERM,
) -> Stopped:
    """Run the command against ``scenario``; once ``ready(server)`` holds and :data:`SETTLE`
    has passed, send ``signum``; what followed."""
    with hostile.hostile_server(scenario) as api:
        proc = start(*args, "--kubeconfig", str(api.kubeconfig(tmp_path)))
        try:
            began = time.monotonic()
            while not ready(api):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() - began < HANG_GUARD, "the scenario never got there"
                time.sleep(0.01)
            time.sleep(SETTLE)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signum)
            sent = time.monotonic()  # after: a pause of this process before it moves nothing
            out, err = proc.communicate(timeout=HANG_GUARD)
            seconds = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        after = [(round(r.at - sent, 3), r.method, r.path) for r in api.requests if r.at >= sent]
    return Stopped(proc.returncode, out, err, seconds, after)


def nothing_sent_after(result: Stopped) -> None:
    """No request after the signal, but one already on the wire (stamped within
    :data:`ON_THE_WIRE`); and the process ended within :data:`STOP_BOUND`."""
    late = [r for r in result.after if r[0] > ON_THE_WIRE]
    assert not late and len(result.after) <= 1, f"sent after the signal: {result.after}"
    assert result.seconds < STOP_BOUND, f"took {result.seconds:.2f}s to stop: {result.err}"


def evictions(api: hostile.Server) -> int:
    return sum(1 for r in api.requests if r.path.endswith("/eviction"))


def pods_listed(api: hostile.Server) -> bool:
    return any(r.method == "GET" and r.resource == "pods" for r in api.requests)


def stall_the_pods(request: hostile.Request) -> hostile.Scenario | None:
    """Every LIST of pods stalls after its first bytes."""
    listing = request.method == "GET" and request.resource == "pods"
    return hostile.stall if listing and "/namespaces/" not in request.path else None


def test_an_eviction_answered_500_is_not_retried_after_sigterm(tmp_path: Path) -> None:
    """The first eviction is answered 500, again and again: SIGTERM while its retries go on
    (they used to go on after it: requests 0.6 s, 1.0 s and 3.6 s after the signal, then an
    Event and the Lease's release). No request follows the signal; the eviction is reported
    failed with its last answer, the rest of the wave skipped; exit 1 (an eviction failed)."""
    result = signalled(
        tmp_path, hostile.cluster_api(EXAMPLE), ["run", "-o", "json"], lambda a: evictions(a) > 0
    )
    nothing_sent_after(result)
    assert result.code == 1, result.err
    report = json.loads(result.out)
    first, second = report["results"]
    assert first["outcome"] == "failed" and first["status"] == 500
    assert "not retried (stopping)" in first["detail"]
    assert second["outcome"] == "skipped" and second["detail"] == "stopping: not sent (SIGTERM)"
    assert report["summary"]["end"] == "stopped"
    (stop,) = result.events("shutdown.requested")
    assert stop["signal"] == "SIGTERM"
    (summary,) = result.events("run.summary")
    assert summary["failed"] == 1 and summary["evicted"] == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_eviction_that_hangs_is_abandoned_at_once(tmp_path: Path, signum: int) -> None:
    """The first eviction gets no answer: the signal abandons it at once (it used to wait
    for the 60 s request timeout, renewing the Lease meanwhile). Reported failed ("may have
    been evicted"), nothing sent after; exit 1."""
    result = signalled(
        tmp_path,
        hostile.cluster_api(EXAMPLE, evict=hostile.hang),
        ["run", "-o", "json"],
        lambda a: evictions(a) > 0,
        signum,
    )
    nothing_sent_after(result)
    assert result.code == 1, result.err
    first, second = json.loads(result.out)["results"]
    assert first["outcome"] == "failed" and first["attempts"] == 1
    assert "abandoned in flight" in first["detail"]
    assert second["outcome"] == "skipped"


def test_a_run_stalled_in_its_read_stops_at_once_and_exits_0(tmp_path: Path) -> None:
    """The LIST of pods stalls mid-answer: SIGTERM drops the read at once (it used to wait
    for the 60 s request timeout and exit 3). Nothing was evicted: exit 0, the report says
    the run stopped before it planned, and the Lease is left to expire (no request)."""
    result = signalled(
        tmp_path,
        hostile.cluster_api(EXAMPLE, hold=stall_the_pods),
        ["run", "--paged-lists"],
        pods_listed,
    )
    nothing_sent_after(result)
    assert result.code == 0, result.err
    assert "stopped (SIGTERM or SIGINT) before it planned; nothing sent" in result.out
    (summary,) = result.events("run.summary")
    assert summary["end"] == "stopped" and summary["planned"] == 0
    assert not result.events("lease.released")


@pytest.mark.parametrize(
    ("command", "signum", "code"),
    [
        (["plan"], signal.SIGTERM, 143),
        (["plan", "--paged-lists"], signal.SIGINT, 130),
        (["snapshot"], signal.SIGTERM, 143),
    ],
    ids=["plan-sigterm", "plan-paged-sigint", "snapshot-sigterm"],
)
def test_a_live_read_stalled_and_interrupted_exits_128_plus_the_signal(
    tmp_path: Path, command: list[str], signum: int, code: int
) -> None:
    """A live plan or snapshot whose LIST of pods stalls: the signal ends it at once (the
    fetch threads used to be waited for 10 s each, and the exit was 0 with nothing on
    stdout), exit 130 or 143, one line on stderr, nothing on stdout."""
    scenario = hostile.cluster_api(EXAMPLE, hold=stall_the_pods)
    result = signalled(tmp_path, scenario, command, pods_listed, signum)
    nothing_sent_after(result)
    assert result.code == code, result.err
    assert result.out == ""
    name = signal.Signals(signum).name
    assert result.lines() == [
        f"rebalancer: interrupted by {name}: stopped before the command finished"
    ]


def test_a_loop_stops_in_its_sleep_without_a_request(tmp_path: Path) -> None:
    """run --dry-run --interval: SIGTERM once it has read (planning, or sleeping until the
    next run) ends it at once, exit 0, with no request."""
    result = signalled(
        tmp_path,
        hostile.cluster_api(EXAMPLE),
        ["run", "--dry-run", "--interval", "10m", "--relist"],
        pods_listed,
    )
    nothing_sent_after(result)
    assert result.code == 0, result.err
    assert len(result.events("shutdown.requested")) == 1


def test_a_loop_with_open_watches_stops_at_once(tmp_path: Path) -> None:
    """run --interval with the watch (one open WATCH per resource, blocked in its read): on
    SIGTERM the watch threads are not waited for (they used to be, up to 2 s), exit 0, no
    request after the signal."""
    result = signalled(
        tmp_path,
        hostile.cluster_api(EXAMPLE),
        ["run", "--dry-run", "--interval", "10m"],
        lambda a: sum(1 for r in a.requests if r.query.get("watch") == "true") >= 3,
    )
    nothing_sent_after(result)
    assert result.code == 0, result.err


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
    """run hangs in its first SelfSubjectAccessReview (a silent server); SIGTERM: exit 0 at
    once (nothing was evicted), one log line."""
    with server(silence) as port:
        proc = start("run", "--kubeconfig", str(kubeconfig(tmp_path, port)))
        wait_until_handled(proc, signal.SIGTERM)
        time.sleep(2.5)  # connected and waiting for the pre-flight's answer
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=HANG_GUARD)
        seconds = time.monotonic() - sent
    assert proc.returncode == 0, err
    assert seconds < STOP_BOUND
    assert "Traceback" not in err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    stops = [e for e in events if e.get("event") == "shutdown.requested"]
    assert len(stops) == 1, err
    assert stops[0]["signal"] == "SIGTERM"
    assert out == ""


# --- offline commands ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["plan", "--snapshot", "-"],
        ["explain", "--snapshot", "-", "--pod", "shop/web-1"],
        ["policy", "check", "-"],
        ["policy", "import", "-"],
    ],
    ids=["plan", "explain", "policy-check", "policy-import"],
)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_offline_command_exits_128_plus_the_signal(
    command: list[str], signum: int, code: int
) -> None:
    """An offline command waiting for its input (a pipe that never ends) is interrupted: exit
    130 (SIGINT) or 143 (SIGTERM) as shells expect, not 0; one line on stderr, no stdout."""
    read_end, write_end = os.pipe()
    try:
        proc = start(*command, stdin=read_end)
        os.write(write_end, b"apiVersion: v1\n")  # some input, and more to come
        wait_until_handled(proc, signal.SIGTERM)  # installed with SIGINT's, by the command
        time.sleep(1.5)  # started, and blocked reading
        assert proc.poll() is None
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=HANG_GUARD)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert proc.returncode == code, err
    assert out == ""
    name = signal.Signals(signum).name
    assert err.splitlines() == [
        f"rebalancer: interrupted by {name}: stopped before the command finished"
    ]


# --- in-process: the switch, the retries, the executor -------------------------------------


def test_the_stop_handlers_set_the_stop_event_and_throw_the_switch() -> None:
    """A real SIGTERM (in this process) sets the run's stop event, stops every request, and
    leaves the next signal to the operating system; undo puts nothing back then."""
    stop = threading.Event()
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    undo = install_stop_handlers(stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)
        assert deadline.stopping()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
        undo()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_the_switch_cuts_a_request_waiting_in_another_thread() -> None:
    """A request blocked in a read in another thread (a silent server) returns at once when
    the switch is thrown, and no request starts after it."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    watchdog = deadline.Watchdog(warn_after=0)
    got: list[bytes] = []
    entered = threading.Event()

    def wait_for_an_answer() -> None:
        with watchdog.watch("GET /api/v1/pods", 60) as watch:
            watch.attach(client)
            entered.set()
            got.append(client.recv(10))  # the server never answers

    thread = threading.Thread(target=wait_for_an_answer, daemon=True)
    try:
        thread.start()
        assert entered.wait(5)
        time.sleep(0.1)
        assert thread.is_alive()
        deadline.stop_requests()
        thread.join(1.0)
        assert not thread.is_alive() and got == [b""]  # the read ended: the socket was cut
        with (
            pytest.raises(deadline.Stopped, match="GET /api/v1/nodes not sent"),
            watchdog.watch("GET /api/v1/nodes", 60),
        ):
            pass
    finally:
        for sock in (client, peer, listener):
            sock.close()


def test_a_stop_during_a_retry_pause_ends_the_retries() -> None:
    """Tries answered 503 are retried; a stop that comes in the pause after the first ends the
    retries: no second try, and :class:`Stopped` in place of the last answer."""
    tries: list[int] = []
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        deadline.stop_requests()  # SIGTERM during the pause

    controller = retrying(
        RetryPolicy(attempts=5, backoff_seconds=1, backoff_max_seconds=8, max_seconds=60),
        lambda answer: answer == 503,
        sleep=pause,
        clock=time.monotonic,
    )

    def attempt() -> int:
        tries.append(1)
        return 503

    with pytest.raises(deadline.Stopped, match="try 2 not sent"):
        controller(attempt)
    assert tries == [1] and pauses == [1]


def test_a_pause_ends_when_woken() -> None:
    """:func:`deadline.pause` is a wait that the stop's wake ends, however long it was."""

    def stop() -> None:
        deadline.stop_requests()
        deadline.wake()

    woke = threading.Timer(0.1, stop)
    began = time.monotonic()
    woke.start()
    deadline.pause(30)
    assert time.monotonic() - began < 5
    deadline.pause(30)  # stopping: no wait at all
    assert time.monotonic() - began < 5


def _eviction(name: str, workload: str) -> Eviction:
    return Eviction(
        namespace=NS,
        name=name,
        uid=f"uid-{name}",
        node="n1",
        priority=0,
        reason="zone=a holds 3, global min 1",
        wave=1,
        workload=workload,
        domain="a",
        topology_key=ZONE_KEY,
        target_node="n3",
        grace_period_seconds=None,
    )


def test_the_executor_abandons_the_eviction_in_flight_and_sends_nothing_more() -> None:
    """The first eviction's request is abandoned in flight (the signal raised in it): it is
    reported failed, and the second workload's pod is skipped without a request."""

    class SignalledApi(FakeApi):
        def post_eviction(
            self, namespace: str, name: str, body: Mapping[str, Any]
        ) -> tuple[int, dict[str, Any]]:
            super().post_eviction(namespace, name, body)  # recorded: it went out
            deadline.stop_requests()  # the handler throws the switch, then raises in it
            raise deadline.Stopped("stopping (SIGTERM): abandoned in flight", abandoned=True)

    api = SignalledApi([api_pod("web-1"), api_pod("api-1", app="api", owner_uid="rs-api")])
    clock = FakeClock()
    executor = Executor(api, ExecutorSettings(), clock=clock, sleep=clock.sleep)
    first, second = executor.execute_wave(
        [_eviction("web-1", "ReplicaSet/web"), _eviction("api-1", "ReplicaSet/api")]
    )
    assert first.outcome is Outcome.FAILED and first.attempts == 1
    assert "abandoned in flight" in first.detail
    assert second.outcome is Outcome.SKIPPED
    assert second.skip is not None and second.skip.code is SkipCode.STOPPING
    assert api.posts() == ["web-1"]
    assert ("GET pod", "api-1") not in api.calls


def test_the_executor_does_not_retry_a_500_once_stopping() -> None:
    """An eviction answered 500: the stop comes in the pause before its retry. No retry is
    sent; it is reported failed with the 500, not retried."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(500, {"message": "etcd timeout"})]})
    clock = FakeClock()
    stopping = [False]

    def pause(seconds: float) -> None:
        clock.sleep(seconds)
        stopping[0] = True

    executor = Executor(
        api, ExecutorSettings(), clock=clock, sleep=pause, should_stop=lambda: stopping[0]
    )
    (result,) = executor.execute_wave([_eviction("web-1", "ReplicaSet/web")])
    assert api.posts() == ["web-1"]
    assert result.outcome is Outcome.FAILED and result.status == 500 and result.attempts == 1
    assert result.detail == "gave up: HTTP 500: etcd timeout; not retried (stopping)"
