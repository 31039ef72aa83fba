"""The exact joint search (rebalancer.core.joint) and the planner's joint bound."""

from __future__ import annotations

import gc
from collections import Counter

import pytest

from rebalancer.core.joint import JointProblem, JointView, search
from rebalancer.core.minimal import min_moves
from rebalancer.core.model import HOSTNAME_KEY, Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Limits, Policy
from tests.builders import node, pod, zone_constraint
from tests.oracle import OracleCluster, OracleConstraint, OraclePod, joint_minimum, within

NOW = 1_000_000.0


def zone_and_hostname(
    zones: list[list[int]], sz: int, sh: int, pinned: int = 0
) -> tuple[JointProblem, OracleCluster]:
    """The search problem for nodes listed per zone (pods per node), and the same cluster for
    the oracle; ``pinned`` pods of the first node may not be evicted."""
    placed = [(z, count) for z, counts in enumerate(zones) for count in counts]
    start = tuple(count for _, count in placed)
    movable = tuple(count - (pinned if k == 0 else 0) for k, (_, count) in enumerate(placed))
    problem = JointProblem(
        views=(
            JointView(tuple(z for z, _ in placed), len(zones), sz, False),
            JointView(tuple(range(len(placed))), len(placed), sh, False),
        ),
        start=start,
        movable=movable,
        cap=tuple(c + 100 for c in start),
        accepts=(True,) * len(placed),
    )
    pods = tuple(
        OraclePod(node=k, priority=0, evictable=not (k == 0 and n < pinned))
        for k, count in enumerate(start)
        for n in range(count)
    )
    cluster = OracleCluster(
        tuple(z for z, _ in placed),
        pods,
        (OracleConstraint("zone", sz), OracleConstraint("hostname", sh)),
    )
    return problem, cluster


@pytest.mark.parametrize(
    ("zones", "sz", "sh", "pinned", "expected"),
    [
        ([[2, 2, 2], [0, 0, 0]], 1, 1, 0, 3),
        ([[3, 0], [3, 3]], 2, 2, 0, 1),
        ([[0, 0, 0], [5, 0, 2]], 1, 2, 0, 3),
        ([[5, 0], [2, 4], [0, 0]], 1, 1, 0, 5),
        ([[4, 0], [0, 0]], 1, 1, 0, 3),
        ([[6, 0], [0, 0]], 1, 1, 6, None),
        ([[4, 1], [1, 0], [0, 0]], 1, 1, 3, None),
    ],
)
def test_search_finds_the_oracle_minimum(
    zones: list[list[int]], sz: int, sh: int, pinned: int, expected: int | None
) -> None:
    """SPEC §3.5's joint examples (and a few with pinned pods): the search's minimum is the
    hand-worked one and the breadth-first oracle's, and every end state it lists is balanced."""
    problem, cluster = zone_and_hostname(zones, sz, sh, pinned)
    result = search(problem)
    assert result.complete
    assert result.minimum == expected == joint_minimum(cluster)
    for (counts, _), path in result.ends.items():
        assert len(path) == expected
        assert within(cluster, counts)


def test_search_gives_up_within_its_budget() -> None:
    """A search that needs more visited states than allowed proves nothing."""
    problem, _ = zone_and_hostname([[9, 9, 9], [0, 0, 0], [0, 0, 0]], 1, 1)
    result = search(problem, max_visits=50)
    assert result.minimum is None
    assert not result.complete
    assert result.visits == 51


