"""Loop mode's exact state check (``--verify-state-every``): each watch-fed store against a
LIST at exactly the resourceVersion it reflects (rebalancer.cluster.read.statecheck.check).

The fake API server of tests/test_watch.py is extended with its history: it serves a LIST at
any version it has not compacted (``resourceVersionMatch=Exact``, paged), can lose one watch
event (the store then really misses it), hold events back (the watch lags), or refuse or
ignore the pinned version. The oracles are hand-written: the object whose event was lost, and
the objects as the test saw them at that version.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.cluster.api.resources import RESOURCES, RESOURCES_BY_NAME
from rebalancer.cluster.read.reader import VersionUnavailable, read_at_version, read_cluster
from rebalancer.cluster.read.statecheck import KindCheck, check, verify
from rebalancer.cluster.read.watch import ClusterWatch
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.model import Snapshot
from tests.builders import cluster_items, list_pod
from tests.fakes import RecordingServer
from tests.test_watch import FAST, FakeApi, eventually

_State = dict[tuple[str, str], dict[str, Any]]


class HistoryApi(FakeApi):
    """The fake API server, keeping each resource's objects at every version it wrote."""

    def __init__(self, items: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__(items)
        self.history: dict[str, list[tuple[int, _State]]] = {
            name: [(self.version, copy.deepcopy(objs))] for name, objs in self.objects.items()
        }
        self.lose_next: set[str] = set()  # resources whose next event no watch receives
        self.held_back: dict[str, list[tuple[int, bytes, bool]]] = {}  # delivered on release
        self.exact: str = "serve"  # "serve", "400", "422" (refused) or "ignore" (answer as now)
        self.pinned: list[tuple[str, str]] = []  # (resource, version) of each pinned LIST

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        with self.lock:
            super().put(resource, obj)
            self._record(resource)

    def delete(self, resource: str, namespace: str, name: str) -> None:
        with self.lock:
            super().delete(resource, namespace, name)
            self._record(resource)

    def _record(self, resource: str) -> None:
        self.history[resource].append((self.version, copy.deepcopy(self.objects[resource])))

    def _emit(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        if resource in self.lose_next and kind != "ERROR":
            self.lose_next.discard(resource)
            return  # written, but its event is lost
        if resource in self.held_back:
            before = len(self.log[resource])
            super()._emit(resource, kind, obj)
            self.held_back[resource] += self.log[resource][before:]
            del self.log[resource][before:]
            return
        super()._emit(resource, kind, obj)

    def hold(self, resource: str) -> None:
        with self.lock:
            self.held_back[resource] = []

    def release(self, resource: str) -> None:
        with self.lock:
            self.log[resource] += self.held_back.pop(resource)
            self.lock.notify_all()

    def at(self, resource: str, version: int) -> _State:
        return next(s for v, s in reversed(self.history[resource]) if v <= version)

    def list_page(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        token: str | None,
        *,
        resource_version: str | None = None,
    ) -> bytes:
        if resource_version is None and token is None:
            return super().list_page(resource, namespace, limit, token)
        with self.lock:
            if token is None:
                assert resource_version is not None
                self.pinned.append((resource, resource_version))
                if self.exact in {"400", "422"}:
                    raise errors.ClientError(int(self.exact), "resourceVersionMatch: Unsupported")
                if self.exact == "ignore":
                    return super().list_page(resource, namespace, limit, token)
                version, start = int(resource_version), 0
            else:
                if ":" not in token:  # a token of an unpinned LIST
                    return super().list_page(resource, namespace, limit, token)
                first, _, rest = token.partition(":")
                version, start = int(first), int(rest)
            if version <= self.compacted:
                raise errors.Gone(410, "too old resource version", verb="list", resource=resource)
            selected = sorted(self.at(resource, version).items())
            page = [o for _, o in selected[start : start + limit]]
            meta: dict[str, Any] = {"resourceVersion": str(version)}
            if start + limit < len(selected):
                meta["continue"] = f"{version}:{start + limit}"
            return orjson.dumps({"kind": "List", "metadata": meta, "items": page})


@pytest.fixture
def api() -> Iterator[HistoryApi]:
    fake = HistoryApi(cluster_items())
    yield fake
    fake.close()


@contextlib.contextmanager
def watching(api: HistoryApi) -> Iterator[ClusterWatch]:
    watch = ClusterWatch(api.list_page, api.watch_lines, settings=FAST, seed=1)
    try:
        yield watch
    finally:
        api.close()
        watch.close()


NAMES = [r.name for r in RESOURCES]


def run_check(
    api: HistoryApi, watch: ClusterWatch, pauses: list[float] | None = None
) -> dict[str, KindCheck]:
    """The exact check over every resource, the fallback a fresh LIST of that resource."""

    def list_at(name: str, version: str) -> Snapshot:
        return read_at_version(
            api.list_page, RESOURCES_BY_NAME[name], version, page_size=3
        ).snapshot

    def fresh(name: str) -> Snapshot:
        resources = [RESOURCES_BY_NAME[name]]
        return read_cluster(
            api.list_page, resources=resources, prefetch=0, skip_invalid=True
        ).snapshot

    def retried(name: str) -> tuple[list[str], int]:
        if pauses is None:
            raise AssertionError(f"{name}: fell back to the retried LIST")
        return verify(lambda: watch.held(name)[1], lambda: fresh(name), sleep=pauses.append)

    return {c.resource: c for c in check(NAMES, watch.held, list_at, retried)}


def holds(watch: ClusterWatch, resource: str, name: str, present: bool = True) -> bool:
    return any(o.name == name for o in getattr(watch.held(resource)[1], resource)) is present


def test_a_watch_that_caught_up_agrees_at_the_version_of_its_last_event(api: HistoryApi) -> None:
    """Every resource is compared at a version, the pods at their last event's, and agrees."""
    with watching(api) as watch:
        watch.snapshot()
        listed_at = str(api.version)
        api.put("pods", list_pod("web-new", "node-c1"))
        api.delete("pods", "data", "db-0")
        last_pod_event = str(api.version)
        eventually(lambda: holds(watch, "pods", "db-0", present=False))
        checks = run_check(api, watch)
    assert {
        name: (c.differences, c.fallback, c.attempts) for name, c in checks.items()
    } == dict.fromkeys(NAMES, ((), "", 1))
    assert checks["pods"].version == last_pod_event
    assert checks["nodes"].version == listed_at  # no event since its LIST
    assert ("pods", last_pod_event) in api.pinned


def test_a_lagging_watch_is_compared_at_the_version_it_reflects(api: HistoryApi) -> None:
    """Events not yet delivered are no difference: the LIST is the one at the store's version."""
    with watching(api) as watch:
        watch.snapshot()
        before = str(api.version)
        api.hold("pods")
        api.put("pods", list_pod("web-late", "node-a1"))
        api.delete("pods", "data", "db-0")
        assert not holds(watch, "pods", "web-late")
        checks = run_check(api, watch)  # no fallback allowed
        assert checks["pods"].version == before
        assert checks["pods"].differences == ()
        api.release("pods")
        eventually(lambda: holds(watch, "pods", "web-late"))


LOST = {
    "added": ("put", list_pod("web-9", "node-a1"), "pods shop/web-9: only in LIST"),
    "deleted": ("delete", ("data", "db-0"), "pods data/db-0: only in watch"),
    "modified": ("put", list_pod("web-0", "node-c1"), "pods shop/web-0: differs"),
}


@pytest.mark.parametrize("event", sorted(LOST))
def test_a_lost_event_is_named_at_an_exact_version(api: HistoryApi, event: str) -> None:
    """The watch never receives one event; a later one moves the store's version past it: the
    exact check names that object, at the later event's version, at the first look."""
    verb, what, line = LOST[event]
    with watching(api) as watch:
        watch.snapshot()
        api.lose_next.add("pods")
        if verb == "put":
            assert isinstance(what, dict)
            api.put("pods", what)
        else:
            api.delete("pods", *what)
        api.put("pods", list_pod("web-later", "node-b1"))
        later = str(api.version)
        eventually(lambda: holds(watch, "pods", "web-later"))
        pauses: list[float] = []
        checks = run_check(api, watch, pauses)
    pods = checks["pods"]
    assert (pods.version, pods.fallback, pods.attempts) == (later, "", 1)
    assert pods.differences == (line,)
    assert pauses == []
    assert all(c.differences == () for name, c in checks.items() if name != "pods")


def test_a_compacted_version_falls_back_to_the_retried_fresh_list(api: HistoryApi) -> None:
    """410 Gone at the store's version: that resource is compared with a fresh LIST instead,
    the reason named; a watch that has caught up agrees at the first look."""
    with watching(api) as watch:
        watch.snapshot()
        api.put("pods", list_pod("web-9", "node-a1"))
        eventually(lambda: holds(watch, "pods", "web-9"))
        with api.lock:
            api.compacted = api.version
        pauses: list[float] = []
        checks = run_check(api, watch, pauses)
    for c in checks.values():
        assert (c.version, c.differences, c.attempts) == (None, (), 1)
        assert c.fallback.startswith("410 Gone: too old resource version"), c.fallback
    assert pauses == []


def test_a_lost_event_after_a_compaction_is_still_named_after_retrying(api: HistoryApi) -> None:
    """Without the exact version, a real gap shows only as a difference that does not settle."""
    with watching(api) as watch:
        watch.snapshot()
        api.lose_next.add("pods")
        api.put("pods", list_pod("web-9", "node-a1"))
        api.put("pods", list_pod("web-later", "node-b1"))
        eventually(lambda: holds(watch, "pods", "web-later"))
        with api.lock:
            api.compacted = api.version
        pauses: list[float] = []
        checks = run_check(api, watch, pauses)
    assert checks["pods"].version is None
    assert (checks["pods"].differences, checks["pods"].attempts) == (
        ("pods shop/web-9: only in LIST",),
        3,
    )
    assert pauses == [1.0, 1.0]


@pytest.mark.parametrize(
    ("exact", "reason"),
    [
        ("400", "refused (400): resourceVersionMatch: Unsupported"),
        ("422", "refused (422): resourceVersionMatch: Unsupported"),
        ("ignore", "answered at resourceVersion {now}, not exactly {then}"),
    ],
)
def test_a_server_that_refuses_or_ignores_exact_falls_back(
    api: HistoryApi, exact: str, reason: str
) -> None:
    """A 400, or a LIST answered at another version than asked: the retried fresh LIST."""
    with watching(api) as watch:
        watch.snapshot()
        then = str(api.version)  # every store's version: nothing has changed since the LISTs
        api.put("pods", list_pod("web-9", "node-a1"))
        now = str(api.version)
        eventually(lambda: holds(watch, "pods", "web-9"))
        api.exact = exact
        checks = run_check(api, watch, [])
    nodes = checks["nodes"]
    assert (nodes.version, nodes.fallback) == (None, reason.format(now=now, then=then))
    assert all(c.differences == () for c in checks.values())


def test_a_store_listing_again_falls_back_without_a_pinned_list() -> None:
    """A store with no version (relisting after a 410) is compared by the retried LIST."""

    def list_at(name: str, version: str) -> Snapshot:
        raise AssertionError("no version to pin")

    checks = check(
        ["pods"],
        lambda name: (None, Snapshot()),
        list_at,
        lambda name: (["pods shop/x: only in LIST"], 3),
    )
    assert checks == [
        KindCheck(
            "pods",
            None,
            "the store has no resourceVersion (listing again after a 410)",
            3,
            ("pods shop/x: only in LIST",),
        )
    ]


def test_a_list_at_a_version_pages_through_that_version(api: HistoryApi) -> None:
    """8 pods in pages of 3 at an earlier version, after the pods changed: as they were then."""
    then = str(api.version)
    objects = [{"kind": "Pod", **copy.deepcopy(o)} for o in api.objects["pods"].values()]
    api.delete("pods", "data", "db-0")
    api.put("pods", list_pod("web-9", "node-a1"))
    result = read_at_version(api.list_page, RESOURCES_BY_NAME["pods"], then, page_size=3)
    assert result.snapshot == snapshot_from_objects(objects, source="cluster")
    assert result.pages == 3
    assert api.pinned == [("pods", then)]


def test_a_gone_version_is_version_unavailable_not_a_restart(api: HistoryApi) -> None:
    """A 410 at a pinned version is never read again from the start (it would be again)."""
    then = str(api.version)
    with api.lock:
        api.compacted = api.version
    with pytest.raises(VersionUnavailable, match="410 Gone"):
        read_at_version(api.list_page, RESOURCES_BY_NAME["pods"], then, page_size=3)
    assert api.pinned == [("pods", then)]


def test_kube_pins_only_the_first_page_of_a_list() -> None:
    """resourceVersion and resourceVersionMatch=Exact on the first page; the continue pages
    carry only their token (the API refuses resourceVersionMatch beside continue)."""
    api = RecordingServer(200, b'{"items":[]}')
    kube = Kube(api.endpoint, source="test")
    kube.list_page("pods", "shop", 3, None, resource_version="4711")
    kube.list_page("pods", "shop", 3, "tok", resource_version="4711")
    kube.list_page("nodes", None, 3, None)
    urls = [u for _, u, _ in api.sent]
    assert urls == [
        "/api/v1/namespaces/shop/pods?limit=3&resourceVersion=4711&resourceVersionMatch=Exact",
        "/api/v1/namespaces/shop/pods?limit=3&continue=tok",
        "/api/v1/nodes?limit=3",
    ]


class KubeOverHistory:
    """The API adapter's reads (:class:`Kube`'s signatures) over the fake, answering JSON."""

    def __init__(self, api: HistoryApi) -> None:
        self.api = api
        self.watch_lines = api.watch_lines
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def list_page(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        *,
        resource_version: str | None = None,
    ) -> bytes:
        return self.api.list_page(
            resource, namespace, limit, continue_token, resource_version=resource_version
        )

    def list_page_as(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        *,
        accept: str,
        status_of: Any = None,
        resource_version: str | None = None,
    ) -> tuple[str, bytes]:
        raw = self.list_page(
            resource, namespace, limit, continue_token, resource_version=resource_version
        )
        return "application/json", raw


def test_the_loop_logs_each_version_and_each_fallback_with_its_reason(
    api: HistoryApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--verify-state-every``'s log: ``state.verified`` with every resource's version; after
    a compaction ``fallback`` with the 410; a lost event ``state.differs`` naming the object,
    the resource as a ``gap`` (found at an exact version)."""
    import structlog  # noqa: PLC0415

    from rebalancer.cluster.read.live import Connection, LiveSource  # noqa: PLC0415

    monkeypatch.setattr("rebalancer.cluster.read.live.VERIFY_PAUSE_SECONDS", 0.0)  # no real waits
    kube: Any = KubeOverHistory(api)
    connection = Connection(None, None, 5, 5, 60, paged=True)
    reader = LiveSource(kube, connection, None, watch=True, verify_every=1)
    try:
        with structlog.testing.capture_logs() as logged:
            reader.read()  # the first read, checked at the LISTs' versions
            listed_at = str(api.version)
            api.lose_next.add("pods")
            api.put("pods", list_pod("web-9", "node-a1"))
            api.put("pods", list_pod("web-later", "node-b1"))
            later = str(api.version)
            watch = reader._watch
            assert watch is not None
            eventually(lambda: holds(watch, "pods", "web-later"))
            reader.verify()
            with api.lock:
                api.compacted = api.version
            reader.verify()
        events = [e for e in logged if e["event"].startswith("state.")]
        assert [e["event"] for e in events] == ["state.verified", "state.differs", "state.differs"]
        first, gap, after = events
        assert first["exact"] == dict.fromkeys(NAMES, listed_at)
        assert (first["fallback"], first["attempts"]) == ({}, 1)
        assert gap["exact"] == {**dict.fromkeys(NAMES, listed_at), "pods": later}
        assert gap["differences"] == ["pods shop/web-9: only in LIST"]
        assert (gap["gap"], gap["unsettled"], gap["fallback"]) == (["pods"], [], {})
        assert after["exact"] == {}
        assert set(after["fallback"]) == set(NAMES)
        assert all(why.startswith("410 Gone") for why in after["fallback"].values())
        assert after["differences"] == ["pods shop/web-9: only in LIST"]
        assert (after["gap"], after["unsettled"], after["attempts"]) == ([], ["pods"], 3)
        assert reader.differences == 2
    finally:
        api.close()
        reader.close()
    assert kube.closed  # the source closes the connection it reads through
