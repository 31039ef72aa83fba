"""namespaceLabelSelector against the real control plane (opt-in: --e2e): the namespaces and
their labels are listed live, a namespace whose labels do not match is left alone, and
`rebalancer snapshot` keeps the Namespace objects so that the offline plan is the live one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_live import Imbalance, explain, need_own_control_plane, rebalancer

pytestmark = pytest.mark.e2e

POLICY = """\
apiVersion: rebalancer/v1alpha1
kind: RebalancerPolicy
namespaceLabelSelector:
  matchLabels: {e2e-rebalance: enabled}
"""


def test_namespace_label_selector_live(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    """[4, 0, 0] in a namespace without the label: no eviction planned, the pods skipped as
    out of scope; labelled: the 2-eviction plan; the snapshot holds the Namespace and plans
    the same offline."""
    need_own_control_plane(cluster)
    setup = Imbalance(cluster, namespace)
    try:
        policy = tmp_path / "policy.yaml"
        policy.write_text(POLICY)
        unlabelled = rebalancer(
            cluster, "plan", "-n", namespace, "--policy", str(policy), "-o", "json"
        )
        assert unlabelled.returncode == 0, explain(unlabelled)
        assert json.loads(unlabelled.stdout)["evictions"] == []
        cluster.kubectl("label", "namespace", namespace, "e2e-rebalance=enabled")
        labelled = rebalancer(
            cluster, "plan", "-n", namespace, "--policy", str(policy), "-o", "json"
        )
        assert labelled.returncode == 0, explain(labelled)
        planned = json.loads(labelled.stdout)
        assert len(planned["evictions"]) == 2, planned
        assert {e["namespace"] for e in planned["evictions"]} == {namespace}
        snap = rebalancer(cluster, "snapshot", "-n", namespace, "-o", "json")
        assert snap.returncode == 0, explain(snap)
        items = json.loads(snap.stdout)["items"]
        ours = [i for i in items if i["kind"] == "Namespace" and i["metadata"]["name"] == namespace]
        assert ours and ours[0]["metadata"]["labels"]["e2e-rebalance"] == "enabled"
        path = tmp_path / "snap.json"
        path.write_text(snap.stdout)
        offline = rebalancer(
            cluster,
            "plan",
            "--snapshot",
            str(path),
            "-n",
            namespace,
            "--policy",
            str(policy),
            "-o",
            "json",
        )
        assert offline.returncode == 0, explain(offline)
        assert len(json.loads(offline.stdout)["evictions"]) == 2
    finally:
        setup.cleanup()
