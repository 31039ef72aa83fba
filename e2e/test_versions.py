"""What differs between Kubernetes 1.32, 1.35 and 1.37, on the real control plane of each.

Run on each minor: ``pytest e2e/test_versions.py --e2e --k8s 1.32`` (and 1.35, 1.37).

- ``matchLabelKeys``: 1.34+ API servers merge the keys into the stored ``labelSelector``; 1.32
  does not, and rebalancer merges them as kube-scheduler does. The plan is the same: each run
  writes its plan, with the pod-template hash replaced by a placeholder, to
  ``$REBALANCER_E2E_RESULTS`` (default ``/tmp/rebalancer-e2e-versions``) and compares it with
  the plans other minors wrote there.
- Pod-level ``spec.resources`` (on from 1.34; 1.32 drops the field): rebalancer's requests are
  what kube-scheduler fitted.
- ``DisruptionTarget``: an evicted pod carries it while it terminates; the plan leaves it out.
- Gangs (1.37 with GenericWorkload on, as the control plane starts it): pods in a PodGroup are
  skipped as ``gang-member``; where the field is not served it is dropped and nothing is skipped.
- ``plan -o json`` names the server's version and gates.
- An empty ``labelSelector: {}``: kube-scheduler counts no pod for it up to 1.37 and every pod
  of the namespace from 1.38; the live plan follows the server, a snapshot file's plan the
  newest rule.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster, ControlPlane
from e2e.test_live import (
    POOL,
    ZONE,
    add_pool_nodes,
    explain,
    need_own_control_plane,
    pool_node,
    rebalancer,
)
from rebalancer.core.convert.builder import snapshot_from_objects

pytestmark = [pytest.mark.e2e, pytest.mark.k8s_versions]

RESULTS = Path(os.environ.get("REBALANCER_E2E_RESULTS", "/tmp/rebalancer-e2e-versions"))
HASH = "pod-template-hash"


def minor(cluster: Cluster) -> tuple[int, int]:
    v = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    return int(v["major"]), int(re.match(r"\d+", v["minor"]).group())  # type: ignore[union-attr]


@pytest.fixture
def pool(cluster: Cluster, namespace: str) -> Iterator[list[str]]:
    """Nodes of this test's own pool (tainted: only its pods go there); removed afterwards."""
    need_own_control_plane(cluster)
    made: list[str] = []
    yield made
    if made:
        cluster.kubectl("delete", "node", *made, "--wait=false", check=False)


def deployment(ns: str, replicas: int, spec: dict[str, Any], name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    "nodeSelector": {POOL: ns},
                    "tolerations": [{"key": POOL, "operator": "Exists"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                    **spec,
                },
            },
        },
    }


SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "matchLabelKeys": [HASH],
        }
    ]
}


def skewed(
    cluster: Cluster, ns: str, pool: list[str], spec: dict[str, Any], *apply_flags: str
) -> list[Any]:
    """Six replicas stuck in zone-a, then empty zones b and c: [6, 0, 0]."""
    pool += add_pool_nodes(cluster, ns, {"zone-a": 2})
    cluster.apply(deployment(ns, 6, spec), *apply_flags)
    pods = cluster.wait_pods_running(ns, "app=web", 6, timeout=120)
    pool += add_pool_nodes(cluster, ns, {"zone-b": 1, "zone-c": 1})
    return pods


def plan_json(cluster: Cluster, ns: str) -> dict[str, Any]:
    proc = rebalancer(cluster, "plan", "-n", ns, "-o", "json")
    assert proc.returncode == 0, explain(proc)
    return dict(json.loads(proc.stdout))


def normalised(plan: dict[str, Any], ns: str, hash_value: str) -> dict[str, Any]:
    """The plan without what differs by run: namespace, pod names, the template hash."""
    text = json.dumps({k: v for k, v in plan.items() if k != "server"}, sort_keys=True)
    text = text.replace(hash_value, "<hash>").replace(ns, "<ns>")
    text = re.sub(r"web-<hash>-[a-z0-9]{5}", "web-<pod>", text)
    text = re.sub(r'"uid": "[^"]*"', '"uid": "<uid>"', text)
    text = re.sub(r'"node": "<ns>-zone-a-[01]"', '"node": "<ns>-zone-a-?"', text)
    doc: dict[str, Any] = json.loads(text)
    for e in doc.get("evictions", []):
        e.pop("name", None)
    return doc


