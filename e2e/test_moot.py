"""A wave does not wait for a replacement that a scale-down made moot (opt-in: --e2e).

A ReplicaSet of 4 pods stuck at [4, 0, 0] over three zones of the test's own kwok nodes (as in
test_live.py). Its pod template is then given a nodeSelector no node has, so every new pod it
makes stays Pending: the existing pods keep running (a ReplicaSet never replaces a pod for a
template change). ``rebalancer run`` evicts one pod; its replacement is created and stays
Pending. The test then takes the nodeSelector back out and scales the ReplicaSet to 3, as an
HPA would: the ReplicaSet controller deletes the Pending replacement first (unscheduled pods
rank first), so no replacement is coming. The run must see that from the ReplicaSet's
``spec.replicas`` (3, with 3 Ready), end the wait with the moot detail, and send the
workload's next eviction, whose replacement lands and turns Ready, all well within
``--wave-timeout`` (without the check it would wait the whole timeout, report
``replacement-not-ready`` and skip the next pod).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_live import (
    APP,
    ROOT,
    add_pool_nodes,
    audit_mark,
    evictions,
    explain,
    need_own_control_plane,
    rebalancer_requests,
    wait_audit,
    workload,
    zone_counts,
)

pytestmark = pytest.mark.e2e

HOLD = "e2e-moot/hold"  # a node label no node has: a pod that must match it stays Pending
WAVE_TIMEOUT = 180  # seconds: what the run would wait without the owner check
RUN_TIMEOUT = WAVE_TIMEOUT + 120  # the subprocess guard: far above a run that ends by the check


def replica_set(ns: str, replicas: int) -> dict[str, Any]:
    """A bare ReplicaSet with test_live's workload spec (the test's pool, hard zone constraint
    maxSkew 1): its Deployment, as a ReplicaSet."""
    deployment: dict[str, Any] = workload(ns, replicas, grace=2, pdb_min_available=None)[0]
    return {**deployment, "kind": "ReplicaSet"}


@pytest.fixture
def pool(cluster: Cluster, namespace: str) -> Iterator[list[str]]:
    """The test's nodes (deleted afterwards); filled in by the test."""
    need_own_control_plane(cluster)
    nodes: list[str] = []
    yield nodes
    if nodes:
        cluster.kubectl("delete", "node", *nodes, "--wait=false", check=False)


def hold_new_pods(cluster: Cluster, ns: str, hold: bool) -> None:
    """Give the ReplicaSet's template the nodeSelector no node has, or take it back out."""
    patch = {"spec": {"template": {"spec": {"nodeSelector": {HOLD: "yes" if hold else None}}}}}
    cluster.kubectl("patch", "replicaset", APP, "-n", ns, "--type", "merge",
                    "-p", json.dumps(patch))  # fmt: skip


def pending(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    """The ReplicaSet's pods not bound to a node and not terminating."""
    return [
        p
        for p in cluster.pods(ns, f"app={APP}")
        if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]


def test_a_scale_down_during_the_wait_ends_it_and_the_next_eviction_goes(
    cluster: Cluster, namespace: str, pool: list[str]
) -> None:
    ns = namespace
    pool += add_pool_nodes(cluster, ns, {"zone-a": 2})
    cluster.apply(replica_set(ns, 4))
    cluster.wait_pods_running(ns, f"app={APP}", 4, timeout=120)
    pool += add_pool_nodes(cluster, ns, {"zone-b": 1, "zone-c": 1})
    assert zone_counts(cluster, ns) == {"zone-a": 4}
    before = {p["metadata"]["uid"] for p in cluster.pods(ns, f"app={APP}")}
    hold_new_pods(cluster, ns, hold=True)

    kubeconfig = cluster.kubeconfig
    cluster.assert_own_cluster(kubeconfig)
    mark = audit_mark(cluster)
    started = time.monotonic()
    run = subprocess.Popen(
        [sys.executable, "-m", "rebalancer", "run", "-n", ns, "--wave-timeout",
         f"{WAVE_TIMEOUT}s", "-o", "json", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        held = cluster.wait_for(
            "the first replacement, Pending", lambda: pending(cluster, ns), timeout=90
        )
        assert [p["metadata"]["uid"] for p in held if p["metadata"]["uid"] in before] == []
        assert run.poll() is None, "the run ended before the scale-down"
        # As an HPA would: the ReplicaSet wants 3; it deletes the Pending pod first. New pods
        # may be scheduled again from now on.
        hold_new_pods(cluster, ns, hold=False)
        cluster.kubectl("scale", "replicaset", APP, "-n", ns, "--replicas=3")
        scaled = time.monotonic()
        stdout, stderr = run.communicate(timeout=RUN_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    ended = time.monotonic()
    done = subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)
    assert run.returncode == 0, explain(done)
    report = json.loads(stdout)
    rows = [r for r in report["results"] if r["outcome"] == "evicted"]
    first, *later = rows
    moot = (
        "evicted; the owner ReplicaSet/web wants 3 pods and has 3 Ready besides the "
        "evicted one: no replacement to wait for"
    )
    assert first["detail"] == moot, report["results"]
    assert first["replacement"] is None
    assert first["uid"] in before
    assert later, f"no eviction after the moot one: {report['results']}"
    assert later[0]["replacement"] is not None, later[0]
    assert later[0]["uid"] in before
    assert not [r for r in report["results"] if r["outcome"] == "skipped"], report["results"]
    assert "eviction.replacement_moot" in stderr

    def sent() -> list[str]:
        return [e["objectRef"]["name"] for e in evictions(rebalancer_requests(cluster, mark, ns))]

    wait_audit(cluster, "the run's evictions in the audit log", lambda: len(sent()) >= len(rows))
    assert sent()[:2] == [first["name"], later[0]["name"]], sent()
    print(
        f"\nmoot: run took {ended - started:.1f}s, {ended - scaled:.1f}s after the scale-down "
        f"(wave timeout {WAVE_TIMEOUT}s); evicted {[r['name'] for r in rows]}; "
        f"end {report['summary'].get('end')}"
    )
