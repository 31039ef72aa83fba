"""Loop mode's LIST + WATCH (rebalancer.cluster.read.watch) against a fake API server.

The fake keeps objects per resource with a global resourceVersion, serves paginated LISTs and
watch streams (events after a version, bookmarks, 410 for versions it has compacted, broken
connections). The oracle for every snapshot is the converter on the fake's current objects.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.resources import OPTIONAL_RESOURCES, RESOURCES, RESOURCES_BY_NAME
from rebalancer.cluster.read.watch import ClusterWatch, WatchSettings
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.errors import InputError
from rebalancer.core.model import Snapshot
from tests.builders import cluster_items

FAST = WatchSettings(page_size=3, backoff_initial=0.01, backoff_max=0.05, sync_timeout=10)


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


class FakeApi:
    """Objects per resource, one resourceVersion counter, an event log per resource. An
    optional resource (NodePools) is served only when ``items`` has it; else a LIST is 404."""

    def __init__(self, items: dict[str, list[dict[str, Any]]]) -> None:
        self.lock = threading.Condition()
        self.version = 100
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.served = (*RESOURCES, *(r for r in OPTIONAL_RESOURCES if r.name in items))
        # (version, line, is an ERROR event): ERROR events reach only the watches open then
        self.log: dict[str, list[tuple[int, bytes, bool]]] = {r.name: [] for r in self.served}
        self.compacted = 0  # versions at or below this answer 410
        self.list_calls: list[tuple[str, str | None]] = []
        self.watch_calls: list[tuple[str, str]] = []
        self.break_next: dict[str, int] = {}  # resource -> watch opens to refuse
        self.closed = False
        for resource in self.served:
            store = self.objects.setdefault(resource.name, {})
            for item in items.get(resource.name, []):
                obj = copy.deepcopy(item)
                self.version += 1
                obj["metadata"]["resourceVersion"] = str(self.version)
                store[self._key(obj)] = obj

    @staticmethod
    def _key(obj: dict[str, Any]) -> tuple[str, str]:
        meta = obj["metadata"]
        return meta.get("namespace", ""), meta["name"]

    # --- the cluster changing ----------------------------------------------------------

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        with self.lock:
            obj = copy.deepcopy(obj)
            self.version += 1
            obj["metadata"]["resourceVersion"] = str(self.version)
            key = self._key(obj)
            kind = "MODIFIED" if key in self.objects[resource] else "ADDED"
            self.objects[resource][key] = obj
            self._emit(resource, kind, obj)

    def delete(self, resource: str, namespace: str, name: str) -> None:
        with self.lock:
            obj = self.objects[resource].pop((namespace, name))
            self.version += 1
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(self.version)
            self._emit(resource, "DELETED", obj)

    def bookmark(self, resource: str) -> None:
        with self.lock:
            self.version += 1
            meta = {"resourceVersion": str(self.version)}
            self._emit(resource, "BOOKMARK", {"metadata": meta})

    def error_event(self, resource: str, code: int) -> None:
        with self.lock:
            status = {"kind": "Status", "code": code, "message": f"fake {code}"}
            self._emit(resource, "ERROR", status)

    def _emit(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        spec = RESOURCES_BY_NAME[resource]
        body = dict(obj)
        if kind not in {"ERROR", "BOOKMARK"}:
            body = {"kind": spec.kind, "apiVersion": spec.api_version, **obj}
        line = orjson.dumps({"type": kind, "object": body})
        if kind == "ERROR":
            self.version += 1
        self.log[resource].append((self.version, line, kind == "ERROR"))
        self.lock.notify_all()

    def expected(self) -> Snapshot:
        objects = []
        for resource in self.served:
            for obj in self.objects[resource.name].values():
                objects.append({"kind": resource.kind, **copy.deepcopy(obj)})
        return snapshot_from_objects(objects, source="cluster")

    # --- the transport the watch uses ----------------------------------------------------

    def list_page(
        self, resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        with self.lock:
            if token is None:
                self.list_calls.append((resource, namespace))
            if resource not in self.objects:
                raise errors.NotFound(404, "the server could not find the requested resource")
            selected = sorted(self.objects[resource].items())
            start = int(token) if token else 0
            page = [o for _, o in selected[start : start + limit]]
            meta: dict[str, Any] = {"resourceVersion": str(self.version)}
            if start + limit < len(selected):
                meta["continue"] = str(start + limit)
            return orjson.dumps({"kind": "List", "metadata": meta, "items": page})

    def watch_lines(
        self, resource: str, namespace: str | None, version: str, timeout: int
    ) -> Iterator[bytes]:
        with self.lock:
            self.watch_calls.append((resource, version))
            if self.break_next.get(resource):
                self.break_next[resource] -= 1
                raise errors.Unreachable("fake: connection refused")
            if int(version) <= self.compacted:
                raise errors.Gone(410, "too old resource version", verb="watch", resource=resource)
            opened = len(self.log[resource])
        return self._stream(resource, int(version), opened)

    def _stream(self, resource: str, version: int, opened: int) -> Iterator[bytes]:
        sent = version

        def pending() -> list[tuple[int, bytes, bool]]:
            return [
                entry
                for i, entry in enumerate(self.log[resource])
                if entry[0] > sent and (not entry[2] or i >= opened)
            ]

        while True:
            with self.lock:
                found = pending()
                if not found and not self.closed:
                    self.lock.wait(0.05)
                    found = pending()
                if self.closed:
                    return
            for v, line, is_error in found:
                sent = max(sent, v)
                yield line
                if is_error:
                    return  # the server ends a watch after an ERROR event

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify_all()


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi(cluster_items())
    yield fake
    fake.close()


@contextlib.contextmanager
def watching(api: FakeApi, **kwargs: Any) -> Iterator[ClusterWatch]:
    watch = ClusterWatch(api.list_page, api.watch_lines, settings=FAST, seed=1, **kwargs)
    try:
        yield watch
    finally:
        api.close()  # ends the fake's streams, so the threads see the stop at once
        watch.close()


def settled(watch: ClusterWatch, api: FakeApi) -> bool:
    """The watch's snapshot equals the fake's objects now (a rejected object: not yet)."""
    try:
        return watch.snapshot() == api.expected()
    except InputError:
        return False


def _pod(name: str, node: str, app: str = "web") -> dict[str, Any]:
    from tests.builders import list_pod as make  # noqa: PLC0415

    return make(name, node, app=app)


def test_first_snapshot_is_the_list_and_later_ones_follow_the_events(api: FakeApi) -> None:
    with watching(api) as watch:
        first = watch.snapshot()
        assert first == api.expected()
        assert len(first.pods) == 8
        lists = len(api.list_calls)
        assert lists == len(RESOURCES)  # one LIST per resource
        api.put("pods", _pod("web-new", "node-c1"))
        moved = _pod("web-0", "node-c1")
        api.put("pods", moved)
        api.delete("pods", "data", "db-0")
        api.put("nodes", {"metadata": {"name": "node-d1", "labels": {"z": "d"}}})
        eventually(lambda: settled(watch, api))
        second = watch.snapshot()
        assert {p.name for p in second.pods} == {f"web-{i}" for i in range(7)} | {"web-new"}
        assert next(p for p in second.pods if p.name == "web-0").node_name == "node-c1"
        assert len(api.list_calls) == lists  # no LIST after the first
        assert watch.counts["pods"]["events"] == 3


def test_a_watch_resumes_from_the_last_version_seen_bookmarks_included(api: FakeApi) -> None:
    with watching(api) as watch:
        watch.snapshot()
        api.bookmark("nodes")
        eventually(lambda: watch.counts["nodes"]["bookmarks"] == 1)
        mark = str(api.version)
        api.break_next["nodes"] = 2
        api.error_event("nodes", 500)  # ends the watch; it is opened again from the bookmark
        eventually(lambda: watch.counts["nodes"]["watches"] >= 2)
        resumed = [v for r, v in api.watch_calls if r == "nodes"][1:]
        assert resumed and set(resumed) == {mark}
        assert watch.counts["nodes"]["lists"] == 1  # resumed, never listed again
        api.put("nodes", {"metadata": {"name": "node-e1"}})
        eventually(lambda: settled(watch, api))


def test_gone_lists_again_then_watches_from_the_new_list(api: FakeApi) -> None:
    with watching(api) as watch:
        watch.snapshot()
        with api.lock:
            api.compacted = api.version  # every version so far has left the window
        api.put("pods", _pod("web-9", "node-a1"))
        api.error_event("pods", 410)
        eventually(lambda: watch.counts["pods"]["lists"] == 2)
        eventually(lambda: settled(watch, api))
        assert watch.counts["pods"]["gone"] >= 1
        assert [r for r, _ in api.list_calls].count("pods") == 2
        assert [r for r, _ in api.list_calls].count("nodes") == 1


def test_a_refused_watch_is_retried_with_backoff_then_resumes(api: FakeApi) -> None:
    with watching(api) as watch:
        watch.snapshot()
        api.break_next["services"] = 3
        api.error_event("services", 500)
        eventually(lambda: watch.counts["services"]["failures"] >= 4)
        api.put("services", {"metadata": {"name": "new", "namespace": "shop"}, "spec": {}})
        eventually(lambda: settled(watch, api))
        assert watch.counts["services"]["lists"] == 1


def test_a_watch_failing_too_long_fails_the_pass(api: FakeApi) -> None:
    now = [0.0]
    settings = WatchSettings(page_size=50, backoff_initial=0.01, backoff_max=0.02, stale_after=60)
    watch = ClusterWatch(
        api.list_page, api.watch_lines, settings=settings, clock=lambda: now[0], seed=1
    )
    try:
        watch.snapshot()
        api.break_next["pods"] = 10**6
        api.error_event("pods", 500)
        eventually(lambda: watch.counts["pods"]["failures"] >= 2)
        watch.snapshot()  # failing, but not for long: the stores are still served
        now[0] = 61.0
        with pytest.raises(errors.Unreachable, match="connection refused"):
            watch.snapshot()
        api.break_next["pods"] = 0
        eventually(lambda: watch.counts["pods"]["watches"] >= 2)
        assert watch.snapshot() == api.expected()
    finally:
        api.close()
        watch.close()


def test_an_object_the_converter_rejects_fails_the_pass_until_it_is_gone(api: FakeApi) -> None:
    with watching(api) as watch:
        watch.snapshot()
        bad = _pod("web-bad", "node-a1")
        bad["spec"]["priority"] = "high"
        api.put("pods", bad)

        def rejected() -> bool:
            try:
                watch.snapshot()
            except InputError as exc:
                return exc.problems == (
                    'Pod shop/web-bad: spec.priority: must be an integer, got "high"',
                )
            return False

        eventually(rejected)
        api.delete("pods", "shop", "web-bad")
        eventually(lambda: settled(watch, api))


def test_a_namespace_scopes_the_namespaced_resources(api: FakeApi) -> None:
    with watching(api, namespace="shop") as watch:
        watch.snapshot()
        scopes = dict(api.list_calls)
        assert scopes["pods"] == "shop" and scopes["nodes"] is None


def test_a_forbidden_first_list_is_the_pass_error() -> None:
    def list_page(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
        raise errors.Forbidden(403, "no", verb="list", resource=resource)

    def watch_lines(resource: str, namespace: str | None, version: str, t: int) -> Iterator[bytes]:
        raise AssertionError("never watched before a LIST")

    with (
        ClusterWatch(list_page, watch_lines, settings=FAST) as watch,
        pytest.raises(errors.Forbidden),
    ):
        watch.snapshot()


def test_skip_invalid_leaves_the_namespace_out_as_a_fresh_read_does(api: FakeApi) -> None:
    from rebalancer.cluster.read.reader import read_cluster  # noqa: PLC0415  # the oracle

    with watching(api) as watch:
        watch.snapshot()
        bad = _pod("web-bad", "node-a1")
        bad["spec"]["priority"] = "high"
        api.put("pods", bad)

        def skipped() -> bool:
            return bool(watch.snapshot(skip_invalid=True) and watch.rejected)

        eventually(skipped)
        fresh = read_cluster(api.list_page, skip_invalid=True, prefetch=0)
        assert watch.snapshot(skip_invalid=True) == fresh.snapshot
        assert watch.rejected == fresh.rejected
        assert [(r.namespace, r.name) for r in watch.rejected] == [("shop", "web-bad")]
        assert {p.namespace for p in fresh.snapshot.pods} == {"data"}


# -- --verify-state-every: the watch-fed state against a fresh LIST -----------------------------


def test_the_state_check_agrees_once_the_watch_caught_up(api: FakeApi) -> None:
    """A change the watch has delivered: the check finds no difference, at the first look."""
    from rebalancer.cluster.read.statecheck import verify  # noqa: PLC0415

    with watching(api) as watch:
        watch.snapshot()
        api.put("pods", _pod("web-0", "node-c1"))
        eventually(lambda: settled(watch, api))
        pauses: list[float] = []
        found, attempts = verify(watch.snapshot, api.expected, sleep=pauses.append)
        assert (found, attempts, pauses) == ([], 1, [])


def test_the_state_check_names_what_the_watch_missed_after_retrying(api: FakeApi) -> None:
    """A LIST that has a pod the stores lack, another moved, and one the stores have that the
    LIST has not: named by kind and namespace/name, after 3 looks 1 s apart."""
    from rebalancer.cluster.read.statecheck import verify  # noqa: PLC0415

    with watching(api) as watch:
        watched = watch.snapshot()
        objects = [
            {"kind": r.kind, **copy.deepcopy(o)}
            for r in RESOURCES
            for o in api.objects[r.name].values()
            if not (r.name == "pods" and o["metadata"]["name"] == "web-1")
        ]
        objects.append({"kind": "Pod", **_pod("ghost", "node-a1")})
        moved = next(o for o in objects if o["metadata"].get("name") == "web-0")
        moved["spec"]["nodeName"] = "node-c1"
        listed = snapshot_from_objects(objects, source="cluster")
        pauses: list[float] = []
        found, attempts = verify(lambda: watched, lambda: listed, sleep=pauses.append)
        ns = next(p.namespace for p in watched.pods if p.name == "web-1")
        assert sorted(found) == [
            f"pods {ns}/ghost: only in LIST",
            f"pods {ns}/web-0: differs",
            f"pods {ns}/web-1: only in watch",
        ]
        assert (attempts, pauses) == (3, [1.0, 1.0])


class StepClock:
    """A clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_placements_are_what_moves_a_spread(api: FakeApi) -> None:
    """last_placement moves for a pod bound (new or to another node), deleted, or starting to
    terminate; not for a label change, another kind's change, or the first LIST."""
    clock = StepClock()
    with watching(api, clock=clock) as watch:
        watch.snapshot()
        assert watch.last_placement() is None  # the first LIST is not a change

        def after(change: Callable[[], None]) -> float | None:
            clock.now += 10
            before = api.version
            change()
            eventually(lambda: int(watch.held("pods")[0] or 0) >= before + 1 or settled(watch, api))
            eventually(lambda: settled(watch, api))
            return watch.last_placement()

        labelled = _pod("web-1", "node-a1")
        labelled["metadata"]["labels"]["extra"] = "x"
        assert after(lambda: api.put("pods", labelled)) is None  # same node: no placement
        assert after(lambda: api.put("nodes", {"metadata": {"name": "n-x"}})) is None
        assert after(lambda: api.put("pods", _pod("web-new", "node-c1"))) == clock.now
        assert after(lambda: api.put("pods", _pod("web-0", "node-c1"))) == clock.now  # moved
        assert after(lambda: api.delete("pods", "data", "db-0")) == clock.now
        leaving = _pod("web-2", "node-a1")
        leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        assert after(lambda: api.put("pods", leaving)) == clock.now
