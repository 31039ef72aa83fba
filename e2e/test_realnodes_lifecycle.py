"""Real nodes leave nothing behind, and two clusters in a row work (opt-in: --e2e).

Runs after test_realnodes.py (its module cluster is gone by then: one real-node cluster per
host at a time). Each round starts the control plane with three real nodes, runs a pod on
every node (so that there are shims, network namespaces, volume mounts, CNI and kube-proxy
state), stops everything, and compares the host with what it was before: no process, mount,
user-defined iptables chain, link, lo address or cgroup may be left.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from e2e.cluster.controlplane import build
from e2e.cluster.realnodes import (
    API_ADDRESS,
    RealNodeCluster,
    build_nodes,
    host_state,
    host_support,
)
from e2e.image.pack import TEST_IMAGE

pytestmark = pytest.mark.e2e


def pod_on(node: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": "main",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "Never",
                    "env": [{"name": "TERM_DELAY", "value": "never"}],  # must be killed
                }
            ],
        },
    }


def diff(before: dict[str, set[str]], after: dict[str, set[str]]) -> dict[str, Any]:
    out = {}
    for key in sorted(set(before) | set(after)):
        added = sorted(after.get(key, set()) - before.get(key, set()))
        gone = sorted(before.get(key, set()) - after.get(key, set()))
        if added or gone:
            out[key] = {"left behind": added, "removed": gone}
    return out


def _all_running(c: RealNodeCluster, names: list[str]) -> bool:
    return all(
        c.get_json("pod", name, "-n", "default")["status"].get("phase") == "Running"
        for name in names
    )


def test_teardown_leaves_nothing_behind_and_a_second_cluster_starts() -> None:
    reason = host_support()
    if reason:
        pytest.skip(f"real-node scenarios skipped: this host cannot run real nodes: {reason}")
    bin_dir, nodes_bin = build(quiet=True), build_nodes(quiet=True)
    before = host_state([str(nodes_bin)])
    assert before["processes"] == set(), f"real-node processes already running: {before}"
    for round_ in (1, 2):
        c = RealNodeCluster(bin_dir, nodes_bin, real_nodes=3)
        c.start()
        run_dir = c.run_dir
        try:
            names = [f"probe-{n.name}" for n in c.real_nodes]
            c.apply([pod_on(n.name, name) for n, name in zip(c.real_nodes, names, strict=True)])
            c.wait_for(
                "a running pod on every real node",
                partial(_all_running, c, names),
                timeout=90,
            )
            during = host_state([str(nodes_bin), str(run_dir)])
            # The comparison below means something only if the nodes changed the host.
            changed = diff(before, during)
            assert {"lo_addresses", "links", "iptables_chains", "mounts", "cgroups"} <= set(
                changed
            ), changed
            assert f"{API_ADDRESS}/32" in during["lo_addresses"]
            assert any("containerd-shim-runc-v2" in p for p in during["processes"])
        finally:
            c.stop()
        after = host_state([str(nodes_bin), str(run_dir)])
        assert diff(before, after) == {}, f"round {round_}: {diff(before, after)}"
        assert not run_dir.exists()
