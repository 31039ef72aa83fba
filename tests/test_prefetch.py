"""The read path's page pipeline: the prefetching PageFetcher, continue tokens, managedFields."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import orjson
import pytest

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.resources import RESOURCES, RESOURCES_BY_NAME
from rebalancer.cluster.read.reader import (
    PageFetcher,
    continue_token,
    drop_managed_fields,
    read_cluster,
)
from tests.builders import cluster_items
from tests.fakes import FakeLister

PODS = RESOURCES_BY_NAME["pods"]
NODES = RESOURCES_BY_NAME["nodes"]
MANAGED = [
    {
        "manager": "kubectl-create",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2024-05-01T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:name": {}}}},
        },
    }
]


def _page(items: list[dict[str, Any]], token: str | None = None, kind: str = "PodList") -> bytes:
    """A list page as the API server writes it: kind, apiVersion, metadata, then items."""
    metadata: dict[str, Any] = {"resourceVersion": "7"}
    if token:
        metadata.update({"continue": token, "remainingItemCount": 3})
    return orjson.dumps({"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": items})


def _managed_pod(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "shop", **metadata, "managedFields": MANAGED},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def _without_managed(page: bytes) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(page)
    for item in parsed["items"]:
        item["metadata"].pop("managedFields", None)
    return parsed


class GatedLister(FakeLister):
    """A FakeLister that records which thread calls it and can block or fail on a call."""

    def __init__(self, *args: Any, fail_at: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: set[str] = set()
        self.fail_at = fail_at
        self.gate = threading.Event()
        self.gate.set()

    def __call__(
        self, resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        self.threads.add(threading.current_thread().name)
        if not self.gate.wait(10):  # bounded: a test that forgets the gate fails, never hangs
            raise TimeoutError("gate never opened")
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            self.calls.append((resource, namespace, limit, token))
            raise errors.Unreachable("cannot reach https://127.0.0.1:6443: connection refused")
        return super().__call__(resource, namespace, limit, token)


PLAN = [(r, None) for r in RESOURCES]


def _expected_calls(page_size: int) -> list[tuple[str, None, int, str | None]]:
    """Every page of every resource in order, as FakeLister numbers its tokens."""
    calls: list[tuple[str, None, int, str | None]] = []
    for resource, items in ((r.name, cluster_items().get(r.name, [])) for r in RESOURCES):
        start = 0
        while True:
            calls.append((resource, None, page_size, f"{resource}-{start}" if start else None))
            start += page_size
            if start >= len(items):
                break
    return calls


# --------------------------------------------------------------------------------------------
# PageFetcher


@pytest.mark.parametrize("depth", [0, 1, 2, 5])
def test_pages_come_in_order_with_their_tokens(depth: int) -> None:
    """Every resource from the start, then its continue tokens, in the plan's order."""
    lister = GatedLister(cluster_items())
    with PageFetcher(lister, PLAN, 3, depth) as fetcher:
        got = [(res.name, token) for res, _, token in fetcher]
    assert lister.calls == _expected_calls(3)
    assert got == [
        (name, nxt[3] if nxt is not None and nxt[0] == name else None)
        for (name, _, _, _), nxt in zip(lister.calls, [*lister.calls[1:], None], strict=True)
    ]
    assert not fetcher.alive


def test_depth_zero_fetches_in_the_callers_thread_and_others_in_one_thread() -> None:
    """No thread without prefetch; with it, every request comes from the one fetch thread."""
    serial = GatedLister(cluster_items())
    with PageFetcher(serial, PLAN, 3, 0) as fetcher:
        list(fetcher)
    assert serial.threads == {threading.current_thread().name}
    threaded = GatedLister(cluster_items())
    with PageFetcher(threaded, PLAN, 3, 2) as fetcher:
        list(fetcher)
    assert threaded.threads == {"rebalancer-list-pages"}


