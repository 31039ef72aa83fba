"""charts/rebalancer with the descheduler chart's (v0.36) value names: each accepted name renders
what it means here, and a descheduler user's values file renders as a whole.

The expected objects are written out by hand from the Kubernetes API's field meanings (CronJob
spec.suspend, spec.timeZone, the history limits; Role namespace; PodDisruptionBudget), not
taken from the templates.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.packaging_tools import ROOT
from tests.test_chart import CHART, container_args, helm, only, pod_spec_of, render

USER_VALUES = ROOT / "tests" / "data" / "descheduler-chart-values.yaml"


def render_file(*extra: str) -> list[Any]:
    proc = helm(
        "template", "descheduler", str(CHART), "-n", "kube-system", "-f", str(USER_VALUES), *extra
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def test_a_descheduler_users_values_file_renders_what_its_names_mean() -> None:
    """tests/data/descheduler-chart-values.yaml: cmdOptions.dry-run true plans only (v is
    ignored), suspend, timeZone and the CronJob fields reach the CronJob, leaderElection names
    the Lease, its namespace and its duration, commonLabels are on every object."""
    docs = render_file()
    cronjob = only(docs, "CronJob")
    spec = cronjob["spec"]
    assert spec["schedule"] == "*/30 * * * *"
    assert spec["suspend"] is True
    assert spec["timeZone"] == "Etc/UTC"
    assert spec["successfulJobsHistoryLimit"] == 5
    assert spec["failedJobsHistoryLimit"] == 2
    assert spec["startingDeadlineSeconds"] == 200
    assert spec["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] == 600
    assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 1500
    args = container_args(cronjob)
    assert args[:2] == ["run", "--dry-run"]
    assert not [a for a in args if a.startswith(("-v", "--v"))]
    assert args[args.index("--lease-name") + 1] == "descheduler"
    assert args[args.index("--lease-duration") + 1] == "15s"
    for ignored in ("renew", "retry", "resource-lock", "leader-elect"):
        assert not [a for a in args if ignored in a], args
    pod = pod_spec_of(cronjob)
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["schedulerName"] == "default-scheduler"
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["REBALANCER_LEASE_NAMESPACE"] == {
        "name": "REBALANCER_LEASE_NAMESPACE",
        "value": "kube-system",
    }
    role = only(docs, "Role")
    assert role["metadata"]["namespace"] == "kube-system"
    named = [r for r in role["rules"] if "resourceNames" in r]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["descheduler"],
            "verbs": ["get", "update"],
        }
    ]
    for doc in docs:
        assert doc["metadata"]["labels"]["team"] == "platform", doc["kind"]


def test_cmd_options_dry_run_false_evicts_and_wins_over_dry_run() -> None:
    """cmdOptions.dry-run: false is dryRun none (no dry-run flag), whatever dryRun says; a null
    (the bare flag) is a dry run."""
    args = container_args(only(render_file("--set", "cmdOptions.dry-run=false"), "CronJob"))
    assert "--dry-run" not in args and "--server-dry-run" not in args
    both = render('json:cmdOptions={"dry-run": false}', "dryRun=client")
    assert "--dry-run" not in container_args(only(both, "CronJob"))
    bare = render('json:cmdOptions={"dry-run": null}', "dryRun=none")
    assert container_args(only(bare, "CronJob"))[:2] == ["run", "--dry-run"]


def test_the_descheduler_names_win_over_the_cronjob_ones() -> None:
    """The top-level names win over cronjob.*; unset, the cronjob.* defaults stay (3, 3, 300)."""
    spec = only(render("successfulJobsHistoryLimit=0", "timeZone=Asia/Tokyo"), "CronJob")["spec"]
    assert spec["successfulJobsHistoryLimit"] == 0
    assert spec["failedJobsHistoryLimit"] == 3
    assert spec["startingDeadlineSeconds"] == 300
    assert spec["timeZone"] == "Asia/Tokyo"
    assert "suspend" not in spec


def test_pod_disruption_budget_and_liveness_probe_of_a_deployment() -> None:
    """kind Deployment: podDisruptionBudget renders a policy/v1 PDB on the release's pods,
    livenessProbe the container's probe; kind CronJob renders neither."""
    docs = render(
        "kind=Deployment",
        "replicas=2",
        "podDisruptionBudget.enabled=true",
        "podDisruptionBudget.maxUnavailable=1",
        "livenessProbe.httpGet.path=/metrics",
        "livenessProbe.httpGet.port=metrics",
        "livenessProbe.periodSeconds=20",
    )
    pdb = only(docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "selector": {
            "matchLabels": {
                "app.kubernetes.io/name": "rebalancer",
                "app.kubernetes.io/instance": "rebalancer",
            }
        },
    }
    deployment = only(docs, "Deployment")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    (container,) = pod_spec_of(deployment)["containers"]
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/metrics", "port": "metrics"},
        "periodSeconds": 20,
    }
    assert {p["name"] for p in container["ports"]} == {"metrics"}
    cron = render("podDisruptionBudget.enabled=true", "livenessProbe.periodSeconds=20")
    assert not [d for d in cron if d["kind"] == "PodDisruptionBudget"]
    (cron_container,) = pod_spec_of(only(cron, "CronJob"))["containers"]
    assert "livenessProbe" not in cron_container


