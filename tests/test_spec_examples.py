"""docs/spec.md's worked examples that tests/data/planner_cases.yaml does not already hold, each
run through the planner. The expected answers are the spec's, derived there by hand."""

from __future__ import annotations

from collections import Counter

from rebalancer.core.model import OwnerRef, Pod, Snapshot
from rebalancer.core.plan import Eviction, Plan, SkipCode, SkipReason
from rebalancer.core.planner import plan
from rebalancer.core.policy import Limits, Policy
from tests.builders import WEB_RS, node, pod, zone_constraint, zones_cluster

NOW = 1_000_000.0
DEFAULT = Policy()


def _zones(zones: list[list[Pod]]) -> Snapshot:
    return Snapshot(
        nodes=tuple(node(f"n-{z}", f"zone-{z}") for z in range(len(zones))),
        pods=tuple(p for pods in zones for p in pods),
    )


def _removed(result: Plan) -> list[int]:
    """Evictions per zone (zone-0, zone-1, ...), as many zones as the cluster has."""
    zones = max((len(v.domains) for v in result.violations), default=0)
    got = Counter(e.domain for e in result.evictions)
    return [got[f"zone-{z}"] for z in range(zones)]


def test_prefer_no_eviction_goes_last_among_equal_priorities() -> None:
    """§3.4 rule 3: zones [3, 1], the youngest pod of the first zone annotated: one eviction,
    the second youngest."""
    c = zone_constraint("web")
    first = [
        pod(f"a{k}", "n-0", constraints=[c], created=float(k), prefer_no_eviction=(k == 2))
        for k in range(3)
    ]
    result = plan(_zones([first, [pod("b0", "n-1", constraints=[c])]]), DEFAULT, NOW)
    assert [e.name for e in result.evictions] == ["a1"]


def test_the_most_populated_domains_before_the_youngest() -> None:
    """§3.4 rule 5: zones [6, 7, 1] with maxSkew 2 need 3; one from the 6 and two from the 7,
    although the 6's pods are all younger than the 7's."""
    c = zone_constraint("web", 2)
    six = [pod(f"a{k}", "n-0", constraints=[c], created=5000.0 + k) for k in range(6)]
    seven = [pod(f"b{k}", "n-1", constraints=[c], created=float(k)) for k in range(7)]
    one = [pod("c0", "n-2", constraints=[c])]
    result = plan(_zones([six, seven, one]), DEFAULT, NOW)
    assert _removed(result) == [1, 2, 0]
    assert [e.wave for e in result.evictions] == [1, 1, 1]


def test_after_an_unhelpful_placement_one_more_eviction() -> None:
    """§3.9: [3, 9, 0, 9] maxSkew 3 takes 5 in one wave; where the worst scheduler leaves
    [5, 6, 3, 7], the next plan takes one pod out of the 7."""
    nodes, pods = zones_cluster([3, 9, 0, 9], 3)
    first = plan(Snapshot(nodes=tuple(nodes), pods=tuple(pods)), DEFAULT, NOW)
    taken = Counter(e.domain for e in first.evictions)  # three from one 9, two from the other
    assert set(taken) == {"zone-b", "zone-d"}
    assert sorted(taken.values()) == [2, 3]
    assert {e.wave for e in first.evictions} == {1}
    nodes, pods = zones_cluster([5, 6, 3, 7], 3)
    second = plan(Snapshot(nodes=tuple(nodes), pods=tuple(pods)), DEFAULT, NOW)
    assert [e.domain for e in second.evictions] == ["zone-d"]


def test_a_move_that_could_return_goes_alone() -> None:
    """§3.9's exception: zones [3 DaemonSet pods, 0, 2] with maxSkew 2: one eviction from the
    third zone, which its replacement could return to, alone in its wave."""
    c = zone_constraint("web", 2)
    daemons = [
        pod(f"d{k}", "n-0", constraints=[c], owner=OwnerRef("DaemonSet", "agent")) for k in range(3)
    ]
    third = [pod(f"c{k}", "n-2", constraints=[c], created=float(k)) for k in range(2)]
    result = plan(_zones([daemons, [], third]), DEFAULT, NOW)
    assert [(e.domain, e.wave) for e in result.evictions] == [("zone-2", 1)]


def _six_in_one_zone() -> Snapshot:
    c = zone_constraint("web")
    return _zones(
        [[pod(f"a{k}", "n-0", constraints=[c], created=float(k)) for k in range(6)], [], []]
    )


def test_limits_count_earlier_runs() -> None:
    """§3.11: [6, 0, 0] needs 4; perWorkload 3 allows 3, and 2 when the Lease records one
    eviction of the workload."""
    snapshot = _six_in_one_zone()
    assert len(plan(snapshot, DEFAULT, NOW).evictions) == 4
    limited = Policy(limits=Limits(per_workload=3))
    assert len(plan(snapshot, limited, NOW).evictions) == 3
    earlier = Eviction(
        namespace="default",
        name="gone",
        uid="uid-gone",
        node="n-0",
        priority=0,
        reason="",
        wave=1,
        workload=f"{WEB_RS.kind}/{WEB_RS.name}",
        domain="zone-0",
        topology_key="topology.kubernetes.io/zone",
        target_node="n-1",
        grace_period_seconds=None,
    )
    assert len(plan(snapshot, limited, NOW, evicted_before=[earlier]).evictions) == 2


def test_a_held_replacement_is_gone_around() -> None:
    """§3.12: [6, 0, 0] with its youngest pod a guarded replacement: the next four youngest."""
    held = {"default/a5": SkipReason(SkipCode.THRASH_GUARD, "replaced default/x")}
    result = plan(_six_in_one_zone(), DEFAULT, NOW, held=held)
    assert sorted(e.name for e in result.evictions) == ["a1", "a2", "a3", "a4"]
