"""The planner: the fewest evictions that let the scheduler restore every considered spread.

``plan(snapshot, policy, now)`` is pure. It finds the violated views (SPEC §2.4) and plans them
in one pass (:class:`rebalancer.core.planpass.PlanningPass`), phase by phase (:func:`run`):

1. up front, the violated views in groups that share pods, each group's victims chosen over
   every minimal plan: exactly for a group over one small workload, or over every minimal
   plan of a single view (:mod:`rebalancer.core.upfront`);
2. the move-by-move search, worst view first, making those moves first, and searching one pod
   at a time where they do not work out (:mod:`rebalancer.core.search`);
3. soft views, when the policy opts them in, second (SPEC §3.6, :mod:`rebalancer.core.softpass`):
   their replans are made up front after the hard views' plans, and their search after the
   hard views', as a second pass;
4. the end of the search: the moves kept, their waves (:mod:`rebalancer.core.waves`), the lower
   bound and what holds the views left above maxSkew, frozen (:mod:`rebalancer.core.outcome`),
   which the record writes as the plan (:mod:`rebalancer.core.record`).

Moves of all groups are made one at a time, in one simulation.

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
domain or node name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from rebalancer.core.holds import HoldRules, LoopMemory
from rebalancer.core.ids import ViewKey
from rebalancer.core.model import Snapshot
from rebalancer.core.moves import Move
from rebalancer.core.outcome import finish, pass_inputs
from rebalancer.core.plan import Eviction, Plan, SkipReason
from rebalancer.core.planpass import PlanningPass
from rebalancer.core.policy import Policy
from rebalancer.core.record import plan_record
from rebalancer.core.search import Entry, entries, search
from rebalancer.core.softpass import plan_soft
from rebalancer.core.spread import Analysis
from rebalancer.core.steer import Steering, ours, steer
from rebalancer.core.upfront import plan_up_front


def run(p: PlanningPass) -> list[Move]:
    """The moves of pass ``p``, phase by phase (see the module): the hard views' victims up
    front, then, with soft views opted in, the soft views' replans; the search over the hard
    views; then the soft pass's search, over the soft views and those the hard views' moves
    set aside."""
    planned = plan_up_front(p)
    if p.soft_considered:
        plan_soft(p, planned)
    waiting = entries(p, p.violated)  # as the views stand before any move
    hard = [e for e in waiting if not e[0]]
    later: list[Entry] = []  # soft views the hard views' moves changed
    moves = search(p, hard, later)
    if p.soft_considered:
        moves += search(p, [e for e in waiting if e[0]] + later)
    return moves


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
    planner = PlanningPass(snapshot, policy, now, evicted_before, held, rules=rules, memory=memory)
    steering = _steering(snapshot, policy, planner.analysis)
    skews = _skews(planner.analysis)
    try:
        result = _plan(planner)
    finally:
        if stats is not None:
            stats.update(planner.budget.stats)
    return replace(
        result,
        holds=planner.rules.names(memory),
        launch_wanted=tuple(sorted(planner.launch_wanted)),
        skews=skews,
        steering=steering,
    )


def _plan(planner: PlanningPass) -> Plan:
    if not planner.violated:
        return Plan((), (), (), (), 0)
    return plan_record(pass_inputs(planner), finish(planner, run(planner)))


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
