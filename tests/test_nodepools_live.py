"""Karpenter's NodePools read live where served (rebalancer.cluster.read.reader.served and
with_optional, the live source, the watch, ``rebalancer snapshot``): a server without them (404)
or a ClusterRole without them (403) reads as none, logged once, never an error."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
import structlog

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.resources import NODEPOOLS, RESOURCES, RESOURCES_BY_NAME
from rebalancer.cluster.read.live import Connection, LiveSource
from rebalancer.cluster.read.reader import read_cluster, served, with_optional
from rebalancer.cluster.read.snapshot import dump_objects, load_snapshot
from rebalancer.cluster.read.watch import ClusterWatch
from rebalancer.core.model import ZONE_KEY, NodePool, NodeSelectorRequirement, Taint
from tests.builders import cluster_items
from tests.test_watch import FAST, FakeApi

# A NodePool as the API server lists it (karpenter.sh/v1, no kind in a list item).
LISTED_POOL: dict[str, Any] = {
    "metadata": {
        "name": "zone-b",
        "uid": "8d1f0c2e-0000-4000-8000-000000000001",
        "resourceVersion": "4711",
        "generation": 1,
        "annotations": {"karpenter.sh/nodepool-hash": "6178011297542540000"},
        "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update"}],
    },
    "spec": {
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
        "limits": {"cpu": "8", "nodes": "4"},
        "template": {
            "metadata": {"labels": {"team": "web"}},
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "x",
                },
                "expireAfter": "720h",
                "requirements": [
                    {"key": ZONE_KEY, "operator": "In", "values": ["zone-b"]},
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["on-demand"],
                    },
                ],
                "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            },
        },
    },
    "status": {
        "resources": {"cpu": "2", "memory": "8Gi", "nodes": "1", "pods": "110"},
        "conditions": [
            {"type": "ValidationSucceeded", "status": "True", "reason": "ValidationSucceeded"},
            {"type": "NodeClassReady", "status": "True", "reason": "NodeClassReady"},
            {"type": "Ready", "status": "True", "reason": "Ready"},
        ],
    },
}

# What the pool above is, worked out by hand from its fields.
POOL = NodePool(
    name="zone-b",
    requirements=(
        NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b",)),
        NodeSelectorRequirement("karpenter.sh/capacity-type", "In", ("on-demand",)),
    ),
    labels={"team": "web"},
    taints=(Taint("dedicated", "web", "NoSchedule"),),
    limits={"cpu": 8000, "nodes": 4},
    used={"cpu": 2000, "memory": 8 * 1024**3, "nodes": 1, "pods": 110},
    ready=True,
)


class Server:
    """LISTs of ``cluster_items()`` (and the pool when ``pools`` is served); ``refuse`` is the
    error a LIST of NodePools raises instead. Every LIST's first page is recorded."""

    def __init__(self, *, pools: bool = True, refuse: errors.ClusterError | None = None) -> None:
        self.items = cluster_items()
        if pools:
            self.items["nodepools"] = [copy.deepcopy(LISTED_POOL)]
        self.refuse = refuse
        self.lists: list[str] = []

    def list_page(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        token: str | None,
        **_: Any,
    ) -> bytes:
        if token is None:
            self.lists.append(resource)
        if resource == "nodepools" and self.refuse is not None:
            raise self.refuse
        if resource == "nodepools" and resource not in self.items:
            raise errors.NotFound(404, "the server could not find the requested resource")
        listed = self.items.get(resource, [])
        start = int(token) if token else 0
        items = listed[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": "9"}
        if start + limit < len(listed):
            meta["continue"] = str(start + limit)
        return orjson.dumps({"kind": "List", "metadata": meta, "items": items})

    def list_page_as(
        self, resource: str, namespace: str | None, limit: int, token: str | None, **_: Any
    ) -> tuple[str, bytes]:
        return "application/json", self.list_page(resource, namespace, limit, token)

    def list_stream(self, resource: str, namespace: str | None, **_: Any) -> Iterator[bytes]:
        raise errors.UnexpectedMediaType("LIST pods: answered application/json")

    class _Answer:
        status = 404
        body = b"{}"

    def request(self, *_: Any, **__: Any) -> Any:
        return self._Answer()  # /version: no minor

    def close(self) -> None:
        pass


FORBIDDEN = errors.Forbidden(
    403, "nodepools.karpenter.sh is forbidden", verb="list", resource="nodepools.karpenter.sh"
)


def _source(server: Server) -> LiveSource:
    return LiveSource(server, Connection(None, None, 5, 60, 120), None)  # type: ignore[arg-type]


def test_the_nodepools_resource_is_karpenters_v1_cluster_scoped() -> None:
    assert NODEPOOLS.path(None) == "/apis/karpenter.sh/v1/nodepools"
    assert NODEPOOLS.path("shop") == "/apis/karpenter.sh/v1/nodepools"  # not namespaced
    assert NODEPOOLS.rbac_name == "nodepools.karpenter.sh"
    assert RESOURCES_BY_NAME["nodepools"] is NODEPOOLS
    assert NODEPOOLS not in RESOURCES  # never read where not served


@pytest.mark.parametrize(
    ("server", "found", "reason"),
    [
        (Server(), (NODEPOOLS,), None),
        (Server(pools=False), (), "not served"),
        (Server(refuse=FORBIDDEN), (), "forbidden"),
    ],
)
def test_served_asks_one_page_of_each_optional_kind(
    server: Server, found: tuple[Any, ...], reason: str | None
) -> None:
    with structlog.testing.capture_logs() as logged:
        assert served(server.list_page) == found
    assert server.lists == ["nodepools"]
    absent = [e for e in logged if e["event"] == "read.absent"]
    if reason is None:
        assert absent == []
    else:
        assert [(e["resource"], e["reason"]) for e in absent] == [
            ("nodepools.karpenter.sh", reason)
        ]


@pytest.mark.parametrize(
    "failure",
    [
        errors.ServerError(500, "etcd is down", verb="list", resource="nodepools.karpenter.sh"),
        errors.Unauthorized(401, "Unauthorized", verb="list", resource="nodepools.karpenter.sh"),
        errors.Unreachable("connection refused"),
    ],
)
def test_any_other_failure_of_the_probe_is_an_error(failure: errors.ClusterError) -> None:
    with pytest.raises(type(failure)):
        served(Server(refuse=failure).list_page)


def test_the_live_source_reads_the_pools_where_served() -> None:
    snapshot = _source(Server()).read()
    assert snapshot.node_pools == (POOL,)
    assert len(snapshot.nodes) == 3  # and the rest as without them


@pytest.mark.parametrize("server", [Server(pools=False), Server(refuse=FORBIDDEN)])
def test_without_pools_the_live_read_is_the_read_it_was_and_says_so_once(server: Server) -> None:
    source = _source(server)
    with structlog.testing.capture_logs() as logged:
        first, second = source.read(), source.read()
    alone = read_cluster(server.list_page, skip_invalid=True).snapshot
    assert first == second == alone
    assert first.node_pools == ()
    assert server.lists.count("nodepools") == 1  # asked once, by the first read
    assert len([e for e in logged if e["event"] == "read.absent"]) == 1


def test_a_served_pool_is_read_again_by_every_read() -> None:
    server = Server()
    source = _source(server)
    assert source.read().node_pools == (POOL,)
    server.items["nodepools"][0]["status"]["resources"]["cpu"] = "6"
    assert source.read().node_pools[0].used["cpu"] == 6000
    # the probe once, then one LIST of them per read
    assert server.lists.count("nodepools") == 3


def test_the_snapshot_command_keeps_the_pools_after_the_rest(tmp_path: Any) -> None:
    """What ``rebalancer snapshot`` does: the objects kept, NodePools last, trimmed of their
    managedFields; the file loads into the snapshot the live read gives."""
    server = Server()
    read: dict[str, Any] = {"keep_objects": True, "trim": True, "skip_invalid": True}
    result = read_cluster(server.list_page, **read)
    result = with_optional(result, server.list_page, served(server.list_page), **read)
    assert result.objects is not None
    last = result.objects[-1]
    assert (last["kind"], last["apiVersion"], last["metadata"]["name"]) == (
        "NodePool",
        "karpenter.sh/v1",
        "zone-b",
    )
    assert "managedFields" not in last["metadata"]
    assert dict(result.counts)["nodepools"] == 1
    path = tmp_path / "snap.json"
    path.write_bytes(dump_objects(result.objects, "json"))
    assert load_snapshot(path).node_pools == (POOL,)
    assert load_snapshot(path) == _source(Server()).read()


def test_the_watch_keeps_the_pools_current() -> None:
    items = cluster_items()
    items["nodepools"] = [copy.deepcopy(LISTED_POOL)]
    api = FakeApi(items)
    resources = (*RESOURCES, *served(api.list_page))
    assert resources[-1] is NODEPOOLS
    with ClusterWatch(api.list_page, api.watch_lines, resources=resources, settings=FAST) as w:
        assert w.snapshot().node_pools == (POOL,)
        changed = copy.deepcopy(LISTED_POOL)
        changed["status"]["conditions"][-1]["status"] = "False"
        api.put("nodepools", changed)
        _eventually(lambda: not w.snapshot().node_pools[0].ready)
        assert w.snapshot() == api.expected()


def test_a_watching_source_without_pools_watches_what_it_did() -> None:
    api = FakeApi(cluster_items())

    class Kube:
        list_page = api.list_page
        watch_lines = api.watch_lines

        def list_page_as(self, *args: Any, **_: Any) -> tuple[str, bytes]:
            return "application/json", api.list_page(*args)

        def request(self, *_: Any, **__: Any) -> Any:
            return Server._Answer()

        def close(self) -> None:
            api.closed = True

    source = LiveSource(
        Kube(),  # type: ignore[arg-type]
        Connection(None, None, 5, 60, 120, paged=True),
        None,
        watch=True,
    )
    try:
        snapshot = source.read()
        assert snapshot.node_pools == ()
        assert sorted({r for r, _ in api.watch_calls}) == sorted(r.name for r in RESOURCES)
    finally:
        source.close()


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    from tests.test_watch import eventually  # noqa: PLC0415

    eventually(check, timeout)
