"""Which way a replacement that waits for a new node goes, and the back-off after a reservation
that brought no node (SPEC §5.10, §3.12): decided by the planner and shown in the plan.

The hand-drawn cluster: zone maxSkew 1 (DoNotSchedule) over "web" (one ReplicaSet), 500m pods.
n-a (zone-a, 2500m) holds five, full; n-b (zone-b, 500m) one, full; n-c (zone-c, 500m) one,
full. Counts a:5 b:1 c:1, global min 1. Pool pb can add nodes in zone-b only, pc in zone-c
only. Worked by hand:

- No hold. First move: without the pod a:4 b:1 c:1; no node has room where the spread allows
  (n-b, n-c at count 1); waiting where a pool can add a node, n-b first by name: the
  replacement waits for pb in zone-b. a:4 b:2 c:1. Second move: a:3 b:2 c:1; only zone-c is
  allowed (b: 2 + 1 - 1 > 1), n-c has no room, pc can add one there. a:3 b:2 c:2, skew 1:
  two evictions, the first pinned to pb/zone-b, the second to pc/zone-c.
- pb/zone-b refused for web less than the back-off ago: every first move lands in zone-b and is
  held; no eviction repairs anything without zone-b gaining a pod (its count stays 1, so zone-a
  can hold at most 2 and zone-c at most 2: 5 + 1 + 1 pods do not fit). Nothing is evicted; the
  view is left at skew 4, its five zone-a pods held by ``capacity-not-added``.
- pc/zone-c refused: the first move is made (zone-b); the second lands in zone-c and is held.
  One eviction, skew 3 left, its four zone-a pods held by ``capacity-not-added``.
"""

from __future__ import annotations

from dataclasses import replace

import hypothesis.strategies as st
from hypothesis import given, settings

from rebalancer.core.capacity import CapacityRules, Refused, pin_of, refusal_key
from rebalancer.core.holds import HoldRules, LoopMemory
from rebalancer.core.karpenter.marks import NODEPOOL_LABEL
from rebalancer.core.model import HARD, SOFT, ZONE_KEY, NodePool, NodeSelectorRequirement, Snapshot
from rebalancer.core.plan import Eviction, Plan, SkipCode
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint

NOW = 100_000.0
WEB = "default/ReplicaSet/web-abc"
RESERVING = HoldRules(capacity=CapacityRules(True, "served and allowed"))


def _in(zone: str) -> tuple[NodeSelectorRequirement, ...]:
    return (NodeSelectorRequirement(ZONE_KEY, "In", (zone,)),)


def _cluster(names: dict[str, str] | None = None) -> Snapshot:
    """The drawn cluster; ``names`` renames zones, nodes and pools (order kept)."""
    n = names or {}

    def r(x: str) -> str:
        return n.get(x, x)

    c = zone_constraint("web")
    nodes = (
        node(r("n-a"), r("zone-a"), cpu=2500),
        node(r("n-b"), r("zone-b"), cpu=500),
        node(r("n-c"), r("zone-c"), cpu=500),
    )
    pods = [
        pod(f"web-a{k}", r("n-a"), constraints=[c], cpu=500, created=1000 + k) for k in range(5)
    ]
    pods += [
        pod("web-b", r("n-b"), constraints=[c], cpu=500),
        pod("web-c", r("n-c"), constraints=[c], cpu=500),
    ]
    pools = (
        NodePool(r("pb"), requirements=_in(r("zone-b"))),
        NodePool(r("pc"), requirements=_in(r("zone-c"))),
    )
    return Snapshot(nodes=nodes, pods=tuple(pods), node_pools=pools)


def _refused(pool: str, zone: str, since: float = NOW - 100) -> LoopMemory:
    why = f"NodePool {pool} added no node in {zone} within 10m"
    return LoopMemory(refused={refusal_key(WEB, pin_of(pool, zone)): Refused(since, why)})


def _plan(
    snapshot: Snapshot, rules: HoldRules | None = None, memory: LoopMemory | None = None
) -> Plan:
    return plan(snapshot, Policy(node_fit=True), NOW, rules=rules, memory=memory)


def _ways(result: Plan) -> list[tuple[str, str | None, str, dict[str, str]]]:
    return [(e.name, e.target_node, e.capacity, dict(e.reserve_in)) for e in result.evictions]


