"""A NodePool's limits are spent across the waiting replacements of one plan, and replacements
waiting in one domain share a planned node while it has room (SPEC §5.10). Every expectation
is worked out by hand from the clusters drawn below.

**One zone to fill.** Zone maxSkew 1 (DoNotSchedule) over "web", pods of 1 CPU. n-a (zone-a,
30 CPUs) holds 30 pods, full; n-b (zone-b, 4 CPUs) holds 4, full. Counts a:30 b:4: a repair
would move 13 pods (17/17). Pool pb adds nodes in zone-b only, none of its own yet: a new node
is taken to be n-b's size, 4 CPUs, the node each replacement is planned beside.

| pb's limits | planned nodes (CPUs spent) | replacements waiting | the next one |
| --- | --- | --- | --- |
| cpu 8 | 1st..4th share node 1 (4), 5th..8th node 2 (8) | 8 | 9th: at its cpu limit |
| cpu 6 | node 1 (4), node 2 at what is left (2): 4 + 2 | 6 | 7th: at its cpu limit |
| nodes 1 | node 1 | 4 | 5th: at its nodes limit |
| cpu 8, 4 used | node 1 (4) | 4 | 5th: at its cpu limit |
| cpu 100 | 4 nodes | 13 | none (repaired) |

Before this, each replacement was judged against the limits as read (0 used + 1 <= 8): all 13
waited, for a pool that can add two nodes.

**Two zones, one pool.** n-a (zone-a, 10 CPUs) 10 pods; n-b (zone-b) and n-c (zone-c), 4 CPUs
each, hold one web pod and a 3-CPU filler each, full. Pool p adds nodes in zone-b and zone-c,
cpu limit 4, none used. Counts a:10 b:1 c:1. The first replacement goes to zone-b (b and c tie,
n-b first by name) and plans a 4-CPU node there: the limit is spent. The second may go only to
zone-c (b: 2 + 1 - 1 > 1), where p would need a second node: refused at its cpu limit, no-fit.
One eviction; before this, two (and more).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.karpenter import nodepools
from rebalancer.core.model import (
    ZONE_KEY,
    Node,
    NodePool,
    NodeSelectorRequirement,
    Pod,
    Snapshot,
    Taint,
)
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import analyze
from tests.builders import node, pod, zone_constraint

FULL = "replacement would stay Pending: no node has room for its requests"


def _in(*zones: str) -> tuple[NodeSelectorRequirement, ...]:
    return (NodeSelectorRequirement(ZONE_KEY, "In", zones),)


def _one_zone(pool: NodePool, *, prefix: str = "") -> Snapshot:
    c = zone_constraint("web")
    nodes = (node(f"{prefix}n-a", "zone-a", cpu=30_000), node(f"{prefix}n-b", "zone-b", cpu=4000))
    pods = [
        pod(f"web-a{k:02}", f"{prefix}n-a", constraints=[c], cpu=1000, created=1000 + k)
        for k in range(30)
    ]
    pods += [pod(f"web-b{k}", f"{prefix}n-b", constraints=[c], cpu=1000) for k in range(4)]
    return Snapshot(nodes=nodes, pods=tuple(pods), node_pools=(pool,))


def _plan(snapshot: Snapshot) -> Plan:
    return plan(snapshot, Policy(node_fit=True), 100_000.0)


def _no_fit(result: Plan) -> set[str]:
    return {s.reason.detail for s in result.skipped if s.reason.code == "no-fit"}


def _pb(limits: dict[str, int], used: dict[str, int] | None = None) -> NodePool:
    return NodePool("pb", requirements=_in("zone-b"), limits=limits, used=used or {})


def test_the_ninth_replacement_finds_the_cpu_limit_spent_by_two_planned_nodes() -> None:
    result = _plan(_one_zone(_pb({"cpu": 8000})))
    assert [e.waits_for for e in result.evictions] == ["NodePool pb in zone-b"] * 8
    assert _no_fit(result) == {
        FULL + "; no NodePool can add a node in zone-b for this pod (pb: at its cpu limit"
        " (0 of 8000 used, 8000 more by the nodes this plan waits for, the pod needs 1000))"
    }


def test_the_last_node_is_what_the_limit_leaves() -> None:
    result = _plan(_one_zone(_pb({"cpu": 6000})))
    assert len(result.evictions) == 6
    assert _no_fit(result) == {
        FULL + "; no NodePool can add a node in zone-b for this pod (pb: at its cpu limit"
        " (0 of 6000 used, 6000 more by the nodes this plan waits for, the pod needs 1000))"
    }


def test_four_replacements_share_the_one_node_the_nodes_limit_allows() -> None:
    result = _plan(_one_zone(_pb({"nodes": 1})))
    assert len(result.evictions) == 4
    assert _no_fit(result) == {
        FULL + "; no NodePool can add a node in zone-b for this pod (pb: at its nodes limit"
        " (0 of 1 used, 1 more by the nodes this plan waits for, the pod needs 1))"
    }


def test_what_the_pool_uses_already_counts_with_what_the_plan_spends() -> None:
    result = _plan(_one_zone(_pb({"cpu": 8000}, {"cpu": 4000})))
    assert len(result.evictions) == 4
    assert _no_fit(result) == {
        FULL + "; no NodePool can add a node in zone-b for this pod (pb: at its cpu limit"
        " (4000 of 8000 used, 4000 more by the nodes this plan waits for, the pod needs 1000))"
    }


def test_a_pool_with_room_for_every_node_takes_the_whole_repair() -> None:
    result = _plan(_one_zone(_pb({"cpu": 100_000})))
    assert len(result.evictions) == 13
    assert _no_fit(result) == set()


def test_the_second_waiting_replacement_finds_the_limit_spent_in_another_zone() -> None:
    c = zone_constraint("web")
    nodes = (
        node("n-a", "zone-a", cpu=10_000),
        node("n-b", "zone-b", cpu=4000),
        node("n-c", "zone-c", cpu=4000),
    )
    pods = [pod(f"web-a{k}", "n-a", constraints=[c], cpu=1000, created=1000 + k) for k in range(10)]
    for z in ("b", "c"):
        pods.append(pod(f"web-{z}", f"n-{z}", constraints=[c], cpu=1000))
        pods.append(pod(f"filler-{z}", f"n-{z}", app="filler", cpu=3000))
    pool = NodePool("p", requirements=_in("zone-b", "zone-c"), limits={"cpu": 4000})
    result = _plan(Snapshot(nodes=nodes, pods=tuple(pods), node_pools=(pool,)))
    assert [(e.target_node, e.waits_for) for e in result.evictions] == [
        ("n-b", "NodePool p in zone-b")
    ]
    assert _no_fit(result) == {
        FULL + "; no NodePool can add a node in zone-c for this pod (p: at its cpu limit"
        " (0 of 4000 used, 4000 more by the nodes this plan waits for, the pod needs 1000))"
    }


def test_a_plan_does_not_depend_on_the_names_of_pools_and_nodes() -> None:
    """Renamed pools and nodes (in the same order), the same plan, renamed."""
    first = _plan(_one_zone(_pb({"cpu": 8000})))
    renamed_pool = NodePool("zz-pool", requirements=_in("zone-b"), limits={"cpu": 8000})
    second = _plan(_one_zone(renamed_pool, prefix="x-"))

    def shape(result: Plan, pool: str, prefix: str) -> list[tuple[str, str | None, str]]:
        return [
            (
                e.name,
                e.target_node and e.target_node.removeprefix(prefix),
                e.waits_for.replace(pool, "P"),
            )
            for e in result.evictions
        ]

    assert shape(first, "pb", "") == shape(second, "zz-pool", "x-")
    assert len(first.evictions) == 8
    assert {r.replace("pb", "P") for r in _no_fit(first)} == {
        r.replace("zz-pool", "P") for r in _no_fit(second)
    }


# --- property: the new nodes a plan implies stay within the pool's limits ---------------------

WAITS = re.compile(r"NodePool (\S+) in (\S+)")


@st.composite
def _clusters(draw: st.DrawFn) -> tuple[Snapshot, int]:
    """Zone-a packed with web pods; zone-b and zone-c with one full node each, of ``size``
    CPUs; one pool over zone-b and zone-c with drawn limits and use. Returns the snapshot and
    the size a new node of the pool is taken to be (its own nodes' or, without, n-b's)."""
    size = draw(st.sampled_from([2000, 3000, 4000, 5000]))
    requests = draw(st.lists(st.sampled_from([500, 1000, 1500]), min_size=4, max_size=24))
    c = zone_constraint("web")
    nodes: list[Node] = [node("n-a", "zone-a", cpu=sum(requests))]
    pods: list[Pod] = [
        pod(f"web-a{k:02}", "n-a", constraints=[c], cpu=r, created=1000 + k)
        for k, r in enumerate(requests)
    ]
    for z in ("b", "c"):
        nodes.append(node(f"n-{z}", f"zone-{z}", cpu=size))
        pods.append(pod(f"filler-{z}", f"n-{z}", app="filler", cpu=size))
    limits: dict[str, int] = {}
    if draw(st.booleans()):
        limits["cpu"] = draw(st.integers(0, 16)) * 1000
    if draw(st.booleans()) or not limits:
        limits["nodes"] = draw(st.integers(0, 5))
    used = {r: draw(st.integers(0, limit)) for r, limit in limits.items()}
    pool = NodePool("p", requirements=_in("zone-b", "zone-c"), limits=limits, used=used)
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods), node_pools=(pool,)), size


@settings(max_examples=60, deadline=None)
@given(_clusters())
def test_the_new_nodes_a_plan_implies_never_pass_the_pools_limits(
    drawn: tuple[Snapshot, int],
) -> None:
    """Per zone, the replacements waiting there need at least ceil(their CPUs / node size)
    new nodes, and at least their CPUs of the pool's cpu limit: with what the pool uses, both
    stay within its limits."""
    snapshot, size = drawn
    pool = snapshot.node_pools[0]
    cpu_of = {p.name: p.requests["cpu"] for p in snapshot.pods}
    by_zone: dict[str, int] = {}
    for e in _plan(snapshot).evictions:
        found = WAITS.fullmatch(e.waits_for)
        assert found is not None and found[1] == "p"
        by_zone[found[2]] = by_zone.get(found[2], 0) + cpu_of[e.name]
    nodes = sum(math.ceil(cpu / size) for cpu in by_zone.values())
    if "nodes" in pool.limits:
        assert pool.used["nodes"] + nodes <= pool.limits["nodes"]
    if "cpu" in pool.limits:
        assert pool.used["cpu"] + sum(by_zone.values()) <= pool.limits["cpu"]


def test_taking_replacements_back_gives_their_planned_nodes_and_limits_back() -> None:
    """The simulation's own undo (remove, add back), in any order: a freed seat on a planned
    node takes the next replacement; an emptied planned node returns what it spent."""
    snapshot = _one_zone(_pb({"cpu": 8000}))
    analysis = analyze(snapshot, Policy(node_fit=True))
    state = SimState(snapshot, analysis, map(ViewId, range(len(analysis.views))))
    index = {p.name: PodId(k) for k, p in enumerate(analysis.pods)}
    moved = [index[f"web-a{k:02}"] for k in range(9)]
    assert state.new_nodes is not None
    plan = state.new_nodes.plan
    for i in moved[:8]:
        state.remove(i)
        placed = state.place(i)
        assert (placed.node, placed.pool) == ("n-b", "NodePool pb in zone-b")
        state.add(i, "n-b")
    assert plan.planned_nodes() == {"pb": 2}
    assert plan.spent == {"pb": {"cpu": 8000}}
    state.remove(moved[8])
    assert state.place(moved[8]).node is None  # the limit is spent
    state.remove(moved[1])  # from the first planned node: a seat frees there
    state.add(moved[1], "n-a")
    assert state.place(moved[8]).pool == "NodePool pb in zone-b"
    for i in moved[:8]:
        if i != moved[1]:
            state.remove(i)
            state.add(i, "n-a")
    state.add(moved[8], "n-a")
    assert plan.planned_nodes() == {}
    assert plan.spent == {}
    assert not plan.active


def _many_pools(moves: int, tainted: int) -> Snapshot:
    """Zone-a with ``2 * moves + 4`` pods, zone-b full with 4: a repair of ``moves`` waiting
    replacements. ``tainted`` pools whose taint no pod tolerates, and pool ``zz`` with room."""
    c = zone_constraint("web")
    count = 2 * moves + 4
    nodes = (node("n-a", "zone-a", cpu=count * 1000), node("n-b", "zone-b", cpu=4000))
    pods = [
        pod(f"web-a{k:03}", "n-a", constraints=[c], cpu=1000, created=1000 + k)
        for k in range(count)
    ]
    pods += [pod(f"web-b{k}", "n-b", constraints=[c], cpu=1000) for k in range(4)]
    pools = [
        NodePool(f"t{k:03}", requirements=_in("zone-b"), taints=(Taint("gpu", "x", "NoSchedule"),))
        for k in range(tainted)
    ]
    pools.append(NodePool("zz", requirements=_in("zone-b"), limits={"cpu": 1_000_000}))
    return Snapshot(nodes=nodes, pods=tuple(pods), node_pools=tuple(pools))


def test_pools_refused_for_their_taints_are_judged_once_whatever_the_waiting_replacements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With 40 tainted pools, 10, 20 and 40 waiting replacements judge the pools' taints 40
    times each (once for the pods' one shape), not once per planned node. Before the plan's
    verdicts reused the shape's early refusals: 410, 820 and 1,640."""
    calls = [0]
    judged = nodepools._early_refusal

    def counted(pool: NodePool, pod: Pod) -> object:
        calls[0] += 1
        return judged(pool, pod)

    monkeypatch.setattr(nodepools, "_early_refusal", counted)
    for moves in (10, 20, 40):
        calls[0] = 0
        result = _plan(_many_pools(moves, 40))
        assert [e.waits_for for e in result.evictions] == ["NodePool zz in zone-b"] * moves
        assert calls[0] == 41  # 40 tainted pools and zz, for the one shape


