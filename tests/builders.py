"""The one module of test builders: model objects for in-memory snapshots (so planner tests read
like the cluster they model) and Kubernetes API objects as the API server returns them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rebalancer.core.model import (
    HARD,
    HOSTNAME_KEY,
    ZONE_KEY,
    LabelSelector,
    Node,
    OwnerRef,
    Pod,
    SpreadConstraint,
    Taint,
)

GIB = 1024**3
NS = "shop"
"""The namespace of the API objects below."""
WEB_RS = OwnerRef("ReplicaSet", "web-abc")


def node(
    name: str,
    zone: str | None,
    *,
    cpu: int = 64_000,
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    unschedulable: bool = False,
    ready: bool = True,
) -> Node:
    all_labels = {HOSTNAME_KEY: name}
    if zone is not None:
        all_labels[ZONE_KEY] = zone
    all_labels.update(labels or {})
    return Node(
        name=name,
        labels=all_labels,
        allocatable={"cpu": cpu, "memory": 256 * GIB, "pods": pods},
        taints=tuple(taints),
        unschedulable=unschedulable,
        ready=ready,
    )


def zone_constraint(
    app: str, max_skew: int = 1, *, key: str = ZONE_KEY, when: str = HARD, min_domains: int = 1
) -> SpreadConstraint:
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        selector=LabelSelector((("app", app),)),
        min_domains=min_domains,
    )


def pod(
    name: str,
    node_name: str | None,
    *,
    app: str = "web",
    namespace: str = "default",
    constraints: Sequence[SpreadConstraint] = (),
    owner: OwnerRef | None = WEB_RS,
    priority: int | None = None,
    created: float = 1000.0,
    cpu: int = 100,
    labels: Mapping[str, str] | None = None,
    **extra: object,
) -> Pod:
    all_labels = {"app": app}
    all_labels.update(labels or {})
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=all_labels,
        node_name=node_name,
        created=created,
        priority=priority,
        owner=owner,
        constraints=tuple(constraints),
        requests={"cpu": cpu},
        **extra,  # type: ignore[arg-type]
    )


def zones_cluster(
    counts: Sequence[int],
    max_skew: int = 1,
    *,
    nodes_per_zone: int = 1,
    min_domains: int = 1,
    cpu: int = 64_000,
) -> tuple[list[Node], list[Pod]]:
    """One Deployment with a zone constraint, ``counts[z]`` pods in zone z."""
    nodes: list[Node] = []
    pods: list[Pod] = []
    c = zone_constraint("web", max_skew, min_domains=min_domains)
    for z, count in enumerate(counts):
        zone = f"zone-{chr(97 + z)}"
        names = [f"n-{zone}-{k}" for k in range(nodes_per_zone)]
        nodes.extend(node(n, zone, cpu=cpu) for n in names)
        for p in range(count):
            pods.append(
                pod(f"web-{zone}-{p}", names[p % nodes_per_zone], constraints=[c], created=1000 + p)
            )
    return nodes, pods


# --- API objects ------------------------------------------------------------------------------


def api_pod(
    name: str,
    *,
    uid: str | None = None,
    node: str = "n1",
    app: str = "web",
    owner_uid: str = "rs-web",
    ready: bool = True,
    terminating: bool = False,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod of ReplicaSet ``app`` in namespace ``shop``, as the executor re-reads it."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": uid or f"uid-{name}",
        "labels": dict(labels) if labels is not None else {"app": app},
        "ownerReferences": [
            {"kind": "ReplicaSet", "name": app, "uid": owner_uid, "controller": True}
        ],
    }
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def api_node(name: str, *, ready: str = "True", taints: list[str] | None = None) -> dict[str, Any]:
    """A Node with a Ready condition and NoExecute taints, as the executor re-reads it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"taints": [{"key": k, "effect": "NoExecute"} for k in taints or []]},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def list_node(name: str, zone: str) -> dict[str, Any]:
    """A Node as a LIST page holds it (no kind, no apiVersion), with managedFields."""
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, ZONE_KEY: zone},
            "managedFields": [{"manager": "kubelet", "operation": "Update"}],
        },
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def list_pod(name: str, node: str, namespace: str = "shop", app: str = "web") -> dict[str, Any]:
    """A Pod of ReplicaSet ``{app}-rs`` with a zone constraint, as a LIST page holds it."""
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
                    "topologyKey": ZONE_KEY,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def cluster_items() -> dict[str, list[dict[str, Any]]]:
    """List items per resource, as the API server returns them (no kind, no apiVersion)."""
    pods = [list_pod(f"web-{i}", "node-a1" if i < 5 else "node-b1") for i in range(7)]
    pods += [list_pod("db-0", "node-b1", namespace="data", app="db")]
    return {
        "nodes": [list_node("node-a1", "a"), list_node("node-b1", "b"), list_node("node-c1", "c")],
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


def zone_node(name: str, zone: str) -> dict[str, Any]:
    """A Ready Node with hostname and zone labels (8 cpu, 110 pods)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE_KEY: zone}},
        "status": {
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def web_pod(name: str, node: str, uid: str) -> dict[str, Any]:
    """A Ready pod of ReplicaSet web-rs in namespace shop with a zone constraint."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"app": "web"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "web-rs", "uid": "uid-rs", "controller": True}
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE_KEY,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod_obj(
    name: str = "web-1",
    *,
    namespace: str = "default",
    labels: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A minimal valid Pod, with extra spec/metadata/status fields merged in."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {"app": "web"} if labels is None else labels,
            **(meta or {}),
        },
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x"}], **(spec or {})},
        "status": {"phase": "Running", **(status or {})},
    }


def node_obj(name: str = "node-a", **extra: Any) -> dict[str, Any]:
    """A minimal valid Node (4 cpu, Ready); ``extra`` updates its top-level sections."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    for key, value in extra.items():
        obj[key].update(value)
    return obj


def constraint(**fields: Any) -> dict[str, Any]:
    """A zone constraint on app=web as the API holds it; a field set to None is dropped."""
    base: dict[str, Any] = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def containers(*requests: dict[str, str], **extra: Any) -> list[dict[str, Any]]:
    """Containers with these resource requests, one each."""
    return [
        {"name": f"c{i}", "image": "x", "resources": {"requests": r}, **extra}
        for i, r in enumerate(requests)
    ]
