"""Planner invariants on random clusters (strategies in tests/strategies.py)."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.evictability import EvictionContext, skip_reason
from rebalancer.core.minimal import min_moves
from rebalancer.core.model import OwnerRef, Pod, Snapshot
from rebalancer.core.plan import Eviction, Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Limits, Policy
from rebalancer.core.spread import analyze, considered
from tests.builders import node, pod, zone_constraint
from tests.strategies import (
    NOW,
    Cluster,
    achievable,
    apply_plan,
    balanced_clusters,
    clusters,
    domain_counts,
    excess,
    has_view,
    past_evictions,
    policies,
    single_constraint_clusters,
)

DEFAULT = Policy()


def pods_by_uid(snapshot: Snapshot) -> dict[str, Pod]:
    return {p.uid: p for p in snapshot.pods}


@settings(max_examples=150)
@given(single_constraint_clusters(all_evictable=True))
def test_single_constraint_plan_meets_the_formula(cluster: Cluster) -> None:
    """One constraint, ample room, all pods evictable: the plan has exactly min_moves evictions."""
    (workload,) = cluster.workloads
    (c,) = workload.constraints
    counts = domain_counts(cluster.snapshot, workload, c.topology_key)
    values = list(counts.values())
    fits = len(values) >= c.min_domains or sum(values) <= c.max_skew * len(values)
    if not fits:
        return  # no end state within maxSkew exists; test 2 covers it
    result = plan(cluster.snapshot, DEFAULT, NOW)
    expected = min_moves(values, c.max_skew, c.min_domains)
    assert len(result.evictions) == expected
    assert result.lower_bound == expected
    assert all(report.skew <= report.max_skew for report in result.after)
    assert excess(apply_plan(cluster.snapshot, result), workload, c) == 0


@settings(max_examples=150)
@given(single_constraint_clusters(all_evictable=False))
def test_single_constraint_ends_within_max_skew_when_achievable(cluster: Cluster) -> None:
    """Within maxSkew when the evictable pods allow it; otherwise strictly better or no plan."""
    (workload,) = cluster.workloads
    (c,) = workload.constraints
    snapshot = cluster.snapshot
    result = plan(snapshot, DEFAULT, NOW)
    counts = domain_counts(snapshot, workload, c.topology_key)
    ctx = EvictionContext.build(snapshot, DEFAULT, NOW)
    node_domain = {n.name: n.labels[c.topology_key] for n in snapshot.nodes}
    pinned = Counter(
        node_domain[p.node_name or ""]
        for p in snapshot.pods
        if workload.matches(p) and not p.terminating and skip_reason(p, ctx) is not None
    )
    before = excess(snapshot, workload, c)
    after = excess(apply_plan(snapshot, result), workload, c)
    if not has_view(snapshot, workload):
        assert result.evictions == ()
        return
    ok = achievable(list(counts.values()), [pinned[d] for d in counts], c.max_skew, c.min_domains)
    if ok:
        assert after == 0
        assert all(report.skew <= report.max_skew for report in result.after)
    else:
        assert result.evictions == () or after < before


@settings(max_examples=150)
@given(st.data())
def test_never_evicts_a_pod_that_must_stay(data: st.DataObject) -> None:
    """No evicted pod has a skip reason, and none is at or above the priority threshold."""
    cluster = data.draw(clusters())
    policy = data.draw(policies(limits=False))
    result = plan(cluster.snapshot, policy, NOW)
    ctx = EvictionContext.build(cluster.snapshot, policy, NOW)
    pods = pods_by_uid(cluster.snapshot)
    for e in result.evictions:
        pod = pods[e.uid]
        assert skip_reason(pod, ctx) is None, e.key
        assert ctx.priority(pod) < ctx.threshold
        assert e.priority == ctx.priority(pod)
        assert pod.owner is not None and pod.owner.kind != "DaemonSet"
        assert not pod.mirror and not pod.terminating


def _counts(evictions: list[Eviction]) -> dict[str, Counter[str]]:
    return {
        "total": Counter("all" for _ in evictions),
        "node": Counter(e.node for e in evictions),
        "namespace": Counter(e.namespace for e in evictions),
        "workload": Counter(f"{e.namespace}/{e.workload}" for e in evictions),
    }


def _limit(limits: Limits, scope: str) -> int | None:
    return {
        "total": limits.total,
        "node": limits.per_node,
        "namespace": limits.per_namespace,
        "workload": limits.per_workload,
    }[scope]


@settings(max_examples=200)
@given(st.data())
def test_limits_are_never_exceeded(data: st.DataObject) -> None:
    """Total, per-node, per-namespace and per-workload limits hold, counting earlier evictions."""
    cluster = data.draw(clusters())
    policy = data.draw(policies())
    before = data.draw(past_evictions(cluster))
    result = plan(cluster.snapshot, policy, NOW, evicted_before=before)
    old = _counts(before)
    new = _counts(list(result.evictions))
    for scope, counter in new.items():
        limit = _limit(policy.limits, scope)
        if limit is None:
            continue
        for key, planned in counter.items():
            assert old[scope][key] + planned <= max(limit, old[scope][key]), (scope, key)
            if old[scope][key] >= limit:
                assert planned == 0, (scope, key)


@settings(max_examples=150)
@given(balanced_clusters(), policies(limits=False))
def test_balanced_cluster_gives_an_empty_plan(cluster: Cluster, policy: Policy) -> None:
    """When every view is within maxSkew, nothing is evicted and nothing is reported violated."""
    for w in cluster.workloads:
        for c in w.constraints:
            assert excess(cluster.snapshot, w, c) == 0  # the strategy's promise
    result = plan(cluster.snapshot, policy, NOW)
    assert result.evictions == ()
    assert result.violations == ()
    assert result.lower_bound == 0


@settings(max_examples=100)
@given(st.data())
def test_same_input_same_plan_whatever_the_order(data: st.DataObject) -> None:
    """Planning twice, or after shuffling pods and nodes, gives an equal plan."""
    cluster = data.draw(clusters())
    policy = data.draw(policies())
    snapshot = cluster.snapshot
    first = plan(snapshot, policy, NOW)
    assert plan(snapshot, policy, NOW) == first
    shuffled = dataclasses.replace(
        snapshot,
        pods=tuple(data.draw(st.permutations(snapshot.pods), label="pods")),
        nodes=tuple(data.draw(st.permutations(snapshot.nodes), label="nodes")),
    )
    assert plan(shuffled, policy, NOW) == first


@settings(max_examples=150)
@given(single_constraint_clusters(all_evictable=False))
def test_victims_are_taken_lowest_priority_first(cluster: Cluster) -> None:
    """In one domain, an evicted pod never outranks an evictable sibling that stays."""
    (workload,) = cluster.workloads
    (c,) = workload.constraints
    snapshot = cluster.snapshot
    result = plan(snapshot, DEFAULT, NOW)
    ctx = EvictionContext.build(snapshot, DEFAULT, NOW)
    node_domain = {n.name: n.labels[c.topology_key] for n in snapshot.nodes}
    evicted = {e.uid for e in result.evictions}
    by_domain: dict[str, list[Pod]] = defaultdict(list)
    for p in snapshot.pods:
        if p.constraints and workload.matches(p) and skip_reason(p, ctx) is None:
            by_domain[node_domain[p.node_name or ""]].append(p)
    for members in by_domain.values():
        gone = [ctx.priority(p) for p in members if p.uid in evicted]
        kept = [ctx.priority(p) for p in members if p.uid not in evicted]
        if gone and kept:
            assert max(gone) <= min(kept)


def _excess_by_view(snapshot: Snapshot, policy: Policy) -> dict[object, int]:
    analysis = analyze(snapshot, policy)
    return {
        v.spec: max(0, v.skew - v.spec.max_skew) for v in analysis.views if considered(v, policy)
    }


@settings(max_examples=150)
@given(st.data())
def test_multi_constraint_plan_makes_no_view_worse(data: st.DataObject) -> None:
    """Zone + hostname on the same pods: after the plan, no considered view's excess grew."""
    cluster = data.draw(clusters(keys="both"))
    policy = data.draw(policies())
    snapshot = cluster.snapshot
    result: Plan = plan(snapshot, policy, NOW)
    end = apply_plan(snapshot, result)
    for w in cluster.workloads:
        for c in w.constraints:
            assert excess(end, w, c) <= excess(snapshot, w, c), (w.app, c.topology_key)
    before = _excess_by_view(snapshot, policy)
    after = _excess_by_view(end, policy)
    for spec, value in before.items():
        assert after.get(spec, 0) <= value
    worst_before = max((r.skew - r.max_skew for r in result.violations), default=0)
    worst_after = max((r.skew - r.max_skew for r in result.after), default=0)
    assert worst_after <= worst_before


def test_pinned_top_domain_is_fixed_by_raising_the_floor() -> None:
    """Zones [3 pinned, 2, 2, 0, 0], maxSkew 2: two evictions raise the floor to [3,1,1,1,1].

    Regression: moves that only raise the global minimum lower neither the excess nor a
    pin-blind min_moves, so the planner used to return an empty plan here.
    """
    c = zone_constraint("web", 2)
    nodes = [node(f"n-{z}", f"zone-{z}") for z in "abcde"]
    pinned = [pod(f"ds-{k}", "n-a", owner=OwnerRef("DaemonSet", "web-ds")) for k in range(3)]
    movable = [pod(f"web-{z}{k}", f"n-{z}", constraints=[c]) for z in "bc" for k in range(2)]
    result = plan(Snapshot(nodes=tuple(nodes), pods=(*pinned, *movable)), DEFAULT, NOW)
    assert [r.skew for r in result.violations] == [3]
    assert [r.skew for r in result.after] == [2]
    assert sorted(e.domain for e in result.evictions) == ["zone-b", "zone-c"]
