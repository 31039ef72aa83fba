"""Every view a plan leaves above its maxSkew is reported with what holds it, and the lower bound
is the bound of what the plan reaches (never above its size; minimal when met).

The hand-derived cases give each reason alone and their counts: the pods of the domains above
``globalMin + maxSkew`` after the plan, each under the first reason that holds it. The sweep runs
every example snapshot, a generated cluster and every planner case under every shipped policy.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.gen import generate
from rebalancer.cluster.read.policyfile import load_policy, load_policy_file
from rebalancer.cluster.read.snapshot import load_snapshot_skipping
from rebalancer.core.model import (
    HARD,
    ZONE_KEY,
    LabelSelector,
    Node,
    Pod,
    PodDisruptionBudget,
    Snapshot,
    SpreadConstraint,
)
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Limits, Policy, PriorityThreshold
from rebalancer.core.selectors import selector_string
from rebalancer.core.spread import analyze, considered
from tests.builders import node, pod, zone_constraint, zones_cluster
from tests.casedsl import build_snapshot
from tests.strategies import apply_plan, clusters, policies

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_000_000.0
POLICIES = [None, *sorted((ROOT / "policies").rglob("*.yaml"))]
SNAPSHOTS = [
    *sorted((ROOT / "examples").glob("*.yaml")),
    ROOT / "tests" / "data" / "cli_snapshot.yaml",
    *sorted((ROOT / "tests" / "data" / "snapshot").glob("*")),
]


def _reasons(result: Plan) -> list[dict[str, int]]:
    return [{r.code: r.pods for r in u.reasons} for u in result.unrepaired]


def _check(result: Plan) -> None:
    """The invariants: bound <= size, minimal iff met, every view above maxSkew reported."""
    assert result.lower_bound <= len(result.evictions)
    assert result.minimal is (result.lower_bound == len(result.evictions))
    left = [v for v in result.after if v.violated]
    reported = [u.view for u in result.unrepaired]
    for view in left:
        assert view in reported
    for u in result.unrepaired:
        assert u.view.violated
        assert u.reasons and all(r.pods > 0 and r.code for r in u.reasons)
        assert u.needed >= 1
    excess = [u.view.skew - u.view.max_skew for u in result.unrepaired]
    assert excess == sorted(excess, reverse=True)


def _one_zone_view(pods: list[Pod], nodes: list[Node], **policy: Any) -> Plan:
    return plan(Snapshot(nodes=tuple(nodes), pods=tuple(pods)), Policy(**policy), NOW)


# --- hand-derived cases -------------------------------------------------------------------------


def test_pvc_pods_hold_a_view() -> None:
    """Zones [2, 1, 0], maxSkew 1, every pod with a PVC: nothing moves; zone a (2 > 0 + 1)
    holds 2 has-pvc pods; one eviction would repair it; the empty plan is minimal (bound 0)."""
    nodes, pods = zones_cluster([2, 1, 0])
    pods = [dataclasses.replace(p, pvc_names=("data",)) for p in pods]
    result = _one_zone_view(pods, nodes)
    assert result.evictions == ()
    assert (result.lower_bound, result.minimal) == (0, True)
    [left] = result.unrepaired
    assert (left.skew_before, left.skew_after, left.needed) == (2, 2, 1)
    assert _reasons(result) == [{"has-pvc": 2}]
    _check(result)


@pytest.mark.parametrize("max_skew", [1, 2, 3])
def test_a_pdb_at_zero_holds_the_full_zone(max_skew: int) -> None:
    """Zones [s+3, 1, 0] whose pods a PDB covers with no disruption left: the full zone's s+3
    pods are held by `pdb` (zone b is within globalMin + maxSkew, so not counted)."""
    nodes, pods = zones_cluster([max_skew + 3, 1, 0], max_skew)
    pdb = PodDisruptionBudget("default", "web", LabelSelector((("app", "web"),)), 0, 4, 4)
    snapshot = Snapshot(nodes=tuple(nodes), pods=tuple(pods), pdbs=(pdb,))
    result = plan(snapshot, Policy(), NOW)
    assert result.evictions == ()
    assert _reasons(result) == [{"pdb": max_skew + 3}]
    [left] = result.unrepaired
    assert left.skew_before == left.skew_after == max_skew + 3
    _check(result)


def test_a_limit_stops_a_repair_half_way() -> None:
    """Zones [4, 0, 0], maxSkew 1, limits.total 1: one eviction ends at [3, 1, 0], skew 3; the
    three pods of zone a are held by the limit. Reaching skew 3 from [4, 0, 0] takes one move,
    so the plan is minimal for what it reaches; a repair needs 2."""
    nodes, pods = zones_cluster([4, 0, 0])
    result = _one_zone_view(pods, nodes, limits=Limits(total=1))
    assert len(result.evictions) == 1
    assert (result.lower_bound, result.minimal) == (1, True)
    [left] = result.unrepaired
    assert (left.skew_before, left.skew_after, left.needed) == (4, 3, 2)
    assert _reasons(result) == [{"limit": 3}]
    assert "limits.total (1) reached" in left.reasons[0].detail
    _check(result)


def test_priority_threshold_and_bare_pods_are_counted_apart() -> None:
    """Zone a holds 2 pods at the threshold and 1 bare pod, zone b none, maxSkew 1: reasons
    `priority-threshold` 2 then `no-controller` 1 (the most pods first)."""
    nodes, pods = zones_cluster([3, 0])
    pods = [
        dataclasses.replace(pods[0], priority=5000),
        dataclasses.replace(pods[1], priority=7000),
        dataclasses.replace(pods[2], owner=None),
    ]
    result = _one_zone_view(pods, nodes, priority_threshold=PriorityThreshold(value=5000))
    assert _reasons(result) == [{"priority-threshold": 2, "no-controller": 1}]
    _check(result)


def test_no_room_in_the_empty_zone_is_no_fit() -> None:
    """Zones [3, 0], zone b's only node full (pods: 0 allowed): every pod of zone a is
    `no-fit`; the plan is empty and says so."""
    nodes, pods = zones_cluster([3, 0])
    nodes[1] = node(nodes[1].name, "zone-b", pods=0)
    result = _one_zone_view(pods, nodes)
    assert result.evictions == ()
    assert _reasons(result) == [{"no-fit": 3}]
    _check(result)


def test_not_ready_node_and_young_pods() -> None:
    """Zone a's node is NotReady for two pods (the third on a Ready node is too young):
    `node-not-ready` 2, `too-young` 1."""
    nodes = [node("a1", "zone-a", ready=False), node("a2", "zone-a"), node("b1", "zone-b")]
    _, pods = zones_cluster([3, 0])
    pods = [
        dataclasses.replace(pods[0], node_name="a1"),
        dataclasses.replace(pods[1], node_name="a1"),
        dataclasses.replace(pods[2], node_name="a2", created=NOW - 10),
    ]
    result = _one_zone_view(pods, nodes, min_pod_age_seconds=3600)
    assert _reasons(result) == [{"node-not-ready": 2, "too-young": 1}]
    _check(result)


def test_too_few_domains_for_min_domains() -> None:
    """minDomains 3 over 2 zones [3, 2], maxSkew 1: the global minimum is 0, so the two zones
    hold 2 pods within maxSkew: 3 pods are beyond (`min-domains`); both zones are over 0 + 1,
    and no replacement has a legal node (count + 1 - 0 <= 1 holds in no zone): 5 `no-fit`."""
    nodes, pods = zones_cluster([3, 2], min_domains=3)
    result = _one_zone_view(pods, nodes)
    assert result.evictions == ()
    [left] = result.unrepaired
    assert left.skew_before == 3
    assert [(r.code, r.pods) for r in left.reasons] == [("min-domains", 3), ("no-fit", 5)]
    _check(result)


def test_a_move_that_would_harm_another_view_is_no_gain() -> None:
    """Web pods [3, 0] over zones a, b (maxSkew 1), all labelled tier=front; four ops pods in
    zone b declare a zone constraint on tier=front with maxSkew 2, counting [3, 4] (skew 1).
    Moving a web pod to b would repair web ([2, 1]) but take tier=front to [2, 5], skew 3 > 2:
    no move is kept, the three web pods of zone a are `no-gain`."""
    nodes = [node("a0", "zone-a"), node("b0", "zone-b")]
    web = zone_constraint("web", 1)
    front = SpreadConstraint(2, ZONE_KEY, HARD, LabelSelector((("tier", "front"),)))
    pods = [
        pod(f"web-{k}", "a0", constraints=[web], labels={"tier": "front"}) for k in range(3)
    ] + [
        pod(f"ops-{k}", "b0", app="ops", constraints=[front], labels={"tier": "front"})
        for k in range(4)
    ]
    result = _one_zone_view(pods, nodes)
    assert result.evictions == ()
    assert [u.view.selector for u in result.unrepaired] == ["app=web"]
    assert _reasons(result) == [{"no-gain": 3}]
    _check(result)


def test_repaired_views_are_not_reported() -> None:
    """Zones [3, 1], maxSkew 1: one eviction repairs the view; nothing is unrepaired."""
    nodes, pods = zones_cluster([3, 1])
    result = _one_zone_view(pods, nodes)
    assert len(result.evictions) == 1 == result.lower_bound
    assert result.minimal and result.unrepaired == ()


def test_readme_example_is_minimal() -> None:
    """The bundled example: 5 evictions meet the bound 5; `data` is held by 2 PVC pods and
    `payments` by 3 pods whose PDB allows nothing (the pods of the over-full zones)."""
    snapshot, _ = load_snapshot_skipping(
        str(ROOT / "examples" / "skewed-cluster.yaml"), skip_invalid=False, max_bytes=10**8
    )
    result = plan(snapshot, Policy(), NOW)
    assert (len(result.evictions), result.lower_bound, result.minimal) == (5, 5, True)
    held = {u.view.namespace: {r.code: r.pods for r in u.reasons} for u in result.unrepaired}
    assert held == {"data": {"has-pvc": 2}, "payments": {"pdb": 3}}
    _check(result)


# --- the sweep ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated 30-node, 900-pod cluster (bench.gen)."""
    out = tmp_path_factory.mktemp("gen") / "gen30.json"
    items = list(generate(30, 900, 1))
    out.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return out


