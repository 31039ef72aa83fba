"""Capacity before the eviction: the e2e infrastructure (opt-in: --e2e, Karpenter built).

Karpenter's kwok provider (``e2e/cluster/karpenter.py``) with its CapacityBuffer feature gate
on, and every node its pools launch held NotReady for :data:`DELAY` seconds after it is created
(``startup_delay``; kwok's node-initialize stage reads the pools' template annotation):

- a PodTemplate and a CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``) pinned by nodeSelector
  to one pool and zone make Karpenter launch one node there; the node exists NotReady
  (``Ready=False``, tainted ``node.kubernetes.io/not-ready``: a pod for it waits, Pending),
  turns Ready no sooner than :data:`DELAY` seconds after its creation, and only then gets
  ``karpenter.sh/initialized=true`` and the pod; the buffer says ``ReadyForProvisioning``
  (``Resolved``) and its ``replicas``; with the buffer and the pod deleted, Karpenter removes
  the empty node;
- a pool made by ``unlaunchable_node_pool`` is Ready, yet a pod that only it could serve stays
  Pending and no NodeClaim of it appears; a buffer pinned to it brings no node either.

What these scenarios measured by hand is written in ``e2e/README.md`` (Capacity before the
eviction); the figures there come from the sampler below, never from assertions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.cluster.karpenter import (
    INITIALIZED_LABEL,
    NODEPOOL_LABEL,
    POOL_LABEL,
    STARTUP_DELAY_ANNOTATION,
    ZONE_LABEL,
    Karpenter,
    capacity_buffer,
    pod_template,
    unlaunchable_node_pool,
)
from e2e.test_karpenter import karpenter_session

pytestmark = pytest.mark.e2e

DELAY = 60
POOL_TOLERATION = {"key": POOL_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


@pytest.fixture(scope="module")
def karpenter(cluster: Cluster) -> Iterator[Karpenter]:
    with karpenter_session(cluster, startup_delay=DELAY) as k:
        yield k


def _stamp(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def ready_condition(node: dict[str, Any]) -> dict[str, Any] | None:
    for c in node.get("status", {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return dict(c)
    return None


def is_ready(node: dict[str, Any]) -> bool:
    c = ready_condition(node)
    return c is not None and c.get("status") == "True"


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """type -> (status, reason) of an object's status conditions."""
    return {
        c["type"]: (c.get("status", ""), c.get("reason", ""))
        for c in obj.get("status", {}).get("conditions") or []
    }


def pinned(pool: str, zone: str) -> dict[str, str]:
    return {NODEPOOL_LABEL: pool, ZONE_LABEL: zone}


