"""The real command line and reader against a hostile API server (tests/hostile.py): every
bound holds whatever the server does, and each ends in exit 3 with one line naming it."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
import urllib3

from rebalancer.cli.main import main
from rebalancer.cluster.api import deadline, errors, kubeclient, transport
from rebalancer.cluster.api.resources import RESOURCES_BY_NAME
from rebalancer.cluster.read.nesting import MAX_JSON_DEPTH
from rebalancer.cluster.read.reader import ReadDeadline, ReadLimits, read_cluster
from rebalancer.core.errors import EXIT_CLUSTER
from tests import hostile
from tests.hostile import PLANTED_TOKEN, hostile_server

NODES = [RESOURCES_BY_NAME["nodes"]]


@pytest.fixture(autouse=True)
def _logging_back_to_defaults() -> Iterator[None]:
    """A live command configures logging onto the captured stderr, which closes when the test
    ends: later tests must not log there."""
    yield
    structlog.reset_defaults()


def plan(kubeconfig: Path, *flags: str) -> list[str]:
    """``plan`` against the server: the pods paginated (one path for every resource)."""
    return ["plan", "--kubeconfig", str(kubeconfig), "--paged-lists", *flags]


def error_lines(err: str) -> list[str]:
    """The command's own error lines on stderr (log lines are JSON objects)."""
    return [line for line in err.splitlines() if line.startswith("rebalancer: ")]


def test_a_server_that_pages_forever_ends_at_the_object_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pages of 1,000 nodes, each with a continue token, forever: the read stops past
    --max-objects (exit 3, naming the flag) after a handful of pages, not when memory ends."""
    with hostile_server(hostile.paginate_forever(page_size=1000)) as server:
        code = main(plan(server.kubeconfig(tmp_path), "--max-objects", "5000"))
        pages = server.lists("nodes")
    err = capsys.readouterr().err
    assert code == EXIT_CLUSTER
    (line,) = error_lines(err)
    assert "more than 5000 objects (--max-objects)" in line
    # 6 pages pass the cap; the fetch thread may have asked for a few more before it stopped.
    assert 6 <= pages <= 6 + 8


def test_the_read_deadline_stops_growing_however_many_objects_come() -> None:
    """Pages of 500 objects 1 s apart would push a deadline that grows 2 s per 1,000 objects
    ahead forever; its growth is capped, so the read ends just past base + cap (10 + 20 s)."""
    now = [0.0]
    served = [0]
    page = hostile.list_body("nodes", [hostile.node(f"n{i}") for i in range(500)], "more")

    def list_page(resource: str, ns: str | None, limit: int, token: str | None) -> bytes:
        now[0] += 1.0
        served[0] += 1
        return page.replace(b'"n', f'"p{served[0]}-n'.encode())

    bound = ReadDeadline(base_seconds=10, seconds_per_1000_objects=2, max_growth_seconds=20)
    with pytest.raises(errors.DeadlineExceeded, match=r"more than 30s .*20s more at most"):
        read_cluster(
            list_page,
            resources=NODES,
            prefetch=0,
            deadline=bound,
            limits=ReadLimits(max_objects=10**8),
            clock=lambda: now[0],
        )
    assert served[0] == 31  # the first page past 30 s ends it


def test_the_bytes_received_are_capped_over_the_whole_read() -> None:
    """However the bytes come (here 1,000-node pages forever), a read takes in at most
    ``max_bytes``: the page that passes it ends the read."""
    page = hostile.list_body("nodes", [hostile.node(f"n{i}") for i in range(1000)], "more")
    sizes: list[int] = []

    def list_page(resource: str, ns: str | None, limit: int, token: str | None) -> bytes:
        raw = page.replace(b'"n', f'"p{len(sizes)}-n'.encode())
        sizes.append(len(raw))
        return raw

    cap = 10 * len(page)
    with pytest.raises(errors.ReadTooLarge, match=f"more than {cap} bytes received"):
        read_cluster(list_page, resources=NODES, prefetch=0, limits=ReadLimits(max_bytes=cap))
    assert sum(sizes[:-1]) <= cap < sum(sizes)  # the first page past the cap ends it


def test_an_endless_answer_is_cut_at_the_answer_cap(tmp_path: Path) -> None:
    """A 200 whose body never ends is refused once it passes the answer cap: read in chunks,
    never held past it, and the connection is closed."""
    with hostile_server(hostile.endless_body()) as server:
        kube = kubeclient.connect(str(server.kubeconfig(tmp_path)))
        kube.max_body_bytes = 1 << 20
        try:
            with pytest.raises(errors.ReadTooLarge, match=r"larger than 1048576 bytes"):
                kube.list_page("nodes", None, 10, None)
        finally:
            kube.close()


def test_a_trickling_answer_ends_at_the_request_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An answer that trickles a byte every 20 ms never trips a socket timeout; the request's
    own deadline cuts it (exit 3, naming --request-timeout)."""
    with hostile_server(hostile.trickle()) as server:
        code = main(plan(server.kubeconfig(tmp_path), "--request-timeout", "1s"))
    assert code == EXIT_CLUSTER
    (line,) = error_lines(capsys.readouterr().err)
    assert "--request-timeout" in line


