"""Waves (SPEC §3.9): executed one at a time against a cooperative, random or adversarial scheduler.

The executor plans, evicts only the first wave, lets a simulated scheduler place each
replacement on one of its legal nodes (``explain(...).feasible_nodes``: its own hard spread
constraints on the current state, resources, taints, cordon, affinity, volumes), then plans
again from the new state, until the plan is empty.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.explain import explain
from rebalancer.core.ids import PodId
from rebalancer.core.minimal import min_moves, water_level
from rebalancer.core.model import ZONE_KEY, OwnerRef, Pod, Snapshot
from rebalancer.core.moves import Move
from rebalancer.core.planner import plan
from rebalancer.core.planpass import PlanningPass
from rebalancer.core.policy import Policy
from rebalancer.core.victims import victim_heights
from rebalancer.core.waves import assign_waves
from tests.builders import node, pod, zone_constraint, zones_cluster
from tests.strategies import NOW, Cluster, clusters, domain_counts

DEFAULT = Policy()
MAX_WAVES = 50
# Chooses a node among the legal ones: (replacement, legal nodes, domain counts by node) -> node.
Chooser = Callable[[Pod, list[str], dict[str, int]], str]


@dataclass
class Run:
    """What happened while executing a plan wave by wave."""

    snapshot: Snapshot
    waves: int = 0
    evictions: int = 0
    wave_sizes: list[int] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)  # replacements back in their own domain
    stalled: bool = False  # stopped because a wave's replacements all came back


def adversary(_pod: Pod, legal: list[str], load: dict[str, int]) -> str:
    """The legal node in the most populated domain (ties: the last node name)."""
    return max(legal, key=lambda n: (load[n], n))


def cooperative(_pod: Pod, legal: list[str], load: dict[str, int]) -> str:
    """The legal node in the least populated domain (ties: the first node name)."""
    return min(legal, key=lambda n: (load[n], n))


def seeded(seed: int) -> Chooser:
    rng = random.Random(seed)

    def choose(_pod: Pod, legal: list[str], _load: dict[str, int]) -> str:
        return rng.choice(sorted(legal))

    return choose


def execute(snapshot: Snapshot, choose: Chooser, key: str = ZONE_KEY) -> Run:
    """Plan, evict wave 1, place its replacements with ``choose``; repeat until nothing is left."""
    run = Run(snapshot)
    domain_of = {n.name: n.labels[key] for n in snapshot.nodes}
    serial = 0
    previous: object = None
    for wave in range(1, MAX_WAVES + 1):
        now = NOW + 100 * wave
        result = plan(run.snapshot, DEFAULT, now)
        if not result.evictions:
            return run
        spread = [(v.namespace, v.topology_key, v.selector, v.domains) for v in result.violations]
        if spread == previous:
            run.stalled = True  # the runner's no-progress stop: the replacements came back
            return run
        previous = spread
        first = [e for e in result.evictions if e.wave == 1]
        run.waves = wave
        run.evictions += len(first)
        run.wave_sizes.append(len(first))
        gone = {e.uid for e in first}
        by_uid = {p.uid: p for p in run.snapshot.pods}
        originals = [by_uid[e.uid] for e in first]  # replacements arrive in eviction order
        pods = [p for p in run.snapshot.pods if p.uid not in gone]
        for old in originals:
            serial += 1
            new = dataclasses.replace(
                old,
                name=f"{old.name.split('~')[0]}~{serial}",
                uid=f"uid-replacement-{serial}",
                node_name=None,
                created=now + serial / 1000,
            )
            pods.append(new)
            pending = dataclasses.replace(run.snapshot, pods=tuple(pods))
            why = explain(pending, DEFAULT, new.namespace, new.name)
            legal = list(why.feasible_nodes)
            assert legal, f"{new.key} would stay Pending: {why.rejected}"
            counts = dict(why.constraints[0].match_counts)
            load = {n: counts.get(domain_of[n], 0) for n in legal}
            target = choose(new, legal, load)
            assert target in legal
            if domain_of[target] == domain_of[old.node_name or ""]:
                run.returned.append(old.key)
            pods[-1] = dataclasses.replace(new, node_name=target)
        run.snapshot = dataclasses.replace(run.snapshot, pods=tuple(pods))
    raise AssertionError(f"no convergence after {MAX_WAVES} waves")


def zone_skew(cluster: Cluster, snapshot: Snapshot) -> tuple[int, int, int]:
    """(skew, maxSkew, min_moves) of the cluster's one zone constraint in ``snapshot``."""
    (workload,) = cluster.workloads
    (c,) = workload.constraints
    counts = domain_counts(snapshot, workload, c.topology_key)
    values = list(counts.values())
    floor = 0 if len(values) < c.min_domains else min(values)
    return max(values) - floor, c.max_skew, min_moves(values, c.max_skew, c.min_domains)


