"""Trimmed snapshots (``rebalancer snapshot``) convert to exactly the model of the full objects."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench.gen import generate
from rebalancer.cluster.read.slim import slim
from rebalancer.cluster.read.snapshot import dump_objects, load_objects, parse_objects
from rebalancer.core.convert import pod_from_api, snapshot_from_objects
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {
    "example": lambda: load_objects(ROOT / "examples" / "skewed-cluster.yaml"),
    "generated": lambda: list(generate(30, 900, seed=7)),
    "test-data": lambda: load_objects(ROOT / "tests" / "data" / "snapshot" / "small-list.json"),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_trimmed_objects_give_the_same_snapshot_and_plan(name: str) -> None:
    """Every field the converter reads survives trimming, so the model and the plan are equal."""
    objects = SOURCES[name]()
    full = snapshot_from_objects(objects)
    trimmed = snapshot_from_objects([slim(o) for o in objects])
    assert trimmed == full
    assert plan(trimmed, Policy(), 2e9) == plan(full, Policy(), 2e9)


def test_trimming_makes_generated_pods_much_smaller() -> None:
    """A realistic pod loses its probes, env and statuses: the file shrinks severalfold."""
    objects = [o for o in generate(10, 300, seed=3) if o["kind"] == "Pod"]
    full = len(orjson.dumps(objects))
    trimmed = len(orjson.dumps([slim(o) for o in objects]))
    assert trimmed * 2 < full


def test_trimmed_dump_round_trips() -> None:
    """A trimmed List dumped as JSON loads back to the same snapshot."""
    objects = [slim(o) for o in generate(10, 200, seed=5)]
    data = dump_objects(objects, "json")
    assert snapshot_from_objects(parse_objects(data, "dump")) == snapshot_from_objects(objects)


def test_managed_fields_and_last_applied_are_dropped() -> None:
    """Bulky metadata nobody reads is gone; other annotations stay."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "kubernetes.io/config.mirror": "x",
            },
        },
        "spec": {"containers": [{"name": "c", "image": "i", "env": []}]},
    }
    out = slim(pod)
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"kubernetes.io/config.mirror": "x"}
    assert out["spec"]["containers"] == [{"name": "c"}]


def test_an_infeasible_resize_survives_trimming() -> None:
    """The PodResizePending condition's reason decides the requests (Infeasible: the status's
    alone), so the trimmed pod keeps it: 500m as the kubelet reports, not max(spec, status)."""
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
        "status": {
            "containerStatuses": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}
            ],
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
            ],
        },
    }
    assert pod_from_api(pod).requests["cpu"] == 500
    assert pod_from_api(slim(pod)) == pod_from_api(pod)
    assert [c["type"] for c in slim(pod)["status"]["conditions"]] == ["PodResizePending"]
