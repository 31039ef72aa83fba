"""The other resources read beside the streamed LIST of pods (rebalancer.cluster.read.overlap and
the reader's use of it): what is built, errors, restarts, deadline, threads and connections left.

The oracle is the same read without a fetch thread (``prefetch=0``), which takes every
resource one after the other in the caller's thread: the overlapped read must give the same
ReadResult (snapshot with its fragment numbers, counts, LIST requests, rejected objects in
their order) and the same errors.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Generator, Iterator
from typing import Any, cast

import pytest

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.resources import RESOURCES, RESOURCES_BY_NAME
from rebalancer.cluster.read.overlap import Prepared, SidePages, replay
from rebalancer.cluster.read.reader import ReadDeadline, ReadResult, read_cluster
from rebalancer.core.convert import SnapshotBuilder
from rebalancer.core.errors import InputError
from tests.fakes import FakeLister
from tests.test_protodecode import cluster_items
from tests.test_stream import StreamLister

SIDE = "rebalancer-list-others"
WAIT = 10.0  # bounded waits: a test that would hang fails instead


def fetch_threads() -> list[threading.Thread]:
    """The reader's fetch threads still alive."""
    return [t for t in threading.enumerate() if t.name.startswith("rebalancer-list-")]


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Every test: no fetch thread left."""
    yield
    assert not fetch_threads()


class ThreadLister(FakeLister):
    """A FakeLister that records the thread of each call and can fail on one resource."""

    def __init__(
        self,
        items: dict[str, list[dict[str, Any]]],
        *,
        fail: dict[str, Exception] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(items, **kwargs)
        self.threads: list[tuple[str, str]] = []
        self.fail = fail or {}
        self.served: dict[str, threading.Event] = {r.name: threading.Event() for r in RESOURCES}

    def __call__(
        self, resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        self.threads.append((resource, threading.current_thread().name))
        try:
            if resource in self.fail:
                self.calls.append((resource, namespace, limit, token))
                raise self.fail[resource]
            return super().__call__(resource, namespace, limit, token)
        finally:
            self.served[resource].set()


def read(
    items: dict[str, list[dict[str, Any]]],
    *,
    prefetch: int = 2,
    lister: FakeLister | None = None,
    stream: StreamLister | None = None,
    page_size: int = 7,
    **kwargs: Any,
) -> ReadResult:
    return read_cluster(
        lister if lister is not None else FakeLister(items),
        page_size=page_size,
        list_stream=stream if stream is not None else StreamLister(items, size=500),
        prefetch=prefetch,
        **kwargs,
    )


def invalid_items() -> dict[str, list[dict[str, Any]]]:
    """Objects of the other kinds that do not convert, in two namespaces, and a duplicate."""
    items = cluster_items()
    service = copy.deepcopy(items["services"][0])
    service["metadata"]["name"] = "bad-selector"
    service["spec"]["selector"] = {"app": 7}
    pdb = copy.deepcopy(items["poddisruptionbudgets"][0])
    pdb["metadata"]["name"] = "bad-pdb"
    pdb["metadata"]["namespace"] = "other"
    pdb["spec"]["selector"] = "everything"
    second = copy.deepcopy(service)
    second["metadata"]["name"] = "another-bad-selector"
    second["metadata"]["namespace"] = "elsewhere"
    items["services"].insert(2, service)
    items["services"].append(second)
    items["poddisruptionbudgets"].append(pdb)
    return items


# --- the same result ------------------------------------------------------------------------


@pytest.mark.parametrize("page_size", [1, 2, 7, 500])
def test_the_overlapped_read_equals_the_sequential_one(page_size: int) -> None:
    items = cluster_items()
    lister = ThreadLister(items)
    stream = StreamLister(items, size=500)
    got = read(items, lister=lister, stream=stream, page_size=page_size)
    sequential = ThreadLister(items)
    expected = read(items, lister=sequential, prefetch=0, page_size=page_size)
    assert got == expected
    assert got.snapshot == read_cluster(FakeLister(items), page_size=page_size).snapshot
    assert len(got.snapshot.pods) == 60 and len(got.snapshot.nodes) == 8
    # Every other resource read by the second thread, none of them twice, the pods streamed.
    assert {thread for _, thread in lister.threads} == {SIDE}
    assert [c for c in lister.calls if c[0] == "pods"] == []
    assert lister.calls == sequential.calls and len(lister.calls) == expected.pages - 1
    assert stream.calls == [("pods", None)] and stream.closed == 1
    assert not fetch_threads()


def test_rejected_objects_keep_their_order_and_problems_their_message() -> None:
    items = invalid_items()
    got = read(items, skip_invalid=True)
    expected = read(items, prefetch=0, skip_invalid=True)
    assert got == expected
    assert [(r.kind, r.name) for r in got.rejected] == [
        ("PodDisruptionBudget", "bad-pdb"),
        ("Service", "bad-selector"),
        ("Service", "another-bad-selector"),
    ]
    items["services"].append(copy.deepcopy(items["services"][0]))  # and a duplicate
    with pytest.raises(InputError) as overlapped:
        read(items)
    with pytest.raises(InputError) as sequential:
        read(items, prefetch=0)
    assert str(overlapped.value) == str(sequential.value)
    assert "bad-selector" in str(overlapped.value) and "more than once" in str(overlapped.value)
    assert not fetch_threads()


def test_a_namespace_reads_the_same_objects() -> None:
    items = cluster_items()
    namespace = items["pods"][0]["metadata"]["namespace"]
    lister = ThreadLister(items)
    stream = StreamLister(items)
    got = read(items, lister=lister, stream=stream, namespace=namespace)
    assert got == read(items, prefetch=0, namespace=namespace)
    assert got.snapshot == read_cluster(FakeLister(items), namespace=namespace).snapshot
    assert stream.calls == [("pods", namespace)]
    assert {ns for r, ns, _, _ in lister.calls if RESOURCES_BY_NAME[r].namespaced} == {namespace}


def test_the_others_are_read_while_the_stream_waits_for_its_first_bytes() -> None:
    """The pods' answer comes only once the last other resource was served: read one after
    the other, this would never end (the stream would fail after the bounded wait)."""
    items = cluster_items()
    lister = ThreadLister(items)
    stream = StreamLister(items, size=500)

    def slow_stream(resource: str, namespace: str | None) -> Iterator[bytes]:
        if not lister.served["replicationcontrollers"].wait(WAIT):
            raise errors.Unreachable("the other resources were not read meanwhile")
        yield from stream(resource, namespace)

    got = read_cluster(lister, page_size=7, list_stream=slow_stream, prefetch=2)
    assert got == read(items, prefetch=0)
    assert stream.closed == 1 and not fetch_threads()


def test_without_a_fetch_thread_everything_is_read_in_the_callers_thread() -> None:
    items = cluster_items()
    lister = ThreadLister(items)
    read(items, lister=lister, prefetch=0)
    assert {thread for _, thread in lister.threads} == {threading.current_thread().name}


def test_a_builder_not_the_converters_reads_as_before() -> None:
    """No stream and no conversion ahead for a builder of another kind (nor kept objects)."""

    class Recording(SnapshotBuilder):
        pass

    def builder() -> Any:  # not a SnapshotBuilder: the reader adds plain objects to it
        class Wrapper:
            def __init__(self) -> None:
                self.inner = Recording("cluster")
                self.rejected = self.inner.rejected

            def add(self, obj: dict[str, Any]) -> None:
                self.inner.add(obj)

            def build(self, *, skip_invalid: bool = False) -> Any:
                return self.inner.build(skip_invalid=skip_invalid)

        return Wrapper()

    items = cluster_items()
    lister = ThreadLister(items)
    stream = StreamLister(items)
    got = read(items, lister=lister, stream=stream, builder_factory=builder)
    assert got.snapshot == read(items, prefetch=0).snapshot
    assert not stream.calls and SIDE not in {thread for _, thread in lister.threads}
    kept = read(items, stream=stream, keep_objects=True)
    assert not stream.calls and kept.objects is not None


# --- errors, restarts, deadline -------------------------------------------------------------


def test_an_error_of_the_others_is_raised_after_the_pods_as_read_in_order() -> None:
    items = cluster_items()
    forbidden = errors.Forbidden(403, "nope", verb="list", resource="services")
    lister = ThreadLister(items, fail={"services": forbidden})
    stream = StreamLister(items, size=500)
    ended = []

    def watched(resource: str, namespace: str | None) -> Iterator[bytes]:
        yield from stream(resource, namespace)
        ended.append(resource)

    with pytest.raises(errors.Forbidden, match="cannot list services"):
        read_cluster(lister, page_size=7, list_stream=watched, prefetch=2)
    assert ended == ["pods"]  # the pods were read to their end first, as in plan order
    assert stream.closed == 1
    assert "replicasets" not in [c[0] for c in lister.calls]  # nothing after the failure
    assert not fetch_threads()


def test_an_error_of_the_nodes_stops_the_stream_and_closes_it() -> None:
    """The stream is still coming (slowly) when the nodes fail: its thread is stopped and
    waited for, its connection closed, before the error reaches the caller."""
    items = cluster_items()
    lister = ThreadLister(items, fail={"nodes": errors.Unreachable("connection refused")})
    stream = StreamLister(items, size=2000)

    def slow(resource: str, namespace: str | None) -> Iterator[bytes]:
        chunks = cast(Generator[bytes, None, None], stream(resource, namespace))
        try:
            for chunk in chunks:
                time.sleep(0.01)
                yield chunk
        finally:
            chunks.close()

    with pytest.raises(errors.Unreachable, match="connection refused"):
        read_cluster(lister, page_size=7, list_stream=slow, prefetch=2)
    assert stream.calls == [("pods", None)] and stream.closed == 1
    assert not fetch_threads()


def test_an_error_of_the_stream_wins_over_a_later_one_and_stops_the_others() -> None:
    items = cluster_items()
    forbidden = errors.Forbidden(403, "nope", verb="list", resource="services")
    lister = ThreadLister(items, fail={"services": forbidden})
    stream = StreamLister(items, size=100)

    def broken(resource: str, namespace: str | None) -> Iterator[bytes]:
        chunks = cast(Generator[bytes, None, None], stream(resource, namespace))
        try:
            for number, chunk in enumerate(chunks):
                if number == 3:
                    raise errors.Unreachable("connection reset mid-stream")
                yield chunk
        finally:
            chunks.close()

    with pytest.raises(errors.Unreachable, match="mid-stream"):
        read_cluster(lister, page_size=7, list_stream=broken, prefetch=2)
    with pytest.raises(errors.Unreachable, match="mid-stream"):  # the same without threads
        read_cluster(ThreadLister(items), page_size=7, list_stream=broken, prefetch=0)
    assert stream.closed == 2 and not fetch_threads()


def test_a_410_of_the_others_restarts_the_whole_read() -> None:
    items = cluster_items()
    lister = ThreadLister(items, expire_once="services-2")
    stream = StreamLister(items, size=500)
    got = read(items, lister=lister, stream=stream, page_size=2)
    assert got == read(items, prefetch=0, page_size=2)
    assert [c[0] for c in lister.calls].count("nodes") == 2 * 4  # 8 nodes, 2 a page: twice
    assert stream.calls == [("pods", None)] * 2 and stream.closed == 2
    assert not fetch_threads()


@pytest.mark.parametrize("how", ["json", "cut"])
def test_a_stream_not_taken_reads_everything_again_with_paginated_pods(how: str) -> None:
    items = invalid_items()
    lister = ThreadLister(items)
    stream = StreamLister(items, json=how == "json", cut=how == "cut", size=100)
    got = read(items, lister=lister, stream=stream, skip_invalid=True)
    expected = read_cluster(FakeLister(items), page_size=7, skip_invalid=True)
    assert got.snapshot == expected.snapshot and got.rejected == expected.rejected
    assert stream.calls == [("pods", None)]
    assert next(c[3] for c in lister.calls if c[0] == "pods") is None  # pods paginated
    assert not fetch_threads()


def test_a_pod_the_decoder_declines_reads_again_with_paginated_pods() -> None:
    items = invalid_items()
    broken = copy.deepcopy(items["pods"][20])
    broken["metadata"]["name"] = "broken"
    broken["spec"]["tolerations"] = [{"operator": "Sometimes"}]
    items["pods"].insert(20, broken)
    got = read(items, skip_invalid=True)
    expected = read_cluster(FakeLister(items), page_size=7, skip_invalid=True)
    assert got.snapshot == expected.snapshot and got.rejected == expected.rejected
    assert {r.name for r in got.rejected} == {
        "broken",
        "bad-pdb",
        "bad-selector",
        "another-bad-selector",
    }
    assert not fetch_threads()


def test_the_read_deadline_bounds_the_overlapped_read() -> None:
    """A clock that moves 1 s per request of the others: past the deadline the read fails,
    whichever thread made the time pass, and leaves no thread."""
    items = cluster_items()
    now = [0.0]

    class Slow(ThreadLister):
        def __call__(
            self, resource: str, namespace: str | None, limit: int, token: str | None
        ) -> bytes:
            now[0] += 1.0
            return super().__call__(resource, namespace, limit, token)

    deadline = ReadDeadline(base_seconds=5.0, seconds_per_1000_objects=0.0)
    with pytest.raises(errors.DeadlineExceeded):
        read(items, lister=Slow(items), deadline=deadline, clock=lambda: now[0], page_size=1)
    assert not fetch_threads()


def test_a_failure_of_the_consumer_leaves_no_thread_and_no_open_stream() -> None:
    class Failing(SnapshotBuilder):
        def add_converted(self, kind: str, item: Any) -> None:
            if kind == "Pod":
                raise RuntimeError("converter failed")
            super().add_converted(kind, item)

    items = cluster_items()
    stream = StreamLister(items, size=100)
    with pytest.raises(RuntimeError, match="converter failed"):
        read(items, stream=stream, builder_factory=lambda: Failing("cluster"))
    assert stream.closed == 1 and not fetch_threads()


# --- pages prepared ahead -------------------------------------------------------------------


def _page(resource: str, items: list[Any], token: str | None = None) -> bytes:
    import orjson  # noqa: PLC0415  # the test's own encoding of a page

    metadata = {"resourceVersion": "1", **({"continue": token} if token else {})}
    return orjson.dumps({"kind": "List", "metadata": metadata, "items": items})


def test_a_prepared_page_replays_into_the_same_builder_state() -> None:
    services = invalid_items()["services"]
    resource = RESOURCES_BY_NAME["services"]
    page = SidePages()(_page("services", services, "tok"), resource)
    assert isinstance(page, Prepared) and page.token == "tok" and page.count == len(services)
    assert [kind for kind, _ in page.entries].count(None) == 2  # the ones with a problem
    ahead, direct = SnapshotBuilder("x"), SnapshotBuilder("x")
    assert replay(page, ahead) == len(services)
    for service in copy.deepcopy(services):
        direct.add({**service, "kind": "Service"})
    assert ahead.problems == direct.problems and ahead.counts == direct.counts
    assert ahead.rejected == direct.rejected
    assert ahead.build(skip_invalid=True) == direct.build(skip_invalid=True)


def test_an_item_that_is_not_an_object_fails_where_the_sequential_read_fails() -> None:
    resource = RESOURCES_BY_NAME["services"]
    services = cluster_items()["services"]
    page = SidePages()(_page("services", [services[0], 1, services[1]]), resource)
    assert isinstance(page, Prepared) and not page.whole and len(page.entries) == 1
    builder = SnapshotBuilder("x")
    with pytest.raises(errors.ClusterError, match="LIST services: an item is not an object"):
        replay(page, builder)
    assert builder.counts == {"Service": 1}

    def lister(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
        if resource == "services":
            return _page(resource, [services[0], 1])
        return FakeLister(cluster_items())(resource, namespace, limit, token)

    items = cluster_items()
    for prefetch in (0, 2):
        with pytest.raises(errors.ClusterError, match="LIST services: an item is not an object"):
            read(items, lister=lister, prefetch=prefetch)  # type: ignore[arg-type]
    assert not fetch_threads()


def test_a_page_that_is_not_a_plain_list_is_left_to_the_reader() -> None:
    raw = b'{"kind":"List","items":{}}'
    assert SidePages()(raw, RESOURCES_BY_NAME["services"]) is raw

    def lister(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
        if resource == "services":
            return raw
        return FakeLister(cluster_items())(resource, namespace, limit, token)

    for prefetch in (0, 2):
        with pytest.raises(errors.ClusterError, match="LIST services: the answer is not a list"):
            read(cluster_items(), lister=lister, prefetch=prefetch)  # type: ignore[arg-type]
    assert not fetch_threads()
