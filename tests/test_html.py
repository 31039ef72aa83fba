"""``plan -o html`` and ``run -o html``: self-contained, escaped, and rendered by a real browser.

The browser tests run Debian's ``chromium`` headless: ``--dump-dom`` gives the DOM the browser
built (no script element may exist, the hostile names must be text), ``--screenshot`` a PNG that
must not be blank and must hold the chart colours. They are skipped, saying so, where chromium
is not installed (scripts/test.sh installs it).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rebalancer.cli.htmlreport import CHART_ENDS, chart_bars, plan_html, run_html
from rebalancer.cli.main import main
from rebalancer.cli.render import render_plan, render_run
from rebalancer.cluster.act.outcome import EvictionResult, Outcome, RunEnd
from rebalancer.cluster.act.runner import RunReport, Wave
from rebalancer.core.plan import (
    Eviction,
    Hold,
    Plan,
    Skip,
    SkipCode,
    SkipReason,
    Unrepaired,
    ViewReport,
)
from tests.pngpixels import read_png

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "data" / "cli_snapshot.yaml"
EVIL_NS = "<script>alert('ns')</script>"
EVIL_SELECTOR = "app=\"x\" & tier='<b>bold</b>'"
EVIL_DOMAIN = '<img src=x onerror="alert(1)">&amp;'
EVIL_REASON = '</td></tr></table><script>alert(2)</script> & "quoted"'
EVIL_POD = "web-<i>1</i>&\"'"
BEFORE_RGB = (0xE5, 0x53, 0x4B)
AFTER_RGB = (0x2F, 0x81, 0xF7)


def _view(counts: dict[str, int], namespace: str, selector: str, gmin: int) -> ViewReport:
    return ViewReport(
        namespace=namespace,
        topology_key="topology.kubernetes.io/zone",
        max_skew=1,
        when_unsatisfiable="DoNotSchedule",
        selector=selector,
        min_domains=1,
        domains=tuple(sorted(counts.items())),
        global_min=gmin,
        skew=max(counts.values()) - gmin,
    )


def _eviction(name: str, wave: int) -> Eviction:
    return Eviction(
        namespace=EVIL_NS,
        name=name,
        uid=f"uid-{name}",
        node="node-a",
        priority=0,
        reason=EVIL_REASON,
        wave=wave,
        workload="ReplicaSet/web",
        domain=EVIL_DOMAIN,
        topology_key="topology.kubernetes.io/zone",
        target_node="node-c",
        grace_period_seconds=None,
        target_domain="zone-c",
    )


def _plan() -> Plan:
    """A small hostile view (3 zones) and a large one (120 hosts), 3 evictions in 2 waves."""
    small_before = {EVIL_DOMAIN: 6, "zone-b": 2, "zone-c": 1}
    small_after = {EVIL_DOMAIN: 3, "zone-b": 3, "zone-c": 3}
    hosts_before = {f"host-{i:03d}": (9 if i < 5 else i % 3) for i in range(120)}
    hosts_after = {name: min(count, 1) for name, count in hosts_before.items()}
    return Plan(
        evictions=(_eviction(EVIL_POD, 1), _eviction("web-2", 1), _eviction("web-3", 2)),
        skipped=(
            Skip(EVIL_NS, "db-0", "u1", "node-a", SkipReason(SkipCode.PDB, "PDB <db> allows 0")),
            Skip(EVIL_NS, "db-1", "u2", "node-a", SkipReason(SkipCode.PDB, "PDB <db> allows 0")),
            Skip(
                "shop", "solo", "u3", "node-b", SkipReason(SkipCode.NO_CONTROLLER, "no controller")
            ),
        ),
        violations=(
            _view(small_before, EVIL_NS, EVIL_SELECTOR, 1),
            _view(hosts_before, "shop", "app=cache", 0),
        ),
        after=(
            _view(small_after, EVIL_NS, EVIL_SELECTOR, 3),
            _view(hosts_after, "shop", "app=cache", 0),
        ),
        lower_bound=3,
        notes=("note with <angle> & ampersand",),
    )


def _run() -> RunReport:
    plan = _plan()
    results = (
        EvictionResult(plan.evictions[0], Outcome.EVICTED, "evicted", 201, 1, "ns/web-new"),
        EvictionResult(plan.evictions[1], Outcome.BLOCKED_BY_PDB, "<pdb> said no", 429, 3),
    )
    return RunReport(
        run_id="r-<1>",
        first_plan=plan,
        waves=(Wave(1, plan, results),),
        final_plan=None,
        end=RunEnd.NOTHING_EVICTED,
        skews=(),
        duration_seconds=1.5,
    )


class _Dom(HTMLParser):
    """Elements by tag, their attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def count(self, tag: str, cls: str | None = None) -> int:
        return sum(
            1
            for t, attrs in self.tags
            if t == tag and (cls is None or cls in (attrs.get("class") or "").split())
        )


