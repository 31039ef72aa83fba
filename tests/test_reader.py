"""The paginated reader: pages of raw JSON in, the same Snapshot as the equivalent snapshot file."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.cluster.api.resources import RESOURCES
from rebalancer.cluster.read.reader import read_cluster
from rebalancer.core.errors import EXIT_CLUSTER, InputError
from tests.builders import cluster_items
from tests.fakes import FakeLister, RecordingServer


def snapshot_file(tmp_path: Path, items: Mapping[str, list[dict[str, Any]]]) -> Path:
    """The same objects as one kind: List file, as `kubectl get ... -o yaml` writes it."""
    objects = []
    for resource in RESOURCES:
        for item in items.get(resource.name, []):
            objects.append(
                {"apiVersion": resource.api_version, "kind": resource.kind, **copy.deepcopy(item)}
            )
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def test_three_pages_convert_into_the_same_model_as_the_snapshot_file(tmp_path: Path) -> None:
    """Pods read in 3 pages of 3 give exactly the Snapshot that the equivalent file gives."""
    from rebalancer.cluster.read.snapshot import load_snapshot  # noqa: PLC0415  # sibling module

    items = cluster_items()
    lister = FakeLister(items)
    result = read_cluster(lister, page_size=3)
    assert [c for c in lister.calls if c[0] == "pods"] == [
        ("pods", None, 3, None),
        ("pods", None, 3, "pods-3"),
        ("pods", None, 3, "pods-6"),
    ]
    assert result.snapshot == load_snapshot(snapshot_file(tmp_path, items))
    assert len(result.snapshot.pods) == 8
    assert dict(result.counts)["pods"] == 8
    assert [(d.name, d.revision) for d in result.snapshot.deployments] == [("web", 3)]
    assert result.objects is None


def test_every_resource_is_listed_with_limit_and_without_token_first() -> None:
    """Each resource is listed from the start, with the page size as limit."""
    lister = FakeLister(cluster_items())
    result = read_cluster(lister, page_size=500)
    assert [c[0] for c in lister.calls] == [r.name for r in RESOURCES]
    assert all(c[2] == 500 and c[3] is None for c in lister.calls)
    assert result.pages == len(RESOURCES)


def test_namespace_scopes_namespaced_kinds_only() -> None:
    """-n reads namespaced kinds in that namespace; nodes, PVs and PriorityClasses whole."""
    lister = FakeLister(cluster_items())
    result = read_cluster(lister, namespace="data")
    scoped = {c[0]: c[1] for c in lister.calls}
    assert scoped["pods"] == "data"
    assert scoped["replicasets"] == "data"
    assert scoped["nodes"] is None
    assert scoped["persistentvolumes"] is None
    assert scoped["priorityclasses"] is None
    assert [p.name for p in result.snapshot.pods] == ["db-0"]
    assert len(result.snapshot.nodes) == 3


def test_kept_objects_are_complete_and_in_read_order() -> None:
    """Kept objects carry kind and apiVersion, lose managedFields, and keep read order."""
    result = read_cluster(FakeLister(cluster_items()), page_size=2, keep_objects=True)
    objects = result.objects
    assert objects is not None
    assert [o["kind"] for o in objects][:4] == ["Node", "Node", "Node", "Pod"]
    assert objects[0]["apiVersion"] == "v1"
    assert list(objects[0])[:2] == ["apiVersion", "kind"]
    assert "managedFields" not in objects[0]["metadata"]
    pdb = next(o for o in objects if o["kind"] == "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    rs = next(o for o in objects if o["kind"] == "ReplicaSet")
    assert rs["apiVersion"] == "apps/v1"


def test_dumped_objects_load_back_into_the_same_snapshot(tmp_path: Path) -> None:
    """`snapshot` output (dump_objects) loads back into the very Snapshot that was read."""
    from rebalancer.cluster.read.snapshot import dump_objects, load_snapshot  # noqa: PLC0415  # sibling

    result = read_cluster(FakeLister(cluster_items()), page_size=3, keep_objects=True)
    assert result.objects is not None
    for fmt in ("yaml", "json"):
        path = tmp_path / f"snap.{fmt}"
        path.write_bytes(dump_objects(result.objects, fmt))
        assert load_snapshot(path) == result.snapshot


def test_expired_continue_token_restarts_the_whole_read() -> None:
    """A 410 on a continue token starts the read again, so no object is counted twice."""
    lister = FakeLister(cluster_items(), expire_once="pods-3")
    result = read_cluster(lister, page_size=3)
    assert len(result.snapshot.pods) == 8
    assert [c[0] for c in lister.calls].count("nodes") == 2


def test_a_page_that_is_not_json_is_a_cluster_error() -> None:
    """A garbled answer is reported as a cluster error, not a crash."""
    with pytest.raises(errors.ClusterError, match="not JSON"):
        read_cluster(lambda *_: b"<html>", page_size=3)


def test_kube_list_page_sends_limit_continue_and_namespace() -> None:
    """The real transport puts limit, continue and the namespace into the LIST URL."""
    api = RecordingServer(200, b'{"items":[]}')
    kube = Kube(api.endpoint, source="test")
    kube.list_page("pods", "shop", 3, "tok")
    kube.list_page("nodes", "shop", 3, None)
    kube.list_page("poddisruptionbudgets", None, 500, None)
    kube.list_page("replicasets", None, 500, None)
    urls = [u for _, u, _ in api.sent]
    assert urls == [
        "/api/v1/namespaces/shop/pods?limit=3&continue=tok",
        "/api/v1/nodes?limit=3",
        "/apis/policy/v1/poddisruptionbudgets?limit=500",
        "/apis/apps/v1/replicasets?limit=500",
    ]
    assert all(method == "GET" for method, _, _ in api.sent)


def test_kube_list_forbidden_names_verb_and_resource() -> None:
    """A denied LIST exits 3 with 'RBAC: cannot list <resource> (<scope>)'."""
    forbidden, gone = RecordingServer(403, b'{"message":"nope"}'), RecordingServer(410, b"{}")
    kube = Kube(forbidden.endpoint, source="test")
    with pytest.raises(errors.Forbidden) as caught:
        kube.list_page("replicasets", None, 500, None)
    assert str(caught.value).startswith("RBAC: cannot list replicasets.apps (cluster-wide)")
    assert caught.value.exit_code == EXIT_CLUSTER
    with pytest.raises(errors.Gone):
        Kube(gone.endpoint, source="test").list_page("pods", None, 1, "t")


class _GeneralBuilder:
    """The converter's builder behind another type: the reader takes its general path."""

    def __init__(self) -> None:
        from rebalancer.core.convert import SnapshotBuilder  # noqa: PLC0415

        self.inner = SnapshotBuilder("cluster")

    def add(self, obj: dict[str, Any]) -> None:
        self.inner.add(obj)

    def build(self, *, skip_invalid: bool = False) -> Any:
        return self.inner.build(skip_invalid=skip_invalid)

    @property
    def rejected(self) -> Any:
        return self.inner.rejected


