"""Spread analysis: the PodTopologySpread plugin's counting, done once for the whole cluster.

Every pod that declares a constraint defines its own *view* of it: the eligible nodes follow
from that pod's topology keys, node affinity and tolerations (per the inclusion policies), the
selector from its labelSelector merged with matchLabelKeys. Pods with identical views share one.
A view counts every matching, bound, non-terminating pod in its namespace on an eligible node,
whether or not that pod declares the constraint itself (SPEC §2).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rebalancer.model import (
    HONOR,
    LabelSelector,
    Node,
    NodeSelector,
    Pod,
    Snapshot,
    SpreadConstraint,
    Toleration,
)
from rebalancer.policy import Policy
from rebalancer.selectors import (
    FILTER_EFFECTS,
    and_selectors,
    node_selector_matches,
    selector_matches,
    selector_string,
    untolerated_taint,
)

# kube-scheduler's informer never sees finished pods, so they count nowhere.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DEFAULT_OWNER_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})


@dataclass(frozen=True, slots=True)
class Eligibility:
    """What decides which nodes a view counts: a pod's keys, affinity and tolerations."""

    keys: tuple[str, ...]
    node_selector: tuple[tuple[str, str], ...] | None  # None: nodeAffinityPolicy Ignore
    affinity: NodeSelector | None
    honor_affinity: bool
    tolerations: tuple[Toleration, ...] | None  # None: nodeTaintsPolicy Ignore


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """One spread view: a namespace, a normalised constraint and who counts as eligible."""

    namespace: str
    constraint: SpreadConstraint
    eligibility: Eligibility

    @property
    def hard(self) -> bool:
        return self.constraint.hard

    @property
    def topology_key(self) -> str:
        return self.constraint.topology_key

    @property
    def max_skew(self) -> int:
        return self.constraint.max_skew

    def sort_key(self) -> tuple[str, str, str, int, str, int, str]:
        c = self.constraint
        return (
            self.namespace,
            c.topology_key,
            selector_string(c.selector),
            c.max_skew,
            c.when_unsatisfiable,
            c.min_domains,
            repr(self.eligibility),
        )


def eligibility_for(
    pod: Pod, constraint: SpreadConstraint, siblings: Sequence[SpreadConstraint]
) -> Eligibility:
    """Eligibility of ``constraint`` as ``pod`` declares it; ``siblings``: all its constraints."""
    keys = tuple(sorted({c.topology_key for c in siblings if c.hard == constraint.hard}))
    honor_affinity = constraint.node_affinity_policy == HONOR
    return Eligibility(
        keys=keys,
        node_selector=tuple(sorted(pod.node_selector.items())) if honor_affinity else None,
        affinity=pod.required_affinity if honor_affinity else None,
        honor_affinity=honor_affinity,
        tolerations=pod.tolerations if constraint.node_taints_policy == HONOR else None,
    )


def node_eligible(elig: Eligibility, node: Node) -> bool:
    """Whether a node counts for a view: it has every key and passes the inclusion policies."""
    labels = node.labels
    for key in elig.keys:
        if key not in labels:
            return False
    if elig.honor_affinity:
        for key, value in elig.node_selector or ():
            if labels.get(key) != value:
                return False
        if elig.affinity is not None and not node_selector_matches(elig.affinity, node):
            return False
    return not (
        elig.tolerations is not None
        and untolerated_taint(elig.tolerations, node.taints, FILTER_EFFECTS) is not None
    )


def view_key_constraint(c: SpreadConstraint) -> SpreadConstraint:
    """The constraint without the fields that do not change what a view counts."""
    return dataclasses.replace(c, match_label_keys=(), default=False)


def global_min(counts: Mapping[str, int], min_domains: int, hard: bool) -> int:
    """Minimum count over eligible domains; 0 when there are fewer than minDomains (hard only)."""
    if not counts:
        return 0
    if hard and len(counts) < min_domains:
        return 0
    return min(counts.values())


def skew_of(counts: Mapping[str, int], min_domains: int, hard: bool) -> int:
    """The largest ``count(d) - globalMin`` over domains holding matching pods."""
    if not counts:
        return 0
    top = max(counts.values())
    if top == 0:
        return 0
    return top - global_min(counts, min_domains, hard)