def test_the_thread_runs_at_most_depth_pages_ahead() -> None:
    """With nothing consumed, the thread stops after depth queued pages plus one in hand."""
    lister = GatedLister(cluster_items())
    with PageFetcher(lister, PLAN, 1, 2) as fetcher:
        deadline = time.monotonic() + 5
        while len(lister.calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # give it the chance to overrun, if it would
        assert len(lister.calls) == 3
        assert fetcher.alive
    assert not fetcher.alive


def test_an_error_is_raised_in_place_of_its_page_and_the_thread_stops() -> None:
    """Pages before the failing request arrive; then its error; nothing is requested after."""
    lister = GatedLister(cluster_items(), fail_at=4)
    seen: list[str] = []
    with PageFetcher(lister, PLAN, 3, 2) as fetcher:
        with pytest.raises(errors.Unreachable, match="connection refused"):
            for res, _, _ in fetcher:
                seen.append(res.name)
        assert len(seen) == 4
        deadline = time.monotonic() + 5
        while fetcher.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not fetcher.alive
    assert len(lister.calls) == 5


def test_leaving_early_stops_the_thread() -> None:
    """A consumer that breaks off (an exception of its own) leaves no thread behind."""
    lister = GatedLister(cluster_items())
    with (
        pytest.raises(RuntimeError, match="converter failed"),
        PageFetcher(lister, PLAN, 1, 2) as fetcher,
    ):
        for _ in fetcher:
            raise RuntimeError("converter failed")
    assert not fetcher.alive
    calls = len(lister.calls)
    time.sleep(0.1)
    assert len(lister.calls) == calls  # nothing more requested


def test_a_blocked_request_is_abandoned_after_the_timeout() -> None:
    """close() waits a bounded time for a request in flight, then leaves the daemon thread."""
    lister = GatedLister(cluster_items())
    fetcher = PageFetcher(lister, PLAN, 3, 1)
    lister.gate.clear()
    with fetcher:
        time.sleep(0.05)
        t0 = time.monotonic()
        fetcher.close(timeout=0.2)
        assert time.monotonic() - t0 < 2
    lister.gate.set()  # let it end: it puts nothing once stopped


def test_iterating_a_threaded_fetcher_outside_with_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="inside 'with'"):
        list(PageFetcher(GatedLister(cluster_items()), PLAN, 3, 2))


# --------------------------------------------------------------------------------------------
# read_cluster with and without the thread


@pytest.mark.parametrize("prefetch", [0, 1, 2])
def test_prefetch_builds_the_same_snapshot_and_objects(prefetch: int) -> None:
    """The pipeline changes nothing in what is read: same snapshot, objects, counts, pages."""
    base = read_cluster(FakeLister(cluster_items()), page_size=2, keep_objects=True, prefetch=0)
    got = read_cluster(
        FakeLister(cluster_items()), page_size=2, keep_objects=True, prefetch=prefetch
    )
    assert got == base


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_410_mid_read_restarts_the_whole_read(prefetch: int) -> None:
    """The fetch thread's 410 reaches read_cluster, which reads everything again, once."""
    lister = FakeLister(cluster_items(), expire_once="pods-3")
    result = read_cluster(lister, page_size=3, prefetch=prefetch)
    assert len(result.snapshot.pods) == 8
    names = [c[0] for c in lister.calls]
    assert names.count("nodes") == 2
    assert names[-1] == "namespaces"
    assert threading.active_count() == 1 or all(
        t.name != "rebalancer-list-pages" for t in threading.enumerate()
    )


def test_a_410_every_time_gives_up_after_the_restarts() -> None:
    class AlwaysGone(FakeLister):
        def __call__(
            self, resource: str, namespace: str | None, limit: int, token: str | None
        ) -> bytes:
            if token is not None:
                self.expire_once = token
            return super().__call__(resource, namespace, limit, token)

    lister = AlwaysGone(cluster_items())
    with pytest.raises(errors.Gone):
        read_cluster(lister, page_size=3)
    assert [c[0] for c in lister.calls].count("nodes") == 4  # MAX_RESTARTS + 1 reads


def test_a_forbidden_list_propagates_from_the_thread() -> None:
    """An RBAC error met by the fetch thread is the reader's error, resource named."""

    def lister(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
        if resource == "services":
            raise errors.Forbidden(403, "nope", verb="list", resource="services")
        return FakeLister(cluster_items())(resource, namespace, limit, token)

    with pytest.raises(errors.Forbidden, match="cannot list services"):
        read_cluster(lister, prefetch=2)


def test_negative_prefetch_is_refused() -> None:
    with pytest.raises(ValueError, match="prefetch"):
        read_cluster(FakeLister(cluster_items()), prefetch=-1)


def test_a_non_object_item_is_a_cluster_error() -> None:
    def lister(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
        return _page([1, 2] if resource == "pods" else [])  # type: ignore[list-item]

    with pytest.raises(errors.ClusterError, match="an item is not an object"):
        read_cluster(lister)


# --------------------------------------------------------------------------------------------
# continue_token


def test_continue_token_is_read_from_the_head_without_the_items() -> None:
    raw = _page([_managed_pod("a")], token="tok-1")
    assert continue_token(raw, PODS) == "tok-1"
    assert continue_token(_page([_managed_pod("a")]), PODS) is None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"items":[],"metadata":{"continue":"tok-2"}}',  # items first
        b'{"metadata":{"continue":"tok-2"},"extra":{"items":[1]},"items":[]}',  # nested items
        b' {"kind" : "PodList", "metadata" : {"continue" : "tok-2"} , "items" : []}',
        b'{"kind":"PodList","metadata":{"continue":"tok-2","note":"a \\"items\\": b"},"items":[]}',
    ],
)
def test_continue_token_falls_back_to_a_full_parse(raw: bytes) -> None:
    """Odd layouts are parsed whole and still give the right token."""
    assert continue_token(raw, PODS) == "tok-2"


