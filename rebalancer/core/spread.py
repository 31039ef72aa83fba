"""Spread analysis: the PodTopologySpread plugin's counting, done once for the whole cluster.

Every pod that declares a constraint defines its own *view* of it: the eligible nodes follow
from that pod's topology keys, node affinity and tolerations (per the inclusion policies), the
selector from its labelSelector merged with matchLabelKeys. Pods with identical views share one.
A view counts every matching, bound pod in its namespace on an eligible node, whether or not
that pod declares the constraint itself, except pods that are leaving: terminating, or carrying
the DisruptionTarget condition (SPEC §2.2, §5.6).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, cast

from rebalancer.core.constants import TERMINAL_PHASES
from rebalancer.core.ids import Domain, PodId, ViewId, ViewKey
from rebalancer.core.model import (
    HONOR,
    NOT_SHARED,
    LabelSelector,
    Node,
    NodeSelector,
    Pod,
    Snapshot,
    SpreadConstraint,
    Toleration,
    shared_key,
)
from rebalancer.core.policy import Policy
from rebalancer.core.scope import NamespaceScope
from rebalancer.core.selectors import (
    FILTER_EFFECTS,
    and_selectors,
    node_selector_matches,
    selector_matches,
    selector_string,
    untolerated_taint,
)

DEFAULT_OWNER_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})


@dataclass(frozen=True, slots=True)
class Eligibility:
    """What decides which nodes a view counts: a pod's keys, affinity and tolerations."""

    keys: tuple[str, ...]
    node_selector: tuple[tuple[str, str], ...] | None  # None: nodeAffinityPolicy Ignore
    affinity: NodeSelector | None
    honor_affinity: bool
    tolerations: tuple[Toleration, ...] | None  # None: nodeTaintsPolicy Ignore
    _hash: int = field(init=False, repr=False, compare=False)
    """Computed once: a pod with thousands of (default) constraints has as many keys, and
    every view of it is looked up by its eligibility."""

    def __post_init__(self) -> None:
        fields = (self.keys, self.node_selector, self.affinity, self.honor_affinity)
        object.__setattr__(self, "_hash", hash((*fields, self.tolerations)))

    def __hash__(self) -> int:
        return self._hash


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

    @property
    def key(self) -> ViewKey:
        """The view's name from run to run (:class:`~rebalancer.core.plan.ViewKey`)."""
        c = self.constraint
        return ViewKey(
            self.namespace,
            c.topology_key,
            selector_string(c.selector),
            c.max_skew,
            c.when_unsatisfiable,
        )

    def sort_key(self) -> tuple[str, str, str, int, str, int, str]:
        """The key, then what else tells two views of one key apart."""
        return (*self.key, self.constraint.min_domains, _described(self.eligibility))


@functools.lru_cache(maxsize=256)
def _described(eligibility: Eligibility) -> str:
    """``repr(eligibility)``, remembered: many views share a few eligibilities."""
    return repr(eligibility)


def eligibility_for(
    pod: Pod, constraint: SpreadConstraint, keys: Mapping[bool, tuple[str, ...]]
) -> Eligibility:
    """Eligibility of ``constraint`` as ``pod`` declares it; ``keys``: :func:`sibling_keys` of
    all its constraints."""
    honor_affinity = constraint.node_affinity_policy == HONOR
    return Eligibility(
        keys=keys[constraint.hard],
        node_selector=tuple(sorted(pod.node_selector.items())) if honor_affinity else None,
        affinity=pod.required_affinity if honor_affinity else None,
        honor_affinity=honor_affinity,
        tolerations=pod.tolerations if constraint.node_taints_policy == HONOR else None,
    )


def sibling_keys(
    siblings: Sequence[SpreadConstraint], interned: dict[tuple[str, ...], tuple[str, ...]]
) -> dict[bool, tuple[str, ...]]:
    """The topology keys of a pod's hard constraints and of its soft ones, each sorted: a node
    counts for one of its views only when it has every key of the same kind. Built once per
    pod, so a pod with many constraints costs linear time, not their square; equal key sets
    are one tuple (``interned``), so equal eligibilities compare at once."""
    keys: dict[bool, set[str]] = {True: set(), False: set()}
    for c in siblings:
        keys[c.hard].add(c.topology_key)
    return {hard: interned.setdefault(k := tuple(sorted(found)), k) for hard, found in keys.items()}


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
    if not c.match_label_keys and not c.default:
        return c
    return dataclasses.replace(c, match_label_keys=(), default=False)


