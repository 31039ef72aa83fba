"""One decision on the real control plane (opt-in: --e2e): ``plan``, ``run --dry-run=server``
and ``run`` on the same live state evict the same pods (SPEC §3.12), judged by the audit log.

The workload's pods are placed by the test itself (``schedulerName: manual`` and the binding
subresource), so one of them can stay Pending, unplaced, for as long as the test needs: a pod
not placed yet, as a scale-up or a drain leaves one. Zones [0, 3, 3] and maxSkew 1 call for two
evictions. While the Pending pod is younger than ``--unplaced-grace``, all three commands hold
the workload (no eviction, ``pods-unplaced``); once it is older, all three evict the same two
pods. (Before the holds were the planner's, ``plan`` printed two evictions while ``run`` sent
none.)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_live import (
    add_pool_nodes,
    audit_mark,
    evictions,
    explain,
    need_own_control_plane,
    rebalancer,
    rebalancer_requests,
    write_policy,
)
from e2e.test_scenarios import APP, ZONE, deployment, spread

pytestmark = pytest.mark.e2e

GRACE = 60  # seconds: --unplaced-grace of all three commands


def _deployment(ns: str, replicas: int) -> dict[str, Any]:
    """Scenarios' Deployment (zone maxSkew 1) whose pods the test binds itself."""
    body = deployment(ns, APP, replicas, [spread(ZONE)])
    body["spec"]["template"]["spec"]["schedulerName"] = "manual"
    return body


def _bind(cluster: Cluster, ns: str, pod: str, node: str, *, check: bool = True) -> None:
    """Place ``pod`` on ``node`` as a scheduler does (the binding subresource)."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    cluster.create_raw(f"/api/v1/namespaces/{ns}/pods/{pod}/binding", body, check=check)


def _pending(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.pods(ns, f"app={APP}")
        if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]


class Binder:
    """The test's scheduler while ``run`` evicts: every new Pending pod but ``keep`` goes to
    ``node`` (so the run's replacements become Ready and its wave goes on)."""

    def __init__(self, cluster: Cluster, ns: str, keep: str, node: str) -> None:
        self.cluster, self.ns, self.keep, self.node = cluster, ns, keep, node
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(0.5):
            for p in _pending(self.cluster, self.ns):
                name = p["metadata"]["name"]
                if name != self.keep:
                    _bind(self.cluster, self.ns, name, self.node, check=False)

    def __enter__(self) -> Binder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


@pytest.fixture
def nodes(cluster: Cluster, namespace: str) -> Iterator[dict[str, str]]:
    need_own_control_plane(cluster)
    names = add_pool_nodes(cluster, namespace, {"zone-a": 1, "zone-b": 1, "zone-c": 1})
    yield {name.split("-")[-2]: name for name in names}  # "a" -> node name
    cluster.kubectl("delete", "node", *names, "--wait=false", check=False)


def _json(proc: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def _three(
    cluster: Cluster, ns: str, policy: Path, binder: Binder | None
) -> tuple[list[str], list[str], list[str], dict[str, Any]]:
    """The first wave of ``plan``, the evictions ``run --dry-run=server`` sent and those
    ``run`` sent (from the audit log), and the plan."""
    flags = ("-n", ns, "--policy", str(policy), "--unplaced-grace", f"{GRACE}s", "-o", "json")
    planned = rebalancer(cluster, "plan", *flags)
    assert planned.returncode == 0, explain(planned)
    plan = _json(planned)
    wave = sorted(e["name"] for e in plan["evictions"] if e["wave"] == 1)

    mark = audit_mark(cluster)
    run_flags = (*flags, "--max-waves", "1", "--wave-timeout", "60s")
    dry = rebalancer(cluster, "run", "--dry-run=server", *run_flags)
    assert dry.returncode == 0, explain(dry)
    time.sleep(2)  # the batch audit backend
    dry_sent = sorted(
        e["objectRef"]["name"]
        for e in evictions(rebalancer_requests(cluster, mark, ns))
        if e["requestObject"]["deleteOptions"].get("dryRun") == ["All"]
    )

    mark = audit_mark(cluster)
    if binder is not None:
        with binder:
            ran = rebalancer(cluster, "run", *run_flags)
    else:
        ran = rebalancer(cluster, "run", *run_flags)
    assert ran.returncode == 0, explain(ran)
    time.sleep(2)
    sent = sorted(
        e["objectRef"]["name"]
        for e in evictions(rebalancer_requests(cluster, mark, ns))
        if e["responseStatus"]["code"] in (200, 201)
        and not e["requestObject"]["deleteOptions"].get("dryRun")
    )
    return wave, dry_sent, sent, plan


def test_plan_dry_run_and_run_evict_the_same_pods_beside_a_pod_not_placed_yet(
    cluster: Cluster, namespace: str, nodes: dict[str, str], tmp_path: Path
) -> None:
    ns = namespace
    cluster.apply(_deployment(ns, 6))
    placed = cluster.wait_for(
        "6 pods created", lambda: p if len(p := _pending(cluster, ns)) == 6 else None
    )
    for k, pod in enumerate(sorted(p["metadata"]["name"] for p in placed)):
        _bind(cluster, ns, pod, nodes["b"] if k < 3 else nodes["c"])
    cluster.wait_pods_running(ns, f"app={APP}", 6)
    cluster.kubectl("scale", "deployment", APP, "-n", ns, "--replicas=7")
    (young,) = cluster.wait_for(
        "the 7th pod, Pending", lambda: _pending(cluster, ns) or None, timeout=30
    )
    name = young["metadata"]["name"]
    created = time.time()
    policy = write_policy(tmp_path, "one-decision")

    # younger than the grace: all three hold the workload
    wave, dry_sent, sent, plan = _three(cluster, ns, policy, None)
    assert time.time() - created < GRACE, "too slow: the Pending pod aged past the grace"
    assert wave == dry_sent == sent == [], (wave, dry_sent, sent)
    (left,) = plan["unrepaired"]
    assert [r["code"] for r in left["reasons"]] == ["pods-unplaced"]
    assert plan["nextRun"]["holds"]["applied"] == ["pods-unplaced", "node-drifting"]

    # older than the grace: all three evict the same two pods (zones [0, 3, 3], maxSkew 1)
    time.sleep(max(0.0, created + GRACE + 2 - time.time()))
    assert [p["metadata"]["name"] for p in _pending(cluster, ns)] == [name]
    binder = Binder(cluster, ns, keep=name, node=nodes["a"])
    wave, dry_sent, sent, plan = _three(cluster, ns, policy, binder)
    assert len(plan["evictions"]) == 2
    assert wave == dry_sent == sent and len(wave) >= 1, (wave, dry_sent, sent)
    assert all(r["code"] != "pods-unplaced" for u in plan["unrepaired"] for r in u["reasons"])
    print(f"one decision: young: none evicted by plan, dry run or run; old: {wave} by each")
