"""Pods the caller holds (``plan(..., held=)``: loop mode's thrash guard) are planned around
exactly as pods that may never be evicted: the oracle is the same cluster with those pods made
DaemonSet pods (counted, never evicted; their plans are checked against brute force and the
game value in tests/test_adversarial_limit.py). Over maxSkew 1-3, hard and soft, minDomains
below and above the number of zones, 3-4 zones; and renaming the pods changes nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.model import HARD, SOFT, OwnerRef, Pod, Snapshot
from rebalancer.core.plan import Plan, SkipCode, SkipReason
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint
from tests.strategies import NOW

HELD = SkipReason(SkipCode.THRASH_GUARD, "held by the test")
AGENT = OwnerRef("DaemonSet", "web-agent")


def shape_cluster(
    movable: Sequence[int],
    held: Sequence[int],
    max_skew: int,
    when: str,
    min_domains: int,
    *,
    held_as_pinned: bool,
    prefix: str = "web",
) -> tuple[Snapshot, dict[str, SkipReason]]:
    """One node per zone; zone z has ``movable[z]`` Deployment pods and ``held[z]`` more that
    are either held (returned as ``held``) or DaemonSet pods (``held_as_pinned``). The held
    pods are the youngest of their zone: the ones the planner would take first."""
    c = zone_constraint("web", max_skew, when=when, min_domains=min_domains)
    nodes = tuple(node(f"n-{chr(97 + z)}", f"zone-{chr(97 + z)}") for z in range(len(movable)))
    pods: list[Pod] = []
    holding: dict[str, SkipReason] = {}
    for z, (m, h) in enumerate(zip(movable, held, strict=True)):
        on = f"n-{chr(97 + z)}"
        for k in range(m + h):
            name = f"{prefix}-{z}-{k}"
            created = 1000.0 + 100 * z + k  # later k: younger
            if k >= m and held_as_pinned:
                pods.append(pod(name, on, constraints=[c], owner=AGENT, created=created))
                continue
            pods.append(pod(name, on, constraints=[c], created=created))
            if k >= m:
                holding[f"default/{name}"] = HELD
    return Snapshot(nodes=nodes, pods=tuple(pods)), holding


def removed_per_zone(p: Plan) -> Counter[str]:
    return Counter(e.node for e in p.evictions)


@st.composite
def shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int, str, int]:
    zones = draw(st.integers(3, 4))
    movable = tuple(draw(st.lists(st.integers(0, 5), min_size=zones, max_size=zones)))
    held = tuple(draw(st.lists(st.integers(0, 2), min_size=zones, max_size=zones)))
    max_skew = draw(st.integers(1, 3))
    when = draw(st.sampled_from((HARD, SOFT)))
    min_domains = draw(st.sampled_from((1, zones + 1)))
    return movable, held, max_skew, when, min_domains


@settings(max_examples=150, deadline=None)
@given(shapes())
def test_held_pods_are_planned_around_as_pods_never_evicted(
    shape: tuple[tuple[int, ...], tuple[int, ...], int, str, int],
) -> None:
    movable, held, max_skew, when, min_domains = shape
    policy = Policy(constraints=(HARD, SOFT))
    with_held, holding = shape_cluster(
        movable, held, max_skew, when, min_domains, held_as_pinned=False
    )
    pinned, _ = shape_cluster(movable, held, max_skew, when, min_domains, held_as_pinned=True)
    got = plan(with_held, policy, NOW, held=holding)
    want = plan(pinned, policy, NOW)
    assert not {f"default/{e.name}" for e in got.evictions} & holding.keys()
    assert removed_per_zone(got) == removed_per_zone(want)
    assert sorted(e.wave for e in got.evictions) == sorted(e.wave for e in want.evictions)
    assert got.minimal == want.minimal
    # the same plan under other names
    renamed, holding2 = shape_cluster(
        movable, held, max_skew, when, min_domains, held_as_pinned=False, prefix="api"
    )
    again = plan(renamed, policy, NOW, held=holding2)
    assert removed_per_zone(again) == removed_per_zone(got)


def test_a_held_pod_is_reported_with_the_callers_reason() -> None:
    """[4, 0, 0] maxSkew 1 with every pod of zone a held: nothing can move, and the skips
    name the caller's reason."""
    snapshot, holding = shape_cluster((0, 0, 0), (4, 0, 0), 1, HARD, 1, held_as_pinned=False)
    assert len(holding) == 4
    p = plan(snapshot, Policy(), NOW, held=holding)
    assert p.evictions == ()
    assert {s.reason.code for s in p.skipped} == {SkipCode.THRASH_GUARD}
    assert {f"{s.namespace}/{s.name}" for s in p.skipped} == holding.keys()
