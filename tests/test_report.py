"""Rendering: the JSON contract of plans and explanations, its YAML twin, and the human tables."""

from __future__ import annotations

import json

import pytest
import yaml

from rebalancer.cli.render import (
    FORMATS,
    Format,
    TableStyle,
    render_explanation,
    render_plan,
    render_views,
)
from rebalancer.core.explain import ConstraintExplanation, Explanation, PlanStatus
from rebalancer.core.plan import Eviction, Plan, Skip, SkipCode, SkipReason, ViewReport

ZONE = "topology.kubernetes.io/zone"


def _view(counts: dict[str, int], skew: int, global_min: int) -> ViewReport:
    return ViewReport(
        namespace="shop",
        topology_key=ZONE,
        max_skew=1,
        when_unsatisfiable="DoNotSchedule",
        selector="app=web",
        min_domains=1,
        domains=tuple(sorted(counts.items())),
        global_min=global_min,
        skew=skew,
        pods=("shop/web-1",),
    )


def _eviction(name: str, node: str, wave: int, priority: int = 0) -> Eviction:
    return Eviction(
        namespace="shop",
        name=name,
        uid=f"uid-{name}",
        node=node,
        priority=priority,
        reason=f"{ZONE}=eu-west-1a has 6 app=web pods, globalMin 1, maxSkew 1",
        wave=wave,
        workload="ReplicaSet/web-7d9f",
        domain="eu-west-1a",
        topology_key=ZONE,
        target_node="node-c1",
        grace_period_seconds=None,
        target_domain="eu-west-1c",
    )


def _plan() -> Plan:
    """Zones [6, 2, 1] with maxSkew 1: three evictions in two waves end at [3, 3, 3]."""
    return Plan(
        evictions=(
            _eviction("web-1", "node-a1", 1),
            _eviction("web-2", "node-a2", 1, priority=100),
            _eviction("web-3", "node-a1", 2),
        ),
        skipped=(
            Skip(
                namespace="shop",
                name="web-0",
                uid="uid-web-0",
                node="node-a1",
                reason=SkipReason(SkipCode.PDB, "PodDisruptionBudget web allows 0 disruptions"),
            ),
        ),
        violations=(_view({"eu-west-1a": 6, "eu-west-1b": 2, "eu-west-1c": 1}, 5, 1),),
        after=(_view({"eu-west-1a": 3, "eu-west-1b": 3, "eu-west-1c": 3}, 0, 3),),
        lower_bound=3,
        notes=("wave 2 is re-planned once wave 1's replacements are Running",),
    )


def _explanation() -> Explanation:
    return Explanation(
        namespace="shop",
        name="web-1",
        node="node-a1",
        constraints=(
            ConstraintExplanation(
                topology_key=ZONE,
                when_unsatisfiable="DoNotSchedule",
                max_skew=1,
                min_domains=1,
                node_affinity_policy="Honor",
                node_taints_policy="Ignore",
                selector="app=web",
                match_counts=(("eu-west-1b", 2), ("eu-west-1a", 6)),
                global_min=2,
                self_match=True,
                default=False,
                pod_domain="eu-west-1a",
                replacement_global_min=2,
                skew=4,
            ),
        ),
        spread_feasible_nodes=("node-b1",),
        feasible_nodes=("node-b1",),
        rejected=(
            ("node-c1", "node(s) had untolerated taint {dedicated: gpu}"),
            ("node-a1", "node(s) didn't match pod topology spread constraints"),
        ),
        status=PlanStatus("planned", "zone a holds 6", 1, "node-b1", "eu-west-1b"),
    )


