"""``maxWaitingForNodes``: with ``nodeFit: false``, at most that many replacements of one plan go
where no node has room for them yet (each waits for a new node). Every expectation is worked
out by hand from the cluster drawn above each case."""

from __future__ import annotations

import pytest

from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.errors import InputError
from rebalancer.core.model import ZONE_KEY, NodePool, NodeSelectorRequirement, Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint

HEADER = "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"

# Zone maxSkew 1 over "web": n-a (4 CPUs) holds five 500m pods, n-b and n-c one each. Counts
# a:5 b:1 c:1; two moves (to b and to c) make a:3 b:2 c:2. n-b and n-c have ``b_cpu`` and 500m
# CPUs: with 500m, no room; with 1000m, room for one more.


def _cluster(b_cpu: int = 500, pools: tuple[NodePool, ...] = ()) -> Snapshot:
    c = zone_constraint("web")
    nodes = (
        node("n-a", "zone-a", cpu=4000),
        node("n-b", "zone-b", cpu=b_cpu),
        node("n-c", "zone-c", cpu=500),
    )
    pods = [pod(f"web-a{k}", "n-a", constraints=[c], cpu=500, created=1000 + k) for k in range(5)]
    pods += [
        pod("web-b", "n-b", constraints=[c], cpu=500),
        pod("web-c", "n-c", constraints=[c], cpu=500),
    ]
    return Snapshot(nodes=nodes, pods=tuple(pods), node_pools=pools)


def _plan(snapshot: Snapshot, limit: int | None) -> tuple[list[str | None], set[str]]:
    policy = Policy(node_fit=False, max_waiting_for_nodes=limit)
    result = plan(snapshot, policy, 100_000.0)
    targets = [e.target_node for e in result.evictions]
    reasons = {s.reason.detail for s in result.skipped if s.reason.code == "no-fit"}
    return targets, reasons


FULL = "replacement would stay Pending: no node has room for its requests"


@pytest.mark.parametrize(
    ("limit", "targets", "reasons"),
    [
        (None, ["n-b", "n-c"], set()),  # both wait: no bound
        (2, ["n-b", "n-c"], set()),
        # the first waits on n-b (b and c tie at 1, n-b first by name); the second would wait
        # on n-c, the one place its spread allows, and is held back
        (1, ["n-b"], {FULL + "; 1 replacement of this plan waits for a new node already, "
                      "as many as maxWaitingForNodes allows"}),
        (0, [], {FULL + "; 0 replacements of this plan wait for new nodes already, "
                 "as many as maxWaitingForNodes allows"}),
    ],
)  # fmt: skip
def test_the_limit_bounds_the_replacements_that_wait(
    limit: int | None, targets: list[str], reasons: set[str]
) -> None:
    assert _plan(_cluster(), limit) == (targets, reasons)


def test_a_replacement_that_fits_does_not_count() -> None:
    # n-b has room for one: the first move lands there without waiting; the second waits on
    # n-c, the first to wait, within a limit of 1.
    assert _plan(_cluster(b_cpu=1000), 1) == (["n-b", "n-c"], set())
    # with 0, the first still lands on n-b, the second is held
    targets, reasons = _plan(_cluster(b_cpu=1000), 0)
    assert targets == ["n-b"]
    assert len(reasons) == 1


def test_with_nodefit_true_the_limit_changes_nothing() -> None:
    # nothing ever waits with nodeFit: true; n-b's room takes one move, n-c has none
    for limit in (None, 0, 1):
        result = plan(_cluster(b_cpu=1000), Policy(max_waiting_for_nodes=limit), 100_000.0)
        assert [e.target_node for e in result.evictions] == ["n-b"]


def test_beside_nodepools_the_reason_names_the_pools_and_the_limit() -> None:
    both = NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b", "zone-c"))
    pools = (NodePool(name="pbc", requirements=(both,)),)
    assert _plan(_cluster(pools=pools), None) == (["n-b", "n-c"], set())
    assert _plan(_cluster(pools=pools), 1) == (
        ["n-b"],
        {
            FULL + "; NodePool pbc can add a node in zone-c; 1 replacement of this plan waits "
            "for a new node already, as many as maxWaitingForNodes allows"
        },
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [("maxWaitingForNodes: 3\n", 3), ("maxWaitingForNodes: null\n", None), ("", None)],
)
def test_the_key_is_read(text: str, value: int | None) -> None:
    assert load_policy(HEADER + text, "p.yaml").max_waiting_for_nodes == value


@pytest.mark.parametrize("bad", ["-1", "1.5", "many", "true"])
def test_a_bad_value_is_refused_naming_the_key(bad: str) -> None:
    with pytest.raises(InputError) as caught:
        load_policy(HEADER + f"maxWaitingForNodes: {bad}\n", "p.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("maxWaitingForNodes: "), problem
