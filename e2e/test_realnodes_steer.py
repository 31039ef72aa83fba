"""Steered scale-downs on REAL nodes: the ReplicaSet controller honours rebalancer's deletion
costs with real kubelets (opt-in: --e2e).

The module's cluster is the e2e control plane plus three real nodes, one per zone (the
fixtures of e2e/test_realnodes.py; one real-node cluster per host, so this module's cluster
starts after that module's is gone). A Deployment of the test image with a hard zone
constraint (maxSkew 1) is spread 4/3/3 by the scheduler. With one node per zone, the
controller's own order (rule 5: more of the workload's pods on the same node first) would take
a scale-down by 3 entirely out of the fullest zone and leave 1/3/3, skew 2. rebalancer with
``steerScaleDown: true`` writes ``controller.kubernetes.io/pod-deletion-cost`` instead (one
pass, no eviction), the Deployment is scaled 10 -> 7 and then, after a second pass, 7 -> 3:

- the pods the ReplicaSet removed (pod objects deleted by the kubelets once the containers
  stopped) are exactly the ones with the lowest costs;
- an oracle from the pods' placement alone (zone counts, creation times; no call into
  rebalancer): every prefix of the cost order leaves the zones within maxSkew whenever some
  removal of that many pods can, the first pod is in the fullest zone, and within a zone the
  youngest pods go first;
- the zones are within maxSkew after each scale-down; rebalancer evicted nothing, and its only
  writes in the audit log are merge patches of the cost and its mark, with the pod's
  resourceVersion, answered 200.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.realnodes import RealNodeCluster
from e2e.test_live import (
    AGENT,
    audit_mark,
    evictions,
    explain,
    rebalancer,
    rebalancer_requests,
    write_policy,
)
from e2e.test_realnodes import (  # noqa: F401  # real, ns: the module's fixtures
    DELETION_COST,
    RUN_FLAGS,
    SELECTOR,
    counts,
    deployment,
    live_pods,
    ns,
    real,
    scale,
    settle,
    zone_of,
)

pytestmark = pytest.mark.e2e

MARK = "rebalancer/deletion-cost"
MAX_SKEW = 1  # deployment()'s zone constraint


def created(pod: Mapping[str, Any]) -> float:
    stamp = str(pod["metadata"]["creationTimestamp"])
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def skew(zone_counts: Mapping[str, int]) -> int:
    return max(zone_counts.values()) - min(zone_counts.values())


def best_skew_after(zone_counts: Mapping[str, int], k: int) -> int:
    """Brute force: the least skew any removal of ``k`` pods can leave (zone counts only)."""
    zones = sorted(zone_counts)
    best: int | None = None
    for left in itertools.product(*(range(zone_counts[z] + 1) for z in zones)):
        if sum(left) == sum(zone_counts.values()) - k:
            s = max(left) - min(left)
            best = s if best is None else min(best, s)
    assert best is not None
    return best


def cost_order(pods: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pods, lowest deletion cost first (every pod carries one: asserted)."""
    for p in pods:
        annotations = p["metadata"].get("annotations") or {}
        assert DELETION_COST in annotations, p["metadata"]["name"]
        assert annotations[MARK] == annotations[DELETION_COST], annotations  # rebalancer's own
    order = sorted(pods, key=lambda p: int(p["metadata"]["annotations"][DELETION_COST]))
    costs = [int(p["metadata"]["annotations"][DELETION_COST]) for p in order]
    assert len(set(costs)) == len(costs), costs  # a strict order: the controller has no choice
    return [dict(p) for p in order]


def check_order_against_placement(
    order: Sequence[Mapping[str, Any]], zones: Mapping[str, str], all_zones: Sequence[str]
) -> list[str]:
    """The oracle: from placement alone, what the cost order must satisfy. Returns the zone of
    each pod in cost order (for the report)."""
    zone_seq = [zones[p["spec"]["nodeName"]] for p in order]
    start = Counter(dict.fromkeys(all_zones, 0)) | Counter(zone_seq)
    start_counts = {z: start[z] for z in all_zones}
    fullest = max(start_counts.values())
    if list(start_counts.values()).count(fullest) == 1:
        assert start_counts[zone_seq[0]] == fullest, (start_counts, zone_seq)
    left = dict(start_counts)
    for k, zone in enumerate(zone_seq[:-1], start=1):
        left[zone] -= 1
        # whatever the next scale-down's size, it leaves the spread within maxSkew if it can
        limit = max(MAX_SKEW, best_skew_after(start_counts, k))
        assert skew(left) <= limit, (k, left, zone_seq)
    for zone in all_zones:  # within a zone (one node each), the youngest go first
        mine = [created(p) for p in order if zones[p["spec"]["nodeName"]] == zone]
        assert all(a >= b for a, b in itertools.pairwise(mine)), (zone, mine)
    return zone_seq


