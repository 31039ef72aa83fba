"""Rendering plans, explanations and spread views for people (table) and programs (json, yaml).

The JSON form is a stable contract: camelCase keys, one object per document, and the same input
always gives the same bytes. Lists keep the order the planner gave; only mappings whose order has
no meaning (domain counts, rejected nodes) are sorted. The YAML form is the same data.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import yaml

from rebalancer.core.explain import ConstraintExplanation, Explanation
from rebalancer.core.plan import Eviction, Plan, Skip, ViewReport

Format = Literal["table", "json", "yaml"]
FORMATS: Final[tuple[Format, ...]] = ("table", "json", "yaml")

Data = dict[str, object]
_NO_WRAP: Final = 1_000_000  # long reasons stay on one line in YAML

# --------------------------------------------------------------------------------------------
# Data: the JSON/YAML form


def eviction_data(eviction: Eviction) -> Data:
    return {
        "namespace": eviction.namespace,
        "name": eviction.name,
        "uid": eviction.uid,
        "node": eviction.node,
        "priority": eviction.priority,
        "reason": eviction.reason,
        "wave": eviction.wave,
        "workload": eviction.workload,
        "domain": eviction.domain,
        "topologyKey": eviction.topology_key,
        "targetNode": eviction.target_node,
        "gracePeriodSeconds": eviction.grace_period_seconds,
    }


def skip_data(skip: Skip) -> Data:
    return {
        "namespace": skip.namespace,
        "name": skip.name,
        "reason": str(skip.reason),
        "code": skip.reason.code,
    }


def view_data(view: ViewReport) -> Data:
    return {
        "namespace": view.namespace,
        "topologyKey": view.topology_key,
        "maxSkew": view.max_skew,
        "whenUnsatisfiable": view.when_unsatisfiable,
        "selector": view.selector,
        "minDomains": view.min_domains,
        "domains": dict(sorted(view.domains)),
        "globalMin": view.global_min,
        "skew": view.skew,
    }


def plan_data(plan: Plan) -> Data:
    """The JSON contract of a plan (see the module docstring)."""
    return {
        "evictions": [eviction_data(e) for e in plan.evictions],
        "skipped": [skip_data(s) for s in plan.skipped],
        "violations": [view_data(v) for v in plan.violations],
        "after": [view_data(v) for v in plan.after],
        "waves": [list(wave) for wave in plan.waves],
        "summary": {
            "evictions": len(plan.evictions),
            "lowerBound": plan.lower_bound,
            "minimal": plan.minimal,
            "violations": len(plan.violations),
            "skipped": len(plan.skipped),
        },
        "notes": list(plan.notes),
    }


def constraint_data(constraint: ConstraintExplanation) -> Data:
    return {
        "topologyKey": constraint.topology_key,
        "whenUnsatisfiable": constraint.when_unsatisfiable,
        "maxSkew": constraint.max_skew,
        "minDomains": constraint.min_domains,
        "nodeAffinityPolicy": constraint.node_affinity_policy,
        "nodeTaintsPolicy": constraint.node_taints_policy,
        "selector": constraint.selector,
        "matchCounts": dict(sorted(constraint.match_counts)),
        "globalMin": constraint.global_min,
        "selfMatch": constraint.self_match,
        "default": constraint.default,
    }


def explanation_data(expl: Explanation) -> Data:
    """The JSON contract of an explanation; constraints keep the pod spec's order."""
    return {
        "namespace": expl.namespace,
        "name": expl.name,
        "node": expl.node,
        "constraints": [constraint_data(c) for c in expl.constraints],
        "spreadFeasibleNodes": list(expl.spread_feasible_nodes),
        "feasibleNodes": list(expl.feasible_nodes),
        "rejected": dict(sorted(expl.rejected)),
    }


def _dump(data: object, fmt: Format) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(
            data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=_NO_WRAP
        )
    raise ValueError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")


# --------------------------------------------------------------------------------------------
# Table: for people reading a dry run


