"""The one retry policy, counted on the wire: requests a real Kube sends to a server on
127.0.0.1 when the executor re-reads a pod or evicts one, and when no connection is made."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from rebalancer.cluster.act.executor import Executor, ExecutorSettings
from rebalancer.cluster.act.outcome import Outcome
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.cluster.api.retry import RetryPolicy
from rebalancer.cluster.api.transport import Endpoint
from tests.builders import NS, api_node, api_pod
from tests.fakes import PDB_429, FakeClock, server
from tests.test_executor import evict
from tests.test_hostile import unanswered_port

Route = Callable[[str, str], tuple[int, Any]]
"""``route(method, path) -> (status, body)``."""


def routed(route: Route, seen: list[tuple[str, str]]) -> Callable[[socket.socket, Any], None]:
    """Answer each request on a connection as ``route`` says, recording (method, path)."""

    def behaviour(conn: socket.socket, stop: threading.Event) -> None:
        buffer = b""
        while not stop.is_set():
            while b"\r\n\r\n" not in buffer:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, target, _ = lines[0].split(" ")
            length = next(
                (int(v) for k, _, v in (h.partition(": ") for h in lines[1:])
                 if k.lower() == "content-length"), 0)  # fmt: skip
            while len(buffer) < length:
                buffer += conn.recv(65536)
            buffer = buffer[length:]
            path = target.split("?", 1)[0]
            seen.append((method, path))
            status, body = route(method, path)
            data = orjson.dumps(body)
            conn.sendall(
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )

    return behaviour


def kube(port: int, sleeps: list[float]) -> Kube:
    return Kube(
        Endpoint(f"http://127.0.0.1:{port}"), source="test", timeout=(1.0, 5.0), sleep=sleeps.append
    )


def test_one_failing_pod_re_read_sends_seven_gets() -> None:
    """A pod re-read always answered 503: 7 GETs (the one GET policy: 6 retries, pauses 0.5 s
    doubling to 8 s, 23.5 s in all), where the nested retries sent up to 20; nothing is
    evicted and the result says why."""
    seen: list[tuple[str, str]] = []
    sleeps: list[float] = []
    clock = FakeClock()
    with server(routed(lambda method, path: (503, {"message": "etcd down"}), seen)) as port:
        k = kube(port, sleeps)
        executor = Executor(k, ExecutorSettings(), clock=clock, sleep=clock.sleep)
        (result,) = executor.execute_wave([evict("web-1")])
        k.close()
    assert result.outcome is Outcome.FAILED
    assert result.detail.startswith("re-read failed")
    assert seen == [("GET", f"/api/v1/namespaces/{NS}/pods/web-1")] * 7
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert clock.sleeps == []  # the executor itself retries no read


def test_a_pod_re_read_answered_once_503_then_200_goes_on_after_one_pause() -> None:
    """A flaky GET: one 503, then the pod; one pause of 0.5 s, and the eviction goes out."""
    seen: list[tuple[str, str]] = []
    sleeps: list[float] = []
    failed = [False]

    def route(method: str, path: str) -> tuple[int, Any]:
        if path.endswith("/pods/web-1") and not failed[0]:
            failed[0] = True
            return 503, {"message": "etcd down"}
        if path.endswith("/pods/web-1"):
            return 200, api_pod("web-1")
        if path == "/api/v1/nodes/n1":
            return 200, api_node("n1")
        if path.endswith("/eviction"):
            return 201, {"kind": "Status", "status": "Success"}
        return 200, {"kind": "PodList", "items": []}

    with server(routed(route, seen)) as port:
        k = kube(port, sleeps)
        settings = ExecutorSettings(server_dry_run=True)
        clock = FakeClock()
        (result,) = Executor(k, settings, clock=clock, sleep=clock.sleep).execute_wave(
            [evict("web-1")]
        )
        k.close()
    assert result.outcome is Outcome.WOULD_EVICT
    assert sleeps == [0.5]
    assert [m for m, p in seen if p.endswith("/pods/web-1")] == ["GET", "GET"]


@pytest.mark.parametrize("pdb_retries", [0, 1, 3])
def test_an_eviction_answered_429_is_sent_once_plus_the_executors_retries(
    pdb_retries: int,
) -> None:
    """A 429 on eviction is the executor's alone (SPEC §5.5): 1 + pdb_retries POSTs, its own
    backoff (1 s doubling), never a retry of the POST by the transport."""
    seen: list[tuple[str, str]] = []
    sleeps: list[float] = []

    def route(method: str, path: str) -> tuple[int, Any]:
        if path.endswith("/pods/web-1"):
            return 200, api_pod("web-1")
        if path == "/api/v1/nodes/n1":
            return 200, api_node("n1")
        if path.endswith("/eviction"):
            return 429, PDB_429
        return 200, {"kind": "PodList", "items": []}

    with server(routed(route, seen)) as port:
        k = kube(port, sleeps)
        clock = FakeClock()
        settings = ExecutorSettings(pdb_retries=pdb_retries)
        (result,) = Executor(k, settings, clock=clock, sleep=clock.sleep).execute_wave(
            [evict("web-1")]
        )
        k.close()
    assert result.outcome is Outcome.BLOCKED_BY_PDB
    assert [m for m, _ in seen if m == "POST"] == ["POST"] * (1 + pdb_retries)
    assert sleeps == []  # the transport paused for nothing
    assert clock.sleeps == [1.0, 2.0, 4.0][:pdb_retries]


def test_a_refused_connection_is_tried_again_for_any_method() -> None:
    """Nothing listens: nothing was sent, so a POST is tried again as a GET is, each as the
    policy says (the refusals come at once, well within the connect timeout)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # the port is free: connecting is refused
    for method in ("GET", "POST"):
        sleeps: list[float] = []
        k = kube(port, sleeps)
        k.retry = RetryPolicy(
            attempts=3, backoff_seconds=0.5, backoff_max_seconds=8, max_seconds=60
        )
        with pytest.raises(errors.NotConnected):
            k.request(
                method, f"/api/v1/namespaces/{NS}/events", body={} if method == "POST" else None
            )
        k.close()
        assert sleeps == [0.5, 1.0], method


