"""Small constructors for in-memory snapshots, so planner tests read like the cluster they model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
