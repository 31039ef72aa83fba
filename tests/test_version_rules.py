"""Scheduler rules that came with newer Kubernetes releases, against hand-derived tables.

Pod-level ``spec.resources`` (on by default from 1.34): what a pod asks of a node is its
pod-level request for each resource it names, else the sum over its containers, plus overhead;
the fit of a node follows. Gang members (``spec.schedulingGroup``, the workload API of 1.36+):
never evicted alone, skipped with the reason code ``gang-member``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rebalancer.core.convert.builder import snapshot_from_objects
from rebalancer.core.evictability import EvictionContext, skip_reason
from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.model import Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from rebalancer.core.simulate import SimState, static_reason
from rebalancer.core.spread import analyze
from tests.builders import constraint, containers, node_obj, pod_obj

RS = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs-1",
       "controller": True}]  # fmt: skip
GI = 1024**3


def _pod(name: str, node: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return pod_obj(name, spec={"nodeName": node, **spec}, meta={"ownerReferences": RS, **meta})


# (case, the spec of the pod already on node-a, the candidate's spec,
#  the candidate's requests (cpu in millicores, memory in bytes), how many such pods fit on
#  node-a: 4 cpu, 16Gi, worked out by hand from the rule above)
FIT: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, int], int]] = [
    ("containers only", {"containers": containers({"cpu": "1"})},
     {"containers": containers({"cpu": "500m"}, {"cpu": "500m"})},
     {"cpu": 1000}, 3),  # (4000 - 1000) // 1000
    ("pod-level cpu wins over the containers' sum",
     {"containers": containers({"cpu": "1"})},
     {"containers": containers({"cpu": "500m"}), "resources": {"requests": {"cpu": "2"}}},
     {"cpu": 2000}, 1),  # 3000 // 2000
    ("pod-level cpu above two containers",
     {"containers": containers({"cpu": "1"})},
     {"containers": containers({"cpu": "1"}, {"cpu": "1"}),
      "resources": {"requests": {"cpu": "2500m"}}},
     {"cpu": 2500}, 1),  # 3000 // 2500
    ("pod-level memory only: cpu from the containers",
     {"containers": containers({"cpu": "1", "memory": "4Gi"})},
     {"containers": containers({"cpu": "1"}), "resources": {"requests": {"memory": "8Gi"}}},
     {"cpu": 1000, "memory": 8 * GI}, 1),  # memory (16 - 4) // 8 = 1 < cpu 3
    ("pod-level plus overhead",
     {"containers": containers({"cpu": "1"})},
     {"containers": containers({"cpu": "100m"}), "resources": {"requests": {"cpu": "1"}},
      "overhead": {"cpu": "250m"}},
     {"cpu": 1250}, 2),  # 3000 // 1250
    ("the pod already there has pod-level resources",
     {"containers": containers({"cpu": "100m"}), "resources": {"requests": {"cpu": "2"}}},
     {"containers": containers({"cpu": "1"})},
     {"cpu": 1000}, 2),  # (4000 - 2000) // 1000
    ("pod-level requests and limits",
     {"containers": containers({"cpu": "1"})},
     {"containers": containers({"cpu": "1"}),
      "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}},
     {"cpu": 3000}, 1),  # 3000 // 3000
]  # fmt: skip


@pytest.mark.parametrize(("case", "there", "candidate", "requests", "room"), FIT)
def test_pod_level_resources_in_the_fit(
    case: str,
    there: dict[str, Any],
    candidate: dict[str, Any],
    requests: dict[str, int],
    room: int,
) -> None:
    snapshot = snapshot_from_objects(
        [
            node_obj("node-a"),
            node_obj("node-b"),
            _pod("there", "node-a", there),
            _pod("candidate", "node-b", candidate),
        ]
    )
    pod = next(p for p in snapshot.pods if p.name == "candidate")
    assert {k: v for k, v in pod.requests.items() if v} == requests, case
    analysis = analyze(snapshot, Policy())
    state = SimState(snapshot, analysis, map(ViewId, range(len(analysis.views))))
    assert state.room(pod, "node-a") == room, case
    assert state.fits(pod, "node-a") is (room > 0), case


# (case, spec fields, metadata fields, policy, the skip code or None), by hand from the order
# of the rules in rebalancer.core.evictability.
GANG: list[tuple[str, dict[str, Any], dict[str, Any], Policy, str | None]] = [
    ("no group", {}, {}, Policy(), None),
    ("in a PodGroup", {"schedulingGroup": {"podGroupName": "train"}}, {}, Policy(),
     "gang-member"),
    ("an empty schedulingGroup names no group", {"schedulingGroup": {}}, {}, Policy(), None),
    ("terminating first", {"schedulingGroup": {"podGroupName": "train"}},
     {"deletionTimestamp": "2026-11-25T00:00:00Z"}, Policy(), "terminating"),
    ("a bare pod: no controller first", {"schedulingGroup": {"podGroupName": "train"}},
     {"ownerReferences": []}, Policy(), "no-controller"),
    ("a bare gang pod the policy would evict", {"schedulingGroup": {"podGroupName": "train"}},
     {"ownerReferences": []}, Policy(evict_bare_pods=True), "gang-member"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec", "meta", "policy", "code"), GANG)
def test_gang_members_are_never_evicted_alone(
    case: str, spec: dict[str, Any], meta: dict[str, Any], policy: Policy, code: str | None
) -> None:
    snapshot = snapshot_from_objects(
        [node_obj("node-a"), pod_obj("p", spec={"nodeName": "node-a", **spec},
                                     meta={"ownerReferences": RS, **meta})]
    )  # fmt: skip
    (pod,) = snapshot.pods
    reason = skip_reason(pod, EvictionContext.build(snapshot, policy, now=2e9))
    assert (reason.code if reason else None) == code, case


@pytest.mark.parametrize("max_skew", [1, 2, 3])
@pytest.mark.parametrize("gang", [False, True])
def test_a_skewed_gang_is_skipped_whole(max_skew: int, gang: bool) -> None:
    """Six pods in zone a, none in b and c. Without a PodGroup the fewest evictions that reach
    skew <= max_skew move pods to b and c (``want``, by hand); in a PodGroup none is evicted
    and each is skipped as ``gang-member``."""
    zones = {"node-a": "a", "node-b": "b", "node-c": "c"}
    nodes = [
        node_obj(n, metadata={"labels": {"kubernetes.io/hostname": n,
                                         "topology.kubernetes.io/zone": z}})
        for n, z in zones.items()
    ]  # fmt: skip
    group = {"schedulingGroup": {"podGroupName": "train"}} if gang else {}
    pods = [
        _pod(
            f"web-{i}",
            "node-a",
            {"topologySpreadConstraints": [constraint(maxSkew=max_skew)], **group},
            creationTimestamp="2026-01-01T00:00:00Z",
        )
        for i in range(6)
    ]
    planned = plan(snapshot_from_objects([*nodes, *pods]), Policy(), now=2e9)
    # From (6, 0, 0): max_skew 1 -> (2, 2, 2), 4 evictions; 2 -> (3, 2, 1), 3; 3 -> (4, 1, 1), 2.
    want = {1: 4, 2: 3, 3: 2}[max_skew]
    if gang:
        assert len(planned.evictions) == 0
        assert {s.reason.code for s in planned.skipped} == {"gang-member"}
        assert len(planned.skipped) == 6
    else:
        assert len(planned.evictions) == want
        assert all(s.reason.code != "gang-member" for s in planned.skipped)


# (case, pod spec fields, the node features it needs), by hand from kube-scheduler 1.37's
# NodeDeclaredFeatures plugin (component-helpers nodedeclaredfeatures, InferForScheduling).
RESTART_ALL = "RestartAllContainersOnContainerExits"
USERNS = "UserNamespacesHostNetworkSupport"
BIND = "VolumeBindMountOptions"
NEEDS: list[tuple[str, dict[str, Any], set[str]]] = [
    ("plain", {}, set()),
    ("restart rule RestartAllContainers",
     {"containers": [{"name": "c", "restartPolicyRules": [{"action": "RestartAllContainers"}]}]},
     {RESTART_ALL}),
    ("restart rule Restart only",
     {"containers": [{"name": "c", "restartPolicyRules": [{"action": "Restart"}]}]}, set()),
    ("init container's rule",
     {"initContainers": [{"name": "i",
                          "restartPolicyRules": [{"action": "RestartAllContainers"}]}]},
     {RESTART_ALL}),
    ("hostNetwork with hostUsers false", {"hostNetwork": True, "hostUsers": False}, {USERNS}),
    ("hostNetwork with hostUsers true", {"hostNetwork": True, "hostUsers": True}, set()),
    ("hostUsers false without hostNetwork", {"hostUsers": False}, set()),
    ("bind mount options",
     {"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                      "bindMountOptions": ["nosuid"]}]}]},
     {BIND}),
    ("empty bind mount options",
     {"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                      "bindMountOptions": []}]}]}, set()),
    ("ephemeral container's bind mount",
     {"ephemeralContainers": [{"name": "d", "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                               "bindMountOptions": ["ro"]}]}]},
     {BIND}),
    ("all three",
     {"hostNetwork": True, "hostUsers": False,
      "containers": [{"name": "c", "restartPolicyRules": [{"action": "RestartAllContainers"}],
                      "volumeMounts": [{"name": "v", "mountPath": "/v",
                                        "bindMountOptions": ["ro"]}]}]},
     {RESTART_ALL, USERNS, BIND}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec", "needs"), NEEDS)
@pytest.mark.parametrize(
    "declared", [None, [], [RESTART_ALL], [USERNS, BIND], [RESTART_ALL, USERNS, BIND, "Other"]]
)
def test_node_declared_features_filter_nodes(
    case: str, spec: dict[str, Any], needs: set[str], declared: list[str] | None
) -> None:
    """A pod fits a node only if the node declares every feature the pod needs; a node that
    declares nothing (or an older server's node) fits only pods that need none."""
    status = {} if declared is None else {"declaredFeatures": declared}
    snapshot = snapshot_from_objects(
        [node_obj("node-a", status=status), _pod("p", "node-a", {"containers": [{"name": "m"}],
                                                                   **spec})]
    )  # fmt: skip
    (pod,) = snapshot.pods
    (node,) = snapshot.nodes
    assert set(pod.required_features) == needs, case
    reason = static_reason(pod, node, ())
    assert (reason is None) is needs.issubset(declared or ()), (case, reason)


# An empty ``labelSelector: {}`` in a spread constraint, per server minor (None: a snapshot
# file, no server). kube-scheduler up to 1.37 (countPodsMatchSelector: ``if
# selector.Empty() { return 0 }``) counts no pod for it in any domain; 1.38 (``if
# labels.MatchesNothing(selector)``) counts every non-terminating pod of the namespace. A nil
# labelSelector counts no pod on any release.
ZONES = {"node-a": "a", "node-b": "b", "node-c": "c"}
MINORS = [None, 32, 35, 37, 38]


def _zone_nodes() -> list[dict[str, Any]]:
    return [
        node_obj(n, metadata={"labels": {"kubernetes.io/hostname": n,
                                         "topology.kubernetes.io/zone": z}})
        for n, z in ZONES.items()
    ]  # fmt: skip


def _spread_pod(name: str, node: str, labels: dict[str, str], fields: dict[str, Any] | None,
                namespace: str = "default") -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"nodeName": node}
    if fields is not None:
        spec["topologySpreadConstraints"] = [constraint(**fields)]
    meta = {"ownerReferences": RS, "creationTimestamp": "2026-01-01T00:00:00Z"}
    return pod_obj(name, namespace=namespace, labels=labels, spec=spec, meta=meta)


