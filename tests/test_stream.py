"""One unpaginated LIST of pods in protobuf, read as a stream (rebalancer.cluster.read.protodecode.
stream, Kube.list_stream, the reader's and the watch's use of it).

Bodies are built with the generated classes (tests/protoenc.py) or, for orders and fields
kube-apiserver does not write, by hand with a wire encoder written here from the protobuf
encoding rules. The oracle for the items is the generated PodList parser (what the paginated
path decodes); for the reader, the all-JSON read of the same objects.
"""

from __future__ import annotations

import copy
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
import pytest

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import STREAM_CHUNK, Kube
from rebalancer.cluster.api.resources import RESOURCES_BY_NAME
from rebalancer.cluster.api.transport import Endpoint
from rebalancer.cluster.read.encoding import protobuf_stream
from rebalancer.cluster.read.protodecode import MAGIC, PROTOBUF, parse_page
from rebalancer.cluster.read.protodecode import schema_pb2 as pb
from rebalancer.cluster.read.protodecode.stream import (
    PodListSplitter,
    StreamDeclined,
    pod_batches,
)
from rebalancer.cluster.read.reader import read_cluster
from rebalancer.cluster.read.watch import ClusterWatch
from tests.fakes import HANG_GUARD, FakeLister, server
from tests.protoenc import encode_pod, envelope, pod_page
from tests.test_protodecode import ProtoLister, cluster_items

# --- a wire encoder, from the encoding rules ----------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def scalar(number: int, wire: int, value: int) -> bytes:
    """A field of wire type 0 (varint), 1 (8 bytes) or 5 (4 bytes)."""
    body = varint(value) if wire == 0 else value.to_bytes(8 if wire == 1 else 4, "little")
    return varint(number << 3 | wire) + body


def type_meta(kind: str = "PodList") -> bytes:
    return field(1, field(1, b"v1") + field(2, kind.encode()))


def list_meta(version: str = "42", token: str = "") -> bytes:
    return field(1, field(2, version.encode()) + field(3, token.encode()))


