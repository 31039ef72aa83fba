"""deploy/overlays/steer: pod PATCH granted only there, with the admission policy beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from rebalancer.cluster.api.kubeclient import PATCHED_ANNOTATIONS
from rebalancer.cluster.api.preflight import STEER_CHECKS
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.policy import Limits, Policy
from tests.test_deploy import _rendered, rules

ROOT = Path(__file__).resolve().parent.parent
STEER = ROOT / "deploy" / "overlays" / "steer"
SKEWED = ROOT / "examples" / "skewed-cluster.yaml"
PLAN = (sys.executable, "-m", "rebalancer", "plan")


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


def test_the_overlay_policy_is_the_default_with_steering_on_and_no_eviction() -> None:
    """The overlay's policy differs from the shipped one by steerScaleDown and limits.total
    only: steering on, at most 0 evictions a run."""
    base = (ROOT / "deploy" / "base" / "policy.yaml").read_text()
    mine = (STEER / "policy.yaml").read_text()
    assert mine == base.replace("steerScaleDown: false", "steerScaleDown: true").replace(
        "  total: null\n", "  total: 0  # steering only: no run evicts a pod\n"
    )
    assert load_policy(mine, "policy.yaml") == Policy(steer_scale_down=True, limits=Limits(total=0))


def _plan(policy: Path) -> Any:
    proc = subprocess.run(
        [*PLAN, "--snapshot", str(SKEWED), "--policy", str(policy), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_overlay_policy_steers_and_evicts_nothing_where_the_base_evicts() -> None:
    """On examples/skewed-cluster.yaml the base policy plans evictions; the overlay's plans none
    and sets deletion costs instead."""
    assert _plan(ROOT / "deploy" / "base" / "policy.yaml")["evictions"]
    steer = _plan(STEER / "policy.yaml")
    assert steer["evictions"] == []
    assert steer["deletionCosts"]["enabled"] is True
    assert steer["deletionCosts"]["changes"]


def test_the_overlay_builds_on_the_base_not_on_evict() -> None:
    """deploy/overlays/steer takes the base, not deploy/overlays/evict: turning steering on
    does not bring the evict overlay with it."""
    kustomization = yaml.safe_load((STEER / "kustomization.yaml").read_text())
    assert "../../base" in kustomization["resources"]
    assert not [r for r in kustomization["resources"] if "evict" in r]


def test_the_overlay_renders_steering_only() -> None:
    """`kubectl kustomize` of the overlay: the CronJob runs without --dry-run (a dry run would
    write no cost), its ConfigMap is the steer policy with limits.total 0, and the admission
    policy ships beside it."""
    docs = list(_rendered(STEER))
    kinds = [d["kind"] for d in docs]
    assert "ValidatingAdmissionPolicy" in kinds and "ValidatingAdmissionPolicyBinding" in kinds
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    policy = load_policy(configmap["data"]["policy.yaml"], "configmap")
    assert policy.steer_scale_down is True
    assert policy.limits.total == 0
    cronjob = next(d for d in docs if d["kind"] == "CronJob")
    args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run"
    assert "--dry-run" not in args and "--server-dry-run" not in args