def _with_minor(objects: list[dict[str, Any]], minor: int | None) -> Snapshot:
    return dataclasses.replace(snapshot_from_objects(objects), server_minor=minor)


# (case, the web pods' constraint fields, {minor: the counts per zone of the web pods' view}),
# by hand: 3 web pods on node-a, 2 db pods (no constraint) on node-b, 1 db pod on node-c in
# namespace "other", 1 terminating db pod on node-c.
EMPTY: list[tuple[str, dict[str, Any], dict[int | None, dict[str, int]]]] = [
    ("labelSelector {}", {"labelSelector": {}},
     {None: {"a": 3, "b": 2}, 32: {}, 35: {}, 37: {}, 38: {"a": 3, "b": 2}}),
    ("labelSelector app=web", {},
     {m: {"a": 3} for m in MINORS}),
    ("no labelSelector", {"labelSelector": None},
     {m: {} for m in MINORS}),
    ("{} with matchLabelKeys the pods carry: merged, app In [web]",
     {"labelSelector": {}, "matchLabelKeys": ["app"]},
     {m: {"a": 3} for m in MINORS}),
    ("{} with matchLabelKeys the pods lack: still empty",
     {"labelSelector": {}, "matchLabelKeys": ["missing"]},
     {None: {"a": 3, "b": 2}, 32: {}, 35: {}, 37: {}, 38: {"a": 3, "b": 2}}),
    ("{} with matchExpressions []: empty too", {"labelSelector": {"matchExpressions": []}},
     {None: {"a": 3, "b": 2}, 32: {}, 35: {}, 37: {}, 38: {"a": 3, "b": 2}}),
]  # fmt: skip


