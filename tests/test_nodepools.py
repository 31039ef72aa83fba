"""Capacity that can be added (rebalancer.core.karpenter.nodepools) and NodePools read from
snapshot files. Every expectation is worked out by hand from the pool and the pod each case
draws."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rebalancer.cluster.read.snapshot import load_snapshot
from rebalancer.core.errors import InputError
from rebalancer.core.karpenter.nodepools import PoolJudge, pool_refusal
from rebalancer.core.model import (
    ZONE_KEY,
    NodePool,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Snapshot,
    Taint,
    Toleration,
)
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint

ZONES_AB = NodeSelectorRequirement(ZONE_KEY, "In", ("zone-a", "zone-b"))
GPU = Taint("gpu", "true", "NoSchedule")


def _pool(name: str = "p", **extra: Any) -> NodePool:
    return NodePool(name=name, **extra)


def _term(*reqs: NodeSelectorRequirement) -> NodeSelector:
    return NodeSelector((NodeSelectorTerm(tuple(reqs)),))


def test_the_worked_example_of_the_module() -> None:
    a = _pool(
        "a", requirements=(ZONES_AB,), taints=(GPU,), limits={"cpu": 8000}, used={"cpu": 7500}
    )
    c = _pool("c", requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-c",)),))
    plain = pod("w", None, cpu=1000)
    tolerant = pod(
        "w", None, cpu=1000, tolerations=(Toleration("gpu", "Equal", "true", "NoSchedule"),)
    )
    assert pool_refusal(a, plain, ZONE_KEY, "zone-a") == (
        "the pod does not tolerate its taint gpu=true:NoSchedule"
    )
    assert pool_refusal(a, tolerant, ZONE_KEY, "zone-a") == (
        "at its cpu limit (7500 of 8000 used, the pod needs 1000)"
    )
    judge = PoolJudge([c, a])
    found = {z: judge.verdict(plain, ZONE_KEY, z).pool for z in ("zone-a", "zone-b", "zone-c")}
    assert found == {"zone-a": "", "zone-b": "", "zone-c": "c"}
    assert judge.verdict(plain, ZONE_KEY, "zone-c").describe("zone-c") == (
        "NodePool c can add a node in zone-c"
    )
    assert judge.verdict(plain, ZONE_KEY, "zone-a").describe("zone-a") == (
        "no NodePool can add a node in zone-a for this pod "
        "(a: the pod does not tolerate its taint gpu=true:NoSchedule; "
        "c: its nodes cannot be in topology.kubernetes.io/zone=zone-a)"
    )


@pytest.mark.parametrize(
    ("pool", "zone", "refused"),
    [
        (_pool(), "zone-x", False),  # no zone requirement: any zone (a label Karpenter sets)
        (_pool(requirements=(ZONES_AB,)), "zone-b", False),
        (_pool(requirements=(ZONES_AB,)), "zone-c", True),
        (
            _pool(requirements=(NodeSelectorRequirement(ZONE_KEY, "NotIn", ("zone-a",)),)),
            "zone-a",
            True,
        ),
        (
            _pool(requirements=(NodeSelectorRequirement(ZONE_KEY, "NotIn", ("zone-a",)),)),
            "zone-b",
            False,
        ),
        (_pool(labels={ZONE_KEY: "zone-b"}), "zone-a", True),  # the template pins the zone
        (
            _pool(
                requirements=(
                    ZONES_AB,
                    NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b", "zone-c")),
                )
            ),
            "zone-a",
            True,
        ),
        (
            _pool(
                requirements=(
                    ZONES_AB,
                    NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b", "zone-c")),
                )
            ),
            "zone-b",
            False,
        ),
        (_pool(ready=False), "zone-a", True),
    ],
)
def test_the_zones_a_pool_can_add_a_node_in(pool: NodePool, zone: str, refused: bool) -> None:
    assert (pool_refusal(pool, pod("w", None), ZONE_KEY, zone) is not None) is refused


TEAM = NodeSelectorRequirement("team", "In", ("web", "api"))


@pytest.mark.parametrize(
    ("pool", "selector", "affinity", "ok"),
    [
        # nodeSelector on a label the pool sets in its template
        (_pool(labels={"team": "web"}), {"team": "web"}, None, True),
        (_pool(labels={"team": "web"}), {"team": "db"}, None, False),
        # ... or allows by a requirement
        (_pool(requirements=(TEAM,)), {"team": "api"}, None, True),
        (_pool(requirements=(TEAM,)), {"team": "db"}, None, False),
        # a label neither the pool nor Karpenter sets: no node of the pool carries it
        (_pool(), {"team": "web"}, None, False),
        # a label Karpenter sets itself (architecture): any value
        (_pool(), {"kubernetes.io/arch": "arm64"}, None, True),
        # affinity: In over the requirement's values
        (
            _pool(requirements=(TEAM,)),
            {},
            _term(NodeSelectorRequirement("team", "In", ("db", "api"))),
            True,
        ),
        (
            _pool(requirements=(TEAM,)),
            {},
            _term(NodeSelectorRequirement("team", "NotIn", ("web", "api"))),
            False,
        ),
        (
            _pool(requirements=(TEAM,)),
            {},
            _term(NodeSelectorRequirement("team", "NotIn", ("web",))),
            True,
        ),
        (_pool(), {}, _term(NodeSelectorRequirement("team", "DoesNotExist")), True),
        (
            _pool(requirements=(TEAM,)),
            {},
            _term(NodeSelectorRequirement("team", "DoesNotExist")),
            False,
        ),
        (_pool(), {}, _term(NodeSelectorRequirement("team", "Exists")), False),
        # terms are ORed: the second one fits
        (
            _pool(requirements=(TEAM,)),
            {},
            NodeSelector(
                (
                    NodeSelectorTerm((NodeSelectorRequirement("team", "In", ("db",)),)),
                    NodeSelectorTerm((NodeSelectorRequirement("team", "In", ("web",)),)),
                )
            ),
            True,
        ),
        # the zone asked for by affinity must be the domain's
        (_pool(), {}, _term(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b",))), False),
    ],
)
def test_node_selector_and_affinity_against_the_pool(
    pool: NodePool, selector: dict[str, str], affinity: NodeSelector | None, ok: bool
) -> None:
    candidate = pod("w", None, node_selector=selector, required_affinity=affinity)
    reason = pool_refusal(pool, candidate, ZONE_KEY, "zone-a")
    assert (reason is None) is ok, reason


def test_limits_count_what_the_pool_holds_and_one_node_more() -> None:
    p = _pool(limits={"cpu": 4000, "nodes": 3}, used={"cpu": 3000, "nodes": 2})
    assert pool_refusal(p, pod("w", None, cpu=1000), ZONE_KEY, "zone-a") is None
    assert pool_refusal(p, pod("w", None, cpu=1001), ZONE_KEY, "zone-a") == (
        "at its cpu limit (3000 of 4000 used, the pod needs 1001)"
    )
    full = _pool(limits={"nodes": 2}, used={"nodes": 2})
    assert pool_refusal(full, pod("w", None), ZONE_KEY, "zone-a") == (
        "at its nodes limit (2 of 2 used, the pod needs 1)"
    )


def test_a_startup_taint_is_not_a_taint_and_a_tolerated_taint_is_fine() -> None:
    p = _pool(taints=(Taint("gpu", "", "NoExecute"), Taint("soft", "", "PreferNoSchedule")))
    assert pool_refusal(p, pod("w", None), ZONE_KEY, "zone-a") is not None
    tolerant = pod("w", None, tolerations=(Toleration("gpu", "Exists"),))
    assert pool_refusal(p, tolerant, ZONE_KEY, "zone-a") is None  # PreferNoSchedule never refuses


# --- NodePools in snapshot files -------------------------------------------------------------


def _api_pool(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "managedFields": [{"manager": "kubectl"}]},
        "spec": spec,
        "status": {
            "resources": {"cpu": "6", "memory": "24Gi", "nodes": "3"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _load(tmp_path: Path, *objects: dict[str, Any]) -> Any:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return load_snapshot(path)


def test_a_nodepool_in_a_snapshot_file_is_read(tmp_path: Path) -> None:
    spec = {
        "template": {
            "metadata": {"labels": {"team": "web"}},
            "spec": {
                "requirements": [
                    {
                        "key": ZONE_KEY,
                        "operator": "In",
                        "values": ["zone-a", "zone-b"],
                        "minValues": 1,
                    }
                ],
                "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "init", "effect": "NoSchedule"}],
            },
        },
        "limits": {"cpu": "16", "memory": "64Gi"},
    }
    (pool,) = _load(tmp_path, _api_pool(**spec)).node_pools
    assert pool == NodePool(
        name="default",
        requirements=(ZONES_AB,),
        labels={"team": "web"},
        taints=(GPU,),
        limits={"cpu": 16000, "memory": 64 * 1024**3},
        used={"cpu": 6000, "memory": 24 * 1024**3, "nodes": 3},
        ready=True,
    )


def test_a_snapshot_without_nodepools_has_none(tmp_path: Path) -> None:
    assert _load(tmp_path).node_pools == ()


def test_a_bad_nodepool_names_the_field_and_the_value(tmp_path: Path) -> None:
    spec = {
        "template": {"spec": {"requirements": [{"key": ZONE_KEY, "operator": "Near"}]}},
        "limits": {"cpu": "lots"},
    }
    with pytest.raises(InputError) as caught:
        _load(tmp_path, _api_pool(**spec))
    text = str(caught.value)
    assert "NodePool default" in text
    assert "spec.template.spec.requirements[0]" in text and "Near" in text
    assert "spec.limits.cpu" in text and "lots" in text


# --- a no-fit reason names the pools ---------------------------------------------------------
#
# Packed: n-a (2 CPUs) holds three 500m pods of zone a, n-b and n-c (500m each) one each; zone
# maxSkew 1: one pod of zone a must go to zone b or c, where no node has room.


def _packed(*pools: NodePool) -> Snapshot:
    c = zone_constraint("web")
    nodes = (
        node("n-a", "zone-a", cpu=2000),
        node("n-b", "zone-b", cpu=500),
        node("n-c", "zone-c", cpu=500),
    )
    pods = [pod(f"web-a{k}", "n-a", constraints=[c], cpu=500, created=1000 + k) for k in range(3)]
    pods += [
        pod("web-b", "n-b", constraints=[c], cpu=500),
        pod("web-c", "n-c", constraints=[c], cpu=500),
    ]
    return Snapshot(nodes=nodes, pods=tuple(pods), node_pools=pools)


def _no_fit(snapshot: Snapshot) -> set[str]:
    result = plan(snapshot, Policy(), 100_000.0)
    assert result.evictions == ()
    return {s.reason.detail for s in result.skipped if s.reason.code == "no-fit"}


def test_without_pools_the_no_fit_reason_is_as_before() -> None:
    assert _no_fit(_packed()) == {
        "replacement would stay Pending: no node has room for its requests"
    }


def test_a_no_fit_reason_says_why_no_pool_can_add_a_node() -> None:
    pa = _pool("pa", requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-a",)),))
    assert _no_fit(_packed(pa)) == {
        "replacement would stay Pending: no node has room for its requests"
        "; no NodePool can add a node in zone-b for this pod"
        " (pa: its nodes cannot be in topology.kubernetes.io/zone=zone-b)"
        "; no NodePool can add a node in zone-c for this pod"
        " (pa: its nodes cannot be in topology.kubernetes.io/zone=zone-c)"
    }


def test_with_nodefit_true_a_replacement_waits_for_the_pool_that_can_add_a_node() -> None:
    # zone b's pool can add a node, zone c has none: the pod of zone a waits on n-b's zone.
    pb = _pool("pb", requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b",)),))
    (eviction,) = plan(_packed(pb), Policy(), 100_000.0).evictions
    assert (eviction.name, eviction.target_node) == ("web-a2", "n-b")
    assert (
        "; replacement waits for a node from NodePool pb in zone-b (node n-b has no room), "
        "evicted first;"
    ) in eviction.reason


# --- nodeFit: false with NodePools: a replacement waits for a node only where a pool can add one


def _moves(snapshot: Snapshot) -> list[tuple[str, str | None]]:
    result = plan(snapshot, Policy(node_fit=False), 100_000.0)
    return [(e.name, e.target_node) for e in result.evictions]


def test_without_pools_nodefit_false_plans_onto_a_full_node_as_before() -> None:
    # a:3 b:1 c:1: one pod of zone a goes to zone b or c; n-b comes first by name, full or not.
    (move,) = _moves(_packed())
    assert move[1] == "n-b"


def test_with_pools_a_replacement_waits_only_where_a_pool_can_add_a_node() -> None:
    pc = _pool("pc", requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-c",)),))
    (move,) = _moves(_packed(pc))
    assert move[1] == "n-c"  # zone b has no pool for it, n-b no room


def test_with_pools_none_of_which_can_help_nothing_is_planned() -> None:
    pa = _pool("pa", requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-a",)),))
    snapshot = _packed(pa)
    assert _moves(snapshot) == []
    reasons = {
        s.reason.detail
        for s in plan(snapshot, Policy(node_fit=False), 100_000.0).skipped
        if s.reason.code == "no-fit"
    }
    assert reasons == {
        "replacement would stay Pending: no node has room for its requests"
        "; no NodePool can add a node in zone-b for this pod"
        " (pa: its nodes cannot be in topology.kubernetes.io/zone=zone-b)"
        "; no NodePool can add a node in zone-c for this pod"
        " (pa: its nodes cannot be in topology.kubernetes.io/zone=zone-c)"
    }


def test_a_pool_at_its_limit_leaves_the_zone_unrepaired() -> None:
    # Zone c's pool is at its cpu limit: the replacement may not wait there.
    pc = _pool(
        "pc",
        requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-c",)),),
        limits={"cpu": 4000},
        used={"cpu": 4000},
    )
    assert _moves(_packed(pc)) == []
