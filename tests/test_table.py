"""The table at any size: bounded line widths, correct "(+N more)", and --wide complete.

The views here are generated with thousands of domains (a hostname view on a 5,000-node
cluster). The oracles are written independently of the renderer: the most- and least-populated
domains are found by sorting the counts here, and every count is checked against the input.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re

import pytest

from rebalancer.cli.render import (
    TableStyle,
    render_explanation,
    render_plan,
    render_run,
    render_views,
    spread_bar,
)
from rebalancer.cluster.act.outcome import EvictionResult, Outcome, RunEnd
from rebalancer.cluster.act.runner import RunReport, Wave
from rebalancer.core.explain import ConstraintExplanation, Explanation
from rebalancer.core.model import LabelSelector, PodDisruptionBudget, Snapshot
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
from rebalancer.core.planner import plan as make_plan
from rebalancer.core.policy import Policy
from tests.builders import zones_cluster

HOST = "kubernetes.io/hostname"
LONG_NS = "n" * 63
LONG_SELECTOR = "app.kubernetes.io/name=checkout-frontend,pod-template-hash in (x6f9hjvm8)"
TOKEN = re.compile(r"(\S+):(\d+)->(\d+)")
MORE = re.compile(r"\(\+(\d+) more\)")
NOW = 1_000_000.0


def _counts(nodes: int, seed: int) -> tuple[dict[str, int], dict[str, int]]:
    """Before and after counts of a hostname view over ``nodes`` nodes (many empty)."""
    rng = random.Random(seed)
    before = {f"node-{i:05d}": rng.choice([0, 0, 0, 1, 2, 9]) for i in range(nodes)}
    after = {name: min(count, 2) for name, count in before.items()}
    return before, after


def _view(counts: dict[str, int], namespace: str = "shop", selector: str = "app=web") -> ViewReport:
    values = list(counts.values())
    return ViewReport(
        namespace=namespace,
        topology_key=HOST,
        max_skew=1,
        when_unsatisfiable="DoNotSchedule",
        selector=selector,
        min_domains=1,
        domains=tuple(sorted(counts.items())),
        global_min=min(values),
        skew=max(values) - min(values),
    )


def _plan(nodes: int, seed: int = 1) -> tuple[Plan, dict[str, int], dict[str, int]]:
    before, after = _counts(nodes, seed)
    eviction = Eviction(
        namespace=LONG_NS,
        name="web-" + "x" * 60,
        uid="u1",
        node="node-00001",
        priority=0,
        reason="kubernetes.io/hostname=node-00001 holds 9 pods matching app=web; " * 4 + "end",
        wave=1,
        workload="ReplicaSet/web",
        domain="node-00001",
        topology_key=HOST,
        target_node=None,
        grace_period_seconds=None,
    )
    skip = Skip(
        LONG_NS, "db-0", "u2", "node-00002", SkipReason(SkipCode.PDB, "PDB db allows 0 " * 9)
    )
    plan = Plan(
        evictions=(eviction,),
        skipped=(skip,),
        violations=(_view(before, LONG_NS, LONG_SELECTOR), _view(before)),
        after=(_view(after, LONG_NS, LONG_SELECTOR), _view(after)),
        lower_bound=1,
        notes=("a note that is rather long; " * 8 + "end",),
    )
    return plan, before, after


def _domain_lines(table: str) -> list[str]:
    return [line for line in table.splitlines() if line.startswith("    [")]


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_plan_lines_fit_the_terminal(width: int) -> None:
    """With a terminal's width, no line of a 5,000-domain plan is longer than it but those
    that hold its 63-character namespace: a name is never cut, it overflows. The long reason,
    skip detail and note are wrapped, not cut."""
    plan, _, _ = _plan(5000)
    table = render_plan(plan, "table", TableStyle(width=width))
    over = [line for line in table.splitlines() if len(line) > width]
    # the 63-character namespace is not cut: the rows holding it overflow, and so do the
    # heading and the rows of its column, padded to it
    assert all(LONG_NS in line or " " * 40 in line for line in over), over
    if width >= 200:
        assert not over
    assert plan.evictions[0].key in table.split()
    assert f"{LONG_NS}/db-0" in table.split()
    words = " ".join(table.split())
    assert plan.notes[0] in words  # wrapped at its spaces, every word kept
    assert plan.evictions[0].reason in words
    assert len(_domain_lines(table)) == 2


def test_without_a_terminal_lines_stay_short_at_any_size() -> None:
    """Off a terminal a view still shows a few domains: its line does not grow with the cluster."""
    small = render_plan(_plan(100)[0], "table", TableStyle())
    large = render_plan(_plan(5000)[0], "table", TableStyle())
    small_len = max(len(line) for line in _domain_lines(small))
    large_len = max(len(line) for line in _domain_lines(large))
    assert large_len <= small_len + 10  # only the digits of "+N more" grow
    assert large_len < 200


@pytest.mark.parametrize("width", [None, 60, 100, 160])
@pytest.mark.parametrize("nodes", [7, 50, 5000])
def test_more_counts_the_domains_left_out(width: int | None, nodes: int) -> None:
    """The shown domains are the most- and least-populated ones, and "+N more" is the rest."""
    plan, before, after = _plan(nodes, seed=nodes)
    table = render_plan(plan, "table", TableStyle(width=width))
    ranked = sorted(before, key=lambda d: (-before[d], d))  # the oracle's order
    for line in _domain_lines(table):
        tokens = TOKEN.findall(line)
        shown = [name for name, _, _ in tokens]
        for name, old, new in tokens:
            assert (int(old), int(new)) == (before[name], after[name])
        found = MORE.search(line)
        if not tokens:  # not even one domain of each end fits: only their number
            assert line.endswith(f"  {nodes} domains")
            continue
        if found is None:
            assert sorted(shown) == sorted(before)  # everything is listed
            continue
        assert int(found.group(1)) + len(shown) == nodes
        assert len(shown) % 2 == 0 and shown
        half = len(shown) // 2
        assert shown[:half] == ranked[:half]
        assert shown[half:] == ranked[-half:]


def test_small_views_list_every_domain_in_the_bars_order() -> None:
    """Three zones all fit: every domain, most populated first (as the bar), no "+N more"."""
    before = {"eu-west-1a": 1, "eu-west-1b": 6, "eu-west-1c": 2}
    after = {"eu-west-1a": 3, "eu-west-1b": 3, "eu-west-1c": 3}
    plan = Plan((), (), (_view(before),), (_view(after),), lower_bound=3)
    table = render_plan(plan, "table", TableStyle(width=80))
    assert "eu-west-1b:6->3 eu-west-1c:2->3 eu-west-1a:1->3" in table
    assert "more" not in table


@pytest.mark.parametrize("nodes", [3, 8, 40])
def test_after_bar_lines_up_with_before(nodes: int) -> None:
    """The after bar keeps the before bar's domain order: with before counts falling and after
    counts rising along that order, the after cells rise too (a bar sorted on its own would
    fall)."""
    before = {f"n{i:02d}": 2 * (nodes - i) for i in range(nodes)}
    after = {f"n{i:02d}": 1 + i for i in range(nodes)}
    bar = spread_bar(before, after, TableStyle(unicode=False))
    old, new = bar[1:].split("]->[")
    new = new.rstrip("]")
    levels = ".:-=+*#@"
    assert [levels.index(c) for c in old] == sorted((levels.index(c) for c in old), reverse=True)
    assert [levels.index(c) for c in new] == sorted(levels.index(c) for c in new)
    assert levels.index(new[0]) < levels.index(new[-1])


def test_violations_come_most_above_max_skew_first() -> None:
    """Views are listed by skew - maxSkew, largest first, whatever their namespaces."""
    views = [
        _view({"a": 2, "b": 0}, namespace="alpha"),
        _view({"a": 9, "b": 0}, namespace="beta"),
        _view({"a": 5, "b": 0}, namespace="gamma"),
    ]
    plan = Plan((), (), tuple(views), tuple(views), lower_bound=0)
    lines = render_plan(plan, "table", TableStyle(width=100)).splitlines()
    order = [line.split()[0] for line in lines if line.startswith("  ") and "hostname" in line]
    assert order == ["beta", "gamma", "alpha"]


def _skips(per_code: dict[str, int], why: str = "why") -> tuple[Skip, ...]:
    return tuple(
        Skip(
            "shop",
            f"{code}-{why}-{k:03d}",
            f"u-{why}-{k}",
            "n1",
            SkipReason(SkipCode(code), f"{why} {code}"),
        )
        for code, count in per_code.items()
        for k in range(count)
    )


@pytest.mark.parametrize("width", [None, 100, 120])
def test_many_skips_are_grouped_by_reason(width: int | None) -> None:
    """40 skips: one group per code, the most common first, with its count, its detail and its
    first pods; --wide lists every pod instead."""
    skipped = _skips({"has-pvc": 7, "pdb": 30, "too-young": 3})
    plan = Plan((), skipped, (), (), lower_bound=0)
    lines = render_plan(plan, "table", TableStyle(width=width)).splitlines()
    at = lines.index("Skipped (40), by reason (-o wide lists every pod)")
    heads = lines[at + 1 :: 2][:3]
    assert [h.split()[:2] for h in heads] == [
        ["30", "pdb:"],
        ["7", "has-pvc:"],
        ["3", "too-young:"],
    ]
    assert heads[0].endswith("pdb: why pdb")  # the same detail for every pod: no "e.g."
    assert lines[at + 2].split(", ")[0].strip() == "shop/pdb-why-000"
    assert lines[at + 2].endswith("(+27 more)")
    varied = dataclasses.replace(plan, skipped=(*skipped, *_skips({"pdb": 1}, "other")))
    lines = render_plan(varied, "table", TableStyle(width=width)).splitlines()
    assert "  31  pdb: e.g. why pdb" in lines
    wide = render_plan(plan, "table", TableStyle(width=width, wide=True))
    assert "Skipped (40)" in wide.splitlines()
    assert all(f"shop/{s.name}" in wide for s in skipped)


def test_few_skips_are_listed_one_per_line() -> None:
    """Up to a dozen skips are listed pod by pod."""
    plan = Plan((), _skips({"pdb": 12}), (), (), lower_bound=0)
    lines = render_plan(plan, "table", TableStyle(width=100)).splitlines()
    at = lines.index("Skipped (12)")
    assert len([line for line in lines[at + 2 :] if line.startswith("  shop/pdb-why-")]) == 12


@pytest.mark.parametrize("width", [60, 100, 120])
def test_a_long_reason_folds_under_its_row(width: int) -> None:
    """A plan row too wide with its reason keeps its pod, workload, node and target on its
    line, in their columns, and gives the reason lines of its own under it (headed REASON on
    a second heading line), wrapped at spaces: nothing is cut."""
    plan, _, _ = _plan(50)
    target = dataclasses.replace(
        plan.evictions[0],
        namespace="shop",
        name="web-1",
        target_node="node-c1",
        target_domain="zone-c",
    )
    plan = dataclasses.replace(plan, evictions=(target,))
    lines = render_plan(plan, "table", TableStyle(width=width)).splitlines()
    at = lines.index("Plan (1 eviction, by wave)")
    header, sub, row = lines[at + 1 : at + 4]
    assert header.split() == ["WAVE", "POD", "WORKLOAD", "NODE", "TARGET"]
    assert sub == "    REASON"
    assert row.split() == ["1", "shop/web-1", "rs/web", "node-00001", "node-c1", "(zone-c)"]
    assert row[header.index("TARGET") :] == "node-c1 (zone-c)"
    folded = lines[at + 4 : lines.index("", at)]
    assert all(line.startswith("    ") and len(line) <= width for line in folded)
    assert " ".join(" ".join(folded).split()) == target.reason
    wide_enough = len(row) + 2 + len(target.reason)
    one_line = render_plan(plan, "table", TableStyle(width=wide_enough)).splitlines()
    row = one_line[one_line.index("Plan (1 eviction, by wave)") + 2]
    assert row.endswith(f"node-c1 (zone-c)  {target.reason}")


def test_the_summary_counts_held_pods_in_over_full_domains_apart_from_skipped() -> None:
    """Zones [4, 1, 0], maxSkew 1, every pod under a PDB at 0: all 5 pods are skipped (pdb), but
    only zone a's 4 stand in an over-full domain (4 - 0 > 1; zone b's 1 is within 0 + 1). The
    summary says it counts those 4 and where; Skipped counts the 5."""
    nodes, pods = zones_cluster([4, 1, 0])
    pdb = PodDisruptionBudget("default", "web", LabelSelector((("app", "web"),)), 0, 5, 5)
    snapshot = Snapshot(nodes=tuple(nodes), pods=tuple(pods), pdbs=(pdb,))
    lines = render_plan(make_plan(snapshot, Policy(), NOW), "table", TableStyle(width=200))
    paragraph = " ".join(lines.splitlines()[: lines.splitlines().index("")])
    assert "1 left above maxSkew, their over-full domains held by pdb (4 pods);" in paragraph
    assert "Skipped (5)" in lines.splitlines()


def test_unrepaired_views_get_a_short_section() -> None:
    """A view left above maxSkew is listed with its skews, the evictions a repair needs and
    what holds it, and the summary paragraph says so."""
    before = {"a": 2, "b": 1, "c": 0}
    view = _view(before)
    left = Unrepaired(
        view, 2, 1, (Hold(SkipCode.HAS_PVC, 2, "mounts a PVC"), Hold(SkipCode.PDB, 1, "x"))
    )
    plan = Plan((), (), (view,), (view,), lower_bound=0, unrepaired=(left,))
    lines = render_plan(plan, "table", TableStyle(width=120)).splitlines()
    paragraph = " ".join(lines[: lines.index("")])
    assert paragraph == (
        "No eviction. 1 violated view: none repaired, 1 left above maxSkew, their over-full"
        " domains held by has-pvc (2 pods), pdb (1 pod); see Left above maxSkew."
    )
    at = lines.index("Left above maxSkew (1, worst first)")
    assert lines[at + 1].split() == [
        "NAMESPACE",
        "KEY",
        "SKEW",
        "NEEDS",
        "HELD",
        "BY",
        "(pods)",
        "WORKLOAD",
        "(or",
        "selector)",
    ]
    # no workload known (the view's pods have none): the selector stands in
    assert lines[at + 2].split() == [
        "shop",
        "hostname",
        "2->2",
        "1",
        "has-pvc",
        "2,",
        "pdb",
        "1",
        "selector",
        "app=web",
    ]


def test_wide_shows_everything() -> None:
    """--wide lists every domain of every view and cuts nothing, whatever the width."""
    plan, before, after = _plan(5000)
    table = render_plan(plan, "table", TableStyle(width=80, wide=True))
    assert MORE.search(table) is None
    for line in _domain_lines(table):
        assert {n: (int(b), int(a)) for n, b, a in TOKEN.findall(line)} == {
            name: (before[name], after[name]) for name in before
        }
    assert LONG_SELECTOR in table and plan.evictions[0].reason in table


def test_json_ignores_the_table_style() -> None:
    """-o json is the contract: every domain, the same bytes whatever the terminal."""
    plan, before, _ = _plan(5000)
    text = render_plan(plan, "json")
    assert render_plan(plan, "json", TableStyle(width=40)) == text
    assert json.loads(text)["violations"][0]["domains"] == dict(sorted(before.items()))


def test_ascii_bars_without_unicode() -> None:
    """A stdout that cannot encode block characters gets an ASCII bar."""
    plan, _, _ = _plan(50)
    table = render_plan(plan, "table", TableStyle(width=100, unicode=False))
    table.encode("ascii")  # raises if anything is not ASCII
    bar = _domain_lines(table)[0][4:]
    assert re.match(r"\[[ .:\-=+*#@]{8}\]->\[[ .:\-=+*#@]{8}\]  ", bar)


def test_views_table_fits_and_counts() -> None:
    """The views table gets the same treatment: width bounded, "+N more" correct."""
    before, _ = _counts(3000, 5)
    table = render_views([_view(before, LONG_NS, LONG_SELECTOR)], "table", TableStyle(width=70))
    over = [line for line in table.splitlines() if len(line) > 70]
    # the 63-character namespace is not cut: its row and the heading above it overflow
    assert [line.split()[0] for line in over] == ["NAMESPACE", LONG_NS]
    line = next(x for x in table.splitlines() if x.startswith("  ["))
    shown = re.findall(r"(\S+):(\d+)", line)
    found = MORE.search(line)
    assert found is not None and int(found.group(1)) + len(shown) == 3000


def _explanation(nodes: int) -> tuple[Explanation, dict[str, int], dict[str, list[str]]]:
    before, _ = _counts(nodes, 3)
    reasons = ["insufficient resources", "node(s) had untolerated taint {gpu: true}", "cordoned"]
    rejected = [(name, reasons[i % 7 % 3]) for i, name in enumerate(sorted(before)) if i % 5]
    expected: dict[str, list[str]] = {}
    for name, reason in rejected:
        expected.setdefault(reason, []).append(name)
    feasible = tuple(n for i, n in enumerate(sorted(before)) if not i % 5)
    expl = Explanation(
        namespace="shop",
        name="web-1",
        node="node-00000",
        constraints=(
            ConstraintExplanation(
                topology_key=HOST,
                when_unsatisfiable="DoNotSchedule",
                max_skew=1,
                min_domains=1,
                node_affinity_policy="Honor",
                node_taints_policy="Ignore",
                selector=LONG_SELECTOR,
                match_counts=tuple(before.items()),
                global_min=0,
                self_match=True,
                default=False,
            ),
        ),
        spread_feasible_nodes=feasible,
        feasible_nodes=feasible,
        rejected=tuple(rejected),
    )
    return expl, before, expected


@pytest.mark.parametrize("width", [None, 50, 80, 200])
def test_explain_groups_rejected_nodes_by_reason(width: int | None) -> None:
    """Rejected nodes come grouped by reason with a count and at most three names each."""
    expl, _, expected = _explanation(5000)
    table = render_explanation(expl, "table", TableStyle(width=width))
    lines = table.splitlines()
    if width is not None:
        assert max(len(line) for line in lines) <= width
    start = lines.index(f"Rejected nodes ({len(expl.rejected)}), by reason")
    groups = lines[start + 1 :]
    assert len(groups) == 2 * len(expected)
    counts = [int(line.split()[0]) for line in groups[::2]]
    assert counts == sorted((len(v) for v in expected.values()), reverse=True)
    for head, names in zip(groups[::2], groups[1::2], strict=True):
        count_text, reason = head.split(None, 1)
        count = int(count_text)
        assert count == len(expected[reason])
        listed = re.findall(r"node-\d{5}", names)
        assert 1 <= len(listed) <= 3
        assert listed == sorted(expected[reason])[: len(listed)]
        if width is None:
            assert len(listed) == 3
        found = MORE.search(names)
        assert found is not None and int(found.group(1)) == count - len(listed)


def test_explain_counts_line_is_abbreviated_and_wide_is_complete() -> None:
    """The "matching pods per domain" line shows a few domains; --wide shows all of them."""
    expl, before, _ = _explanation(5000)
    short = render_explanation(expl, "table", TableStyle())
    line = next(x for x in short.splitlines() if "matching pods per domain" in x)
    found = MORE.search(line)
    shown = re.findall(r"(node-\d{5}):(\d+)", line)
    assert found is not None and int(found.group(1)) + len(shown) == 5000
    assert all(before[n] == int(c) for n, c in shown)
    wide = render_explanation(expl, "table", TableStyle(width=80, wide=True))
    line = next(x for x in wide.splitlines() if "matching pods per domain" in x)
    assert {n: int(c) for n, c in re.findall(r"(node-\d{5}):(\d+)", line)} == before
    assert MORE.search(wide) is None
    assert len(re.findall(r"node-\d{5}", wide)) >= 5000 + len(expl.rejected)


@pytest.mark.parametrize("width", [60, 100])
def test_a_run_keeps_each_pod_whole_and_wraps_its_detail(width: int) -> None:
    """The Executed table of a run: each pod's namespace/name whole on its row, however long
    the failure's detail (wrapped at spaces, or folded under the row when no room is left)."""
    plan, _, _ = _plan(50)
    evicted = dataclasses.replace(plan.evictions[0], namespace="shop", name="web-7f9c-abcde")
    plan = dataclasses.replace(plan, evictions=(evicted,))
    detail = "the API server refused the eviction: " + "admission webhook denied it; " * 6
    result = EvictionResult(evicted, Outcome.FAILED, detail.strip(), 403, 1)
    report = RunReport("r-1", plan, (Wave(1, plan, (result,)),), None, RunEnd.MAX_WAVES, (), 1.0)
    lines = render_run(report, "table", TableStyle(width=width)).splitlines()
    at = lines.index("Executed:")
    section = lines[at + 1 : lines.index("", at)]
    assert section[0].split()[:4] == ["WAVE", "POD", "OUTCOME", "STATUS"]
    row = next(line for line in section if line.startswith("  1 "))
    assert row.split()[:4] == ["1", "shop/web-7f9c-abcde", "failed", "403"]
    assert all(len(line) <= width for line in section)
    assert " ".join(" ".join(section).split()).endswith(" ".join(detail.split()))
