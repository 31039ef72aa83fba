"""The real command line and reader against a hostile API server (tests/hostile.py): every
bound holds whatever the server does, and each ends in exit 3 with one line naming it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
import urllib3
import yaml

from rebalancer.cli import logconfig
from rebalancer.cli.kubectl_plugin import main as kubectl_main
from rebalancer.cli.main import main
from rebalancer.cluster.api import deadline, errors, kubeclient, transport
from rebalancer.cluster.api.resources import RESOURCES_BY_NAME
from rebalancer.cluster.inputs import MAX_KUBECONFIG_BYTES
from rebalancer.cluster.read.live import warn_rejected
from rebalancer.cluster.read.nesting import MAX_JSON_DEPTH
from rebalancer.cluster.read.reader import ReadDeadline, ReadLimits, read_cluster
from rebalancer.cluster.read.snapshot import MAX_PROBLEMS, dump_objects
from rebalancer.core.convert.builder import Rejected
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_EVICTIONS_FAILED
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


# -- hostile local inputs (issue 47: D4, D6, D7, D8) -----------------------------------------------

PLUGIN_STDERR = [
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCY",
    "AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEMj//////////wEaCXVz",
    "client_secret=Zm9vYmFyYmF6cXV4",
    'password: "correct horse battery staple"',
]


def test_an_exec_plugins_secrets_are_redacted_whole_and_its_log_lines_stay_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D4: a failing exec plugin prints four secrets on stderr, named as cloud SDKs name them.
    Before: the first three were printed in clear, the password less its first word, and the
    exec.stderr lines redacted after rendering no longer parsed as JSON. Now: exit 3, every
    stderr line but the error line is JSON, no secret word survives anywhere."""
    script = tmp_path / "plugin.sh"
    lines = "".join(f"echo '{line}' >&2\n" for line in PLUGIN_STDERR)
    script.write_text(f"#!/bin/sh\n{lines}exit 1\n")
    script.chmod(0o755)
    kubeconfig = tmp_path / "kubeconfig.json"
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}}
    kubeconfig.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    code = main(["plan", "--kubeconfig", str(kubeconfig), "--log-format", "json"])
    out, err = capsys.readouterr()
    assert code == EXIT_CLUSTER, err
    assert out == ""
    (line,) = error_lines(err)
    logged = [json.loads(x) for x in err.splitlines() if not x.startswith("rebalancer: ")]
    shown = [entry["line"] for entry in logged if entry["event"] == "exec.stderr"]
    assert shown == [
        "AWS_SECRET_ACCESS_KEY=<redacted>",
        "AWS_SESSION_TOKEN=<redacted>",
        "client_secret=<redacted>",
        'password: "<redacted>"',
    ]
    for secret in ("wJalr", "IQoJb", "Zm9v", "correct", "horse", "staple"):
        assert secret not in err
    assert line.endswith(" ".join(shown))