class PodIndex:
    """Bound, non-terminating pods indexed by namespace and by label, for fast selector matching."""

    def __init__(self, pods: Sequence[Pod]) -> None:
        self.pods = pods
        self.by_namespace: dict[str, list[int]] = defaultdict(list)
        self.by_label: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for i, pod in enumerate(pods):
            if pod.node_name is None or pod.terminating or pod.phase in TERMINAL_PHASES:
                continue
            self.by_namespace[pod.namespace].append(i)
            for key, value in pod.labels.items():
                self.by_label[(pod.namespace, key, value)].append(i)

    def matching(self, namespace: str, selector: LabelSelector | None) -> list[int]:
        """Indices of counted pods in ``namespace`` that ``selector`` matches."""
        if selector is None:
            return []
        candidates = self.by_namespace.get(namespace, [])
        for key, value in selector.match_labels:
            bucket = self.by_label.get((namespace, key, value), [])
            if len(bucket) < len(candidates):
                candidates = bucket
        for req in selector.match_expressions:
            if req.operator == "In" and len(req.values) == 1:
                bucket = self.by_label.get((namespace, req.key, req.values[0]), [])
                if len(bucket) < len(candidates):
                    candidates = bucket
        pods = self.pods
        return [i for i in candidates if selector_matches(selector, pods[i].labels)]


@dataclass(slots=True)
class View:
    """A view with its eligible nodes and the pods it counts (built once per analysis)."""

    spec: ViewSpec
    node_domain: dict[str, str]  # eligible node -> domain value
    members: list[int]  # indices of counted pods (on eligible nodes)
    declarers: list[int]  # indices of pods that declare this view
    counts: dict[str, int]  # domain -> count, every eligible domain present

    @property
    def global_min(self) -> int:
        return global_min(self.counts, self.spec.constraint.min_domains, self.spec.hard)

    @property
    def skew(self) -> int:
        return skew_of(self.counts, self.spec.constraint.min_domains, self.spec.hard)

    @property
    def violated(self) -> bool:
        return self.skew > self.spec.max_skew


@dataclass(slots=True)
class Analysis:
    """All views of a snapshot, and which views count each pod."""

    pods: tuple[Pod, ...]
    nodes: dict[str, Node]
    views: list[View]
    pod_views: dict[int, list[int]]  # pod index -> indices of views counting it
    constraints: dict[int, tuple[SpreadConstraint, ...]]  # pod index -> effective constraints
    own_views: dict[int, list[int]]  # pod index -> its own views, in constraint order


def default_constraints_for(
    pod: Pod, snapshot_index: DefaultSelectorIndex, policy: Policy
) -> tuple[SpreadConstraint, ...]:
    """The policy's default constraints for a pod that declares none (kube-scheduler rules)."""
    if pod.constraints or not policy.default_constraints:
        return ()
    selector = snapshot_index.selector_for(pod)
    if selector is None:
        return ()
    return tuple(
        SpreadConstraint(
            max_skew=d.max_skew,
            topology_key=d.topology_key,
            when_unsatisfiable=d.when_unsatisfiable,
            selector=selector,
            min_domains=d.min_domains,
            node_affinity_policy=d.node_affinity_policy,
            node_taints_policy=d.node_taints_policy,
            default=True,
        )
        for d in policy.default_constraints
    )