def _dom(html: str) -> _Dom:
    parser = _Dom()
    parser.feed(html)
    parser.close()
    return parser


def _check_page(dom: _Dom) -> None:
    """What both the raw page and the browser's DOM must show."""
    assert dom.count("script") == 0
    assert dom.count("img") == 0
    text = "".join(dom.text)
    for hostile in (EVIL_NS, EVIL_SELECTOR, EVIL_REASON, EVIL_POD):
        assert hostile in text, hostile
    assert dom.count("article", "view") == 2
    assert dom.count("svg") == 2
    assert dom.count("table", "wave") == 2  # two waves
    assert dom.count("details", "skip-group") == 2  # pdb and no-controller


def test_page_is_self_contained_and_escaped() -> None:
    """No script, no fetch: only inline styles and SVG; every hostile string comes out as text."""
    page = plan_html(_plan())
    lowered = page.lower()
    assert "<script" not in lowered
    assert "<img" not in lowered
    for fetch in ("<link", "<iframe", "<object", "@import", "url("):
        assert fetch not in lowered, fetch
    assert lowered.replace("http://www.w3.org/2000/svg", "").count("http:") == 0
    assert "https:" not in lowered
    assert "default-src 'none'" in page  # the CSP forbids scripts even if something slipped in
    dom = _dom(page)
    fetching = {"src", "href", "xlink:href", "srcset", "action", "data"}
    assert not [(tag, a) for tag, attrs in dom.tags for a in attrs if a in fetching]
    assert not [(tag, a) for tag, attrs in dom.tags for a in attrs if a.startswith("on")]
    _check_page(dom)


def test_page_shows_summary_waves_and_skip_groups() -> None:
    """Summary cards carry the plan's numbers; skips are grouped by reason with counts."""
    dom = _dom(plan_html(_plan()))
    text = "".join(dom.text)
    assert text.index("3 evictions, proven minimal, in 2 waves (a run re-plans") < text.index(
        "lower bound"
    )
    assert "node-c (zone-c)" in text  # the expected target with its domain
    assert "Wave 1 (2)" in text and "Wave 2 (1)" in text
    assert "pdb: 2 pods" in text and "no-controller: 1 pod" in text
    # The worst view first: the hosts' skew 9 (8 over maxSkew) before the zones' 5.
    assert text.index("shop \u00b7 topology") < text.index(f"{EVIL_NS} \u00b7 topology")


