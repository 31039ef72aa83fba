"""Smoke tests proving the e2e control plane's real parts work (opt-in: ``pytest e2e --e2e``).

The scheduler places pods, kwok runs them on fake nodes, the disruption controller fills PDB
status, the Eviction API honours PDBs and grace periods, the ReplicaSet controller replaces
evicted pods, and the audit log records the requests a descheduler makes.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster, ControlPlane, ControlPlaneError

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
APP = "spread"
REPLICAS = 6
GRACE = 7  # terminationGracePeriodSeconds of the test pods
#: kwok ignores the image; on kind the container must ignore SIGTERM (sleep as PID 1 does)
#: so that deletion really waits for the grace period.
IMAGE = os.environ.get("REBALANCER_E2E_IMAGE", "busybox:1.36")


def pod_template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "terminationGracePeriodSeconds": GRACE,
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ],
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def zone_of_nodes(cluster: Cluster) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE, "")
        for n in cluster.get_json("nodes")["items"]
    }


def spread(cluster: Cluster, pods: list[dict[str, Any]]) -> Counter[str]:
    zones = zone_of_nodes(cluster)
    return Counter(zones[p["spec"]["nodeName"]] for p in pods)


def pdb_status(cluster: Cluster, ns: str, name: str) -> dict[str, Any] | None:
    """The PDB's status once the disruption controller has caught up with its spec."""
    pdb = cluster.get_json("pdb", name, "-n", ns)
    status = pdb.get("status", {})
    if status.get("observedGeneration", 0) >= pdb["metadata"]["generation"]:
        return dict(status)
    return None


@pytest.fixture(scope="module")
def app_ns(cluster: Cluster) -> Iterator[str]:
    """A namespace with a 6-replica zone-spread Deployment and a PDB (minAvailable 5)."""
    ns = f"e2e-smoke-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", ns)
    cluster.wait_for(
        "default ServiceAccount",
        lambda: cluster.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0,
        timeout=60,
    )
    cluster.apply(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": APP, "namespace": ns},
                "spec": {
                    "replicas": REPLICAS,
                    "selector": {"matchLabels": {"app": APP}},
                    "template": pod_template(APP),
                },
            },
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": APP, "namespace": ns},
                "spec": {"minAvailable": REPLICAS - 1, "selector": {"matchLabels": {"app": APP}}},
            },
        ]
    )
    yield ns
    cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_nodes_are_ready_in_three_zones(cluster: Cluster) -> None:
    """Every worker node is Ready and the workers are spread 2/2/2 over three zones."""
    zones = zone_of_nodes(cluster)
    workers = {n: z for n, z in zones.items() if z}
    assert sorted(Counter(workers.values()).values()) == [2, 2, 2], workers
    for name in workers:
        assert cluster.node_ready(name), name


@pytest.mark.k8s_versions
def test_server_reports_real_version(cluster: Cluster) -> None:
    """kubectl and kube-apiserver report a real v1.x version, not v0.0.0-master: the minor
    that REBALANCER_E2E_K8S (--k8s) asked for."""
    v = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert v["serverVersion"]["gitVersion"].startswith("v1."), v
    if isinstance(cluster, ControlPlane):
        assert v["clientVersion"]["gitVersion"] == v["serverVersion"]["gitVersion"], v
        assert v["serverVersion"]["minor"] == v["serverVersion"]["gitVersion"].split(".")[1]
        want = os.environ.get("REBALANCER_E2E_K8S", "1.35")
        assert f"{v['serverVersion']['major']}.{v['serverVersion']['minor']}" == want, v


def test_deployment_is_scheduled_spread_and_running(cluster: Cluster, app_ns: str) -> None:
    """The scheduler honours a hard zone spread constraint; kwok makes the pods Running."""
    pods = cluster.wait_pods_running(app_ns, f"app={APP}", REPLICAS, timeout=120)
    counts = spread(cluster, pods)
    assert sorted(counts.values()) == [2, 2, 2], counts