def test_plan_json_contract_keys() -> None:
    """Plan JSON is one object with exactly the documented camelCase keys at every level."""
    data = json.loads(render_plan(_plan(), "json"))
    assert list(data) == [
        "version",
        "evictions",
        "skipped",
        "violations",
        "after",
        "unrepaired",
        "waves",
        "summary",
        "notes",
    ]
    assert data["version"] == 2
    assert list(data["evictions"][0]) == [
        "namespace",
        "name",
        "uid",
        "node",
        "priority",
        "reason",
        "wave",
        "workload",
        "domain",
        "topologyKey",
        "targetNode",
        "targetDomain",
        "gracePeriodSeconds",
        "podDisruptionBudget",
        "waitsFor",
        "capacity",
        "reserveIn",
    ]
    assert data["skipped"] == [
        {
            "namespace": "shop",
            "name": "web-0",
            "reason": "pdb: PodDisruptionBudget web allows 0 disruptions",
            "code": "pdb",
        }
    ]
    view_keys = [
        "namespace",
        "topologyKey",
        "maxSkew",
        "whenUnsatisfiable",
        "selector",
        "minDomains",
        "domains",
        "globalMin",
        "skew",
    ]
    assert list(data["violations"][0]) == view_keys
    assert list(data["after"][0]) == view_keys
    assert list(data["summary"]) == [
        "evictions",
        "lowerBound",
        "minimal",
        "violations",
        "repaired",
        "unrepaired",
        "skipped",
    ]


def test_plan_json_values() -> None:
    """Plan JSON carries the plan's values: waves of namespace/name, domain counts, summary."""
    data = json.loads(render_plan(_plan(), "json"))
    assert data["waves"] == [["shop/web-1", "shop/web-2"], ["shop/web-3"]]
    assert data["violations"][0]["domains"] == {"eu-west-1a": 6, "eu-west-1b": 2, "eu-west-1c": 1}
    assert data["after"][0]["skew"] == 0
    assert data["summary"] == {
        "evictions": 3,
        "lowerBound": 3,
        "minimal": True,
        "violations": 1,
        "repaired": 1,
        "unrepaired": 0,
        "skipped": 1,
    }
    assert data["unrepaired"] == []
    assert data["evictions"][1]["priority"] == 100
    assert data["evictions"][0]["targetNode"] == "node-c1"
    assert data["evictions"][0]["targetDomain"] == "eu-west-1c"
    assert data["evictions"][0]["gracePeriodSeconds"] is None
    assert data["notes"] == ["wave 2 is re-planned once wave 1's replacements are Running"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_plan_rendering_is_deterministic(fmt: Format) -> None:
    """The same Plan renders to the same bytes, in every format."""
    assert render_plan(_plan(), fmt) == render_plan(_plan(), fmt)


def test_plan_json_keeps_list_order() -> None:
    """Evictions and skips keep the planner's order; JSON does not re-sort them."""
    plan = _plan()
    reordered = Plan(
        evictions=tuple(reversed(plan.evictions)),
        skipped=plan.skipped,
        violations=plan.violations,
        after=plan.after,
        lower_bound=plan.lower_bound,
    )
    names = [e["name"] for e in json.loads(render_plan(reordered, "json"))["evictions"]]
    assert names == ["web-3", "web-2", "web-1"]


def test_plan_yaml_is_the_json_data() -> None:
    """The YAML form holds exactly the JSON form's data, keys in the same order."""
    from_json = json.loads(render_plan(_plan(), "json"))
    from_yaml = yaml.safe_load(render_plan(_plan(), "yaml"))
    assert from_yaml == from_json
    assert list(from_yaml) == list(from_json)


def test_plan_table_sections() -> None:
    """The table opens with the summary paragraph, then shows violations before->after, the
    plan by wave with each replacement's target, the skips."""
    table = render_plan(_plan(), "table")
    lines = table.splitlines()
    paragraph = " ".join(lines[: lines.index("")])
    assert paragraph == (
        "3 evictions, proven minimal, in 2 waves (a run re-plans after every wave). 1 violated"
        " view: all repaired."
    )
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("shop"))
    # the view's pods have no workload here: the selector names them
    assert lines[at].split() == ["shop", "zone", "1", "5->0", "selector", "app=web"]
    assert lines[at + 1].endswith("  eu-west-1a:6->3 eu-west-1b:2->3 eu-west-1c:1->3")
    assert "Plan (3 evictions, by wave)" in lines
    header = next(line for line in lines if "WAVE" in line).split()
    assert header == ["WAVE", "POD", "WORKLOAD", "NODE", "TARGET", "REASON"]
    assert any(
        line.split()[:6] == ["2", "shop/web-3", "rs/web-7d9f", "node-a1", "node-c1", "(eu-west-1c)"]
        for line in lines
    )
    wide = render_plan(_plan(), "table", TableStyle(wide=True)).splitlines()
    header = next(line for line in wide if "WAVE" in line).split()
    assert header == ["WAVE", "POD", "WORKLOAD", "NODE", "TARGET", "PRIORITY", "REASON"]
    assert "Skipped (1)" in lines
    assert any(
        "shop/web-0" in line and "pdb: PodDisruptionBudget web allows 0 disruptions" in line
        for line in lines
    )
    assert "Left above maxSkew" not in table