EMPTY_SELECTOR_COUNTS_FROM: Final = 38
"""The first minor of 1.x whose kube-scheduler counts the pods an empty ``labelSelector: {}``
matches. Up to 1.37 ``countPodsMatchSelector`` returned 0 for any selector that is
``Empty()`` (``labels.Everything()``, what ``{}`` parses to), so such a constraint counted no
pod in any domain and never held a pod back; 1.38 returns 0 only for ``labels.Nothing()`` (a
nil selector), so ``{}`` counts every pod of the namespace."""


def empty_selector_counts(server_minor: int | None) -> bool:
    """Whether an empty selector counts the pods it matches on a server of that minor; an
    unknown server (a snapshot file) gets the newest rule."""
    return server_minor is None or server_minor >= EMPTY_SELECTOR_COUNTS_FROM


def counted_constraint(c: SpreadConstraint, empty_counts: bool) -> SpreadConstraint:
    """The constraint as a view counts it: an empty selector counts no pod where the server's
    scheduler says so (:func:`empty_selector_counts`). It still holds its topology key, and a
    pod's own match adds nothing then: the count of every domain is 0, so the skew of any
    placement is at most 1, within every maxSkew."""
    c = view_key_constraint(c)
    s = c.selector
    if empty_counts or s is None or s.match_labels or s.match_expressions:
        return c
    return dataclasses.replace(c, selector=None)


def global_min(counts: Mapping[str, int], domains: int, min_domains: int, hard: bool) -> int:
    """Minimum count over the ``domains`` eligible domains; 0 when there are fewer than
    minDomains (hard only).

    ``counts`` holds the domains with matching pods: a domain it leaves out counts 0.
    """
    if not counts or len(counts) < domains:
        return 0
    if hard and domains < min_domains:
        return 0
    return min(counts.values())


def skew_of(counts: Mapping[str, int], domains: int, min_domains: int, hard: bool) -> int:
    """The largest ``count(d) - globalMin`` over domains holding matching pods."""
    top = max(counts.values(), default=0)
    if top == 0:
        return 0
    return top - global_min(counts, domains, min_domains, hard)


class PodIndex:
    """Where pods run, and the counted pods indexed for fast selector matching.

    Counted pods are bound, not terminating and not finished. Pods of one template carry equal
    labels, so counted pods are grouped by namespace and labels and a selector is matched once
    per group; the groups are indexed by namespace and by label. The converter numbers equal
    label maps (``Pod.label_set``), a cheap grouping key (pods with equal labels but different
    numbers, or built by hand, only make more groups).
    """

    def __init__(self, pods: Sequence[Pod], numbers: Sequence[int] | None = None) -> None:
        """``numbers``: ``range(len(pods))`` as int objects shared with the analysis's other
        maps (150,000 pods: 4 MiB less than an int object per map)."""
        self.placement: dict[int, str] = {}  # counted pod -> node
        self.terminating: dict[int, str] = {}  # terminating pod -> the node it still uses
        placement = self.placement
        by_labels: dict[tuple[str, int], list[int]] = {}
        # Pods sorted by name run in workloads: most pods join the group of the pod before.
        last_namespace: str | None = None
        last_labels: int | None = None  # None: no group to join (a pod built by hand)
        group: list[int] = []
        for i, pod in zip(numbers, pods, strict=True) if numbers is not None else enumerate(pods):
            node = pod.node_name
            if node is None or pod.phase in TERMINAL_PHASES:  # kube-scheduler never sees them
                continue
            if pod.leaving:  # terminating, or DisruptionTarget: still on its node, not counted
                self.terminating[i] = node
                continue
            placement[i] = node
            label_set = pod.label_set
            if label_set == last_labels and pod.namespace == last_namespace:
                group.append(i)
                continue
            group_key = (pod.namespace, shared_key(label_set, i))
            found = by_labels.get(group_key)
            if found is None:
                group = by_labels[group_key] = [i]
            else:
                group = found
                group.append(i)
            last_namespace = pod.namespace
            last_labels = label_set if label_set != NOT_SHARED else None
        self.labels: list[Mapping[str, str]] = []
        self.members: list[list[int]] = []  # per group, ascending pod indices
        self.by_namespace: dict[str, list[int]] = defaultdict(list)
        self.by_label: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for g, ((namespace, _), members) in enumerate(by_labels.items()):
            labels = pods[members[0]].labels
            self.labels.append(labels)
            self.members.append(members)
            self.by_namespace[namespace].append(g)
            for key, value in labels.items():
                self.by_label[(namespace, key, value)].append(g)

    def matching(self, namespace: str, selector: LabelSelector | None) -> list[int]:
        """Indices (ascending) of counted pods in ``namespace`` that ``selector`` matches."""
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
        labels = self.labels
        groups = [self.members[g] for g in candidates if selector_matches(selector, labels[g])]
        if len(groups) == 1:
            return groups[0]
        return sorted(i for members in groups for i in members)


