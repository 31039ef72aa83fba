"""The runner with capacity reserved first (SPEC §5.10), against the runner's fake cluster and a
fake Lease: a reservation that brings no node sends no eviction, is remembered (the loop's
memory and the Lease's record), and the run plans again with it; a later run reads it back from
the record; what an earlier run left is removed before the first plan."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.lease import LeaseSettings
from rebalancer.cluster.act.outcome import Outcome, RunEnd
from rebalancer.cluster.act.reserverecord import CAPACITY_ANNOTATION, parse
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.core.capacity import CapacityRules, pin_of, refusal_key
from rebalancer.core.holds import LoopMemory
from rebalancer.core.model import Snapshot
from rebalancer.core.plan import Eviction, Plan, SkipCode
from rebalancer.core.policy import Policy
from tests.builders import NS
from tests.fakes import NOW, VIEW, FakeClock, FakeCluster, scripted_eviction
from tests.test_lease import NAME, NAMESPACE, FakeLeaseApi

PIN = pin_of("pb", "zone-c")
WORKLOAD = f"{NS}/ReplicaSet/web-rs"


class NoNodeCluster(FakeCluster):
    """The runner's fake cluster with reservations; the pool never adds a node. ``log``
    orders the reservations' calls and the plans."""

    def __init__(self) -> None:
        super().__init__({"a": 3, "b": 0, "c": 0})
        self.log: list[str] = []
        self.made: dict[tuple[str, str], Mapping[str, Any]] = {}

    def create_reservation(
        self, kind: str, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        self.log.append(f"create {kind} {body['metadata']['name']}")
        self.made[kind, body["metadata"]["name"]] = body
        return 201, {"metadata": {"uid": "uid-t"}}

    def get_capacity_buffer(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def list_reservations(
        self, kind: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]:
        assert label_selector == "app.kubernetes.io/managed-by=rebalancer"
        return [dict(b) for (k, _), b in self.made.items() if k == kind]

    def delete_reservation(self, kind: str, namespace: str, name: str) -> int:
        self.log.append(f"delete {kind} {name}")
        return 200 if self.made.pop((kind, name), None) is not None else 404

    def list_nodes(self, label_selector: str) -> list[dict[str, Any]]:
        return []

    def list_pods_on_node(self, node: str) -> list[dict[str, Any]]:
        return []


class Planner:
    """Plans the first pod of zone a, its replacement reserved in pool pb, zone-c, unless the
    memory holds that landing; records the memory of each plan."""

    def __init__(self, fake: NoNodeCluster) -> None:
        self.fake = fake
        self.memories: list[LoopMemory | None] = []

    def __call__(
        self,
        snapshot: Snapshot,
        policy: Policy,
        now: float,
        *,
        evicted_before: Sequence[Eviction] = (),
        rules: object = None,
        memory: LoopMemory | None = None,
    ) -> Plan:
        self.memories.append(memory)
        self.fake.log.append("plan")
        if memory is not None and refusal_key(WORKLOAD, PIN) in memory.refused:
            return Plan((), (), (VIEW,), (), 0)
        pod = next(p for p in self.fake.pods.values() if p["spec"]["nodeName"] == "node-a")
        e = dataclasses.replace(
            scripted_eviction(pod, 1),
            waits_for="NodePool pb in zone-c",
            capacity="reserve",
            reserve_in=PIN,
        )
        return Plan((e,), (), (VIEW,), (), 1)


def runner(fake: NoNodeCluster, api: FakeLeaseApi, planner: Planner) -> Runner:
    clock = FakeClock()
    fake.leases = api
    return Runner(
        fake,
        fake,
        Policy(),
        RunSettings(
            executor=ExecutorSettings(wave_timeout_seconds=20.0),
            instance="test",
            lease=LeaseSettings(namespace=NAMESPACE, name=NAME),
            capacity=CapacityRules(reserve=True, why="served and allowed"),
        ),
        clock=clock,
        wall_clock=lambda: NOW,
        sleep=clock.sleep,
        plan_fn=planner,
    )


def record(api: FakeLeaseApi) -> Any:
    assert api.obj is not None
    return parse(api.obj["metadata"].get("annotations"))


def test_no_node_no_eviction_the_refusal_remembered_and_planned_around() -> None:
    fake, api = NoNodeCluster(), FakeLeaseApi()
    planner = Planner(fake)
    report = runner(fake, api, planner).run_once("run1")
    (result,) = report.results
    assert result.outcome is Outcome.SKIPPED
    assert result.skip is not None and result.skip.code is SkipCode.CAPACITY_NOT_ADDED
    assert result.skip.detail == "NodePool pb added no node in zone-c within 20s"
    assert fake.posts == []
    assert fake.made == {}  # the buffer and its template were deleted
    # planned again at once with the refusal in memory: nothing left to try
    assert [
        m is not None and refusal_key(WORKLOAD, PIN) in m.refused for m in planner.memories
    ] == [
        False,
        True,
    ]
    assert report.end is RunEnd.NOTHING_TO_EVICT and report.exit_code == 0
    kept = record(api)
    assert list(kept.refused) == [refusal_key(WORKLOAD, PIN)] and kept.made == []
    # a later run (a CronJob's next) reads it back from the Lease's record
    later = Planner(fake)
    runner(fake, api, later).run_once("run2")
    assert later.memories[0] is not None
    assert refusal_key(WORKLOAD, PIN) in later.memories[0].refused
    assert fake.made == {}


def test_what_an_earlier_run_left_is_removed_before_the_first_plan() -> None:
    fake, api = NoNodeCluster(), FakeLeaseApi()
    runner(fake, api, Planner(fake)).run_once("run1")  # makes the Lease
    # a run killed after its buffer: named in the record, and another found by its labels only
    assert api.obj is not None
    annotations = api.obj["metadata"]["annotations"]
    left = {"ns": NS, "name": "rebalancer-reserve-aaaa", "run": "killed", "at": NOW}
    annotations[CAPACITY_ANNOTATION] = json.dumps({"made": [left], "refused": {}})
    labels = {"app.kubernetes.io/managed-by": "rebalancer", "rebalancer/run": "other"}
    for kind in ("capacitybuffers", "podtemplates"):
        fake.made[kind, "rebalancer-reserve-aaaa"] = {"metadata": {"name": "x"}}
        fake.made[kind, "rebalancer-reserve-bbbb"] = {
            "metadata": {"namespace": NS, "name": "rebalancer-reserve-bbbb", "labels": labels}
        }
    fake.log.clear()
    runner(fake, api, Planner(fake)).run_once("run3")
    first_plan = fake.log.index("plan")
    assert set(fake.log[:first_plan]) == {
        f"delete {kind} {name}"
        for kind in ("capacitybuffers", "podtemplates")
        for name in ("rebalancer-reserve-aaaa", "rebalancer-reserve-bbbb")
    }
    assert fake.made == {}
    assert record(api).made == []
