"""The planning pass's named state keeps the invariants its docstrings state: the pinned
counts (rebalancer.core.distances) and the victim ranking's PDB budget
(rebalancer.core.ranking), checked against recounts from their definitions."""

from __future__ import annotations

import dataclasses
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.model import Snapshot
from rebalancer.core.planner import run
from rebalancer.core.planpass import PlanningPass
from rebalancer.core.policy import Policy
from rebalancer.core.selectors import selector_matches
from tests.builders import zones_cluster
from tests.strategies import NOW, clusters, policies


def _pinned_recount(planner: PlanningPass, v: ViewId) -> Counter[str]:
    """View v's pods that cannot move, recounted: the view's pods with a skip reason where they
    run from the start, and each moved pod the view's selector matches where its replacement
    is now."""
    analysis = planner.analysis
    view = analysis.views[v]
    spec = view.spec
    out: Counter[str] = Counter()
    for i in view.members:
        if planner.ranking.skip(i) is not None:
            out[view.node_domain[analysis.pods[i].node_name or ""]] += 1
    for i in planner.ranking.taken:
        pod = analysis.pods[i]
        node = planner.state.placement.get(i)
        matches = pod.namespace == spec.namespace and selector_matches(
            spec.constraint.selector, pod.labels
        )
        if matches and node is not None and node in view.node_domain:
            out[view.node_domain[node]] += 1
    return out


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_pinned_counts_equal_a_recount_after_the_moves(data: st.DataObject) -> None:
    """Pinned counts built before the moves and kept up move by move, and pinned counts built
    only after them, both equal the recount from their definition."""
    cluster = data.draw(clusters())
    policy = data.draw(policies(limits=False))
    early = PlanningPass(cluster.snapshot, policy, NOW, ())
    for v in early.considered:
        early.distances.pinned(v)
    run(early)
    late = PlanningPass(cluster.snapshot, policy, NOW, ())
    run(late)
    for planner in (early, late):
        for v in planner.considered:
            got = +planner.distances.pinned(v)  # unary plus drops domains counted to 0
            assert got == _pinned_recount(planner, v), v


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_pdb_budget_left_counts_the_pods_taken(data: st.DataObject) -> None:
    """After the moves, each PodDisruptionBudget's budget left is its disruptionsAllowed less
    the pods taken that it covers; every pod taken is one no rule forbids, taken once."""
    cluster = data.draw(clusters())
    policy = data.draw(policies(limits=False))
    planner = PlanningPass(cluster.snapshot, policy, NOW, ())
    moves = run(planner)
    ranking = planner.ranking
    assert sorted(ranking.taken) == sorted({m.pod for m in moves})
    assert len(moves) == len(ranking.taken)
    budgets = planner.ctx.budgets
    spent: Counter[int] = Counter()
    for i in ranking.taken:
        assert ranking.skip(i) is None
        assert not ranking.evictable(i)
        spent.update(budgets.judge(planner.analysis.pods[i])[1])
    assert ranking.pdb_left == [budgets.allowed[k] - spent[k] for k in range(len(budgets.pdbs))]


def test_the_distance_of_the_planner_docstring_example() -> None:
    """Zones [4, 2, 0, 0] with maxSkew 1 are 2 evictions from balance (the planner's worked
    example); to skew 3 they are 1 away ([3, 2, 1, 0]), and the counts as they stand are
    already within skew 4."""
    nodes, pods = zones_cluster([4, 2, 0, 0])
    planner = PlanningPass(Snapshot(nodes=tuple(nodes), pods=tuple(pods)), Policy(), NOW, ())
    (v,) = planner.violated
    assert planner.distances.at_start(v) == 2
    assert planner.distances.now(v) == 2
    assert planner.distances.from_start(v, 3) == 1
    assert planner.distances.from_start(v, 4) == 0


BARE = {"web-zone-a-1", "web-zone-a-2", "web-zone-a-3"}


def test_a_pod_no_rule_lets_move_is_pinned_from_the_start() -> None:
    """Zones [4, 2, 0, 0], three of zone-a's pods without a controller: they are pinned there,
    and the pod taken stops being evictable and spends no budget it does not have."""
    nodes, pods = zones_cluster([4, 2, 0, 0])
    bare = [dataclasses.replace(p, owner=None) if p.name in BARE else p for p in pods]
    planner = PlanningPass(Snapshot(nodes=tuple(nodes), pods=tuple(bare)), Policy(), NOW, ())
    (v,) = planner.violated
    assert planner.distances.pinned(v) == Counter({"zone-a": 3})
    first = PodId(0)  # web-zone-a-0, the one pod of zone-a with a controller
    assert planner.analysis.pods[first].name == "web-zone-a-0"
    assert planner.ranking.evictable(first)
    planner.ranking.take(first)
    assert not planner.ranking.evictable(first)
    assert planner.ranking.pdb_left == []
