"""The planner against the exhaustive oracle of tests/oracle.py on small random clusters."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.minimal import min_moves
from rebalancer.core.model import HARD, HOSTNAME_KEY, SOFT, ZONE_KEY, Node, Pod, Snapshot
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint
from tests.oracle import (
    OracleCluster,
    OracleConstraint,
    OraclePod,
    best_priorities,
    best_victims,
    end_counts,
    excess,
    joint_minimum,
    per_domain,
    replay_is_legal,
)
from tests.strategies import NOW  # also loads the project's hypothesis profiles

PINNED_PRIORITY = 2_000_000_000  # at the default threshold: never evicted
PRIORITIES = (0, 0, 100, 1000)


@st.composite
def oracle_clusters(draw: st.DrawFn, *, keys: str, pinned: bool = False) -> OracleCluster:
    """A small cluster: 2-4 zones of 1-2 nodes (zone only) or 2-3 zones of 1-4 nodes (both
    keys), up to 9 pods of one workload placed in bursts, mixed priorities."""
    zone_count = draw(st.integers(2, 4 if keys == "zone" else 3))
    zones: list[int] = []
    for z in range(zone_count):
        zones.extend([z] * draw(st.integers(1, 2 if keys == "zone" else 4)))
    size = draw(st.integers(2, 9))
    homes = draw(st.lists(st.sampled_from(range(len(zones))), min_size=1, max_size=3, unique=True))
    pods = tuple(
        OraclePod(
            node=draw(st.sampled_from(homes)),
            priority=draw(st.sampled_from(PRIORITIES)),
            evictable=not (pinned and draw(st.integers(0, 5)) == 0),
        )
        for _ in range(size)
    )
    constraints = [
        OracleConstraint(
            "zone",
            draw(st.integers(1, 2)),
            draw(st.sampled_from((1, 1, 1, zone_count + 1))) if keys == "zone" else 1,
        )
    ]
    if keys == "both":
        constraints.append(OracleConstraint("hostname", draw(st.integers(1, 2))))
    return OracleCluster(tuple(zones), pods, tuple(constraints))


def snapshot_of(
    cluster: OracleCluster, node_names: Sequence[str], zone_names: Sequence[str]
) -> Snapshot:
    """The cluster as the planner reads it: node k is ``node_names[k]`` in zone
    ``zone_names[zones[k]]``; pod k is ``p{k}``, created at 1000 + k."""
    constraints = [
        zone_constraint(
            "web",
            c.max_skew,
            key=ZONE_KEY if c.key == "zone" else HOSTNAME_KEY,
            when=SOFT if c.soft else HARD,
            min_domains=c.min_domains,
        )
        for c in cluster.constraints
    ]
    nodes: list[Node] = [
        node(name, zone_names[cluster.zones[k]]) for k, name in enumerate(node_names)
    ]
    pods: list[Pod] = [
        pod(
            f"p{k}",
            node_names[p.node],
            constraints=constraints,
            priority=p.priority if p.evictable else PINNED_PRIORITY,
            created=1000.0 + k,
        )
        for k, p in enumerate(cluster.pods)
    ]
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods))


def default_names(cluster: OracleCluster) -> tuple[list[str], list[str]]:
    """Node and zone names in index order."""
    zone_names = [f"zone-{z}" for z in range(max(cluster.zones) + 1)]
    return [f"node-{k}" for k in range(len(cluster.zones))], zone_names


def steps_of(result: Plan, node_names: Sequence[str]) -> list[tuple[int, int]]:
    """The plan as (pod index, target node index) steps, in plan order."""
    index = {name: k for k, name in enumerate(node_names)}
    out = []
    for e in result.evictions:
        assert e.target_node is not None
        out.append((int(e.name[1:]), index[e.target_node]))
    return out


@settings(max_examples=120)
@given(oracle_clusters(keys="zone"))
def test_single_constraint_size_and_victims_match_the_oracle(cluster: OracleCluster) -> None:
    """One zone constraint, mixed priorities: the plan has SPEC's formula's size, equal to
    the oracle's minimum, and its victims' priorities are the oracle's lexicographic best."""
    best = joint_minimum(cluster)
    if best is None:
        return  # no end state within maxSkew (minDomains above the zones); covered elsewhere
    names, zone_names = default_names(cluster)
    result = plan(snapshot_of(cluster, names, zone_names), Policy(), NOW)
    (c,) = cluster.constraints
    formula = min_moves(per_domain(cluster, c, cluster.start()), c.max_skew, c.min_domains)
    assert len(result.evictions) == formula == best
    assert result.minimal
    oracle = best_victims(cluster, best)
    assert oracle is not None
    priorities = tuple(sorted((e.priority for e in result.evictions), reverse=True))
    assert priorities == oracle[1]
    steps = steps_of(result, names)
    assert replay_is_legal(cluster, steps)


@settings(max_examples=120)
@given(oracle_clusters(keys="both", pinned=True))
def test_zone_and_hostname_plan_reaches_the_joint_minimum(cluster: OracleCluster) -> None:
    """Zone + hostname on one workload: when balance is reachable the plan has the oracle's
    joint minimum of evictions, is proven minimal and its victims' priorities are the best
    any minimal plan has; otherwise no constraint ends worse; either way every replayed
    placement passes the filter at its time."""
    names, zone_names = default_names(cluster)
    result = plan(snapshot_of(cluster, names, zone_names), Policy(), NOW)
    steps = steps_of(result, names)
    assert replay_is_legal(cluster, steps)
    end = end_counts(cluster, steps)
    best = joint_minimum(cluster)
    if best is not None:
        assert len(result.evictions) == best
        assert all(excess(cluster, c, end) == 0 for c in cluster.constraints)
        if best:
            assert result.minimal
            assert result.lower_bound == best
            priorities = tuple(sorted((e.priority for e in result.evictions), reverse=True))
            assert priorities == best_priorities(cluster, best)
    else:
        for c in cluster.constraints:
            assert excess(cluster, c, end) <= excess(cluster, c, cluster.start())


@settings(max_examples=100)
@given(st.data())
def test_renaming_domains_and_nodes_gives_the_same_plan(data: st.DataObject) -> None:
    """Any renaming of the nodes and zones gives the same victims, bound and end counts per
    view (as a multiset: SPEC §3.3 breaks ties between equally empty domains by node name, so
    which of them takes a replacement may follow the names)."""
    cluster = data.draw(
        st.sampled_from(("zone", "both")).flatmap(
            lambda keys: oracle_clusters(keys=keys, pinned=keys == "both")
        )
    )
    names, zone_names = default_names(cluster)
    pool = [f"n{chr(97 + k)}" for k in range(len(names))]
    renamed = data.draw(st.permutations(pool), label="nodes")
    zone_pool = [f"z{chr(97 + k)}" for k in range(len(zone_names))]
    renamed_zones = data.draw(st.permutations(zone_pool), label="zones")
    first = plan(snapshot_of(cluster, names, zone_names), Policy(), NOW)
    second = plan(snapshot_of(cluster, renamed, renamed_zones), Policy(), NOW)
    assert {e.uid for e in first.evictions} == {e.uid for e in second.evictions}
    assert len(first.after) == len(second.after)
    for a, b in zip(first.after, second.after, strict=True):
        assert sorted(n for _, n in a.domains) == sorted(n for _, n in b.domains)
    assert first.lower_bound == second.lower_bound
