"""The plan a planning pass hands back, written as the :class:`Plan` record (pure).

The record reads two frozen values (:mod:`rebalancer.core.outcome`): what the pass read once
(:class:`~rebalancer.core.outcome.PassInputs`) and what its search found
(:class:`~rebalancer.core.outcome.Outcome`). Each move becomes an :class:`Eviction` with its
reason (the counts just before the move) and its wave; the pods of violated views that a rule
or the fit kept in place become :class:`Skip` records; each violated view is reported before
and after the plan; the views left above maxSkew say what holds them
(:mod:`rebalancer.core.unrepaired`); and the plan carries its lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping

from rebalancer.core.grace import eviction_grace
from rebalancer.core.ids import ViewId
from rebalancer.core.limits import workload_of
from rebalancer.core.moves import Move
from rebalancer.core.outcome import Outcome, PassInputs
from rebalancer.core.plan import Eviction, Plan, Skip, Unrepaired, ViewReport
from rebalancer.core.selectors import selector_string
from rebalancer.core.spread import View, global_min, skew_of
from rebalancer.core.unrepaired import needed


def plan_record(inputs: PassInputs, found: Outcome) -> Plan:
    """The plan of what a pass found (``found``), from what it read (``inputs``)."""
    views = inputs.analysis.views
    pods = inputs.analysis.pods
    evictions = tuple(
        _eviction(inputs, m, wave) for m, wave in zip(found.moves, found.waves, strict=True)
    )

    def report(v: ViewId, counts: Mapping[str, int]) -> ViewReport:
        return view_report(views[v], counts, _declared(inputs, v), _workloads(inputs, v))

    violations = tuple(report(v, views[v].counts) for v in found.violated)
    after = tuple(report(v, found.end[v]) for v in found.violated)
    skipped = [
        Skip(pods[i].namespace, pods[i].name, pods[i].uid, pods[i].node_name, reason)
        for i, reason in found.skipped
    ]
    skipped.sort(key=lambda s: (s.namespace, s.name))
    left = tuple(
        Unrepaired(
            view=report(v, found.end[v]),
            skew_before=views[v].skew,
            needed=needed(views[v]),
            reasons=reasons,
        )
        for v, reasons in found.left
    )
    return Plan(evictions, tuple(skipped), violations, after, found.lower_bound, found.notes, left)


def view_report(
    view: View,
    counts: Mapping[str, int],
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


def _declared(inputs: PassInputs, v: ViewId) -> tuple[str, ...]:
    pods = inputs.analysis.pods
    return tuple(sorted(pods[i].key for i in inputs.analysis.views[v].declarers))


def _workloads(inputs: PassInputs, v: ViewId) -> tuple[str, ...]:
    """The distinct workloads of the pods declaring view v (``""`` for a pod without one)."""
    pods = inputs.analysis.pods
    declarers = inputs.analysis.views[v].declarers
    return tuple(sorted({workload_of(pods[i], inputs.owners) for i in declarers}))


def _eviction(inputs: PassInputs, m: Move, wave: int) -> Eviction:
    """The eviction record, with its reason (the counts just before the move)."""
    analysis = inputs.analysis
    pod = analysis.pods[m.pod]
    view = analysis.views[m.view]
    spec = view.spec
    domain = view.node_domain[m.source]
    target_domain = (
        analysis.nodes[m.target].labels.get(spec.topology_key, "?") if m.target else None
    )
    way = "reserved first" if inputs.capacity.reserve else "evicted first"
    landing = (
        f"replacement waits for a node from {m.pool} (node {m.target} has no room), {way}"
        if m.pool
        else f"replacement expected in {target_domain} (node {m.target})"
        if m.target
        else "replacement waits for new capacity (nodeFit: false)"
    )
    priority = inputs.ctx.priority(pod)
    reason = (
        f"{spec.topology_key}={domain} holds {m.source_count} pods matching "
        f"{selector_string(spec.constraint.selector)}, global min {m.global_min}, "
        f"skew {m.source_count - m.global_min} > maxSkew {spec.max_skew}; {landing}; "
        f"priority {priority}"
    )
    budgets = inputs.ctx.budgets
    budget_note = budgets.note(pod)
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
        workload=workload_of(pod, inputs.owners),
        domain=domain,
        topology_key=spec.topology_key,
        target_node=m.target,
        grace_period_seconds=eviction_grace(
            inputs.ctx.policy.grace_period_seconds, pod.grace_period_seconds
        ),
        pdb="".join(budgets.pdbs[k].name for k in budgets.judge(pod)[1]),
        target_domain=target_domain,
        waits_for=m.pool,
        capacity=inputs.capacity.way if m.pool else "",
        reserve_in=m.reserve_in,
    )