@pytest.mark.parametrize("policy_file", POLICIES, ids=lambda p: p.name if p else "built-in")
def test_every_snapshot_under_every_policy(policy_file: Path | None, generated: Path) -> None:
    """lowerBound <= evictions, minimal iff met, every view left above maxSkew in
    `unrepaired` with a reason, for every example snapshot and a generated cluster."""
    policy = load_policy_file(str(policy_file), 10**6) if policy_file else Policy()
    for path in [*SNAPSHOTS, generated]:
        snapshot, _ = load_snapshot_skipping(str(path), skip_invalid=False, max_bytes=10**8)
        _check(plan(snapshot, policy, NOW))


def test_every_planner_case() -> None:
    """The same invariants over every case of tests/data/planner_cases.yaml."""
    cases = yaml.safe_load((ROOT / "tests" / "data" / "planner_cases.yaml").read_text())["cases"]
    for case in cases:
        doc = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy"}
        doc.update(case.get("policy") or {})
        _check(plan(build_snapshot(case), load_policy(yaml.safe_dump(doc), "case"), NOW))


@settings(max_examples=150)
@given(st.data())
def test_random_clusters_report_every_view_left(data: st.DataObject) -> None:
    """On random clusters (zone and hostname views, random policies with limits): the bound
    never exceeds the plan, and every considered view above maxSkew in the end state (the
    plan applied to the snapshot, analysed afresh) is in `unrepaired` with its skew."""
    cluster = data.draw(clusters(keys="both"))
    policy = data.draw(policies())
    result = plan(cluster.snapshot, policy, NOW)
    _check(result)
    end = analyze(apply_plan(cluster.snapshot, result), policy)
    left = Counter(
        (v.spec.namespace, v.spec.topology_key, selector_string(v.spec.constraint.selector), v.skew)
        for v in end.views
        if considered(v, policy) and v.violated
    )
    reported = Counter(
        (u.view.namespace, u.view.topology_key, u.view.selector, u.view.skew)
        for u in result.unrepaired
    )
    assert left <= reported