def item_fields(pods: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(field(2, encode_pod(p).SerializeToString()) for p in pods)


def body_of(pod_list: bytes, *, before: bytes = b"", after: bytes = b"") -> bytes:
    """An answer: magic, then a runtime.Unknown of ``before``, the PodList, ``after``."""
    return MAGIC + before + field(2, pod_list) + after


def chunked(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def streamed(body: bytes, size: int, batch: int = 7) -> tuple[list[bytes], list[Any]]:
    """The items (serialized again) and the batches of ``body`` fed ``size`` bytes at a time."""
    batches = list(pod_batches(chunked(body, size), batch))
    return [p.SerializeToString() for b in batches for p in b.items], batches


def expected_items(body: bytes) -> list[bytes]:
    """The oracle: the generated classes parse the whole answer at once."""
    page = parse_page(body)
    assert page is not None
    return [p.SerializeToString() for p in page.items]


PODS = cluster_items()["pods"]


# --- the splitter ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 4096, 1 << 20])
def test_every_chunk_boundary_gives_the_same_items(size: int) -> None:
    body = pod_page(PODS, "", "77")
    found, batches = streamed(body, size)
    assert found == expected_items(body) and len(found) == len(PODS) == 60
    assert [len(b.items) for b in batches] == [7] * 8 + [4]  # the last one the rest
    assert [b.last for b in batches] == [False] * 8 + [True]
    assert batches[-1].resource_version == "77"


def test_every_cut_point_of_two_chunks_gives_the_same_items() -> None:
    body = pod_page(PODS[:3], "", "5")
    expected = expected_items(body)
    for cut in range(len(body) + 1):
        batches = list(pod_batches([body[:cut], body[cut:]], 2))
        assert [p.SerializeToString() for b in batches for p in b.items] == expected, cut


def test_an_empty_list_gives_one_last_batch_without_items() -> None:
    batches = list(pod_batches([pod_page([], "", "9")]))
    assert len(batches) == 1 and batches[0].last and not batches[0].items
    assert batches[0].resource_version == "9"


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_fields_out_of_order_are_taken(size: int) -> None:
    """ListMeta after and between the items; TypeMeta and contentType after the PodList."""
    pods = PODS[:5]
    pod_list = item_fields(pods[:2]) + list_meta("31") + item_fields(pods[2:])
    body = body_of(pod_list, before=field(4, b""), after=type_meta() + field(3, b""))
    found, batches = streamed(body, size, batch=2)
    assert found == [encode_pod(p).SerializeToString() for p in pods]
    assert batches[-1].resource_version == "31"


@pytest.mark.parametrize("size", [1, 3, 4096])
def test_unknown_fields_of_every_wire_type_are_skipped(size: int) -> None:
    pods = PODS[:4]
    unknown = scalar(9, 0, 300) + scalar(10, 1, 2**63) + scalar(11, 5, 7) + field(12, b"x" * 5000)
    pod_list = unknown + list_meta("8") + item_fields(pods[:2]) + unknown + item_fields(pods[2:])
    body = body_of(pod_list, before=type_meta() + unknown, after=unknown + field(4, b"ct"))
    found, batches = streamed(body, size, batch=3)
    assert found == [encode_pod(p).SerializeToString() for p in pods]
    assert batches[-1].resource_version == "8"


def test_every_truncated_body_is_declined() -> None:
    """Every prefix of an answer that cuts into its TypeMeta or PodList is declined at the
    end, never taken. Protobuf has no end marker: a cut after the PodList, between the empty
    contentEncoding and contentType kube-apiserver writes last, loses nothing and is taken
    (the HTTP framing, chunked or Content-Length, catches a connection cut there)."""
    body = pod_page(PODS[:2], "", "5")
    trailer = field(3, b"") + field(4, b"")
    assert body.endswith(trailer)
    whole = expected_items(body)
    taken = []
    for cut in range(len(body)):
        try:
            found, _ = streamed(body[:cut], 64)
        except StreamDeclined:
            continue
        assert found == whole
        taken.append(cut)
    assert taken == [len(body) - len(trailer), len(body) - 2]


def declined_at_feed(data: bytes) -> str:
    """The reason the splitter refuses ``data`` as soon as it is fed (not at the end)."""
    splitter = PodListSplitter(max_item=1 << 16)
    with pytest.raises(StreamDeclined) as caught:
        splitter.feed(data)
    return str(caught.value)


def test_a_length_past_the_pod_list_fails_at_once() -> None:
    """An item claiming more than its PodList has left: refused on its header alone."""
    header = MAGIC + type_meta() + varint(2 << 3 | 2) + varint(100)
    lying_item = varint(2 << 3 | 2) + varint(101)
    assert "past the end of the PodList" in declined_at_feed(header + lying_item)
    # The same for an unknown field, and for the header itself running past the end.
    assert "past the end" in declined_at_feed(header + varint(12 << 3 | 2) + varint(200))
    short = MAGIC + varint(2 << 3 | 2) + varint(1)
    assert "past the end" in declined_at_feed(short + varint(2 << 3 | 2) + varint(0))


def test_an_item_larger_than_the_limit_fails_at_once() -> None:
    header = MAGIC + type_meta() + varint(2 << 3 | 2) + varint(1 << 30)
    reason = declined_at_feed(header + varint(2 << 3 | 2) + varint((1 << 16) + 1))
    assert "an item of 65537 bytes" in reason


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"kind":"PodList","items":[]}', "not protobuf"),
        (b"k8s\x01", "not protobuf"),
        (MAGIC + b"\xff" * 11, "longer than 10 bytes"),
        (MAGIC + varint(1 << 3 | 3), "wire type 3"),
        (MAGIC + scalar(2, 0, 5), "field 2 has wire type 0"),
        (MAGIC + b"\x00", "numbered 0"),
        (MAGIC + field(3, b"gzip"), "contentEncoding"),
        (MAGIC + field(2, b"") + field(2, b""), "a second PodList"),
        (MAGIC + field(1, b"\xff"), "TypeMeta does not parse"),
        (MAGIC + varint(1 << 3 | 2) + varint(1 << 40), "envelope is"),
    ],
)
def test_bytes_that_are_not_taken_fail_as_soon_as_they_are_seen(data: bytes, reason: str) -> None:
    assert reason in declined_at_feed(data)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "not protobuf"),
        (MAGIC, "without a kind"),
        (MAGIC + type_meta(), "no PodList"),
        (MAGIC + type_meta("NodeList") + field(2, b""), "a NodeList"),
        (body_of(list_meta("1", "more"), before=type_meta()), "continue token"),
        (body_of(field(2, b"\xff\xff"), before=type_meta()), "does not parse as a Pod"),
    ],
)
def test_answers_that_are_not_one_whole_pod_list_are_declined(body: bytes, reason: str) -> None:
    with pytest.raises(StreamDeclined) as caught:
        list(pod_batches(chunked(body, 3) if body else []))
    assert reason in str(caught.value)