def steer_and_scale(
    c: RealNodeCluster, namespace: str, policy: Path, to: int
) -> tuple[list[str], list[str], dict[str, int], list[Any]]:
    """One rebalancer pass with the steer policy, then the scale-down to ``to`` replicas.
    Returns (the cost order's names, the removed names, the zone counts after, rebalancer's
    audited requests of the pass)."""
    before = live_pods(c, namespace)
    zones = zone_of(c)
    all_zones = sorted(set(zones.values()))
    mark = audit_mark(c)
    ran = rebalancer(c, "run", "-n", namespace, "--policy", str(policy), *RUN_FLAGS)
    assert ran.returncode == 0, explain(ran)
    report = json.loads(ran.stdout)
    assert report["plan"]["evictions"] == [], report["plan"]
    assert report["summary"]["evicted"] == 0, report["summary"]
    time.sleep(2)  # the batch audit backend
    sent = rebalancer_requests(c, mark, namespace)
    assert_only_cost_patches(sent, report["summary"]["costsWritten"])

    pods = live_pods(c, namespace)
    assert {p["metadata"]["name"] for p in pods} == {p["metadata"]["name"] for p in before}
    order = cost_order(pods)
    zone_seq = check_order_against_placement(order, zones, all_zones)
    names = [p["metadata"]["name"] for p in order]
    print(
        f"\ncost order ({len(order)} pods, {counts(c, namespace)}): "
        + " ".join(f"{z}:{n}" for z, n in zip(zone_seq, names, strict=True))
    )
    scale(c, namespace, to)
    after = {p["metadata"]["name"] for p in c.pods(namespace, SELECTOR)}
    removed = [n for n in names if n not in after]
    return names, removed, counts(c, namespace), sent


def writes_of(sent: Sequence[Any]) -> list[Any]:
    return [e for e in sent if e["verb"] not in ("get", "list", "watch")]


def assert_only_cost_patches(sent: Sequence[Any], expected: int) -> None:
    """rebalancer's writes: ``expected`` merge patches of the cost and its mark, no eviction."""
    writes = writes_of(sent)
    assert len(writes) == expected, [(e["verb"], e["objectRef"]) for e in writes]
    for e in writes:
        assert str(e.get("userAgent", "")).startswith(AGENT), e.get("userAgent")
        assert e["verb"] == "patch" and e["objectRef"]["resource"] == "pods", e["objectRef"]
        assert not e["objectRef"].get("subresource"), e["objectRef"]
        assert e["responseStatus"]["code"] == 200, e["responseStatus"]
        body = e["requestObject"]
        assert set(body) == {"metadata"}, body
        assert set(body["metadata"]) == {"resourceVersion", "annotations"}, body
        assert set(body["metadata"]["annotations"]) == {DELETION_COST, MARK}, body
    assert evictions(sent) == []


def test_the_replicaset_removes_the_pods_our_costs_rank_first(
    real: RealNodeCluster,  # noqa: F811  # the fixture
    ns: str,  # noqa: F811  # the fixture
    tmp_path: Path,
) -> None:
    real.apply(deployment(real, ns, 10, grace=2, env={"TERM_DELAY": "0"}))
    settle(real, ns, 10)
    start = counts(real, ns)
    assert sorted(start.values()) == [3, 3, 4], start  # the scheduler's own, hard maxSkew 1
    policy = write_policy(tmp_path, "steer", steerScaleDown=True)

    # 10 -> 7: the controller alone would remove three pods of the fullest zone (1/3/3).
    names, removed, after, sent = steer_and_scale(real, ns, policy, 7)
    assert removed == names[:3], (removed, names)
    assert skew(after) <= MAX_SKEW, after
    assert sorted(after.values()) == [2, 2, 3], after
    assert len(writes_of(sent)) == 10  # every pod got a cost: none carried one before
    print(f"10 -> 7: {start} -> {after}, removed {removed}")

    # 7 -> 3: costs rewritten where the order changed, then a scale-down by 4.
    middle = after
    names, removed, after, sent = steer_and_scale(real, ns, policy, 3)
    assert removed == names[:4], (removed, names)
    assert after == dict.fromkeys(sorted(after), 1), after
    writes = writes_of(sent)
    print(f"7 -> 3: {middle} -> {after}, removed {removed}, {len(writes)} costs rewritten")

    # The pods were removed by the ReplicaSet (their final DELETE by the kubelets), never by
    # rebalancer: over the whole test, one identity, reads and cost patches only.
    mine = rebalancer_requests(real, 0, ns)
    assert len({e["user"]["username"] for e in mine}) == 1, {e["user"]["username"] for e in mine}
    assert {e["verb"] for e in mine} <= {"get", "list", "watch", "patch"}, Counter(
        e["verb"] for e in mine
    )
    assert evictions(mine) == []
