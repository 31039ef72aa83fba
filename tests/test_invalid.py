"""One object rebalancer cannot read, in a live cluster: its namespace is left out of the run,
a warning names it, exit 1; a snapshot stays strict unless --skip-invalid (issue 11 §5)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog

from rebalancer.cli.main import main
from rebalancer.cli.metrics import Metrics
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.resources import RESOURCES_BY_NAME
from rebalancer.cluster.read.live import Connection, LiveSource
from rebalancer.cluster.read.reader import read_cluster
from rebalancer.core.convert import SnapshotBuilder
from rebalancer.core.errors import InputError
from rebalancer.core.policy import Policy
from tests.builders import web_pod, zone_node
from tests.fakes import NOW, FakeCluster


def in_namespace(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["metadata"]["namespace"] = namespace
    return pod


def bad(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod the API server accepted but rebalancer cannot convert: a CPU request of 'lots'."""
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    return pod


def objects() -> list[dict[str, Any]]:
    nodes = [zone_node("node-a", "a"), zone_node("node-b", "b")]
    good = [in_namespace(web_pod(f"g{i}", "node-a", f"ug{i}"), "good") for i in range(3)]
    broken = [in_namespace(web_pod(f"b{i}", "node-a", f"ub{i}"), "broken") for i in range(3)]
    broken[1] = bad(broken[1])
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "broken"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1, "observedGeneration": 1},
    }
    return [*nodes, *good, *broken, pdb]


def test_the_builder_leaves_the_bad_objects_namespace_out_only_when_asked() -> None:
    """Strict by default; with skip_invalid every object of that namespace is left out."""
    strict = SnapshotBuilder("t")
    strict.add_all(objects())
    with pytest.raises(InputError, match="Pod broken/b1"):
        strict.build()
    lenient = SnapshotBuilder("t")
    lenient.add_all(objects())
    snapshot = lenient.build(skip_invalid=True)
    assert sorted(p.key for p in snapshot.pods) == ["good/g0", "good/g1", "good/g2"]
    assert snapshot.pdbs == ()
    assert [n.name for n in snapshot.nodes] == ["node-a", "node-b"]
    (rejected,) = lenient.rejected
    assert (rejected.kind, rejected.namespace, rejected.name) == ("Pod", "broken", "b1")
    assert "lots" in " ".join(rejected.problems)


def test_a_bad_cluster_scoped_object_still_fails() -> None:
    """A Node cannot be left out by namespace: still an error with skip_invalid."""
    node = zone_node("node-c", "c")
    node["status"]["allocatable"]["cpu"] = "lots"
    builder = SnapshotBuilder("t")
    builder.add_all([*objects(), node])
    with pytest.raises(InputError, match="node-c"):
        builder.build(skip_invalid=True)


def list_page(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
    """One page per resource, from :func:`objects`."""
    names = {"Node": "nodes", "Pod": "pods", "PodDisruptionBudget": "poddisruptionbudgets"}
    items = [
        {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
        for o in objects()
        if names[o["kind"]] == resource
    ]
    kind = RESOURCES_BY_NAME[resource].kind
    return orjson.dumps({"kind": f"{kind}List", "metadata": {}, "items": items})


def test_the_live_reader_reports_what_it_left_out() -> None:
    """read_cluster(skip_invalid=True): the snapshot without the namespace, the object named."""
    result = read_cluster(list_page, skip_invalid=True, prefetch=0)
    assert [(r.kind, r.namespace, r.name) for r in result.rejected] == [("Pod", "broken", "b1")]
    assert {p.namespace for p in result.snapshot.pods} == {"good"}
    with pytest.raises(InputError):
        read_cluster(list_page, prefetch=0)


def test_live_commands_warn_about_each_object_left_out() -> None:
    """The live reader logs one warning per object, naming it, its problem and the namespace."""

    class Kube:  # a server that answers JSON whatever asked
        list_page = staticmethod(list_page)

        @staticmethod
        def list_page_as(
            resource: str, namespace: str | None, limit: int, token: str | None, **_: Any
        ) -> tuple[str, bytes]:
            return "application/json", list_page(resource, namespace, limit, token)

        @staticmethod
        def list_stream(resource: str, namespace: str | None, **_: Any) -> Iterator[bytes]:
            raise errors.UnexpectedMediaType("LIST pods: answered application/json")  # as Kube

    source = LiveSource(Kube(), Connection(None, None, 5, 60, 120), None)  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logged:
        snapshot = source.read()
    assert {p.namespace for p in snapshot.pods} == {"good"}
    (warning,) = [e for e in logged if e["event"] == "cluster.invalid_object"]
    assert (warning["kind"], warning["namespace"], warning["name"]) == ("Pod", "broken", "b1")
    assert warning["log_level"] == "warning"
    assert "lots" in " ".join(warning["problems"])
    assert len(source.rejected) == 1


def test_plan_snapshot_is_strict_unless_skip_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan --snapshot: exit 2 naming the object; with --skip-invalid: a warning, exit 1."""
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects()}))
    assert main(["plan", "--snapshot", str(path)]) == 2
    assert "Pod broken/b1" in capsys.readouterr().err
    assert main(["plan", "--snapshot", str(path), "--skip-invalid", "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert "Pod broken/b1 cannot be read, namespace broken left out" in err
    assert "broken" not in out


def test_a_run_with_an_unreadable_object_exits_1_and_counts_it() -> None:
    """The runner carries the count from the read: summary, exit 1, and the metric."""
    fake = FakeCluster({"a": 2, "b": 2})
    fake.rejected = ("Pod other/x",)
    runner = Runner(
        fake,
        fake,
        Policy(),
        RunSettings(instance="t"),
        wall_clock=lambda: NOW,
    )
    with structlog.testing.capture_logs():
        report = runner.run_once()
    assert report.invalid_objects == 1
    assert report.summary()["invalid_objects"] == 1
    assert report.exit_code == 1
    metrics = Metrics()
    metrics.record(report)
    assert metrics.registry.get_sample_value("rebalancer_invalid_objects_total") == 1.0