def test_a_lying_length_costs_no_memory_beyond_a_chunk() -> None:
    """A PodList claiming 1 TB and an unknown field of 512 GiB inside it, followed by 64 MiB
    of filler: skipped as it comes (nothing kept), then declined at the end."""
    chunk = b"\x00" * (1 << 20)
    head = MAGIC + type_meta() + varint(2 << 3 | 2) + varint(1 << 40)
    head += varint(12 << 3 | 2) + varint(1 << 39)
    splitter = PodListSplitter()
    tracemalloc.start()
    try:
        assert splitter.feed(head) == []
        for _ in range(64):
            assert splitter.feed(chunk) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    with pytest.raises(StreamDeclined, match="ends inside a field"):
        splitter.finish()


def test_a_large_item_cut_one_byte_at_a_time_is_linear_not_quadratic() -> None:
    """An item of 256 KiB fed a byte at a time: each feed keeps what it gets (no re-copy of
    the item so far per byte; a quadratic copy would be 32 GiB of memmove)."""
    pod = copy.deepcopy(PODS[0])
    pod["metadata"]["annotations"] = {"big": "y" * (256 << 10)}
    body = pod_page([pod], "", "3")
    found, _ = streamed(body, 1)
    assert found == expected_items(body)


# --- the reader -----------------------------------------------------------------------------


class StreamLister:
    """Serves the one LIST of pods as the protobuf answer kube-apiserver sends, in chunks of
    ``size`` bytes; ``json``: answers JSON (StreamDeclined, as Kube.list_stream raises);
    ``cut``: the body cut short; ``items``: the pods served (default: the JSON lister's)."""

    def __init__(
        self,
        items: dict[str, list[dict[str, Any]]],
        *,
        size: int = 4096,
        json: bool = False,
        cut: bool = False,
    ) -> None:
        self.items = items
        self.size = size
        self.json = json
        self.cut = cut
        self.calls: list[tuple[str, str | None]] = []
        self.closed = 0

    def __call__(self, resource: str, namespace: str | None) -> Iterator[bytes]:
        self.calls.append((resource, namespace))
        if self.json:
            raise StreamDeclined("LIST pods: answered application/json")
        pods = [
            p
            for p in self.items[resource]
            if namespace is None or p["metadata"].get("namespace") == namespace
        ]
        body = pod_page(pods, "", "42")
        if self.cut:
            body = body[: len(body) - 10]
        return self._chunks(body)

    def _chunks(self, body: bytes) -> Iterator[bytes]:
        try:
            yield from chunked(body, self.size)
        finally:
            self.closed += 1


def read_json(items: dict[str, list[dict[str, Any]]], **kwargs: Any) -> Any:
    return read_cluster(FakeLister(items), page_size=7, **kwargs)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_the_reader_takes_the_pods_in_one_streamed_list(prefetch: int) -> None:
    items = cluster_items()
    lister = FakeLister(items)
    stream = StreamLister(items, size=333)
    result = read_cluster(lister, page_size=7, list_stream=stream, prefetch=prefetch)
    expected = read_json(items)
    assert result.snapshot == expected.snapshot and len(result.snapshot.pods) == 60
    assert stream.calls == [("pods", None)] and stream.closed == 1
    assert not [c for c in lister.calls if c[0] == "pods"]  # no pod page
    assert dict(result.counts)["pods"] == 60
    assert result.pages == expected.pages - 9 + 1  # 9 pages of 7 pods, or one LIST


