"""The planner: the fewest evictions that let the scheduler restore every considered spread.

``plan(snapshot, policy, now)`` is pure. It finds the violated views (SPEC §2.4) and splits them
into groups that share pods (:mod:`rebalancer.core.groups`); groups never interact through
counts.

* A group of views over the same small workload (zone and hostname constraints, say) is
  planned to its joint minimum by exact search (:mod:`rebalancer.core.jointplan`,
  :mod:`rebalancer.core.joint`), victims chosen over every minimal end state.
* A single view gets its victims chosen up front over every minimal plan, across all its
  domains (:mod:`rebalancer.core.victims`).
* Otherwise, and whenever a chosen step does not work out in the simulation, the planner
  searches move by move: it evicts one pod at a time from the most populated domain of the
  worst view, lets the scheduler simulation place its replacement, and keeps a move only if it
  lowers that view's distance to balance (:func:`rebalancer.core.minimal.min_moves`) without
  making any other considered view worse.

Moves of all groups are made one at a time, worst view first, in one simulation.

Soft views, when the policy opts them in, come second (SPEC §3.6), in a second pass of each
phase. The hard views' groups are formed and planned exactly as with soft views off, and a
soft view never blocks a hard view's move. Up front, a group whose pods soft views count is
then replanned exactly with them (:func:`rebalancer.core.joint.search_then_soft`): the hard
views' minimum first, then the fewest further evictions for the soft views, keeping the hard
views within maxSkew; the replan is kept only when its hard part is as large as the plan
without soft views; the soft views left over are planned in groups of their own. The search
moves the hard views first, setting aside the soft views its moves touch; then it searches the
soft views, where a move never makes a hard view worse, and a hard view a soft move changes is
tried again first.

Worked example, one zone constraint with maxSkew 1 and counts a=4, b=2, c=0, d=0:

* distance: N=6 pods over D=4 zones; the only band that can hold them is [1, 2]. Zone a is
  2 above it, zones c and d are 1 below it each, so at least max(2, 1+1) = 2 moves.
* move 1: evict from a (4 -> 3); the replacement goes to the least populated zone, c: [3,2,1,0].
* move 2: evict from a (3 -> 2); the replacement goes to d: [2,2,1,1], skew 1. Done: 2
  evictions, equal to the lower bound, so the plan is proven minimal.

A greedy descheduler that moves "everything above the average" would evict 3 here.

Victims follow SPEC §3.4's order (:class:`rebalancer.core.victims.VictimKey` for one pod,
:func:`rebalancer.core.victims.plan_key` for a plan): first pods whose own hard constraints
forbid their replacement from returning to their current domain, then preemption's order over
the victims' priorities, then pods without the descheduler's ``prefer-no-eviction``
annotation, then pods whose PodDisruptionBudget still allows a disruption, then (one view) the
most populated domains, then the youngest, then the pods' own namespace, name and uid; never a
domain or node name. The
moves are then grouped into waves (:mod:`rebalancer.core.waves`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import chain

from rebalancer.core.capacity import Pin, backoff, pin_of
from rebalancer.core.distances import PinnedDistances
from rebalancer.core.drains import DriftedLandings
from rebalancer.core.evictability import EvictionContext
from rebalancer.core.groups import violated_groups
from rebalancer.core.holds import (
    LANDING_HOLDS,
    HoldRules,
    LoopMemory,
    launch_deferral,
    victim_holds,
)
from rebalancer.core.ids import Domain, PodId, ViewId, ViewKey
from rebalancer.core.jointplan import GroupPlanning, JointPlan, SearchBudget, plan_group
from rebalancer.core.limits import RunLimits, owner_map, workload_of
from rebalancer.core.model import ZONE_KEY, Snapshot
from rebalancer.core.moves import Move
from rebalancer.core.outcome import Outcome, PassInputs
from rebalancer.core.plan import Eviction, Plan, SkipCode, SkipReason, workload_key
from rebalancer.core.policy import Policy
from rebalancer.core.ranking import VictimRanking
from rebalancer.core.record import plan_record
from rebalancer.core.simulate import Placement, SimState
from rebalancer.core.spread import Analysis, analyze, considered
from rebalancer.core.steer import Steering, ours, steer
from rebalancer.core.unrepaired import left_above
from rebalancer.core.victims import DomainPods, single_view_victims
from rebalancer.core.waves import assign_waves


class Planner:
    """One planning pass: the simulation, the pods it may evict and in what order
    (:class:`~rebalancer.core.ranking.VictimRanking`), each view's distance to balance
    (:class:`~rebalancer.core.distances.PinnedDistances`), the limits, and what was planned up
    front for each group of views. ``run`` returns the moves."""

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
        self.drifted = DriftedLandings(snapshot) if rules.drifting else None
        self.launch_wanted: set[str] = set()  # workloads whose repair needed a new node
        self.distances = PinnedDistances(self.analysis, self.state, self.ranking.skip)
        self.limits = RunLimits(policy, before)
        self.owners = owner_map(snapshot)
        # Planned up front (SPEC §3.5), per group of violated views sharing pods:
        self.groups: list[list[ViewId]] = []  # the groups (violated_groups)
        self.planned: dict[ViewId, list[PodId]] = {}  # one view's victims, in eviction order
        self.joint: dict[ViewId, tuple[ViewId, JointPlan]] = {}  # view -> (first view, plan)
        self.proven: dict[ViewId, int] = {}  # first view of a group -> its proven joint minimum
        self.search = SearchBudget()  # the exact joint search's, and its stats: plan()
        # What the moves ran into, for the plan's record:
        self.no_fit: dict[PodId, SkipReason] = {}
        self.limit_notes: set[str] = set()

    # -- candidates ----------------------------------------------------------------------
    def returns_blocked(self, v: ViewId, domain: Domain) -> bool:
        """Whether view v, as a pod's own hard constraint, forbids the replacement of a pod
        leaving ``domain`` to come back there."""
        view = self.analysis.views[v]
        spec = view.spec
        if not spec.hard:
            return False
        after = self.state.counts[v].get(domain, 0) - 1
        if len(view.domains) < spec.constraint.min_domains:
            gmin_after = 0
        else:
            gmin_after = min(self.state.gmin(v), after)
        return after + 1 - gmin_after > spec.max_skew

    def plan_victims(self, v: ViewId) -> list[PodId] | None:
        """The best victims over every minimal plan for view v alone (SPEC §3.4), chosen before
        any move; None when the formula's band cannot be reached with the evictable pods."""
        state = self.state
        key, evictable = self.ranking.key, self.ranking.evictable
        view = self.analysis.views[v]
        c = view.spec.constraint
        domains: list[DomainPods] = []
        for domain, count in state.counts[v].items():
            # Whether a victim could return is replayed per plan by single_view_victims;
            # the key only says whether the view is one of the pod's own hard constraints.
            pods = sorted((key(i, v, c.hard), i) for i in state.members(v, domain) if evictable(i))
            domains.append(DomainPods(count, pods))
        # A canonical order (fullest first, then by best victim): equal plans are then
        # found in the same order whatever the order of the input, and never by name.
        domains.sort(key=lambda dom: (-dom.size, not dom.evictable, dom.evictable[:1]))
        return single_view_victims(
            domains,
            empty=len(view.domains) - len(state.counts[v]),
            max_skew=c.max_skew,
            band_forced_zero=c.hard and len(view.domains) < c.min_domains,
            moves=self.distances.at_start(v),
        )

    # -- moves ---------------------------------------------------------------------------
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
        plan = self.state.pool_plan
        where = plan.where(i) if plan is not None else None
        if where is None:
            return ()
        pool, key, domain = where
        return pin_of(pool, domain if key == ZONE_KEY else None)

    def _note_no_fit(self, i: PodId, why: SkipReason) -> None:
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

    def planned_move(self, v: ViewId) -> Move | None:
        """The next of the victims chosen up front for view v, in the order chosen with
        them; None, and the plan dropped, as soon as one does not help."""
        victims = self.planned.get(v)
        while victims:
            i = victims.pop(0)
            if not self.ranking.evictable(i) or self.limited(i):
                continue
            result = self.try_move(i, v)
            if isinstance(result, Move):
                return self.accept(result)
            self._note_no_fit(i, result)
            break
        self.planned[v] = []
        return None

    def _domains_in_order(self, v: ViewId, floor: int) -> Iterator[tuple[Domain, list[PodId]]]:
        """View v's domains holding more than ``floor`` pods, fullest first, with their
        evictable pods in victim order; among domains of equal count, the one with the better
        first victim first (never by name)."""
        state = self.state
        key, evictable = self.ranking.key, self.ranking.evictable
        counts = state.counts[v]
        by_count: dict[int, list[Domain]] = {}
        for domain, count in counts.items():
            by_count.setdefault(count, []).append(domain)
        for count in sorted(by_count, reverse=True):
            if count <= floor:
                return
            level = []
            for domain in by_count[count]:
                blocked = self.returns_blocked(v, domain)
                keyed = sorted(
                    (key(i, v, blocked), i) for i in state.members(v, domain) if evictable(i)
                )
                level.append((keyed[0][0] if keyed else None, domain, [i for _, i in keyed]))
            level.sort(key=lambda entry: (entry[0] is None, entry[0] or ()))
            for _, domain, members in level:
                yield domain, members

    def joint_move(self, v: ViewId) -> Move | None:
        """The next step of the exact joint plan of v's group; None, and the plan dropped
        (the group left to the move-by-move search, unproven), if a step cannot be made."""
        found = self.joint.get(v)
        if found is None or not found[1].steps:
            return None
        first, joint = found
        soft_step = len(joint.steps) <= joint.soft_steps
        i, target = joint.steps.popleft()
        group = [w for w, (f, _) in self.joint.items() if f == first]
        # a soft step (the last ones of a replan with soft views) is credited to a soft view
        views = self.analysis.views
        group = [w for w in group if views[w].spec.hard != soft_step] or group
        move = None
        if self.ranking.evictable(i) and not self.limited(i):
            move = self.place_at(i, group, target)
        if move is None:
            joint.steps.clear()
            self.proven.pop(first, None)
            return None
        if not joint.steps:
            self.proven[first] = joint.minimum
        return self.accept(move)

    def best_move(self, v: ViewId) -> Move | None:
        joint = self.joint_move(v)
        if joint is not None:
            return joint
        planned = self.planned_move(v)
        if planned is not None:
            return planned
        state = self.state
        for _domain, members in self._domains_in_order(v, state.gmin(v) + 1):
            failed: dict[object, SkipReason] = {}
            for i in members:
                pod = self.analysis.pods[i]
                workload = workload_of(pod, self.owners)
                node = state.placement[i]
                if self.limited(i):
                    continue
                # Pods of one template on one node fail alike (the node they leave matters:
                # it changes their own views' counts).
                template = (
                    pod.namespace,
                    workload,
                    tuple(sorted(pod.labels.items())),
                    pod.pvc_names,
                    pod.requests.get("cpu"),
                    pod.requests.get("memory"),
                )
                known = failed.get((template, node))
                if known is not None:
                    self._note_no_fit(i, known)
                    continue
                result = self.try_move(i, v)
                if isinstance(result, Move):
                    return self.accept(result)
                failed[(template, node)] = result
                self._note_no_fit(i, result)
        return None

    def _declares_more(self, v: ViewId) -> bool:
        """Whether the pods view v counts declare other hard constraints besides it."""
        members = self.analysis.views[v].members
        if not members:
            return False
        views = self.analysis.views
        return any(w != v and views[w].spec.hard for w in self.state.own_views.get(members[0], ()))

    def run(self) -> list[Move]:
        """The moves, phase by phase: the hard views' groups planned up front, then, with soft
        views opted in, the soft views' replans (SPEC §3.6); the search over the hard views;
        then the soft pass's search, over the soft views and those the hard views' moves set
        aside."""
        views = self.analysis.views
        hard = [v for v in self.violated if views[v].spec.hard]
        self.groups = violated_groups(self.state, hard)
        planned = [(group, self._plan_group(group)) for group in self.groups]
        if self.soft_considered:
            self._plan_soft(planned)
        waiting = self._entries(self.violated)  # as the views stand before any move
        later: list[tuple[bool, int, ViewId, int]] = []  # soft views the hard moves changed
        moves = self._search([e for e in waiting if not e[0]], later)
        if self.soft_considered:
            moves += self._search([e for e in waiting if e[0]] + later)
        return moves

    def _plan_soft(self, planned: list[tuple[list[ViewId], int | None]]) -> None:
        """The soft pass up front (SPEC §3.6): replan the hard views' groups with the soft
        views that count their pods, then plan the soft views left over, in groups of their
        own; :attr:`groups` then holds the violated views in groups that share no pod."""
        views = self.analysis.views
        joined: set[ViewId] = set()  # soft views planned with a hard group
        for group, size in planned:
            if size is not None:
                joined.update(self._with_soft(group, size))
        left = [v for v in self.violated if not views[v].spec.hard and v not in joined]
        soft_groups = violated_groups(self.state, left)
        for group in soft_groups:
            if not self._with_soft(group, 0):
                self._plan_group(group)
        self.groups = self._disjoint(self.groups + soft_groups)

    def _entries(self, views: Iterable[ViewId]) -> list[tuple[bool, int, ViewId, int]]:
        """The heap entries of ``views`` as they stand: (soft, -excess, view, version)."""
        state = self.state
        spec = [view.spec for view in self.analysis.views]
        return [(not spec[v].hard, -state.excess(v), v, state.version[v]) for v in views]

    def _search(
        self,
        heap: list[tuple[bool, int, ViewId, int]],
        later: list[tuple[bool, int, ViewId, int]] | None = None,
    ) -> list[Move]:
        """Move one pod at a time, always in the worst view of ``heap``, until none improves.

        Views wait in a heap keyed by excess, hard before soft; an entry is stale once its
        view's counts have changed. A view where no move helps is set aside until its counts
        change. With ``later`` given, a soft view's entry that a move pushes goes there
        instead (the soft pass searches it): as hard entries come first, searching the hard
        views with ``later``, then the soft ones and ``later``, makes the moves one heap over
        all of them makes.
        """
        moves: list[Move] = []
        state = self.state
        views = self.analysis.views
        heapq.heapify(heap)
        while heap:
            soft, neg, v, version = heapq.heappop(heap)
            if version != state.version[v]:
                continue  # stale; a fresh entry was pushed when the view changed
            move = self.best_move(v)
            if move is None:
                continue  # stuck until its counts change
            moves.append(move)
            for w in state.selector_views(move.pod):
                if w in state.rank_views and state.excess(w) > 0:
                    entry = (not views[w].spec.hard, -state.excess(w), w, state.version[w])
                    if later is not None and entry[0]:
                        later.append(entry)
                    else:
                        heapq.heappush(heap, entry)
            if state.version[v] == version:  # the move did not touch v's counts
                heapq.heappush(heap, (soft, neg, v, version))
        return moves

    def _disjoint(self, planned: list[list[ViewId]]) -> list[list[ViewId]]:
        """The violated views in groups that share no pod (the lower bound sums over them,
        :meth:`lower_bound`), from the groups planned hard first,
        then soft: a group planned whole keeps its order (its first view keys its proven
        minimum); views planned apart that share pods are one group again."""
        whole = {frozenset(group): group for group in planned}
        return [
            whole.get(frozenset(group), group)
            for group in violated_groups(self.state, self.violated)
        ]

    def _grouping(self) -> GroupPlanning:
        """What the exact joint search of a group reads of this pass (made per group)."""
        return GroupPlanning(
            self.analysis,
            self.state,
            self.policy.node_fit,
            self.ranking.evictable,
            self.ranking.key,
            self.search,
        )

    def _plan_group(self, group: list[ViewId]) -> int | None:
        """Plan a group up front: its exact joint plan, or the victims of its one view; the
        number of evictions planned, or None when the group is left to the move-by-move
        search."""
        if len(group) > 1 or self._declares_more(group[0]):
            joint = plan_group(self._grouping(), group)
            if joint is not None:
                for member in group:
                    self.joint[member] = (group[0], joint)
                return joint.minimum
        if len(group) == 1:
            victims = self.plan_victims(group[0])
            if victims:
                self.planned[group[0]] = list(victims)
                return len(victims)
        return None

    def _with_soft(self, group: list[ViewId], hard_size: int) -> list[ViewId]:
        """Hard first, then soft (SPEC §3.6): replan a group exactly with the soft views that
        count its pods, keeping it only when its hard views need exactly ``hard_size``
        evictions, the number planned with soft views off (0 for a group of soft views);
        the soft views then join the group. Returns them (none when not kept)."""
        views = self.analysis.views
        joint = plan_group(self._grouping(), group, with_soft=True)
        if joint is None or joint.minimum - joint.soft_steps != hard_size:
            return []
        self.planned.pop(group[0], None)
        for member in [w for w, (first, _) in self.joint.items() if first == group[0]]:
            del self.joint[member]
        for member in joint.views:
            self.joint[member] = (group[0], joint)
        soft = [w for w in joint.views if not views[w].spec.hard]
        group.extend(w for w in soft if w in self.violated and w not in group)
        return soft

    # -- the end of the search -----------------------------------------------------------
    def finish(self, moves: list[Move]) -> Outcome:
        """What this pass found, once :meth:`run` has made ``moves``: the moves worth keeping
        (:meth:`trim`), their waves, the end state of the views the record reports, what holds
        the views left above maxSkew, the pods a rule or the fit kept in place, the limits
        reached and the lower bound, frozen for the record."""
        kept = self.trim(moves)
        state = self.state
        views = self.analysis.views
        waves = assign_waves(
            state.fresh(), views, self.ranking.pdbs, self.ctx.budgets.allowed, kept
        )
        moved: set[int] = {m.pod for m in kept}
        left = left_above(state, self.considered, self.held_by, moved)
        end = {v: dict(state.counts[v]) for v in chain(self.violated, (v for v, _ in left))}
        return Outcome(
            moves=tuple(kept),
            waves=tuple(waves),
            violated=tuple(self.violated),
            end=end,
            left=left,
            skipped=self._skipped(moved),
            notes=tuple(sorted(self.limit_notes)),
            lower_bound=self.lower_bound(),
        )

    def inputs(self) -> PassInputs:
        """What this pass read once and never changed, for the record."""
        return PassInputs(self.analysis, self.ctx, self.owners, self.rules.capacity.way)

    def trim(self, moves: list[Move]) -> list[Move]:
        """Drop trailing moves that end no better than an earlier prefix (unreachable targets),
        and take them back in the simulation, which :meth:`run` left after all the moves.

        The objective is the worst excess over the violated views, then their summed excess.
        The views an exact joint plan balances count too: its steps may pass through states
        where a view that was within maxSkew is not, and cutting them there would leave it so.
        With soft views opted in, the hard views' objective comes first, then the soft views'
        (SPEC §3.6).
        """
        state = self.state
        if not any(state.excess(v) for v in self.violated):
            return moves  # every violated view ends balanced: no prefix does better
        replay = state.fresh()
        tracked = set(self.violated)
        for _, joint in self.joint.values():
            tracked.update(joint.views)
        views = self.analysis.views
        excess = {v: replay.excess(v) for v in sorted(tracked)}
        # per kind (0: hard, 1: soft): views by excess, and the summed excess
        levels: list[Counter[int]] = [Counter(), Counter()]
        totals = [0, 0]
        for v, e in excess.items():
            levels[not views[v].spec.hard][e] += 1
            totals[not views[v].spec.hard] += e

        def objective() -> tuple[int, int, int, int]:
            worst = [max((k for k, n in level.items() if n > 0), default=0) for level in levels]
            return worst[0], totals[0], worst[1], totals[1]

        objectives = [objective()]
        for m in moves:
            replay.remove(m.pod)
            if m.target is not None:
                replay.add(m.pod, m.target)
            for w in replay.selector_views(m.pod):
                if w in excess:
                    kind = not views[w].spec.hard
                    new = replay.excess(w)
                    levels[kind][excess[w]] -= 1
                    levels[kind][new] += 1
                    totals[kind] += new - excess[w]
                    excess[w] = new
            objectives.append(objective())
        kept = moves[: objectives.index(objectives[-1])]
        for m in reversed(moves[len(kept) :]):
            if m.target is not None:
                state.remove(m.pod)
            state.add(m.pod, m.source)
        return kept

    def lower_bound(self) -> int:
        """No plan that reaches the skews this plan reaches evicts fewer pods.

        Groups of violated views that share no pod are independent
        (:func:`rebalancer.core.groups.violated_groups`), so the bound is a sum over groups.
        Within a group, each eviction lowers each view's distance to balance
        (:mod:`rebalancer.core.distances`, unevictable pods as floors) by at most one, so the
        largest distance is a joint bound; where the exact search (:mod:`rebalancer.core.joint`)
        proved a group's minimum, that minimum is the bound. A group the plan leaves above
        maxSkew (:mod:`rebalancer.core.unrepaired` says what holds it) is bounded by what the
        plan sets out to reach there: each view's distance to the skew it ends at,
        ``max(maxSkew, skew after)``. So the bound never exceeds the plan's size, and a plan
        that meets it is minimal for what it reaches.
        """
        total = 0
        state = self.state
        distances = self.distances
        for group in self.groups:
            if any(state.excess(v) for v in group):
                total += max(distances.from_start(v, state.skew(v)) for v in group)
                continue
            proven = self.proven.get(group[0])
            total += proven if proven is not None else max(distances.at_start(v) for v in group)
        return total

    def held_by(self, i: PodId) -> SkipReason | None:
        """Why pod i, still in place after the plan, was not moved: the rule that forbids its
        eviction, a policy limit reached, or a replacement that would stay Pending."""
        reason = self.ranking.skip(i)
        if reason is None:
            pod = self.analysis.pods[i]
            node = self.state.placement[i]
            reason = self.limits.allows(node, pod.namespace, workload_of(pod, self.owners))
        return reason or self.no_fit.get(i)

    def _skipped(self, moved: set[int]) -> tuple[tuple[PodId, SkipReason], ...]:
        """Pods in violated views that were not evicted because a rule or the fit forbids it,
        each once, with why."""
        seen: set[int] = set()
        out: list[tuple[PodId, SkipReason]] = []
        for v in self.violated:
            for i in self.analysis.views[v].members:
                if i in seen or i in moved:
                    continue
                seen.add(i)
                reason = self.ranking.skip(i) or self.no_fit.get(i)
                if reason is not None:
                    out.append((i, reason))
        return tuple(out)