def test_version_json_is_one_document_whatever_is_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D6: `version -o json` against a server that fails /version (retried, then exit 3).
    Before: logging was never configured, so the request.retry lines went to stdout, which
    held no JSON document. Now: stdout is one JSON document (the client's version), the
    retries are JSON lines on stderr, then the error line."""
    with hostile_server(hostile.internal_error) as server:
        code = main(
            [
                *("version", "-o", "json", "--log-format", "json", "--request-timeout", "5s"),
                *("--kubeconfig", str(server.kubeconfig(tmp_path))),
            ]
        )
    out, err = capsys.readouterr()
    assert code == EXIT_CLUSTER, err
    assert list(json.loads(out)) == ["clientVersion"]
    (line,) = error_lines(err)
    logged = [json.loads(x) for x in err.splitlines() if not x.startswith("rebalancer: ")]
    assert logged and {entry["event"] for entry in logged} == {"request.retry"}
    assert "GET /version" in line


def _write_bad_snapshot(path: Path, count: int, layout: str) -> Path:
    """``count`` bad pods in ``layout``: the one-item-per-line JSON ``rebalancer snapshot``
    writes, a List on one JSON line, a JSON array, or YAML (small counts only)."""
    items = hostile.bad_items(count)
    if layout == "lines":
        path.write_bytes(dump_objects(items, "json"))
    elif layout == "json-list":
        path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    elif layout == "json-array":
        path.write_text(json.dumps(items))
    else:
        path.write_text(yaml.safe_dump({"kind": "List", "apiVersion": "v1", "items": items}))
    return path


@pytest.mark.parametrize("count", [2_000, 20_000, 200_000])
def test_bad_items_in_the_line_layout_stop_at_the_problem_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: int
) -> None:
    """D7: pods without a name in the line-per-item layout `rebalancer snapshot` writes: the
    same 1,002 lines on stderr (1,000 problems and a line saying the rest is not read) at
    2,000, 20,000 and 200,000 items, exit 2, nothing on stdout. Measured (`/usr/bin/time -v
    rebalancer plan --snapshot FILE`, 2-core machine under load): before, 50,000 items 50,003
    lines (3.7 MB) on stderr, 13.3 s, 104 MB; 500,000 items (37 MB) 500,003 lines (37 MB),
    199 s, 821 MB. Now: 50,000 items 74 KB on stderr, 2.8 s, 26 MB; 500,000 the same 74 KB,
    2.0 s, 26 MB (the read stops at the cap)."""
    path = _write_bad_snapshot(tmp_path / "bad.json", count, "lines")
    code = main(["plan", "--snapshot", str(path)])
    out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 + MAX_PROBLEMS + 1  # the head, the problems, the rest not read
    assert lines[-1] == f"  - more problems after these {MAX_PROBLEMS}: the rest is not read"


@pytest.mark.parametrize("layout", ["lines", "json-list", "json-array", "yaml"])
@pytest.mark.parametrize("entry", ["plan", "explain", "kubectl"])
def test_the_problem_cap_holds_on_every_layout_and_entry_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str, entry: str
) -> None:
    """D7: 3,000 bad pods in each layout, through `plan`, `explain` and `kubectl rebalance
    plan`: exit 2, at most 1,000 problems listed and a line saying so, never a traceback."""
    path = _write_bad_snapshot(tmp_path / f"bad.{layout}", 3_000, layout)
    if entry == "plan":
        code = main(["plan", "--snapshot", str(path)])
    elif entry == "explain":
        code = main(["explain", "--pod", "ns/p", "--snapshot", str(path)])
    else:
        code = kubectl_main(["plan", "--snapshot", str(path)])
    out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT, err[-500:]
    assert out == ""
    assert "Traceback" not in err
    problems = [line for line in err.splitlines() if line.startswith("  - ")]
    assert MAX_PROBLEMS <= len(problems) <= MAX_PROBLEMS + 2
    assert "not read" in problems[-1] or "not listed" in problems[-1]


def test_skipped_bad_items_are_listed_up_to_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D7 with --skip-invalid: every bad pod is read and left out, but only 1,000 warnings are
    printed and one line counts the rest (before: a line per object)."""
    items = hostile.bad_items(3_000)
    items.append({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "ok", "namespace": "a"}})
    path = tmp_path / "bad.json"
    path.write_bytes(dump_objects(items, "json"))
    code = main(["plan", "--snapshot", str(path), "--skip-invalid"])
    err = capsys.readouterr().err
    assert code == EXIT_EVICTIONS_FAILED  # an object left out
    warnings = [line for line in err.splitlines() if line.startswith("rebalancer: warning: ")]
    assert len(warnings) == MAX_PROBLEMS + 1
    assert warnings[-1].startswith("rebalancer: warning: 2000 more objects cannot be read")


KUBECONFIG_CASES = {
    "contexts: 5": ("apiVersion: v1\ncontexts: 5\n", "contexts: a list expected, got 5"),
    "a list": ("- a\n", "is not a kubeconfig: a YAML mapping expected, not one mapping found"),
    "not YAML": ("a: [\n", "invalid YAML"),
    "deep blocks": (
        "".join(f"{'  ' * i}a:\n" for i in range(100)) + "  " * 100 + "b: 1\n",
        "nested more than 64 levels deep",
    ),
}


