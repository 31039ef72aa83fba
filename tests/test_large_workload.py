"""One large workload under a hard hostname spread: plans of thousands of evictions, and no
recursion whose depth grows with the input anywhere on the way (planning, conversion,
explain, rendering).

The workload: N nodes and one ReplicaSet of N pods with a hard hostname constraint (maxSkew
1), ten pods on each of the first N/10 nodes, the rest empty. By hand: every node must end
with exactly one pod (N pods over N hostnames within maxSkew 1 and at least one empty node
left would put some node at 2 with a 0 beside it), so each crowded node gives 9 pods and
nothing else moves: N - N/10 evictions, each replacement on a node that was empty. The end
state is counted here from the plan's evictions and their target nodes, not from the
planner's own reports.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from rebalancer.core.model import HARD, HOSTNAME_KEY, LabelSelector, SpreadConstraint
from rebalancer.core.model import Snapshot as SnapshotModel
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_000_000.0
PER_NODE = 10


def workload(pods: int) -> SnapshotModel:
    """``pods`` nodes; ``pods`` pods of one ReplicaSet, ten on each of the first tenth."""
    spread = SpreadConstraint(
        max_skew=1,
        topology_key=HOSTNAME_KEY,
        when_unsatisfiable=HARD,
        selector=LabelSelector((("app", "web"),)),
    )
    nodes = [node(f"n-{i:05d}", f"zone-{i % 3}") for i in range(pods)]
    members = [
        pod(f"web-{i:05d}", f"n-{i // PER_NODE:05d}", constraints=[spread], created=1000 + i)
        for i in range(pods)
    ]
    return SnapshotModel(nodes=tuple(nodes), pods=tuple(members))


@pytest.mark.parametrize("pods", [1_100, 3_000])
def test_the_bunched_replica_set_is_planned_to_one_pod_per_node(pods: int) -> None:
    result = plan(workload(pods), Policy(), NOW)
    assert len(result.evictions) == pods - pods // PER_NODE
    evicted = [e.name for e in result.evictions]
    assert len(set(evicted)) == len(evicted)
    counts = Counter({f"n-{i:05d}": 0 for i in range(pods)})
    counts.update(f"n-{i // PER_NODE:05d}" for i in range(pods))
    for e in result.evictions:
        assert e.target_node is not None, e
        counts[e.node] -= 1
        counts[e.target_node] += 1
    assert len(counts) == pods  # no node outside the snapshot
    assert max(counts.values()) - min(counts.values()) <= 1
    assert set(counts.values()) == {1}
    assert result.minimal


# The planner's entry points under a recursion limit far below the plan's size: any recursion
# proportional to the input (evictions, domains, views) ends in RecursionError, which the
# CLI reports as exit 4. The snapshot goes through the file reader and converter too.
GUARD = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from rebalancer.cli.main import main
    from rebalancer.cli import htmlreport  # imported now: the import machinery is deep
    path, limit = sys.argv[1], int(sys.argv[2])
    commands = {
        "plan-json": ["plan", "--snapshot", path, "-o", "json"],
        "plan-table": ["plan", "--snapshot", path, "-o", "table"],
        "plan-html": ["plan", "--snapshot", path, "-o", "html"],
        "plan-yaml": ["plan", "--snapshot", path, "-o", "yaml"],
        "explain": ["explain", "--snapshot", path, "--pod", "shop/web-00000"],
        "explain-json": ["explain", "--snapshot", path, "--pod", "shop/web-00000", "-o", "json"],
    }
    results = {}
    sys.setrecursionlimit(limit)
    for name, argv in commands.items():
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        results[name] = {"exit": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
    sys.setrecursionlimit(1000)
    print(json.dumps(results))
    """
)