def test_many_constraints_on_one_workload_report_a_real_bound() -> None:
    """300 pods with 50 hard constraints each, the plan capped by limits.total: the bound is
    what the plan sets out to reach (each view's distance to the skew it ends at), not 0 and
    not above the plan's 10 evictions, and every view left above maxSkew says the limit holds
    it."""
    keys = [f"example.com/k{j}" for j in range(50)]
    nodes = [
        node(
            f"n{k}",
            f"z{k % 3}",
            labels={key: f"d{(k * (j + 1) + j) % 3}" for j, key in enumerate(keys)},
        )
        for k in range(10)
    ]
    constraints = [zone_constraint("web", 3, key=key) for key in keys]
    pods = [
        pod(
            f"web-{k}",
            f"n{0 if k < 90 else 1 if k < 150 else 2 + k % 8}",
            constraints=constraints,
            created=1000.0 + k,
        )
        for k in range(300)
    ]
    snapshot = Snapshot(nodes=tuple(nodes), pods=tuple(pods))
    result = plan(snapshot, Policy(limits=Limits(total=10)), NOW)
    ends = {v.topology_key: v.skew for v in result.after}
    distances = []
    for key in keys:
        counts = Counter(n.labels[key] for p in pods for n in nodes if n.name == p.node_name)
        if key in ends:
            distances.append(min_moves(list(counts.values()), max(3, ends[key])))
    assert len(result.evictions) == 10
    assert 0 < max(distances) <= 10
    assert result.lower_bound == max(distances)
    assert result.minimal is (max(distances) == 10)
    left = {u.view.topology_key for u in result.unrepaired}
    assert left == {key for key, skew in ends.items() if skew > 3}
    assert left
    for u in result.unrepaired:
        assert "limit" in {r.code for r in u.reasons}


@pytest.mark.parametrize(
    ("per_zone", "placed", "sz", "sh"),
    [
        (5, {0: 4, 1: 2}, 1, 1),
        (5, {0: 3, 5: 3}, 1, 1),
        (4, {0: 5}, 2, 1),
        (6, {0: 3, 6: 1}, 1, 1),
    ],
)
def test_empty_nodes_of_one_kind_are_searched_once(
    per_zone: int, placed: dict[int, int], sz: int, sh: int
) -> None:
    """Three zones of several nodes, few of them holding pods: the exact search keeps only
    as many empty nodes of each kind as pods could move, yet reaches the oracle's minimum
    over the whole cluster and proves it."""
    zones = tuple(k // per_zone for k in range(3 * per_zone))
    oracle_pods = tuple(
        OraclePod(node=n, priority=0) for n, count in placed.items() for _ in range(count)
    )
    cluster = OracleCluster(
        zones, oracle_pods, (OracleConstraint("zone", sz), OracleConstraint("hostname", sh))
    )
    expected = joint_minimum(cluster)
    constraints = [zone_constraint("web", sz), zone_constraint("web", sh, key=HOSTNAME_KEY)]
    nodes = tuple(node(f"n{k}", f"z{zone}") for k, zone in enumerate(zones))
    pods = tuple(
        pod(f"p{k}", f"n{p.node}", constraints=constraints, created=1000.0 + k)
        for k, p in enumerate(oracle_pods)
    )
    stats: dict[str, float] = {}
    result = plan(Snapshot(nodes=nodes, pods=pods), Policy(), NOW, stats=stats)
    assert expected is not None
    assert len(result.evictions) == expected
    assert result.minimal
    assert stats.get("joint-exact") == 1


@pytest.mark.parametrize("soft", [False, True])
def test_planning_leaves_no_reference_cycle(soft: bool) -> None:
    """The planner builds no reference cycles (the commands plan with the collector paused,
    so a cycle would keep the whole planning state alive): with the collector off over a plan
    that runs the exact joint search, a collection afterwards finds nothing unreachable."""
    hard = [zone_constraint("web", 1), zone_constraint("web", 1, key=HOSTNAME_KEY)]
    if soft:
        hard[1] = zone_constraint("web", 1, key=HOSTNAME_KEY, when="ScheduleAnyway")
    nodes = tuple(node(f"n{k}", f"z{k // 3}") for k in range(6))
    pods = tuple(pod(f"p{k}", f"n{k % 3}", constraints=hard, created=1000.0 + k) for k in range(6))
    policy = Policy(constraints=("DoNotSchedule", "ScheduleAnyway")) if soft else Policy()
    stats: dict[str, float] = {}
    gc.collect()
    gc.disable()
    try:
        result = plan(Snapshot(nodes=nodes, pods=pods), policy, NOW, stats=stats)
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert stats.get("joint-soft-exact" if soft else "joint-exact") == 1
    assert len(result.evictions) == 3
    assert unreachable == 0
