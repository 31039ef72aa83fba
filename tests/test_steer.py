"""Steered scale-downs: the deletion-cost order against brute force, and the writes of a pass."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.model import HOSTNAME_KEY, OwnerRef, Pod, Snapshot
from rebalancer.core.policy import Policy
from rebalancer.core.spread import analyze
from rebalancer.core.steer import (
    MAX_PER_WORKLOAD,
    Member,
    Steering,
    SteerReason,
    ViewCounts,
    peel,
    steer,
)
from tests.builders import node, pod, zone_constraint

# --- the order, against brute force ---------------------------------------------------------


def _within(views: Sequence[ViewCounts], members: Sequence[Member], removed: Sequence[int]) -> bool:
    """Every view within its maxSkew once ``removed`` are gone (SPEC §2.4, written out again)."""
    for v, view in enumerate(views):
        counts = dict(view.counts)
        for i in removed:
            domain = members[i].domains[v]
            if domain is not None:
                counts[domain] -= 1
        low = 0 if len(counts) < view.min_domains else min(counts.values(), default=0)
        if any(c - low > view.max_skew for c in counts.values() if c > 0):
            return False
    return True


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[ViewCounts], list[Member]]:
    """A zone view and maybe a hostname view (nodes inside zones), up to 8 pods of the
    workload, other pods counted too, maxSkew 1-3, minDomains 1-4."""
    zones = [f"z{i}" for i in range(draw(st.integers(2, 3)))]
    nodes = [(z, f"{z}-n{j}") for z in zones for j in range(draw(st.integers(1, 2)))]
    placed = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=8))
    zone_counts = {z: draw(st.integers(0, 2)) for z in zones}  # other workloads' pods
    host_counts = {n: draw(st.integers(0, 1)) for _, n in nodes}
    for z, n in placed:
        zone_counts[z] += 1
        host_counts[n] += 1
    views = [ViewCounts(zone_counts, draw(st.integers(1, 3)), draw(st.integers(1, 4)))]
    two = draw(st.booleans())
    if two:
        views.append(ViewCounts(host_counts, draw(st.integers(1, 3)), draw(st.integers(1, 2))))
    members = [
        Member((z, n) if two else (z,), (0.0, float(i), f"u{i}")) for i, (z, n) in enumerate(placed)
    ]
    return views, members


@settings(max_examples=300, deadline=None)
@given(workloads())
def test_every_scale_down_size_keeps_the_spread_when_some_choice_of_pods_can(
    case: tuple[list[ViewCounts], list[Member]],
) -> None:
    """For every k, removing the first k pods of the order leaves every view within maxSkew
    whenever some k pods (any of them, tried all) can."""
    views, members = case
    order = peel(views, members)
    assert sorted(order) == list(range(len(members)))
    for k in range(1, len(members) + 1):
        possible = any(
            _within(views, members, chosen)
            for chosen in itertools.combinations(range(len(members)), k)
        )
        if possible:
            assert _within(views, members, order[:k]), (k, order)


@pytest.mark.parametrize(
    ("counts", "max_skew", "first"),
    [
        ({"a": 4, "b": 1, "c": 1}, 1, ["a", "a", "a"]),
        ({"a": 3, "b": 5, "c": 1}, 2, ["b", "b", "b", "a"]),
        ({"a": 9, "b": 3, "c": 9, "d": 0}, 3, ["c", "a", "c", "a"]),
    ],
)
def test_one_view_peels_the_fullest_domain_first(
    counts: dict[str, int], max_skew: int, first: list[str]
) -> None:
    """Hand-derived: with one view, pods come off the domain with the most pods, ties by the
    controller's order (here: the pods of a later domain are younger, whatever it is called)."""
    members: list[Member] = []
    for age, (domain, count) in enumerate(counts.items()):
        members += [Member((domain,), (0.0, -float(age), "")) for _ in range(count)]
    order = peel([ViewCounts(counts, max_skew)], members)
    assert [members[i].domains[0] for i in order[: len(first)]] == first


def test_ties_go_to_the_controllers_own_order_not_to_names() -> None:
    """Two equally full domains: the doubled-up pod, then the younger one goes first, whichever
    domain name sorts first."""
    for names in (("a", "b"), ("b", "a")):
        x, y = names
        members = [
            Member((x,), (-1.0, -100.0, "u1")),
            Member((y,), (-2.0, -50.0, "u2")),
            Member((y,), (-1.0, -200.0, "u3")),
            Member((x,), (-1.0, -300.0, "u4")),
        ]
        order = peel([ViewCounts({x: 2, y: 2, "c": 0}, 1)], members)
        assert order[0] == 1  # doubled up on its node
        assert order[1] == 3  # then the youngest of the fuller domain x (2 vs 1)


# --- a pass over a snapshot -----------------------------------------------------------------


def _cluster(
    per_zone: Sequence[int], max_skew: int = 1, **extra: object
) -> tuple[Snapshot, list[Pod]]:
    nodes = [node(f"n{i}", f"zone-{i}") for i in range(len(per_zone))]
    cons = (zone_constraint("web", max_skew),)
    pods: list[Pod] = []
    for z, count in enumerate(per_zone):
        for _ in range(count):
            k = len(pods)
            pods.append(
                pod(
                    f"web-{k}",
                    f"n{z}",
                    constraints=cons,
                    created=1000.0 + k,
                    resource_version=str(10 + k),
                    **extra,  # type: ignore[arg-type]
                )
            )
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods)), pods


def _pass(snapshot: Snapshot, on: bool = True) -> Steering:
    policy = Policy(steer_scale_down=on)
    return steer(snapshot, policy, analyze(snapshot, policy))