def test_pdb_gets_status_from_disruption_controller(cluster: Cluster, app_ns: str) -> None:
    """The disruption controller writes observedGeneration and disruptionsAllowed."""
    cluster.wait_pods_running(app_ns, f"app={APP}", REPLICAS, timeout=120)
    status = cluster.wait_for(
        "PDB allows 1 disruption",
        lambda: (s := pdb_status(cluster, app_ns, APP)) and s.get("disruptionsAllowed") == 1 and s,
        timeout=60,
    )
    assert status["currentHealthy"] == REPLICAS
    assert status["desiredHealthy"] == REPLICAS - 1
    assert status["expectedPods"] == REPLICAS


def test_eviction_waits_for_grace_period_then_replaced(cluster: Cluster, app_ns: str) -> None:
    """An Eviction returns 201; the pod lingers until its grace period ends; the
    ReplicaSet replaces it and the scheduler restores a 2/2/2 spread."""
    pods = cluster.wait_pods_running(app_ns, f"app={APP}", REPLICAS, timeout=120)
    cluster.wait_for(
        "PDB allows 1 disruption",
        lambda: (s := pdb_status(cluster, app_ns, APP)) and s.get("disruptionsAllowed") == 1,
        timeout=60,
    )
    victim = pods[0]["metadata"]["name"]
    victim_zone = zone_of_nodes(cluster)[pods[0]["spec"]["nodeName"]]

    t0 = time.monotonic()
    result = cluster.evict(app_ns, victim)
    assert result.code == 201, result.stderr[-1500:]

    pod = cluster.get_json("pod", victim, "-n", app_ns)
    assert pod["metadata"].get("deletionTimestamp"), "eviction must set deletionTimestamp"
    assert pod["metadata"].get("deletionGracePeriodSeconds") == GRACE

    time.sleep(max(0.0, 3 - (time.monotonic() - t0)))
    still = cluster.kubectl("get", "pod", victim, "-n", app_ns, check=False)
    assert still.returncode == 0, "pod vanished before its grace period ended"

    def gone() -> bool:
        r = cluster.kubectl("get", "pod", victim, "-n", app_ns, check=False)
        return r.returncode != 0 and "NotFound" in r.stderr

    cluster.wait_for(f"evicted pod {victim} to disappear", gone, timeout=20 - 3, interval=0.25)
    elapsed = time.monotonic() - t0
    assert elapsed >= GRACE - 1.5, f"pod removed after {elapsed:.1f}s < grace {GRACE}s"

    # The ReplicaSet recreates it, and the hard constraint sends it back to the same zone.
    new_pods = cluster.wait_pods_running(app_ns, f"app={APP}", REPLICAS, timeout=90)
    assert victim not in {p["metadata"]["name"] for p in new_pods}
    assert all(p["spec"].get("nodeName") for p in new_pods)
    counts = spread(cluster, new_pods)
    assert sorted(counts.values()) == [2, 2, 2], counts
    assert counts[victim_zone] == 2


def test_eviction_blocked_by_pdb_returns_429(cluster: Cluster, app_ns: str) -> None:
    """With disruptionsAllowed 0 the Eviction API answers 429 and the pod stays."""
    cluster.wait_pods_running(app_ns, f"app={APP}", REPLICAS, timeout=120)
    cluster.kubectl(
        "patch",
        "pdb",
        APP,
        "-n",
        app_ns,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"minAvailable": REPLICAS}}),
    )
    try:
        cluster.wait_for(
            "PDB allows 0 disruptions",
            lambda: (s := pdb_status(cluster, app_ns, APP)) and s.get("disruptionsAllowed") == 0,
            timeout=60,
        )
        victim = cluster.pods(app_ns, f"app={APP}")[0]["metadata"]["name"]
        result = cluster.evict(app_ns, victim)
        assert result.code == 429, result.stderr[-1500:]
        assert "disruption budget" in result.stderr, result.stderr[-1500:]
        pod = cluster.get_json("pod", victim, "-n", app_ns)
        assert not pod["metadata"].get("deletionTimestamp")
    finally:
        cluster.kubectl(
            "patch",
            "pdb",
            APP,
            "-n",
            app_ns,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"minAvailable": REPLICAS - 1}}),
        )


