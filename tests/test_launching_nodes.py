"""A pool's node that is launching (it exists, not Ready or not initialized yet) counts as room
for the replacements planned onto it, and for no more (SPEC §5.10). Worked by hand:

Zone maxSkew 1 (DoNotSchedule) over "web", pods of 1 CPU. n-a (zone-a, 30 CPUs) holds 30
pods, full; n-b (zone-b, 4 CPUs) holds 4, full. Counts a:30 b:4. Pool pb adds nodes in zone-b
only; its status counts 8 CPUs used (n-b and the node launching for it), its limit is 8 CPUs:
no new node fits the limit. n-b2 (zone-b, pool pb, 4 CPUs, NotReady and tainted not-ready) is
launching, with nothing bound to it.

- Without n-b2: every replacement is refused at the pool's cpu limit: no eviction.
- With n-b2 launching: the first four replacements wait for it (4 CPUs of room, each 1), the
  fifth is refused at the cpu limit (no room left on it, and no new node within the limit).
  Counts a:26 b:8: four evictions, the view left above maxSkew.
- n-b2 of 2 CPUs, with one 1-CPU pod of another app already bound: room for one.
- n-b2 Ready and initialized is a node like any other: the replacements fit it (no wait).
"""

from __future__ import annotations

from rebalancer.core.karpenter.marks import NODEPOOL_LABEL
from rebalancer.core.karpenter.nodepools import INITIALIZED_LABEL
from rebalancer.core.model import ZONE_KEY, NodePool, NodeSelectorRequirement, Snapshot, Taint
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint

NOT_READY = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
POOL = NodePool(
    "pb",
    requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b",)),),
    limits={"cpu": 8000},
    used={"cpu": 8000},
)


def _cluster(
    launching_cpu: int | None = 4000, *, ready: bool = False, bound: int = 0, names: str = ""
) -> Snapshot:
    c = zone_constraint("web")
    nodes = [node(f"{names}n-a", "zone-a", cpu=30_000), node(f"{names}n-b", "zone-b", cpu=4000)]
    pods = [
        pod(f"web-a{k:02}", f"{names}n-a", constraints=[c], cpu=1000, created=1000 + k)
        for k in range(30)
    ]
    pods += [pod(f"web-b{k}", f"{names}n-b", constraints=[c], cpu=1000) for k in range(4)]
    if launching_cpu is not None:
        labels = {NODEPOOL_LABEL: "pb"}
        if ready:
            labels[INITIALIZED_LABEL] = "true"
        nodes.append(
            node(
                f"{names}n-b2",
                "zone-b",
                cpu=launching_cpu,
                labels=labels,
                ready=ready,
                taints=() if ready else (NOT_READY,),
            )
        )
        pods += [
            pod(f"other-{k}", f"{names}n-b2", cpu=1000, labels={"app": "other"}, owner=None)
            for k in range(bound)
        ]
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods), node_pools=(POOL,))


def _plan(snapshot: Snapshot) -> Plan:
    return plan(snapshot, Policy(node_fit=True), 100_000.0)


def _waiting(result: Plan) -> list[str]:
    return [e.waits_for for e in result.evictions]


def _limit_refusals(result: Plan) -> int:
    return sum(
        1
        for s in result.skipped
        if s.reason.code == "no-fit" and "at its cpu limit" in s.reason.detail
    )


def test_without_a_launching_node_the_limit_refuses_every_replacement() -> None:
    result = _plan(_cluster(None))
    assert result.evictions == ()
    assert _limit_refusals(result) > 0


def test_a_launching_node_is_room_for_as_many_as_fit_it() -> None:
    result = _plan(_cluster())
    assert _waiting(result) == ["NodePool pb in zone-b"] * 4
    assert [dict(e.reserve_in) for e in result.evictions] == [
        {NODEPOOL_LABEL: "pb", ZONE_KEY: "zone-b"}
    ] * 4
    assert _limit_refusals(result) > 0  # the fifth: no room left, no new node within the limit
    (left,) = result.unrepaired
    assert dict(left.view.domains) == {"zone-a": 26, "zone-b": 8}


def test_what_is_bound_to_it_takes_its_room() -> None:
    assert _waiting(_plan(_cluster(2000, bound=1))) == ["NodePool pb in zone-b"]


def test_a_ready_initialized_node_is_no_launching_node() -> None:
    result = _plan(_cluster(ready=True))
    assert result.evictions
    assert all(e.target_node == "n-b2" and not e.waits_for for e in result.evictions)


def test_renaming_the_nodes_keeps_it() -> None:
    assert _waiting(_plan(_cluster(names="x-"))) == ["NodePool pb in zone-b"] * 4
