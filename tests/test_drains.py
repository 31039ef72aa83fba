"""A node's drain and its replacements: which controllers a drain touched and which pods are
new (rebalancer.core.drains), and loop mode's thrash guard going around the replacements, so
that a repair right after Karpenter drained a node takes older pods, not those it just moved."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import structlog

from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.core.convert.builder import snapshot_from_objects
from rebalancer.core.drains import Seen, arrived, drained
from rebalancer.core.model import Snapshot
from rebalancer.core.policy import Policy
from tests.builders import web_pod, zone_node
from tests.fakes import NOW, FakeClock, FakeCluster

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def tainted(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out.setdefault("spec", {})["taints"] = [DISRUPTED]
    return out


def of(*objects: dict[str, Any]) -> Snapshot:
    return snapshot_from_objects(list(objects))


def other_pod(name: str, node: str, uid: str) -> dict[str, Any]:
    pod = web_pod(name, node, uid)
    pod["metadata"]["ownerReferences"][0]["name"] = "api-rs"
    return pod


# -- the pure part: hand-made reads -------------------------------------------------------------

A, B, C = zone_node("n1", "a"), zone_node("n2", "b"), zone_node("n3", "c")
WEB = "shop/ReplicaSet/web-rs"


def test_a_pod_on_a_disrupted_node_marks_its_controller_without_a_read_before() -> None:
    now = of(A, tainted(C), web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"))
    assert drained(None, now) == {WEB: "n3"}
    assert arrived(None, now) == []


def test_pods_gone_from_a_node_now_gone_or_disrupted_mark_their_controller() -> None:
    before = Seen.of(of(A, C, web_pod("w1", "n1", "u1"), other_pod("x2", "n3", "u2")))
    gone = of(A, web_pod("w1", "n1", "u1"), other_pod("x3", "n1", "u3"))
    assert drained(before, gone) == {"shop/ReplicaSet/api-rs": "n3"}
    assert [p.name for p in arrived(before, gone)] == ["x3"]
    emptied = of(A, tainted(C), web_pod("w1", "n1", "u1"), other_pod("x3", "n1", "u3"))
    assert drained(before, emptied) == {"shop/ReplicaSet/api-rs": "n3"}


def test_a_scale_down_is_no_drain() -> None:
    """The pod left a node that stays, untainted: no drain, whatever arrived meanwhile."""
    before = Seen.of(of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2")))
    after = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w4", "n1", "u4"))
    assert drained(before, after) == {}
    assert [p.name for p in arrived(before, after)] == ["w4"]


def test_a_node_gone_whose_pods_stay_is_no_drain_of_them() -> None:
    """A pod still there (by uid) did not leave, even if its node did (it is orphaned)."""
    before = Seen.of(of(A, C, web_pod("w2", "n3", "u2")))
    assert drained(before, of(A, web_pod("w2", "n3", "u2"))) == {}


def test_a_replacement_that_keeps_the_name_is_new_by_uid() -> None:
    before = Seen.of(of(A, web_pod("db-0", "n1", "u1")))
    again = of(A, web_pod("db-0", "n1", "u9"))
    assert [p.uid for p in arrived(before, again)] == ["u9"]


@pytest.mark.parametrize("names", [("n1", "n2", "n3"), ("zz", "aa", "mm")])
def test_renaming_the_nodes_changes_nothing_but_the_names(names: tuple[str, str, str]) -> None:
    """The first node by name is the one named, whatever the names are."""
    x, y, z = names
    now = of(
        zone_node(x, "a"),
        tainted(zone_node(y, "b")),
        tainted(zone_node(z, "c")),
        web_pod("w1", y, "u1"),
        web_pod("w2", z, "u2"),
    )
    assert drained(None, now) == {WEB: min(y, z)}


# -- the runner: a repair right after a drain ---------------------------------------------------


class Wall:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Drained(FakeCluster):
    """Zones a, b, c with two web pods each, each pod a minute younger than the one before,
    and an empty node in zone c: the one Karpenter launched to replace node-c."""

    def __init__(self) -> None:
        super().__init__({"a": 2, "b": 2, "c": 2})
        self.nodes["node-c2"] = zone_node("node-c2", "c")
        self.stubborn = False

    def _add(self, node: str) -> str:
        if node not in getattr(self, "nodes", {node: None}):
            node = "node-c2"  # the scheduler's pick for zone c once node-c is gone
        name = super()._add(node)
        n = int(name.split("-")[1])
        self.pods[name]["metadata"]["creationTimestamp"] = f"2025-01-01T00:{n:02d}:00Z"
        return name

    def taint(self) -> None:
        self.nodes["node-c"] = tainted(self.nodes["node-c"])

    def drain(self, *, delete_node: bool = True) -> list[str]:
        """node-c's pods leave and their replacements land in zone a (zone c's new node was
        not Ready yet); node-c is deleted. The replacements' names."""
        for name in [n for n, p in self.pods.items() if p["spec"]["nodeName"] == "node-c"]:
            del self.pods[name]
        if delete_node:
            del self.nodes["node-c"]
        return [self._add("node-a"), self._add("node-a")]