def _held(result: Plan) -> list[tuple[int, int, str, int]]:
    return [
        (u.skew_before, u.skew_after, h.code, h.pods) for u in result.unrepaired for h in u.reasons
    ]


PB = {NODEPOOL_LABEL: "pb", ZONE_KEY: "zone-b"}
PC = {NODEPOOL_LABEL: "pc", ZONE_KEY: "zone-c"}


def test_without_a_buffer_api_waiting_replacements_are_evicted_first() -> None:
    result = _plan(_cluster())
    assert _ways(result) == [("web-a4", "n-b", "await", PB), ("web-a3", "n-c", "await", PC)]
    assert all(e.reason.split("; ")[1].endswith(", evicted first") for e in result.evictions)
    assert result.unrepaired == ()


def test_with_one_they_are_reserved_first() -> None:
    result = _plan(_cluster(), RESERVING)
    assert _ways(result) == [("web-a4", "n-b", "reserve", PB), ("web-a3", "n-c", "reserve", PC)]
    assert all(e.reason.split("; ")[1].endswith(", reserved first") for e in result.evictions)


def test_a_replacement_that_fits_a_node_goes_no_way() -> None:
    roomy = _cluster()
    roomy = replace(roomy, nodes=(*roomy.nodes[:2], node("n-c", "zone-c", cpu=1000)))
    first, second = _plan(roomy, RESERVING).evictions
    assert (first.target_node, first.capacity, first.reserve_in) == ("n-c", "", ())
    assert (second.target_node, second.capacity, dict(second.reserve_in)) == ("n-b", "reserve", PB)


def test_a_refused_reservation_holds_the_landings_there_for_the_back_off() -> None:
    result = _plan(_cluster(), RESERVING, _refused("pb", "zone-b"))
    assert result.evictions == ()
    assert _held(result) == [(4, 4, "capacity-not-added", 5)]
    (hold,) = result.unrepaired[0].reasons
    assert hold.detail.startswith("NodePool pb added no node in zone-b within 10m (100s ago")
    assert "capacity-not-added" in result.holds

    result = _plan(_cluster(), RESERVING, _refused("pc", "zone-c"))
    assert _ways(result) == [("web-a4", "n-b", "reserve", PB)]
    assert _held(result) == [(4, 3, "capacity-not-added", 4)]
    assert {s.reason.code for s in result.skipped} == {SkipCode.CAPACITY_NOT_ADDED}


def test_the_back_off_ends() -> None:
    expired = _refused("pb", "zone-b", since=NOW - RESERVING.capacity.backoff_seconds)
    assert _ways(_plan(_cluster(), RESERVING, expired)) == _ways(_plan(_cluster(), RESERVING))


def test_without_reserving_a_refusal_holds_nothing() -> None:
    """Nothing was asked for when replacements are evicted first: no back-off applies."""
    memory = _refused("pb", "zone-b")
    assert _ways(_plan(_cluster(), None, memory)) == _ways(_plan(_cluster()))
    assert "capacity-not-added" not in _plan(_cluster(), None, memory).holds


def test_another_workloads_refusal_holds_nothing() -> None:
    other = LoopMemory(
        refused={
            refusal_key("default/ReplicaSet/api", pin_of("pb", "zone-b")): Refused(NOW, "x"),
        }
    )
    assert _ways(_plan(_cluster(), RESERVING, other)) == _ways(_plan(_cluster(), RESERVING))


def test_renaming_keeps_the_decisions() -> None:
    names = {
        "zone-a": "east-1",
        "zone-b": "east-2",
        "zone-c": "east-3",
        "n-a": "m-01",
        "n-b": "m-02",
        "n-c": "m-03",
        "pb": "gp-b",
        "pc": "gp-c",
    }
    result = _plan(_cluster(names), RESERVING)
    assert _ways(result) == [
        ("web-a4", "m-02", "reserve", {NODEPOOL_LABEL: "gp-b", ZONE_KEY: "east-2"}),
        ("web-a3", "m-03", "reserve", {NODEPOOL_LABEL: "gp-c", ZONE_KEY: "east-3"}),
    ]
    refused = LoopMemory(
        refused={refusal_key(WEB, pin_of("gp-c", "east-3")): Refused(NOW - 100, "no node")}
    )
    assert _held(_plan(_cluster(names), RESERVING, refused)) == [(4, 3, "capacity-not-added", 4)]


