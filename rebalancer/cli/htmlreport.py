"""``plan -o html`` and ``run -o html``: one self-contained page, readable without JavaScript.

The page needs nothing from the network: the styles are inline, the charts are inline SVG, and
a Content-Security-Policy forbids scripts and every fetch. Every string that comes from the
cluster (names, labels, selectors, reasons) is escaped, in text and in attributes alike.

Per violated view, a bar chart shows the domain counts before and after the plan, with the
band that ``maxSkew`` allows after it (``globalMin`` .. ``globalMin + maxSkew``). A view with
many domains shows its most- and least-populated few and one bar for the mean of the rest.
The views come worst first (the most over their ``maxSkew``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Final

from rebalancer.cli.wording import (
    plan_paragraph,
    ranked_domains,
    run_summary,
    skips_by_reason,
    target_cell,
    worst_first,
)
from rebalancer.core.api import Eviction, Plan, Skip, Unrepaired, ViewReport

if TYPE_CHECKING:
    from rebalancer.cluster.act.runner import RunReport

CHART_ENDS: Final = 8
"""A view with more than ``2 * CHART_ENDS + 1`` domains shows this many at each end."""
SKIPPED_NAMES: Final = 50
"""Pods listed per skip reason; the rest are counted."""

_CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE: Final = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
margin:0;background:#fff}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid
#d0d7de;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.sub{color:#59636e;margin:0 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid #d0d7de;border-radius:8px;padding:10px 16px;min-width:120px}
.card b{display:block;font-size:24px}.card b.word{font-size:17px;line-height:35px}
.card span{color:#59636e;font-size:12px}
.ok{color:#1a7f37}.warn{color:#9a6700}.bad{color:#cf222e}
.views{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:12px}
.view{border:1px solid #d0d7de;border-radius:8px;padding:10px 14px;min-width:0}
.view.many{grid-column:1/-1}
.view h3{margin:0 0 4px;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:14px;
word-break:break-all}
.meta{color:#59636e;font-size:13px;margin:0 0 8px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
table{border-collapse:collapse;width:100%;margin:6px 0 12px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eaeef2;vertical-align:top}
th{background:#f6f8fa;font-weight:600;font-size:13px}
td{font-size:13px;word-break:break-word}
.legend{font-size:12px;color:#59636e}
.sw{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;vertical-align:-1px}
details{margin:6px 0}summary{cursor:pointer}
svg{max-width:100%;height:auto}
"""
_BEFORE: Final = "#e5534b"
_AFTER: Final = "#2f81f7"
_BAND: Final = "#2da44e"


def _e(text: object) -> str:
    """``text`` escaped for HTML text and quoted attributes (``& < > " '``)."""
    return escape(str(text), quote=True)


# --------------------------------------------------------------------------------------------
# Charts


@dataclass(frozen=True, slots=True)
class Bar:
    """One group of the chart: a domain (or the mean of the domains left out) before and after."""

    label: str
    before: float
    after: float
    title: str  # the tooltip: exact values, and for an aggregate its range


def chart_bars(before: Mapping[str, int], after: Mapping[str, int]) -> list[Bar]:
    """Every domain, most-populated first; or the :data:`CHART_ENDS` most- and least-populated
    domains with one bar between them for the mean of the others."""
    ranked = ranked_domains(before, after)
    ends = CHART_ENDS

    def bar(domain: str) -> Bar:
        old, new = before.get(domain, 0), after.get(domain, 0)
        return Bar(domain, old, new, f"{domain}: {old} -> {new}")

    if len(ranked) <= 2 * ends + 1:
        return [bar(d) for d in ranked]
    middle = ranked[ends:-ends]
    olds = [before.get(d, 0) for d in middle]
    news = [after.get(d, 0) for d in middle]
    aggregate = Bar(
        f"{len(middle)} others (mean)",
        sum(olds) / len(middle),
        sum(news) / len(middle),
        f"{len(middle)} other domains: before {min(olds)}..{max(olds)}, "
        f"after {min(news)}..{max(news)}",
    )
    return [*(bar(d) for d in ranked[:ends]), aggregate, *(bar(d) for d in ranked[-ends:])]