def zone_clusters() -> st.SearchStrategy[Cluster]:
    """One Deployment, one hard zone constraint, room everywhere, every pod evictable."""
    return clusters(
        keys="zone", max_workloads=1, ample=True, all_evictable=True, pdbs=False
    ).filter(_reachable)


def _reachable(cluster: Cluster) -> bool:
    (workload,) = cluster.workloads
    (c,) = workload.constraints
    values = list(domain_counts(cluster.snapshot, workload, ZONE_KEY).values())
    return len(values) >= c.min_domains or sum(values) <= c.max_skew * len(values)


# Largest (evictions against the adversary) - min_moves seen; see test_adversary_slack_is_small.
SLACK = 2


@settings(max_examples=100)
@given(zone_clusters())
def test_adversarial_scheduler_converges_within_max_skew(cluster: Cluster) -> None:
    """Against a scheduler that always picks the fullest legal zone, the waves still converge."""
    run = execute(cluster.snapshot, adversary)
    skew, max_skew, _ = zone_skew(cluster, run.snapshot)
    assert skew <= max_skew
    assert run.returned == []


@settings(max_examples=100)
@given(zone_clusters(), st.integers(0, 2**32 - 1))
def test_random_scheduler_converges_within_max_skew(cluster: Cluster, seed: int) -> None:
    """A scheduler picking any legal node at random ends within maxSkew, never going back."""
    run = execute(cluster.snapshot, seeded(seed))
    skew, max_skew, _ = zone_skew(cluster, run.snapshot)
    assert skew <= max_skew
    assert run.returned == []


@settings(max_examples=100)
@given(zone_clusters())
def test_adversary_slack_is_small(cluster: Cluster) -> None:
    """Total evictions against the adversary stay within min_moves + SLACK."""
    _, _, needed = zone_skew(cluster, cluster.snapshot)
    run = execute(cluster.snapshot, adversary)
    assert needed <= run.evictions <= needed + SLACK


@settings(max_examples=100)
@given(zone_clusters())
def test_cooperative_scheduler_needs_exactly_min_moves(cluster: Cluster) -> None:
    """A scheduler that does what the simulation assumes ends after exactly min_moves evictions."""
    _, _, needed = zone_skew(cluster, cluster.snapshot)
    run = execute(cluster.snapshot, cooperative)
    skew, max_skew, _ = zone_skew(cluster, run.snapshot)
    assert skew <= max_skew
    assert run.evictions == needed


def _spec_example() -> Snapshot:
    nodes, pods = zones_cluster([3, 9, 0, 9], max_skew=3)
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods))


def _zone_counts(snapshot: Snapshot) -> list[int]:
    zones = sorted({n.labels[ZONE_KEY] for n in snapshot.nodes})
    node_zone = {n.name: n.labels[ZONE_KEY] for n in snapshot.nodes}
    placed = [node_zone[p.node_name] for p in snapshot.pods if p.node_name]
    return [placed.count(z) for z in zones]


def test_spec_example_plan_is_five_evictions_in_one_wave() -> None:
    """[3,9,0,9] maxSkew 3: five evictions (3 from b, 2 from d), all provably unable to return.

    Removing them leaves [3,6,0,7]; four other replacements lift the minimum to at most
    water_level([3,6,0,7], 4) = 3, and the last one from b still has 6 + 1 - 3 = 4 > 3.
    """
    result = plan(_spec_example(), DEFAULT, NOW)
    assert len(result.evictions) == 5 == result.lower_bound
    assert [e.domain for e in result.evictions] == [
        "zone-b",
        "zone-d",
        "zone-b",
        "zone-d",
        "zone-b",
    ]
    assert {e.wave for e in result.evictions} == {1}
    assert water_level([3, 6, 0, 7], 4) == 3


@pytest.mark.parametrize(
    "choose", [adversary, cooperative, seeded(7)], ids=["adversary", "cooperative", "random"]
)
def test_spec_example_converges(choose: Chooser) -> None:
    """[3,9,0,9] maxSkew 3 ends within maxSkew whatever legal node the scheduler picks."""
    run = execute(_spec_example(), choose)
    counts = _zone_counts(run.snapshot)
    assert sum(counts) == 21
    assert max(counts) - min(counts) <= 3
    assert run.returned == []
    assert 5 <= run.evictions <= 5 + SLACK


