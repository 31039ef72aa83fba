"""Bounded no-fit reasons beside NodePools (SPEC §5.10): a reason counts the refusing pools by
kind with at most three names each, whatever the number of pools and domains, and `explain`
gives every pool's whole refusal.

The hostile input (issue D2): :func:`tests.hostile.packed_pools_snapshot`, a full cluster whose
pools each carry a taint the workload does not tolerate; with ``hostname_first`` the
replacement is ranked by node first, so the reason used to name every pool for every node.
Measured with ``/usr/bin/time -v rebalancer plan --snapshot FILE -o json`` on a loaded 2-core
machine (4 pods of the workload on each node of zone-a; "by node": ``hostname_first``). Before:
JSON output, peak RSS, time, exit code; after the same:

- 80 nodes a zone, 80 pools, by zone (622 KB): 4.26 MB, 40 MB, 2.4 s, 0 -> 165 KB, 27 MB,
  1.9-2.5 s, 0
- 80 nodes a zone, 80 pools, by node (666 KB): 336 MB, 1.09 GB, 35 s, 0 -> 139 KB, 27 MB,
  1.6-2.4 s, 0
- 400 nodes a zone, 10 pools, by node (3.2 MB): 1.11 GB, 3.56 GB, 3 min 28 s, 0 -> 688 KB,
  32 MB, 8.5 s, 0
- 240 nodes a zone, 240 pools, by node (2.0 MB): not run again (the issue: SIGSEGV) -> 416 KB,
  30 MB, 5.0 s, 0
- 500 nodes a zone, 2,000 pools, 2,000 pods of the workload, by zone (4.5 MB): not run again
  (the issue: 537 MB, 1.6 GB) -> 1.03 MB, 37 MB, 8.9 s, 0

What time is left is the simulation's walk over every node for each pod it tries (500 pods x
3,000 nodes in the last), as without NodePools; what the pools add to it is linear in them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rebalancer.cli.main import main
from rebalancer.core.karpenter.nodepools import ANY_NODE, PoolJudge, pool_refusal
from rebalancer.core.model import (
    HOSTNAME_KEY,
    ZONE_KEY,
    NodePool,
    NodeSelectorRequirement,
    Taint,
)
from tests.builders import pod
from tests.hostile import packed_pools_snapshot

TAINTED = "with a taint the pod does not tolerate"


def _tainted(name: str) -> NodePool:
    return NodePool(name, taints=(Taint("dedicated", name, "NoSchedule"),))


def _in(name: str, *zones: str) -> NodePool:
    return NodePool(name, requirements=(NodeSelectorRequirement(ZONE_KEY, "In", zones),))


# --- the wording, on pools drawn by hand -------------------------------------------------------
#
# A pod asking 1 CPU, no toleration, judged in zone-b. The pools and what each says there:
#
#   pool  drawn as                          refusal in zone-b                 kind
#   a     taint dedicated=a                 does not tolerate its taint       taint
#   b     not Ready                         not Ready                         not Ready
#   c     taint dedicated=c                 does not tolerate its taint       taint
#   d     cpu limit 4000, 4000 used         at its cpu limit                  cpu limit
#   e     zone In [zone-x]                  cannot be in zone-b               domain
#   f     taint dedicated=f                 does not tolerate its taint       taint
#   g     taint dedicated=g                 does not tolerate its taint       taint
#   h     nodes limit 2, 2 used             at its nodes limit                nodes limit
#   i     taint dedicated=i, not Ready      not Ready (readiness comes first) not Ready
#
# 9 refuse: taint 4 (a, c, f, ...), not Ready 2 (b, i), then the kinds of one pool each by
# name: cpu limit (d), nodes limit (h); the fifth kind (domain, e) is only counted.

HAND_POOLS = (
    _tainted("a"),
    NodePool("b", ready=False),
    _tainted("c"),
    NodePool("d", limits={"cpu": 4000}, used={"cpu": 4000}),
    _in("e", "zone-x"),
    _tainted("f"),
    _tainted("g"),
    NodePool("h", limits={"nodes": 2}, used={"nodes": 2}),
    NodePool("i", taints=(Taint("dedicated", "i", "NoSchedule"),), ready=False),
)
HAND_ZONE_B = (
    "no NodePool can add a node in zone-b for this pod (9 NodePools refuse: "
    f"4 {TAINTED} (a, c, f, ...), 2 not Ready (b, i), 1 at their cpu limit (d), "
    "1 at their nodes limit (h), 1 for 1 other reason)"
)


def test_many_refusing_pools_are_counted_by_kind_with_three_names_each() -> None:
    judge = PoolJudge(reversed(HAND_POOLS))  # judged by name, whatever the order given
    verdict = judge.verdict(pod("w", None, cpu=1000), ZONE_KEY, "zone-b")
    assert verdict.pool == ""
    assert verdict.describe("zone-b") == HAND_ZONE_B
    # the counts agree with each pool's own refusal
    refusing = [
        p for p in HAND_POOLS if pool_refusal(p, pod("w", None, cpu=1000), ZONE_KEY, "zone-b")
    ]
    assert len(refusing) == 9


@pytest.mark.parametrize(
    ("pools", "zone", "expected"),
    [
        # three refusing pools or fewer: each one's whole refusal, by name (as before)
        (
            (_tainted("t"), _in("e", "zone-x"), NodePool("n", ready=False)),
            "zone-b",
            "no NodePool can add a node in zone-b for this pod (e: its nodes cannot be in "
            "topology.kubernetes.io/zone=zone-b; n: not Ready; t: the pod does not tolerate "
            "its taint dedicated=t:NoSchedule)",
        ),
        # the first pool by name that can add a node: the refusals before it do not matter
        (
            (_tainted("a"), _tainted("b"), _tainted("c"), _tainted("d"), _in("z", "zone-b")),
            "zone-b",
            "NodePool z can add a node in zone-b",
        ),
        # four refusing pools: counted; names stop at three
        (
            (_tainted("a"), _tainted("b"), _tainted("c"), _tainted("d")),
            "zone-b",
            f"no NodePool can add a node in zone-b for this pod (4 NodePools refuse: 4 {TAINTED} "
            "(a, b, c, ...))",
        ),
        # a domain a pool's requirements rule out is a kind of its own (no domain in the kind)
        (
            (_in("a", "zone-a"), _in("b", "zone-a"), _tainted("c"), _in("d", "zone-c")),
            "zone-b",
            "no NodePool can add a node in zone-b for this pod (4 NodePools refuse: 3 whose "
            f"requirements rule the domain out (a, b, d), 1 {TAINTED} (c))",
        ),
    ],
)
def test_the_verdict_in_one_domain(pools: tuple[NodePool, ...], zone: str, expected: str) -> None:
    assert PoolJudge(pools).verdict(pod("w", None, cpu=1000), ZONE_KEY, zone).describe(zone) == (
        expected
    )


def test_up_to_three_domains_each_has_its_clause_as_before() -> None:
    judge = PoolJudge((_in("pb", "zone-b"), _in("pa", "zone-a")))
    note = judge.note(pod("w", None), (ZONE_KEY, ["zone-b", "zone-c"]))
    assert note == (
        "; NodePool pb can add a node in zone-b"
        "; no NodePool can add a node in zone-c for this pod"
        " (pa: its nodes cannot be in topology.kubernetes.io/zone=zone-c;"
        " pb: its nodes cannot be in topology.kubernetes.io/zone=zone-c)"
    )


def test_many_nodes_share_the_hostname_keys_one_verdict() -> None:
    judge = PoolJudge([_tainted(f"p{k}") for k in range(5)])
    nodes = [f"n{k}" for k in range(7)]
    assert judge.note(pod("w", None), (HOSTNAME_KEY, nodes)) == (
        "; no NodePool can add a node in 7 domains of kubernetes.io/hostname (n0, n1, n2, ...) "
        f"for this pod (5 NodePools refuse: 5 {TAINTED} (p0, p1, p2, ...))"
    )


def test_more_than_three_verdicts_name_three_and_count_the_rest() -> None:
    # zones z1..z6, pool pK can add a node in zK only for K <= 4; z5 and z6: none can.
    # Verdicts by first appearance: z1 p1, z2 p2, z3 p3; the rest counted: z4 (p4 can),
    # z5 and z6 (none can, one verdict).
    judge = PoolJudge([_in(f"p{k}", f"z{k}") for k in range(1, 5)])
    note = judge.note(pod("w", None), (ZONE_KEY, [f"z{k}" for k in range(1, 7)]))
    assert note == (
        "; NodePool p1 can add a node in z1; NodePool p2 can add a node in z2"
        "; NodePool p3 can add a node in z3"
        "; 3 more domains of topology.kubernetes.io/zone"
        " (1 where a NodePool can add a node, 2 where none can)"
    )


def test_pods_of_one_shape_are_judged_once_per_domain() -> None:
    judge = PoolJudge([_tainted(f"p{k}") for k in range(50)])
    first = judge.verdict(pod("w-1", None), ZONE_KEY, "zone-b")
    # another pod of the same shape, and another node under the hostname key: the same object
    assert judge.verdict(pod("w-2", None), ZONE_KEY, "zone-b") is first
    by_node = judge.verdict(pod("w-1", None), HOSTNAME_KEY, "n1")
    assert judge.verdict(pod("w-1", None), HOSTNAME_KEY, "n2") is by_node
    assert judge.verdict(pod("w-1", None, cpu=7), ZONE_KEY, "zone-b") is not first


# --- the hostile input at three sizes ----------------------------------------------------------

REASON_MAX = 1_000
"""No reason of the plan is longer (a pool's name here is 10 characters)."""
BYTES_PER_POD = 1_200
"""What the JSON plan may take per pod of the workload (its skip, its share of the rest)."""


def _plan_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshot: dict[str, object]
) -> str:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot))
    capsys.readouterr()
    assert main(["plan", "--snapshot", str(path), "-o", "json"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("hostname_first", [False, True])
@pytest.mark.parametrize(("nodes_per_zone", "pools"), [(2, 4), (4, 16), (8, 64)])
def test_the_plan_of_a_full_cluster_beside_refusing_pools_is_bounded(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nodes_per_zone: int,
    pools: int,
    hostname_first: bool,
) -> None:
    """Every reason stays under REASON_MAX characters and the whole plan under BYTES_PER_POD a
    pod, whatever the pools and nodes; before, the largest of these reasons (16 node domains
    x 64 pools) was 87 KB."""
    out = _plan_json(
        tmp_path,
        capsys,
        packed_pools_snapshot(nodes_per_zone, pools, hostname_first=hostname_first, untainted=1),
    )
    data = json.loads(out)
    web = 4 * nodes_per_zone
    assert len(out) <= BYTES_PER_POD * web
    reasons = [s["reason"] for s in data["skipped"]]
    reasons += [r["detail"] for u in data["unrepaired"] for r in u["reasons"]]
    assert len(data["skipped"]) == web  # every pod of the workload, none dropped
    assert max(map(len, reasons)) <= REASON_MAX
    where = (
        f"{2 * nodes_per_zone} domains of kubernetes.io/hostname (zone-b-00000, zone-b-00001, "
        f"{'zone-b-00002, ...' if nodes_per_zone > 2 else 'zone-c-00000, ...'})"
        if hostname_first
        else "zone-b"
    )
    last = f"pool-{pools - 1:05d}"
    expected = (
        f"no NodePool can add a node in {where} for this pod ({pools} NodePools refuse: "
        f"{pools - 1} {TAINTED} (pool-00000, pool-00001, pool-00002{', ...' if pools > 4 else ''}),"
        f" 1 at their cpu limit ({last}))"
    )
    assert all(expected in r for r in reasons)


def test_explain_gives_every_pools_whole_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The detail the reason counts: each pool's refusal in each zone, worked out by hand from
    the input (pool K's own taint, the last pool's cpu limit: 8 of 8 CPUs used, 1 asked)."""
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(packed_pools_snapshot(2, 6, untainted=1)))
    capsys.readouterr()
    args = ["explain", "--snapshot", str(path), "shop/web-zone-a-00000-0", "-o", "json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    zones = ["zone-a", "zone-b", "zone-c"]
    expected = [
        {
            "name": f"pool-{k:05d}",
            "topologyKey": ZONE_KEY,
            "domains": dict.fromkeys(
                zones, f"the pod does not tolerate its taint dedicated=pool-{k:05d}:NoSchedule"
            ),
        }
        for k in range(5)
    ]
    expected.append(
        {
            "name": "pool-00005",
            "topologyKey": ZONE_KEY,
            "domains": dict.fromkeys(
                zones, "at its cpu limit (8000 of 8000 used, the pod needs 1000)"
            ),
        }
    )
    assert data["nodePools"] == expected
    assert "6 NodePools refuse" in data["plan"]["detail"]


def test_explain_under_the_hostname_key_judges_any_node_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(packed_pools_snapshot(3, 2, hostname_first=True)))
    capsys.readouterr()
    args = ["explain", "--snapshot", str(path), "shop/web-zone-a-00000-0", "-o", "json"]
    assert main(args) == 0
    pools = json.loads(capsys.readouterr().out)["nodePools"]
    assert [(p["topologyKey"], list(p["domains"])) for p in pools] == [
        (HOSTNAME_KEY, [ANY_NODE]),
        (HOSTNAME_KEY, [ANY_NODE]),
    ]