def test_match_label_keys_merged_or_not_give_the_same_plan(
    cluster: Cluster, namespace: str, pool: list[str]
) -> None:
    version = minor(cluster)
    pods = skewed(cluster, namespace, pool, SPREAD)
    hash_value = pods[0]["metadata"]["labels"][HASH]
    stored = pods[0]["spec"]["topologySpreadConstraints"][0]["labelSelector"]
    merged = any(e.get("key") == HASH for e in stored.get("matchExpressions", []))
    # 1.34+ merges matchLabelKeys into the selector itself (MatchLabelKeysInPodTopologySpread-
    # SelectorMerge); 1.32 stores the constraint as written.
    assert merged is (version >= (1, 34)), (version, stored)

    plan = plan_json(cluster, namespace)
    assert len(plan["evictions"]) == 4, plan  # [6, 0, 0] -> [2, 2, 2]
    (view,) = plan["violations"]
    assert HASH in view["selector"] and hash_value in view["selector"], view
    assert view["skew"] == 6, view
    doc = normalised(plan, namespace, hash_value)
    RESULTS.mkdir(parents=True, exist_ok=True)
    mine = RESULTS / f"match-label-keys-plan-{version[0]}.{version[1]}.json"
    mine.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    others = sorted(p for p in RESULTS.glob("match-label-keys-plan-*.json") if p != mine)
    for other in others:
        assert json.loads(other.read_text()) == doc, f"{mine.name} differs from {other.name}"
    same = [o.name for o in others]
    print(f"\nplan on {version}: {len(plan['evictions'])} evictions; the same as {same}")


def test_pod_level_resources_are_what_the_scheduler_fitted(
    cluster: Cluster, namespace: str, pool: list[str]
) -> None:
    """Pods asking 1500m at pod level (100m in their container) on two 2-cpu nodes: where the
    field is served, one fits per node and the third stays Pending, and rebalancer reads
    1500m; where it is dropped (1.32), all three run and rebalancer reads 100m."""
    version = minor(cluster)
    nodes = [pool_node(namespace, "zone-a", i) for i in range(2)]
    for node in nodes:
        node["status"]["allocatable"]["cpu"] = node["status"]["capacity"]["cpu"] = "2"
    cluster.apply(nodes)
    pool += [n["metadata"]["name"] for n in nodes]
    cluster.wait_for("2-cpu nodes Ready", lambda: all(cluster.node_ready(n) for n in pool))
    cluster.apply(deployment(namespace, 3, {"resources": {"requests": {"cpu": "1500m"}}}))
    served = version >= (1, 34)

    def settled() -> list[Any] | None:
        pods = cluster.pods(namespace, "app=web")
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = [
            p
            for p in pods
            if any(
                c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in p.get("status", {}).get("conditions", [])
            )
        ]
        want = (2, 1) if served else (3, 0)
        return pods if (len(bound), len(pending)) == want else None

    pods = cluster.wait_for("the scheduler's placement", settled, timeout=90)
    assert ("resources" in pods[0]["spec"]) is served, pods[0]["spec"]
    bound = Counter(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName"))
    if served:  # 1500m + 1500m > 2 cpu: one per node
        assert sorted(bound.values()) == [1, 1], bound
    snap = snapshot_from_objects([*pods])
    cpu = {p.requests.get("cpu") for p in snap.pods}
    assert cpu == ({1500} if served else {100}), cpu


def test_an_evicted_pod_carries_disruption_target_and_is_left_out(
    cluster: Cluster, namespace: str, pool: list[str]
) -> None:
    pods = skewed(cluster, namespace, pool, SPREAD)
    victim = pods[0]["metadata"]["name"]
    assert cluster.evict(namespace, victim, grace_period_seconds=60).code == 201

    def marked() -> dict[str, Any] | None:
        pod = cluster.get_json("pod", victim, "-n", namespace)
        conditions = {c["type"]: c for c in pod["status"].get("conditions", [])}
        target = conditions.get("DisruptionTarget", {})
        return pod if target.get("status") == "True" else None

    pod = cluster.wait_for("DisruptionTarget on the evicted pod", marked, timeout=30)
    assert pod["metadata"].get("deletionTimestamp"), pod["metadata"]
    plan = plan_json(cluster, namespace)
    # the ReplicaSet's replacement is Pending or placed; the leaving pod is counted nowhere
    assert victim not in {e["name"] for e in plan["evictions"]}, plan
    counted = sum(sum(v["domains"].values()) for v in plan["violations"])
    assert counted <= 6, plan


def test_gang_members_are_skipped_where_the_workload_api_is_served(
    cluster: Cluster, namespace: str, pool: list[str]
) -> None:
    version = minor(cluster)
    served = version >= (1, 37)  # the control plane turns GenericWorkload on from 1.37
    if served:
        cluster.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": namespace},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 6}}},
            }
        )
    # Before 1.36 the field is unknown (kubectl would refuse it): sent unvalidated, dropped.
    pods = skewed(
        cluster,
        namespace,
        pool,
        {**SPREAD, "schedulingGroup": {"podGroupName": "train"}},
        *(() if version >= (1, 36) else ("--validate=false",)),
    )
    assert ("schedulingGroup" in pods[0]["spec"]) is served, pods[0]["spec"]
    plan = plan_json(cluster, namespace)
    codes = Counter(s["code"] for s in plan["skipped"])
    if served:
        assert plan["evictions"] == [] and codes == Counter({"gang-member": 6}), plan
    else:
        assert len(plan["evictions"]) == 4 and "gang-member" not in codes, plan
    server = plan["server"]
    assert server["version"].startswith(f"v{version[0]}.{version[1]}."), server
    assert server["featureGatesFrom"] == "metrics", server  # the admin may read /metrics
    assert server["featureGates"]["GenericWorkload"] is served, server
    assert server["featureGates"]["PodLevelResources"] is (version >= (1, 34)), server
    assert server["featureGates"]["NodeDeclaredFeatures"] is (version >= (1, 36)), server
    assert server["workloadApi"] == ("scheduling.k8s.io/v1beta1" if served else None), server
    assert isinstance(cluster, ControlPlane)