def test_a_buffer_brings_a_node_in_its_pool_and_zone_ready_only_after_the_delay(
    cluster: Cluster, karpenter: Karpenter, namespace: str
) -> None:
    ns = namespace
    before = {n["metadata"]["name"] for n in karpenter.nodes()}
    cluster.apply(
        pod_template("reserve", pinned("e2e-zone-b", "zone-b"), tolerations=[POOL_TOLERATION]),
        "-n",
        ns,
    )
    cluster.apply(capacity_buffer("reserve", "reserve"), "-n", ns)

    seen: dict[str, list[dict[str, Any]]] = {}  # node -> what each sample showed

    def sample() -> dict[str, Any] | None:
        """Each new node's state (Ready, initialized, taints); the node once initialized."""
        for n in karpenter.nodes():
            name = n["metadata"]["name"]
            if name in before:
                continue
            labels = n["metadata"]["labels"]
            seen.setdefault(name, []).append(
                {
                    "ready": is_ready(n),
                    "initialized": labels.get(INITIALIZED_LABEL),
                    "taints": {t["key"] for t in n["spec"].get("taints") or []},
                }
            )
            if labels.get(INITIALIZED_LABEL) == "true":
                return n
        return None

    cluster.wait_for("a node of e2e-zone-b", lambda: seen or sample(), timeout=120, interval=1.0)
    # A pod for that pool and zone, while its node is NotReady: it waits for it.
    spec = pod_template("early", pinned("e2e-zone-b", "zone-b"), tolerations=[POOL_TOLERATION])
    early = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "early"}}
    cluster.apply({**early, "spec": spec["template"]["spec"]}, "-n", ns)
    node = cluster.wait_for(
        "the node of e2e-zone-b initialized", sample, timeout=DELAY + 180, interval=1.0
    )
    name = node["metadata"]["name"]
    assert list(seen) == [name], seen  # one node, the buffer's
    labels = node["metadata"]["labels"]
    assert labels[NODEPOOL_LABEL] == "e2e-zone-b" and labels[ZONE_LABEL] == "zone-b", labels
    assert node["metadata"]["annotations"][STARTUP_DELAY_ANNOTATION] == str(DELAY)
    # NotReady first (not initialized, and tainted not-ready as soon as the node-lifecycle
    # controller saw it), then Ready
    states = seen[name]
    assert not states[0]["ready"], states
    assert all(s["initialized"] is None for s in states if not s["ready"]), states
    assert any(NOT_READY_TAINT in s["taints"] for s in states if not s["ready"]), states
    ready = ready_condition(node)
    assert ready is not None and ready["status"] == "True", ready
    created = _stamp(node["metadata"]["creationTimestamp"])
    # kwok turned it Ready at creation + DELAY; the API's timestamps are whole seconds
    assert _stamp(ready["lastTransitionTime"]) - created >= DELAY - 1, (ready, created)
    claims = [c for c in karpenter.node_claims() if c["status"].get("nodeName") == name]
    assert len(claims) == 1, karpenter.diagnostics()
    assert claims[0]["metadata"]["labels"][NODEPOOL_LABEL] == "e2e-zone-b"

    def scheduled() -> dict[str, Any] | None:
        pod: dict[str, Any] = cluster.get_json("pod", "early", "-n", ns)
        return pod if pod["spec"].get("nodeName") else None

    pod = cluster.wait_for("the early pod bound", scheduled, timeout=60, interval=1.0)
    assert pod["spec"]["nodeName"] == name
    (bound,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert _stamp(bound["lastTransitionTime"]) >= _stamp(ready["lastTransitionTime"]), (
        bound,
        ready,
    )

    (buffer,) = karpenter.buffers(ns)
    status = conditions(buffer)
    assert status.get("ReadyForProvisioning") == ("True", "Resolved"), buffer.get("status")
    assert buffer["status"].get("replicas") == 1, buffer["status"]

    # The buffer and the pod gone, nothing holds the node: Karpenter removes it
    # (consolidateAfter 30s).
    cluster.kubectl("delete", "capacitybuffer", "reserve", "-n", ns)
    cluster.kubectl("delete", "pod", "early", "-n", ns, "--wait=false")
    cluster.wait_for(
        f"node {name} removed",
        lambda: name not in {n["metadata"]["name"] for n in karpenter.nodes()},
        timeout=300,
        interval=2.0,
    )


def test_an_unlaunchable_pool_is_ready_and_launches_nothing(
    cluster: Cluster, karpenter: Karpenter, namespace: str
) -> None:
    ns = namespace
    pool = "nolaunch-zone-c"
    cluster.apply(unlaunchable_node_pool("zone-c", name=pool))
    try:
        cluster.wait_for(
            f"NodePool {pool} Ready",
            lambda: conditions(cluster.get_json("nodepool", pool)).get("Ready", ("",))[0] == "True",
            timeout=120,
            interval=1.0,
        )
        template = pod_template("nolaunch", pinned(pool, "zone-c"), tolerations=[POOL_TOLERATION])
        cluster.apply(template, "-n", ns)
        cluster.apply(capacity_buffer("nolaunch", "nolaunch"), "-n", ns)
        spec = template["template"]["spec"]
        cluster.apply(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waits"}, "spec": spec},
            "-n",
            ns,
        )
        # Karpenter tries (each batch, about every few seconds): give it a minute.
        deadline = time.time() + 60
        while time.time() < deadline:
            karpenter.check_alive()
            mine = [
                c
                for c in karpenter.node_claims()
                if c["metadata"]["labels"].get(NODEPOOL_LABEL) == pool
            ]
            assert mine == [], mine
            time.sleep(2)
        pod = cluster.get_json("pod", "waits", "-n", ns)
        assert pod["status"].get("phase") == "Pending" and not pod["spec"].get("nodeName"), pod
        assert not [n for n in karpenter.nodes() if n["metadata"]["labels"][NODEPOOL_LABEL] == pool]
        pool_status = conditions(cluster.get_json("nodepool", pool))
        assert pool_status.get("Ready", ("",))[0] == "True", pool_status
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        cluster.kubectl("delete", "nodepool", pool, "--wait=false", check=False)
