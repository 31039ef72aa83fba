"""Rendering plans, runs, explanations and spread views for people (table, html) and programs
(json, yaml).

The JSON form is a stable contract: camelCase keys, one object per document whose first key is
its ``version`` (:data:`VERSION`), and the same input always gives the same bytes. Lists keep
the order the planner gave; only mappings whose order has no meaning (domain counts, rejected
nodes) are sorted. The YAML form is the same data.

The table is for reading, at any cluster size: a view shows its few most- and least-populated
domains and ``(+N more)``, node lists their first few names, and with a terminal's width
(:class:`TableStyle`) every line fits it without cutting a name: a row too wide folds its
last columns onto a line under it, and only a name longer than the width overflows its line.
``--wide`` shows everything. The HTML report is in
:mod:`rebalancer.cli.htmlreport`; the wording both share in :mod:`rebalancer.cli.wording`.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

import orjson

from rebalancer.cli.printable import printable_fields, yaml_text
from rebalancer.cli.wording import (
    MIN_WIDTH,
    NextRun,
    capacity_lines,
    held_cell,
    next_run_data,
    next_run_lines,
    plan_paragraph,
    plural,
    ranked_domains,
    run_summary,
    short_key,
    short_reason,
    short_workload,
    skips_by_reason,
    target_cell,
    view_subject,
    worst_first,
)
from rebalancer.cluster.act.outcome import RunEnd
from rebalancer.core.api import (
    ANY_NODE,
    ConstraintExplanation,
    Eviction,
    Explanation,
    Plan,
    PlanStatus,
    Skip,
    Unrepaired,
    ViewReport,
)

if TYPE_CHECKING:
    from rebalancer.cluster.act.runner import RunReport
    from rebalancer.core.api import Steering

Format = Literal["table", "json", "yaml", "html"]
FORMATS: Final[tuple[Format, ...]] = ("table", "json", "yaml")
"""Every command's formats."""
REPORT_FORMATS: Final[tuple[Format, ...]] = (*FORMATS, "html")
"""``plan`` and ``run`` also write a self-contained HTML report."""

Data = dict[str, object]
VERSION: Final = 2
"""The version of the JSON/YAML contract, the first key of every document. It changes when a
field is removed or changes meaning; added fields keep it."""
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
        "targetDomain": eviction.target_domain,
        "gracePeriodSeconds": eviction.grace_period_seconds,
        "podDisruptionBudget": eviction.pdb or None,
        "waitsFor": eviction.waits_for or None,
        "capacity": eviction.capacity or None,
        "reserveIn": dict(eviction.reserve_in) or None,
    }


def skip_data(skip: Skip) -> Data:
    return {
        "namespace": skip.namespace,
        "name": skip.name,
        "reason": str(skip.reason),
        "code": skip.reason.code.value,
    }


def _view_head(view: ViewReport) -> Data:
    """What names a view: the keys both a view and an unrepaired one start with."""
    return {
        "namespace": view.namespace,
        "topologyKey": view.topology_key,
        "maxSkew": view.max_skew,
        "whenUnsatisfiable": view.when_unsatisfiable,
        "selector": view.selector,
        "minDomains": view.min_domains,
    }


def view_data(view: ViewReport) -> Data:
    return {
        **_view_head(view),
        "domains": dict(sorted(view.domains)),
        "globalMin": view.global_min,
        "skew": view.skew,
    }


def unrepaired_data(left: Unrepaired) -> Data:
    return {
        **_view_head(left.view),
        "skewBefore": left.skew_before,
        "skewAfter": left.skew_after,
        "evictionsNeeded": left.needed,
        "reasons": [
            {"code": r.code.value, "pods": r.pods, "detail": r.detail} for r in left.reasons
        ],
    }


