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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rebalancer.model import LabelSelector, Node, NodeSelector, Pod, Snapshot
from rebalancer.selectors import (
    FILTER_EFFECTS,
    UNSCHEDULABLE_TAINT,
    node_selector_matches,
    pod_affinity_matches,
    selector_matches,
    tolerates,
    untolerated_taint,
)
from rebalancer.spread import TERMINAL_PHASES, Analysis, global_min


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


class Shared:
    """What every simulation of one analysis shares: the start state and pure caches."""

    def __init__(self, snapshot: Snapshot, analysis: Analysis, rank_views: Iterable[int]) -> None:
        self.analysis = analysis
        self.nodes = analysis.nodes
        self.node_names = sorted(self.nodes)
        self.views = analysis.views
        self.rank_views = frozenset(rank_views)
        self.own_views = analysis.own_views
        self.pv_affinity = {pv.name: pv.node_affinity for pv in snapshot.pvs}
        self.pvc_volume = {(c.namespace, c.name): c.volume_name for c in snapshot.pvcs}
        self.used: dict[str, dict[str, int]] = {name: {} for name in self.nodes}
        self.placement: dict[int, str] = {}
        for i, pod in enumerate(analysis.pods):
            if pod.node_name is None or pod.phase in TERMINAL_PHASES:
                continue
            if pod.node_name in self.used:
                _charge(self.used[pod.node_name], pod, 1)
            if not pod.terminating:
                self.placement[i] = pod.node_name
        # Views by one required label (namespace, key, value); views without one are scanned.
        self._views_by_label: dict[tuple[str, str, str], list[int]] = {}
        self._views_scanned: dict[str, list[int]] = {}
        for v, view in enumerate(self.views):
            ns = view.spec.namespace
            required = _required_label(view.spec.constraint.selector)
            if required is None:
                self._views_scanned.setdefault(ns, []).append(v)
            else:
                self._views_by_label.setdefault((ns, *required), []).append(v)
        self._static: dict[tuple[object, ...], tuple[str, ...]] = {}
        self._groups: dict[tuple[object, ...], dict[str, list[str]]] = {}
        self._selector_views: dict[int, list[int]] = {}
        self._by_labels: dict[tuple[str, tuple[tuple[str, str], ...]], list[int]] = {}

    def selector_views(self, i: int) -> list[int]:
        """Views (in the pod's namespace) whose selector matches the pod, wherever it runs."""
        found = self._selector_views.get(i)
        if found is None:
            pod = self.analysis.pods[i]
            labels_key = (pod.namespace, tuple(sorted(pod.labels.items())))
            found = self._by_labels.get(labels_key)
            if found is None:
                ns = pod.namespace
                candidates = list(self._views_scanned.get(ns, ()))
                for key, value in pod.labels.items():
                    candidates.extend(self._views_by_label.get((ns, key, value), ()))
                found = sorted(
                    v
                    for v in candidates
                    if selector_matches(self.views[v].spec.constraint.selector, pod.labels)
                )
                self._by_labels[labels_key] = found
            self._selector_views[i] = found
        return found

    def static_key(self, i: int) -> tuple[object, ...]:
        pod = self.analysis.pods[i]
        pins = volume_pins(pod, self.pv_affinity, self.pvc_volume)
        return (
            tuple(sorted(pod.node_selector.items())),
            pod.required_affinity,
            pod.tolerations,
            pins,
        )

    def static_nodes(self, i: int, key: tuple[object, ...]) -> tuple[str, ...]:
        """Nodes that pass the filters independent of other pods, cached per pod template."""
        found = self._static.get(key)
        if found is None:
            pod = self.analysis.pods[i]
            pins = key[3]
            assert isinstance(pins, tuple)
            found = tuple(
                n for n in self.node_names if static_reason(pod, self.nodes[n], pins) is None
            )
            self._static[key] = found
        return found

    def groups(
        self, key: tuple[object, ...], nodes: Sequence[str], topology_key: str
    ) -> dict[str, list[str]]:
        """The nodes grouped by their value of ``topology_key`` ("" when they lack it)."""
        gkey = (key, topology_key)
        found = self._groups.get(gkey)
        if found is None:
            found = {}
            for n in nodes:
                found.setdefault(self.nodes[n].labels.get(topology_key, ""), []).append(n)
            self._groups[gkey] = found
        return found


def _required_label(selector: LabelSelector | None) -> tuple[str, str] | None:
    """A label every matching pod must carry: a matchLabels pair or a one-value In."""
    if selector is None:
        return None
    if selector.match_labels:
        return selector.match_labels[0]
    for req in selector.match_expressions:
        if req.operator == "In" and len(req.values) == 1:
            return (req.key, req.values[0])
    return None


