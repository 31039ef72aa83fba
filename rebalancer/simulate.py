"""A scheduler simulation: where would the replacement of an evicted pod land? (pure)

The state holds every pod's placement, each node's used resources and every view's domain
counts. Evicting a pod removes it; its replacement is a copy of it without ``nodeName``, placed
on a node that passes the scheduler's hard filters (the replacement's own hard spread
constraints, resources, taints, node selector and required affinity, cordon, volume node
affinity). Among those nodes it takes the one whose domain is least populated, ranking by the
replacement's own constraints first, then by every considered view that counts it; ties go to
the node name (SPEC §3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rebalancer.model import Node, NodeSelector, Pod, Snapshot
from rebalancer.selectors import (
    FILTER_EFFECTS,
    UNSCHEDULABLE_TAINT,
    node_selector_matches,
    pod_affinity_matches,
    selector_matches,
    tolerates,
    untolerated_taint,
)
from rebalancer.spread import (
    TERMINAL_PHASES,
    Analysis,
    eligibility_for,
    global_min,
    view_key_constraint,
)


@dataclass(frozen=True, slots=True)
class Placement:
    node: str | None  # None: the replacement would stay Pending
    reason: str  # why no node, when node is None


def volume_pins(
    pod: Pod,
    pv_affinity: Mapping[str, NodeSelector | None],
    pvc_volume: Mapping[tuple[str, str], str | None],
) -> tuple[NodeSelector, ...]:
    """Node affinities of the PVs bound to the pod's claims: the pod cannot leave them."""
    pins: list[NodeSelector] = []
    for claim in pod.pvc_names:
        volume = pvc_volume.get((pod.namespace, claim))
        if volume is None:
            continue
        affinity = pv_affinity.get(volume)
        if affinity is not None:
            pins.append(affinity)
    return tuple(pins)


def static_reason(pod: Pod, node: Node, pins: Sequence[NodeSelector]) -> str | None:
    """Filters that do not depend on other pods: cordon, readiness, taints, affinity, volumes."""
    if node.unschedulable and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in pod.tolerations):
        return "node is cordoned"
    if not node.ready:
        return "node is not Ready"
    taint = untolerated_taint(pod.tolerations, node.taints, FILTER_EFFECTS)
    if taint is not None:
        return f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    if not pod_affinity_matches(pod, node):
        return "node selector / required affinity do not match"
    for pin in pins:
        if not node_selector_matches(pin, node):
            return "a bound PersistentVolume's node affinity does not match"
    return None