def _label(text: str, limit: int = 18) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def view_chart(view: ViewReport, later: ViewReport | None) -> str:
    """An inline SVG bar chart of one view: before and after per domain, and the band."""
    before = dict(view.domains)
    after = dict(later.domains) if later is not None else before
    bars = chart_bars(before, after)
    top = max([1.0, *(b.before for b in bars), *(b.after for b in bars)])
    gmin = later.global_min if later is not None else view.global_min
    band_top = min(gmin + view.max_skew, top)
    top = max(top, gmin + view.max_skew)
    left, plot_h, pad_top, label_h = 72, 130, 10, 84
    slot = 40
    width = left + slot * len(bars) + 16
    height = pad_top + plot_h + label_h

    def y(value: float) -> float:
        return pad_top + plot_h - value / top * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(f"domain counts of {view.topology_key}, before and after")}">',
        f'<rect x="{left}" y="{y(band_top):.1f}" width="{width - left - 8}" '
        f'height="{max(0.0, y(gmin) - y(band_top)):.1f}" fill="{_BAND}" fill-opacity="0.14" '
        f'stroke="{_BAND}" stroke-dasharray="4 3" stroke-opacity="0.7">'
        f"<title>{_e(f'allowed after the plan: {gmin}..{gmin + view.max_skew} pods')}</title>"
        "</rect>",
    ]
    ticks: list[int] = []
    for tick in sorted({0, gmin, gmin + view.max_skew, round(top)}):
        if all(abs(y(tick) - y(t)) >= 12 for t in ticks):  # no two labels on top of each other
            ticks.append(tick)
    for mark in ticks:
        parts.append(
            f'<line x1="{left - 4}" x2="{width - 8}" y1="{y(mark):.1f}" y2="{y(mark):.1f}" '
            'stroke="#d0d7de" stroke-width="0.6"/>'
            f'<text x="{left - 8}" y="{y(mark) + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#59636e">{mark}</text>'
        )
    parts.append(
        f'<text x="12" y="{pad_top + plot_h / 2:.1f}" font-size="11" fill="#59636e" '
        f'text-anchor="middle" transform="rotate(-90 12 {pad_top + plot_h / 2:.1f})">pods</text>'
    )
    for i, b in enumerate(bars):
        x = left + i * slot + 6
        for dx, value, color in ((0, b.before, _BEFORE), (14, b.after, _AFTER)):
            h = value / top * plot_h
            parts.append(
                f'<rect x="{x + dx}" y="{y(value):.1f}" width="13" height="{h:.1f}" '
                f'fill="{color}"><title>{_e(b.title)}</title></rect>'
            )
        lx, ly = x + 16, pad_top + plot_h + 12
        style = ' font-style="italic"' if b.label.endswith("(mean)") else ""
        parts.append(
            f'<text x="{lx}" y="{ly}" font-size="11" fill="#1f2328"{style} text-anchor="end" '
            f'transform="rotate(-40 {lx} {ly})">{_e(_label(b.label))}<title>{_e(b.title)}'
            "</title></text>"
        )
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Sections


def _cards(items: Iterable[tuple[str, str, str]]) -> str:
    cells = "".join(
        f'<div class="card"><b class="{cls}{"" if value.isdigit() else " word"}">{_e(value)}</b>'
        f"<span>{_e(name)}</span></div>"
        for value, name, cls in items
    )
    return f'<div class="cards">{cells}</div>'


def _summary(plan: Plan) -> str:
    minimal = "yes" if plan.minimal else "no"
    left = len(plan.unrepaired)
    paragraph = " ".join(plan_paragraph(plan, width=1_000_000))
    return (
        '<section id="summary"><h2>Summary</h2>'
        + f'<p class="summary-line">{_e(paragraph)}</p>'
        + _cards(
            [
                (str(len(plan.evictions)), "evictions", ""),
                (str(plan.lower_bound), "lower bound", ""),
                (minimal, "proven minimal", "ok" if plan.minimal else "warn"),
                (str(len(plan.waves)), "waves", ""),
                (str(len(plan.violations)), "violated views", "bad" if plan.violations else "ok"),
                (str(plan.repaired), "repaired", "ok" if plan.repaired else ""),
                (str(left), "left above maxSkew", "bad" if left else "ok"),
                (str(len(plan.skipped)), "skipped pods", "warn" if plan.skipped else ""),
            ]
        )
        + "</section>"
    )