def plan(
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    *,
    evicted_before: Sequence[Eviction] = (),
    held: Mapping[str, SkipReason] | None = None,
    rules: HoldRules | None = None,
    memory: LoopMemory | None = None,
    stats: dict[str, float] | None = None,
) -> Plan:
    """The minimal eviction plan for ``snapshot`` under ``policy`` at time ``now`` (pure).

    Planning creates no reference cycles: callers with a large snapshot in memory pause the
    cyclic garbage collector around it (:mod:`rebalancer.cluster.gcpause`), whose full passes
    would cost more than the planning.
    ``rules`` and ``memory``: the holds in force and a loop's memory (SPEC §3.12,
    :mod:`rebalancer.core.holds`): the plan goes around held pods as around any unevictable
    pod, and around held landings as around a replacement that would stay Pending; the plan
    names the holds it applied and the workloads whose repair needed a new node (for the
    loop's memory). ``held``: further pods (by ``namespace/name``) the caller will not have
    evicted, with why.
    The plan carries every view's skew and, when steering is on or costs of ours remain, the
    deletion costs a run would write (SPEC §7), so no caller analyses the snapshot again.
    ``stats``, when given, receives how the groups of views sharing pods were planned
    (``joint-exact``, ``joint-fallback``, ``joint-unsolved``, ``joint-visits``,
    ``joint-seconds``; with soft views, ``joint-soft-exact`` and ``joint-soft-visits``), for
    the benchmarks.
    """
    planner = Planner(snapshot, policy, now, evicted_before, held, rules=rules, memory=memory)
    steering = _steering(snapshot, policy, planner.analysis)
    skews = _skews(planner.analysis)
    try:
        result = _plan(planner)
    finally:
        if stats is not None:
            stats.update(planner.search.stats)
    return replace(
        result,
        holds=planner.rules.names(memory),
        launch_wanted=tuple(sorted(planner.launch_wanted)),
        skews=skews,
        steering=steering,
    )


def _plan(planner: Planner) -> Plan:
    if not planner.violated:
        return Plan((), (), (), (), 0)
    return plan_record(planner.inputs(), planner.finish(planner.run()))


def _skews(analysis: Analysis) -> tuple[tuple[ViewKey, int], ...]:
    """The skew of every view, the largest per view key (as runs and metrics key them)."""
    skews: dict[ViewKey, int] = {}
    for view in analysis.views:
        key = view.spec.key
        skews[key] = max(skews.get(key, 0), view.skew)
    return tuple(skews.items())


def _steering(snapshot: Snapshot, policy: Policy, analysis: Analysis) -> Steering | None:
    """The deletion costs a run would write (SPEC §7); None when steering is off and no cost
    is ours."""
    if not policy.steer_scale_down and not any(ours(p) for p in snapshot.pods):
        return None
    return steer(snapshot, policy, analysis)