def test_page_lists_views_left_above_max_skew() -> None:
    """An unrepaired view gets a row: its skews, the repair's size and each reason with its
    pods and detail (escaped); the summary counts it."""
    plan = _plan()
    view = plan.after[0]
    left = Unrepaired(
        view, 5, 2, (Hold(SkipCode.PDB, 3, "PDB <db> allows 0"), Hold(SkipCode.NO_FIT, 1, "x"))
    )
    page = plan_html(dataclasses.replace(plan, unrepaired=(left,)))
    dom = _dom(page)
    text = "".join(dom.text)
    assert dom.count("table", "unrepaired") == 1
    assert "Left above maxSkew (1)" in text
    assert "pdb: 3 pods \u2014 PDB <db> allows 0" in text
    assert "no-fit: 1 pod \u2014 x" in text
    assert (
        "1 left above maxSkew, their over-full domains held by pdb (3 pods), no-fit (1 pod)" in text
    )
    assert "<db>" not in page
    assert dom.count("table", "unrepaired") == 1
    assert "unrepaired" not in plan_html(plan)


def test_many_domains_chart_ends_and_an_aggregate() -> None:
    """120 hosts: the CHART_ENDS most- and least-populated, and one bar for the mean of the rest."""
    before = {f"h{i:03d}": (i * 7) % 11 for i in range(120)}
    after = dict.fromkeys(before, 5)
    bars = chart_bars(before, after)
    ranked = sorted(before, key=lambda d: (-before[d], d))
    assert [b.label for b in bars[:CHART_ENDS]] == ranked[:CHART_ENDS]
    assert [b.label for b in bars[-CHART_ENDS:]] == ranked[-CHART_ENDS:]
    middle = ranked[CHART_ENDS:-CHART_ENDS]
    aggregate = bars[CHART_ENDS]
    assert aggregate.label == f"{len(middle)} others (mean)"
    assert aggregate.before == pytest.approx(sum(before[d] for d in middle) / len(middle))
    assert aggregate.after == 5
    few = chart_bars({"a": 1, "b": 3}, {"a": 2, "b": 2})
    assert [(b.label, b.before, b.after) for b in few] == [("b", 3, 2), ("a", 1, 2)]


def test_run_page_shows_each_outcome() -> None:
    """run -o html: one row per eviction sent, with its outcome, and the run's summary."""
    page = render_run(_run(), "html")
    dom = _dom(page)
    text = "".join(dom.text)
    assert "blocked-by-pdb" in text and "evicted" in text and "<pdb> said no" in text
    assert "Run r-<1>: 1 evicted, 1 blocked by PDB" in text
    assert dom.count("td", "bad") == 1 and dom.count("td", "ok") == 1
    _check_page(dom)


def test_plan_command_writes_html(capsys: pytest.CaptureFixture[str]) -> None:
    """plan --snapshot -o html prints one page whose numbers match -o json."""
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-o", "html"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>")
    dom = _dom(page)
    assert dom.count("article", "view") == data["summary"]["violations"]
    assert render_plan(_plan(), "html") == plan_html(_plan())


# --------------------------------------------------------------------------------------------
# In a real browser


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium is not installed (apt-get install chromium; scripts/test.sh does)")


def _browse(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={tmp / 'profile'}",
            "--window-size=1000,1000",
            *extra,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


@pytest.mark.parametrize("kind", ["plan", "run"])
def test_browser_dom_and_screenshot(kind: str, tmp_path: Path) -> None:
    """Chromium builds the expected DOM (no script element, hostile names as text) and draws
    a page that is not blank: the before and after bar colours are on the screenshot."""
    page = tmp_path / "report.html"
    page.write_text(plan_html(_plan()) if kind == "plan" else run_html(_run()), encoding="utf-8")
    dom = _dom(_browse(page, tmp_path, "--dump-dom").stdout)
    _check_page(dom)
    shot = tmp_path / "shot.png"
    _browse(page, tmp_path, f"--screenshot={shot}")
    image = read_png(shot.read_bytes())
    assert (image.width, image.height) == (1000, 1000)
    assert image.not_white() > 0.03 * image.width * image.height
    if kind == "plan":  # the run page starts with the results table; the charts come below
        assert image.count(BEFORE_RGB, tolerance=2) > 500
        assert image.count(AFTER_RGB, tolerance=2) > 500
