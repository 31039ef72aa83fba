"""Deadlines against real sockets on 127.0.0.1: a trickling server, one that accepts and stays
silent, a slow but honest one (issue 11 §3)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import orjson
import pytest
import structlog

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.deadline import Watchdog
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.cluster.api.transport import Endpoint
from tests.fakes import HANG_GUARD, Behaviour, server, silence, trickle


def answer_after(seconds: float) -> Behaviour:
    def behaviour(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        if stop.wait(seconds):
            return
        body = b'{"kind":"NodeList","items":[]}'
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    return behaviour


def kube(port: int, request_timeout: float, warn_after: float = 5.0) -> Kube:
    return Kube(
        Endpoint(f"http://127.0.0.1:{port}"),
        source="test",
        timeout=(1.0, request_timeout),
        warn_after=warn_after,
    )


@pytest.mark.parametrize("behaviour", [trickle, silence], ids=["trickle", "accept-and-silence"])
def test_a_request_past_its_deadline_raises_deadline_exceeded(behaviour: Behaviour) -> None:
    """A trickling or silent server costs one request deadline, then a clear error."""
    with server(behaviour) as port:
        k = kube(port, request_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded) as caught:
            k.request("GET", "/api/v1/nodes")
        elapsed = time.monotonic() - started
        k.close()
    assert elapsed < HANG_GUARD
    assert elapsed >= 1.0  # not before the deadline
    message = str(caught.value)
    assert "GET /api/v1/nodes" in message
    assert "within 1s (--request-timeout)" in message
    assert caught.value.exit_code == 3


def test_a_slow_answer_within_the_deadline_is_used_and_warned_about() -> None:
    """An answer after 1.2 s with a 10 s deadline is returned; a warning was logged meanwhile."""
    with structlog.testing.capture_logs() as logged, server(answer_after(1.2)) as port:
        k = kube(port, request_timeout=10.0, warn_after=0.3)
        response = k.request("GET", "/api/v1/nodes")
        k.close()
    assert response.status == 200
    assert response.json() == {"kind": "NodeList", "items": []}
    slow = [e for e in logged if e["event"] == "request.slow"]
    assert slow, logged
    assert slow[0]["request"] == "GET /api/v1/nodes"
    assert slow[0]["log_level"] == "warning"
    assert 0.3 <= slow[0]["waited_seconds"] < 1.2


def test_the_watchdog_cuts_a_blocked_recv_at_the_deadline() -> None:
    """A recv blocked on a silent socket returns once the watch's deadline passes."""
    left, right = socket.socketpair()
    dog = Watchdog(warn_after=0)
    try:
        started = time.monotonic()
        with dog.watch("recv", 0.3) as watch:
            watch.attach(left)
            data = left.recv(10)  # nothing is ever sent: only the cut ends this
        assert data == b""
        assert watch.fired
        assert 0.3 <= time.monotonic() - started < HANG_GUARD
    finally:
        left.close()
        right.close()


def test_a_request_finished_in_time_is_not_cut() -> None:
    """A watch left before its deadline never fires and leaves its socket usable."""
    left, right = socket.socketpair()
    dog = Watchdog(warn_after=0)
    try:
        with dog.watch("quick", 0.2) as watch:
            watch.attach(left)
            right.sendall(b"x")
            assert left.recv(1) == b"x"
        time.sleep(0.4)
        assert not watch.fired
        right.sendall(b"y")
        assert left.recv(1) == b"y"
    finally:
        left.close()
        right.close()


def test_put_is_refused_except_on_a_lease() -> None:
    """The adapter sends PUT to a Lease only; a PUT or DELETE on a pod raises before sending."""
    k = kube(1, request_timeout=1.0)  # port 1: nothing would answer anyway
    with pytest.raises(ValueError, match="never sends PUT"):
        k.request("PUT", "/api/v1/namespaces/a/pods/b")
    with pytest.raises(ValueError, match="never sends DELETE"):
        k.request("DELETE", "/apis/coordination.k8s.io/v1/namespaces/a/leases/b")
    k.close()