class SimState:
    """Mutable scheduler state for one planning pass."""

    def __init__(self, snapshot: Snapshot, analysis: Analysis, rank_views: Sequence[int]) -> None:
        self.analysis = analysis
        self.nodes = analysis.nodes
        self.node_names = sorted(self.nodes)
        self.views = analysis.views
        self.counts: list[dict[str, int]] = [dict(v.counts) for v in analysis.views]
        self._gmin: dict[int, int] = {}
        self.rank_views = set(rank_views)
        self.used: dict[str, dict[str, int]] = {name: {} for name in self.nodes}
        self.placement: dict[int, str] = {}
        for i, pod in enumerate(analysis.pods):
            if pod.node_name is None or pod.phase in TERMINAL_PHASES:
                continue
            if pod.node_name in self.used:
                self._charge(pod, pod.node_name, 1)
            if not pod.terminating:
                self.placement[i] = pod.node_name
        self.pv_affinity = {pv.name: pv.node_affinity for pv in snapshot.pvs}
        self.pvc_volume = {(c.namespace, c.name): c.volume_name for c in snapshot.pvcs}
        self._static_cache: dict[tuple[object, ...], list[str]] = {}
        self._selector_views: dict[int, list[int]] = {}
        self.own_views = _own_views(analysis)
        self.members: list[dict[str, set[int]]] = []
        for view in analysis.views:
            by_domain: dict[str, set[int]] = {d: set() for d in view.counts}
            for i in view.members:
                by_domain[view.node_domain[analysis.pods[i].node_name or ""]].add(i)
            self.members.append(by_domain)

    # -- bookkeeping -------------------------------------------------------------------------
    def _charge(self, pod: Pod, node: str, sign: int) -> None:
        used = self.used[node]
        for res, amount in pod.requests.items():
            used[res] = used.get(res, 0) + sign * amount
        used["pods"] = used.get("pods", 0) + sign

    def gmin(self, v: int) -> int:
        cached = self._gmin.get(v)
        if cached is None:
            c = self.views[v].spec.constraint
            cached = global_min(self.counts[v], c.min_domains, c.hard)
            self._gmin[v] = cached
        return cached

    def skew(self, v: int) -> int:
        counts = self.counts[v]
        if not counts:
            return 0
        top = max(counts.values())
        return 0 if top == 0 else top - self.gmin(v)

    def excess(self, v: int) -> int:
        return max(0, self.skew(v) - self.views[v].spec.max_skew)

    def _bump(self, v: int, domain: str, i: int, delta: int) -> None:
        self.counts[v][domain] += delta
        if delta > 0:
            self.members[v][domain].add(i)
        else:
            self.members[v][domain].discard(i)
        self._gmin.pop(v, None)

    def selector_views(self, i: int) -> list[int]:
        """Views (in the pod's namespace) whose selector matches the pod, wherever it runs."""
        found = self._selector_views.get(i)
        if found is None:
            pod = self.analysis.pods[i]
            found = [
                v
                for v, view in enumerate(self.views)
                if view.spec.namespace == pod.namespace
                and selector_matches(view.spec.constraint.selector, pod.labels)
            ]
            self._selector_views[i] = found
        return found

    def domain(self, v: int, node: str) -> str | None:
        """The node's domain in view v, if the node is eligible for it."""
        return self.views[v].node_domain.get(node)

    def remove(self, i: int) -> str:
        """Evict pod i: it stops counting and frees its resources. Returns its node."""
        node = self.placement.pop(i)
        pod = self.analysis.pods[i]
        self._charge(pod, node, -1)
        for v in self.selector_views(i):
            d = self.domain(v, node)
            if d is not None:
                self._bump(v, d, i, -1)
        return node

    def add(self, i: int, node: str) -> None:
        """Place pod i (or its replacement) on ``node``."""
        self.placement[i] = node
        self._charge(self.analysis.pods[i], node, 1)
        for v in self.selector_views(i):
            d = self.domain(v, node)
            if d is not None:
                self._bump(v, d, i, 1)

    # -- filters -----------------------------------------------------------------------------
    def static_nodes(self, i: int) -> list[str]:
        """Nodes that pass the filters independent of other pods, cached per pod template."""
        pod = self.analysis.pods[i]
        pins = volume_pins(pod, self.pv_affinity, self.pvc_volume)
        key = (
            tuple(sorted(pod.node_selector.items())),
            pod.required_affinity,
            pod.tolerations,
            pins,
        )
        found = self._static_cache.get(key)
        if found is None:
            found = [n for n in self.node_names if static_reason(pod, self.nodes[n], pins) is None]
            self._static_cache[key] = found
        return found

    def fits(self, pod: Pod, node: str) -> bool:
        """Requests against allocatable minus what is already placed there."""
        alloc = self.nodes[node].allocatable
        used = self.used[node]
        if "pods" in alloc and used.get("pods", 0) + 1 > alloc["pods"]:
            return False
        for res, amount in pod.requests.items():
            if amount and used.get(res, 0) + amount > alloc.get(res, 0):
                return False
        return True

    def spread_ok(self, i: int, node: str) -> bool:
        """The PodTopologySpread filter for the pod's own hard constraints."""
        pod = self.analysis.pods[i]
        labels = self.nodes[node].labels
        for v in self.own_views.get(i, ()):
            spec = self.views[v].spec
            if not spec.hard:
                continue
            value = labels.get(spec.topology_key)
            if value is None:
                return False
            self_match = 1 if selector_matches(spec.constraint.selector, pod.labels) else 0
            if self.counts[v].get(value, 0) + self_match - self.gmin(v) > spec.max_skew:
                return False
        return True

    def rank(self, i: int, node: str) -> tuple[object, ...]:
        labels = self.nodes[node].labels
        own = self.own_views.get(i, [])
        key: list[int] = []
        for v in own:
            key.append(self.counts[v].get(labels.get(self.views[v].spec.topology_key, ""), 0))
        for v in self.selector_views(i):
            if v in self.rank_views and v not in own:
                key.append(self.counts[v].get(labels.get(self.views[v].spec.topology_key, ""), 0))
        return (*key, node)

    def place(self, i: int, check_fit: bool = True) -> Placement:
        """Where the replacement of pod i lands on the current state (it must be removed)."""
        pod = self.analysis.pods[i]
        best: tuple[object, ...] | None = None
        statics = self.static_nodes(i)
        if not statics:
            return Placement(None, "no node passes taints, affinity, cordon and volume checks")
        spread_blocked = 0
        for node in statics:
            if not self.spread_ok(i, node):
                spread_blocked += 1
                continue
            if check_fit and not self.fits(pod, node):
                continue
            r = self.rank(i, node)
            if best is None or r < best:
                best = r
        if best is None:
            why = (
                "every node is blocked by its own spread constraints"
                if spread_blocked == len(statics)
                else "no node has room for its requests"
            )
            return Placement(None, why)
        node_name = best[-1]
        assert isinstance(node_name, str)
        return Placement(node_name, "")


def _own_views(analysis: Analysis) -> dict[int, list[int]]:
    """Each pod's own views, in the order of its constraints."""
    index: dict[int, dict[object, int]] = {}
    for v, view in enumerate(analysis.views):
        for i in view.declarers:
            index.setdefault(i, {})[(view.spec.constraint, view.spec.eligibility)] = v
    out: dict[int, list[int]] = {}
    for i, cons in analysis.constraints.items():
        mine = index.get(i)
        if not mine:
            continue
        pod = analysis.pods[i]
        ordered = []
        for c in cons:
            k = (view_key_constraint(c), eligibility_for(pod, c, cons))
            if k in mine:
                ordered.append(mine[k])
        out[i] = ordered
    return out
