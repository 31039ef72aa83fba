"""Converting what the disruption and rollout rules read: pod readiness and DisruptionTarget,
DRA resourceClaims, PDB status and policy, revisions, Deployments; and matchLabelKeys merged by
the API server (1.34+) counted exactly like unmerged ones."""

from __future__ import annotations

from typing import Any

import pytest

from rebalancer.cluster.read.slim import slim
from rebalancer.core.convert import (
    controller_from_api,
    deployment_from_api,
    pdb_from_api,
    pod_from_api,
    snapshot_from_objects,
)
from rebalancer.core.errors import InputError
from rebalancer.core.model import ALWAYS_ALLOW, IF_HEALTHY_BUDGET, Deployment
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from rebalancer.core.spread import analyze
from tests.builders import constraint, node_obj, pod_obj

ZONE = "topology.kubernetes.io/zone"
REVISION = "deployment.kubernetes.io/revision"


def problems(convert: Any, obj: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(InputError) as info:
        convert(obj)
    return info.value.problems


# --- pods -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "ready", "leaving"),
    [
        (None, False, False),
        ([], False, False),
        ([{"type": "Ready", "status": "True"}], True, False),
        ([{"type": "Ready", "status": "False"}], False, False),
        ([{"type": "Ready", "status": "Unknown"}], False, False),
        ([{"type": "PodScheduled", "status": "True"}], False, False),
        (
            [{"type": "Ready", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}],
            True,
            True,
        ),
        ([{"type": "DisruptionTarget", "status": "False", "reason": "x"}], False, False),
    ],
)
def test_pod_readiness_and_disruption_target(
    conditions: list[dict[str, str]] | None, ready: bool, leaving: bool
) -> None:
    """Ready and DisruptionTarget count only when their status is "True"; no Ready: not Ready."""
    status = {} if conditions is None else {"conditions": conditions}
    pod = pod_from_api(pod_obj(status=status))
    assert (pod.ready, pod.disruption_target, pod.leaving) == (ready, leaving, leaving)


def test_pod_resource_claims_are_named() -> None:
    """spec.resourceClaims become their names; a claim without a name is a problem."""
    claims = [
        {"name": "gpu", "resourceClaimTemplateName": "gpu-template"},
        {"name": "nic", "resourceClaimName": "shared-nic"},
    ]
    assert pod_from_api(pod_obj(spec={"resourceClaims": claims})).resource_claims == ("gpu", "nic")
    assert pod_from_api(pod_obj()).resource_claims == ()
    bad = problems(pod_from_api, pod_obj(spec={"resourceClaims": [{"resourceClaimName": "x"}]}))
    assert bad == (
        "Pod default/web-1: spec.resourceClaims[0].name: must be a non-empty string, got null",
    )


# --- PodDisruptionBudgets -------------------------------------------------------------------


def pdb_obj(**spec: Any) -> dict[str, Any]:
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop", "generation": 3},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}, **spec},
        "status": {"observedGeneration": 2, "disruptionsAllowed": 1},
    }


def test_pdb_generations_and_unhealthy_pod_eviction_policy() -> None:
    """generation, observedGeneration and unhealthyPodEvictionPolicy (default IfHealthyBudget)."""
    pdb = pdb_from_api(pdb_obj())
    assert (pdb.generation, pdb.observed_generation) == (3, 2)
    assert pdb.unhealthy_pod_eviction_policy == IF_HEALTHY_BUDGET
    always = pdb_from_api(pdb_obj(unhealthyPodEvictionPolicy="AlwaysAllow"))
    assert always.unhealthy_pod_eviction_policy == ALWAYS_ALLOW
    explicit = pdb_from_api(pdb_obj(unhealthyPodEvictionPolicy="IfHealthyBudget"))
    assert explicit.unhealthy_pod_eviction_policy == IF_HEALTHY_BUDGET
    bare = pdb_from_api({"kind": "PodDisruptionBudget", "metadata": {"name": "x"}, "spec": {}})
    assert (bare.generation, bare.observed_generation) == (0, 0)