def scripted(answers: list[tuple[int, str]], seen: list[str]) -> Behaviour:
    """Answer requests in order with (status, Retry-After or ""); then 200 forever."""

    def behaviour(conn: socket.socket, stop: threading.Event) -> None:
        buffer = b""
        while not stop.is_set():
            while b"\r\n\r\n" not in buffer:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            seen.append(head.split(b"\r\n", 1)[0].decode())
            status, wait = answers.pop(0) if answers else (200, "")
            body = b'{"kind":"Status"}' if status != 200 else b'{"kind":"NodeList","items":[]}'
            extra = f"Retry-After: {wait}\r\n" if wait else ""
            conn.sendall(
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )

    return behaviour


def test_a_get_answered_503_and_429_is_retried_after_retry_after() -> None:
    """503 (Retry-After 2), 429 (Retry-After 1), then 200: two pauses as the server asked."""
    seen: list[str] = []
    sleeps: list[float] = []
    with server(scripted([(503, "2"), (429, "1")], seen)) as port:
        k = kube(port, request_timeout=5.0)
        k._sleep = sleeps.append
        response = k.request("GET", "/api/v1/nodes")
        k.close()
    assert response.status == 200
    assert sleeps == [2.0, 1.0]
    assert len(seen) == 3


def test_get_retries_are_bounded_and_posts_are_never_retried_here() -> None:
    """A GET always answered 500 is sent 1 + 6 times; a POST answered 503 once."""
    seen: list[str] = []
    sleeps: list[float] = []
    with server(scripted([(500, "")] * 10 + [(503, "")], seen)) as port:
        k = kube(port, request_timeout=5.0)
        k._sleep = sleeps.append
        assert k.request("GET", "/api/v1/nodes").status == 500
        assert len(seen) == 7
        assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]  # no Retry-After: doubling, capped
        before = len(seen)
        seen_post = k.request("POST", "/api/v1/namespaces/a/events", body={}).status
        k.close()
    assert seen_post == 500
    assert len(seen) == before + 1


def test_the_read_deadline_grows_with_the_objects_read() -> None:
    """A read may take its base plus 1 s per 1,000 objects: 3 pages of 2,000 pods at 5 s each
    pass a 10 s base (10 + 6 >= 15); at 6 s each they do not (18 > 16), exit 3."""
    from rebalancer.cluster.api.resources import RESOURCES_BY_NAME  # noqa: PLC0415
    from rebalancer.cluster.read.reader import ReadDeadline, read_cluster  # noqa: PLC0415

    def page(number: int) -> bytes:
        pods = [{"metadata": {"name": f"p{number}-{i}", "namespace": "n", "uid": f"u{number}-{i}",
                              "creationTimestamp": "2025-01-01T00:00:00Z"},
                 "spec": {"nodeName": "x", "containers": [{"name": "c"}]}}
                for i in range(2000)]  # fmt: skip
        more = {"continue": "more"} if number < 3 else {}
        return orjson.dumps({"kind": "PodList", "metadata": more, "items": pods})

    def reader(seconds_per_page: float) -> Callable[[], object]:
        now = [0.0]
        served = [0]

        def list_page(resource: str, ns: str | None, limit: int, token: str | None) -> bytes:
            now[0] += seconds_per_page
            served[0] += 1
            return page(served[0])

        def read() -> object:
            return read_cluster(
                list_page,
                resources=[RESOURCES_BY_NAME["pods"]],
                prefetch=0,
                deadline=ReadDeadline(base_seconds=10, seconds_per_1000_objects=1),
                clock=lambda: now[0],
            )

        return read

    assert reader(5.0)() is not None
    with pytest.raises(errors.DeadlineExceeded, match=r"more than 16s \(6000 objects read"):
        reader(6.0)()
