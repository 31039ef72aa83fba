"""The paginated reader: pages of raw JSON in, the same Snapshot as the equivalent snapshot file."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from rebalancer.cluster import errors
from rebalancer.cluster.kubeclient import Kube
from rebalancer.cluster.reader import read_cluster
from rebalancer.cluster.resources import RESOURCES, RESOURCES_BY_NAME
from rebalancer.core.errors import EXIT_CLUSTER
from tests.test_executor import RecordingApiClient

ZONE = "topology.kubernetes.io/zone"


def _node(name: str, zone: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, ZONE: zone},
            "managedFields": [{"manager": "kubelet", "operation": "Update"}],
        },
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(name: str, node: str, namespace: str = "shop", app: str = "web") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": {"app": app},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-rs",
                    "uid": f"uid-{app}-rs",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def cluster_items() -> dict[str, list[dict[str, Any]]]:
    """List items per resource, as the API server returns them (no kind, no apiVersion)."""
    pods = [_pod(f"web-{i}", "node-a1" if i < 5 else "node-b1") for i in range(7)]
    pods += [_pod("db-0", "node-b1", namespace="data", app="db")]
    return {
        "nodes": [_node("node-a1", "a"), _node("node-b1", "b"), _node("node-c1", "c")],
        "pods": pods,
        "poddisruptionbudgets": [
            {
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
                "status": {
                    "disruptionsAllowed": 1,
                    "currentHealthy": 7,
                    "desiredHealthy": 2,
                    "expectedPods": 7,
                },
            }
        ],
        "priorityclasses": [{"metadata": {"name": "high"}, "value": 1000}],
        "persistentvolumeclaims": [
            {"metadata": {"name": "data-db-0", "namespace": "data"}, "spec": {"volumeName": "pv-1"}}
        ],
        "persistentvolumes": [{"metadata": {"name": "pv-1"}, "spec": {}}],
        "services": [
            {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"selector": {"app": "web"}}}
        ],
        "replicasets": [
            {
                "metadata": {"name": "web-rs", "namespace": "shop", "uid": "uid-web-rs"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}},
            },
            {
                "metadata": {"name": "db-rs", "namespace": "data", "uid": "uid-db-rs"},
                "spec": {"selector": {"matchLabels": {"app": "db"}}},
            },
        ],
        "statefulsets": [
            {
                "metadata": {"name": "cache", "namespace": "shop"},
                "spec": {"selector": {"matchLabels": {"app": "cache"}}},
            }
        ],
        "deployments": [
            {
                "metadata": {
                    "name": "web",
                    "namespace": "shop",
                    "generation": 2,
                    "annotations": {"deployment.kubernetes.io/revision": "3"},
                },
                "spec": {"selector": {"matchLabels": {"app": "web"}}},
                "status": {"observedGeneration": 2},
            }
        ],
        "replicationcontrollers": [
            {"metadata": {"name": "legacy", "namespace": "shop"}, "spec": {"selector": {"a": "b"}}}
        ],
    }


class FakeLister:
    """Serves LIST pages like the API server, records every call, can expire a token once."""

    def __init__(
        self, items: Mapping[str, list[dict[str, Any]]], *, expire_once: str | None = None
    ) -> None:
        self.items = items
        self.calls: list[tuple[str, str | None, int, str | None]] = []
        self.expire_once = expire_once

    def __call__(
        self, resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        self.calls.append((resource, namespace, limit, token))
        if token is not None and token == self.expire_once:
            self.expire_once = None
            raise errors.Gone(410, "the provided continue parameter is too old", verb="list")
        selected = [
            copy.deepcopy(i)
            for i in self.items.get(resource, [])
            if namespace is None or i["metadata"].get("namespace") == namespace
        ]
        start = int(token.rpartition("-")[2]) if token else 0
        page = selected[start : start + limit]
        more = start + limit < len(selected)
        metadata: dict[str, Any] = {"resourceVersion": "42"}
        if more:
            metadata["continue"] = f"{resource}-{start + limit}"
        api_version = RESOURCES_BY_NAME[resource].api_version
        kind = RESOURCES_BY_NAME[resource].kind + "List"
        return orjson.dumps(
            {"apiVersion": api_version, "kind": kind, "metadata": metadata, "items": page}
        )


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
    from rebalancer.cluster.snapshot import load_snapshot  # noqa: PLC0415  # sibling module

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
    from rebalancer.cluster.snapshot import dump_objects, load_snapshot  # noqa: PLC0415  # sibling

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
    api = RecordingApiClient(200, b'{"items":[]}')
    kube = Kube(api, source="test")
    kube.list_page("pods", "shop", 3, "tok")
    kube.list_page("nodes", "shop", 3, None)
    kube.list_page("poddisruptionbudgets", None, 500, None)
    kube.list_page("replicasets", None, 500, None)
    urls = [u.removeprefix("https://127.0.0.1:6443") for _, u, _ in api.sent]
    assert urls == [
        "/api/v1/namespaces/shop/pods?limit=3&continue=tok",
        "/api/v1/nodes?limit=3",
        "/apis/policy/v1/poddisruptionbudgets?limit=500",
        "/apis/apps/v1/replicasets?limit=500",
    ]
    assert all(method == "GET" for method, _, _ in api.sent)


def test_kube_list_forbidden_names_verb_and_resource() -> None:
    """A denied LIST exits 3 with 'RBAC: cannot list <resource> (<scope>)'."""
    kube = Kube(RecordingApiClient(403, b'{"message":"nope"}'), source="test")
    with pytest.raises(errors.Forbidden) as caught:
        kube.list_page("replicasets", None, 500, None)
    assert str(caught.value).startswith("RBAC: cannot list replicasets.apps (cluster-wide)")
    assert caught.value.exit_code == EXIT_CLUSTER
    with pytest.raises(errors.Gone):
        Kube(RecordingApiClient(410, b"{}"), source="test").list_page("pods", None, 1, "t")