def _columns(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Rows padded into left-aligned columns two spaces apart; the last column is not padded."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    return [
        indent
        + "  ".join(
            cell if i == len(row) - 1 else cell.ljust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def _plural(count: int, word: str) -> str:
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


def _skew_label(view: ViewReport) -> str:
    label = f"maxSkew={view.max_skew}"
    if view.min_domains > 1:
        label += f" minDomains={view.min_domains}"
    return label


def _domain_changes(before: ViewReport, after: ViewReport | None) -> str:
    old = dict(before.domains)
    if after is None:
        return " ".join(f"{d}:{c}" for d, c in sorted(old.items()))
    new = dict(after.domains)
    return " ".join(f"{d}:{old.get(d, 0)}->{new.get(d, 0)}" for d in sorted(old.keys() | new))


def _violation_rows(plan: Plan) -> list[list[str]]:
    after = {_view_key(v): v for v in plan.after}
    rows = []
    for view in plan.violations:
        later = after.get(_view_key(view))
        skew = f"skew {view.skew}" if later is None else f"skew {view.skew}->{later.skew}"
        rows.append(
            [
                view.namespace,
                view.topology_key,
                view.when_unsatisfiable,
                _skew_label(view),
                view.selector or "<none>",
                _domain_changes(view, later),
                skew,
            ]
        )
    return rows


def _eviction_rows(evictions: Iterable[Eviction]) -> list[list[str]]:
    rows = [["WAVE", "POD", "NODE", "PRIORITY", "REASON"]]
    rows.extend([str(e.wave), e.key, e.node, str(e.priority), e.reason] for e in evictions)
    return rows


def _skip_rows(skipped: Iterable[Skip]) -> list[list[str]]:
    rows = [["POD", "REASON"]]
    rows.extend([f"{s.namespace}/{s.name}", str(s.reason)] for s in skipped)
    return rows


def plan_summary(plan: Plan) -> str:
    """One line: ``3 evictions (proven minimal: lower bound 3) in 2 waves``."""
    if not plan.violations and not plan.evictions:
        return "No violations: nothing to evict."
    count = _plural(len(plan.evictions), "eviction")
    if plan.minimal:
        bound = f"proven minimal: lower bound {plan.lower_bound}"
    else:
        bound = f"lower bound {plan.lower_bound}"
    return f"{count} ({bound}) in {_plural(len(plan.waves), 'wave')}"


def _plan_table(plan: Plan) -> str:
    lines = [f"Violations ({len(plan.violations)})"]
    lines += _columns(_violation_rows(plan)) or ["  none"]
    lines += ["", f"Plan ({_plural(len(plan.evictions), 'eviction')})"]
    lines += _columns(_eviction_rows(plan.evictions)) if plan.evictions else ["  none"]
    if plan.skipped:
        lines += ["", f"Skipped ({len(plan.skipped)})"]
        lines += _columns(_skip_rows(plan.skipped))
    if plan.notes:
        lines += ["", "Notes"]
        lines += [f"  - {note}" for note in plan.notes]
    lines += ["", plan_summary(plan)]
    return "\n".join(lines) + "\n"


def _views_table(views: Sequence[ViewReport]) -> str:
    if not views:
        return "No spread views.\n"
    rows = [["NAMESPACE", "TOPOLOGY KEY", "WHEN", "SKEW LIMIT", "SELECTOR", "DOMAINS", "SKEW"]]
    for view in views:
        state = "VIOLATED" if view.violated else "ok"
        rows.append(
            [
                view.namespace,
                view.topology_key,
                view.when_unsatisfiable,
                _skew_label(view),
                view.selector or "<none>",
                _domain_changes(view, None),
                f"{view.skew} {state}",
            ]
        )
    return "\n".join(_columns(rows, indent="")) + "\n"


def _node_list(nodes: Sequence[str]) -> str:
    return ", ".join(nodes) if nodes else "none"


def _explanation_table(expl: Explanation) -> str:
    where = f"on node {expl.node}" if expl.node else "pending (not bound to a node)"
    lines = [f"Pod {expl.namespace}/{expl.name}, {where}", ""]
    lines.append(f"Constraints ({len(expl.constraints)})")
    if not expl.constraints:
        lines.append("  none: the PodTopologySpread filter accepts every node")
    for index, c in enumerate(expl.constraints, start=1):
        origin = " (from the cluster defaults)" if c.default else ""
        counts = " ".join(f"{d}:{n}" for d, n in sorted(c.match_counts)) or "no domains"
        lines += [
            f"  {index}. {c.topology_key}  {c.when_unsatisfiable}  maxSkew={c.max_skew}{origin}",
            f"     selector: {c.selector or '<none>'}",
            f"     matching pods per domain: {counts}",
            f"     globalMin={c.global_min}  selfMatch={'yes' if c.self_match else 'no'}"
            f"  minDomains={c.min_domains}  nodeAffinityPolicy={c.node_affinity_policy}"
            f"  nodeTaintsPolicy={c.node_taints_policy}",
        ]
    spread = expl.spread_feasible_nodes
    feasible = expl.feasible_nodes
    lines += [
        "",
        f"Spread-feasible nodes ({len(spread)}): {_node_list(spread)}",
        f"Feasible nodes, every hard filter ({len(feasible)}): {_node_list(feasible)}",
    ]
    if expl.rejected:
        lines += ["", f"Rejected nodes ({len(expl.rejected)})"]
        lines += _columns(sorted([node, reason] for node, reason in expl.rejected))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Public API


def render_plan(plan: Plan, fmt: Format) -> str:
    """``plan`` as a table for people, or as the JSON/YAML contract."""
    if fmt == "table":
        return _plan_table(plan)
    return _dump(plan_data(plan), fmt)


def render_explanation(expl: Explanation, fmt: Format) -> str:
    """``expl`` as a table for people, or as the JSON/YAML contract."""
    if fmt == "table":
        return _explanation_table(expl)
    return _dump(explanation_data(expl), fmt)


def render_views(views: Sequence[ViewReport], fmt: Format) -> str:
    """Spread views (e.g. a cluster's current state) as a table, or ``{"views": [...]}``."""
    if fmt == "table":
        return _views_table(views)
    return _dump({"views": [view_data(v) for v in views]}, fmt)
