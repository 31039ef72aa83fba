"""The policy's grace period is a floor over each pod's own, never an override (SPEC §5.2)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rebalancer.core.grace import eviction_grace
from rebalancer.core.model import Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import zones_cluster

NOW = 1_000_000.0


@given(
    policy=st.none() | st.integers(min_value=1, max_value=10**6),
    own=st.none() | st.integers(min_value=0, max_value=10**6),
)
def test_the_grace_that_applies_is_never_shorter_than_the_pods_own(
    policy: int | None, own: int | None
) -> None:
    """Whatever is sent, the grace that applies is max(policy, own) and never below own."""
    own_effective = 30 if own is None else own
    sent = eviction_grace(policy, own)
    applies = own_effective if sent is None else sent
    assert applies >= own_effective
    assert applies == max(own_effective, policy or 0)
    assert sent is None or sent >= 1


@pytest.mark.parametrize(
    ("policy_grace", "own", "sent"),
    [
        (120, 600, None),  # conservative.yaml on a pod that wants ten minutes
        (120, None, 120),  # unset means 30
        (5, 12, None),
        (45, None, 45),
        (None, 12, None),
    ],
)
def test_planned_evictions_carry_the_floor_only_above_the_pods_own(
    policy_grace: int | None, own: int | None, sent: int | None
) -> None:
    """The plan (and so -o json) shows the grace that will be sent, judged per pod."""
    nodes, pods = zones_cluster([3, 1])
    pods = [dataclasses.replace(p, grace_period_seconds=own) for p in pods]
    policy = Policy(grace_period_seconds=policy_grace)
    result = plan(Snapshot(nodes=tuple(nodes), pods=tuple(pods)), policy, NOW)
    assert len(result.evictions) == 1
    assert result.evictions[0].grace_period_seconds == sent


def test_pods_with_different_own_grace_are_judged_one_by_one() -> None:
    """Two evictions under one policy: the long-grace pod gets none, the short one the floor."""
    nodes, pods = zones_cluster([5, 1])
    pods = [
        dataclasses.replace(p, grace_period_seconds=600 if i % 2 else 10)
        for i, p in enumerate(pods)
    ]
    own = {p.name: p.grace_period_seconds for p in pods}
    result = plan(
        Snapshot(nodes=tuple(nodes), pods=tuple(pods)), Policy(grace_period_seconds=120), NOW
    )
    assert len(result.evictions) == 2
    assert {own[e.name] for e in result.evictions} == {600, 10}, "both kinds are evicted"
    for e in result.evictions:
        assert e.grace_period_seconds == (None if own[e.name] == 600 else 120)