@dataclass(slots=True)
class View:
    """A view with its eligible nodes and the pods it counts (built once per analysis)."""

    spec: ViewSpec
    node_domain: dict[str, Domain]  # eligible node -> its domain
    domains: Sequence[Domain]  # every eligible domain, sorted
    members: list[PodId]  # counted pods (on eligible nodes)
    declarers: list[PodId]  # pods that declare this view
    counts: dict[Domain, int]  # domain -> count, only the domains holding counted pods

    @property
    def global_min(self) -> int:
        c = self.spec.constraint
        return global_min(self.counts, len(self.domains), c.min_domains, c.hard)

    @property
    def skew(self) -> int:
        c = self.spec.constraint
        return skew_of(self.counts, len(self.domains), c.min_domains, c.hard)

    def all_counts(self, counts: Mapping[str, int]) -> dict[str, int]:
        """``counts`` (this view's, or a simulated state's) with every eligible domain, sorted."""
        return {d: counts.get(d, 0) for d in self.domains}

    @property
    def violated(self) -> bool:
        return self.skew > self.spec.max_skew


@dataclass(slots=True)
class Analysis:
    """All views of a snapshot, where its pods run and which views each pod declares."""

    pods: tuple[Pod, ...]
    nodes: dict[str, Node]
    views: list[View]
    placement: dict[PodId, str]  # counted pod -> node (see PodIndex)
    terminating: dict[PodId, str]  # terminating pod -> the node it still uses
    constraints: dict[PodId, tuple[SpreadConstraint, ...]]  # pod -> effective constraints
    own_views: dict[PodId, list[ViewId]]  # pod -> its own views, in constraint order (shared)
    scope: NamespaceScope  # the namespaces the policy rebalances


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
    snapshot: Snapshot, policy: Policy, numbers: Sequence[int] | None = None
) -> dict[int, tuple[SpreadConstraint, ...]]:
    """Each pod's constraints: its own, or the policy's defaults when it declares none
    (``numbers``: as for :class:`PodIndex`)."""
    index = DefaultSelectorIndex(snapshot) if policy.default_constraints else None
    out: dict[int, tuple[SpreadConstraint, ...]] = {}
    pods = snapshot.pods
    for i, pod in zip(numbers, pods, strict=True) if numbers is not None else enumerate(pods):
        if pod.constraints:
            out[i] = pod.constraints
        elif index is not None:
            defaults = default_constraints_for(pod, index, policy)
            if defaults:
                out[i] = defaults
    return out


def _view_specs(
    pods: Sequence[Pod],
    constraints: Mapping[int, tuple[SpreadConstraint, ...]],
    empty_counts: bool = True,
) -> tuple[list[ViewSpec], list[tuple[list[int], list[int]]]]:
    """The distinct views the non-terminating pods declare, and the pods that declare alike:
    (numbers of their specs, pods) pairs (``empty_counts``: :func:`empty_selector_counts`).

    Pods of one workload share constraints, affinity and tolerations: their specs are built
    once. The converter numbers each template (``Pod.template``), a cheap cache key (a miss
    only costs building equal specs again).
    """
    specs: list[ViewSpec] = []
    numbers: dict[ViewSpec, int] = {}
    alike: dict[tuple[object, ...], tuple[list[int], list[int]]] = {}
    interned: dict[tuple[str, ...], tuple[str, ...]] = {}  # see sibling_keys
    # Pods sorted by name run in workloads: most pods are alike the pod before.
    last_namespace: str | None = None
    last_template: int | None = None  # None: nothing to share with the pod before
    entry: tuple[list[int], list[int]] | None = None
    for i, cons in constraints.items():
        pod = pods[i]
        if pod.leaving:
            continue
        # A pod's own constraints are part of its template; defaults are its own.
        own = cons is pod.constraints
        if own and pod.template == last_template and pod.namespace == last_namespace:
            entry[1].append(i)  # type: ignore[index]  # set with last_template
            continue
        key = (pod.namespace, shared_key(pod.template, i) if own else -1 - i, own)
        last_namespace = pod.namespace
        last_template = pod.template if own and pod.template != NOT_SHARED else None
        entry = alike.get(key)
        if entry is None:
            mine: list[int] = []
            keys = sibling_keys(cons, interned)
            eligible: dict[tuple[bool, str, str], Eligibility] = {}  # a few per pod
            for c in cons:
                kind = (c.hard, c.node_affinity_policy, c.node_taints_policy)
                eligibility = eligible.get(kind)
                if eligibility is None:
                    eligibility = eligible[kind] = eligibility_for(pod, c, keys)
                spec = ViewSpec(pod.namespace, counted_constraint(c, empty_counts), eligibility)
                number = numbers.setdefault(spec, len(specs))
                if number == len(specs):
                    specs.append(spec)
                mine.append(number)
            entry = (mine, [])
            alike[key] = entry
        entry[1].append(i)
    return specs, list(alike.values())