def _apply(snapshot: Snapshot, result: Steering) -> Snapshot:
    """The snapshot once the writes landed (cost and mark set, or both removed)."""
    by_uid = {c.uid: c for c in result.changes}
    pods = []
    for p in snapshot.pods:
        change = by_uid.get(p.uid)
        if change is None:
            pods.append(p)
            continue
        text = None if change.cost is None else str(change.cost)
        pods.append(dataclasses.replace(p, deletion_cost=text, cost_mark=text))
    return dataclasses.replace(snapshot, pods=tuple(pods))


def _controller_removes(snapshot: Snapshot, k: int) -> list[str]:
    """The controller's rules 1-4 (this test's own copy): not Running/Ready first, then cost."""

    def rank(p: Pod) -> tuple[int, int]:
        return (int(p.phase == "Running" and p.ready), int(p.deletion_cost or 0))

    return [p.node_name or "" for p in sorted(snapshot.pods, key=rank)[:k]]


def test_a_skewed_deployment_scales_down_from_its_fullest_zone() -> None:
    """Zones [5, 2, 2]: the first three removals all come from the full zone, every scale-down
    size then keeps the zones within maxSkew 1 where removing pods can."""
    snapshot, _ = _cluster([5, 2, 2])
    result = _pass(snapshot)
    assert result.workloads == 1 and len(result.changes) == 9
    steered = _apply(snapshot, result)
    assert _controller_removes(steered, 3) == ["n0", "n0", "n0"]
    assert sorted(int(c.cost or 0) for c in result.changes) == list(range(-9, 0))
    assert _pass(steered).changes == ()  # written once: nothing changes on the next pass


def test_not_ready_pods_go_first_whatever_their_cost_and_count_as_gone() -> None:
    """A not-Ready pod in the full zone gets no cost (the controller removes it first anyway),
    and the order continues from the counts without it."""
    snapshot, pods = _cluster([3, 1, 1])
    not_ready = dataclasses.replace(pods[0], ready=False)
    snapshot = dataclasses.replace(snapshot, pods=(not_ready, *pods[1:]))
    result = _pass(snapshot)
    assert not_ready.uid not in {c.uid for c in result.changes}
    steered = _apply(snapshot, result)
    assert _controller_removes(steered, 2) == ["n0", "n0"]


def test_renaming_nodes_pods_and_zones_changes_no_cost() -> None:
    """The same cluster under other names gets the same cost on every pod (by uid)."""
    snapshot, _ = _cluster([4, 2, 3, 1], max_skew=2)
    rename = {"n0": "zz", "n1": "aa", "n2": "mm", "n3": "bb"}
    nodes = tuple(
        dataclasses.replace(
            n,
            name=rename[n.name],
            labels={
                HOSTNAME_KEY: rename[n.name],
                "topology.kubernetes.io/zone": "x" + rename[n.name],
            },
        )
        for n in snapshot.nodes
    )
    pods = tuple(
        dataclasses.replace(p, name="q" + p.uid[::-1], node_name=rename[p.node_name or ""])
        for p in snapshot.pods
    )
    other = Snapshot(nodes=nodes, pods=pods)
    first = {c.uid: c.cost for c in _pass(snapshot).changes}
    second = {c.uid: c.cost for c in _pass(other).changes}
    assert first == second and len(first) == 10


def test_statefulset_pods_and_foreign_costs_are_left_alone() -> None:
    """StatefulSet pods never get a cost; a workload where someone else set a cost is skipped."""
    snapshot, _ = _cluster([3, 1], owner=OwnerRef("StatefulSet", "db"))
    assert _pass(snapshot).changes == ()
    snapshot, pods = _cluster([3, 1])
    foreign = dataclasses.replace(pods[1], deletion_cost="100")
    snapshot = dataclasses.replace(snapshot, pods=(pods[0], foreign, *pods[2:]))
    result = _pass(snapshot)
    assert result.changes == ()
    assert [(s.reason, s.pods) for s in result.skipped] == [(SteerReason.FOREIGN_COST, 4)]


def test_turning_it_off_removes_only_our_costs() -> None:
    """With the option off, every cost rebalancer wrote is removed; others stay."""
    snapshot, _ = _cluster([3, 1, 1])
    steered = _apply(snapshot, _pass(snapshot))
    first, *rest = steered.pods
    foreign = dataclasses.replace(first, cost_mark=None)  # someone else's cost now
    steered = dataclasses.replace(steered, pods=(foreign, *rest))
    result = _pass(steered, on=False)
    assert {c.uid for c in result.changes} == {p.uid for p in rest}
    assert all(c.cost is None for c in result.changes)
    assert _pass(snapshot, on=False).changes == ()


def test_writes_only_what_the_order_changes() -> None:
    """One more pod in the full zone after a pass: the costs already written stay where the
    order allows, and only a few pods are written, not all."""
    snapshot, pods = _cluster([4, 2, 2])
    steered = _apply(snapshot, _pass(snapshot))
    extra = dataclasses.replace(pods[0], name="web-new", uid="uid-new", created=5000.0)
    grown = dataclasses.replace(steered, pods=(*steered.pods, extra))
    result = _pass(grown)
    assert 1 <= len(result.changes) <= 3
    after = _apply(grown, result)
    assert _controller_removes(after, 2) == ["n0", "n0"]


def test_writes_are_bounded_per_workload() -> None:
    """A workload needing more writes than the bound gets the earliest positions first."""
    snapshot, _ = _cluster([MAX_PER_WORKLOAD + 10, 5])
    result = _pass(snapshot)
    assert len(result.changes) == MAX_PER_WORKLOAD
    assert result.deferred == 15
    assert [c.position for c in result.changes] == list(range(MAX_PER_WORKLOAD))