def test_a_namespace_is_passed_to_the_stream() -> None:
    items = cluster_items()
    namespace = items["pods"][0]["metadata"]["namespace"]
    stream = StreamLister(items)
    result = read_cluster(FakeLister(items), namespace=namespace, list_stream=stream)
    assert stream.calls == [("pods", namespace)]
    assert result.snapshot == read_json(items, namespace=namespace).snapshot


@pytest.mark.parametrize("how", ["json", "cut"])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_stream_not_taken_reads_the_pods_paginated_from_scratch(how: str, prefetch: int) -> None:
    items = cluster_items()
    lister = FakeLister(items)
    proto = ProtoLister(FakeLister(items))
    stream = StreamLister(items, json=how == "json", cut=how == "cut", size=100)
    result = read_cluster(
        lister, page_size=7, list_stream=stream, list_page_proto=proto, prefetch=prefetch
    )
    assert result.snapshot == read_json(items).snapshot
    assert stream.calls == [("pods", None)]  # tried once, not again
    assert next(t for r, t in proto.calls if r == "pods") is None  # pages, from the first
    assert len(proto.calls) == 9
    assert [c[3] for c in lister.calls if c[0] == "nodes"].count(None) == 2  # all again


def test_a_pod_the_decoder_declines_reads_the_pods_again_paginated() -> None:
    """A pod the converter rejects: no half-read list; the paginated JSON path names it."""
    items = cluster_items()
    broken = copy.deepcopy(items["pods"][20])
    broken["metadata"]["name"] = "broken"
    broken["spec"]["tolerations"] = [{"operator": "Sometimes"}]
    items["pods"].insert(20, broken)
    lister = FakeLister(items)
    stream = StreamLister(items)
    result = read_cluster(lister, page_size=7, list_stream=stream, skip_invalid=True)
    expected = read_json(items, skip_invalid=True)
    assert result.snapshot == expected.snapshot and result.rejected == expected.rejected
    assert [r.name for r in result.rejected] == ["broken"]
    assert next(c[3] for c in lister.calls if c[0] == "pods") is None


def test_kept_objects_never_use_the_stream() -> None:
    items = cluster_items()
    stream = StreamLister(items)
    result = read_cluster(FakeLister(items), keep_objects=True, list_stream=stream)
    assert not stream.calls and result.objects is not None


def test_the_read_deadline_is_checked_after_each_batch() -> None:
    """A clock that moves 1 s per batch: the read fails once past the deadline, mid-stream."""
    from rebalancer.cluster.read.reader import ReadDeadline  # noqa: PLC0415

    items = {"pods": [copy.deepcopy(PODS[i % 60]) for i in range(2500)]}
    for number, pod in enumerate(items["pods"]):
        pod["metadata"]["name"] = f"p-{number}"
    now = [0.0]
    stream = StreamLister(items, size=1 << 16)

    def slow(resource: str, namespace: str | None) -> Iterator[bytes]:
        for chunk in stream(resource, namespace):
            now[0] += 0.5
            yield chunk

    deadline = ReadDeadline(base_seconds=3.0, seconds_per_1000_objects=0.0)
    with pytest.raises(errors.DeadlineExceeded):
        read_cluster(
            FakeLister(items),
            list_stream=slow,
            deadline=deadline,
            clock=lambda: now[0],
            prefetch=0,
            resources=[RESOURCES_BY_NAME["pods"]],
        )


# --- Kube.list_stream against a server on 127.0.0.1 --------------------------------------------


def kube(port: int, request_timeout: float) -> Kube:
    return Kube(
        Endpoint(f"http://127.0.0.1:{port}"),
        source="test",
        timeout=(1.0, request_timeout),
        sleep=lambda _: None,
    )