def test_pdb_bad_policy_and_generation_are_problems() -> None:
    """An unknown policy value and a non-integer generation are named with their paths."""
    obj = pdb_obj(unhealthyPodEvictionPolicy="Sometimes")
    obj["metadata"]["generation"] = "3"
    assert problems(pdb_from_api, obj) == (
        'PodDisruptionBudget shop/web: metadata.generation: must be an integer, got "3"',
        "PodDisruptionBudget shop/web: spec.unhealthyPodEvictionPolicy: must be IfHealthyBudget "
        'or AlwaysAllow, got "Sometimes"',
    )


# --- revisions and Deployments ---------------------------------------------------------------


def rs_obj(revision: object) -> dict[str, Any]:
    return {
        "kind": "ReplicaSet",
        "metadata": {"name": "web-7d9", "namespace": "shop", "annotations": {REVISION: revision}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }


def test_replica_set_revision_annotation() -> None:
    """A ReplicaSet's revision annotation is a number; anything else is a problem."""
    assert controller_from_api(rs_obj("12")).revision == 12
    plain = rs_obj("1")
    del plain["metadata"]["annotations"]
    assert controller_from_api(plain).revision is None
    assert problems(controller_from_api, rs_obj("v2")) == (
        "ReplicaSet shop/web-7d9: metadata.annotations[deployment.kubernetes.io/revision]: "
        'must be a whole number, got "v2"',
    )


def test_stateful_set_revisions() -> None:
    """A StatefulSet keeps status.currentRevision and status.updateRevision."""
    sts = controller_from_api(
        {
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "data"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"currentRevision": "db-5d4f", "updateRevision": "db-6c8b"},
        }
    )
    assert (sts.current_revision, sts.update_revision, sts.revision) == ("db-5d4f", "db-6c8b", None)


def deployment_obj(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "generation": 4,
            "annotations": {REVISION: "3"},
        },
        "spec": {"replicas": 3, "paused": True, "selector": {"matchLabels": {"app": "web"}}},
        "status": {
            "observedGeneration": 4,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused"},
            ],
            **status,
        },
    }


def test_deployment_rollout_state() -> None:
    """A Deployment keeps its revision, generations, paused and Progressing condition."""
    assert deployment_from_api(deployment_obj()) == Deployment(
        namespace="shop",
        name="web",
        revision=3,
        generation=4,
        observed_generation=4,
        paused=True,
        progressing_status="Unknown",
        progressing_reason="DeploymentPaused",
    )
    fresh = deployment_from_api({"kind": "Deployment", "metadata": {"name": "new"}, "spec": {}})
    assert fresh == Deployment(namespace="default", name="new")


def test_deployments_join_the_snapshot_sorted() -> None:
    """Deployments are a kind of the snapshot (no longer ignored), sorted by namespace/name."""
    second = deployment_obj()
    second["metadata"] = {"name": "api", "namespace": "shop"}
    snapshot = snapshot_from_objects([deployment_obj(), second])
    assert [d.name for d in snapshot.deployments] == ["api", "web"]


def test_slim_keeps_what_the_disruption_rules_read() -> None:
    """A trimmed pod, StatefulSet and Deployment convert exactly like the full ones."""
    pod = pod_obj(
        spec={"resourceClaims": [{"name": "gpu"}]},
        status={
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "x"},
                {"type": "Ready", "status": "True", "lastProbeTime": None},
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"},
            ]
        },
    )
    trimmed = slim(pod)
    assert [c["type"] for c in trimmed["status"]["conditions"]] == ["Ready", "DisruptionTarget"]
    assert pod_from_api(trimmed) == pod_from_api(pod)
    sts = {
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "data"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "template": {}},
        "status": {"currentRevision": "a", "updateRevision": "b", "replicas": 3},
    }
    assert slim(sts)["status"] == {"currentRevision": "a", "updateRevision": "b"}
    assert controller_from_api(slim(sts)) == controller_from_api(sts)
    full = deployment_obj()
    full["spec"]["template"] = {"metadata": {"labels": {"app": "web"}}, "spec": {}}
    assert "template" not in slim(full)["spec"]
    assert deployment_from_api(slim(full)) == deployment_from_api(full)