def _mixed(fields: dict[str, Any]) -> list[dict[str, Any]]:
    web = [_spread_pod(f"web-{i}", "node-a", {"app": "web"}, fields) for i in range(3)]
    db = [_spread_pod(f"db-{i}", "node-b", {"app": "db"}, None) for i in range(2)]
    other = _spread_pod("db-x", "node-c", {"app": "db"}, None, namespace="other")
    leaving = _spread_pod("db-t", "node-c", {"app": "db"}, None)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    return [*_zone_nodes(), *web, *db, other, leaving]


@pytest.mark.parametrize(("case", "fields", "want"), EMPTY)
@pytest.mark.parametrize("minor", MINORS)
def test_empty_selector_counts_per_server_minor(
    case: str, fields: dict[str, Any], want: dict[int | None, dict[str, int]], minor: int | None
) -> None:
    analysis = analyze(_with_minor(_mixed(fields), minor), Policy())
    (view,) = analysis.views
    assert view.counts == want[minor], (case, minor)


# (minor, evictions), by hand: six pods in zone a with ``labelSelector: {}``, maxSkew 1. Where
# {} counts, (6, 0, 0) -> (2, 2, 2) takes 4 evictions; where it counts nothing nothing is
# skewed.
SIX: list[tuple[int | None, int]] = [(None, 4), (32, 0), (35, 0), (37, 0), (38, 4)]