# --------------------------------------------------------------------------------------------
# Generated clusters: what the way changes, and what it must not


@st.composite
def _clusters(draw: st.DrawFn) -> Snapshot:
    zones = [f"z{k}" for k in range(draw(st.integers(3, 4)))]
    skew = draw(st.integers(1, 3))
    when = draw(st.sampled_from([HARD, SOFT]))
    c = zone_constraint("web", max_skew=skew, when=when, min_domains=draw(st.integers(1, 4)))
    nodes, pods, pools = [], [], []
    for k, z in enumerate(zones):
        # the crowded zones roomy; the others with room for none or one more pod of 500m
        cpu = 8000 if k < 2 else draw(st.sampled_from([500, 1000]))
        nodes.append(node(f"n-{z}", z, cpu=cpu))
        if k >= 2:
            filler = pod(f"other-{z}", f"n-{z}", cpu=500, labels={"app": "other"}, owner=None)
            pods.append(filler)
        if draw(st.integers(0, 3)):
            pools.append(NodePool(f"p-{z}", requirements=_in(z)))
    for k in range(draw(st.integers(4, 10))):
        z = draw(st.sampled_from(zones[:2]))
        pods.append(pod(f"web-{k}", f"n-{z}", constraints=[c], cpu=500, created=1000 + k))
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods), node_pools=tuple(pools))


def _same_moves(e: Eviction) -> tuple[object, ...]:
    return (e.name, e.target_node, e.wave, e.waits_for, e.reserve_in)


@settings(max_examples=60, deadline=None)
@given(_clusters())
def test_the_way_changes_no_move(snapshot: Snapshot) -> None:
    """Reserving or not, the same pods move to the same places; every waiting replacement
    carries the way and the labels of the pool and zone it waits in, every other none."""
    awaited = _plan(snapshot)
    reserved = _plan(snapshot, RESERVING)
    assert [_same_moves(e) for e in awaited.evictions] == [
        _same_moves(e) for e in reserved.evictions
    ]
    zones = {n.name: n.labels[ZONE_KEY] for n in snapshot.nodes}
    for result, way in ((awaited, "await"), (reserved, "reserve")):
        for e in result.evictions:
            if not e.waits_for:
                assert (e.capacity, e.reserve_in) == ("", ())
                continue
            pin = dict(e.reserve_in)
            assert e.capacity == way
            assert e.target_node is not None
            assert pin == {
                NODEPOOL_LABEL: f"p-{zones[e.target_node]}",
                ZONE_KEY: zones[e.target_node],
            }
            assert e.waits_for == f"NodePool {pin[NODEPOOL_LABEL]} in {pin[ZONE_KEY]}"


@settings(max_examples=60, deadline=None)
@given(_clusters(), st.data())
def test_no_replacement_waits_where_a_reservation_was_refused(
    snapshot: Snapshot, data: st.DataObject
) -> None:
    """A refused pool and zone gets no waiting replacement of the workload for the back-off;
    pods that do not wait, and other pools and zones, are planned as before or held."""
    before = _plan(snapshot, RESERVING)
    waited = sorted({dict(e.reserve_in)[ZONE_KEY] for e in before.evictions if e.reserve_in})
    zones = sorted({n.labels[ZONE_KEY] for n in snapshot.nodes})
    zone = data.draw(st.sampled_from(waited or zones))
    memory = _refused(f"p-{zone}", zone)
    result = _plan(snapshot, RESERVING, memory)
    refused = {NODEPOOL_LABEL: f"p-{zone}", ZONE_KEY: zone}
    assert all(dict(e.reserve_in) != refused for e in result.evictions)
    if all(dict(e.reserve_in) != refused for e in before.evictions):
        assert _ways(result) == _ways(before)  # nothing waited there: nothing changes
    else:
        codes = {h.code for u in result.unrepaired for h in u.reasons}
        assert result.evictions != before.evictions
        assert SkipCode.CAPACITY_NOT_ADDED in codes or len(result.evictions) > 0