# --- matchLabelKeys merged by kube-apiserver 1.34+ ---------------------------------------------


def skewed_objects(merged: set[str]) -> list[dict[str, Any]]:
    """Zones a, b, c; pods of template 7d9 at [3, 1, 0] plus one pod of template 5c1 in zone c.

    Pods named in ``merged`` carry the selector as kube-apiserver 1.34+ stores it (the key's
    ``In [value]`` already in labelSelector); the others as written (matchLabelKeys only).
    """
    nodes = [
        node_obj(f"node-{z}", metadata={"labels": {"kubernetes.io/hostname": f"node-{z}", ZONE: z}})
        for z in "abc"
    ]
    pods = []
    layout = [("a", "7d9")] * 3 + [("b", "7d9")] + [("c", "5c1")]
    for k, (zone, template) in enumerate(layout):
        name = f"web-{template}-{k}"
        selector: dict[str, Any] = {"matchLabels": {"app": "web"}}
        if name in merged:
            selector["matchExpressions"] = [
                {"key": "pod-template-hash", "operator": "In", "values": [template]}
            ]
        raw = constraint(labelSelector=selector, matchLabelKeys=["pod-template-hash"])
        pod = pod_obj(
            name,
            labels={"app": "web", "pod-template-hash": template},
            spec={"nodeName": f"node-{zone}", "topologySpreadConstraints": [raw]},
            meta={
                "creationTimestamp": f"2025-01-01T00:00:0{k}Z",
                "ownerReferences": [
                    {
                        "kind": "ReplicaSet",
                        "name": f"web-{template}",
                        "uid": template,
                        "controller": True,
                    }
                ],
            },
            status={"conditions": [{"type": "Ready", "status": "True"}]},
        )
        pods.append(pod)
    return [*nodes, *pods]


def view_counts(merged: set[str]) -> list[tuple[str, dict[str, int]]]:
    analysis = analyze(snapshot_from_objects(skewed_objects(merged)), Policy())
    return sorted(
        (str(view.spec.constraint.selector), dict(view.counts)) for view in analysis.views
    )


ALL = {"web-7d9-0", "web-7d9-1", "web-7d9-2", "web-7d9-3", "web-5c1-4"}


@pytest.mark.parametrize(
    "merged",
    [set(), ALL, {"web-7d9-0", "web-5c1-4"}],
    ids=["as-written", "merged-by-apiserver", "mixed-during-upgrade"],
)
def test_match_label_keys_merged_or_not_give_the_same_views_and_plan(merged: set[str]) -> None:
    """The key is applied once: one view per template with the same counts, the same plan."""
    assert view_counts(merged) == [
        (
            "LabelSelector(match_labels=(('app', 'web'),), match_expressions=(Requirement("
            "key='pod-template-hash', operator='In', values=('5c1',)),))",
            {"c": 1},
        ),
        (
            "LabelSelector(match_labels=(('app', 'web'),), match_expressions=(Requirement("
            "key='pod-template-hash', operator='In', values=('7d9',)),))",
            {"a": 3, "b": 1},
        ),
    ]
    result = plan(snapshot_from_objects(skewed_objects(merged)), Policy(), 1_800_000_000.0)
    # Template 7d9 at [3, 1, 0] needs one move, to zone c; template 5c1 is balanced.
    assert [(e.name, e.target_node) for e in result.evictions] == [("web-7d9-2", "node-c")]
