"""Steered scale-downs against the real control plane (opt-in: --e2e).

- s1: a Deployment with one zone fuller than the others: a run with ``steerScaleDown: true``
  writes deletion costs and evicts nothing; the next scale-down removes the cheapest pods, the
  first from the fullest zone (without the costs, the controller would have removed the
  youngest, doubled-up pods of the other two zones and left the spread violated). rebalancer's
  only writes in the audit log are merge patches of the cost and its mark.
- s2: the deploy/overlays/steer admission policy: rebalancer's ServiceAccount (impersonated)
  may patch a pod's deletion cost, but a label, image or other-annotation patch is refused.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.controlplane import Cluster
from e2e.test_live import audit_mark, evictions, rebalancer_requests, wait_audit, write_policy
from e2e.test_scenarios import (
    APP,
    DELETION_COST,
    ZONE,
    Pool,
    deployment,
    pool,  # noqa: F401  # the fixture
    run,
    spread,
)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
STEER = ROOT / "deploy" / "overlays" / "steer"
MARK = "rebalancer/deletion-cost"
SERVICE_ACCOUNT = "system:serviceaccount:rebalancer:rebalancer"


def test_s1_a_steered_scale_down_removes_pods_from_the_fullest_zone(
    cluster: Cluster,
    pool: Pool,  # noqa: F811  # the fixture
    tmp_path: Path,
) -> None:
    """Zones [4 on two nodes, 3, 3] with the youngest, doubled-up pods in b and c: with the
    costs written, a scale-down by 2 removes the two cheapest pods, the first from zone-a, and
    the zones stay within maxSkew; no eviction, only cost patches."""
    ns = pool.ns
    pool.add({"zone-a": 2})
    cluster.apply([deployment(ns, APP, 4, [spread(ZONE)])])
    pool.settle(4)
    pool.add({"zone-b": 1, "zone-c": 1})
    pool.scale(APP, 10)  # maxSkew 1 against zone-a's 4: the six new pods all go to b and c
    assert pool.counts() == {"zone-a": 4, "zone-b": 3, "zone-c": 3}

    policy = write_policy(tmp_path, "steer", steerScaleDown=True)
    mark = audit_mark(cluster)
    report = run(cluster, ns, policy)
    assert report["plan"]["evictions"] == [], report["plan"]
    assert report["summary"]["evicted"] == 0, report["summary"]
    written = report["summary"]["costsWritten"]
    if written < 10 and report["summary"]["costsNotWritten"]:
        # a pod changed since the read (409, e.g. its status under load): the next run writes
        # the costs still missing and keeps those already written
        again = run(cluster, ns, policy)
        assert again["plan"]["evictions"] == [], again["plan"]
        written += again["summary"]["costsWritten"]
    assert written == 10, report["summary"]
    labels = pool.labels()
    costs = sorted(
        (
            int(p["metadata"]["annotations"][DELETION_COST]),
            labels[p["spec"]["nodeName"]][ZONE],
            p["metadata"]["name"],
        )
        for p in pool.pods()
    )
    assert costs[0][1] == "zone-a", costs  # the fullest zone first; then [3, 3, 3]: any zone
    for p in pool.pods():
        annotations = p["metadata"]["annotations"]
        assert annotations[MARK] == annotations[DELETION_COST]
    again = run(cluster, ns, policy)
    assert again["summary"]["costsWritten"] == 0, again["summary"]  # written only on change

    pool.scale(APP, 8)
    # The ReplicaSet removed the two cheapest pods, not its doubled-up youngest ones in b and c
    # (which would leave [4, 2, 2]): zone-a lost one, and the zones stay within maxSkew 1.
    assert {p["metadata"]["name"] for p in pool.pods()} == {name for _, _, name in costs[2:]}
    counts = pool.counts()
    assert counts["zone-a"] == 3 and pool.skew() <= 1, counts

    time.sleep(2)  # the batch audit backend
    sent = rebalancer_requests(cluster, mark, ns)
    assert evictions(sent) == []
    writes = [e for e in sent if e["verb"] not in ("get", "list", "watch")]
    assert len(writes) == 10, [(e["verb"], e["objectRef"]) for e in writes]
    for e in writes:
        assert e["verb"] == "patch" and e["objectRef"]["resource"] == "pods", e["objectRef"]
        assert not e["objectRef"].get("subresource"), e["objectRef"]
        assert e["responseStatus"]["code"] == 200, e["responseStatus"]
        body = e["requestObject"]
        assert set(body) == {"metadata"} and set(body["metadata"]) == {
            "resourceVersion",
            "annotations",
        }, body
        assert set(body["metadata"]["annotations"]) == {DELETION_COST, MARK}, body


def _steer_objects() -> list[dict[str, Any]]:
    """The overlay's ClusterRole, binding and admission policy, and a test-only GET of pods
    (kubectl patch reads the pod first; the base ClusterRole grants that in a real install)."""
    reader = {"apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "e2e-steer-get"}}
    docs: list[dict[str, Any]] = [
        {**reader, "kind": "ClusterRole", "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
        {**reader, "kind": "ClusterRoleBinding",
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "e2e-steer-get"},
         "subjects": [{"kind": "ServiceAccount", "name": "rebalancer",
                       "namespace": "rebalancer"}]},
    ]  # fmt: skip
    for name in (
        "clusterrole-steer.yaml",
        "clusterrolebinding-steer.yaml",
        "admission-policy.yaml",
    ):
        docs += [d for d in yaml.safe_load_all((STEER / name).read_text()) if d]
    return docs


@pytest.fixture
def steer_objects(cluster: Cluster) -> Iterator[list[dict[str, Any]]]:
    docs = _steer_objects()
    cluster.apply(docs)
    yield docs
    for d in reversed(docs):
        cluster.kubectl("delete", d["kind"], d["metadata"]["name"], "--wait=false", check=False)


def test_s2_the_admission_policy_lets_the_service_account_change_only_the_cost(
    cluster: Cluster,
    pool: Pool,  # noqa: F811  # the fixture
    steer_objects: list[dict[str, Any]],
) -> None:
    """As rebalancer's ServiceAccount: a label patch, an image patch and another annotation
    are refused by the admission policy (by name); a cost patch with the pod's resourceVersion
    is accepted, and one with a stale resourceVersion gets a conflict."""
    ns = pool.ns
    pool.add({"zone-a": 1})
    cluster.apply([deployment(ns, APP, 1, [spread(ZONE)])])
    (pod,) = pool.settle(1)
    name = pod["metadata"]["name"]
    policy_name = next(d for d in steer_objects if d["kind"] == "ValidatingAdmissionPolicy")[
        "metadata"
    ]["name"]
    as_sa = cluster.impersonation_kubeconfig(
        SERVICE_ACCOUNT,
        ["system:serviceaccounts", "system:serviceaccounts:rebalancer", "system:authenticated"],
    )

    def patch(body: dict[str, Any], kind: str = "merge") -> Any:
        return cluster.kubectl(
            "patch", "pod", name, "-n", ns, f"--type={kind}", "-p", json.dumps(body),
            kubeconfig=as_sa, check=False,
        )  # fmt: skip

    # The policy takes a moment to be in force: a harmless label, new each time, until refused.
    tries = itertools.count()
    refused = wait_audit(
        cluster,
        "the admission policy refusing a label patch",
        lambda: (
            (p := patch({"metadata": {"labels": {"probe": "x"}}})).returncode != 0
            and policy_name in p.stderr
            and p
        ),
        timeout=60,
    )
    assert policy_name in refused.stderr, refused.stderr
    assert "labels" in refused.stderr, refused.stderr
    # A strategic merge patch, as kubectl set image sends: the containers are merged by name.
    image = patch({"spec": {"containers": [{"name": "main", "image": "evil:latest"}]}}, "strategic")
    assert image.returncode != 0 and policy_name in image.stderr, image.stderr
    other = patch({"metadata": {"annotations": {"other": "1"}}})
    assert other.returncode != 0 and policy_name in other.stderr, other.stderr
    now = cluster.get_json("pod", name, "-n", ns)
    assert now["metadata"].get("labels", {}).get("probe") != str(next(tries) - 1)
    assert now["spec"]["containers"][0]["image"] != "evil:latest"

    version = now["metadata"]["resourceVersion"]
    cost = {DELETION_COST: "-5", MARK: "-5"}
    ok = patch({"metadata": {"resourceVersion": version, "annotations": cost}})
    assert ok.returncode == 0, ok.stderr
    stale = patch({"metadata": {"resourceVersion": version, "annotations": cost}})
    assert stale.returncode != 0 and "modified" in stale.stderr, stale.stderr
    after = cluster.get_json("pod", name, "-n", ns)["metadata"]["annotations"]
    assert after[DELETION_COST] == "-5" and after[MARK] == "-5"