def plan_data(plan: Plan) -> Data:
    """The JSON contract of a plan (see the module docstring)."""
    return {
        "version": VERSION,
        "evictions": [eviction_data(e) for e in plan.evictions],
        "skipped": [skip_data(s) for s in plan.skipped],
        "violations": [view_data(v) for v in plan.violations],
        "after": [view_data(v) for v in plan.after],
        "unrepaired": [unrepaired_data(u) for u in plan.unrepaired],
        "waves": [list(wave) for wave in plan.waves],
        "summary": {
            "evictions": len(plan.evictions),
            "lowerBound": plan.lower_bound,
            "minimal": plan.minimal,
            "violations": len(plan.violations),
            "repaired": plan.repaired,
            "unrepaired": len(plan.unrepaired),
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
        "skew": constraint.skew,
        "selfMatch": constraint.self_match,
        "default": constraint.default,
        "podDomain": constraint.pod_domain,
        "replacementGlobalMin": constraint.replacement_global_min,
    }


def status_data(status: PlanStatus | None) -> Data | None:
    if status is None:
        return None
    return {
        "state": status.state,
        "detail": status.detail,
        "wave": status.wave,
        "targetNode": status.target_node,
        "targetDomain": status.target_domain,
    }


def explanation_data(expl: Explanation) -> Data:
    """The JSON contract of an explanation; constraints keep the pod spec's order."""
    return {
        "version": VERSION,
        "namespace": expl.namespace,
        "name": expl.name,
        "node": expl.node,
        "plan": status_data(expl.status),
        "constraints": [constraint_data(c) for c in expl.constraints],
        "spreadFeasibleNodes": list(expl.spread_feasible_nodes),
        "feasibleNodes": list(expl.feasible_nodes),
        "rejected": dict(sorted(expl.rejected)),
        "nodePools": [
            {"name": p.name, "topologyKey": expl.pools_key, "domains": dict(p.domains)}
            for p in expl.node_pools
        ],
    }


_JSON_OPTIONS: Final = (
    orjson.OPT_INDENT_2
    | orjson.OPT_APPEND_NEWLINE
    | orjson.OPT_PASSTHROUGH_DATACLASS  # json refuses these: so does the fallback
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def _json(data: object, *, floats: bool) -> str:
    """``json.dumps(data, indent=2, ensure_ascii=False)`` and a newline.

    Without ``floats`` (the data holds strings, integers, booleans, None, lists and
    string-keyed dicts only, as a plan's does) orjson writes the same bytes in C: the same
    indentation, separators and escapes (tests/test_render_json.py). It writes some floats
    differently (``1e-5``, not ``1e-05``; NaN as null), so data that may hold one takes
    :mod:`json`, as does anything orjson refuses (an integer wider than 64 bits, a key that is
    not a string).
    """
    if not floats:
        try:
            return orjson.dumps(data, option=_JSON_OPTIONS).decode()
        except orjson.JSONEncodeError:
            pass
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _dump(data: object, fmt: Format, *, floats: bool = True) -> str:
    """``data`` as JSON or YAML; ``floats=False`` promises it holds no float."""
    if fmt == "json":
        return _json(data, floats=floats)
    if fmt == "yaml":
        return yaml_text(data, width=_NO_WRAP)
    raise ValueError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")


# --------------------------------------------------------------------------------------------
# Table: for people reading a dry run


@dataclass(frozen=True, slots=True)
class TableStyle:
    """How the table fits its reader: a terminal's width, or everything (``--wide``).

    Without ``wide`` a view shows only its few most- and least-populated domains and a node list
    only its first few names, each followed by ``(+N more)``, a long section its first ``rows``
    rows (``--all``: every row), and cells are short (a workload, not a selector; the key and
    skew of an eviction, not its whole reason); with a ``width`` every line also fits it,
    counted in UTF-8 bytes (never fewer than the columns a character takes, so a line fits
    whatever its characters, and byte-counting tools agree), except a line holding a name
    longer than the room: names are never cut. ``wide`` shows every row, domain
    and name, the full reasons, and cuts nothing. The full counts are always in
    ``-o json|yaml``.
    """

    width: int | None = None
    wide: bool = False
    unicode: bool = True
    domains: int = 3  # most- and least-populated domains shown per view
    names: int = 3  # node names shown per list or rejection reason
    skips: int = 12  # skipped pods listed one per line; more are grouped by reason
    rows: int | None = 10  # rows shown per long section (the worst first); None: all

    @property
    def cut(self) -> str:
        return "\u2026" if self.unicode else "~"


_BAR_CELLS: Final = 8
_BLOCKS: Final = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
_ASCII_BLOCKS: Final = ".:-=+*#@"


def cells(text: str) -> int:
    """How wide ``text`` is counted: its UTF-8 bytes, which are never fewer than the terminal
    columns it takes (one for ASCII, two or three bytes for a one-column ``…`` or ``█``, three
    or four for a two-column character)."""
    return len(text.encode())


class _Whole(str):
    """A line that holds names: :func:`_fit` leaves it whole. Its layout already fits the
    width where it can (fewer items, columns folded, prose wrapped); a single name longer than
    the room overflows the line, as kubectl's does, rather than be cut."""

    __slots__ = ()


def _whole(lines: Iterable[str]) -> list[str]:
    return [_Whole(line) for line in lines]


def _clip(text: str, width: int, style: TableStyle) -> str:
    """``text`` cut to ``width`` (:func:`cells`), the last character marking the cut."""
    if cells(text) <= width:
        return text
    room = width - cells(style.cut)
    if room < 0:
        return ""
    kept = text.encode()[:room].decode(errors="ignore")
    return kept + style.cut


def _fit(lines: list[str], style: TableStyle) -> list[str]:
    """``lines`` cut to the style's width, except the :class:`_Whole` ones (names)."""
    width = _width(style)
    if width is None:
        return lines
    return [line if isinstance(line, _Whole) else _clip(line, width, style) for line in lines]


def _text(lines: list[str], style: TableStyle) -> str:
    """``lines`` fitted to the style's width, one text ending in a newline."""
    return "\n".join(_fit(lines, style)) + "\n"


def _wrap(text: str, width: int | None, first: str, rest: str) -> list[str]:
    """``text`` wrapped to ``width`` after the indents ``first`` and ``rest``, never breaking a
    word (a name longer than the room overflows its line); one line without a width."""
    if width is None:
        return _whole([first + text])
    lines = textwrap.wrap(
        text,
        width=max(width, cells(first) + 1),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return _whole(lines or [first.rstrip()])


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


class Shrink(NamedTuple):
    """A column that is not a name and may be cut to fit: its index, its fewest characters,
    where it is cut, and which of its cells (all without ``only``): a column that holds a
    workload or else a selector cuts only the selectors."""

    column: int
    fewest: int
    where: Literal["end", "middle"]
    only: Callable[[str], bool] | None = None


def _is_selector(cell: str) -> bool:
    """A view's subject that is a selector (:func:`view_subject`), not a workload's name."""
    return cell.startswith("selector ")


def _fits(lines: Sequence[str], width: int) -> bool:
    return all(cells(line) <= width for line in lines)


def _fitted_columns(
    rows: Sequence[Sequence[str]],
    style: TableStyle,
    shrink: Sequence[Shrink],
    indent: str = "  ",
) -> list[str]:
    """Rows in columns (:func:`_columns`) that fit the style's width: the ``shrink`` columns
    (never a name) are cut, in that order, each down to its fewest characters, until the widest
    line fits (in :func:`cells`). The lines are :class:`_Whole`: what still does not fit is a
    name, and overflows."""
    width = _width(style)
    if width is None or not rows:
        return _whole(_columns(rows, indent))
    mark = cells(style.cut) - len(style.cut)  # the bytes a cut's mark takes beyond its column
    lines = _columns(rows, indent)
    for cut in range(len(shrink) + 1):  # room for the marks of ``cut`` cut columns
        if _fits(lines, width):
            break
        lines = _columns(_cut_cells(rows, width - cut * mark, shrink, style, indent), indent)
    return _whole(lines)


def _cut_cells(
    rows: Sequence[Sequence[str]],
    room: int,
    shrink: Sequence[Shrink],
    style: TableStyle,
    indent: str,
) -> list[list[str]]:
    """The rows with the ``shrink`` columns cut so that a line takes at most ``room``
    characters (the cells a column's ``only`` refuses stay whole)."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    excess = len(indent) + sum(widths) + 2 * (len(widths) - 1) - room
    limit = list(widths)
    for column in shrink:
        if excess <= 0:
            break
        cut = min(excess, max(0, widths[column.column] - column.fewest))
        limit[column.column] -= cut
        excess -= cut
    by_index = {column.column: column for column in shrink}

    def one(i: int, cell: str) -> str:
        column = by_index.get(i)
        if column is None or (column.only is not None and not column.only(cell)):
            return cell
        return _cut_cell(cell, limit[i], column.where, style)

    return [[one(i, cell) for i, cell in enumerate(row)] for row in rows]


def _hung_columns(
    rows: Sequence[Sequence[str]], width: int, hang: int, indent: str
) -> list[str] | None:
    """Rows in columns whose last one is wrapped at spaces within its column, its next lines
    indented to it; None when that column would get fewer than ``hang`` characters."""
    if len(rows[0]) < 2:
        return None
    heads = _columns([row[:-1] for row in rows], indent)
    start = max(len(line) for line in heads) + 2
    if width - start < hang:
        return None
    lines: list[str] = []
    for head, row in zip(heads, rows, strict=True):
        pad = " " * start
        lines += _wrap(row[-1], width, head.ljust(start), pad) if row[-1] else [head]
    return _whole(lines)


def _cut_cell(text: str, width: int, where: str, style: TableStyle) -> str:
    """``text`` cut to ``width`` characters, at its end or in its middle (both ends stay
    readable), one character marking the cut."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    if where == "middle" and width >= 8:
        head = (width - 1) // 2
        return text[:head] + style.cut + text[len(text) - (width - 1 - head) :]
    return text[: width - 1] + style.cut


def _folded_columns(
    rows: Sequence[Sequence[str]],
    style: TableStyle,
    *,
    fold: Sequence[int],
    shrink: Sequence[Shrink] = (),
    indent: str = "  ",
    hang: int | None = None,
) -> list[str]:
    """Rows in columns that fit the style's width without cutting a name, as kubectl plugins
    lay out a wide table in a narrow terminal. With ``hang``, a last column (prose) left at
    least that many characters is wrapped at spaces within its column. Otherwise, while the
    rows are too wide, the ``fold`` columns, in that order, leave the row for a line of their
    own under it, indented (their headings on a second heading line), in columns when those
    fit, else wrapped at spaces. Only when every fold column is folded and the rows are still
    too wide are the ``shrink`` columns (never a name) cut; a name longer than the room
    overflows its line."""
    width = _width(style)
    if width is None or not rows:
        return _whole(_columns(rows, indent))
    lines = _columns(rows, indent)
    if _fits(lines, width):
        return _whole(lines)
    if hang is not None:
        hung = _hung_columns(rows, width, hang, indent)
        if hung is not None:
            return hung
    count = len(fold)
    for fewer in range(len(fold) + 1):
        folded = set(fold[:fewer])
        firsts = _columns([[c for i, c in enumerate(r) if i not in folded] for r in rows], indent)
        if _fits(firsts, width):
            count = fewer
            break
    folded = set(fold[:count])
    kept = [i for i in range(len(rows[0])) if i not in folded]
    if count == len(fold) and not _fits(firsts, width):
        cut = [s._replace(column=kept.index(s.column)) for s in shrink if s.column in kept]
        firsts = _fitted_columns([[r[i] for i in kept] for r in rows], style, cut, indent)
    if not folded:
        return _whole(firsts)
    moved = [[r[i] for i in sorted(folded)] for r in rows]
    sub = indent + "  "
    seconds = [[line] for line in _columns(moved, sub)]
    if not _fits([line for group in seconds for line in group], width):
        seconds = [_wrap("  ".join(c for c in row if c), width, sub, sub) for row in moved]
    out: list[str] = []
    for first, second in zip(firsts, seconds, strict=True):
        out += [first, *(line for line in second if line.strip())]
    return _whole(out)


def _width(style: TableStyle) -> int | None:
    """The width lines are fitted to, or None (``wide``, or no width known)."""
    if style.wide or style.width is None:
        return None
    return max(style.width, MIN_WIDTH)


def _view_extras(view: ViewReport) -> str:
    """What sets a view apart from the usual DoNotSchedule, minDomains 1 (with a trailing gap)."""
    extras = []
    if view.when_unsatisfiable != "DoNotSchedule":
        extras.append(view.when_unsatisfiable)
    if view.min_domains > 1:
        extras.append(f"minDomains={view.min_domains}")
    return "".join(f"{e}  " for e in extras)


def more(total: int, shown: int) -> str:
    """`` (+N more)`` when ``shown`` of ``total`` items were listed, else an empty string."""
    return f" (+{total - shown} more)" if total > shown else ""


def domain_cell(
    before: Mapping[str, int], after: Mapping[str, int] | None, show: int | None
) -> str:
    """``d:6->3 d:2->3 ...``: every domain, most-populated first (the bar's order), or with
    ``show`` the ``show`` most- and ``show`` least-populated, then ``(+N more)``."""

    def one(domain: str) -> str:
        if after is None:
            return f"{domain}:{before.get(domain, 0)}"
        return f"{domain}:{before.get(domain, 0)}->{after.get(domain, 0)}"

    ranked = ranked_domains(before, after)
    if show is None or len(ranked) <= 2 * show:
        return " ".join(one(d) for d in ranked) or "no domains"
    top, bottom = ranked[:show], ranked[-show:]
    return (
        " ".join(one(d) for d in top)
        + " .. "
        + " ".join(one(d) for d in bottom)
        + more(len(ranked), 2 * show)
    )


def _fitted_domains(
    before: Mapping[str, int],
    after: Mapping[str, int] | None,
    budget: int | None,
    style: TableStyle,
) -> str:
    """The domain cell with as many domains as fit in ``budget`` characters (at least one of
    each end), or only the number of domains when not even that fits."""
    if style.wide:
        return domain_cell(before, after, None)
    for show in range(style.domains, 0, -1):
        cell = domain_cell(before, after, show)
        if budget is None or cells(cell) <= budget:
            return cell
    count = len(set(before) | set(after or {}))
    return plural(count, "domain")


def _spark(values: Sequence[float], top: float, style: TableStyle) -> str:
    blocks = _BLOCKS if style.unicode else _ASCII_BLOCKS
    cells = []
    for value in values:
        if value <= 0 or top <= 0:
            cells.append(" ")
        else:
            level = min(len(blocks), max(1, round(value / top * len(blocks))))
            cells.append(blocks[level - 1])
    return "".join(cells)


def _buckets(counts: Sequence[int], cells: int) -> list[float]:
    """``counts`` (sorted, most first) averaged into at most ``cells`` equal slices."""
    if len(counts) <= cells:
        return [float(c) for c in counts]
    out = []
    for i in range(cells):
        lo, hi = i * len(counts) // cells, (i + 1) * len(counts) // cells
        out.append(sum(counts[lo:hi]) / (hi - lo))
    return out


def spread_bar(
    before: Mapping[str, int], after: Mapping[str, int] | None, style: TableStyle
) -> str:
    """A compact picture of a view's domains, most-populated first, before ``->`` after: one
    cell per domain, or per slice of domains when there are more than eight. Both bars keep
    the same order (the counts before the plan), so their cells line up domain by domain."""
    order = ranked_domains(before, after)
    old = _buckets([before.get(d, 0) for d in order], _BAR_CELLS)
    if after is None:
        return "[" + _spark(old, max(old, default=0), style) + "]"
    new = _buckets([after.get(d, 0) for d in order], _BAR_CELLS)
    top = max([*old, *new], default=0)
    return f"[{_spark(old, top, style)}]->[{_spark(new, top, style)}]"


def _view_rows(
    views: Sequence[ViewReport],
    afters: Sequence[ViewReport | None],
    style: TableStyle,
    skew_cell: Callable[[ViewReport, ViewReport | None], str],
    indent: str,
) -> list[str]:
    """Two lines per view: its identity in columns, then its spread bar and domain counts.

    Narrow, a view is named by its workload (its selector where its pods have none or several)
    and its key shortened; ``wide`` gives the full key, the workload and the selector."""
    if style.wide:
        rows = [["NAMESPACE", "TOPOLOGY KEY", "MAXSKEW", "SKEW", "WORKLOAD", "SELECTOR"]]
        rows += [
            [
                view.namespace,
                view.topology_key,
                str(view.max_skew),
                skew_cell(view, later),
                ",".join(short_workload(w) or "<none>" for w in view.workloads) or "<none>",
                view.selector or "<none>",
            ]
            for view, later in zip(views, afters, strict=True)
        ]
        firsts = _columns(rows, indent)
    else:
        rows = [["NAMESPACE", "KEY", "MAXSKEW", "SKEW", "WORKLOAD (or selector)"]]
        rows += [
            [
                view.namespace,
                short_key(view.topology_key),
                str(view.max_skew),
                skew_cell(view, later),
                view_subject(view),
            ]
            for view, later in zip(views, afters, strict=True)
        ]
        shrink = [Shrink(4, 24, "middle", _is_selector), Shrink(1, 8, "middle")]
        firsts = _fitted_columns(rows, style, shrink, indent)
    width = _width(style)
    sub = indent + "  "
    change = "before->after" if any(a is not None for a in afters) else "pods"
    lines = [firsts[0], f"{sub}SPREAD  DOMAINS ({change}, most populated first)"]
    for first, view, later in zip(firsts[1:], views, afters, strict=True):
        before = dict(view.domains)
        after = None if later is None else dict(later.domains)
        prefix = f"{sub}{spread_bar(before, after, style)}  {_view_extras(view)}"
        budget = None if width is None else width - cells(prefix)
        lines += [first, prefix + _fitted_domains(before, after, budget, style)]
    return lines


def _more_rows(total: int, shown: int, noun: str) -> list[str]:
    """``  (+N more views: --all lists every row)`` when rows were left out."""
    if total <= shown:
        return []
    return [f"  (+{total - shown} more {noun}: --all lists them all, -o wide in full)"]


def _shown(style: TableStyle) -> int | None:
    return None if style.wide else style.rows


def _plan_skew(view: ViewReport, later: ViewReport | None) -> str:
    return str(view.skew) if later is None else f"{view.skew}->{later.skew}"


def _violation_lines(plan: Plan, style: TableStyle) -> list[str]:
    pairs = worst_first(plan)[: _shown(style)]
    views = [v for v, _ in pairs]
    lines = _view_rows(views, [a for _, a in pairs], style, _plan_skew, "  ")
    return lines + _more_rows(len(plan.violations), len(pairs), "views")


def _eviction_lines(plan: Plan, style: TableStyle) -> list[str]:
    """One row per eviction, in wave order. Narrow: the pod, its workload, from which node to
    which target, and the key and skew it repairs (:func:`short_reason`); ``wide``: the
    priority and the whole reason too."""
    shown = plan.evictions[: _shown(style)]

    def row(e: Eviction, *last: str) -> list[str]:
        workload = short_workload(e.workload) or "<none>"
        return [str(e.wave), e.key, workload, e.node, target_cell(e), *last]

    head = ["WAVE", "POD", "WORKLOAD", "NODE", "TARGET"]
    if style.wide:
        wide = [row(e, str(e.priority), e.reason) for e in shown]
        return _columns([[*head, "PRIORITY", "REASON"], *wide])
    rows = [[*head, "REASON"], *(row(e, short_reason(e)) for e in shown)]
    # Nothing is cut: the reason, then the target, the node and the workload move to a line
    # under the row until the pod's name fits.
    lines = _folded_columns(rows, style, fold=(5, 4, 3, 2))
    waves = len(plan.waves)
    return lines + _more_rows(
        len(plan.evictions), len(shown), f"evictions, in {plural(waves, 'wave')}"
    )


def _skip_rows(skipped: Iterable[Skip]) -> list[list[str]]:
    rows = [["POD", "REASON"]]
    rows.extend([f"{s.namespace}/{s.name}", str(s.reason)] for s in skipped)
    return rows


def _skip_groups(skipped: Sequence[Skip], style: TableStyle) -> list[str]:
    """Skips grouped by reason code, the most common first: its count, code and detail (the
    first pod's, ``e.g.`` when they differ), then its first pods."""
    groups = skips_by_reason(skipped)
    digits = len(str(len(groups[0][1])))
    width = None if style.width is None else max(style.width, MIN_WIDTH)
    lines = []
    for code, skips in groups:
        detail = skips[0].reason.detail
        if any(s.reason.detail != detail for s in skips):
            detail = f"e.g. {detail}"
        pad = f"  {'':>{digits}}  "
        lines += _wrap(f"{code}: {detail}", width, f"  {len(skips):>{digits}}  ", pad + "  ")
        budget = None if width is None else width - len(pad)
        names = [f"{s.namespace}/{s.name}" for s in skips]
        lines.append(pad + name_list(names, style, budget, "pod"))
    return lines


def _unrepaired_lines(plan: Plan, style: TableStyle) -> list[str]:
    """The views left above maxSkew, worst first: the workload (or selector), the skew the
    plan leaves, the evictions it would take, and what holds its pods (a PDB by name)."""
    left = plan.unrepaired[: _shown(style)]
    if style.wide:
        rows = [
            ["NAMESPACE", "TOPOLOGY KEY", "SKEW", "NEEDS", "HELD BY (pods)", "WORKLOAD", "SELECTOR"]
        ]
        rows += [
            [
                u.view.namespace,
                u.view.topology_key,
                f"{u.skew_before}->{u.skew_after}",
                str(u.needed),
                held_cell(u.reasons),
                ",".join(short_workload(w) or "<none>" for w in u.view.workloads) or "<none>",
                u.view.selector or "<none>",
            ]
            for u in left
        ]
        return _columns(rows)
    rows = [["NAMESPACE", "KEY", "SKEW", "NEEDS", "HELD BY (pods)", "WORKLOAD (or selector)"]]
    rows += [
        [
            u.view.namespace,
            short_key(u.view.topology_key),
            f"{u.skew_before}->{u.skew_after}",
            str(u.needed),
            held_cell(u.reasons),
            view_subject(u.view),
        ]
        for u in left
    ]
    shrink = [Shrink(5, 24, "middle", _is_selector), Shrink(1, 8, "middle")]
    lines = _folded_columns(rows, style, fold=(4,), shrink=shrink)
    return lines + _more_rows(len(plan.unrepaired), len(left), "views")


def _plan_lines(
    plan: Plan, style: TableStyle, run: NextRun | None = None, extra: Sequence[str] = ()
) -> list[str]:
    """The sections in the order a reader needs them: the summary (and what the next run does),
    the views left above maxSkew, the violations, the plan, the skipped pods, the notes."""
    width = None if style.wide else style.width
    lines = plan_paragraph(plan, width)
    if run is not None and (plan.evictions or plan.violations):
        lines += next_run_lines(run, width)
        lines += capacity_lines(plan, run.shape.holds, width)
    elif run is not None and run.shape.window is not None:
        lines.append(f"Maintenance window: {run.shape.window[1]}.")
    lines += list(extra)
    if plan.unrepaired:
        lines += ["", f"Left above maxSkew ({len(plan.unrepaired)}, worst first)"]
        lines += _unrepaired_lines(plan, style)
    if plan.violations:
        lines += ["", f"Violations ({len(plan.violations)}, most above maxSkew first)"]
        lines += _violation_lines(plan, style)
    if plan.evictions:
        lines += ["", f"Plan ({plural(len(plan.evictions), 'eviction')}, by wave)"]
        lines += _eviction_lines(plan, style)
    if plan.skipped:
        if style.wide or len(plan.skipped) <= style.skips:
            lines += ["", f"Skipped ({len(plan.skipped)})"]
            lines += _folded_columns(_skip_rows(plan.skipped), style, fold=(1,), hang=32)
        else:
            lines += ["", f"Skipped ({len(plan.skipped)}), by reason (-o wide lists every pod)"]
            lines += _skip_groups(plan.skipped, style)
    if plan.notes:
        lines += ["", "Notes"]
        width = _width(style)
        for note in plan.notes:
            lines += _wrap(note, width, "  - ", "    ")
    return lines


def _views_table(views: Sequence[ViewReport], style: TableStyle) -> str:
    if not views:
        return "No spread views.\n"

    def state(view: ViewReport, _later: ViewReport | None) -> str:
        return f"{view.skew} {'VIOLATED' if view.violated else 'ok'}"

    return _text(_view_rows(views, [None] * len(views), style, state, ""), style)


def name_list(
    names: Sequence[str], style: TableStyle, budget: int | None = None, noun: str = "node"
) -> str:
    """``a, b, c (+N more)``: the first few names that fit in ``budget`` characters (at least
    one, else only the number of ``noun``), or all of them with ``wide``."""
    if not names:
        return "none"
    if style.wide:
        return ", ".join(names)
    for count in range(min(style.names, len(names)), 0, -1):
        text = ", ".join(names[:count]) + more(len(names), count)
        if budget is None or cells(text) <= budget:
            return text
    return plural(len(names), noun)


def rejections_by_reason(rejected: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(reason, nodes) pairs, the most common reason first, ties by reason; nodes by name."""
    groups: dict[str, list[str]] = {}
    for node, reason in rejected:
        groups.setdefault(reason, []).append(node)
    return sorted(
        ((reason, sorted(nodes)) for reason, nodes in groups.items()),
        key=lambda item: (-len(item[1]), item[0]),
    )


def status_line(status: PlanStatus) -> str:
    """``Plan: evicted in wave 1, replacement expected on node-c2 (eu-west-1c)``, or why not."""
    if status.state == "planned":
        target = (
            "its replacement waits for new capacity (nodeFit: false)"
            if status.target_node is None
            else f"replacement expected on {status.target_node}"
            + (f" ({status.target_domain})" if status.target_domain else "")
        )
        return f"Plan: evicted in wave {status.wave}; {target}"
    if status.state == "skipped":
        return f"Plan: skipped, {status.detail}"
    if status.state == "not-planned":
        return f"Plan: not evicted; {status.detail}"
    return f"Plan: nothing to do, {status.detail}"


def _count_note(c: ConstraintExplanation) -> str:
    if c.pod_domain is None:
        return "this pod not counted"
    return f"this pod counted in {c.pod_domain}"


def _explanation_lines(expl: Explanation, style: TableStyle) -> list[str]:
    where = f"on node {expl.node}" if expl.node else "pending (not bound to a node)"
    lines = _whole([f"Pod {expl.namespace}/{expl.name}, {where}"])  # names: never cut
    if expl.status is not None:
        lines.append(status_line(expl.status))
    lines += ["", f"Constraints ({len(expl.constraints)})"]
    if not expl.constraints:
        lines.append("  none: the PodTopologySpread filter accepts every node")
    width = None if style.wide or style.width is None else max(style.width, MIN_WIDTH)
    for index, c in enumerate(expl.constraints, start=1):
        origin = " (from the cluster defaults)" if c.default else ""
        prefix = "     matching pods per domain, as the plan counts them: "
        budget = None if width is None else width - len(prefix)
        counts = _fitted_domains(dict(c.match_counts), None, budget, style)
        lines += [
            f"  {index}. {c.topology_key}  {c.when_unsatisfiable}  maxSkew={c.max_skew}"
            f"  minDomains={c.min_domains}{origin}",
            f"     selector: {c.selector or '<none>'}",
            f"     nodeAffinityPolicy={c.node_affinity_policy}"
            f"  nodeTaintsPolicy={c.node_taints_policy}",
            prefix + counts,
            f"     {_count_note(c)}: globalMin={c.global_min}"
            f"  selfMatch={'yes' if c.self_match else 'no'}  skew={c.skew}",
        ]
        if c.pod_domain is not None and c.when_unsatisfiable == "DoNotSchedule":
            own = dict(c.match_counts)[c.pod_domain]
            lines.append(
                f"     its replacement sees {c.pod_domain}:{own - 1}, globalMin="
                f"{c.replacement_global_min}: a node is allowed where count + "
                f"{int(c.self_match)} - {c.replacement_global_min} <= {c.max_skew}"
            )
    spread = expl.spread_feasible_nodes
    feasible = expl.feasible_nodes
    lines.append("")
    for title, names in (
        (f"Spread-feasible nodes ({len(spread)}): ", spread),
        (f"Feasible nodes, every hard filter ({len(feasible)}): ", feasible),
    ):
        lines.append(title + name_list(names, style, None if width is None else width - len(title)))
    if expl.rejected:
        groups = rejections_by_reason(expl.rejected)
        lines += ["", f"Rejected nodes ({len(expl.rejected)}), by reason"]
        digits = len(str(len(groups[0][1])))
        for reason, nodes in groups:
            lines.append(f"  {len(nodes):>{digits}}  {reason}")
            pad = f"  {'':>{digits}}  "
            budget = None if width is None else width - len(pad)
            lines.append(pad + name_list(nodes, style, budget))
    if expl.node_pools:
        lines += _pool_lines(expl, style, width)
    return lines


def _pool_lines(expl: Explanation, style: TableStyle, width: int | None) -> list[str]:
    """Each NodePool's verdicts for the pod's replacement, pools grouped by verdict: the whole
    of what a no-fit reason counts (``-o wide`` names every pool and domain)."""
    everywhere = len(expl.node_pools[0].domains)
    pairs: list[tuple[str, str]] = []
    for pool in expl.node_pools:
        by_why: dict[str | None, list[str]] = {}
        for domain, why in pool.domains:
            by_why.setdefault(why, []).append(domain)
        for why, domains in by_why.items():
            where = (
                ""
                if domains == [ANY_NODE]
                else " everywhere"
                if len(domains) == everywhere > 1
                else f" in {name_list(domains, style, None, 'domain')}"
            )
            pairs.append((pool.name, ("can add a node" if why is None else why) + where))
    lines = ["", f"NodePools ({len(expl.node_pools)}), by {expl.pools_key}, for its replacement"]
    groups = rejections_by_reason(pairs)
    digits = len(str(len(groups[0][1])))
    for text, pools in groups:
        lines.append(f"  {len(pools):>{digits}}  {text}")
        pad = f"  {'':>{digits}}  "
        budget = None if width is None else width - len(pad)
        lines.append(pad + name_list(pools, style, budget, "NodePool"))
    return lines


# --------------------------------------------------------------------------------------------
# Runs


def result_rows(report: RunReport) -> list[Data]:
    """The results as the JSON/YAML contract: one object per planned eviction sent or dropped."""
    rows: list[Data] = []
    for wave in report.waves:
        for r in wave.results:
            rows.append(
                {
                    "wave": wave.number,
                    "namespace": r.eviction.namespace,
                    "name": r.eviction.name,
                    "uid": r.eviction.uid,
                    "node": r.eviction.node,
                    "outcome": str(r.outcome),
                    "status": r.status,
                    "attempts": r.attempts,
                    "detail": r.detail,
                    "replacement": r.replacement,
                    "api": r.api,
                    "reason": r.reason,
                }
            )
    return rows


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


def run_data(report: RunReport) -> Data:
    """A run as data: the first plan (as ``plan -o json`` shows it), the results, the summary."""
    return {
        "version": VERSION,
        "runId": report.run_id,
        "plan": plan_data(report.first_plan),
        "results": result_rows(report),
        "summary": {_camel(k): v for k, v in report.summary().items()},
        "exitCode": report.exit_code,
    }


def _run_table(report: RunReport, style: TableStyle) -> str:
    if report.end is RunEnd.LEASE_HELD and report.lease_holder is not None:
        h = report.lease_holder
        return (
            f"Run {report.run_id}: another rebalancer holds the Lease: {h.identity} (since "
            f"{h.acquired or '?'}, renewed {h.renewed or '?'}, expires in {h.expires_in:.0f}s); "
            "nothing evicted.\n"
        )
    if report.end is RunEnd.STOPPED and not report.first_plan.evictions:
        # A plan with evictions ends a run otherwise: this one was stopped before planning.
        return (
            f"Run {report.run_id}: stopped (SIGTERM or SIGINT) before it planned; nothing sent.\n"
        )
    lines = _plan_lines(report.first_plan, style)
    if report.end is RunEnd.DRY_RUN:
        return _text(lines, style)
    lines.append("")
    rows = [["WAVE", "POD", "OUTCOME", "STATUS", "DETAIL"]]
    for row in result_rows(report):
        rows.append(
            [
                str(row["wave"]),
                f"{row['namespace']}/{row['name']}",
                str(row["outcome"]),
                "" if row["status"] is None else str(row["status"]),
                str(row["detail"]),
            ]
        )
    if len(rows) > 1:
        lines.append("Executed:")
        lines += _folded_columns(rows, style, fold=(4,), hang=24)
        lines.append("")
    lines.append(run_summary(report))
    return _text(lines, style)


# --------------------------------------------------------------------------------------------
# Public API


def render_plan(
    plan: Plan,
    fmt: Format,
    style: TableStyle | None = None,
    steering: Steering | None = None,
    *,
    server: Data | None = None,
    run: NextRun | None = None,
) -> str:
    """``plan`` as a table for people, a self-contained HTML report, or the JSON/YAML contract;
    with ``steering``, the deletion costs a run would write too (a table section, or the
    ``deletionCosts`` key); with ``run``, what the next ``run`` does (in the summary, or the
    ``nextRun`` key); with ``server`` (the API server's version and gates, when read), a last
    field ``server``."""
    if fmt == "table":
        style = style or TableStyle()
        text = _text(_plan_lines(printable_fields(plan), style, run), style)
        if steering is not None:
            text += "\n" + _text(steering_lines(printable_fields(steering), style), style)
        return text
    if fmt == "html":
        from rebalancer.cli.htmlreport import plan_html  # noqa: PLC0415  # only for -o html

        return plan_html(plan)
    data = plan_data(plan)
    if run is not None:
        data["nextRun"] = next_run_data(run)
    if steering is not None:
        data["deletionCosts"] = steering_data(steering)
    if server is not None:
        data["server"] = server
    return _dump(data, fmt, floats=False)


def steering_data(steering: Steering) -> Data:
    """Steered scale-downs as data: each cost to write (null: remove ours), what is skipped."""
    return {
        "enabled": steering.enabled,
        "changes": [
            {
                "namespace": c.namespace,
                "name": c.name,
                "workload": c.workload,
                "position": c.position,
                "from": c.old,
                "to": c.cost,
            }
            for c in steering.changes
        ],
        "skipped": [
            {"workload": s.workload, "reason": str(s.reason), "pods": s.pods}
            | ({"pod": s.pod, "writers": list(s.writers)} if s.pod else {})
            for s in steering.skipped
        ],
        "workloads": steering.workloads,
        "deferred": steering.deferred,
    }


def steering_lines(steering: Steering, style: TableStyle | None = None) -> list[str]:
    """The table section: ``Deletion costs (N)`` and one row per pod (fitted to ``style``'s
    width without cutting a name)."""
    lines = [f"Deletion costs ({len(steering.changes)})"]
    rows = [["POD", "WORKLOAD", "POSITION", "FROM", "TO"]]
    rows.extend(
        [
            f"{c.namespace}/{c.name}",
            c.workload,
            "-" if c.position < 0 else str(c.position),
            "-" if c.old is None else c.old,
            "remove" if c.cost is None else str(c.cost),
        ]
        for c in steering.changes
    )
    fitted = _folded_columns(rows, style, fold=(4, 3, 2)) if style else _whole(_columns(rows))
    lines += fitted if steering.changes else ["  none"]
    for s in steering.skipped:
        lines.append(f"  skipped {s.workload} ({s.pods} pods): {s}")
    if steering.deferred:
        lines.append(f"  {steering.deferred} more left for later passes (bounded per pass)")
    return lines


def render_run(report: RunReport, fmt: Format, style: TableStyle | None = None) -> str:
    """A finished run for people (the plan, then a results table), as HTML, or as JSON/YAML."""
    if fmt == "table":
        return _run_table(printable_fields(report), style or TableStyle())
    if fmt == "html":
        from rebalancer.cli.htmlreport import run_html  # noqa: PLC0415  # only for -o html

        return run_html(report)
    return _dump(run_data(report), fmt)


def render_explanation(expl: Explanation, fmt: Format, style: TableStyle | None = None) -> str:
    """``expl`` as a table for people, or as the JSON/YAML contract."""
    if fmt == "table":
        style = style or TableStyle()
        return _text(_explanation_lines(printable_fields(expl), style), style)
    return _dump(explanation_data(expl), fmt, floats=False)


def render_views(views: Sequence[ViewReport], fmt: Format, style: TableStyle | None = None) -> str:
    """Spread views (e.g. a cluster's current state) as a table, or ``{"views": [...]}``."""
    if fmt == "table":
        return _views_table(printable_fields(tuple(views)), style or TableStyle())
    data = {"version": VERSION, "views": [view_data(v) for v in views]}
    return _dump(data, fmt, floats=False)
