"""Capacity before the eviction, beside Karpenter (opt-in: --e2e, and Karpenter's kwok provider
built): SPEC §5.10.

Karpenter's kwok provider runs with its CapacityBuffer gate on, one NodePool per zone, each node
NotReady for :data:`STARTUP` seconds after it is created (a node booting). The cluster is packed
as in ``test_karpenter``'s ``nodeFit: true`` scenario: zones a:3 b:1 c:1 of one ReplicaSet, the
nodes of b and c full, zone-b's pool at its limit, so the plan moves one pod from zone-a and its
replacement waits for a node from a zone-c pool. The scenarios, judged by the audit log:

- reserve first: the run creates a PodTemplate and a CapacityBuffer (after naming them in the
  Lease's record), the new node is Ready before the eviction, the buffer and the template are
  deleted after it, no pod is ever DELETEd, and the replacement runs on the new node;
- a pool that cannot launch (a zone-c pool that requires a capacity type no instance type
  offers, zone-c's own at its limit): no eviction at all, the run reports
  ``capacity-not-added`` with the pool, the zone and the wave timeout, the buffer is deleted,
  the Lease's record keeps the refusal, and a live ``plan`` then holds that landing with it;
- a run SIGKILLed between the buffer and the eviction leaves the buffer, named in the Lease's
  record; the next run removes it (found by its labels: the record is wiped first) before it
  plans.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.cluster.karpenter import (
    NODEPOOL_LABEL,
    ZONE_LABEL,
    Karpenter,
    unlaunchable_node_pool,
)
from e2e.test_faults import start
from e2e.test_karpenter import ZONES, karpenter_session, node_of, packed_zones, running_pods
from e2e.test_live import (
    audit_mark,
    evictions,
    explain,
    rebalancer,
    rebalancer_requests,
    write_policy,
)

pytestmark = pytest.mark.e2e

STARTUP = 20.0
"""Seconds each node of the pools stays NotReady after it is created."""
LEASE = ("rebalancer", "rebalancer")
RECORD = "rebalancer/capacity"
NOLAUNCH = "e2e-nolaunch-c"


@pytest.fixture(scope="module")
def karpenter(cluster: Cluster) -> Iterator[Karpenter]:
    with karpenter_session(cluster, startup_delay=STARTUP) as k:
        try:
            yield k
        finally:
            cluster.kubectl("delete", "nodepool", NOLAUNCH, "--ignore-not-found", check=False)


def _limit(cluster: Cluster, pool: str, cpu: str) -> None:
    patch = {"spec": {"limits": {"cpu": cpu}}}
    cluster.kubectl("patch", "nodepool", pool, "--type=merge", "-p", json.dumps(patch))


def _at_its_limit(cluster: Cluster, pool: str) -> None:
    _limit(cluster, pool, cluster.get_json("nodepool", pool)["status"]["resources"]["cpu"])


def packed(cluster: Cluster, karpenter: Karpenter, ns: str) -> tuple[str, str, str]:
    """Seeds holding one node per zone; zones a:3 b:1 c:1 of ``packed`` (a ReplicaSet), the
    nodes of b and c full, zone-b's pool at its limit: the plan moves one pod of zone-a, its
    replacement waiting for a node a zone-c pool adds. The nodes of a, b and c."""
    for zone in ZONES:
        _limit(cluster, f"e2e-{zone}", karpenter.cpu_limit)
    a, b, c = packed_zones(cluster, karpenter, ns)
    _at_its_limit(cluster, "e2e-zone-b")
    return a, b, c


def plan(cluster: Cluster, ns: str, policy: Path) -> dict[str, Any]:
    planned = rebalancer(cluster, "plan", "-n", ns, "--policy", str(policy), "-o", "json")
    assert planned.returncode == 0, explain(planned)
    result: dict[str, Any] = json.loads(planned.stdout)
    return result


def at(text: str) -> float:
    """An audit or object timestamp in seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def mine(events: list[dict[str, Any]], verb: str, resource: str) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["verb"] == verb
        and e.get("objectRef", {}).get("resource") == resource
        and e["responseStatus"]["code"] < 300
    ]


def reservations(cluster: Cluster, ns: str) -> set[str]:
    """The CapacityBuffers and PodTemplates in ``ns``, as kind/name."""
    found = set()
    for kind in ("capacitybuffers", "podtemplates"):
        for item in cluster.get_json(kind, "-n", ns)["items"]:
            found.add(f"{kind}/{item['metadata']['name']}")
    return found