def test_a_connect_timeout_spent_is_not_tried_again() -> None:
    """A connection attempt that used the whole connect timeout: no retry, at once."""
    sleeps: list[float] = []
    with unanswered_port() as port:
        k = kube(port, sleeps)
        with pytest.raises(errors.Unreachable):
            k.request("GET", "/api/v1/nodes")
        k.close()
    assert sleeps == []


@pytest.mark.parametrize(
    ("status", "error"),
    [(410, errors.Gone), (403, errors.Forbidden), (404, errors.NotFound), (503, errors.ServerError),
     (400, errors.ClientError)],
)  # fmt: skip
def test_a_watch_answered_an_error_raises_its_mapped_error(
    status: int, error: type[errors.ApiError]
) -> None:
    """The one status map, on the WATCH path too: its class, the verb and the message."""
    seen: list[tuple[str, str]] = []
    answer = {"kind": "Status", "message": f"no ({status})", "reason": "X"}
    with server(routed(lambda method, path: (status, answer), seen)) as port:
        k = kube(port, [])
        with pytest.raises(error) as caught:
            k.watch_lines("pods", "a", "42", 5)
        k.close()
    assert type(caught.value) is error
    assert caught.value.status == status and caught.value.verb == "watch"
    assert f"no ({status})" in str(caught.value)
    assert seen == [("GET", "/api/v1/namespaces/a/pods")]


def test_a_watch_yields_its_lines() -> None:
    def behaviour(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        body = b'{"type":"ADDED"}\n\n{"type":"BOOKMARK"}\n'
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    with server(behaviour) as port:
        k = kube(port, [])
        lines = list(k.watch_lines("nodes", None, "7", 5))
        k.close()
    assert lines == [b'{"type":"ADDED"}', b'{"type":"BOOKMARK"}']


def test_the_connect_timeout_covers_every_try_of_a_refused_connection() -> None:
    """Refused at once, tried again while the 1 s connect timeout lasts (pauses 0.5 s, then
    1 s): the try after it fails at once, naming --connect-timeout; no third pause."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        time.sleep(seconds)

    k = kube(port, sleeps)
    k._sleep = sleep
    with pytest.raises(errors.NotConnected, match="--connect-timeout"):
        k.request("GET", "/api/v1/nodes")
    k.close()
    assert sleeps == [0.5, 1.0]
