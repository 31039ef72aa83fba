"""Pod LIST pages read as protobuf from the real kube-apiserver give the snapshot and the plan
that JSON gives (issue 14; opt-in: --e2e).

A namespace of varied pods (sidecar and init containers, a RuntimeClass's overhead, PVCs,
emptyDir and ephemeral volumes, tolerations, required node affinity, spread constraints with
matchLabelKeys, a PriorityClass, a terminating pod held by a finalizer, a resize reported in
the status) is read twice by the reader, once asking for protobuf and once JSON only: the
snapshots are equal, the pods came as protobuf (no page declined), and ``rebalancer plan``
prints byte-identical plans both ways. The pods read in one unpaginated LIST, streamed (the
default path), equal the JSON read too, and the audit log shows that ``rebalancer plan`` made
exactly one LIST of pods, without ``limit`` or resourceVersion.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_live import audit_mark, explain, rebalancer, rebalancer_requests
from rebalancer.cluster.api.kubeclient import connect
from rebalancer.cluster.read.encoding import protobuf_pages, protobuf_stream
from rebalancer.cluster.read.protodecode import is_protobuf
from rebalancer.cluster.read.reader import ReadResult, read_cluster

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
HOLD = "e2e.rebalancer.io/hold"
RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}}

JSON_ONLY_PLAN = (
    "import sys\n"
    "from rebalancer.cluster.read import reader\n"
    "setattr(reader, 'PROTOBUF_RESOURCES', frozenset())\n"
    "from rebalancer.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _pod_spec(ns: str) -> dict[str, Any]:
    return {
        "priorityClassName": f"{ns}-high",
        "runtimeClassName": f"{ns}-rc",
        "terminationGracePeriodSeconds": 5,
        "tolerations": [
            {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 30,
            },
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "e2e-absent", "operator": "DoesNotExist"},
                                {"key": "kubernetes.io/os", "operator": "NotIn", "values": ["x"]},
                            ]
                        }
                    ]
                }
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["pod-template-hash"],
            },
            {
                "maxSkew": 3,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                },
                "nodeTaintsPolicy": "Honor",
            },
        ],
        "initContainers": [
            {"name": "side", "image": "s", "restartPolicy": "Always", "resources": RESOURCES},
            {"name": "init", "image": "i", "resources": {"requests": {"cpu": "300m"}}},
        ],
        "containers": [{"name": "main", "image": "m", "resources": RESOURCES}],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }


def _objects(ns: str) -> list[dict[str, Any]]:
    spec = _pod_spec(ns)
    claim_spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"{ns}-high"},
            "value": 1000,
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": f"{ns}-rc"},
            "handler": "runc",
            "overhead": {"podFixed": {"cpu": "10m", "memory": "1Mi"}},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": ns},
            "spec": claim_spec,
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}, "spec": spec},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "db-0", "namespace": ns, "labels": {"app": "db"}},
            "spec": {
                "containers": [{"name": "db", "image": "d", "resources": RESOURCES}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {
                        "name": "scratch",
                        "ephemeral": {"volumeClaimTemplate": {"spec": claim_spec}},
                    },
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "leaving",
                "namespace": ns,
                "labels": {"app": "web"},
                "annotations": {"note": "held by a finalizer"},
                "finalizers": [HOLD],
            },
            "spec": {"containers": [{"name": "main", "image": "m"}], "priority": 0},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "resized", "namespace": ns, "labels": {"app": "solo"}},
            "spec": {"containers": [{"name": "main", "image": "m", "resources": RESOURCES}]},
        },
    ]


@pytest.fixture
def varied(cluster: Cluster, namespace: str) -> Iterator[str]:
    ns = namespace
    cluster.apply(_objects(ns))
    cluster.wait_pods_running(ns, "app=web,tier=front", 4, timeout=120)
    cluster.kubectl("delete", "pod", "leaving", "-n", ns, "--wait=false")
    # A resize as the kubelet reports it (in-place resize, Infeasible).
    cluster.kubectl(
        "patch", "pod", "resized", "-n", ns, "--subresource=status", "--type=merge", "-p",
        '{"status":{"containerStatuses":[{"name":"main","image":"m","imageID":"","ready":true,'
        '"restartCount":0,"resources":{"requests":{"cpu":"150m"}},'
        '"allocatedResources":{"cpu":"120m"}}],'
        '"conditions":[{"type":"PodResizePending","status":"True","reason":"Infeasible"}]}}',
    )  # fmt: skip
    try:
        yield ns
    finally:
        cluster.kubectl(
            "patch", "pod", "leaving", "-n", ns, "--type=merge", "-p",
            '{"metadata":{"finalizers":null}}', check=False,
        )  # fmt: skip
        for kind, name in (("priorityclass", f"{ns}-high"), ("runtimeclass", f"{ns}-rc")):
            cluster.kubectl("delete", kind, name, "--wait=false", check=False)


def _read(kubeconfig: Path, ns: str, *, proto: bool) -> tuple[ReadResult, list[bool], int]:
    """One read of ``ns``; with ``proto``, whether each pod page came as protobuf and how many
    pod pages were read as JSON (a declined page is read again as JSON)."""
    kube = connect(str(kubeconfig))
    encodings: list[bool] = []
    json_pod_pages = 0

    def list_page(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
        nonlocal json_pod_pages
        json_pod_pages += resource == "pods"
        return kube.list_page(resource, namespace, limit, token)

    def list_page_proto(
        resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        raw = protobuf_pages(kube)(resource, namespace, limit, token)
        encodings.append(is_protobuf(raw))
        return raw

    try:
        result = read_cluster(
            list_page,
            namespace=ns,
            page_size=3,  # several pages of pods
            list_page_proto=list_page_proto if proto else None,
        )
    finally:
        kube.close()
    return result, encodings, json_pod_pages


@pytest.mark.k8s_versions
def test_protobuf_read_gives_the_json_snapshot_and_plan(cluster: Cluster, varied: str) -> None:
    ns = varied
    for _ in range(5):  # kwok may still be updating statuses between the two reads
        via_proto, encodings, json_pages = _read(cluster.kubeconfig, ns, proto=True)
        via_json, _, _ = _read(cluster.kubeconfig, ns, proto=False)
        if via_proto.snapshot == via_json.snapshot:
            break
    assert via_proto.snapshot == via_json.snapshot
    assert encodings and all(encodings), encodings  # every pod page came as protobuf
    assert json_pages == 0  # none was declined
    pods = {p.name: p for p in via_proto.snapshot.pods}
    assert len(pods) >= 7
    web = [p for p in pods.values() if p.owner is not None and p.labels.get("tier") == "front"]
    assert len(web) == 4 and len({p.template for p in web}) == 1
    assert all(p.priority == 1000 and len(p.constraints) == 2 for p in web)
    # max(main + sidecar, init + sidecar) + the RuntimeClass's overhead, in millicores
    assert web[0].requests["cpu"] == max(100 + 100, 300 + 100) + 10
    assert pods["leaving"].terminating
    # Infeasible: the requests the status reports, max(150m, allocated 120m), not the spec's
    assert pods["resized"].requests["cpu"] == 150
    assert pods["db-0"].pvc_names == ("data", "db-0-scratch")
    assert web[0].local_storage and web[0].tolerations and web[0].required_affinity is not None

    live = rebalancer(cluster, "plan", "-n", ns, "-o", "json")
    json_only = subprocess.run(
        [sys.executable, "-c", JSON_ONLY_PLAN, "plan", "-n", ns, "-o", "json",
         "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert live.returncode == 0, explain(live)
    assert json_only.returncode == 0, explain(json_only)
    assert live.stdout == json_only.stdout


def _read_streamed(kubeconfig: Path, ns: str) -> tuple[ReadResult, int, int]:
    """One read of ``ns`` with the pods in one streamed LIST; (result, streams opened, pod
    pages read: a declined stream reads them paginated)."""
    kube = connect(str(kubeconfig))
    streams = pod_pages = 0

    def list_page(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
        nonlocal pod_pages
        pod_pages += resource == "pods"
        return kube.list_page(resource, namespace, limit, token)

    def list_page_proto(
        resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        nonlocal pod_pages
        pod_pages += resource == "pods"
        return protobuf_pages(kube)(resource, namespace, limit, token)

    def list_stream(resource: str, namespace: str | None) -> Iterator[bytes]:
        nonlocal streams
        streams += 1
        return protobuf_stream(kube)(resource, namespace)

    try:
        result = read_cluster(
            list_page,
            namespace=ns,
            list_page_proto=list_page_proto,
            list_stream=list_stream,
        )
    finally:
        kube.close()
    return result, streams, pod_pages


def test_the_streamed_list_gives_the_json_snapshot_in_one_request(
    cluster: Cluster, varied: str
) -> None:
    ns = varied
    for _ in range(5):  # kwok may still be updating statuses between the two reads
        streamed, streams, pod_pages = _read_streamed(cluster.kubeconfig, ns)
        via_json, _, _ = _read(cluster.kubeconfig, ns, proto=False)
        if streamed.snapshot == via_json.snapshot:
            break
    assert streamed.snapshot == via_json.snapshot
    assert len(streamed.snapshot.pods) >= 7
    assert (streams, pod_pages) == (1, 0)  # the stream was taken, nothing read again

    if cluster.audit_log is None:
        return
    mark = audit_mark(cluster)
    live = rebalancer(cluster, "plan", "-n", ns, "-o", "json")
    assert live.returncode == 0, explain(live)
    time.sleep(2)  # the audit backend writes in batches
    lists = [
        ev["requestURI"]
        for ev in rebalancer_requests(cluster, mark, ns)
        if ev["verb"] == "list" and ev.get("objectRef", {}).get("resource") == "pods"
    ]
    assert lists == [f"/api/v1/namespaces/{ns}/pods"], lists  # one LIST, no limit, no RV