def test_pod_disruption_budget_defaults_to_min_available_one() -> None:
    docs = render("kind=Deployment", "podDisruptionBudget.enabled=true")
    assert only(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("cmdOptions.descheduling-interval=5m", "cmdOptions"),
        ("leaderElection.resourceLock=configmaps", "/leaderElection/resourceLock"),
        ("leaderElection.leaseDuration=15", "/leaderElection/leaseDuration"),
        ("suspend=yes", "/suspend"),
        ("successfulJobsHistoryLimit=-1", "/successfulJobsHistoryLimit"),
        ("podDisruptionBudget.minAvailabel=1", "minAvailabel"),
    ],
)
def test_descheduler_names_are_checked_too(value: str, path: str) -> None:
    """A descheduler option rebalancer has no meaning for, or a bad value, is refused, named."""
    proc = helm("template", "rebalancer", str(CHART), "--set", value)
    assert proc.returncode != 0
    assert path in proc.stderr, proc.stderr


# The top-level names of the descheduler chart's values.yaml (v0.36), commented-out ones
# included, copied by hand from that file.
DESCHEDULER_NAMES = (
    "kind",
    "image",
    "imagePullSecrets",
    "resources",
    "ports",
    "securityContext",
    "podSecurityContext",
    "nameOverride",
    "fullnameOverride",
    "namespaceOverride",
    "commonLabels",
    "cronJobApiVersion",
    "schedule",
    "suspend",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "timeZone",
    "deschedulingInterval",
    "replicas",
    "leaderElection",
    "command",
    "cmdOptions",
    "deschedulerPolicyAPIVersion",
    "deschedulerPolicy",
    "priorityClassName",
    "nodeSelector",
    "affinity",
    "topologySpreadConstraints",
    "tolerations",
    "rbac",
    "serviceAccount",
    "automountServiceAccountToken",
    "deploymentAnnotations",
    "cronJobAnnotations",
    "cronJobLabels",
    "jobAnnotations",
    "jobLabels",
    "podAnnotations",
    "podLabels",
    "dnsConfig",
    "livenessProbe",
    "initContainers",
    "service",
    "serviceMonitor",
    "extraServiceAccountVolumeMounts",
    "extraServiceAccountVolumes",
)
REFUSED = (  # (--set value, the name the schema's error gives)
    ("ports[0].containerPort=10258", "ports"),
    ("command[0]=/bin/descheduler", "command"),
    ("service.enabled=true", "service"),
    ("namespaceOverride=x", "namespaceOverride"),
    ("cronJobApiVersion=batch/v1", "cronJobApiVersion"),
    ("deploymentAnnotations.a=b", "deploymentAnnotations"),
    ("cronJobLabels.a=b", "cronJobLabels"),
    ("jobAnnotations.a=b", "jobAnnotations"),
    ("dnsConfig.options[0].name=ndots", "dnsConfig"),
    ("topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints"),
    ("automountServiceAccountToken=true", "automountServiceAccountToken"),
    ("serviceAccount.automountServiceAccountToken=true", "automountServiceAccountToken"),
    ("serviceMonitor.insecureSkipVerify=true", "insecureSkipVerify"),
)


def test_docs_table_names_every_descheduler_value() -> None:
    """docs/helm.md's side-by-side table has a row for every top-level name of the descheduler
    chart's values."""
    text = (ROOT / "docs" / "helm.md").read_text()
    table = text[text.index("| descheduler chart | here |") :].split("\n\n")[0]
    first_column = " ".join(row.split("|")[1] for row in table.splitlines()[2:])
    for name in DESCHEDULER_NAMES:
        assert f"`{name}" in first_column, name


@pytest.mark.parametrize(("value", "name"), REFUSED)
def test_names_the_table_says_are_refused_are_refused(value: str, name: str) -> None:
    """The names docs/helm.md says do not apply are refused by the schema, named."""
    proc = helm("template", "rebalancer", str(CHART), "--set", value)
    assert proc.returncode != 0
    assert f"'{name}' not allowed" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "value",
    [
        "deschedulerPolicy.maxNoOfPodsToEvictTotal=1",
        "deschedulerPolicyAPIVersion=descheduler/v1alpha2",
    ],
)
def test_the_descheduler_policy_is_refused_with_what_to_pass_instead(value: str) -> None:
    """A values file of the descheduler chart (its deschedulerPolicy) is refused, saying to pass
    the file policy import writes instead: this chart would otherwise take its image too."""
    proc = helm("template", "rebalancer", str(CHART), "--set", value)
    assert proc.returncode != 0
    assert "deschedulerPolicy: these are the descheduler chart's values" in proc.stderr
    assert "rebalancer policy import --output helm-values" in proc.stderr