def analyze(snapshot: Snapshot, policy: Policy) -> Analysis:
    """Build every view of the snapshot and count it, as kube-scheduler would.

    It creates no reference cycles: callers with a large snapshot in memory pause the cyclic
    garbage collector around it (:mod:`rebalancer.cluster.gcpause`).
    """
    pods = snapshot.pods
    numbers = list(range(len(pods)))
    constraints = effective_constraints(snapshot, policy, numbers)
    specs, alike = _view_specs(pods, constraints, empty_selector_counts(snapshot.server_minor))
    declarers: list[list[int]] = [[] for _ in specs]
    for mine, pods_alike in alike:
        for number in mine:
            declarers[number].extend(pods_alike)
    index = PodIndex(pods, numbers)
    del numbers
    domains = DomainMaps(snapshot.nodes)
    order = sorted(range(len(specs)), key=lambda number: specs[number].sort_key())
    views = [_count(specs[number], declarers[number], index, domains) for number in order]
    position = [0] * len(specs)  # spec number -> view index
    for v, number in enumerate(order):
        position[number] = v
    own_views: dict[int, list[int]] = {}
    for mine, pods_alike in alike:
        positions = [position[number] for number in mine]
        own_views.update(dict.fromkeys(pods_alike, positions))  # one shared list, at C speed
    nodes = {n.name: n for n in snapshot.nodes}
    # From here on the pods' and views' numbers are their typed ids (casts: nothing copied).
    return Analysis(
        pods,
        nodes,
        views,
        cast(dict[PodId, str], index.placement),
        cast(dict[PodId, str], index.terminating),
        cast(dict[PodId, tuple[SpreadConstraint, ...]], constraints),
        cast(dict[PodId, list[ViewId]], own_views),
        NamespaceScope.of(policy, snapshot),
    )


class DomainMaps:
    """Each eligible node's domain, built once per eligibility and topology key."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self._eligible: dict[Eligibility, list[Node]] = {}
        self._maps: dict[tuple[Eligibility, str], tuple[dict[str, str], list[str]]] = {}

    def of(self, elig: Eligibility, topology_key: str) -> tuple[dict[str, str], list[str]]:
        """Eligible node -> domain, and the sorted domains (shared between views: read-only)."""
        found = self._maps.get((elig, topology_key))
        if found is None:
            eligible = self._eligible.get(elig)
            if eligible is None:
                eligible = [n for n in self.nodes if node_eligible(elig, n)]
                self._eligible[elig] = eligible
            mapping = {n.name: n.labels[topology_key] for n in eligible}
            found = (mapping, sorted(set(mapping.values())))
            self._maps[(elig, topology_key)] = found
        return found


def _count(spec: ViewSpec, declarers: list[int], index: PodIndex, domains: DomainMaps) -> View:
    """The view of ``spec``: the pods it counts and its count per domain."""
    node_domain, all_domains = domains.of(spec.eligibility, spec.topology_key)
    counts: dict[str, int] = {}
    members: list[int] = []
    placement = index.placement
    for i in index.matching(spec.namespace, spec.constraint.selector):
        domain = node_domain.get(placement[i])
        if domain is not None:
            counts[domain] = counts.get(domain, 0) + 1
            members.append(i)
    return View(
        spec,
        node_domain,
        all_domains,
        cast(list[PodId], members),
        cast(list[PodId], declarers),
        counts,
    )


def considered(view: View, policy: Policy, scope: NamespaceScope | None = None) -> bool:
    """Whether the policy asks to rebalance this view: its kind of constraint, in a namespace
    of the policy's scope (``scope``: the analysis's; None builds it from the policy alone,
    which raises when the policy selects namespaces by label)."""
    spec = view.spec
    if spec.constraint.when_unsatisfiable not in policy.constraints:
        return False
    if scope is None:
        scope = NamespaceScope.of(policy, Snapshot())
    return spec.namespace in scope