@pytest.mark.parametrize(("minor", "evictions"), SIX)
def test_empty_selector_plan_per_server_minor(minor: int | None, evictions: int) -> None:
    pods = [_spread_pod(f"web-{i}", "node-a", {"app": "web"}, {"labelSelector": {}})
            for i in range(6)]  # fmt: skip
    planned = plan(_with_minor([*_zone_nodes(), *pods], minor), Policy(), now=2e9)
    assert len(planned.evictions) == evictions


@pytest.mark.parametrize("minor", MINORS)
def test_empty_selector_still_needs_its_topology_key(minor: int | None) -> None:
    """Where {} counts nothing the constraint still filters out nodes without its key (the
    scheduler's nodeLabelsMatchSpreadConstraints): a pod fits node-a and node-b but not
    node-nokey; the skew never holds it back (counts 0 + selfMatch 1 - min 0 <= maxSkew 1)
    where {} counts nothing, and where it counts, node-a (1 pod) is within 1 of node-b (0)."""
    nokey = node_obj("node-nokey")
    nodes = [node_obj(n, metadata={"labels": {"kubernetes.io/hostname": n,
                                              "topology.kubernetes.io/zone": z}})
             for n, z in (("node-a", "a"), ("node-b", "b"))]  # fmt: skip
    pod = _spread_pod("web-0", "node-a", {"app": "web"}, {"labelSelector": {}})
    snapshot = _with_minor([*nodes, nokey, pod], minor)
    analysis = analyze(snapshot, Policy())
    state = SimState(snapshot, analysis, [ViewId(v) for v in range(len(analysis.views))])
    (i,) = [PodId(k) for k, p in enumerate(snapshot.pods) if p.name == "web-0"]
    assert state.spread_ok(i, "node-b") is True
    assert state.spread_ok(i, "node-nokey") is False