def test_plan_table_when_not_minimal() -> None:
    """A plan above its lower bound says so without claiming minimality."""
    plan = _plan()
    bigger = Plan(plan.evictions, (), plan.violations, plan.after, lower_bound=2)
    table = render_plan(bigger, "table")
    assert table.startswith("3 evictions, not proven minimal (lower bound 2), in 2 waves ")
    assert "Skipped" not in table


def test_plan_table_balanced_cluster() -> None:
    """A plan with no violations says there is nothing to evict, first."""
    table = render_plan(Plan((), (), (), (), lower_bound=0), "table")
    assert table == "No violations: nothing to evict.\n"


def test_explanation_json_contract() -> None:
    """Explanation JSON has the documented keys; counts and rejections are sorted by name."""
    data = json.loads(render_explanation(_explanation(), "json"))
    assert list(data) == [
        "version",
        "namespace",
        "name",
        "node",
        "plan",
        "constraints",
        "spreadFeasibleNodes",
        "feasibleNodes",
        "rejected",
        "nodePools",
    ]
    assert list(data["constraints"][0]) == [
        "topologyKey",
        "whenUnsatisfiable",
        "maxSkew",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
        "selector",
        "matchCounts",
        "globalMin",
        "skew",
        "selfMatch",
        "default",
        "podDomain",
        "replacementGlobalMin",
    ]
    assert data["plan"] == {
        "state": "planned",
        "detail": "zone a holds 6",
        "wave": 1,
        "targetNode": "node-b1",
        "targetDomain": "eu-west-1b",
    }
    assert data["constraints"][0]["podDomain"] == "eu-west-1a"
    assert list(data["constraints"][0]["matchCounts"].items()) == [
        ("eu-west-1a", 6),
        ("eu-west-1b", 2),
    ]
    assert list(data["rejected"]) == ["node-a1", "node-c1"]
    assert data["spreadFeasibleNodes"] == ["node-b1"]


def test_explanation_yaml_is_the_json_data() -> None:
    """The explanation's YAML form holds exactly its JSON data."""
    expl = _explanation()
    from_json = json.loads(render_explanation(expl, "json"))
    assert yaml.safe_load(render_explanation(expl, "yaml")) == from_json


def test_explanation_table() -> None:
    """The explanation table names the pod, each constraint with its counts, and every rejection."""
    table = render_explanation(_explanation(), "table")
    assert table.startswith(
        "Pod shop/web-1, on node node-a1\n"
        "Plan: evicted in wave 1; replacement expected on node-b1 (eu-west-1b)\n"
    )
    assert f"1. {ZONE}  DoNotSchedule  maxSkew=1  minDomains=1" in table
    assert "matching pods per domain, as the plan counts them: eu-west-1a:6 eu-west-1b:2" in table
    assert "this pod counted in eu-west-1a: globalMin=2  selfMatch=yes  skew=4" in table
    assert "its replacement sees eu-west-1a:5, globalMin=2: a node is allowed where" in table
    assert "Spread-feasible nodes (1): node-b1" in table
    lines = table.splitlines()
    at = lines.index("Rejected nodes (2), by reason")
    assert lines[at + 1 :] == [
        "  1  node(s) didn't match pod topology spread constraints",
        "     node-a1",
        "  1  node(s) had untolerated taint {dedicated: gpu}",
        "     node-c1",
    ]


def test_views_render_in_every_format() -> None:
    """A list of views renders as a table marking violations, and as {"views": [...]} data."""
    views = [_view({"a": 6, "b": 1}, 5, 1), _view({"a": 2, "b": 2}, 0, 2)]
    table = render_views(views, "table")
    assert "5 VIOLATED" in table
    assert "0 ok" in table
    data = json.loads(render_views(views, "json"))
    assert list(data) == ["version", "views"]
    assert [v["skew"] for v in data["views"]] == [5, 0]
    assert yaml.safe_load(render_views(views, "yaml")) == data
