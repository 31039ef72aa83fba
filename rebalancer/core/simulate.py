"""A scheduler simulation: where would the replacement of an evicted pod land? (pure)

The state holds every pod's placement, each node's used resources (what the pods there at the
start request, plus what moved since) and every view's counts of the domains holding its pods.
Evicting a pod removes it; its replacement is a copy of it without ``nodeName``, placed
on a node that passes the scheduler's hard filters (the replacement's own hard spread
constraints, resources, taints, node selector and required affinity, cordon, volume node
affinity). Among those nodes it takes the one whose domain is least populated, ranking by the
replacement's own constraints first, then by every considered view that counts it; ties go to
the node name (SPEC §3.3).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, filterfalse
from typing import cast

from rebalancer.core.ids import Domain, PodId, ViewId
from rebalancer.core.karpenter.marks import DISRUPTED_TAINT_KEY, node_disrupted
from rebalancer.core.karpenter.newnodes import NewNodes, Pools
from rebalancer.core.model import (
    ZONE_KEY,
    Node,
    NodeSelector,
    Pod,
    Snapshot,
    shared_key,
)
from rebalancer.core.selectors import (
    FILTER_EFFECTS,
    UNSCHEDULABLE_TAINT,
    SelectorIndex,
    node_selector_matches,
    pod_affinity_matches,
    selector_matches,
    tolerates,
    untolerated_taint,
)
from rebalancer.core.spread import Analysis, global_min


@dataclass(frozen=True, slots=True)
class Placement:
    node: str | None  # None: the replacement would stay Pending
    reason: str  # why no node, when node is None
    waits: bool = False  # no room on node yet, the replacement waits for a new one (counted)
    pool: str = ""  # NodePools known, no room on node: ``NodePool p in zone-b``, what it waits for


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
    if node_disrupted(node):  # whatever the pod tolerates: the node is being drained
        return f"node is being disrupted ({DISRUPTED_TAINT_KEY})"
    if not node.ready:
        return "node is not Ready"
    taint = untolerated_taint(pod.tolerations, node.taints, FILTER_EFFECTS)
    if taint is not None:
        return f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    if not pod_affinity_matches(pod, node):
        return "node selector / required affinity do not match"
    if pod.required_features and not pod.required_features <= node.declared_features:
        missing = ", ".join(sorted(pod.required_features - node.declared_features))
        return f"node does not declare the features the pod needs: {missing}"
    for pin in pins:
        if not node_selector_matches(pin, node):
            return "a bound PersistentVolume's node affinity does not match"
    return None


class Shared:
    """What every simulation of one analysis shares: the start state and pure caches."""

    def __init__(
        self, snapshot: Snapshot, analysis: Analysis, rank_views: Iterable[ViewId]
    ) -> None:
        self.analysis = analysis
        self.nodes = analysis.nodes
        self.node_names = sorted(self.nodes)
        self.views = analysis.views
        self.rank_views = frozenset(rank_views)
        self.own_views = analysis.own_views
        self.pv_affinity = {pv.name: pv.node_affinity for pv in snapshot.pvs}
        self.pvc_volume = {(c.namespace, c.name): c.volume_name for c in snapshot.pvcs}
        # Karpenter's NodePools (SPEC §5.10), judged once; None when the snapshot has none
        self.pools = Pools(snapshot) if snapshot.node_pools else None
        self.placement = analysis.placement  # read-only: each state copies it
        self._pods_on: dict[str, list[PodId]] | None = None  # node -> pods using its resources
        self._used: dict[str, dict[str, int]] = {}
        self._view_index = SelectorIndex(
            (view.spec.namespace, view.spec.constraint.selector) for view in self.views
        )
        self._static: dict[tuple[object, ...], tuple[str, ...]] = {}
        self._static_by_template: dict[tuple[object, ...], tuple[str, ...]] = {}
        self._groups: dict[tuple[int, str], dict[str, list[str]]] = {}
        self._by_value: dict[str, dict[str, list[str]]] = {}
        self._selector_views: dict[PodId, list[ViewId]] = {}
        self._by_labels: dict[tuple[str, int], list[ViewId]] = {}

    def used(self, node: str) -> dict[str, int]:
        """What the pods on ``node`` at the start request (read-only; built on first use)."""
        found = self._used.get(node)
        if found is None:
            if self._pods_on is None:
                # defaultdict: setdefault(on, []) would build a list per pod, and drop it
                pods_on: defaultdict[str, list[PodId]] = defaultdict(list)
                for i, on in chain(self.placement.items(), self.analysis.terminating.items()):
                    pods_on[on].append(i)
                self._pods_on = pods_on
            found = {}
            pods = self.analysis.pods
            for i in self._pods_on.get(node, ()):
                _charge(found, pods[i], 1)
            self._used[node] = found
        return found

    def selector_views(self, i: PodId) -> list[ViewId]:
        """Views (in the pod's namespace) whose selector matches the pod, wherever it runs."""
        found = self._selector_views.get(i)
        if found is None:
            pod = self.analysis.pods[i]
            # Pods with equal labels share a label_set number: match once per label set.
            labels_key = (pod.namespace, shared_key(pod.label_set, i))
            found = self._by_labels.get(labels_key)
            if found is None:
                found = cast(list[ViewId], self._view_index.matching(pod.namespace, pod.labels))
                self._by_labels[labels_key] = found
            self._selector_views[i] = found
        return found

    def static_nodes(self, i: PodId) -> tuple[str, ...]:
        """Nodes that pass the filters independent of other pods, cached per pod template.

        The converter numbers each pod template (``Pod.template``), so the number finds the
        template without hashing it; equal templates with different numbers (or pods built by
        hand) still share the nodes through the content-keyed cache.
        """
        pod = self.analysis.pods[i]
        ident = (pod.namespace, pod.pvc_names, shared_key(pod.template, i))
        found = self._static_by_template.get(ident)
        if found is None:
            pins = volume_pins(pod, self.pv_affinity, self.pvc_volume)
            key = (
                tuple(sorted(pod.node_selector.items())),
                pod.required_affinity,
                pod.tolerations,
                pins,
            )
            found = self._static.get(key)
            if found is None:
                found = tuple(
                    n for n in self.node_names if static_reason(pod, self.nodes[n], pins) is None
                )
                self._static[key] = found
            self._static_by_template[ident] = found
        return found

    def nodes_by_value(self, topology_key: str) -> dict[str, list[str]]:
        """Every node by its value of ``topology_key`` ("" when it lacks it)."""
        found = self._by_value.get(topology_key)
        if found is None:
            found = defaultdict(list)
            for n in self.node_names:
                found[self.nodes[n].labels.get(topology_key, "")].append(n)
            self._by_value[topology_key] = found
        return found

    def groups(self, statics: tuple[str, ...], topology_key: str) -> dict[str, list[str]]:
        """The nodes of ``statics`` (a :meth:`static_nodes` answer) by their value of
        ``topology_key`` ("" when they lack it), each group in the order of ``statics``."""
        gkey = (id(statics), topology_key)  # static_nodes keeps its answers alive
        found = self._groups.get(gkey)
        if found is None:
            found = defaultdict(list)
            for n in statics:
                found[self.nodes[n].labels.get(topology_key, "")].append(n)
            self._groups[gkey] = found
        return found


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
        rank_views: Iterable[ViewId],
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
        # As in the analysis, they hold only the domains where the view counts pods.
        self.counts: list[dict[str, int]] = [v.counts for v in analysis.views]
        self._own_counts: set[ViewId] = set()
        self._gmin: dict[ViewId, int] = {}
        self._skew: dict[ViewId, int] = {}
        self._excess: dict[ViewId, int] = {}
        self.version = [0] * len(self.views)
        self._moved: dict[str, dict[str, int]] = {}  # node -> requests added (+) or removed (-)
        self.placement = dict(sh.placement)
        self.track_members = track_members
        self._members: dict[ViewId, dict[Domain, set[PodId]]] = {}
        self.waiting: set[PodId] = set()
        """Pods whose replacement went where no node had room for it (nodeFit off): it waits
        for a new node. Counted against ``maxWaitingForNodes``; forgotten when moved again."""
        self.new_nodes: NewNodes | None = (
            sh.pools.new_nodes(self.nodes) if sh.pools is not None else None
        )
        """NodePools known: what this state asks of them, the nodes its replacements placed
        where no node has room wait for (SPEC §5.10), kept by :meth:`add` and :meth:`remove`."""

    def fresh(self) -> SimState:
        """A new state at the start of the plan, sharing this one's caches."""
        return SimState(self.snapshot, self.analysis, (), shared=self.shared, track_members=False)

    # -- bookkeeping -------------------------------------------------------------------------
    def gmin(self, v: ViewId) -> int:
        cached = self._gmin.get(v)
        if cached is None:
            view = self.views[v]
            c = view.spec.constraint
            cached = global_min(self.counts[v], len(view.domains), c.min_domains, c.hard)
            self._gmin[v] = cached
        return cached

    def skew(self, v: ViewId) -> int:
        cached = self._skew.get(v)
        if cached is None:
            counts = self.counts[v]
            top = max(counts.values(), default=0)
            cached = 0 if top == 0 else top - self.gmin(v)
            self._skew[v] = cached
        return cached

    def excess(self, v: ViewId) -> int:
        cached = self._excess.get(v)
        if cached is None:
            cached = max(0, self.skew(v) - self.views[v].spec.max_skew)
            self._excess[v] = cached
        return cached

    def members(self, v: ViewId, domain: Domain) -> set[PodId]:
        """The pods view v counts in ``domain`` now (built on first use)."""
        by_domain = self._members.get(v)
        if by_domain is None:
            if not self.track_members:
                raise ValueError("this state does not track members")
            view = self.views[v]
            by_domain = defaultdict(set)
            start = self.shared.placement
            for i in view.members:
                by_domain[view.node_domain[start[i]]].add(i)
            self._members[v] = by_domain
        return by_domain.setdefault(domain, set())

    def _bump(self, v: ViewId, domain: Domain, i: PodId, delta: int) -> None:
        if v not in self._own_counts:
            self.counts[v] = dict(self.counts[v])
            self._own_counts.add(v)
        counts = self.counts[v]
        count = counts.get(domain, 0) + delta
        if count:
            counts[domain] = count
        else:
            del counts[domain]
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

    def selector_views(self, i: PodId) -> list[ViewId]:
        return self.shared.selector_views(i)

    def domain(self, v: ViewId, node: str) -> Domain | None:
        """The node's domain in view v, if the node is eligible for it."""
        return self.views[v].node_domain.get(node)

    def remove(self, i: PodId) -> str:
        """Evict pod i: it stops counting and frees its resources. Returns its node."""
        node = self.placement.pop(i)
        self.waiting.discard(i)
        if self.new_nodes is not None:
            self.new_nodes.release(i, self.analysis.pods[i])
        _charge(self._moved.setdefault(node, {}), self.analysis.pods[i], -1)
        for v in self.selector_views(i):
            d = self.domain(v, node)
            if d is not None:
                self._bump(v, d, i, -1)
        return node

    def add(self, i: PodId, node: str) -> None:
        """Place pod i (or its replacement) on ``node``. NodePools known and no room on the
        node (and not the pod's own node, put back): the replacement waits for a node a pool
        adds in its domain (:attr:`new_nodes`)."""
        if (
            self.new_nodes is not None
            and node != self.shared.placement.get(i)
            and not self.fits(self.analysis.pods[i], node)
        ):
            self.new_nodes.reserve(i, self.analysis.pods[i], node)
        self.placement[i] = node
        _charge(self._moved.setdefault(node, {}), self.analysis.pods[i], 1)
        for v in self.selector_views(i):
            d = self.domain(v, node)
            if d is not None:
                self._bump(v, d, i, 1)

    # -- filters -----------------------------------------------------------------------------
    def fits(self, pod: Pod, node: str) -> bool:
        """Requests against allocatable minus what is already placed there."""
        alloc = self.nodes[node].allocatable
        used = self.shared.used(node)
        moved = self._moved.get(node, {})
        if "pods" in alloc and used.get("pods", 0) + moved.get("pods", 0) + 1 > alloc["pods"]:
            return False
        for res, amount in pod.requests.items():
            if amount and used.get(res, 0) + moved.get(res, 0) + amount > alloc.get(res, 0):
                return False
        return True

    def room(self, pod: Pod, node: str) -> int:
        """How many more pods like ``pod`` fit on ``node`` now (resources and pod count)."""
        alloc = self.nodes[node].allocatable
        used = self.shared.used(node)
        moved = self._moved.get(node, {})
        room = 1 << 30
        if "pods" in alloc:
            room = alloc["pods"] - used.get("pods", 0) - moved.get("pods", 0)
        for res, amount in pod.requests.items():
            if amount > 0:
                free = alloc.get(res, 0) - used.get(res, 0) - moved.get(res, 0)
                room = min(room, free // amount)
        return max(0, room)

    def hard_checks(self, i: PodId) -> list[tuple[ViewId, str, int, int]]:
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
        self, i: PodId, node: str, checks: list[tuple[ViewId, str, int, int]] | None = None
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

    def rank_views_of(self, i: PodId) -> list[ViewId]:
        """The views that rank nodes for pod i: its own, then considered views counting it."""
        own = self.own_views.get(i, [])
        return own + [v for v in self.selector_views(i) if v in self.rank_views and v not in own]

    def place(self, i: PodId, check_fit: bool = True, max_waiting: int | None = None) -> Placement:
        """Where the replacement of pod i lands on the current state (it must be removed).

        Candidates are narrowed view by view: first the nodes whose domain has the lowest
        count in the first ranking view, then, among those, the lowest count in the next
        view, and so on; ties go to the node name. The first level holding a legal node
        (spread, and fit unless ``check_fit`` is off) wins.

        With ``check_fit`` off, a node without room is legal only where a NodePool can add a
        node (when NodePools are known), and only while fewer than ``max_waiting`` replacements
        of the plan wait for new nodes (:attr:`waiting`; None: no bound). With ``check_fit`` on
        and NodePools known, a replacement that fits no node is placed, in a second search, as
        with it off: onto a node without room where a pool can add one (SPEC §5.10).
        """
        pod = self.analysis.pods[i]
        statics = self.shared.static_nodes(i)
        if not statics:
            return Placement(None, "no node passes taints, affinity, cordon and volume checks")
        views = self.rank_views_of(i)
        checks = self.hard_checks(i)
        tried = [0, 0]  # nodes visited, nodes rejected by spread
        no_room: list[str] = []  # nodes the spread allows but whose room is short

        new_nodes = self.new_nodes  # None: no NodePool known
        may_wait = max_waiting is None or len(self.waiting) < max_waiting
        held = [False]  # a node a pool could fill, refused by max_waiting

        def search(wait_ok: bool) -> str | None:
            def legal(node: str) -> bool:
                tried[0] += 1
                if not self.spread_ok(i, node, checks):
                    tried[1] += 1
                    return False
                if wait_ok and new_nodes is None and may_wait:
                    return True
                if self.fits(pod, node):
                    return True
                # short of room only where a pool (if any are known) can add a node, and while
                # max_waiting allows one more replacement to wait.
                if wait_ok and (new_nodes is None or new_nodes.pool_for(pod, node)):
                    if may_wait:
                        return True
                    held[0] = True
                no_room.append(node)
                return False

            if views:
                return self._pick(self._first_levels(statics, views[0]), views, 1, legal)
            return self._pick([statics], views, 0, legal)

        found = search(not check_fit)
        if found is None and check_fit and new_nodes is not None:
            # Searching again, waiting allowed, would walk the same nodes in the same order
            # (the state is the same) and find none with room: the first node the spread
            # allows (``no_room`` holds them in that order) beside which a pool can add one.
            waits_here = (n for n in no_room if new_nodes.pool_for(pod, n))
            if may_wait:
                found = next(waits_here, None)
            else:
                held[0] = next(waits_here, None) is not None
        if found is not None:
            if new_nodes is None or self.fits(pod, found):
                waits = not check_fit and max_waiting is not None and not self.fits(pod, found)
                return Placement(found, "", waits)
            return Placement(found, "", True, new_nodes.waits_for(pod, found))
        why = (
            "every node is blocked by its own spread constraints"
            if tried[1] == tried[0]
            else "no node has room for its requests"
        )
        if no_room and new_nodes is not None:
            why += new_nodes.note(pod, self._pool_domains(views, no_room))
        if held[0]:
            n = len(self.waiting)
            so_many = (
                "1 replacement of this plan waits for a new node"
                if n == 1
                else f"{n} replacements of this plan wait for new nodes"
            )
            why += f"; {so_many} already, as many as maxWaitingForNodes allows"
        return Placement(None, why)

    def _pool_domains(self, views: Sequence[int], nodes: Sequence[str]) -> tuple[str, list[str]]:
        """The topology key the replacement is ranked by first (the zone without a view) and
        the domains of ``nodes`` in it, in order of first appearance."""
        if views:
            view = self.views[views[0]]
            key = view.spec.constraint.topology_key
            found = [view.node_domain.get(n) for n in nodes]
        else:
            key = ZONE_KEY
            found = [self.nodes[n].labels.get(ZONE_KEY) for n in nodes]
        return key, list(dict.fromkeys(d for d in found if d is not None))

    def _pick(
        self,
        levels: Iterable[Iterable[str]],
        views: Sequence[ViewId],
        depth: int,
        legal: Callable[[str], bool],
    ) -> str | None:
        """The first legal node of the first level holding one, each level ranked in turn by
        ``views[depth:]``: depth first, on a stack of level iterators (a pod may be ranked by
        as many views as the snapshot holds constraints)."""
        stack: list[Iterator[Iterable[str]]] = [iter(levels)]
        while stack:
            candidates = next(stack[-1], None)
            if candidates is None:
                stack.pop()
                continue
            at = depth + len(stack) - 1
            if at < len(views):
                stack.append(iter(self._levels(candidates, views[at])))
                continue
            found = next((n for n in candidates if legal(n)), None)
            if found is not None:
                return found
        return None

    def _first_levels(self, statics: tuple[str, ...], v: ViewId) -> Iterator[Sequence[str]]:
        """The nodes passing the static filters by their domain's count in view v, lowest
        count first, each level sorted by name (``statics`` is)."""
        counts = self.counts[v]
        groups = self.shared.groups(statics, self.views[v].spec.topology_key)
        by_level: dict[int, list[list[str]]] = {}
        for domain, members in groups.items():
            by_level.setdefault(counts.get(domain, 0), []).append(members)
        for c in sorted(by_level):
            level = by_level[c]
            yield level[0] if len(level) == 1 else sorted(n for nodes in level for n in nodes)

    def _levels(self, candidates: Iterable[str], v: ViewId) -> Iterator[Iterable[str]]:
        """``candidates`` by their domain's count in view v, lowest count first, each level in
        the candidates' order. A node lacking the view's key is in domain ""."""
        candidates = list(candidates)
        counts = self.counts[v]
        topology_key = self.views[v].spec.topology_key
        by_value = self.shared.nodes_by_value(topology_key)
        levels: defaultdict[int, list[str]] = defaultdict(list)
        if sum(len(by_value.get(d, ())) for d in counts) < len(candidates):
            # Few nodes are in domains the view counts (a hostname view): the others, at
            # count 0, are found without looking up each candidate's domain, and lazily (the
            # first ones usually do).
            raised = {n: c for d, c in counts.items() for n in by_value.get(d, ())}
            yield filterfalse(raised.__contains__, candidates)
            for n in candidates:
                c = raised.get(n)
                if c is not None:
                    levels[c].append(n)
        else:
            nodes = self.nodes
            for n in candidates:
                c = counts.get(nodes[n].labels.get(topology_key, ""), 0)
                levels[c].append(n)
        for c in sorted(levels):
            yield levels[c]