def _deep_page() -> bytes:
    """A list page whose one node carries, in a field nothing reads, arrays nested deeper than
    the limit (still JSON that orjson would parse)."""
    item = hostile.node("n1")
    depth = MAX_JSON_DEPTH + 72
    junk = "[" * depth + "]" * depth
    body = hostile.list_body("nodes", [item]).decode()
    return body.replace('"uid": "uid-n1"', f'"uid": "uid-n1", "junk": {junk}').encode()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html><body>502 Bad Gateway</body></html>", "the answer is not JSON"),
        (b"\x00\xff\xfe" * 100, "the answer is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, f"nested more than {MAX_JSON_DEPTH} deep"),
        (_deep_page(), f"nested more than {MAX_JSON_DEPTH} deep"),
        (b'{"kind":"NodeList","items":{"a":1}}', "not a list"),
    ],
    ids=["html", "binary", "deep-brackets", "deep-unread-field", "items-not-a-list"],
)
def test_garbage_answers_exit_3_naming_the_list(
    body: bytes, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever a server answers a LIST with, the read ends with exit 3 and one line naming
    the list and what is wrong: no traceback, no RecursionError."""
    with hostile_server(hostile.garbage(body)) as server:
        code = main(plan(server.kubeconfig(tmp_path)))
    err = capsys.readouterr().err
    assert code == EXIT_CLUSTER
    (line,) = error_lines(err)
    assert "LIST nodes" in line and problem in line
    assert "Traceback" not in err and "RecursionError" not in err


@pytest.mark.parametrize("scenario", ["echo_headers", "control_characters"])
def test_hostile_status_messages_end_in_one_error_line(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Status message that echoes the request's headers, or is full of terminal escapes,
    still ends the command with exit 3 and one error line."""
    with hostile_server(getattr(hostile, scenario)()) as server:
        code = main(plan(server.kubeconfig(tmp_path)))
    assert code == EXIT_CLUSTER
    assert len(error_lines(capsys.readouterr().err)) == 1


@pytest.mark.parametrize("scenario", ["echo_headers", "control_characters"])
def test_no_output_shows_the_token_or_a_control_byte(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither stdout nor stderr shows the planted bearer token or any control byte (other
    than newlines), whatever the server puts in its answers."""
    with hostile_server(getattr(hostile, scenario)()) as server:
        main(plan(server.kubeconfig(tmp_path)))
    out, err = capsys.readouterr()
    printed = out + err
    assert PLANTED_TOKEN not in printed
    assert not [c for c in printed if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0]


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A port whose listen backlog is full: a connection attempt to it hangs (its SYN is
    dropped) until the client gives up."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_every_connect_attempt_shares_the_connect_timeout() -> None:
    """The retries of a connection share one connect timeout: each attempt gets what is left
    of it, and once it is spent an attempt fails at once instead of waiting again."""
    watchdog = deadline.Watchdog(warn_after=0)
    conn = transport._WatchedHTTPConnection("127.0.0.1", 9, timeout=5.0)
    with watchdog.watch("GET /", 60) as watch:
        watch.connect_by = time.monotonic() + 0.5
        transport._connect_budget(conn)
        assert isinstance(conn.timeout, float) and 0 < conn.timeout <= 0.5
        watch.connect_by = time.monotonic() - 0.1
        with pytest.raises(urllib3.exceptions.ConnectTimeoutError):
            transport._connect_budget(conn)


def test_an_unanswered_connect_exits_3_naming_the_connect_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that never completes the TCP handshake ends the command with exit 3 and a line
    naming --connect-timeout (whose one second covers every attempt)."""
    with unanswered_port() as port:
        code = main(plan(hostile.Server(port).kubeconfig(tmp_path), "--connect-timeout", "1s"))
    assert code == EXIT_CLUSTER
    (line,) = error_lines(capsys.readouterr().err)
    assert "--connect-timeout" in line


def test_a_watch_list_that_pages_forever_ends_at_the_object_cap() -> None:
    """Loop mode's first LIST (per resource) stops at the object cap too, whatever the server
    sends: its pass fails with the cap named, instead of growing without end."""
    from rebalancer.cluster.read.watch import ClusterWatch, WatchSettings  # noqa: PLC0415

    served = [0]

    def list_page(resource: str, ns: str | None, limit: int, token: str | None) -> bytes:
        if resource != "nodes":
            return hostile.list_body(resource, [])
        served[0] += 1
        nodes = [hostile.node(f"p{served[0]}-n{i}") for i in range(100)]
        return hostile.list_body("nodes", nodes, "more")

    def watch_lines(resource: str, namespace: str | None, version: str, t: int) -> Iterator[bytes]:
        return iter(())  # the other resources' watches: each ends at once, and is retried

    settings = WatchSettings(page_size=100, sync_timeout=30, max_objects=1000)
    with (
        ClusterWatch(list_page, watch_lines, settings=settings) as watch,
        pytest.raises(errors.ReadTooLarge, match=r"nodes: more than 1000 objects"),
    ):
        watch.snapshot()
    # The page past the cap, and the few the fetch thread had asked for before it stopped.
    assert 11 <= served[0] <= 11 + 8


def test_a_cluster_with_no_nodes_is_exit_3_not_balanced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every LIST answered empty: a snapshot file without nodes is exit 2, and the live read
    must not report a balanced cluster either: exit 3, saying no node was listed."""
    with hostile_server(hostile.empty_lists) as server:
        code = main(plan(server.kubeconfig(tmp_path)))
    out, err = capsys.readouterr()
    assert code == EXIT_CLUSTER, err
    (line,) = error_lines(err)
    assert "LIST nodes answered no node: nothing to plan on" in line
    assert out == ""


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        ({"allowed": "yes"}, 'status.allowed must be true or false, got "yes"'),
        ({"allowed": 1}, "status.allowed must be true or false, got 1"),
        ({}, "status.allowed must be true or false, got nothing"),
        ({"allowed": True, "reason": ["x"]}, 'status.reason must be a string, got ["x"]'),
        (None, "status must be an object, got null"),
    ],
)
def test_an_access_review_is_read_strictly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: object, problem: str
) -> None:
    """A SelfSubjectAccessReview answered with anything but a boolean ``allowed`` (``"yes"``
    used to count as allowed) ends the run before it reads or evicts: exit 3 naming the field.
    Nothing but the reviews is sent."""

    def answer(request: hostile.Request) -> None:
        if request.resource == "selfsubjectaccessreviews":
            body = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1"}
            request.send(201, json.dumps({**body, "status": status}).encode())
        else:
            hostile.empty_lists(request)

    with hostile_server(answer) as server:
        code = main(["run", "--kubeconfig", str(server.kubeconfig(tmp_path))])
        sent = [(r.method, r.resource) for r in server.requests]
    err = capsys.readouterr().err
    assert code == EXIT_CLUSTER, err
    (line,) = error_lines(err)
    assert f"answer to a SelfSubjectAccessReview is malformed: {problem}" in line
    assert sent and all(resource == "selfsubjectaccessreviews" for _, resource in sent), sent


@pytest.mark.parametrize("digits", [8_000, 64_000, 256 * 1024 - 1])
@pytest.mark.parametrize("paged", [False, True])
def test_a_do_not_disrupt_annotation_of_digits_is_read_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], digits: int, paged: bool
) -> None:
    """A pod annotated ``karpenter.sh/do-not-disrupt`` with a run of digits then a letter, up
    to the 256 KiB annotation limit, read live (one streamed LIST or pages): no duration, so
    the pod is planned like its siblings. The check's expression used to backtrack
    quadratically on every read (8,000 digits 7.3 s, 32,000 94 s for `plan --snapshot` on a
    loaded machine, 256 KiB about 20 minutes); now `plan` takes the same 1.5-2 s at every
    size, 25 MB, exit 0. A duration of the same length ending in ``s`` protects it."""
    for value, protected in (("1" * digits + "x", False), ("0" * digits + "5s", True)):
        objects = hostile.do_not_disrupt_cluster(value)
        with hostile_server(hostile.cluster_api(objects)) as server:
            flags = ["--paged-lists"] if paged else []
            code = main(
                ["plan", "--kubeconfig", str(server.kubeconfig(tmp_path)), *flags, "-o", "json"]
            )
        out, err = capsys.readouterr()
        assert code == 0, err
        result = json.loads(out)
        evicted = {e["name"] for e in result["evictions"]}
        skipped = {s["name"]: s for s in result["skipped"]}
        assert ("w0" in evicted) is not protected
        assert ("do-not-disrupt" in str(skipped.get("w0"))) is protected, skipped