def test_the_run_summary_line_names_the_server(cluster: Cluster, namespace: str) -> None:
    """A run (nothing to do in an empty namespace) logs the server's version and gates once,
    in its run.summary line."""
    version = minor(cluster)
    ran = rebalancer(cluster, "run", "-n", namespace, "-o", "json")
    assert ran.returncode == 0, explain(ran)
    lines = [json.loads(x) for x in ran.stderr.splitlines() if x.startswith("{")]
    (summary,) = [x for x in lines if x.get("event") == "run.summary"]
    server = summary["server"]
    assert server["version"].startswith(f"v{version[0]}.{version[1]}."), summary
    assert server["featureGates"]["MatchLabelKeysInPodTopologySpreadSelectorMerge"] is (
        version >= (1, 34)
    ), summary


EMPTY_SELECTOR = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {},
        }
    ]
}


def test_an_empty_selector_counts_as_the_servers_scheduler_counts(
    cluster: Cluster, namespace: str, pool: list[str], tmp_path: Path
) -> None:
    """``labelSelector: {}``: kube-scheduler up to 1.37 counts no pod for it, 1.38 counts every
    pod of the namespace. A probe pod held to zone-a by node affinity (nodeAffinityPolicy
    Ignore, so zones b and c, empty, still count) shows the cluster's own rule: where {}
    counts, 6 + 1 - 0 > maxSkew 1 keeps it Pending; where it counts nothing it runs in zone-a.
    The live plan follows the server (no eviction up to 1.37; [6, 0, 0] -> [2, 2, 2], 4
    evictions, from 1.38), and so does the file ``rebalancer snapshot`` writes (its
    ``ServerVersion`` item); the same file without that item names no server and is planned
    with the newest rule, so up to 1.37 the two rules give different plans of one cluster."""
    version = minor(cluster)
    counts = version >= (1, 38)
    skewed(cluster, namespace, pool, EMPTY_SELECTOR)

    live = plan_json(cluster, namespace)
    assert live["server"]["version"].startswith(f"v{version[0]}.{version[1]}."), live
    assert len(live["evictions"]) == (4 if counts else 0), live
    snap = rebalancer(cluster, "snapshot", "-n", namespace, "-o", "json")
    assert snap.returncode == 0, explain(snap)
    written = json.loads(snap.stdout)
    kinds = [item["kind"] for item in written["items"]]
    recorded = written["items"][0].get("minor", "").rstrip("+")
    assert kinds[0] == "ServerVersion" and recorded == str(version[1]), kinds
    anonymous = {**written, "items": [i for i in written["items"] if i["kind"] != "ServerVersion"]}
    for document, evictions in ((written, 4 if counts else 0), (anonymous, 4)):
        path = tmp_path / "snapshot.json"
        path.write_text(json.dumps(document))
        offline = rebalancer(cluster, "plan", "--snapshot", str(path), "-o", "json")
        assert offline.returncode == 0, explain(offline)
        assert len(json.loads(offline.stdout)["evictions"]) == evictions, offline.stdout

    probe_spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": ZONE, "operator": "In", "values": ["zone-a"]}
                            ]
                        }
                    ]
                }
            }
        },
        "topologySpreadConstraints": [
            {**EMPTY_SELECTOR["topologySpreadConstraints"][0], "nodeAffinityPolicy": "Ignore"}
        ],
    }
    cluster.apply(deployment(namespace, 1, probe_spec, name="probe"))

    def placed() -> dict[str, Any] | None:
        for p in cluster.pods(namespace, "app=probe"):
            if p["spec"].get("nodeName"):
                return p
            for c in p.get("status", {}).get("conditions", []):
                if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                    return p
        return None

    probe = cluster.wait_for("the probe scheduled or refused", placed, timeout=60)
    assert (not probe["spec"].get("nodeName")) is counts, probe.get("status")
    if not counts:
        assert probe["spec"]["nodeName"].startswith(f"{namespace}-zone-a-"), probe["spec"]
    print(f"\n{version}: live plan {len(live['evictions'])} evictions, snapshot plan 4; probe "
          f"{'Pending' if counts else 'on ' + probe['spec']['nodeName']}")  # fmt: skip