class DefaultSelectorIndex:
    """Services and controllers by namespace, to build default-constraint selectors."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.services: dict[str, list[Mapping[str, str]]] = defaultdict(list)
        for svc in snapshot.services:
            if svc.selector:
                self.services[svc.namespace].append(svc.selector)
        self.controllers = {(c.kind, c.namespace, c.name): c.selector for c in snapshot.controllers}

    def selector_for(self, pod: Pod) -> LabelSelector | None:
        """AND of the selectors of the Services selecting the pod and of its controller."""
        parts: list[LabelSelector] = []
        for sel in self.services.get(pod.namespace, []):
            if all(pod.labels.get(k) == v for k, v in sel.items()):
                parts.append(LabelSelector(tuple(sorted(sel.items()))))
        owner = pod.owner
        if owner is not None and owner.kind in DEFAULT_OWNER_KINDS:
            ctrl = self.controllers.get((owner.kind, pod.namespace, owner.name))
            if ctrl is not None:
                parts.append(ctrl)
        merged = and_selectors(parts)
        if not merged.match_labels and not merged.match_expressions:
            return None
        return merged


def effective_constraints(
    snapshot: Snapshot, policy: Policy
) -> dict[int, tuple[SpreadConstraint, ...]]:
    """Each pod's constraints: its own, or the policy's defaults when it declares none."""
    index = DefaultSelectorIndex(snapshot) if policy.default_constraints else None
    out: dict[int, tuple[SpreadConstraint, ...]] = {}
    for i, pod in enumerate(snapshot.pods):
        if pod.constraints:
            out[i] = pod.constraints
        elif index is not None:
            defaults = default_constraints_for(pod, index, policy)
            if defaults:
                out[i] = defaults
    return out


def analyze(snapshot: Snapshot, policy: Policy) -> Analysis:
    """Build every view of the snapshot and count it, as kube-scheduler would."""
    pods = snapshot.pods
    constraints = effective_constraints(snapshot, policy)
    specs: dict[ViewSpec, list[int]] = {}
    pod_specs: dict[int, list[ViewSpec]] = {}
    # Pods of one workload share constraints, affinity and tolerations: build their specs once.
    # The converter shares these fragments between a workload's pods, so identity is a cheap
    # cache key (a miss only costs building equal specs again).
    spec_cache: dict[tuple[object, ...], tuple[list[ViewSpec], list[int]]] = {}
    for i, cons in constraints.items():
        pod = pods[i]
        if pod.terminating:
            continue
        key = (
            pod.namespace,
            id(cons),
            id(pod.node_selector) if pod.node_selector else 0,
            id(pod.required_affinity),
            id(pod.tolerations),
        )
        entry = spec_cache.get(key)
        if entry is None:
            mine = [
                ViewSpec(pod.namespace, view_key_constraint(c), eligibility_for(pod, c, cons))
                for c in cons
            ]
            entry = (mine, [])
            spec_cache[key] = entry
        pod_specs[i] = entry[0]
        entry[1].append(i)
    for mine, members_of_key in spec_cache.values():
        for spec in mine:
            specs.setdefault(spec, []).extend(members_of_key)
    index = PodIndex(pods)
    eligible_cache: dict[Eligibility, list[Node]] = {}
    # Views share eligibility: one read-only node -> domain map per (eligibility, key).
    domain_cache: dict[tuple[Eligibility, str], tuple[dict[str, str], list[str]]] = {}
    views: list[View] = []
    position: dict[ViewSpec, int] = {}
    for spec in sorted(specs, key=ViewSpec.sort_key):
        elig = spec.eligibility
        key_name = spec.topology_key
        cached = domain_cache.get((elig, key_name))
        if cached is None:
            if elig not in eligible_cache:
                eligible_cache[elig] = [n for n in snapshot.nodes if node_eligible(elig, n)]
            mapping = {n.name: n.labels[key_name] for n in eligible_cache[elig]}
            cached = (mapping, sorted(set(mapping.values())))
            domain_cache[(elig, key_name)] = cached
        node_domain, domains = cached
        counts = dict.fromkeys(domains, 0)
        members: list[int] = []
        for i in index.matching(spec.namespace, spec.constraint.selector):
            domain = node_domain.get(pods[i].node_name or "")
            if domain is not None:
                counts[domain] += 1
                members.append(i)
        position[spec] = len(views)
        views.append(View(spec, node_domain, members, specs[spec], counts))
    pod_views: dict[int, list[int]] = defaultdict(list)
    for v, view in enumerate(views):
        for i in view.members:
            pod_views[i].append(v)
    own_views = {i: [position[spec] for spec in mine] for i, mine in pod_specs.items()}
    nodes = {n.name: n for n in snapshot.nodes}
    return Analysis(pods, nodes, views, dict(pod_views), constraints, own_views)


def considered(view: View, policy: Policy) -> bool:
    """Whether the policy asks to rebalance this view."""
    spec = view.spec
    if spec.constraint.when_unsatisfiable not in policy.constraints:
        return False
    if policy.namespaces_include:
        return spec.namespace in policy.namespaces_include
    return spec.namespace not in policy.namespaces_exclude


def min_moves(
    counts: Sequence[int],
    max_skew: int,
    min_domains: int = 1,
    hard: bool = True,
    top_floor: int = 0,
) -> int:
    """The fewest moves that bring one view within ``max_skew`` (SPEC §3), capacity permitting.

    A move takes one pod out of a domain and adds it to another. For a target band
    ``[L, L + max_skew]`` the pods above the band must leave and the domains below it must be
    filled, so the moves are ``max(above, below)``; the band must hold all N pods
    (``D*L <= N <= D*(L+s)``). With fewer domains than ``minDomains`` the global minimum is 0,
    so ``L`` is 0. Worked example, maxSkew 3, counts [3, 9, 0, 9]: N=21, D=4, L in {3, 4, 5};
    L=4 gives above = (9-7)+(9-7) = 4 and below = (4-3)+(4-0) = 5, so 5 moves, the minimum.
    Each real move lowers this value by at most one, so it is also a lower bound.

    ``top_floor`` is the most pods any one domain holds that cannot move (not evictable): a
    band whose top is below it is out of reach. When no band is in reach, the floors are
    ignored, and the value still falls by one for every move towards balance.
    """
    d = len(counts)
    if d == 0:
        return 0
    n = sum(counts)
    s = max_skew
    if hard and d < min_domains:
        candidates = [0]
    else:
        low = max(0, -(-(n - d * s) // d))  # ceil((N - D*s) / D)
        candidates = list(range(low, n // d + 1)) or [n // d]
    best: int | None = None
    for use_floors in (True, False) if top_floor else (False,):
        for level in candidates:
            if use_floors and top_floor > level + s:
                continue
            above = sum(c - level - s for c in counts if c > level + s)
            below = sum(level - c for c in counts if c < level)
            moves = max(above, below)
            best = moves if best is None else min(best, moves)
        if best is not None:
            break
    return best or 0