def _unrepaired(left: Sequence[Unrepaired]) -> str:
    if not left:
        return ""
    rows = "".join(
        f'<tr><td class="mono">{_e(u.view.namespace)} · {_e(u.view.topology_key)}<br>'
        f"{_e(u.view.selector or '<none>')}</td>"
        f"<td>{u.skew_before} → {u.skew_after} (maxSkew {u.view.max_skew})</td>"
        f"<td>{u.needed}</td><td><ul>"
        + "".join(
            f"<li><b>{_e(r.code)}</b>: {r.pods} pod{'s' if r.pods != 1 else ''} "
            f"— {_e(r.detail)}</li>"
            for r in u.reasons
        )
        + "</ul></td></tr>"
        for u in left
    )
    return (
        f'<section id="unrepaired"><h2>Left above maxSkew ({len(left)})</h2>'
        '<p class="legend">Views the plan cannot bring within maxSkew, and the pods that hold '
        "them (each under the first reason that holds it). A repair would need at least the "
        "evictions shown, if nothing held them.</p>"
        '<table class="unrepaired"><thead><tr><th>View</th><th>Skew</th><th>Repair needs</th>'
        f"<th>Held by</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _violations(plan: Plan) -> str:
    out = [f'<section id="violations"><h2>Violated views ({len(plan.violations)})</h2>']
    if not plan.violations:
        out.append("<p>None: every view is within its maxSkew.</p>")
    else:
        out.append(
            f'<p class="legend"><span class="sw" style="background:{_BEFORE}"></span>before'
            f'<span class="sw" style="background:{_AFTER}"></span>after the plan'
            f'<span class="sw" style="background:{_BAND};opacity:.35"></span>'
            "allowed after the plan (globalMin .. globalMin + maxSkew)</p>"
        )
    out.append('<div class="views">')
    # The worst first: by how far the skew is over maxSkew, then as the plan lists them.
    for view, later in worst_first(plan):
        skew = str(view.skew) if later is None else f"{view.skew} \u2192 {later.skew}"
        extras = "" if view.min_domains <= 1 else f" \u00b7 minDomains {view.min_domains}"
        many = " many" if len(view.domains) > 6 else ""
        out.append(
            f'<article class="view{many}">'
            f"<h3>{_e(view.namespace)} \u00b7 {_e(view.topology_key)}</h3>"
            f'<p class="meta">selector <code>{_e(view.selector or "<none>")}</code> \u00b7 '
            f"{_e(view.when_unsatisfiable)} \u00b7 maxSkew {view.max_skew}{extras} \u00b7 "
            f"skew <b>{skew}</b> \u00b7 {len(view.domains)} domains</p>"
            f"{view_chart(view, later)}</article>"
        )
    out.append("</div></section>")
    return "".join(out)


def _evictions(evictions: Sequence[Eviction]) -> str:
    out = [f'<section id="evictions"><h2>Evictions ({len(evictions)})</h2>']
    if not evictions:
        out.append("<p>None.</p>")
    waves = sorted({e.wave for e in evictions})
    for wave in waves:
        rows = [e for e in evictions if e.wave == wave]
        out.append(
            f'<h3>Wave {wave} ({len(rows)})</h3><table class="wave"><thead><tr><th>Pod</th>'
            "<th>Node</th><th>Priority</th><th>Reason</th><th>Expected target</th></tr></thead>"
            "<tbody>"
        )
        out += [
            f'<tr><td class="mono">{_e(e.key)}</td><td class="mono">{_e(e.node)}</td>'
            f"<td>{e.priority}</td><td>{_e(e.reason)}</td>"
            f'<td class="mono">{_e(target_cell(e))}</td></tr>'
            for e in rows
        ]
        out.append("</tbody></table>")
    out.append("</section>")
    return "".join(out)


def _skipped(skipped: Sequence[Skip]) -> str:
    out = [f'<section id="skipped"><h2>Skipped pods ({len(skipped)})</h2>']
    if not skipped:
        out.append("<p>None.</p>")
    for code, skips in skips_by_reason(skipped):
        rows = "".join(
            f'<tr><td class="mono">{_e(f"{s.namespace}/{s.name}")}</td>'
            f"<td>{_e(s.reason.detail)}</td></tr>"
            for s in skips[:SKIPPED_NAMES]
        )
        rest = len(skips) - SKIPPED_NAMES
        more = f'<p class="legend">+{rest} more (all in -o json)</p>' if rest > 0 else ""
        out.append(
            f'<details class="skip-group" open><summary><b>{_e(code)}</b>: {len(skips)} '
            f"pod{'s' if len(skips) != 1 else ''}</summary><table><thead><tr><th>Pod</th>"
            f"<th>Detail</th></tr></thead><tbody>{rows}</tbody></table>{more}</details>"
        )
    out.append("</section>")
    return "".join(out)


def _notes(plan: Plan) -> str:
    if not plan.notes:
        return ""
    items = "".join(f"<li>{_e(n)}</li>" for n in plan.notes)
    return f'<section id="notes"><h2>Notes</h2><ul>{items}</ul></section>'


def _page(title: str, subtitle: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f'<body><main><h1>{_e(title)}</h1><p class="sub">{_e(subtitle)}</p>{body}'
        "</main></body></html>\n"
    )


def _plan_body(plan: Plan) -> str:
    return (
        _summary(plan)
        + _violations(plan)
        + _evictions(plan.evictions)
        + _unrepaired(plan.unrepaired)
        + _skipped(plan.skipped)
        + _notes(plan)
    )


# --------------------------------------------------------------------------------------------
# Public API


def plan_html(plan: Plan) -> str:
    """A plan as one self-contained HTML page (see the module docstring)."""
    return _page("rebalancer plan", "Dry run: nothing was evicted.", _plan_body(plan))


_OUTCOME_CLASS: Final = {
    "evicted": "ok",
    "would-evict": "ok",
    "blocked-by-pdb": "bad",
    "failed": "bad",
}


def run_html(report: RunReport) -> str:
    """A finished run: its first plan, then what happened to each eviction, wave by wave."""
    s = report.summary()
    results = report.results
    cards = _cards(
        [
            (str(s["evicted"]), "evicted", "ok" if s["evicted"] else ""),
            (str(s["blocked_by_pdb"]), "blocked by PDB", "bad" if s["blocked_by_pdb"] else ""),
            (str(s["failed"]), "failed", "bad" if s["failed"] else ""),
            (str(s["skipped"]), "not sent", ""),
            (str(s["waves"]), "waves", ""),
            (str(s["end"]), "end", ""),
        ]
    )
    rows = "".join(
        f"<tr><td>{wave.number}</td>"
        f'<td class="mono">{_e(r.eviction.key)}</td>'
        f'<td class="{_OUTCOME_CLASS.get(str(r.outcome), "")}"><b>{_e(r.outcome)}</b></td>'
        f"<td>{'' if r.status is None else r.status}</td><td>{r.attempts}</td>"
        f"<td>{_e(r.detail)}</td>"
        f'<td class="mono">{_e(r.replacement or "-")}</td></tr>'
        for wave in report.waves
        for r in wave.results
    )
    table = (
        "<table><thead><tr><th>Wave</th><th>Pod</th><th>Outcome</th><th>Status</th>"
        "<th>Attempts</th><th>Detail</th><th>Replacement</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        if results
        else "<p>No eviction was sent.</p>"
    )
    executed = (
        f'<section id="results"><h2>What happened ({len(results)})</h2>{cards}{table}'
        f'<p class="summary-line">{_e(run_summary(report))}</p></section>'
    )
    mode = "server dry run" if report.server_dry_run else report.end
    return _page(
        f"rebalancer run {report.run_id}",
        f"Run {report.run_id} ({mode}); the plan below is the first one of the run.",
        executed + _plan_body(report.first_plan),
    )