def test_first_fit_over_the_planned_nodes_costs_one_pass_not_one_a_replacement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """40, 80 and 160 replacements waiting in one zone, four to a planned node: the planned
    nodes are tried for room 69, 139 and 279 times (under two a replacement), where trying
    every node for every replacement took 420, 1,640 and 6,480."""
    calls = [0]
    fits = nodepools.PoolPlan._fits

    def counted(plan: nodepools.PoolPlan, *args: Any) -> bool:
        calls[0] += 1
        return fits(plan, *args)

    monkeypatch.setattr(nodepools.PoolPlan, "_fits", counted)
    for moves in (40, 80, 160):
        calls[0] = 0
        result = _plan(_many_pools(moves, 0))
        assert len(result.evictions) == moves
        assert calls[0] < 2 * moves


def test_a_pool_whose_limit_is_spent_leaves_the_next_replacements_to_the_next_pool() -> None:
    """pa (cpu 4) and pb (cpu 100) both add nodes in zone-b: pa, first by name, takes four
    replacements on its one node; the fifth to the thirteenth wait for pb (three nodes)."""
    pa = NodePool("pa", requirements=_in("zone-b"), limits={"cpu": 4000})
    snapshot = _one_zone(_pb({"cpu": 100_000}))
    result = _plan(
        Snapshot(nodes=snapshot.nodes, pods=snapshot.pods, node_pools=(pa, _pb({"cpu": 100_000})))
    )
    assert [e.waits_for for e in result.evictions] == ["NodePool pa in zone-b"] * 4 + [
        "NodePool pb in zone-b"
    ] * 9
