"""``nodeFit: true`` beside Karpenter's NodePools: a replacement that fits no existing node is
planned into a domain where a pool can add a node for it, and nowhere else (SPEC §5.10). Every
expectation is worked out by hand from the cluster drawn below.

Zone maxSkew 1 (DoNotSchedule) over "web". n-a (zone-a, 2500m) holds five 500m pods, full;
n-b (zone-b, 500m) one, full; n-c (zone-c, ``c_cpu``) one. Counts a:5 b:1 c:1, global min 1.
Pools: pa can add nodes in zone-a only, pb in zone-b only; zone-c has none.

- c_cpu 500 (all full). First move: without the pod, a:4 b:1 c:1. No node has room where its
  spread allows (n-b, n-c at count 1; zone a: 4 + 1 - 1 > 1). Again, waiting where a pool can
  add a node: n-b first by name, pb can add a node in zone-b: the replacement waits for it
  there. Counts a:4 b:2 c:1. Second move: without the pod, a:3 b:2 c:1; zone c (1 + 1 - 1) is
  the only domain the spread allows (b: 2 + 1 - 1 > 1), n-c has no room and no pool can add a
  node in zone-c: no-fit, naming both pools' refusals for zone-c. One eviction.
- c_cpu 1000 (room for one on n-c): a node with room comes before a new one. First move: n-b
  (no room) and n-c (room) tie at count 1: n-c. Counts a:4 b:1 c:2. Second move: a:3 b:1 c:2
  without the pod; zone b only (c: 2 + 1 - 1 > 1), n-b has no room, pb can add a node there:
  the replacement waits in zone-b. Counts a:3 b:2 c:2: skew 1, repaired.
"""

from __future__ import annotations

from rebalancer.core.model import ZONE_KEY, NodePool, NodeSelectorRequirement, Snapshot
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint

FULL = "replacement would stay Pending: no node has room for its requests"
NOT_C = "its nodes cannot be in topology.kubernetes.io/zone=zone-c"


def _in(zone: str) -> tuple[NodeSelectorRequirement, ...]:
    return (NodeSelectorRequirement(ZONE_KEY, "In", (zone,)),)


POOLS = (
    NodePool(name="pa", requirements=_in("zone-a")),
    NodePool("pb", requirements=_in("zone-b")),
)


def _cluster(c_cpu: int = 500, pools: tuple[NodePool, ...] = POOLS) -> Snapshot:
    c = zone_constraint("web")
    nodes = (
        node("n-a", "zone-a", cpu=2500),
        node("n-b", "zone-b", cpu=500),
        node("n-c", "zone-c", cpu=c_cpu),
    )
    pods = [pod(f"web-a{k}", "n-a", constraints=[c], cpu=500, created=1000 + k) for k in range(5)]
    pods += [
        pod("web-b", "n-b", constraints=[c], cpu=500),
        pod("web-c", "n-c", constraints=[c], cpu=500),
    ]
    return Snapshot(nodes=nodes, pods=tuple(pods), node_pools=pools)


def _plan(snapshot: Snapshot, limit: int | None = None) -> Plan:
    return plan(snapshot, Policy(node_fit=True, max_waiting_for_nodes=limit), 100_000.0)


def _landings(result: Plan) -> list[tuple[str | None, str]]:
    """Each eviction's target and what its reason says of the replacement."""
    return [(e.target_node, e.reason.split("; ")[1]) for e in result.evictions]


def _no_fit(result: Plan) -> set[str]:
    return {s.reason.detail for s in result.skipped if s.reason.code == "no-fit"}


WAITS_IN_B = (
    "replacement waits for a node from NodePool pb in zone-b (node n-b has no room), evicted first"
)


def test_without_pools_nothing_is_planned() -> None:
    result = _plan(_cluster(pools=()))
    assert result.evictions == ()
    assert _no_fit(result) == {FULL}


def test_a_replacement_waits_only_in_the_zone_a_pool_can_add_a_node_in() -> None:
    result = _plan(_cluster())
    assert _landings(result) == [("n-b", WAITS_IN_B)]
    assert _no_fit(result) == {
        FULL + f"; no NodePool can add a node in zone-c for this pod (pa: {NOT_C}; pb: {NOT_C})"
    }


def test_a_node_with_room_comes_before_a_new_node() -> None:
    result = _plan(_cluster(c_cpu=1000))
    assert _landings(result) == [
        ("n-c", "replacement expected in zone-c (node n-c)"),
        ("n-b", WAITS_IN_B),
    ]
    # what a loop's --wait-for-nodes-after holds back: only the one that needs a new node
    assert [e.waits_for for e in result.evictions] == ["", "NodePool pb in zone-b"]
    assert _no_fit(result) == set()


def test_the_waiting_replacement_counts_against_max_waiting_for_nodes() -> None:
    # c_cpu 1000, limit 1: as above (only the second waits). Limit 0: the first lands on n-c,
    # the second may not wait in zone-b.
    assert len(_plan(_cluster(c_cpu=1000), 1).evictions) == 2
    result = _plan(_cluster(c_cpu=1000), 0)
    assert _landings(result) == [("n-c", "replacement expected in zone-c (node n-c)")]
    assert _no_fit(result) == {
        FULL + "; NodePool pb can add a node in zone-b; 0 replacements of this plan wait for "
        "new nodes already, as many as maxWaitingForNodes allows"
    }


def test_a_pool_at_its_limit_is_no_place_to_wait() -> None:
    at_limit = NodePool("pb", requirements=_in("zone-b"), limits={"nodes": 2}, used={"nodes": 2})
    result = _plan(_cluster(pools=(at_limit,)))
    assert result.evictions == ()
    assert _no_fit(result) == {
        FULL + "; no NodePool can add a node in zone-b for this pod"
        " (pb: at its nodes limit (2 of 2 used, the pod needs 1))"
        f"; no NodePool can add a node in zone-c for this pod (pb: {NOT_C})"
    }
