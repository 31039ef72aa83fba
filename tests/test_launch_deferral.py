"""Loop mode's deferral of repairs that need a new node (``run --wait-for-nodes-after``): an
eviction whose replacement waits for a node a pool adds is held (``launch-deferred``) until
repairs of its workload have needed one, run after run, that long; a run whose plan needs no
new node for the workload starts the count again; an eviction whose replacement fits a node
is never held; 0 is off; and the flag is refused without --interval."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

import pytest

from rebalancer.cli.main import build_parser
from rebalancer.cli.options import run_options
from rebalancer.cluster.act.runner import Runner
from rebalancer.core.errors import InputError
from rebalancer.core.holds import HoldRules, LoopMemory, launch_deferral
from rebalancer.core.model import Snapshot
from rebalancer.core.plan import Eviction, Plan, Skip
from rebalancer.core.policy import Policy
from tests.fakes import VIEW, FakeCluster, Wall, fake_runner, scripted_eviction

POOL = "NodePool default in zone-c"


class OneFromA:
    """Plans one eviction of zone a's newest pod while it holds more than one; its replacement
    waits for a node when ``self.waits`` is set."""

    def __init__(self, fake: FakeCluster) -> None:
        self.fake = fake
        self.waits = POOL

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
        """The newest pod of zone a; when its replacement waits for a node, the core's
        deferral (from the runner's memory) decides whether it is made or skipped."""
        in_a = [p for p in self.fake.pods.values() if p["spec"]["nodeName"] == "node-a"]
        if len(in_a) <= 1:
            return Plan((), (), (), (), 0)
        newest = max(in_a, key=lambda p: int(p["metadata"]["name"].split("-")[1]))
        spread = Counter(p["spec"]["nodeName"] for p in self.fake.pods.values())
        view = dataclasses.replace(VIEW, domains=tuple(sorted(spread.items())))
        e = dataclasses.replace(scripted_eviction(newest, wave=1), waits_for=self.waits)
        if not self.waits:
            return Plan((e,), (), (view,), (), 1)
        wanted = (e.workload_key,)
        held = launch_deferral(rules or HoldRules(), memory, now, e.workload_key, self.waits)
        if held is not None:
            skip = Skip(e.namespace, e.name, e.uid, e.node, held)
            return Plan((), (skip,), (view,), (), 1, launch_wanted=wanted)
        return Plan((e,), (), (view,), (), 1, launch_wanted=wanted)


def make(fake: FakeCluster, wall: Wall, after: float) -> tuple[Runner, OneFromA]:
    planner = OneFromA(fake)
    runner = fake_runner(
        fake,
        wall,
        planner,
        max_waves=1,
        thrash_guard_seconds=0,
        wait_for_nodes_after_seconds=after,
    )
    return runner, planner


def skips(plan: Plan | None) -> dict[str, tuple[str, str]]:
    assert plan is not None
    return {s.name: (s.reason.code, s.reason.detail) for s in plan.skipped}


def test_a_repair_that_needs_a_new_node_waits_until_the_need_has_lasted() -> None:
    fake, wall = FakeCluster({"a": 4, "b": 0, "c": 0}), Wall()
    runner, _ = make(fake, wall, after=60)
    first = runner.run_once("r1")
    assert fake.posts == [] and first.evicted == 0
    assert skips(first.first_plan) == {
        "web-4": (
            "launch-deferred",
            f"its replacement waits for {POOL}; a repair needing a new node was first planned "
            "0s ago, made after 60s",
        )
    }
    wall.now += 59
    second = runner.run_once("r2")
    assert fake.posts == []
    assert skips(second.first_plan)["web-4"][1].endswith("first planned 59s ago, made after 60s")
    wall.now += 1
    third = runner.run_once("r3")
    assert [name for name, _ in fake.posts] == ["web-4"] and third.evicted == 1
    assert skips(third.first_plan) == {}


def test_a_plan_that_needs_no_new_node_starts_the_count_again() -> None:
    fake, wall = FakeCluster({"a": 4, "b": 0, "c": 0}), Wall()
    runner, planner = make(fake, wall, after=60)
    runner.run_once("r1")  # deferred, counted from now
    planner.waits = ""  # the replacement fits a node now: never held
    wall.now += 30
    fits = runner.run_once("r2")
    assert [name for name, _ in fake.posts] == ["web-4"] and fits.evicted == 1
    planner.waits = POOL  # a new node is needed again, 40 s after the first need
    wall.now += 40
    again = runner.run_once("r3")
    assert [name for name, _ in fake.posts] == ["web-4"]
    assert skips(again.first_plan)["web-3"][0] == "launch-deferred"
    wall.now += 60
    runner.run_once("r4")
    assert [name for name, _ in fake.posts] == ["web-4", "web-3"]


def test_zero_is_off() -> None:
    fake, wall = FakeCluster({"a": 4, "b": 0, "c": 0}), Wall()
    runner, _ = make(fake, wall, after=0)
    first = runner.run_once("r1")
    assert [name for name, _ in fake.posts] == ["web-4"] and first.evicted == 1


def run_args(*flags: str) -> list[str]:
    return ["run", "--kubeconfig", "/nonexistent", *flags]


def test_the_flag_needs_interval_and_a_duration() -> None:
    parser = build_parser()
    with pytest.raises(InputError) as one_shot:
        run_options(parser.parse_args(run_args("--wait-for-nodes-after", "1m")))
    assert "--wait-for-nodes-after: only with --interval" in str(one_shot.value)
    with pytest.raises(InputError) as bad:
        run_options(
            parser.parse_args(run_args("--interval", "5s", "--wait-for-nodes-after", "soon"))
        )
    assert "--wait-for-nodes-after" in str(bad.value) and "soon" in str(bad.value)
    ok = run_options(
        parser.parse_args(run_args("--interval", "5s", "--wait-for-nodes-after", "2m"))
    )
    assert ok.run.settings.wait_for_nodes_after_seconds == 120.0
    default = run_options(parser.parse_args(run_args()))
    assert default.run.settings.wait_for_nodes_after_seconds == 0.0
