"""The plan a planning pass hands back: its moves written as the :class:`Plan` record (pure).

The moves worth keeping come first (:func:`trim`). Each becomes an :class:`Eviction` with its
reason (the counts just before the move) and its wave; the pods of violated views that a rule
or the fit kept in place become :class:`Skip` records; each violated view is reported before
and after the plan; the views left above maxSkew say what holds them
(:mod:`rebalancer.core.unrepaired`); and the plan carries its lower bound
(:func:`lower_bound`).
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from rebalancer.core.distances import PinnedDistances
from rebalancer.core.evictability import EvictionContext
from rebalancer.core.grace import eviction_grace
from rebalancer.core.holds import HoldRules
from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.jointplan import JointPlan
from rebalancer.core.limits import RunLimits, workload_of
from rebalancer.core.moves import Move
from rebalancer.core.plan import Eviction, Plan, Skip, SkipReason, ViewReport
from rebalancer.core.policy import Policy
from rebalancer.core.ranking import VictimRanking
from rebalancer.core.selectors import selector_string
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import Analysis, View, global_min, skew_of
from rebalancer.core.unrepaired import unrepaired
from rebalancer.core.waves import assign_waves


class Planner(Protocol):
    """What the record reads of a planning pass (:class:`rebalancer.core.planner.Planner`)."""

    policy: Policy
    analysis: Analysis
    ctx: EvictionContext
    state: SimState  # the end state, once the moves are made
    ranking: VictimRanking
    distances: PinnedDistances
    limits: RunLimits
    owners: dict[tuple[str, str, str], str]
    considered: list[ViewId]
    violated: list[ViewId]
    groups: list[list[ViewId]]
    joint: dict[ViewId, tuple[ViewId, JointPlan]]
    proven: dict[ViewId, int]
    no_fit: dict[PodId, SkipReason]
    limit_notes: set[str]
    rules: HoldRules


def plan_record(planner: Planner, moves: list[Move]) -> Plan:
    """The plan of ``moves``, which ``planner`` made (its state is the end state)."""
    analysis = planner.analysis
    ranking = planner.ranking
    waves = assign_waves(
        planner.state.fresh(), analysis.views, ranking.pdbs, planner.ctx.budgets.allowed, moves
    )
    evictions = [_eviction(planner, m, wave) for m, wave in zip(moves, waves, strict=True)]
    final = planner.state
    views, violated = analysis.views, planner.violated
    declared = {v: _declared(planner, v) for v in violated}
    owned = {v: _workloads(planner, v) for v in violated}
    violations = tuple(
        view_report(views[v], views[v].counts, declared[v], owned[v]) for v in violated
    )
    after = tuple(view_report(views[v], final.counts[v], declared[v], owned[v]) for v in violated)
    lower = lower_bound(planner)
    moved: set[int] = {m.pod for m in moves}
    skipped = _skipped(planner, moved)
    notes = tuple(sorted(planner.limit_notes))
    left = unrepaired(
        final,
        planner.considered,
        lambda v: view_report(
            views[v], final.counts[v], _declared(planner, v), _workloads(planner, v)
        ),
        lambda i: held_by(planner, i),
        moved,
    )
    return Plan(tuple(evictions), skipped, violations, after, lower, notes, left)


def trim(planner: Planner, moves: list[Move]) -> list[Move]:
    """Drop trailing moves that end no better than an earlier prefix (unreachable targets),
    and take them back in the planner's state, which ``run`` left after all the moves.

    The objective is the worst excess over the violated views, then their summed excess. The
    views an exact joint plan balances count too: its steps may pass through states where a
    view that was within maxSkew is not, and cutting them there would leave it so. With soft
    views opted in, the hard views' objective comes first, then the soft views' (SPEC §3.6).
    """
    state = planner.state
    if not any(state.excess(v) for v in planner.violated):
        return moves  # every violated view ends balanced: no prefix does better
    replay = state.fresh()
    tracked = set(planner.violated)
    for _, joint in planner.joint.values():
        tracked.update(joint.views)
    views = planner.analysis.views
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


def lower_bound(planner: Planner) -> int:
    """No plan that reaches the skews this plan reaches evicts fewer pods.

    Groups of violated views that share no pod are independent
    (:func:`rebalancer.core.groups.violated_groups`), so the bound is a sum over groups.
    Within a group, each eviction lowers each view's distance to balance
    (:mod:`rebalancer.core.distances`, unevictable pods as floors) by at most one, so the
    largest distance is a joint bound; where the exact search (:mod:`rebalancer.core.joint`)
    proved a group's minimum, that minimum is the bound. A group the plan leaves above maxSkew
    (:mod:`rebalancer.core.unrepaired` says what holds it) is bounded by what the plan sets out
    to reach there: each view's distance to the skew it ends at, ``max(maxSkew, skew after)``.
    So the bound never exceeds the plan's size, and a plan that meets it is minimal for what
    it reaches.
    """
    total = 0
    state = planner.state
    distances = planner.distances
    for group in planner.groups:
        if any(state.excess(v) for v in group):
            total += max(distances.from_start(v, state.skew(v)) for v in group)
            continue
        proven = planner.proven.get(group[0])
        total += proven if proven is not None else max(distances.at_start(v) for v in group)
    return total


def held_by(planner: Planner, i: PodId) -> SkipReason | None:
    """Why pod i, still in place after the plan, was not moved: the rule that forbids its
    eviction, a policy limit reached, or a replacement that would stay Pending."""
    reason = planner.ranking.skip(i)
    if reason is None:
        pod = planner.analysis.pods[i]
        node = planner.state.placement[i]
        reason = planner.limits.allows(node, pod.namespace, workload_of(pod, planner.owners))
    return reason or planner.no_fit.get(i)


def view_report(
    view: View,
    counts: dict[str, int],
    declared: tuple[str, ...],
    workloads: tuple[str, ...] = (),
) -> ViewReport:
    """The view with ``counts``; ``declared``: the sorted keys of the pods declaring it, and
    ``workloads`` their distinct workloads."""
    spec = view.spec
    c = spec.constraint
    domains = len(view.domains)
    return ViewReport(
        namespace=spec.namespace,
        topology_key=c.topology_key,
        max_skew=c.max_skew,
        when_unsatisfiable=c.when_unsatisfiable,
        selector=selector_string(c.selector),
        min_domains=c.min_domains,
        domains=tuple(view.all_counts(counts).items()),
        global_min=global_min(counts, domains, c.min_domains, c.hard),
        skew=skew_of(counts, domains, c.min_domains, c.hard),
        pods=declared,
        workloads=workloads,
    )


def _declared(planner: Planner, v: ViewId) -> tuple[str, ...]:
    pods = planner.analysis.pods
    return tuple(sorted(pods[i].key for i in planner.analysis.views[v].declarers))


def _workloads(planner: Planner, v: ViewId) -> tuple[str, ...]:
    """The distinct workloads of the pods declaring view v (``""`` for a pod without one)."""
    pods = planner.analysis.pods
    declarers = planner.analysis.views[v].declarers
    return tuple(sorted({workload_of(pods[i], planner.owners) for i in declarers}))


def _eviction(planner: Planner, m: Move, wave: int) -> Eviction:
    """The eviction record, with its reason (the counts just before the move)."""
    analysis = planner.analysis
    pod = analysis.pods[m.pod]
    view = analysis.views[m.view]
    spec = view.spec
    domain = view.node_domain[m.source]
    target_domain = (
        analysis.nodes[m.target].labels.get(spec.topology_key, "?") if m.target else None
    )
    way = "reserved first" if planner.rules.capacity.reserve else "evicted first"
    landing = (
        f"replacement waits for a node from {m.pool} (node {m.target} has no room), {way}"
        if m.pool
        else f"replacement expected in {target_domain} (node {m.target})"
        if m.target
        else "replacement waits for new capacity (nodeFit: false)"
    )
    priority = planner.ctx.priority(pod)
    reason = (
        f"{spec.topology_key}={domain} holds {m.source_count} pods matching "
        f"{selector_string(spec.constraint.selector)}, global min {m.global_min}, "
        f"skew {m.source_count - m.global_min} > maxSkew {spec.max_skew}; {landing}; "
        f"priority {priority}"
    )
    budget_note = planner.ctx.budgets.note(pod)
    if budget_note:
        reason += f"; {budget_note}"
    return Eviction(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        node=m.source,
        priority=priority,
        reason=reason,
        wave=wave,
        workload=workload_of(pod, planner.owners),
        domain=domain,
        topology_key=spec.topology_key,
        target_node=m.target,
        grace_period_seconds=eviction_grace(
            planner.policy.grace_period_seconds, pod.grace_period_seconds
        ),
        pdb="".join(planner.ctx.budgets.pdbs[k].name for k in planner.ranking.pdbs(m.pod)),
        target_domain=target_domain,
        waits_for=m.pool,
        capacity=(planner.rules.capacity.way if m.pool else ""),
        reserve_in=m.reserve_in,
    )


def _skipped(planner: Planner, moved: set[int]) -> tuple[Skip, ...]:
    """Pods in violated views that were not evicted because a rule or the fit forbids it."""
    pods = planner.analysis.pods
    seen: set[int] = set()
    out: list[Skip] = []
    for v in planner.violated:
        for i in planner.analysis.views[v].members:
            if i in seen or i in moved:
                continue
            seen.add(i)
            reason = planner.ranking.skip(i) or planner.no_fit.get(i)
            if reason is not None:
                p = pods[i]
                out.append(Skip(p.namespace, p.name, p.uid, p.node_name, reason))
    out.sort(key=lambda s: (s.namespace, s.name))
    return tuple(out)
