"""bench.karpenter_churn's arithmetic and its trace (figures derived by hand): nodes launched and
removed during the replay, node-minutes, the two kinds of fight, replacements never placed; the
figures do not depend on the names of pods and nodes; the trace scales as the full trace does,
drifts one pool, and each contestant's pools are its own."""

from __future__ import annotations

from typing import Any

import pytest

from bench.karpenter_churn import KarpenterReplay, fight_lines, karpenter_figures
from bench.trace import DRIFT, SCALE, full_trace, karpenter_trace

START = 100.0
NODE_LIFE: dict[str, list[float | None]] = {
    "n1": [50.0, None],  # there before the replay: not launched
    "n2": [120.0, 300.0],  # launched for a's replacement, removed 180 s later: a fight
    "n3": [130.0, None],  # launched for b's replacement, never removed
    "n4": [140.0, 900.0],  # launched for d's replacement, removed 760 s later: past the window
    "n5": [90.0, 200.0],  # there before, removed during the replay
}
MATCHED: list[tuple[float, str, str, str | None]] = [
    (110.0, "a", "web", "ra"),  # the tool's; ra evicted by Karpenter at 600 (490 s): a fight
    (125.0, "b", "web", "rb"),
    (135.0, "d", "web", "rd"),
    (150.0, "c", "web", "rc"),  # its replacement went to a node that was already there
    (200.0, "k", "web", "rk"),  # Karpenter's; rk evicted by the tool at 260: a fight
    (260.0, "rk", "web", "rk2"),
    (400.0, "x", "api", None),  # no replacement (a scale-down made it moot)
    (500.0, "y", "api", "ry"),  # ry never bound to a node, there at the end
    (510.0, "w", "api", "rw"),  # rw never bound, gone before the end (a scale-down)
    (600.0, "ra", "web", "ra2"),
]
MINE = {"a", "b", "c", "d", "rk", "x", "y", "w"}
THEIRS = {"k", "ra"}
FIRST_NODE = {
    "ra": "n2",
    "rb": "n3",
    "rc": "n1",
    "rd": "n4",
    "rk": "n3",
    "rk2": "n3",
    "ra2": "n3",
}
COUNT = [(0.0, 2), (1.0, 3), (2.0, 3)]
AT_END = {"rb", "rc", "rd", "rk2", "ra2", "ry"}
EXPECTED = {
    "karpenter_evictions": 2,
    "nodes_launched": 3,  # n2, n3, n4
    "nodes_removed": 3,  # n2, n4, n5
    "node_minutes": 0.1,  # 8 node-samples of 1 s
    "most_nodes": 3,
    "node_fights": 1,  # n2
    "eviction_fights": 2,  # a -> ra, k -> rk
    "fights_before_drift": 0,  # no drift
    "never_placed": 1,  # y
}


def figures(rename: dict[str, str] | None = None) -> dict[str, float]:
    r = rename or {}

    def n(x: str) -> str:
        return r.get(x, x)

    return karpenter_figures(
        matched=[(at, n(p), app, None if q is None else n(q)) for at, p, app, q in MATCHED],
        mine={n(p) for p in MINE},
        theirs={n(p) for p in THEIRS},
        node_life={n(k): v for k, v in NODE_LIFE.items()},
        first_node={n(k): n(v) for k, v in FIRST_NODE.items()},
        node_count=COUNT,
        start=START,
        at_end={n(p) for p in AT_END},
    )


def test_the_figures_of_a_replay_beside_karpenter() -> None:
    assert figures() == EXPECTED


def test_the_figures_do_not_depend_on_names() -> None:
    names = sorted(
        set(NODE_LIFE) | {p for _, p, _, _ in MATCHED} | {q for *_, q in MATCHED if q is not None}
    )
    rename = {x: f"z-{i:02d}-{x[::-1]}" for i, x in enumerate(reversed(names))}
    assert figures(rename) == EXPECTED


def test_a_node_removed_exactly_at_the_window_is_still_a_fight() -> None:
    life: dict[str, list[float | None]] = {**NODE_LIFE, "n2": [120.0, 720.0]}  # 600 s: within
    got = karpenter_figures(
        matched=MATCHED,
        mine=MINE,
        theirs=THEIRS,
        node_life=life,
        first_node=FIRST_NODE,
        node_count=COUNT,
        start=START,
        at_end=AT_END,
    )
    assert got["node_fights"] == 1
    life["n2"] = [120.0, 720.5]
    got = karpenter_figures(
        matched=MATCHED,
        mine=MINE,
        theirs=THEIRS,
        node_life=life,
        first_node=FIRST_NODE,
        node_count=COUNT,
        start=START,
        at_end=AT_END,
    )
    assert got["node_fights"] == 0


