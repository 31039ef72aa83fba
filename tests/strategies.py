"""Hypothesis strategies for random clusters, and an independent oracle for their spread.

Every generated cluster is small (at most 60 pods): 2-5 zones, 1-3 nodes per zone, one or more
Deployments whose pods declare hard zone and/or hostname constraints. All nodes carry both
topology keys and no taints, and no pod has node affinity, so every node is eligible for every
view; :func:`domain_counts` can therefore count a view without using :mod:`rebalancer.core.spread`.

Profiles: ``dev`` (the default) and ``ci`` (``derandomize=True``, loaded when ``CI`` is set).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from rebalancer.core.minimal import min_moves
from rebalancer.core.model import (
    HARD,
    HOSTNAME_KEY,
    ZONE_KEY,
    Controller,
    LabelSelector,
    Node,
    OwnerRef,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    Snapshot,
    SpreadConstraint,
)
from rebalancer.core.plan import Eviction, Plan
from rebalancer.core.policy import SYSTEM_CRITICAL, Limits, Policy, PriorityThreshold

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")

NOW: Final = 100_000.0
MAX_PODS: Final = 60
POD_CPU: Final = 100
AMPLE_CPU: Final = 64_000

# Pod kinds. Only NORMAL pods may be evicted; the others are each stopped by one rule.
NORMAL: Final = "normal"
DAEMONSET: Final = "daemonset"
BARE: Final = "bare"
MIRROR: Final = "mirror"
TERMINATING: Final = "terminating"
CRITICAL: Final = "critical"
PINNED_KINDS: Final = (DAEMONSET, BARE, MIRROR, CRITICAL)
# Kinds that declare the workload's constraints (the others are foreign pods with its labels).
DECLARING_KINDS: Final = frozenset({NORMAL, TERMINATING, CRITICAL})

PRIORITY_CLASSES: Final = (
    PriorityClass("low", 10),
    PriorityClass("mid", 700),
)
# (spec.priority, priorityClassName) of evictable pods; all resolve below 1000.
PRIORITIES: Final = (
    (None, None),
    (0, None),
    (100, None),
    (500, None),
    (None, "low"),
    (None, "mid"),
)


@dataclass(frozen=True, slots=True)
class Workload:
    """One Deployment: its namespace, app label, constraints and the name the planner gives it."""

    namespace: str
    app: str
    constraints: tuple[SpreadConstraint, ...]
    workload: str  # Kind/name as in Eviction.workload

    def matches(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and pod.labels.get("app") == self.app


@dataclass(frozen=True, slots=True)
class Cluster:
    """A generated snapshot plus what the generator knows about it."""

    snapshot: Snapshot
    workloads: tuple[Workload, ...]
    ample: bool  # every node has room for every pod of the cluster


def zone_names(count: int) -> list[str]:
    return [f"zone-{chr(97 + z)}" for z in range(count)]


def hard_constraint(app: str, key: str, max_skew: int, min_domains: int = 1) -> SpreadConstraint:
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=HARD,
        selector=LabelSelector((("app", app),)),
        min_domains=min_domains,
    )


def make_node(name: str, zone: str, cpu: int = AMPLE_CPU, unschedulable: bool = False) -> Node:
    return Node(
        name=name,
        labels={HOSTNAME_KEY: name, ZONE_KEY: zone},
        allocatable={"cpu": cpu, "memory": 64 * 1024**3, "pods": 110},
        unschedulable=unschedulable,
    )


def make_pod(
    workload: Workload,
    name: str,
    node: str,
    kind: str,
    created: float,
    *,
    priority: tuple[int | None, str | None] = (None, None),
) -> Pod:
    """A pod of ``workload`` of the given kind (see the kind constants)."""
    owner: OwnerRef | None = OwnerRef("ReplicaSet", f"{workload.app}-rs", f"uid-rs-{workload.app}")
    constraints = workload.constraints if kind in DECLARING_KINDS else ()
    prio, class_name = priority
    extra: dict[str, object] = {}
    if kind == DAEMONSET:
        owner = OwnerRef("DaemonSet", f"{workload.app}-ds")
    elif kind == BARE:
        owner = None
    elif kind == MIRROR:
        owner = OwnerRef("Node", node)
        extra["mirror"] = True
    elif kind == TERMINATING:
        extra["terminating"] = True
    elif kind == CRITICAL:
        prio, class_name = None, "system-cluster-critical"
    return Pod(
        namespace=workload.namespace,
        name=name,
        uid=f"uid-{workload.namespace}-{name}",
        labels={"app": workload.app, "kind": kind},
        node_name=node,
        created=created,
        priority=prio,
        priority_class_name=class_name,
        owner=owner,
        constraints=constraints,
        requests={"cpu": POD_CPU},
        **extra,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------------------------
# Building blocks


@st.composite
def topology(draw: st.DrawFn, min_zones: int = 2, max_zones: int = 5) -> list[tuple[str, str]]:
    """(node name, zone) pairs: 2-5 zones with 1-3 nodes each."""
    zones = zone_names(draw(st.integers(min_zones, max_zones)))
    out: list[tuple[str, str]] = []
    for zone in zones:
        for k in range(draw(st.integers(1, 3))):
            out.append((f"n-{zone}-{k}", zone))
    return out


@st.composite
def skewed_placement(draw: st.DrawFn, node_count: int, budget: int) -> list[int]:
    """Node indices of up to ``budget`` pods, in bursts, so placements are often lopsided."""
    bursts = draw(
        st.lists(
            st.tuples(st.integers(0, node_count - 1), st.integers(1, 9)), min_size=1, max_size=6
        )
    )
    out: list[int] = []
    for index, size in bursts:
        out.extend([index] * size)
    return out[:budget]


def _constraints_for(
    draw: st.DrawFn, app: str, keys: str, zone_count: int, allow_min_domains: bool
) -> tuple[SpreadConstraint, ...]:
    if keys == "any":
        keys = draw(st.sampled_from(["zone", "host", "both"]))
    elif keys == "single":
        keys = draw(st.sampled_from(["zone", "host"]))
    chosen = {"zone": (ZONE_KEY,), "host": (HOSTNAME_KEY,), "both": (ZONE_KEY, HOSTNAME_KEY)}[keys]
    out = []
    for key in chosen:
        skew = draw(st.integers(1, 3))
        min_domains = 1
        if allow_min_domains and key == ZONE_KEY and draw(st.integers(0, 3)) == 0:
            min_domains = draw(st.integers(2, zone_count + 2))
        out.append(hard_constraint(app, key, skew, min_domains))
    return tuple(out)


def _finish(
    draw: st.DrawFn,
    topo: Sequence[tuple[str, str]],
    workloads: Sequence[Workload],
    pods: list[Pod],
    *,
    ample: bool,
    cordon: bool,
    pdbs: bool,
    controllers: bool,
    min_allowed: int = 0,
) -> Cluster:
    """Nodes sized for the pods (ample, or tight: 0-3 free pod slots), PDBs, controllers."""
    used = Counter(p.node_name for p in pods)
    nodes = []
    for name, zone in topo:
        cpu = AMPLE_CPU if ample else (used[name] + draw(st.integers(0, 3))) * POD_CPU
        unschedulable = cordon and draw(st.integers(0, 5)) == 0
        nodes.append(make_node(name, zone, cpu, unschedulable))
    budgets: list[PodDisruptionBudget] = []
    ctrls: list[Controller] = []
    for w in workloads:
        if pdbs and draw(st.booleans()):
            budgets.append(
                PodDisruptionBudget(
                    namespace=w.namespace,
                    name=f"{w.app}-pdb",
                    selector=LabelSelector((("app", w.app),)),
                    disruptions_allowed=draw(st.integers(min_allowed, 3)),
                )
            )
        if controllers:
            ctrls.append(
                Controller(
                    kind="ReplicaSet",
                    namespace=w.namespace,
                    name=f"{w.app}-rs",
                    selector=LabelSelector((("app", w.app),)),
                    owner=OwnerRef("Deployment", w.app),
                )
            )
    snapshot = Snapshot(
        nodes=tuple(nodes),
        pods=tuple(pods),
        pdbs=tuple(budgets),
        priority_classes=PRIORITY_CLASSES,
        controllers=tuple(ctrls),
    )
    return Cluster(snapshot, tuple(workloads), ample and not any(n.unschedulable for n in nodes))


def _workload(
    app: str, namespace: str, constraints: tuple[SpreadConstraint, ...], lift: bool
) -> Workload:
    name = f"Deployment/{app}" if lift else f"ReplicaSet/{app}-rs"
    return Workload(namespace, app, constraints, name)


# --------------------------------------------------------------------------------------------
# Public strategies


@st.composite
def clusters(
    draw: st.DrawFn,
    *,
    keys: str = "any",
    max_workloads: int = 3,
    ample: bool | None = None,
    all_evictable: bool = False,
    allow_min_domains: bool = True,
    pdbs: bool = True,
    max_pods: int = MAX_PODS,
) -> Cluster:
    """Random clusters: skewed placements, random priorities, some pods that may not be evicted.

    ``keys``: "zone", "host", "both" (zone + hostname on the same pods), "single" (zone or
    hostname, per workload) or "any" (any of the three, per workload).
    ``ample``: True for room everywhere, False for tight nodes, None to let Hypothesis choose
    (tight clusters may also have cordoned nodes).
    """
    topo = draw(topology())
    zone_count = len({z for _, z in topo})
    is_ample = draw(st.booleans()) if ample is None else ample
    lift = draw(st.booleans())
    count = draw(st.integers(1, max_workloads))
    budget = max_pods // count
    workloads: list[Workload] = []
    pods: list[Pod] = []
    for w in range(count):
        app = f"app{w}"
        namespace = draw(st.sampled_from(["default", "team"]))
        cons = _constraints_for(draw, app, keys, zone_count, allow_min_domains)
        workload = _workload(app, namespace, cons, lift)
        workloads.append(workload)
        placement = draw(skewed_placement(len(topo), budget))
        for k, node_index in enumerate(placement):
            kind = NORMAL
            if not all_evictable and draw(st.integers(0, 5)) == 0:
                kind = draw(st.sampled_from([*PINNED_KINDS, TERMINATING]))
            prio = draw(st.sampled_from(PRIORITIES))
            created = 1000.0 + draw(st.integers(0, 50))
            pods.append(
                make_pod(
                    workload,
                    f"{app}-{k}",
                    topo[node_index][0],
                    kind,
                    created + k / 100,
                    priority=prio,
                )
            )
    return _finish(
        draw,
        topo,
        workloads,
        pods,
        ample=is_ample,
        cordon=not is_ample,
        pdbs=pdbs,
        controllers=lift,
        min_allowed=1 if all_evictable else 0,  # a PDB allowing none makes its pods unevictable
    )


def single_constraint_clusters(*, all_evictable: bool = True) -> st.SearchStrategy[Cluster]:
    """One Deployment with one hard constraint (zone or hostname), room for every replacement."""
    return clusters(keys="single", max_workloads=1, ample=True, all_evictable=all_evictable)


@st.composite
def balanced_clusters(draw: st.DrawFn) -> Cluster:
    """Clusters whose every view is within maxSkew by construction.

    Every zone has the same number of nodes and each Deployment's counted pods go round-robin
    over the nodes interleaved by zone (n-a-0, n-b-0, ..., n-a-1, ...), so zone and hostname
    counts differ by at most one. With minDomains above the zone count the global minimum is 0,
    so those workloads keep at most maxSkew pods per zone. Terminating pods, which never count,
    land anywhere.
    """
    zones = zone_names(draw(st.integers(2, 5)))
    per_zone = draw(st.integers(1, 3))
    topo = [(f"n-{z}-{k}", z) for z in zones for k in range(per_zone)]
    interleaved = [(f"n-{z}-{k}", z) for k in range(per_zone) for z in zones]
    lift = draw(st.booleans())
    count = draw(st.integers(1, 3))
    workloads: list[Workload] = []
    pods: list[Pod] = []
    for w in range(count):
        app = f"app{w}"
        cons = _constraints_for(draw, app, "any", len(zones), allow_min_domains=True)
        workload = _workload(app, draw(st.sampled_from(["default", "team"])), cons, lift)
        workloads.append(workload)
        limit = MAX_PODS // count
        for c in cons:
            if c.min_domains > len(zones if c.topology_key == ZONE_KEY else topo):
                limit = min(limit, c.max_skew * len(zones))
        total = draw(st.integers(1, limit))
        start = draw(st.integers(0, len(interleaved) - 1))
        for k in range(total):
            name = interleaved[(start + k) % len(interleaved)][0]
            kind = draw(st.sampled_from([NORMAL, NORMAL, NORMAL, *PINNED_KINDS]))
            prio = draw(st.sampled_from(PRIORITIES))
            pods.append(make_pod(workload, f"{app}-{k}", name, kind, 1000.0 + k, priority=prio))
        for k in range(draw(st.integers(0, 3))):
            name = draw(st.sampled_from(topo))[0]
            pods.append(make_pod(workload, f"{app}-t{k}", name, TERMINATING, 900.0 + k))
    return _finish(
        draw, topo, workloads, pods, ample=True, cordon=False, pdbs=True, controllers=lift
    )


@st.composite
def policies(draw: st.DrawFn, *, limits: bool = True, thresholds: bool = True) -> Policy:
    """Policies with random limits and priority thresholds (default otherwise)."""
    limit = st.one_of(st.none(), st.integers(0, 8))
    chosen = Limits(draw(limit), draw(limit), draw(limit), draw(limit)) if limits else Limits()
    value = draw(st.sampled_from([SYSTEM_CRITICAL, 1000, 600])) if thresholds else SYSTEM_CRITICAL
    return Policy(limits=chosen, priority_threshold=PriorityThreshold(value=value))


@st.composite
def past_evictions(draw: st.DrawFn, cluster: Cluster) -> list[Eviction]:
    """Evictions made earlier in the same run, on the cluster's nodes and workloads."""
    nodes = [n.name for n in cluster.snapshot.nodes]
    out: list[Eviction] = []
    for k in range(draw(st.integers(0, 6))):
        w = draw(st.sampled_from(cluster.workloads))
        node = draw(st.sampled_from(nodes))
        out.append(
            Eviction(
                namespace=w.namespace,
                name=f"{w.app}-gone-{k}",
                uid=f"uid-gone-{k}",
                node=node,
                priority=0,
                reason="earlier in this run",
                wave=1,
                workload=w.workload,
                domain="",
                topology_key=ZONE_KEY,
                target_node=None,
                grace_period_seconds=None,
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Oracle: spread counted without rebalancer.core.spread


def counted(pod: Pod) -> bool:
    return pod.node_name is not None and not pod.terminating


def domain_counts(snapshot: Snapshot, workload: Workload, key: str) -> dict[str, int]:
    """Matching, bound, non-terminating pods per domain; every node is eligible here."""
    node_domain = {n.name: n.labels[key] for n in snapshot.nodes}
    counts = dict.fromkeys(sorted(set(node_domain.values())), 0)
    for pod in snapshot.pods:
        if counted(pod) and workload.matches(pod):
            counts[node_domain[pod.node_name or ""]] += 1
    return counts


def has_view(snapshot: Snapshot, workload: Workload) -> bool:
    """Whether some live pod declares the workload's constraints (else there is no view)."""
    return any(workload.matches(p) and p.constraints and not p.terminating for p in snapshot.pods)


def skew(counts: Mapping[str, int], min_domains: int) -> int:
    values = list(counts.values())
    if not values or max(values) == 0:
        return 0
    floor = 0 if len(values) < min_domains else min(values)
    return max(values) - floor


def excess(snapshot: Snapshot, workload: Workload, c: SpreadConstraint) -> int:
    counts = domain_counts(snapshot, workload, c.topology_key)
    return max(0, skew(counts, c.min_domains) - c.max_skew)


def distance(snapshot: Snapshot, workload: Workload, c: SpreadConstraint) -> int:
    counts = domain_counts(snapshot, workload, c.topology_key)
    return min_moves(list(counts.values()), c.max_skew, c.min_domains)


def achievable(
    counts: Sequence[int], pinned: Sequence[int], max_skew: int, min_domains: int
) -> bool:
    """Whether moving only unpinned pods (room everywhere) can bring one view within maxSkew.

    An end state f has f_d >= pinned_d, sum f = N and every f_d in [L, L + maxSkew] for some
    L >= 0, with L = 0 when there are fewer domains than minDomains.
    """
    n, d = sum(counts), len(counts)
    levels = [0] if d < min_domains else range(n + 1)
    for level in levels:
        if max(pinned) > level + max_skew:
            continue
        if sum(max(level, p) for p in pinned) <= n <= d * (level + max_skew):
            return True
    return False


def apply_plan(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """The simulated end state: evicted pods gone, each replacement on its target node."""
    evicted = {e.uid: e for e in plan.evictions}
    pods: list[Pod] = []
    for pod in snapshot.pods:
        e = evicted.get(pod.uid)
        if e is None:
            pods.append(pod)
        elif e.target_node is not None:
            pods.append(
                dataclasses.replace(
                    pod, name=pod.name + "-new", uid=pod.uid + "-new", node_name=e.target_node
                )
            )
    return dataclasses.replace(snapshot, pods=tuple(pods))


HOSTILE_PIECES: Final = (
    "\n",
    "\r",
    "\r\n",
    "\x85",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "\t",
    " ",
    "#",
    ":",
    ": ",
    "---",
    "...",
    "- ",
    "{",
    "}",
    "[",
    "'",
    '"',
    "|",
    ">",
    "&a",
    "*a",
    "!!python/object:os.system",
    "evictBarePods: true",
    "priorityThreshold: {value: 2147483647}",
    "limits: {total: 100000}",
    "a",
    "é",
)
"""What a name may hold to break out of a comment or a scalar in YAML: every line break YAML
knows (LF, CR, NEL, the Unicode line and paragraph separators), bidirectional and zero-width
format characters, indicators, document markers, and keys of a rebalancer policy."""


def hostile_names(max_pieces: int = 8, *, any_text: bool = True) -> st.SearchStrategy[str]:
    """Non-empty names joined from :data:`HOSTILE_PIECES` (and, with ``any_text``, short
    arbitrary text)."""
    piece = st.sampled_from(HOSTILE_PIECES)
    if any_text:
        piece = piece | st.text(max_size=3)
    return st.lists(piece, min_size=1, max_size=max_pieces).map("".join).filter(bool)