def test_audit_log_records_eviction_with_request_object(cluster: Cluster, namespace: str) -> None:
    """An eviction shows up in the audit log at Request level with its Eviction body."""
    if cluster.audit_log is None:
        pytest.skip("no audit log on an existing cluster")
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "audited", "namespace": namespace},
            "spec": {**pod_template("audited")["spec"], "topologySpreadConstraints": []},
        }
    )
    cluster.wait_pods_running(namespace, "", 1, timeout=60)
    assert cluster.evict(namespace, "audited", grace_period_seconds=1).code == 201

    def found() -> dict[str, Any] | None:
        for ev in cluster.audit_events():
            ref = ev.get("objectRef", {})
            if (
                ref.get("subresource") == "eviction"
                and ref.get("namespace") == namespace
                and ref.get("name") == "audited"
                and ev.get("stage") == "ResponseComplete"
            ):
                return ev
        return None

    ev = cluster.wait_for("audit event for the eviction", found, timeout=20)
    assert ev["level"] == "Request"
    assert ev["verb"] == "create"
    assert ev["responseStatus"]["code"] == 201
    assert ev["requestObject"]["kind"] == "Eviction"
    assert ev["requestObject"]["deleteOptions"]["gracePeriodSeconds"] == 1
    assert ev["user"]["username"] == "rebalancer-e2e-admin"


def test_node_heartbeat_can_be_stopped_and_resumed(cluster: Cluster) -> None:
    """set_node_ready(False) makes a kwok node NotReady (and tainted); True restores it."""
    if not isinstance(cluster, ControlPlane):
        pytest.skip("node heartbeats are controllable only with kwok")
    node = cluster.nodes[-1]
    cluster.set_node_ready(node, False)
    try:
        assert not cluster.node_ready(node)
        cluster.wait_for(
            "not-ready taint",
            lambda: any(
                t["key"] == "node.kubernetes.io/not-ready"
                for t in cluster.get_json("node", node)["spec"].get("taints", [])
            ),
            timeout=30,
        )
    finally:
        cluster.set_node_ready(node, True)
    assert cluster.node_ready(node)
    cluster.wait_for(
        "not-ready taint removed",
        lambda: (
            not any(
                t["key"].startswith("node.kubernetes.io/")
                for t in cluster.get_json("node", node)["spec"].get("taints", [])
            )
        ),
        timeout=30,
    )


def test_service_account_token_and_impersonation_kubeconfigs(
    cluster: Cluster, namespace: str
) -> None:
    """Token and impersonation kubeconfigs authenticate as the intended identities."""
    cluster.kubectl("create", "serviceaccount", "rebalancer", "-n", namespace)
    sa_kc = cluster.token_kubeconfig(namespace, "rebalancer")
    cluster.assert_own_cluster(sa_kc)
    who = json.loads(cluster.kubectl("auth", "whoami", "-o", "json", kubeconfig=sa_kc).stdout)
    assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:rebalancer"
    denied = cluster.kubectl("get", "pods", "-n", "kube-system", kubeconfig=sa_kc, check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()

    as_kc = cluster.impersonation_kubeconfig("jane", ["developers"])
    who = json.loads(cluster.kubectl("auth", "whoami", "-o", "json", kubeconfig=as_kc).stdout)
    assert who["status"]["userInfo"]["username"] == "jane"
    assert "developers" in who["status"]["userInfo"]["groups"]


def test_guard_refuses_foreign_kubeconfig(cluster: Cluster, tmp_path: Path) -> None:
    """assert_own_cluster accepts the fixture's kubeconfig and refuses any other server."""
    assert cluster.assert_own_cluster(cluster.kubeconfig) == cluster.server
    assert os.environ["KUBECONFIG"] == str(cluster.kubeconfig)
    raw = json.loads(cluster.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    for server in ("https://10.1.2.3:6443", "https://127.0.0.1:1", "https://example.invalid"):
        raw["clusters"][0]["cluster"]["server"] = server
        other = tmp_path / "other.kubeconfig"
        other.write_text(json.dumps(raw))
        with pytest.raises(ControlPlaneError, match="refusing"):
            cluster.assert_own_cluster(other)