def test_continue_token_of_garbage_is_a_cluster_error() -> None:
    with pytest.raises(errors.ClusterError, match="not JSON"):
        continue_token(b"<html>", PODS)
    with pytest.raises(errors.ClusterError, match="not a list"):
        continue_token(b'{"items":{}}', PODS)
    assert continue_token(b'{"metadata":{"continue":""},"items":[]}', PODS) is None


# --------------------------------------------------------------------------------------------
# drop_managed_fields


def test_managed_fields_are_cut_out_and_nothing_else() -> None:
    items = [_managed_pod(f"p{i}", labels={"app": "web"}) for i in range(3)]
    raw = _page(items, token="t")
    cut = drop_managed_fields(raw)
    assert len(cut) < len(raw)
    assert b"managedFields" not in cut
    assert orjson.loads(cut) == _without_managed(raw)


def test_a_page_without_managed_fields_is_returned_as_is() -> None:
    raw = _page([{"metadata": {"name": "a"}, "spec": {}}])
    assert drop_managed_fields(raw) is raw


def test_kinds_without_a_spec_are_left_alone() -> None:
    """PriorityClasses have no spec: nothing is cut, and never across into the next item."""
    classes = [
        {"metadata": {"name": n, "managedFields": MANAGED}, "value": v}
        for n, v in (("low", 1), ("high", 1000))
    ]
    raw = _page(classes, kind="PriorityClassList")
    assert drop_managed_fields(raw) == raw
    # An item without spec followed by one with spec: only the second one's is cut.
    mixed = _page([classes[0], _managed_pod("p")])
    cut = drop_managed_fields(mixed)
    parsed = orjson.loads(cut)
    assert parsed["items"][0] == classes[0]
    assert "managedFields" not in parsed["items"][1]["metadata"]
    assert parsed["items"][1]["spec"] == _managed_pod("p")["spec"]


def test_lookalike_strings_are_not_cut() -> None:
    """The patterns inside string values are escaped, so they never match."""
    tricky = '"managedFields":[x]},"spec":{'
    pod = _managed_pod("p", annotations={"a": tricky, tricky: "b"})
    pod["metadata"].pop("managedFields")
    raw = _page([pod, _managed_pod("q")])
    parsed = orjson.loads(drop_managed_fields(raw))
    assert parsed == _without_managed(raw)
    assert parsed["items"][0]["metadata"]["annotations"] == {"a": tricky, tricky: "b"}


def test_an_array_that_does_not_close_before_spec_is_left_alone() -> None:
    """managedFields not last in metadata (a field after it): no cut for that item."""
    pod = _managed_pod("p")
    pod["metadata"]["zz"] = "after"
    raw = _page([pod])
    assert orjson.loads(drop_managed_fields(raw)) == orjson.loads(raw)


def test_the_reader_result_is_the_same_with_managed_fields_in_the_answer() -> None:
    """Pages carrying managedFields read into the same snapshot and objects as pages without."""
    plain = cluster_items()
    managed = copy.deepcopy(plain)
    for items in managed.values():
        for item in items:
            item["metadata"]["managedFields"] = MANAGED
    a = read_cluster(FakeLister(plain), page_size=3, keep_objects=True)
    b = read_cluster(FakeLister(managed), page_size=3, keep_objects=True)
    assert a == b


def test_nodes_pages_are_cut_too() -> None:
    node = {
        "metadata": {"name": "n1", "labels": {"zone": "a"}, "managedFields": MANAGED},
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {"allocatable": {"cpu": "4"}},
    }
    raw = _page([node, node], kind="NodeList")
    assert orjson.loads(drop_managed_fields(raw)) == _without_managed(raw)
    assert continue_token(raw, NODES) is None
