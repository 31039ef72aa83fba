"""One planning pass: its state, and the moves it makes in its simulation (pure).

A pass (:class:`PlanningPass`) holds the scheduler simulation
(:class:`~rebalancer.core.simulate.SimState`), the pods it may evict and in what order
(:class:`~rebalancer.core.ranking.VictimRanking`), each view's distance to balance
(:class:`~rebalancer.core.distances.PinnedDistances`), the limits, the plans made up front for
each group of views, and what the moves ran into. Its phases read and write it, in this order
(:func:`rebalancer.core.planner.run`): the victims chosen up front
(:mod:`rebalancer.core.upfront`), the move-by-move search (:mod:`rebalancer.core.search`), the
soft pass (:mod:`rebalancer.core.softpass`), and the end of the search, which freezes what was
found (:mod:`rebalancer.core.outcome`).

A move is made here, one way only: the pod leaves its node in the simulation and the
scheduler simulation places its replacement (:meth:`PlanningPass.try_move`), or the replacement
goes where the exact joint search chose (:meth:`PlanningPass.place_at`). A move is kept when
it helps its view and makes no other considered view worse; a move for a hard view is blocked
by hard views only (soft views come second, SPEC §3.6). A move the holds keep from landing
(:mod:`rebalancer.core.holds`) is taken back as one whose replacement would stay Pending.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rebalancer.core.capacity import Pin, backoff, pin_of
from rebalancer.core.distances import PinnedDistances
from rebalancer.core.evictability import EvictionContext
from rebalancer.core.holds import (
    LANDING_HOLDS,
    HoldRules,
    LoopMemory,
    launch_deferral,
    victim_holds,
)
from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.jointplan import GroupPlanning, JointPlan, SearchBudget
from rebalancer.core.karpenter.drains import DriftedLandings
from rebalancer.core.limits import RunLimits, owner_map, workload_of
from rebalancer.core.model import Node, Pod, Snapshot
from rebalancer.core.moves import Move
from rebalancer.core.plan import Eviction, SkipCode, SkipReason, workload_key
from rebalancer.core.policy import Policy
from rebalancer.core.ranking import VictimRanking
from rebalancer.core.simulate import Placement, SimState, static_reason
from rebalancer.core.spread import Analysis, analyze, considered


class PlanningPass:
    """One planning pass's state, and the moves it makes (see the module)."""

    def __init__(
        self,
        snapshot: Snapshot,
        policy: Policy,
        now: float,
        before: Sequence[Eviction],
        held: Mapping[str, SkipReason] | None = None,
        *,
        rules: HoldRules | None = None,
        memory: LoopMemory | None = None,
    ) -> None:
        """``before``: evictions made earlier in the run (they count against the limits);
        ``held``: pod key -> why the caller holds it, besides the holds of ``rules`` (SPEC
        §3.12, :mod:`rebalancer.core.holds`), which read ``memory`` (a loop's; None: none)."""
        self.policy = policy
        self.now = now
        self.rules = rules = rules or HoldRules()
        self.memory = memory
        holding = victim_holds(snapshot, rules, memory, now)
        if held:
            holding = {**held, **holding}
        self.analysis: Analysis = analyze(snapshot, policy)
        views = self.analysis.views
        self.ctx = EvictionContext.build(snapshot, policy, now, self.analysis.scope)
        self.considered = [
            ViewId(v)
            for v, view in enumerate(views)
            if considered(view, policy, self.analysis.scope)
        ]
        self.violated = [v for v in self.considered if views[v].violated]
        # Soft views opted in come second (SPEC §3.6): a soft pass plans them after the hard
        # views, and only the hard views block a hard view's move.
        self.soft_considered = any(not views[v].spec.hard for v in self.considered)
        self.hard_views = frozenset(v for v in self.considered if views[v].spec.hard)
        self.state = SimState(snapshot, self.analysis, self.considered)
        self.ranking = VictimRanking(self.analysis, self.ctx, holding)
        self.drifted = DriftedLandings(snapshot, _may_run) if rules.drifting else None
        self.launch_wanted: set[str] = set()  # workloads whose repair needed a new node
        self.distances = PinnedDistances(self.analysis, self.state, self.ranking.skip)
        self.limits = RunLimits(policy, before)
        self.owners = owner_map(snapshot)
        # Planned up front (SPEC §3.5), per group of violated views sharing pods:
        self.groups: list[list[ViewId]] = []  # the groups (violated_groups)
        self.planned: dict[ViewId, list[PodId]] = {}  # one view's victims, in eviction order
        self.joint: dict[ViewId, tuple[ViewId, JointPlan]] = {}  # view -> (first view, plan)
        self.proven: dict[ViewId, int] = {}  # first view of a group -> its proven joint minimum
        self.budget = SearchBudget()  # the exact joint search's, and its stats: plan()
        # What the moves ran into, for the plan's record:
        self.no_fit: dict[PodId, SkipReason] = {}
        self.limit_notes: set[str] = set()

    def try_move(self, i: PodId, v: ViewId) -> Move | SkipReason:
        """Evict pod i in the simulation; keep it if it helps view v and harms no other."""
        state = self.state
        # the views that may block it: for a hard view, the hard ones (SPEC §3.6)
        blocking = self.hard_views if self.analysis.views[v].spec.hard else state.rank_views
        touched = [w for w in state.selector_views(i) if w in blocking]
        distance = self.distances.now
        before: dict[ViewId, tuple[int, int]] = {}
        for w in touched:
            excess = state.excess(w)
            # Distances are compared for v and for the views already violated only.
            before[w] = (excess, distance(w) if w == v or excess > 0 else 0)
        gmin = state.gmin(v)
        source = state.remove(i)
        source_count = state.counts[v].get(self.analysis.views[v].node_domain[source], 0) + 1
        policy = self.policy
        placement = state.place(i, policy.node_fit, policy.max_waiting_for_nodes)
        if placement.node == source:
            state.add(i, source)
            return SkipReason(
                SkipCode.LANDS_BACK, "its replacement would land back on the same node"
            )
        if placement.node is None:
            state.add(i, source)
            return SkipReason(
                SkipCode.NO_FIT, f"replacement would stay Pending: {placement.reason}"
            )
        state.add(i, placement.node)
        self.distances.pin(i, placement.node)
        ok = (state.excess(v), distance(v)) < before[v]
        for w in touched:
            if not ok:
                break
            excess, dist = before[w]
            if w != v and (state.excess(w) > excess or (excess > 0 and distance(w) > dist)):
                ok = False
        held = self.landing_hold(i, v, placement) if ok else None
        if not ok or held is not None:
            self.distances.unpin(i, placement.node)
            state.remove(i)
            state.add(i, source)
            return held or SkipReason(SkipCode.NO_GAIN, "moving it would not improve the spread")
        if placement.waits:
            state.waiting.add(i)
        return Move(i, v, source, placement.node, source_count, gmin, placement.pool, self._pin(i))

    def landing_hold(self, i: PodId, v: ViewId, placement: Placement) -> SkipReason | None:
        """Why pod i's replacement may not land where the simulation put it, for view v (a
        landing hold, :mod:`rebalancer.core.holds`): a node a NodePool has yet to add while
        the workload's need for one is young, or a domain with a node that has drifted."""
        pod = self.analysis.pods[i]
        if placement.pool:
            workload = workload_key(pod.namespace, workload_of(pod, self.owners), pod.name)
            self.launch_wanted.add(workload)
            deferred = launch_deferral(self.rules, self.memory, self.now, workload, placement.pool)
            if deferred is not None or self.memory is None:
                return deferred
            return backoff(
                self.rules.capacity, self.memory.refused, self.now, workload, self._pin(i)
            )
        if self.drifted and placement.node is not None:
            key = self.analysis.views[v].spec.topology_key
            domain = self.analysis.nodes[placement.node].labels.get(key)
            why = self.drifted.reason(pod, key, domain) if domain is not None else None
            if why is not None:
                return SkipReason(SkipCode.NODE_DRIFTING, why)
        return None

    def _pin(self, i: PodId) -> Pin:
        """The labels a reservation for pod i's replacement pins (its pool's node in the
        zone it waits in); () when it waits for no new node."""
        new_nodes = self.state.new_nodes
        where = new_nodes.where(i) if new_nodes is not None else None
        return pin_of(*where) if where is not None else ()

    def note_no_fit(self, i: PodId, why: SkipReason) -> None:
        """Keep why pod i's replacement would stay Pending or may not land (a landing hold),
        the first reason found, for the plan's record."""
        if why.code is SkipCode.NO_FIT or why.code in LANDING_HOLDS:
            self.no_fit.setdefault(i, why)

    def accept(self, move: Move) -> Move:
        """Keep a move the simulation made: spend the limits and the PDBs, pin the pod."""
        i = move.pod
        pod = self.analysis.pods[i]
        self.limits.spend(move.source, pod.namespace, workload_of(pod, self.owners))
        self.ranking.take(i)
        self.distances.moved(i)
        return move

    def place_at(self, i: PodId, group: Sequence[ViewId], target: str) -> Move | None:
        """Evict pod i and put its replacement on ``target`` if the scheduler's filters allow
        it now (the exact joint search chose the node); None, and nothing changed, if not.
        The move is credited to the group's view where the pod's domain stands highest."""
        state = self.state
        pods = self.analysis.pods
        views = self.analysis.views
        node = state.placement[i]

        def height(w: ViewId) -> int:
            return state.counts[w].get(views[w].node_domain[node], 0) - state.gmin(w)

        v = max(group, key=lambda w: (height(w), -w))
        gmin = state.gmin(v)
        source_count = state.counts[v].get(views[v].node_domain[node], 0)
        source = state.remove(i)
        legal = state.spread_ok(i, target) and (
            not self.policy.node_fit or state.fits(pods[i], target)
        )
        if not legal or target == source or self._drifts(i, v, target):
            state.add(i, source)
            return None
        state.add(i, target)
        self.distances.pin(i, target)
        return Move(i, v, source, target, source_count, gmin)

    def _drifts(self, i: PodId, v: ViewId, target: str) -> bool:
        """Whether a landing on ``target`` for view v is held (a drifted node there)."""
        if not self.drifted:
            return False
        return self.landing_hold(i, v, Placement(target, "")) is not None

    def limited(self, i: PodId) -> bool:
        """Whether a policy limit forbids evicting pod i now (the limit is noted)."""
        pod = self.analysis.pods[i]
        reached = self.limits.allows(
            self.state.placement[i], pod.namespace, workload_of(pod, self.owners)
        )
        if reached is not None:
            self.limit_notes.add(reached.detail)
        return reached is not None

    def grouping(self) -> GroupPlanning:
        """What the exact joint search of a group reads of this pass (made per group)."""
        return GroupPlanning(
            self.analysis,
            self.state,
            self.policy.node_fit,
            self.ranking.evictable,
            self.ranking.key,
            self.budget,
        )


def _may_run(pod: Pod, node: Node) -> bool:
    """Whether the scheduler's filters that depend on no other pod let ``pod`` run on
    ``node`` (cordon, readiness, taints, selectors and affinity)."""
    return static_reason(pod, node, ()) is None