def _runner(fake: FakeCluster, wall: Wall, guard: float) -> Runner:
    clock = FakeClock()
    return Runner(
        fake,
        fake,
        Policy(),
        RunSettings(
            executor=ExecutorSettings(pdb_retries=1),
            instance="test",
            max_waves=1,
            thrash_guard_seconds=guard,
        ),
        clock=clock,
        wall_clock=wall,
        sleep=clock.sleep,
    )


def _after_drain(guard: float, *, seen_tainted: bool) -> tuple[list[str], list[str], list[str]]:
    """Runs before the drain (balanced: nothing evicted), then one after it: the drain's
    replacements, the run's evictions and its thrash-guard skips."""
    fake, wall = Drained(), Wall()
    runner = _runner(fake, wall, guard)
    runner.run_once("r1")
    fake.taint()
    with structlog.testing.capture_logs() as logged:
        if seen_tainted:
            wall.now += 5
            runner.run_once("r2")
        assert fake.posts == []
        replacements = fake.drain()
        wall.now += 5
        report = runner.run_once("r3")
    seen = [(e["controller"], e["node"]) for e in logged if e["event"] == "drain.seen"]
    assert seen == ([("shop/ReplicaSet/web-rs", "node-c")] if guard else [])
    assert report.first_plan is not None
    held = [s.name for s in report.first_plan.skipped if s.reason.code == "thrash-guard"]
    return replacements, [name for name, _ in fake.posts], held


@pytest.mark.parametrize("seen_tainted", [True, False])
def test_the_repair_after_a_drain_takes_older_pods_than_its_replacements(
    seen_tainted: bool,
) -> None:
    """Zones [4, 2, 0] after the drain, maxSkew 1: two evictions from zone a. The youngest
    pods there are the drain's replacements, which the planner would take first; the guard
    holds them and the plan takes the two older pods of zone a instead. Whether a run saw the
    node tainted or only gone, the same."""
    replacements, evicted, held = _after_drain(3600, seen_tainted=seen_tainted)
    assert sorted(held) == sorted(replacements)
    assert sorted(evicted) == ["web-1", "web-2"]
    _, unguarded, none_held = _after_drain(0, seen_tainted=seen_tainted)
    assert sorted(unguarded) == sorted(replacements)
    assert none_held == []


def test_new_pods_after_a_scale_down_are_not_held() -> None:
    """The same counts reached by a scale-down in zone c (its node stays, untainted) and a
    scale-up in zone a: no drain, the planner takes the youngest pods as always."""
    fake, wall = Drained(), Wall()
    runner = _runner(fake, wall, 3600)
    runner.run_once("r1")
    added = fake.drain(delete_node=False)
    wall.now += 5
    report = runner.run_once("r2")
    assert report.first_plan is not None
    assert [s for s in report.first_plan.skipped if s.reason.code == "thrash-guard"] == []
    assert sorted(name for name, _ in fake.posts) == sorted(added)


def test_a_drain_seen_more_than_a_minute_ago_marks_no_new_pod() -> None:
    """The drain's mark on its controller lasts a minute after the runner last saw it: pods
    of the same ReplicaSet created two minutes after the drain are not held for it."""
    fake, wall = Drained(), Wall()
    runner = _runner(fake, wall, 3600)
    fake.taint()
    runner.run_once("r1")
    fake.drain()  # the replacements come back to zone a
    wall.now += 5
    runner.run_once("r2")
    wall.now += 120
    late = [fake._add("node-a"), fake._add("node-a")]
    wall.now += 5
    report = runner.run_once("r3")
    assert report.first_plan is not None
    held = {s.name for s in report.first_plan.skipped if s.reason.code == "thrash-guard"}
    assert held and not held & set(late)