def record(cluster: Cluster) -> dict[str, Any]:
    """The Lease holder's record of reservations."""
    lease = cluster.get_json("lease", LEASE[1], "-n", LEASE[0])
    text = (lease["metadata"].get("annotations") or {}).get(RECORD) or "{}"
    found: dict[str, Any] = json.loads(text)
    return found


def settle(cluster: Cluster) -> None:
    time.sleep(2)  # the audit backend writes in batches


def test_the_node_is_reserved_and_ready_before_the_eviction(
    cluster: Cluster, karpenter: Karpenter, namespace: str, tmp_path: Path
) -> None:
    ns = namespace
    a, b, c = packed(cluster, karpenter, ns)
    policy = write_policy(tmp_path, "fit", nodeFit=True)
    planned = plan(cluster, ns, policy)
    assert len(planned["evictions"]) == 1, (planned["skipped"], planned.get("unrepaired"))
    (move,) = planned["evictions"]
    assert move["node"] == a and move["capacity"] == "reserve", move
    assert move["reserveIn"] == {NODEPOOL_LABEL: "e2e-zone-c", ZONE_LABEL: "zone-c"}, move
    assert planned["server"]["capacity"]["reserve"] is True, planned["server"]

    mark = audit_mark(cluster)
    ran = rebalancer(
        cluster, "run", "-n", ns, "--policy", str(policy), "--wave-timeout", "180s", "-o", "json"
    )
    assert ran.returncode == 0, explain(ran) + karpenter.diagnostics()
    (result,) = json.loads(ran.stdout)["results"]
    assert result["outcome"] == "evicted", result
    settle(cluster)
    events = rebalancer_requests(cluster, mark)
    (evicted,) = evictions([e for e in events if e["objectRef"].get("namespace") == ns])
    (template,) = mine(events, "create", "podtemplates")
    (buffer,) = mine(events, "create", "capacitybuffers")
    name = buffer["objectRef"]["name"]
    assert name.startswith("rebalancer-reserve-") and template["objectRef"]["name"] == name
    (buffer_gone,) = mine(events, "delete", "capacitybuffers")
    (template_gone,) = mine(events, "delete", "podtemplates")
    assert buffer_gone["objectRef"]["name"] == template_gone["objectRef"]["name"] == name
    # the record first, then the template and the buffer, the eviction, then the deletions
    noted = [
        e
        for e in mine(events, "update", "leases")
        if name
        in ((e.get("requestObject") or {}).get("metadata", {}).get("annotations") or {}).get(
            RECORD, ""
        )
    ]
    assert noted, "the Lease's record never named the reservation"
    times = [
        at(e["stageTimestamp"])
        for e in (noted[0], template, buffer, evicted, buffer_gone, template_gone)
    ]
    assert times == sorted(times), times
    # the node Karpenter launched for it was Ready (and initialized) before the eviction
    (replacement,) = [
        p
        for p in running_pods(cluster, ns, "app=packed", 5)
        if p["metadata"]["name"] == (result["replacement"].split("/", 1)[1])
    ]
    node = node_of(cluster, replacement["spec"]["nodeName"])
    labels = node["metadata"]["labels"]
    assert node["metadata"]["name"] not in {a, b, c}
    assert labels[NODEPOOL_LABEL] == "e2e-zone-c" and labels[ZONE_LABEL] == "zone-c", labels
    assert labels.get("karpenter.sh/initialized") == "true", labels
    (ready,) = [x for x in node["status"]["conditions"] if x["type"] == "Ready"]
    assert at(node["metadata"]["creationTimestamp"]) >= times[2] - 1  # launched for the buffer
    assert at(ready["lastTransitionTime"]) <= times[3], (ready, evicted["stageTimestamp"])
    assert at(evicted["stageTimestamp"]) >= at(node["metadata"]["creationTimestamp"]) + STARTUP
    # never a pod DELETE, nothing left behind
    assert [
        e for e in events if e["verb"] == "delete" and e["objectRef"].get("resource") == "pods"
    ] == []
    assert reservations(cluster, ns) == set()
    assert all(m["name"] != name for m in record(cluster).get("made", []))


