"""Loop mode's state check is exact on the real API server (``--verify-state-every``).

``rebalancer run --interval 1s --verify-state-every 1`` in one namespace while, for about 30 s,
its Deployment (hard zone constraint, PDB) is scaled up and down and bare pods are created on
its nodes and deleted. Every run compares each resource's watch-fed store with a LIST at
exactly the resourceVersion the store reflects (``resourceVersionMatch=Exact``): every check
must log ``state.verified`` with all 11 resources compared at a version (none fell back to the
retried LIST) and no ``state.differs``, the pods at more than one version (they moved).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_faults import start
from e2e.test_live import APP, POOL, add_pool_nodes, need_own_control_plane, workload
from rebalancer.cluster.api.resources import RESOURCES

pytestmark = pytest.mark.e2e

CHURN_SECONDS = 30.0
SCALES = (5, 2, 7, 3, 6, 1, 4)  # the Deployment's replicas, in turn
LAST_CHECKS = 3  # checks waited for after the churn, so that the last ones see it settled
CHECK_EVENTS = frozenset({"state.verified", "state.differs"})


@pytest.fixture
def pool(cluster: Cluster, namespace: str) -> Iterator[list[str]]:
    need_own_control_plane(cluster)
    nodes = add_pool_nodes(cluster, namespace, {"zone-a": 1, "zone-b": 1, "zone-c": 1})
    yield nodes
    cluster.kubectl("delete", "node", *nodes, "--wait=false", check=False)


def bare_pod(ns: str, name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"churn": "bare"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": POOL, "operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox:1.36"}],
        },
    }


def churn(cluster: Cluster, ns: str, nodes: list[str]) -> int:
    """Scale, create and delete pods for :data:`CHURN_SECONDS`; the steps taken."""
    step = 0
    deadline = time.monotonic() + CHURN_SECONDS
    while time.monotonic() < deadline:
        replicas = SCALES[step % len(SCALES)]
        cluster.kubectl("scale", "deployment", APP, "-n", ns, f"--replicas={replicas}")
        cluster.apply(bare_pod(ns, f"bare-{step}", nodes[step % len(nodes)]))
        if step >= 2:
            cluster.kubectl("delete", "pod", f"bare-{step - 2}", "-n", ns, "--wait=false")
        cluster.kubectl(
            "label",
            "pod",
            "-n",
            ns,
            "-l",
            f"app={APP}",
            f"step={step}",
            "--overwrite",
            check=False,  # a pod the scale-down removed meanwhile: NotFound
        )
        step += 1
        time.sleep(1.0)
    return step


def test_every_state_check_under_churn_is_exact_and_equal(
    cluster: Cluster, namespace: str, pool: list[str]
) -> None:
    cluster.assert_own_cluster(cluster.kubeconfig)
    cluster.apply(workload(namespace, 3, 1, pdb_min_available=2))
    cluster.wait_pods_running(namespace, f"app={APP}", 3, timeout=120)
    bg = start(cluster, "run", "--interval", "1s", "--verify-state-every", "1", "-n", namespace)

    def checks() -> list[dict[str, Any]]:
        return [e for e in list(bg.lines) if e.get("event") in CHECK_EVENTS]

    try:
        cluster.wait_for("the first state check", lambda: len(checks()) >= 1, timeout=120)
        steps = churn(cluster, namespace, pool)
        seen = len(checks())
        cluster.wait_for(
            "state checks after the churn", lambda: len(checks()) >= seen + LAST_CHECKS, timeout=60
        )
    finally:
        bg.proc.terminate()
        code, _ = bg.finish(timeout=60)
    tail = bg.stderr[-6000:]
    assert code == 0, tail
    assert steps >= 10, steps
    found = checks()
    assert len(found) >= 10, tail  # a check per run, runs 1 s apart through the churn
    differing = [c for c in found if c["event"] != "state.verified"]
    assert differing == [], differing
    names = {r.name for r in RESOURCES}
    for c in found:
        assert c["fallback"] == {}, c
        assert set(c["exact"]) == names, c
        assert all(str(v).isdigit() for v in c["exact"].values()), c
    pod_versions = {c["exact"]["pods"] for c in found}
    assert len(pod_versions) >= 5, pod_versions  # compared at the moving pods' versions
    versions = len(pod_versions)
    print(f"{len(found)} checks, all exact; {steps} churn steps; pods at {versions} versions")