def test_spec_example_against_the_adversary() -> None:
    """The adversary run of [3,9,0,9] takes the waves and end state worked out by hand.

    Wave 1 leaves [3,6,0,7]; the adversary puts the five replacements, in eviction order, in
    the fullest legal zone: c (only legal one), a, c, a, c, giving [5,6,3,7], skew 4. Re-planned:
    one eviction from d ([5,6,3,6], min 3); the adversary picks a: [6,6,3,6], skew 3. Six
    evictions, one more than the minimum.
    """
    run = execute(_spec_example(), adversary)
    assert run.wave_sizes == [5, 1]
    assert _zone_counts(run.snapshot) == [6, 6, 3, 6]
    assert run.evictions == 6


@pytest.mark.parametrize(
    ("counts", "extra", "level"),
    [
        ([], 5, 0),
        ([4], 0, 4),
        ([5], 2, 7),
        ([0, 0], 3, 1),
        ([0, 0], 4, 2),
        ([1, 4], 10, 7),
        ([3, 7, 0, 7], 3, 3),  # the SPEC example: three replacements lift the minimum to 3
        ([3, 7, 0, 7], 2, 2),
        ([3, 7, 0, 7], 0, 0),
        ([0, 3, 3], 2, 2),
        ([0, 3, 3], 3, 3),
        ([2, 2, 2], 2, 2),
        ([2, 2, 2], 3, 3),
        ([9, 0, 0, 0], 5, 1),
    ],
)
def test_water_level(counts: list[int], extra: int, level: int) -> None:
    """water_level is the highest minimum that ``extra`` added pods can reach."""
    assert water_level(counts, extra) == level


@given(st.lists(st.integers(0, 20), min_size=1, max_size=6), st.integers(0, 40))
def test_water_level_matches_pouring_one_by_one(counts: list[int], extra: int) -> None:
    """Pouring pods one at a time into the emptiest domain reaches exactly water_level."""
    poured = list(counts)
    for _ in range(extra):
        poured[poured.index(min(poured))] += 1
    assert water_level(counts, extra) == min(poured)


@given(st.lists(st.integers(0, 20), max_size=6), st.integers(0, 40), st.integers(0, 12))
def test_water_level_counts_the_domains_left_out_as_empty(
    counts: list[int], extra: int, empty: int
) -> None:
    """Passing empty domains as a number equals listing them as zeros."""
    assert water_level(counts, extra, empty) == water_level(counts + [0] * empty, extra)


def _pinned_example() -> Snapshot:
    """Zones [3 DaemonSet pods, 0, 2 Deployment pods], maxSkew 2: only zone-c's pods may move."""
    c = zone_constraint("web", 2)
    nodes = [node(f"n-{z}", f"zone-{z}") for z in "abc"]
    pinned = [
        pod(f"ds-{k}", "n-a", owner=OwnerRef("DaemonSet", "web-ds"), created=900.0 + k)
        for k in range(3)
    ]
    movable = [pod(f"web-{k}", "n-c", constraints=[c], created=1000.0 + k) for k in range(2)]
    return Snapshot(nodes=tuple(nodes), pods=(*pinned, *movable))


def test_pinned_example_plan_moves_one_pod_from_c_to_b() -> None:
    """[3 pinned, 0, 2] maxSkew 2: one eviction from zone-c, expected to land in zone-b."""
    result = plan(_pinned_example(), DEFAULT, NOW)
    assert [(e.domain, e.target_node, e.wave) for e in result.evictions] == [("zone-c", "n-b", 1)]
    assert [r.skew for r in result.after] == [2]


def test_pinned_example_stops_against_the_adversary() -> None:
    """A move that may return is tried once: when the adversary puts it back, the run stops."""
    run = execute(_pinned_example(), adversary)
    assert _zone_counts(run.snapshot) == [3, 0, 2]
    assert run.stalled
    assert run.evictions == 1


def test_pinned_example_converges_with_a_cooperative_scheduler() -> None:
    """The same move lands in the empty zone when the scheduler takes the emptiest legal one."""
    run = execute(
        _pinned_example(), lambda _pod, legal, load: min(legal, key=lambda n: (load[n], n))
    )
    assert _zone_counts(run.snapshot) == [3, 1, 1]
    assert not run.stalled
    assert run.evictions == 1


