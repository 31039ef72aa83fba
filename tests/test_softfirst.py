"""Hard first, then soft (SPEC §3.6): soft views opted in never cost a hard repair.

The oracle (tests/oracle.py, :func:`~tests.oracle.lexicographic_minimum`) searches every
one-at-a-time sequence of evictions on small clusters: the fewest evictions H bringing the hard
constraints within maxSkew, then the fewest further ones F for the soft constraints, keeping the
hard ones within. The planner, with soft constraints opted in, must evict H + F pods, reach the
hard constraints' balance after exactly as many evictions as it plans with soft views off, and
never leave a hard constraint worse than that plan does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.cluster.read.policyfile import load_policy_file
from rebalancer.cluster.read.snapshot import load_snapshot
from rebalancer.core.joint import JointProblem, JointView, search_then_soft
from rebalancer.core.model import HARD, SOFT, ZONE_KEY
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.oracle import (
    OracleCluster,
    OracleConstraint,
    OraclePod,
    end_counts,
    excess,
    joint_minimum,
    lexicographic_minimum,
    replay_is_legal,
    within_kind,
)
from tests.strategies import NOW  # also loads the project's hypothesis profiles
from tests.test_oracle import PRIORITIES, default_names, snapshot_of, steps_of

ROOT = Path(__file__).resolve().parent.parent
HARD_ONLY = Policy()
HARD_AND_SOFT = Policy(constraints=(HARD, SOFT))
EXAMPLE_NOW = 2_000_000_000.0  # 2033: every pod of the example is old enough


def zone_hard_hostname_soft(zones: list[list[int]], sz: int, sh: int) -> OracleCluster:
    """Nodes listed per zone (pods per node); a hard zone and a soft hostname constraint."""
    node_zones = tuple(z for z, counts in enumerate(zones) for _ in counts)
    counts = [n for per_zone in zones for n in per_zone]
    pods = tuple(
        OraclePod(node=k, priority=0) for k, count in enumerate(counts) for _ in range(count)
    )
    constraints = (OracleConstraint("zone", sz), OracleConstraint("hostname", sh, soft=True))
    return OracleCluster(node_zones, pods, constraints)


def hard_prefix(cluster: OracleCluster, steps: list[tuple[int, int]]) -> int | None:
    """How many of the steps it takes until every hard constraint is within maxSkew."""
    for k in range(len(steps) + 1):
        if within_kind(cluster, end_counts(cluster, steps[:k]), soft=False):
            return k
    return None


def plans(cluster: OracleCluster) -> tuple[Plan, Plan, list[str]]:
    """The plans with soft views off and on, and the node names."""
    names, zone_names = default_names(cluster)
    snapshot = snapshot_of(cluster, names, zone_names)
    return plan(snapshot, HARD_ONLY, NOW), plan(snapshot, HARD_AND_SOFT, NOW), names


@pytest.mark.parametrize(
    ("zones", "sz", "sh", "expected"),
    [
        ([[2, 2, 2], [0, 0, 0]], 1, 1, 3),
        ([[0, 0], [5, 3]], 1, 1, 4),
        ([[4, 5], [0, 0], [0, 1]], 1, 1, 5),
    ],
)
def test_soft_shapes_reach_the_lexicographic_minimum(
    zones: list[list[int]], sz: int, sh: int, expected: int
) -> None:
    """Hard zone and soft hostname constraints on one workload (nodes listed per zone): the
    oracle's hard minimum is already enough for both, and the plan evicts exactly that many,
    balancing the zones after as many evictions as the plan with soft views off."""
    cluster = zone_hard_hostname_soft(zones, sz, sh)
    assert lexicographic_minimum(cluster) == (expected, 0)
    assert joint_minimum(cluster) == expected
    hard_only, both, names = plans(cluster)
    steps = steps_of(both, names)
    assert replay_is_legal(cluster, steps)
    assert len(both.evictions) == expected
    assert hard_prefix(cluster, steps) == len(hard_only.evictions) == expected
    end = end_counts(cluster, steps)
    assert all(excess(cluster, c, end) == 0 for c in cluster.constraints)


def test_example_soft_policy_repairs_the_hard_web_zone_view() -> None:
    """examples/skewed-cluster.yaml with policies/examples/soft-and-defaults.yaml: the hard
    zone view of shop's web pods ends within maxSkew, as with the default policy, and no
    hard view ends further above its maxSkew than with the default policy."""
    snapshot = load_snapshot(ROOT / "examples" / "skewed-cluster.yaml")
    soft_policy = load_policy_file(ROOT / "policies" / "examples" / "soft-and-defaults.yaml")
    hard_only = plan(snapshot, HARD_ONLY, EXAMPLE_NOW)
    both = plan(snapshot, soft_policy, EXAMPLE_NOW)

    def hard_after(p: Plan) -> dict[tuple[str, str, str], int]:
        return {
            (r.namespace, r.topology_key, r.selector): r.skew - r.max_skew
            for r in p.after
            if r.when_unsatisfiable == HARD
        }

    web = [
        r
        for r in both.after
        if r.namespace == "shop"
        and r.topology_key == ZONE_KEY
        and r.selector.startswith("app=web")
        and r.when_unsatisfiable == HARD
    ]
    assert len(web) == 1
    assert web[0].skew <= web[0].max_skew
    before, after = hard_after(hard_only), hard_after(both)
    assert before.keys() == after.keys()
    for key, left in before.items():
        assert after[key] <= left, key
    assert len(both.evictions) >= len(hard_only.evictions)


@pytest.mark.parametrize(
    ("zones", "sz", "sh", "min_domains", "expected"),
    [
        ([[2, 2, 2], [0, 0, 0]], 1, 1, 1, (3, 3)),
        ([[0, 0], [5, 3]], 1, 1, 1, (4, 4)),
        ([[4, 5], [0, 0], [0, 1]], 1, 1, 1, (5, 5)),
        ([[4, 0], [0, 0]], 1, 1, 1, (2, 3)),
        ([[5, 0], [0, 1], [0, 0]], 2, 1, 1, (2, 4)),
        ([[6, 0], [0, 0]], 3, 2, 1, (2, 3)),
        ([[4, 0], [2, 0]], 3, 1, 3, (1, 2)),
        ([[3, 0, 0], [3, 0, 0]], 3, 1, 1, (0, 4)),
    ],
)
def test_search_then_soft_finds_the_oracle_lexicographic_minimum(
    zones: list[list[int]], sz: int, sh: int, min_domains: int, expected: tuple[int, int]
) -> None:
    """The exact search with a hard zone and a soft hostname view (nodes listed per zone,
    maxSkew 1-3, minDomains above the zones in one case): its hard part and its total are the
    oracle's H and H + F, and every end state it lists has both views within maxSkew; the
    plan evicts H + F pods and balances the zones after as many as it plans without soft
    views."""
    shape = zone_hard_hostname_soft(zones, sz, sh)
    constraints = (
        OracleConstraint("zone", sz, min_domains),
        OracleConstraint("hostname", sh, soft=True),
    )
    cluster = OracleCluster(shape.zones, shape.pods, constraints)
    best = lexicographic_minimum(cluster)
    assert best is not None and best[1] is not None
    assert (best[0], best[0] + best[1]) == expected
    node_zones = cluster.zones
    start = cluster.start()
    problem = JointProblem(
        views=(JointView(node_zones, len(zones), sz, len(zones) < min_domains),),
        start=start,
        movable=start,
        cap=tuple(c + 100 for c in start),
        accepts=(True,) * len(start),
        soft=(JointView(tuple(range(len(start))), len(start), sh, False),),
    )
    result = search_then_soft(problem)
    assert result.complete
    assert (result.hard, result.minimum) == expected
    for (counts, _), path in result.ends.items():
        assert len(path) == expected[1]
        assert within_kind(cluster, counts, soft=False)
        assert within_kind(cluster, counts, soft=True)
    hard_only, both, names = plans(cluster)
    steps = steps_of(both, names)
    assert replay_is_legal(cluster, steps)
    assert len(both.evictions) == expected[1]
    assert hard_prefix(cluster, steps) == len(hard_only.evictions) == expected[0]
    assert within_kind(cluster, end_counts(cluster, steps), soft=True)


@st.composite
def soft_clusters(draw: st.DrawFn) -> OracleCluster:
    """One workload on 2-3 zones of 1-3 nodes, up to 8 pods placed in bursts, some pinned;
    a hard and a soft constraint (one on zones, one on hostnames, either way round), maxSkew
    1-3, minDomains on the hard one sometimes above the zones."""
    zone_count = draw(st.integers(2, 3))
    zones: list[int] = []
    for z in range(zone_count):
        zones.extend([z] * draw(st.integers(1, 3)))
    size = draw(st.integers(2, 8))
    homes = draw(st.lists(st.sampled_from(range(len(zones))), min_size=1, max_size=3, unique=True))
    pods = tuple(
        OraclePod(
            node=draw(st.sampled_from(homes)),
            priority=draw(st.sampled_from(PRIORITIES)),
            evictable=draw(st.integers(0, 7)) != 0,
        )
        for _ in range(size)
    )
    hard_key = draw(st.sampled_from(("zone", "hostname")))
    soft_key = "hostname" if hard_key == "zone" else "zone"
    domains = zone_count if hard_key == "zone" else len(zones)
    min_domains = draw(st.sampled_from((1, 1, 1, 2, domains + 1)))
    constraints = (
        OracleConstraint(hard_key, draw(st.integers(1, 3)), min_domains),
        OracleConstraint(soft_key, draw(st.integers(1, 3)), soft=True),
    )
    return OracleCluster(tuple(zones), pods, constraints)


@settings(max_examples=150, deadline=None)
@given(soft_clusters())
def test_soft_views_never_cost_a_hard_repair(cluster: OracleCluster) -> None:
    """A hard and a soft constraint on one workload, soft views opted in: every placement
    passes the hard filters; the hard constraints are within maxSkew after exactly as many
    evictions as the plan with soft views off makes, and end no worse than that plan leaves
    them; when the oracle can bring the soft constraint within maxSkew too, the plan has the
    oracle's lexicographic minimum of evictions and does so."""
    hard_only, both, names = plans(cluster)
    steps = steps_of(both, names)
    assert replay_is_legal(cluster, steps)
    off_end = end_counts(cluster, steps_of(hard_only, names))
    end = end_counts(cluster, steps)
    hard = [c for c in cluster.constraints if not c.soft]
    for c in hard:
        assert excess(cluster, c, end) <= excess(cluster, c, off_end)
    best = lexicographic_minimum(cluster)
    if best is None:
        return  # the hard constraint cannot be brought within maxSkew
    first, further = best
    assert len(hard_only.evictions) == first
    assert hard_prefix(cluster, steps) == first
    assert within_kind(cluster, end, soft=False)
    if further is not None:
        assert len(both.evictions) == first + further
        assert within_kind(cluster, end, soft=True)
