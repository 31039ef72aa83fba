"""Loop mode's memory: a workload cools down after its replacements land, and a replacement is
not evicted again within the hour (thrash guard); both show as skips, and the planner goes
around a guarded pod."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from rebalancer.cluster.act.runner import Runner
from rebalancer.core.holds import HoldRules, LoopMemory, victim_holds
from rebalancer.core.model import Snapshot
from rebalancer.core.plan import Eviction, Plan, Skip
from rebalancer.core.policy import Policy
from tests.fakes import VIEW, FakeCluster, Wall, fake_runner, scripted_eviction


class NewestInA:
    """Plans one eviction while zone a holds more than ``keep`` pods: its newest pod (the
    highest number), so that a replacement landed back in a is the one chosen next."""

    def __init__(self, fake: FakeCluster, keep: int = 1) -> None:
        self.fake = fake
        self.keep = keep

    def __call__(
        self,
        snapshot: Snapshot,
        policy: Policy,
        now: float,
        *,
        evicted_before: Sequence[Eviction] = (),
        rules: HoldRules | None = None,
        memory: LoopMemory | None = None,
    ) -> Plan:
        """The newest pod of zone a, unless the core's holds (from the runner's memory) hold
        it: then it is a skip with the hold's reason, and nothing is evicted."""
        in_a = [p for p in self.fake.pods.values() if p["spec"]["nodeName"] == "node-a"]
        if len(in_a) <= self.keep:
            return Plan((), (), (), (), 0)
        newest = max(in_a, key=lambda p: int(p["metadata"]["name"].split("-")[1]))
        spread = Counter(p["spec"]["nodeName"] for p in self.fake.pods.values())
        view = dataclasses.replace(VIEW, domains=tuple(sorted(spread.items())))
        eviction = scripted_eviction(newest, wave=1)
        held = victim_holds(snapshot, rules or HoldRules(), memory, now).get(eviction.key)
        if held is not None:
            skip = Skip(eviction.namespace, eviction.name, eviction.uid, eviction.node, held)
            return Plan((), (skip,), (view,), (), 1)
        return Plan((eviction,), (), (view,), (), 1)


def make(fake: FakeCluster, wall: Wall, **settings: float | int) -> Runner:
    return fake_runner(fake, wall, NewestInA(fake), **settings)


def skip_codes(plan: Plan | None) -> dict[str, str]:
    assert plan is not None
    return {s.name: s.reason.code for s in plan.skipped}


def test_a_replacement_is_not_evicted_again_for_the_same_view_within_the_hour() -> None:
    """The replacement of web-4 lands back in zone a (web-5): the next run's plan picks it and
    the guard holds it (thrash-guard), nothing is sent; an hour later it may go."""
    fake, wall = FakeCluster({"a": 4, "b": 0, "c": 0}), Wall()
    fake.stubborn = True
    runner = make(fake, wall, max_waves=1)
    first = runner.run_once("r1")
    assert [name for name, _ in fake.posts] == ["web-4"]
    assert first.results[0].replacement == "shop/web-5"
    wall.now += 600
    second = runner.run_once("r2")
    assert [name for name, _ in fake.posts] == ["web-4"]
    assert second.evicted == 0
    assert skip_codes(second.first_plan) == {"web-5": "thrash-guard"}
    wall.now += 3000  # 3,600 s after the replacement landed
    third = runner.run_once("r3")
    assert [name for name, _ in fake.posts] == ["web-4", "web-5"]
    assert third.evicted == 1


def test_the_guard_is_off_at_zero() -> None:
    fake, wall = FakeCluster({"a": 4, "b": 0, "c": 0}), Wall()
    fake.stubborn = True
    runner = make(fake, wall, max_waves=1, thrash_guard_seconds=0)
    runner.run_once("r1")
    wall.now += 60
    runner.run_once("r2")
    assert [name for name, _ in fake.posts] == ["web-4", "web-5"]


def test_a_workload_cools_down_after_its_replacements_land() -> None:
    """Cooldown 60 s: run 1 evicts in two waves (its own waves are not held); a run 10 s later
    evicts nothing of web-rs (cooldown skip); one 61 s after the landing evicts again."""
    fake, wall = FakeCluster({"a": 4, "b": 0, "c": 0}), Wall()
    runner = make(fake, wall, max_waves=2, workload_cooldown_seconds=60)
    first = runner.run_once("r1")
    assert [name for name, _ in fake.posts] == ["web-4", "web-3"]
    assert first.evicted == 2
    wall.now += 10
    second = runner.run_once("r2")
    assert second.evicted == 0
    assert skip_codes(second.first_plan) == {"web-2": "cooldown"}
    assert second.first_plan.skipped[0].reason.detail == (
        "shop/ReplicaSet/web-rs: replacements landed 10s ago, 50s of cooldown left"
    )
    wall.now += 51
    third = runner.run_once("r3")
    assert [name for name, _ in fake.posts] == ["web-4", "web-3", "web-2"]
    assert third.evicted == 1


def test_no_cooldown_by_default_in_the_runner() -> None:
    fake, wall = FakeCluster({"a": 5, "b": 0, "c": 0}), Wall()
    runner = make(fake, wall, max_waves=1)
    runner.run_once("r1")
    wall.now += 1
    runner.run_once("r2")
    assert [name for name, _ in fake.posts] == ["web-5", "web-4"]


def _real_runner(fake: FakeCluster, wall: Wall, **settings: float | int) -> Runner:
    return fake_runner(fake, wall, **settings)


class AgingCluster(FakeCluster):
    """Each pod created a minute after the one before: replacements are the youngest."""

    def _add(self, node: str) -> str:
        name = super()._add(node)
        n = int(name.split("-")[1])
        self.pods[name]["metadata"]["creationTimestamp"] = (
            f"2025-01-01T{n // 60:02d}:{n % 60:02d}:00Z"
        )
        return name


def _two_runs(guard: float) -> tuple[list[str], list[str], list[str]]:
    """Zones [4,0,0] under the real planner, a scheduler that puts every replacement back in
    zone a: run 1's evictions, their replacements, and run 2's evictions (600 s later)."""
    fake, wall = AgingCluster({"a": 4, "b": 0, "c": 0}), Wall()
    fake.stubborn = True
    runner = _real_runner(fake, wall, max_waves=1, thrash_guard_seconds=guard)
    first = runner.run_once("r1")
    evicted_first = [name for name, _ in fake.posts]
    replacements = [str(r.replacement).partition("/")[2] for r in first.results]
    wall.now += 600
    runner.run_once("r2")
    return evicted_first, replacements, [name for name, _ in fake.posts][len(evicted_first) :]


def test_the_planner_goes_around_a_guarded_replacement() -> None:
    """The replacements land back in zone a, the youngest pods there, which the planner takes
    first. The guard holds them, so the next run's plan takes as many other pods of zone a
    instead: the repair goes on, and no replacement is evicted again. Without the guard the
    same second run takes the replacements."""
    first, replacements, second = _two_runs(guard=3600)
    assert len(first) == 2 and len(replacements) == 2
    assert len(second) == len(first)
    assert not set(second) & set(replacements)
    assert not set(second) & set(first)
    _, unguarded_replacements, unguarded_second = _two_runs(guard=0)
    assert sorted(unguarded_second) == sorted(unguarded_replacements)
