"""deploy/overlays/steer: pod PATCH granted only there, with the admission policy beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rebalancer.cluster.api.kubeclient import PATCHED_ANNOTATIONS
from rebalancer.cluster.api.preflight import STEER_CHECKS
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.policy import Policy
from tests.test_deploy import _rendered, rules

ROOT = Path(__file__).resolve().parent.parent
STEER = ROOT / "deploy" / "overlays" / "steer"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((STEER / name).read_text()) if d]


def test_pods_are_patched_only_where_steering_is_on() -> None:
    """The base ClusterRole cannot write pods; the steer overlay adds PATCH of pods, nothing
    else, bound to rebalancer's ServiceAccount; run's pre-flight checks exactly that."""
    assert not {"patch", "update", "delete", "create"} & rules()[("", "pods")]
    (role,) = _docs("clusterrole-steer.yaml")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    (binding,) = _docs("clusterrolebinding-steer.yaml")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rebalancer", "namespace": "rebalancer"}
    ]
    assert [(c.verb, c.resource, c.subresource) for c in STEER_CHECKS] == [("patch", "pods", "")]


def test_the_admission_policy_binds_the_service_account_to_the_cost_annotations() -> None:
    """A ValidatingAdmissionPolicy (v1, Deny) matches pod UPDATEs by rebalancer's
    ServiceAccount, lets through the two keys the client may send, and checks spec and labels."""
    policy, binding = _docs("admission-policy.yaml")
    assert (policy["apiVersion"], policy["kind"]) == (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
    )
    assert binding["kind"] == "ValidatingAdmissionPolicyBinding"
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}
    ]
    (condition,) = spec["matchConditions"]
    assert "system:serviceaccount:rebalancer:rebalancer" in condition["expression"]
    allowed = next(v for v in spec["variables"] if v["name"] == "allowed")["expression"]
    assert {k.strip(" '") for k in allowed.strip("[]").split(",")} == PATCHED_ANNOTATIONS
    checks = " ".join(v["expression"] for v in spec["validations"])
    for part in ("object.spec == oldObject.spec", "labels", "ownerReferences", "finalizers"):
        assert part in checks


def test_the_overlay_policy_is_the_default_with_steering_on() -> None:
    """The overlay's policy differs from the shipped one by steerScaleDown only."""
    base = (ROOT / "deploy" / "base" / "policy.yaml").read_text()
    mine = (STEER / "policy.yaml").read_text()
    assert mine == base.replace("steerScaleDown: false", "steerScaleDown: true")
    assert load_policy(mine, "policy.yaml") == Policy(steer_scale_down=True)


def test_the_overlay_renders_evictions_on_with_the_steer_policy() -> None:
    """`kubectl kustomize` of the overlay: the CronJob evicts (no --dry-run), its ConfigMap is
    the steer policy, and the admission policy ships beside it."""
    docs = list(_rendered(STEER))
    kinds = [d["kind"] for d in docs]
    assert "ValidatingAdmissionPolicy" in kinds and "ValidatingAdmissionPolicyBinding" in kinds
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert "steerScaleDown: true" in configmap["data"]["policy.yaml"]
    cronjob = next(d for d in docs if d["kind"] == "CronJob")
    args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--dry-run" not in args