def test_a_node_that_was_there_before_the_eviction_was_not_launched_for_it() -> None:
    # c's replacement went to n1, there before the replay; if it went to n3 (created at 130,
    # before c's eviction at 150, removed at 200), n3 still was not launched for it
    life: dict[str, list[float | None]] = {**NODE_LIFE, "n3": [130.0, 200.0]}
    got = karpenter_figures(
        matched=MATCHED,
        mine=MINE,
        theirs=THEIRS,
        node_life=life,
        first_node={**FIRST_NODE, "rb": "n1", "rc": "n3"},
        node_count=COUNT,
        start=START,
        at_end=AT_END,
    )
    assert got["node_fights"] == 1  # n2 only


def test_the_karpenter_trace_scales_as_the_full_trace_and_drifts_one_pool() -> None:
    k, f = karpenter_trace(1), full_trace(1)
    assert k == karpenter_trace(1) and k.events != karpenter_trace(2).events
    assert [e for e in k.events if e.kind == SCALE] == [e for e in f.events if e.kind == SCALE]
    drifts = [e for e in k.events if e.kind == DRIFT]
    assert len(drifts) == 1 and drifts[0].target in ("z0", "z1") and drifts[0].at == 405.0
    assert {e.kind for e in k.events} == {SCALE, DRIFT}
    assert k.nodes_per_zone == 0 and k.pool_cpu == (32, 32, 6)
    assert {w.cpu for w in k.workloads} == {"500m"}


def test_each_contestant_gets_pools_of_its_own_in_every_zone() -> None:
    trace = karpenter_trace(1)
    one = KarpenterReplay(None, trace, "rebalancer", speedup=3.0)
    two = KarpenterReplay(None, trace, "rebalancer", speedup=3.0)
    assert one.tag != two.tag

    def zone_of(pool: dict[str, Any]) -> list[str]:
        reqs = pool["spec"]["template"]["spec"]["requirements"]
        return next(r["values"] for r in reqs if r["key"] == "topology.kubernetes.io/zone")

    pools = one.pools()
    assert [p["metadata"]["name"] for p in pools] == [
        f"{one.tag}-zone-a",
        f"{one.tag}-zone-b",
        f"{one.tag}-zone-c",
    ]
    assert [zone_of(p) for p in pools] == [["zone-a"], ["zone-b"], ["zone-c"]]
    assert [p["spec"]["limits"]["cpu"] for p in pools] == ["32", "32", "6"]
    for p in pools:
        assert p["spec"]["template"]["metadata"]["labels"] == {"bench.rebalancer/churn": one.tag}
        assert p["spec"]["template"]["spec"]["taints"] == []
        assert p["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    spec = one.pod_spec(trace.workloads[0])
    assert spec["nodeSelector"] == {"bench.rebalancer/churn": one.tag}
    assert spec["containers"][0]["resources"]["requests"]["cpu"] == "500m"


ZONE_OF = {"n1": "zone-a", "n2": "zone-b", "n3": "zone-b", "n4": "zone-c", "n5": "zone-a"}


@pytest.mark.parametrize(
    ("drift", "counted"),
    [
        ((550.0, "zone-b"), 1),  # a at 110, then the drift of n2's zone, then ra taken at 600
        ((550.0, "zone-a"), 0),  # another zone's drift
        ((105.0, "zone-b"), 0),  # the drift came before the tool's eviction: it could see it
        ((650.0, "zone-b"), 0),  # after Karpenter took ra: not the drift's doing
        ((115.0, "zone-b"), 0),  # n2 (created at 120) came after the drift: a new node
    ],
)
def test_a_fight_the_tool_began_before_a_drift_is_told_apart(
    drift: tuple[float, str], counted: int
) -> None:
    """Only the tool's fight a -> ra can be before a drift; Karpenter's k -> rk never is."""
    got = karpenter_figures(
        matched=MATCHED,
        mine=MINE,
        theirs=THEIRS,
        node_life=NODE_LIFE,
        first_node=FIRST_NODE,
        node_count=COUNT,
        start=START,
        at_end=AT_END,
        drifts=[drift],
        zone_of=ZONE_OF,
    )
    assert (got["eviction_fights"], got["fights_before_drift"]) == (2, counted)
    lines = fight_lines(
        MATCHED, MINE, THEIRS, FIRST_NODE, START, drifts=[drift], zone_of=ZONE_OF,
        node_life=NODE_LIFE,
    )  # fmt: skip
    assert sum(", before the drift of" in line for line in lines) == counted


def test_each_eviction_fight_in_words() -> None:
    assert fight_lines(MATCHED, MINE, THEIRS, FIRST_NODE, START) == [
        "the tool evicted a (on ?) at 10s; its replacement ra (on n2) was evicted by "
        "Karpenter at 500s",
        "Karpenter evicted k (on ?) at 100s; its replacement rk (on n3) was evicted by "
        "the tool at 160s",
    ]