def test_typed_pages_give_the_snapshot_of_the_general_path() -> None:
    """Pages decoded by the typed decoder (the default) against orjson + the converter, on
    a generated cluster with whole objects (managedFields, env, probes, statuses)."""
    from bench.gen import generate  # noqa: PLC0415

    by_kind = {r.kind: r.name for r in RESOURCES}
    items: dict[str, list[dict[str, Any]]] = {}
    for obj in generate(20, 600, 4):
        resource = by_kind.get(obj["kind"])
        if resource is not None:
            item = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
            items.setdefault(resource, []).append(item)
    items["pods"][3]["spec"]["priority"] = "high"  # one bad pod: the same problem both ways
    typed_error = general_error = None
    try:
        read_cluster(FakeLister(items), page_size=70, prefetch=0)
    except InputError as exc:
        typed_error = str(exc)
    try:
        read_cluster(FakeLister(items), page_size=70, prefetch=0, builder_factory=_GeneralBuilder)
    except InputError as exc:
        general_error = str(exc)
    assert typed_error is not None and "spec.priority: must be an integer" in typed_error
    assert typed_error == general_error
    del items["pods"][3]["spec"]["priority"]
    typed = read_cluster(FakeLister(items), page_size=70)
    general = read_cluster(FakeLister(items), page_size=70, builder_factory=_GeneralBuilder)
    assert typed.snapshot == general.snapshot
    assert len(typed.snapshot.pods) == 600
    assert typed.counts == general.counts and typed.pages == general.pages