def answer(
    body: bytes,
    *,
    content_type: str = PROTOBUF,
    pieces: int = 1,
    pause: float = 0.0,
    stall_after: int | None = None,
    status: str = "200 OK",
    seen: list[bytes] | None = None,
) -> Callable[[socket.socket, threading.Event], None]:
    """A server answering ``body`` (chunked), in ``pieces`` pieces ``pause`` s apart;
    ``stall_after``: that many bytes, then silence (the connection kept open)."""

    def behaviour(conn: socket.socket, stop: threading.Event) -> None:
        try:
            send(conn, stop)
        except OSError:  # the client closed the connection: what it wanted to test
            return

    def send(conn: socket.socket, stop: threading.Event) -> None:
        request = conn.recv(65536)
        if seen is not None:
            seen.append(request)
        conn.sendall(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        data = body if stall_after is None else body[:stall_after]
        step = max(1, -(-len(data) // pieces))
        for start in range(0, len(data), step):
            piece = data[start : start + step]
            conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            if stop.wait(pause):
                return
        if stall_after is not None:
            stop.wait(HANG_GUARD)
            return
        conn.sendall(b"0\r\n\r\n")

    return behaviour


def big_body() -> bytes:
    """A PodList of about 3.5 MiB (three and a half stream chunks)."""
    pods = []
    for number in range(1200):
        pod = copy.deepcopy(PODS[number % 60])
        pod["metadata"]["name"] = f"p-{number}"
        pod["metadata"]["annotations"] = {"pad": "z" * 3000}
        pods.append(pod)
    return pod_page(pods, "", "11")


def test_a_healthy_stream_longer_than_the_request_deadline_is_not_cut() -> None:
    """Eight pieces 0.5 s apart (1 MiB of progress within the 2 s deadline, 4 s in all
    against a 2 s --request-timeout): read whole."""
    body = big_body()
    assert len(body) > 3 * STREAM_CHUNK
    seen: list[bytes] = []
    with server(answer(body, pieces=8, pause=0.5, seen=seen)) as port:
        k = kube(port, request_timeout=2.0)
        started = time.monotonic()
        chunks = list(protobuf_stream(k)("pods", None))
        elapsed = time.monotonic() - started
        k.close()
    assert b"".join(chunks) == body
    assert elapsed > 2.0  # longer than one request deadline
    request_line = seen[0].split(b"\r\n")[0]
    assert request_line == b"GET /api/v1/pods HTTP/1.1"  # no limit, no resourceVersion
    assert b"accept: application/vnd.kubernetes.protobuf" in seen[0].lower()


@pytest.mark.parametrize("stall_after", [0, 100, 2 * STREAM_CHUNK + 5])
def test_a_stalled_stream_fails_within_the_request_deadline(stall_after: int) -> None:
    body = big_body()
    with server(answer(body, stall_after=stall_after, pieces=3)) as port:
        k = kube(port, request_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded) as caught:
            list(protobuf_stream(k)("pods", None))
        elapsed = time.monotonic() - started
        k.close()
    assert 1.0 <= elapsed < HANG_GUARD
    assert "stalled" in str(caught.value) and "--request-timeout" in str(caught.value)


def test_a_trickling_stream_fails_within_the_request_deadline() -> None:
    """Bytes keep coming, too slowly to make 1 MiB of progress within the deadline."""
    body = big_body()
    with server(answer(body[:4000], pieces=4000, pause=0.01)) as port:
        k = kube(port, request_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded):
            list(protobuf_stream(k)("pods", None))
        elapsed = time.monotonic() - started
        k.close()
    assert 1.0 <= elapsed < HANG_GUARD


def test_a_json_answer_is_declined_before_its_body_is_read() -> None:
    body = orjson.dumps({"kind": "PodList", "items": []})
    with server(answer(body, content_type="application/json")) as port:
        k = kube(port, request_timeout=5.0)
        with pytest.raises(StreamDeclined, match="application/json"):
            list(protobuf_stream(k)("pods", None))
        k.close()


def test_an_error_status_raises_its_api_error() -> None:
    status = pb.Status(status="Failure", message="pods is forbidden", reason="Forbidden", code=403)
    body = envelope("Status", status.SerializeToString())
    with server(answer(body, status="403 Forbidden")) as port:
        k = kube(port, request_timeout=5.0)
        with pytest.raises(errors.Forbidden, match="pods is forbidden"):
            list(protobuf_stream(k)("pods", None))
        k.close()


def test_a_stream_left_early_closes_its_connection() -> None:
    body = big_body()
    with server(answer(body, pieces=4)) as port:
        k = kube(port, request_timeout=5.0)
        chunks = protobuf_stream(k)("pods", None)
        first = next(iter(chunks))
        chunks.close()  # type: ignore[attr-defined]  # a generator
        # The connection is not reused with the rest of the body in it: a new request works.
        assert first == body[: len(first)]
        again = b"".join(protobuf_stream(k)("pods", None))
        k.close()
    assert again == body


# --- loop mode ------------------------------------------------------------------------------


def _stream_of(api: Any, streams: list[str | None], *, declined: bool) -> Any:
    """The fake API's pods as one streamed protobuf LIST (``declined``: answered JSON)."""

    def list_stream(resource: str, namespace: str | None) -> Iterator[bytes]:
        streams.append(namespace)
        if declined:
            raise StreamDeclined("answered application/json")
        raw = orjson.loads(api.list_page(resource, namespace, 10**6, None))
        body = pod_page(raw["items"], "", raw["metadata"]["resourceVersion"])
        return iter(chunked(body, 9))

    return list_stream


@pytest.mark.parametrize("declined", [False, True])
def test_loop_mode_lists_pods_in_one_stream_or_falls_back_to_pages(declined: bool) -> None:
    from tests.builders import cluster_items as watch_items  # noqa: PLC0415
    from tests.test_watch import FAST, FakeApi, _pod, eventually, settled  # noqa: PLC0415

    api = FakeApi(watch_items())
    streams: list[str | None] = []
    watch = ClusterWatch(
        api.list_page,
        api.watch_lines,
        settings=FAST,
        seed=1,
        list_stream=_stream_of(api, streams, declined=declined),
    )
    try:
        assert watch.snapshot() == api.expected()
        assert streams == [None]
        pod_counts = watch.counts["pods"]
        assert pod_counts["lists"] == 1
        assert pod_counts["list_pages"] == (3 if declined else 1)
        api.put("pods", _pod("web-new", "node-c1"))  # then the WATCH from its version
        eventually(lambda: settled(watch, api))
        assert "web-new" in {p.name for p in watch.snapshot().pods}
    finally:
        api.close()
        watch.close()


def test_an_extended_watch_fires_only_after_its_last_progress() -> None:
    from rebalancer.cluster.api.deadline import Watchdog  # noqa: PLC0415

    left, right = socket.socketpair()
    dog = Watchdog(warn_after=0)
    try:
        started = time.monotonic()
        with dog.watch("stream", 0.4) as watch:
            watch.attach(left)
            for _ in range(4):  # progress every 0.2 s: 0.8 s in all, past the first 0.4 s
                time.sleep(0.2)
                right.sendall(b"x")
                assert left.recv(1) == b"x"
                dog.extend(watch, 0.4)
            assert not watch.fired
            assert left.recv(1) == b""  # no more progress: cut 0.4 s after the last
        assert watch.fired
        assert 0.8 + 0.4 <= time.monotonic() - started < HANG_GUARD
    finally:
        left.close()
        right.close()


def test_loop_mode_relists_pods_in_one_stream_after_a_410() -> None:
    from tests.builders import cluster_items as watch_items  # noqa: PLC0415
    from tests.test_watch import FAST, FakeApi, _pod, eventually, settled  # noqa: PLC0415

    api = FakeApi(watch_items())
    streams: list[str | None] = []
    watch = ClusterWatch(
        api.list_page,
        api.watch_lines,
        settings=FAST,
        seed=1,
        list_stream=_stream_of(api, streams, declined=False),
    )
    try:
        watch.snapshot()
        with api.lock:
            api.compacted = api.version  # every version so far has left the window
        api.put("pods", _pod("web-9", "node-a1"))
        api.error_event("pods", 410)
        eventually(lambda: watch.counts["pods"]["lists"] == 2)
        eventually(lambda: settled(watch, api))
        assert "web-9" in {p.name for p in watch.snapshot().pods}
        assert streams == [None, None]  # the relist streamed too, no page of pods
        assert watch.counts["pods"]["list_pages"] == 2
    finally:
        api.close()
        watch.close()
