"""charts/rebalancer with policy.steerScaleDown: the steer overlay's objects, and only then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rebalancer.cluster.read.policyfile import load_policy
from tests.test_chart import (
    FORBIDDEN_VERBS,
    OWN_DELETES,
    container_args,
    only,
    rbac_rules,
    render,
)

STEER = Path(__file__).resolve().parent.parent / "deploy" / "overlays" / "steer"
ADMISSION = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def _overlay(kind: str) -> Any:
    docs = [d for d in yaml.safe_load_all((STEER / "admission-policy.yaml").read_text()) if d]
    return next(d for d in docs if d["kind"] == kind)


def test_steering_off_renders_no_pod_write_and_no_admission_policy() -> None:
    """By default nothing can PATCH pods and no admission policy is installed."""
    docs = render()
    assert not [d for d in docs if d["kind"] in ADMISSION]
    for _kind, _name, rule in rbac_rules(docs):
        if "pods" in rule["resources"]:
            assert "patch" not in rule["verbs"]


def test_steering_on_grants_pod_patch_fenced_by_the_overlays_admission_policy() -> None:
    """policy.steerScaleDown=true: the policy says so, a ClusterRole adds PATCH of pods (no
    other write), and the admission policy is the overlay's, naming this release's
    ServiceAccount."""
    docs = render("policy.steerScaleDown=true", "serviceAccount.name=sa1", namespace="ops")
    policy = load_policy(only(docs, "ConfigMap")["data"]["policy.yaml"], "chart")
    assert policy.steer_scale_down is True
    patching = [r for _k, _n, r in rbac_rules(docs) if "patch" in r["verbs"]]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]} in patching
    for _kind, _name, rule in rbac_rules(docs):
        forbidden = FORBIDDEN_VERBS & set(rule["verbs"])
        if (rule["apiGroups"], rule["resources"]) in OWN_DELETES:
            forbidden -= {"delete"}  # its own requests and reservations (spec §5.10, §5.11)
        assert not forbidden, rule
    vap = only(docs, "ValidatingAdmissionPolicy")
    mine = _overlay("ValidatingAdmissionPolicy")
    (condition,) = vap["spec"]["matchConditions"]
    assert condition["expression"] == (
        'request.userInfo.username == "system:serviceaccount:ops:sa1"'
    )
    for key in ("failurePolicy", "matchConstraints", "variables", "validations"):
        assert vap["spec"][key] == mine["spec"][key], key
    binding = only(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == vap["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    steer_binding = next(
        d
        for d in docs
        if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("-steer")
    )
    assert steer_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "sa1", "namespace": "ops"}
    ]


def test_steer_only_steers_and_evicts_nothing() -> None:
    """steerOnly=true: the policy has steerScaleDown true and limits.total 0 (the rest as set),
    the run has no dry-run flag (a dry run writes no cost) even with dryRun client, and the
    PATCH of pods and the admission policy are installed."""
    docs = render("steerOnly=true", "dryRun=client", "policy.limits.perNode=2")
    policy = load_policy(only(docs, "ConfigMap")["data"]["policy.yaml"], "chart")
    assert policy.steer_scale_down is True
    assert (policy.limits.total, policy.limits.per_node) == (0, 2)
    args = container_args(only(docs, "CronJob"))
    assert args[0] == "run"
    assert "--dry-run" not in args and "--server-dry-run" not in args
    patching = [r for _k, _n, r in rbac_rules(docs) if "patch" in r["verbs"]]
    assert patching == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    assert {d["kind"] for d in docs} >= set(ADMISSION)


def test_steer_only_policy_is_the_steer_overlays() -> None:
    """The chart's steerOnly policy is the one deploy/overlays/steer ships."""
    docs = render("steerOnly=true")
    chart = load_policy(only(docs, "ConfigMap")["data"]["policy.yaml"], "chart")
    assert chart == load_policy((STEER / "policy.yaml").read_text(), "overlay")