@pytest.mark.parametrize("case", sorted(KUBECONFIG_CASES))
def test_kubectl_explain_reads_the_kubeconfig_with_the_main_paths_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """D8: `kubectl rebalance explain POD` without -n reads the context's namespace from the
    kubeconfig. Before: a bare YAML load, `contexts: 5` a TypeError traceback (exit 1 from
    the console script). Now: exit 2, one problem naming the file, before anything else."""
    text, problem = KUBECONFIG_CASES[case]
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    code = kubectl_main(["explain", "web-1", "--kubeconfig", str(path)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert err.startswith(f"{path}: 1 problem(s):\n")
    assert problem in err


@pytest.mark.parametrize("depth", [1_000, 10_000, 100_000])
def test_kubectl_explain_refuses_a_deep_kubeconfig_at_any_depth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    """D8: `contexts:` inside 1,000, 10,000 and 100,000 flow lists. Before: a RecursionError
    traceback of 200 KB at every depth, exit 1 (1,000 deep: 4.8 s; 100,000: 9.6 s; 25 MB).
    Now: exit 2 and one line naming the file, under 200 bytes, 1.2-1.7 s whole process."""
    path = tmp_path / "kubeconfig"
    path.write_text(hostile.deep_flow_kubeconfig(depth))
    code = kubectl_main(["explain", "web-1", "--kubeconfig", str(path)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert err.startswith(f"{path}: 1 problem(s):\n")
    assert len(err) < 200 + len(str(path))


PLUGIN = [sys.executable, "-m", "rebalancer.cli.kubectl_plugin"]


@pytest.mark.parametrize("what", ["/dev/zero", "fifo", "directory", "too large"])
def test_kubectl_explain_refuses_a_kubeconfig_that_is_no_regular_file(
    tmp_path: Path, what: str
) -> None:
    """D8: a kubeconfig that is /dev/zero (before: MemoryError at 1.9 GB peak, 7.5 s), a FIFO
    no one writes (before: hung), a directory, or a sparse file past 16 MiB: exit 2 at once,
    naming the file and what it is; nothing is read from it. A process, so that a regression
    that hangs fails by timeout instead of hanging the suite."""
    if what == "/dev/zero":
        path = Path("/dev/zero")
        said = "is a character device, not a regular file"
    elif what == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
        said = "is a pipe, not a regular file"
    elif what == "directory":
        path = tmp_path
        said = "is a directory, not a regular file"
    else:
        path = tmp_path / "big"
        with path.open("wb") as f:
            f.truncate(MAX_KUBECONFIG_BYTES + 1)
        said = f"larger than {MAX_KUBECONFIG_BYTES} bytes"
    done = subprocess.run(
        [*PLUGIN, "explain", "web-1", "--kubeconfig", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert (
        done.stderr
        == f"{path}: 1 problem(s):\n  - {said}"
        + ("" if what == "too large" else "; a kubeconfig is read from a file")
        + "\n"
    )
    assert done.stdout == ""


def test_a_live_read_logs_at_most_the_cap_of_objects_it_leaves_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """D7 on the live read: 3,000 objects a server sent that cannot be converted give 1,000
    cluster.invalid_object lines and one counting the other 2,000 (before: a line each)."""
    rejected = [Rejected("Pod", f"ns{i % 7}", f"p{i}", ("metadata.uid: bad",)) for i in range(3000)]
    logconfig.configure(json_output=True)
    warn_rejected(rejected, "left out")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert len(lines) == MAX_PROBLEMS + 1
    assert [line["name"] for line in lines[:MAX_PROBLEMS]] == [f"p{i}" for i in range(1000)]
    assert lines[-1]["more_objects"] == 2000
    assert lines[-1]["namespaces"] == 7