def test_a_pool_that_cannot_launch_gets_no_eviction_and_says_why(
    cluster: Cluster, karpenter: Karpenter, namespace: str, tmp_path: Path
) -> None:
    ns = namespace
    a, _, _ = packed(cluster, karpenter, ns)
    _at_its_limit(cluster, "e2e-zone-c")
    cluster.apply(unlaunchable_node_pool("zone-c", name=NOLAUNCH))
    try:
        cluster.wait_for(
            f"NodePool {NOLAUNCH} Ready",
            lambda: any(
                x.get("type") == "Ready" and x.get("status") == "True"
                for x in cluster.get_json("nodepool", NOLAUNCH)
                .get("status", {})
                .get("conditions", [])
            ),
            timeout=60,
            interval=1.0,
        )
        policy = write_policy(tmp_path, "fit", nodeFit=True)
        (move,) = plan(cluster, ns, policy)["evictions"]
        assert move["node"] == a and move["reserveIn"][NODEPOOL_LABEL] == NOLAUNCH, move

        mark = audit_mark(cluster)
        ran = rebalancer(
            cluster, "run", "-n", ns, "--policy", str(policy), "--wave-timeout", "30s", "-o", "json"
        )
        assert ran.returncode == 0, explain(ran)
        report = json.loads(ran.stdout)
        why = f"NodePool {NOLAUNCH} added no node in zone-c within 30s"
        skipped = [r for r in report["results"] if r["outcome"] == "skipped"]
        assert skipped and all(
            r["detail"].startswith(f"capacity-not-added: {why}") for r in skipped
        ), report["results"]
        assert report["summary"]["evicted"] == 0, report["summary"]
        settle(cluster)
        events = rebalancer_requests(cluster, mark)
        assert evictions(events) == []
        assert mine(events, "create", "capacitybuffers")
        assert len(mine(events, "delete", "capacitybuffers")) == len(
            mine(events, "create", "capacitybuffers")
        )
        assert reservations(cluster, ns) == set()
        refused = record(cluster).get("refused", {})
        assert any(ns in key and r["why"].startswith(why) for key, r in refused.items()), refused
        # a live plan reads the refusal from the record and holds that landing
        after = plan(cluster, ns, policy)
        assert all(e["reserveIn"].get(NODEPOOL_LABEL) != NOLAUNCH for e in after["evictions"])
        held = [s for s in after["skipped"] if s["code"] == "capacity-not-added"]
        assert held and all(why in s["reason"] for s in held), after["skipped"]
    finally:
        cluster.kubectl("delete", "nodepool", NOLAUNCH, "--ignore-not-found", check=False)
        _limit(cluster, "e2e-zone-c", karpenter.cpu_limit)


def test_a_run_killed_between_the_buffer_and_the_eviction_leaves_it_for_the_next(
    cluster: Cluster, karpenter: Karpenter, namespace: str, tmp_path: Path
) -> None:
    ns = namespace
    packed(cluster, karpenter, ns)
    _at_its_limit(cluster, "e2e-zone-c")
    cluster.apply(unlaunchable_node_pool("zone-c", name=NOLAUNCH))  # the node never comes
    try:
        policy = write_policy(tmp_path, "fit", nodeFit=True)
        flags = ("--policy", str(policy), "--lease-duration", "6s", "-o", "json")
        bg = start(cluster, "run", "-n", ns, *flags, "--wave-timeout", "300s")
        bg.wait_event(lambda e: e.get("event") == "reserve.created", timeout=180)
        bg.proc.send_signal(signal.SIGKILL)
        code, _ = bg.finish()
        assert code == -signal.SIGKILL
        left = reservations(cluster, ns)
        assert len(left) == 2, left
        (name,) = {x.split("/", 1)[1] for x in left}
        assert [m["name"] for m in record(cluster)["made"]] == [name]
        # wipe the record: the next run finds the orphan by its labels alone
        cluster.kubectl("annotate", "lease", "-n", LEASE[0], LEASE[1], f"{RECORD}-")
        time.sleep(7)  # the killed run's Lease expires
        mark = audit_mark(cluster)
        again = rebalancer(cluster, "run", "-n", ns, *flags, "--wave-timeout", "5s")
        assert again.returncode == 0, explain(again)
        settle(cluster)
        events = rebalancer_requests(cluster, mark)
        removed = [
            e for e in events if e["verb"] == "delete" and e["objectRef"].get("name") == name
        ]
        assert {e["objectRef"]["resource"] for e in removed} == {"capacitybuffers", "podtemplates"}
        made = mine(events, "create", "capacitybuffers")  # the second run's own, after
        assert made and all(m["objectRef"]["name"] != name for m in made)
        assert max(at(e["stageTimestamp"]) for e in removed) < at(made[0]["stageTimestamp"])
        assert reservations(cluster, ns) == set()
    finally:
        cluster.kubectl("delete", "nodepool", NOLAUNCH, "--ignore-not-found", check=False)
        _limit(cluster, "e2e-zone-c", karpenter.cpu_limit)