def _six_seven_one(priority_b: int = 0) -> Snapshot:
    """Zones [6, 7, 1], maxSkew 2; zone-b's pods at ``priority_b``."""
    c = zone_constraint("web", 2)
    nodes = [node(f"n-{z}", f"zone-{z}") for z in "abc"]
    pods = [
        pod(f"web-{z}-{k}", f"n-{z}", constraints=[c], created=1000.0 + k, priority=priority)
        for z, count, priority in (("a", 6, 0), ("b", 7, priority_b), ("c", 1, 0))
        for k in range(count)
    ]
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods))


def test_a_wave_is_checked_for_all_its_replacements_together() -> None:
    """Moves from zone-a, zone-a, zone-b of [6, 7, 1] maxSkew 2: after all three leave,
    [4, 6, 1], two replacements can lift the minimum to 3 and the third could then land in
    zone-a (4 + 1 - 3 <= 2). The move from zone-b keeps its own zone shut (6 + 1 - 3 > 2), but
    it would let zone-a take a replacement back: it waits for wave 2."""
    planner = PlanningPass(_six_seven_one(), DEFAULT, NOW, ())
    (view,) = planner.violated
    by_node: dict[str, list[PodId]] = {}
    for i, p in enumerate(planner.analysis.pods):
        by_node.setdefault(p.node_name or "", []).append(PodId(i))
    moves = [
        Move(by_node["n-a"][0], view, "n-a", "n-c", 6, 1),
        Move(by_node["n-a"][1], view, "n-a", "n-c", 5, 1),
        Move(by_node["n-b"][0], view, "n-b", "n-c", 7, 1),
    ]
    waves = assign_waves(
        planner.state.fresh(),
        planner.analysis.views,
        planner.ranking.pdbs,
        planner.ctx.budgets.allowed,
        moves,
    )
    assert waves == [1, 1, 2]
    assert water_level([4, 6, 1], 2) == 3


def test_the_fullest_zone_goes_first_whatever_chose_the_victims() -> None:
    """[6, 7, 1] maxSkew 2, zone-b at priority 100: preemption's order takes two pods from
    zone-a and one from zone-b; zone-b's goes first, with one from zone-a ([5, 6, 1]: one other
    replacement lifts the minimum to 2, 5 + 1 - 2 > 2), and the last waits for wave 2. Against
    the worst scheduler that run needs 3 evictions; starting with two from zone-a needs 4."""
    result = plan(_six_seven_one(priority_b=100), DEFAULT, NOW)
    assert [(e.domain, e.priority, e.wave) for e in result.evictions] == [
        ("zone-b", 100, 1),
        ("zone-a", 0, 1),
        ("zone-a", 0, 2),
    ]


@pytest.mark.parametrize(
    ("sizes", "removals", "heights"),
    [
        ([6, 7, 1], [1, 2, 0], (-7, -6, -6)),
        ([6, 7, 1], [2, 1, 0], (-7, -6, -5)),
        ([6, 7, 1], [0, 3, 0], (-7, -6, -5)),
        ([3, 9, 0, 9], [0, 3, 0, 2], (-9, -9, -8, -8, -7)),
        ([5], [0], ()),
    ],
)
def test_victim_heights(sizes: list[int], removals: list[int], heights: tuple[int, ...]) -> None:
    """Each victim's domain count as it leaves, highest first, negated: the plan that takes its
    victims from the most populated domains compares smallest."""
    assert victim_heights(sizes, removals) == heights


def test_equal_pods_leave_the_most_populated_zones_first() -> None:
    """[6, 7, 1] maxSkew 2 with pods alike: one victim from the 6 and two from the 7, whichever
    zone's pods are the youngest (age decides only after the domains' counts)."""
    for ages in ((1000.0, 2000.0), (2000.0, 1000.0)):
        c = zone_constraint("web", 2)
        nodes = [node(f"n-{z}", f"zone-{z}") for z in "abc"]
        pods = [
            pod(f"web-{z}-{k}", f"n-{z}", constraints=[c], created=created + k)
            for z, count, created in (("a", 6, ages[0]), ("b", 7, ages[1]), ("c", 1, 0.0))
            for k in range(count)
        ]
        result = plan(Snapshot(nodes=tuple(nodes), pods=tuple(pods)), DEFAULT, NOW)
        assert sorted(e.domain for e in result.evictions) == ["zone-a", "zone-b", "zone-b"]
        assert {e.wave for e in result.evictions} == {1}