def _charge(used: dict[str, int], pod: Pod, sign: int) -> None:
    for res, amount in pod.requests.items():
        used[res] = used.get(res, 0) + sign * amount
    used["pods"] = used.get("pods", 0) + sign


class SimState:
    """Mutable scheduler state for one planning pass."""

    def __init__(
        self,
        snapshot: Snapshot,
        analysis: Analysis,
        rank_views: Iterable[int],
        *,
        shared: Shared | None = None,
        track_members: bool = True,
    ) -> None:
        sh = shared if shared is not None else Shared(snapshot, analysis, rank_views)
        self.shared = sh
        self.snapshot = snapshot
        self.analysis = analysis
        self.nodes = sh.nodes
        self.node_names = sh.node_names
        self.views = sh.views
        self.rank_views = sh.rank_views
        self.own_views = sh.own_views
        self.pv_affinity = sh.pv_affinity
        self.pvc_volume = sh.pvc_volume
        # Copy on write: a view's counts are copied from the analysis the first time they change.
        self.counts: list[dict[str, int]] = [v.counts for v in analysis.views]
        self._own_counts: set[int] = set()
        self._gmin: dict[int, int] = {}
        self._skew: dict[int, int] = {}
        self._excess: dict[int, int] = {}
        self.version = [0] * len(self.views)
        self._used: dict[str, dict[str, int]] = {}  # copy on write of shared.used
        self.placement = dict(sh.placement)
        self.track_members = track_members
        self._members: dict[int, dict[str, set[int]]] = {}

    def fresh(self) -> SimState:
        """A new state at the start of the plan, sharing this one's caches."""
        return SimState(self.snapshot, self.analysis, (), shared=self.shared, track_members=False)

    # -- bookkeeping -------------------------------------------------------------------------
    def gmin(self, v: int) -> int:
        cached = self._gmin.get(v)
        if cached is None:
            c = self.views[v].spec.constraint
            cached = global_min(self.counts[v], c.min_domains, c.hard)
            self._gmin[v] = cached
        return cached

    def skew(self, v: int) -> int:
        cached = self._skew.get(v)
        if cached is None:
            counts = self.counts[v]
            top = max(counts.values(), default=0)
            cached = 0 if top == 0 else top - self.gmin(v)
            self._skew[v] = cached
        return cached

    def excess(self, v: int) -> int:
        cached = self._excess.get(v)
        if cached is None:
            cached = max(0, self.skew(v) - self.views[v].spec.max_skew)
            self._excess[v] = cached
        return cached

    def members(self, v: int, domain: str) -> set[int]:
        """The pods view v counts in ``domain`` now (built on first use)."""
        by_domain = self._members.get(v)
        if by_domain is None:
            if not self.track_members:
                raise ValueError("this state does not track members")
            view = self.views[v]
            by_domain = {}
            pods = self.analysis.pods
            for i in view.members:
                d = view.node_domain[pods[i].node_name or ""]
                by_domain.setdefault(d, set()).add(i)
            self._members[v] = by_domain
        return by_domain.setdefault(domain, set())

    def _bump(self, v: int, domain: str, i: int, delta: int) -> None:
        if v not in self._own_counts:
            self.counts[v] = dict(self.counts[v])
            self._own_counts.add(v)
        self.counts[v][domain] += delta
        by_domain = self._members.get(v)
        if by_domain is not None:
            if delta > 0:
                by_domain.setdefault(domain, set()).add(i)
            else:
                by_domain.setdefault(domain, set()).discard(i)
        self._gmin.pop(v, None)
        self._skew.pop(v, None)
        self._excess.pop(v, None)
        self.version[v] += 1

    def selector_views(self, i: int) -> list[int]:
        return self.shared.selector_views(i)

    def _writable_used(self, node: str) -> dict[str, int]:
        used = self._used.get(node)
        if used is None:
            used = dict(self.shared.used[node])
            self._used[node] = used
        return used

    def domain(self, v: int, node: str) -> str | None:
        """The node's domain in view v, if the node is eligible for it."""
        return self.views[v].node_domain.get(node)

    def remove(self, i: int) -> str:
        """Evict pod i: it stops counting and frees its resources. Returns its node."""
        node = self.placement.pop(i)
        _charge(self._writable_used(node), self.analysis.pods[i], -1)
        for v in self.selector_views(i):
            d = self.domain(v, node)
            if d is not None:
                self._bump(v, d, i, -1)
        return node

    def add(self, i: int, node: str) -> None:
        """Place pod i (or its replacement) on ``node``."""
        self.placement[i] = node
        _charge(self._writable_used(node), self.analysis.pods[i], 1)
        for v in self.selector_views(i):
            d = self.domain(v, node)
            if d is not None:
                self._bump(v, d, i, 1)

    # -- filters -----------------------------------------------------------------------------
    def static_nodes(self, i: int) -> tuple[str, ...]:
        return self.shared.static_nodes(i, self.shared.static_key(i))

    def fits(self, pod: Pod, node: str) -> bool:
        """Requests against allocatable minus what is already placed there."""
        alloc = self.nodes[node].allocatable
        used = self._used.get(node) or self.shared.used[node]
        if "pods" in alloc and used.get("pods", 0) + 1 > alloc["pods"]:
            return False
        for res, amount in pod.requests.items():
            if amount and used.get(res, 0) + amount > alloc.get(res, 0):
                return False
        return True

    def hard_checks(self, i: int) -> list[tuple[int, str, int, int]]:
        """(view, topology key, selfMatch, maxSkew) of pod i's own hard constraints."""
        pod = self.analysis.pods[i]
        out = []
        for v in self.own_views.get(i, ()):
            spec = self.views[v].spec
            if spec.hard:
                self_match = 1 if selector_matches(spec.constraint.selector, pod.labels) else 0
                out.append((v, spec.topology_key, self_match, spec.max_skew))
        return out

    def spread_ok(
        self, i: int, node: str, checks: list[tuple[int, str, int, int]] | None = None
    ) -> bool:
        """The PodTopologySpread filter for the pod's own hard constraints."""
        labels = self.nodes[node].labels
        for v, key, self_match, max_skew in checks if checks is not None else self.hard_checks(i):
            value = labels.get(key)
            if value is None:
                return False
            if self.counts[v].get(value, 0) + self_match - self.gmin(v) > max_skew:
                return False
        return True

    def rank_views_of(self, i: int) -> list[int]:
        """The views that rank nodes for pod i: its own, then considered views counting it."""
        own = self.own_views.get(i, [])
        return own + [v for v in self.selector_views(i) if v in self.rank_views and v not in own]

    def place(self, i: int, check_fit: bool = True) -> Placement:
        """Where the replacement of pod i lands on the current state (it must be removed).

        Candidates are narrowed view by view: first the nodes whose domain has the lowest
        count in the first ranking view, then, among those, the lowest count in the next
        view, and so on; ties go to the node name. The first level holding a legal node
        (spread, and fit unless ``check_fit`` is off) wins.
        """
        pod = self.analysis.pods[i]
        key = self.shared.static_key(i)
        statics = self.shared.static_nodes(i, key)
        if not statics:
            return Placement(None, "no node passes taints, affinity, cordon and volume checks")
        views = self.rank_views_of(i)
        checks = self.hard_checks(i)
        tried = [0, 0]  # nodes visited, nodes rejected by spread

        def legal(node: str) -> bool:
            tried[0] += 1
            if not self.spread_ok(i, node, checks):
                tried[1] += 1
                return False
            return not check_fit or self.fits(pod, node)

        def pick(candidates: Sequence[str], depth: int) -> str | None:
            if depth == len(views):
                return next((n for n in candidates if legal(n)), None)
            v = views[depth]
            counts = self.counts[v]
            topology_key = self.views[v].spec.topology_key
            nodes = self.nodes
            levels: dict[int, list[str]] = {}
            for n in candidates:
                c = counts.get(nodes[n].labels.get(topology_key, ""), 0)
                levels.setdefault(c, []).append(n)
            for c in sorted(levels):
                found = pick(levels[c], depth + 1)
                if found is not None:
                    return found
            return None

        if views:
            first = views[0]
            counts = self.counts[first]
            groups = self.shared.groups(key, statics, self.views[first].spec.topology_key)
            by_level: dict[int, list[str]] = {}
            for domain, members in groups.items():
                by_level.setdefault(counts.get(domain, 0), []).extend(members)
            for c in sorted(by_level):
                found = pick(sorted(by_level[c]), 1)
                if found is not None:
                    return Placement(found, "")
        else:
            found = pick(statics, 0)
            if found is not None:
                return Placement(found, "")
        why = (
            "every node is blocked by its own spread constraints"
            if tried[1] == tried[0]
            else "no node has room for its requests"
        )
        return Placement(None, why)
