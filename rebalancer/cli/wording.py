"""What a plan and a run say in words, the same in the table (:mod:`rebalancer.cli.render`)
and on the HTML page (:mod:`rebalancer.cli.htmlreport`): the plan at a glance, the run's
closing line, the order of views, domains and skip reasons."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from rebalancer.cluster.act.defaults import DEFAULT_MAX_WAVES
from rebalancer.core.plan import Eviction, Hold, Plan, Skip, ViewReport

if TYPE_CHECKING:
    from rebalancer.cluster.act.runner import RunReport

MIN_WIDTH: Final = 40
"""No table or paragraph is narrower, whatever the terminal."""
_KEEP: Final = "\u00a0"  # a space that textwrap does not break at; written as a space


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _view_key(view: ViewReport) -> tuple[str, str, str, str, int, int]:
    return (
        view.namespace,
        view.topology_key,
        view.when_unsatisfiable,
        view.selector,
        view.max_skew,
        view.min_domains,
    )


def ranked_domains(before: Mapping[str, int], after: Mapping[str, int] | None) -> list[str]:
    """Every domain of a view, most-populated first (before the plan), ties by name."""
    names = set(before) | set(after or {})
    return sorted(names, key=lambda d: (-before.get(d, 0), d))


def worst_first(plan: Plan) -> list[tuple[ViewReport, ViewReport | None]]:
    """The violated views with their state after the plan, the most above maxSkew first
    (then in the planner's order)."""
    after = {_view_key(v): v for v in plan.after}
    pairs = [(v, after.get(_view_key(v))) for v in plan.violations]
    return sorted(pairs, key=lambda pair: -pair[0].excess)


def target_cell(eviction: Eviction) -> str:
    """``node (domain)`` of the expected replacement, or where it waits."""
    if eviction.target_node is None:
        return "pending (nodeFit: false)"
    if eviction.target_domain is None:
        return eviction.target_node
    return f"{eviction.target_node} ({eviction.target_domain})"


def skips_by_reason(skipped: Iterable[Skip]) -> list[tuple[str, list[Skip]]]:
    """(code, skips) pairs, the most common code first, ties by code."""
    groups: dict[str, list[Skip]] = {}
    for skip in skipped:
        groups.setdefault(skip.reason.code, []).append(skip)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


def held_summary(reasons: Iterable[Hold], *, pods: bool = False) -> str:
    """``pdb 3, has-pvc 2`` (with ``pods``: ``pdb (3 pods), has-pvc (2 pods)``): reason codes
    with their pods, the most pods first."""
    totals: dict[str, int] = {}
    for r in reasons:
        totals[r.code] = totals.get(r.code, 0) + r.pods
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    if pods:  # "(3 pods)" stays on one line when the paragraph is wrapped
        return ", ".join(
            f"{code}{_KEEP}({count}{_KEEP}pod{'' if count == 1 else 's'})" for code, count in ranked
        )
    return ", ".join(f"{code} {count}" for code, count in ranked)


def runs_needed(waves: int, max_waves: int = DEFAULT_MAX_WAVES) -> int:
    """Runs of ``run --max-waves max_waves`` that execute ``waves`` waves."""
    return -(-waves // max_waves)


def _head(plan: Plan) -> str:
    if not plan.evictions:
        return "No eviction"
    count = plural(len(plan.evictions), "eviction")
    if plan.minimal:
        return f"{count}, proven minimal"
    return f"{count}, not proven minimal (lower bound {plan.lower_bound})"


def plan_summary(plan: Plan) -> str:
    """One line: ``3 evictions, proven minimal, in 2 waves (1 run); 1 violated view repaired``
    (or why not minimal, and how many views are left above maxSkew)."""
    if not plan.violations and not plan.evictions:
        return "No violations: nothing to evict."
    line = _head(plan)
    if plan.evictions:
        waves = len(plan.waves)
        line += f", in {plural(waves, 'wave')} ({plural(runs_needed(waves), 'run')})"
    views = len(plan.violations)
    if plan.unrepaired:
        return f"{line}; {plan.repaired} of {plural(views, 'violated view')} repaired, " + (
            f"{len(plan.unrepaired)} left above maxSkew"
        )
    return f"{line}; {plural(views, 'violated view')} repaired"


def plan_paragraph(plan: Plan, width: int | None = None) -> list[str]:
    """The plan at a glance, wrapped to ``width`` (100 without one): evictions and whether
    they are proven minimal, waves and the runs they take at run's default ``--max-waves``,
    the views repaired and those left, with what holds them."""
    if not plan.violations and not plan.evictions:
        return [plan_summary(plan)]
    text = _head(plan)
    if plan.evictions:
        waves = len(plan.waves)
        runs = runs_needed(waves)
        text += (
            f", in {plural(waves, 'wave')}: {'one run' if runs == 1 else f'{runs} runs'} of "
            f"`run` at its default --max-waves {DEFAULT_MAX_WAVES} (a run re-plans after every "
            "wave)."
        )
        if not plan.minimal:
            text += (
                f" No plan reaching the same skews evicts fewer than {plan.lower_bound} pods;"
                " this one was found move by move."
            )
    else:
        text += "."
    views = plural(len(plan.violations), "violated view")
    if plan.unrepaired:
        held = held_summary((r for u in plan.unrepaired for r in u.reasons), pods=True)
        repaired = f"{plan.repaired} repaired, " if plan.repaired else "none repaired, "
        text += (
            f" {views}: {repaired}{len(plan.unrepaired)} left above maxSkew, held by {held};"
            " see Left above maxSkew."
        )
    else:
        text += f" {views}: all repaired."
    lines = textwrap.wrap(text, width=max(width or 100, MIN_WIDTH), break_on_hyphens=False)
    return [line.replace(_KEEP, " ") for line in lines]


def run_summary(report: RunReport) -> str:
    """The closing line of a run: ``Run r-1: 2 evicted, 0 blocked by PDB, ...; end: balanced``."""
    s = report.summary()
    line = (
        f"Run {report.run_id}: {s['evicted']} evicted, {s['blocked_by_pdb']} blocked by PDB, "
        f"{s['failed']} failed, {s['skipped']} skipped in {s['waves']} wave(s); end: {s['end']}"
    )
    if report.server_dry_run:
        line += f"; server dry run: {s['would_evict']} would be evicted"
    if report.costs:
        line += f"; deletion costs: {s['costs_written']} written, {s['costs_not_written']} not"
    return line
