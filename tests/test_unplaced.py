"""A workload with pods not placed yet is not repaired in that run (``run --unplaced-grace``):
which pods count (not bound, not terminating, Pending, younger than the grace; per workload,
a ReplicaSet's under its Deployment), and the runner's hold (``pods-unplaced`` skips, nothing
sent) until the pod is placed."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from rebalancer.cluster.act.runner import Runner
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.pending import Unplaced, unplaced
from tests.builders import web_pod, zone_node
from tests.fakes import NOW, FakeCluster, fake_runner


def stamp(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def waiting(name: str, seconds_ago: float, **meta: Any) -> dict[str, Any]:
    """web-rs's pod ``name``, created ``seconds_ago``, not bound, Pending."""
    pod = copy.deepcopy(web_pod(name, "node-a", f"uid-{name}"))
    del pod["spec"]["nodeName"]
    pod["status"] = {"phase": "Pending"}
    pod["metadata"]["creationTimestamp"] = stamp(seconds_ago)
    pod["metadata"].update(meta)
    return pod


def replica_set_of_deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web-rs",
            "namespace": "shop",
            "uid": "uid-rs",
            "ownerReferences": [
                {"kind": "Deployment", "name": "web", "uid": "uid-d", "controller": True}
            ],
        },
        "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}}},
    }


def test_which_pods_count_as_not_placed_yet() -> None:
    bare = waiting("solo", 10)
    del bare["metadata"]["ownerReferences"]
    done = waiting("done", 5)
    done["status"] = {"phase": "Succeeded"}
    objects = [
        zone_node("node-a", "a"),
        web_pod("web-1", "node-a", "uid-1"),  # bound
        waiting("young", 30),
        waiting("younger", 12),
        waiting("old", 200),  # waiting longer than the grace: it may never be placed
        waiting("leaving", 5, deletionTimestamp=stamp(1)),
        bare,
        done,
        replica_set_of_deployment(),
    ]
    snapshot = snapshot_from_objects(objects)
    assert unplaced(snapshot, NOW, 120) == {
        "shop/Deployment/web": Unplaced(2, 30.0),
        "pod:shop/solo": Unplaced(1, 10.0),
    }
    assert unplaced(snapshot, NOW, 25) == {
        "shop/Deployment/web": Unplaced(1, 12.0),
        "pod:shop/solo": Unplaced(1, 10.0),
    }
    assert unplaced(snapshot, NOW, 0) == {}


def make(fake: FakeCluster, grace: float = 120.0) -> Runner:
    return fake_runner(fake, lambda: NOW, max_waves=1, unplaced_grace_seconds=grace)


def test_a_workload_with_a_pod_not_placed_yet_waits_for_it() -> None:
    """Zones [4, 0, 0] and one pod of web-rs waiting 30 s to be placed: the plan's evictions
    are held, nothing is sent; once it is placed (in zone b), the next run repairs."""
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    fake.pods["web-new"] = waiting("web-new", 30)
    runner = make(fake)
    first = runner.run_once("r1")
    assert fake.posts == [] and first.evicted == 0
    assert first.first_plan is not None
    held = {s.name: (s.reason.code, s.reason.detail) for s in first.first_plan.skipped}
    assert held and set(held.values()) == {
        (
            "pods-unplaced",
            "1 pod of shop/ReplicaSet/web-rs not placed yet (the oldest 30s): "
            "the scheduler places them first",
        )
    }
    fake.pods["web-new"] = web_pod("web-new", "node-b", "uid-web-new")  # the scheduler's
    second = runner.run_once("r2")
    assert second.evicted >= 1 and fake.posts


def test_zero_grace_is_off() -> None:
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    fake.pods["web-new"] = waiting("web-new", 30)
    real_counts = fake.zone_counts

    def counts() -> dict[str, int]:  # the fake's scheduler ignores the unplaced pod
        pending = fake.pods.pop("web-new", None)
        try:
            return real_counts()
        finally:
            if pending is not None:
                fake.pods["web-new"] = pending

    fake.zone_counts = counts  # type: ignore[method-assign]
    report = make(fake, grace=0).run_once("r1")
    assert report.evicted >= 1 and fake.posts