def _snapshot_objects(pods: int) -> dict[str, object]:
    """The workload as API objects (``kind: List``), nodes without zones."""
    items: list[dict[str, object]] = []
    for i in range(pods):
        name = f"n-{i:05d}"
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": f"uid-{name}", "labels": {HOSTNAME_KEY: name}},
                "status": {
                    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    for i in range(pods):
        name = f"web-{i:05d}"
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "shop",
                    "uid": f"uid-{name}",
                    "creationTimestamp": "2024-05-01T10:00:00Z",
                    "labels": {"app": "web"},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "web-rs",
                            "uid": "uid-web-rs",
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": f"n-{i // PER_NODE:05d}",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "10m"}}}],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": HOSTNAME_KEY,
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": {"app": "web"}},
                        }
                    ],
                },
                "status": {"phase": "Running"},
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _guarded(path: Path, limit: int) -> dict[str, dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-c", GUARD, str(path), str(limit)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=600,
    )
    found: dict[str, dict[str, object]] = json.loads(out.stdout)
    return found


GUARD_LIMIT = 150  # frames: the deepest ordinary call chain takes 50-60; far below the plan


def _many_views(pods: int) -> dict[str, object]:
    """The workload with a selector of its own per pod (``app in (web, other-K)``): every pod
    is counted by ``pods`` hard views, each ranking the nodes for its replacement."""
    doc = _snapshot_objects(pods)
    members = [item for item in doc["items"] if item["kind"] == "Pod"]  # type: ignore[attr-defined]
    for k, item in enumerate(members):
        values = ["web", f"other-{k}"]
        expression = {"key": "app", "operator": "In", "values": values}
        item["spec"]["topologySpreadConstraints"][0]["labelSelector"] = {
            "matchExpressions": [expression]
        }
    return doc


@pytest.mark.parametrize(
    ("pods", "make", "evictions"),
    [
        (1_100, _snapshot_objects, 990),  # 990 evictions over 1,100 domains
        (300, _many_views, 270),  # 300 views ranking every replacement
    ],
    ids=["bunched", "views"],
)
def test_plan_explain_and_every_rendering_need_no_recursion_proportional_to_the_input(
    tmp_path: Path, pods: int, make: Callable[[int], dict[str, object]], evictions: int
) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(make(pods)))
    results = _guarded(path, GUARD_LIMIT)
    for name, result in results.items():
        assert result["exit"] == 0, (name, result["stderr"])
        assert "RecursionError" not in str(result["stderr"]), name
    planned = json.loads(str(results["plan-json"]["stdout"]))
    assert len(planned["evictions"]) == evictions
    assert "shop/web-00000" in str(results["explain"]["stdout"])
    assert str(results["plan-html"]["stdout"]).lstrip().startswith("<!DOCTYPE html>")


def test_the_guard_catches_recursion_proportional_to_the_input(tmp_path: Path) -> None:
    """The guard's limit is low enough to fail a plan that recurses once per eviction: a
    planner patched to recurse per eviction (here, a victim order flattened by recursion)
    exits 4 under it, and 0 without it."""
    script = textwrap.dedent(
        """
        import sys
        from rebalancer.core import victims
        original = victims.single_view_victims

        def recursive(*args, **kwargs):
            found = original(*args, **kwargs)
            def rebuild(rest):
                return [rest[0], *rebuild(rest[1:])] if rest else []
            return None if found is None else rebuild(found)

        victims.single_view_victims = recursive
        from rebalancer.core import planner
        planner.single_view_victims = recursive
        from rebalancer.cli.main import main
        sys.setrecursionlimit(int(sys.argv[2]))
        sys.exit(main(["plan", "--snapshot", sys.argv[1], "-o", "json"]))
        """
    )
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(_snapshot_objects(1_100)))
    for limit, code in [(GUARD_LIMIT, 4), (5_000, 0)]:
        out = subprocess.run(
            [sys.executable, "-c", script, str(path), str(limit)],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
            timeout=600,
        )
        assert out.returncode == code, (limit, out.stderr[-2000:])
