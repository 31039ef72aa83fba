"""Steering's writes: the merge patch, the client's PATCH allow-list, outcomes, the run loop."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rebalancer.cli.main import main
from rebalancer.cli.render import render_run
from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.cluster.act.steering import CostOutcome, patch_body, write_costs
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.core.policy import Policy
from rebalancer.core.steer import CostChange, Steering
from tests.fakes import NOW, FakeClock, FakeCluster, RecordingServer

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "skewed-cluster.yaml"
COST = "controller.kubernetes.io/pod-deletion-cost"
MARK = "rebalancer/deletion-cost"


def change(name: str, cost: int | None = -3, version: str = "7") -> CostChange:
    return CostChange("shop", name, f"uid-{name}", version, "shop/web-rs", 0, None, cost)


def test_the_patch_carries_the_cost_its_mark_and_the_resource_version_only() -> None:
    """Setting writes the cost and the mark alike; removing sets both to null."""
    assert patch_body(change("a")) == {
        "metadata": {"resourceVersion": "7", "annotations": {COST: "-3", MARK: "-3"}}
    }
    assert patch_body(change("a", None)) == {
        "metadata": {"resourceVersion": "7", "annotations": {COST: None, MARK: None}}
    }


def test_the_client_patches_a_pods_cost_as_a_merge_patch() -> None:
    """patch_pod_cost sends PATCH to the pod itself, the body unchanged."""
    api = RecordingServer(200, b"{}")
    status, _ = Kube(api.endpoint, source="test").patch_pod_cost(
        "shop", "web-1", patch_body(change("x"))
    )
    assert status == 200
    assert api.sent == [
        (
            "PATCH",
            "/api/v1/namespaces/shop/pods/web-1",
            patch_body(change("x")),
        )
    ]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/namespaces/shop/pods/web-1", {"metadata": {"labels": {"app": "x"}}}),
        (
            "/api/v1/namespaces/shop/pods/web-1",
            {"spec": {"containers": [{"name": "c", "image": "evil"}]}},
        ),
        (
            "/api/v1/namespaces/shop/pods/web-1",
            {"metadata": {"resourceVersion": "7", "annotations": {"other": "1"}}},
        ),
        (
            "/api/v1/namespaces/shop/pods/web-1",
            {"metadata": {"annotations": {COST: "1"}}},  # no precondition
        ),
        (
            "/api/v1/namespaces/shop/pods/web-1",
            {"metadata": {"resourceVersion": "7", "annotations": {COST: "1"}, "labels": {}}},
        ),
        (
            "/api/v1/namespaces/shop/pods/web-1/status",
            {"metadata": {"resourceVersion": "7", "annotations": {COST: "1"}}},
        ),
        (
            "/api/v1/nodes/n1",
            {"metadata": {"resourceVersion": "7", "annotations": {COST: "1"}}},
        ),
        (
            "/apis/apps/v1/namespaces/shop/deployments/web",
            {"metadata": {"resourceVersion": "7", "annotations": {COST: "1"}}},
        ),
    ],
)
def test_the_client_refuses_any_other_patch(path: str, body: dict[str, Any]) -> None:
    """A PATCH of anything but a pod's cost and mark (labels, images, other annotations, no
    resourceVersion, a subresource, another kind) raises before anything is sent."""
    api = RecordingServer(200, b"{}")
    with pytest.raises(ValueError, match="never sends PATCH"):
        Kube(api.endpoint, source="test").request("PATCH", path, body=body)
    assert api.sent == []


def test_outcomes_and_a_refusal_stops_the_pass() -> None:
    """200 written, 409 conflict, 404 gone, the pass goes on; the first 403 stops it; a change
    without resourceVersion is never sent."""
    answers = {"a": 200, "b": 409, "c": 404, "d": 403, "e": 200}
    sent: list[str] = []

    def patch(namespace: str, name: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        sent.append(name)
        return answers[name], {"message": "no"} if answers[name] != 200 else {}

    steering = Steering(True, (change("z", version=""), *(change(n) for n in "abcde")), (), 0, 1)
    results = write_costs(patch, steering)
    assert sent == ["a", "b", "c", "d"]
    assert [r.outcome for r in results] == [
        CostOutcome.FAILED,
        CostOutcome.WRITTEN,
        CostOutcome.CONFLICT,
        CostOutcome.GONE,
        CostOutcome.REFUSED,
    ]


class Patching:
    """The fake cluster's pods patched as kube-apiserver would: 409 on a stale resourceVersion."""

    def __init__(self, fake: FakeCluster) -> None:
        self.fake = fake
        self.sent: list[tuple[str, dict[str, Any]]] = []
        for pod in fake.pods.values():
            pod["metadata"]["resourceVersion"] = "1"

    def __call__(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        self.sent.append((name, dict(body)))
        pod = self.fake.pods.get(name)
        if pod is None:
            return 404, {}
        meta = pod["metadata"]
        if meta["resourceVersion"] != body["metadata"]["resourceVersion"]:
            return 409, {"message": "the object has been modified"}
        annotations = meta.setdefault("annotations", {})
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return 200, pod


def _runner(fake: FakeCluster, patch: Patching, policy: Policy, **settings: Any) -> Runner:
    clock = FakeClock()
    fake.patch = patch
    return Runner(
        fake,
        fake,
        policy,
        RunSettings(executor=ExecutorSettings(pdb_retries=1), instance="test", **settings),
        clock=clock,
        wall_clock=lambda: NOW,
        sleep=clock.sleep,
    )


def test_a_run_writes_the_costs_once_and_removes_them_when_turned_off() -> None:
    """Balanced zones [2, 1, 1]: no eviction, four costs written, the full zone's pods lowest;
    the next run writes nothing; with the option off, a run removes all four."""
    fake = FakeCluster({"a": 2, "b": 1, "c": 1})
    patch = Patching(fake)
    on = Policy(steer_scale_down=True)
    report = _runner(fake, patch, on).run_once("r1")
    assert report.evicted == 0 and fake.posts == []
    assert report.summary()["costs_written"] == 4
    assert "deletion costs: 4 written, 0 not" in render_run(report, "table")
    lowest = min(fake.pods.values(), key=lambda p: int(p["metadata"]["annotations"][COST]))
    assert lowest["spec"]["nodeName"] == "node-a"
    assert all(
        p["metadata"]["annotations"][MARK] == p["metadata"]["annotations"][COST]
        for p in fake.pods.values()
    )
    patch.sent.clear()
    assert _runner(fake, patch, on).run_once("r2").costs == ()
    assert patch.sent == []
    report = _runner(fake, patch, Policy()).run_once("r3")
    assert report.summary()["costs_written"] == 4
    assert all(COST not in p["metadata"].get("annotations", {}) for p in fake.pods.values())
    assert all(MARK not in p["metadata"].get("annotations", {}) for p in fake.pods.values())


def test_a_dry_run_writes_no_cost() -> None:
    """run --dry-run sends no PATCH."""
    fake = FakeCluster({"a": 2, "b": 1, "c": 1})
    patch = Patching(fake)
    report = _runner(fake, patch, Policy(steer_scale_down=True), plan_only=True).run_once("r1")
    assert report.costs == () and patch.sent == []


def test_plan_prints_the_costs_it_would_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan --snapshot with steerScaleDown: a Deletion costs section in the table and a
    deletionCosts key in JSON; without it neither appears (no cost of ours in the file)."""
    policy = tmp_path / "steer.yaml"
    policy.write_text(
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\nsteerScaleDown: true\n"
    )
    snapshot = str(EXAMPLE)
    assert main(["plan", "--snapshot", snapshot, "--policy", str(policy)]) == 0
    table = capsys.readouterr().out
    assert "Deletion costs (19)" in table
    assert main(["plan", "--snapshot", snapshot, "--policy", str(policy), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    costs = data["deletionCosts"]
    assert costs["enabled"] is True and len(costs["changes"]) == 19
    by_workload: dict[str, list[int]] = {}
    for c in costs["changes"]:
        assert c["from"] is None and c["position"] >= 0
        by_workload.setdefault(c["workload"], []).append(c["to"])
    for values in by_workload.values():  # positions 0.. get increasing costs, all below 0
        assert values == sorted(values) and values[-1] == -1
    assert main(["plan", "--snapshot", snapshot, "-o", "json"]) == 0
    assert "deletionCosts" not in json.loads(capsys.readouterr().out)
    assert main(["plan", "--snapshot", snapshot]) == 0
    assert "Deletion costs" not in capsys.readouterr().out
