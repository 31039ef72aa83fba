"""What a planning pass found, frozen once its search ends (pure).

The search works on a wide, mutable state (the simulation, the victim ranking, the limits, the
plans made up front). When it ends, the pass hands the record (:mod:`rebalancer.core.record`)
two frozen values and nothing else:

* :class:`PassInputs`: what the pass read once and never changed (the analysis, the eviction
  context, the pods' workloads, which way a replacement waiting for a node goes);
* :class:`Outcome`: what the search found (the moves kept and their waves, the end state's
  counts of the views the record reports, the views left above maxSkew and what holds them,
  the pods a rule or the fit kept in place, the limits reached, the lower bound).

So the record writes the plan from values, and no later change of the pass's state can reach
it. :func:`finish` builds the outcome when the search ends: it drops the trailing moves that
end no better than an earlier prefix (:func:`trim`), groups the moves into waves, and works out
the lower bound (:func:`lower_bound`) and what holds each pod left in place (:func:`held_by`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from itertools import chain

from rebalancer.core.capacity import CapacityRules
from rebalancer.core.evictability import EvictionContext
from rebalancer.core.ids import Domain, PodId, ViewId
from rebalancer.core.limits import workload_of
from rebalancer.core.moves import Move
from rebalancer.core.plan import Hold, SkipReason
from rebalancer.core.planpass import PlanningPass
from rebalancer.core.spread import Analysis
from rebalancer.core.unrepaired import left_above
from rebalancer.core.waves import assign_waves


@dataclass(frozen=True, slots=True)
class PassInputs:
    """What a planning pass read once and never changed, as its record reads it."""

    analysis: Analysis  # the snapshot's pods, nodes and views
    ctx: EvictionContext  # the policy, priorities and PodDisruptionBudgets
    owners: dict[tuple[str, str, str], str]  # a pod's owner -> its workload (limits.owner_map)
    capacity: CapacityRules  # which way a replacement that waits for a new node goes


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one planning pass found, built once when its search ends."""

    moves: tuple[Move, ...]  # the moves kept, in the order made
    waves: tuple[int, ...]  # each move's wave (rebalancer.core.waves)
    violated: tuple[ViewId, ...]  # the considered views above maxSkew before the plan
    end: Mapping[ViewId, Mapping[Domain, int]]  # counts at the end: violated views, views left
    left: tuple[tuple[ViewId, tuple[Hold, ...]], ...]  # above maxSkew at the end, worst first
    skipped: tuple[tuple[PodId, SkipReason], ...]  # pods of violated views a rule or the fit held
    notes: tuple[str, ...]  # the policy limits reached, sorted
    lower_bound: int  # no plan reaching the skews this plan reaches evicts fewer pods


def finish(p: PlanningPass, moves: list[Move]) -> Outcome:
    """What pass ``p`` found, once its search has made ``moves``: the moves worth keeping
    (:func:`trim`), their waves, the end state of the views the record reports, what holds
    the views left above maxSkew, the pods a rule or the fit kept in place, the limits
    reached and the lower bound, frozen for the record."""
    kept = trim(p, moves)
    state = p.state
    views = p.analysis.views
    waves = assign_waves(state.fresh(), views, p.ranking.pdbs, p.ctx.budgets.allowed, kept)
    moved: set[int] = {m.pod for m in kept}
    left = left_above(state, p.considered, partial(held_by, p), moved)
    end = {v: dict(state.counts[v]) for v in chain(p.violated, (v for v, _ in left))}
    return Outcome(
        moves=tuple(kept),
        waves=tuple(waves),
        violated=tuple(p.violated),
        end=end,
        left=left,
        skipped=_skipped(p, moved),
        notes=tuple(sorted(p.limit_notes)),
        lower_bound=lower_bound(p),
    )


def pass_inputs(p: PlanningPass) -> PassInputs:
    """What pass ``p`` read once and never changed, for the record."""
    return PassInputs(p.analysis, p.ctx, p.owners, p.rules.capacity)


def trim(p: PlanningPass, moves: list[Move]) -> list[Move]:
    """Drop trailing moves that end no better than an earlier prefix (unreachable targets),
    and take them back in the simulation, which the search left after all the moves.

    The objective is the worst excess over the violated views, then their summed excess.
    The views an exact joint plan balances count too: its steps may pass through states
    where a view that was within maxSkew is not, and cutting them there would leave it so.
    With soft views opted in, the hard views' objective comes first, then the soft views'
    (SPEC §3.6).
    """
    state = p.state
    if not any(state.excess(v) for v in p.violated):
        return moves  # every violated view ends balanced: no prefix does better
    replay = state.fresh()
    tracked = set(p.violated)
    for _, joint in p.joint.values():
        tracked.update(joint.views)
    views = p.analysis.views
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


def lower_bound(p: PlanningPass) -> int:
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
    state = p.state
    distances = p.distances
    for group in p.groups:
        if any(state.excess(v) for v in group):
            total += max(distances.from_start(v, state.skew(v)) for v in group)
            continue
        proven = p.proven.get(group[0])
        total += proven if proven is not None else max(distances.at_start(v) for v in group)
    return total


def held_by(p: PlanningPass, i: PodId) -> SkipReason | None:
    """Why pod i, still in place after the plan, was not moved: the rule that forbids its
    eviction, a policy limit reached, or a replacement that would stay Pending."""
    reason = p.ranking.skip(i)
    if reason is None:
        pod = p.analysis.pods[i]
        node = p.state.placement[i]
        reason = p.limits.allows(node, pod.namespace, workload_of(pod, p.owners))
    return reason or p.no_fit.get(i)


def _skipped(p: PlanningPass, moved: set[int]) -> tuple[tuple[PodId, SkipReason], ...]:
    """Pods in violated views that were not evicted because a rule or the fit forbids it,
    each once, with why."""
    seen: set[int] = set()
    out: list[tuple[PodId, SkipReason]] = []
    for v in p.violated:
        for i in p.analysis.views[v].members:
            if i in seen or i in moved:
                continue
            seen.add(i)
            reason = p.ranking.skip(i) or p.no_fit.get(i)
            if reason is not None:
                out.append((i, reason))
    return tuple(out)
