"""charts/rebalancer: the objects of deploy/, rendered by the real helm (scripts/build-tools.sh).

The oracle is deploy/ itself: with release name and namespace ``rebalancer`` the chart must give
the same RBAC rules, the same CronJob (or, in Deployment mode, the same Deployment and Service as
deploy/overlays/deployment) and the same policy, apart from the labels Helm adds.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cli.main import build_parser
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.policy import Policy, PriorityThreshold
from tests.packaging_tools import ROOT, run, tool

CHART = ROOT / "charts" / "rebalancer"
BASE = ROOT / "deploy" / "base"
OVERLAY = ROOT / "deploy" / "overlays" / "deployment"
POLICY_PATH = "/etc/rebalancer/policy.yaml"
FORBIDDEN_VERBS = frozenset({"delete", "deletecollection", "*", "escalate", "bind", "impersonate"})


def helm(*args: str) -> Any:
    return run(tool("helm"), *args)


def render(*values: str, release: str = "rebalancer", namespace: str = "rebalancer") -> list[Any]:
    """``helm template`` with ``--set``-style values; every document, parsed."""
    argv: list[str] = []
    for value in values:
        argv += [
            "--set-json" if value.startswith("json:") else "--set",
            value.removeprefix("json:"),
        ]
    proc = helm("template", release, str(CHART), "--namespace", namespace, *argv)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def only(docs: list[Any], kind: str) -> Any:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects rendered"
    return found[0]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def pod_spec_of(workload: Any) -> Any:
    if workload["kind"] == "CronJob":
        return workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return workload["spec"]["template"]["spec"]


def without_pod_metadata(workload: Any) -> Any:
    """The workload's spec without its pod template's labels and annotations (and selector)."""
    spec = copy.deepcopy(workload["spec"])
    template = (
        spec["jobTemplate"]["spec"]["template"] if "jobTemplate" in spec else spec["template"]
    )
    template.pop("metadata", None)
    spec.pop("selector", None)
    return spec


def container_args(workload: Any) -> list[str]:
    (container,) = pod_spec_of(workload)["containers"]
    return list(container["args"])


def rbac_rules(docs: list[Any]) -> list[tuple[str, str, Any]]:
    """(kind, name, rule) for every rule of every Role and ClusterRole rendered."""
    return [
        (d["kind"], d["metadata"]["name"], rule)
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
        for rule in d["rules"]
    ]


OWN_DELETES = (
    (["lifecycle.k8s.io"], ["evictionrequests"]),
    (["autoscaling.x-k8s.io"], ["capacitybuffers"]),
    ([""], ["podtemplates"]),
)
"""The rules that may grant delete: of rebalancer's own objects only (the kubeclient lets no
other name through)."""

VARIANTS = [
    [],
    ["mode=deployment"],
    ["dryRun=none"],
    ["dryRun=server", "output=json"],
    ["mode=deployment", "dryRun=none", "lease.enabled=false"],
    ["rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=existing"],
]


@pytest.mark.parametrize("values", VARIANTS, ids=lambda v: ",".join(v) or "defaults")
def test_helm_lint_is_clean(values: list[str]) -> None:
    """`helm lint --strict` passes with the defaults and with each mode and option."""
    argv = [a for v in values for a in ("--set", v)]
    proc = helm("lint", "--strict", str(CHART), *argv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


def test_default_render_is_deploy_base() -> None:
    """The defaults render deploy/base: same ClusterRole rules, binding, CronJob and policy."""
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ConfigMap",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "CronJob",
        ]
    )
    role = only(docs, "ClusterRole")
    assert role["rules"] == load(BASE / "clusterrole.yaml")["rules"]
    binding = only(docs, "ClusterRoleBinding")
    base_binding = load(BASE / "clusterrolebinding.yaml")
    assert binding["roleRef"] == base_binding["roleRef"]
    assert binding["subjects"] == base_binding["subjects"]
    assert only(docs, "ServiceAccount")["metadata"]["name"] == "rebalancer"

    cronjob = only(docs, "CronJob")
    base_cronjob = load(BASE / "cronjob.yaml")
    pod, base_pod = pod_spec_of(cronjob), pod_spec_of(base_cronjob)
    assert pod["securityContext"] == base_pod["securityContext"]
    assert pod["containers"][0]["securityContext"] == base_pod["containers"][0]["securityContext"]
    assert pod["containers"][0]["resources"] == base_pod["containers"][0]["resources"]
    assert container_args(cronjob) == container_args(base_cronjob)
    assert without_pod_metadata(cronjob) == without_pod_metadata(base_cronjob)
    labels = cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "rebalancer"


def _grants(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_only_deployment_mode_grants_watch() -> None:
    """mode=deployment (``run --interval``, which WATCHes between runs) grants what the base
    ClusterRole and the deployment overlay's watch ClusterRole grant together; the CronJob mode
    grants watch nowhere and events only create."""
    cronjob = _grants(only(render(), "ClusterRole")["rules"])
    assert all("watch" not in verbs for verbs in cronjob.values())
    assert cronjob[("", "events")] == {"create"}
    expected = _grants(load(BASE / "clusterrole.yaml")["rules"])
    watch_role = next(yaml.safe_load_all((OVERLAY / "clusterrole-watch.yaml").read_text()))
    for key, verbs in _grants(watch_role["rules"]).items():
        expected[key] = expected[key] | verbs
    assert _grants(only(render("mode=deployment"), "ClusterRole")["rules"]) == expected


def test_deployment_mode_is_the_deployment_overlay() -> None:
    """mode=deployment renders deploy/overlays/deployment's Deployment and Service, no CronJob."""
    docs = render("mode=deployment")
    assert not [d for d in docs if d["kind"] == "CronJob"]
    deployment = only(docs, "Deployment")
    overlay = load(OVERLAY / "deployment.yaml")
    pod, overlay_pod = pod_spec_of(deployment), pod_spec_of(overlay)
    assert pod["securityContext"] == overlay_pod["securityContext"]
    assert (
        pod["containers"][0]["securityContext"] == overlay_pod["containers"][0]["securityContext"]
    )
    assert without_pod_metadata(deployment) == without_pod_metadata(overlay)
    parsed = build_parser().parse_args(container_args(deployment))
    assert (parsed.interval, parsed.dry_run) == ("10m", True)

    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    service = only(docs, "Service")
    assert service["spec"]["ports"] == load(OVERLAY / "service.yaml")["spec"]["ports"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert not [
        d
        for d in render("mode=deployment", "deployment.service.enabled=false")
        if d["kind"] == "Service"
    ]


def test_policy_configmap_is_the_default_policy() -> None:
    """The ConfigMap holds the policy of deploy/base/policy.yaml; the pod mounts that ConfigMap."""
    docs = render()
    configmap = only(docs, "ConfigMap")
    text = configmap["data"]["policy.yaml"]
    assert load_policy(text, "chart") == load_policy(
        (BASE / "policy.yaml").read_text(), "deploy/base/policy.yaml"
    )
    assert load_policy(text, "chart") == Policy()
    (volume,) = pod_spec_of(only(docs, "CronJob"))["volumes"]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"] == "rebalancer-policy"
    (mount,) = pod_spec_of(only(docs, "CronJob"))["containers"][0]["volumeMounts"]
    assert f"{mount['mountPath']}/policy.yaml" == POLICY_PATH


def test_policy_values_flow_into_the_configmap() -> None:
    """Policy values set at install time are what the rebalancer loads."""
    docs = render(
        "policy.nodeFit=false",
        "policy.limits.total=5",
        "policy.namespaces.include={shop}",  # alone: no default exclude merged in
        "policy.minPodAge=90s",
    )
    policy = load_policy(only(docs, "ConfigMap")["data"]["policy.yaml"], "chart")
    assert policy.node_fit is False
    assert policy.limits.total == 5
    assert policy.namespaces_include == ("shop",)
    assert policy.namespaces_exclude == ()
    assert policy.min_pod_age_seconds == 90
    named = render("policy.priorityThreshold.name=high")  # alone: no default value merged in
    threshold = load_policy(only(named, "ConfigMap")["data"]["policy.yaml"], "chart")
    assert threshold.priority_threshold == PriorityThreshold(value=None, name="high")


def test_policy_change_rolls_the_pod() -> None:
    """The pod template carries a checksum of the policy, as kustomize's hashed name does."""

    def checksum(*values: str) -> str:
        deployment = only(render("mode=deployment", *values), "Deployment")
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/policy"]
        return value

    assert checksum() == checksum()
    assert checksum() != checksum("policy.nodeFit=false")


@pytest.mark.parametrize(
    ("dry_run", "flag"), [("client", "--dry-run"), ("server", "--server-dry-run"), ("none", None)]
)
def test_dry_run_value_maps_to_the_run_flags(dry_run: str, flag: str | None) -> None:
    """dryRun=client|server|none gives run --dry-run, --server-dry-run, or neither (evict)."""
    base_args = [a for a in container_args(load(BASE / "cronjob.yaml")) if a != "--dry-run"]
    args = container_args(only(render(f"dryRun={dry_run}"), "CronJob"))
    expected = list(base_args)
    if flag is not None:
        expected.insert(1, flag)
    assert args == expected
    parsed = build_parser().parse_args(args)
    assert parsed.dry_run is (dry_run == "client")
    assert parsed.server_dry_run is (dry_run == "server")


def test_output_and_extra_args_reach_the_command() -> None:
    """output and extraArgs are passed to `rebalancer run`, which accepts them."""
    args = container_args(
        only(render("output=json", 'json:extraArgs=["--max-waves", "3"]'), "CronJob")
    )
    parsed = build_parser().parse_args(args)
    assert (parsed.output, parsed.max_waves, parsed.dry_run) == ("json", 3, True)


def test_lease_role_is_limited_to_the_release_namespace_and_lease() -> None:
    """The optional Role allows create on leases and get/update on the one Lease only."""
    docs = render(release="prod", namespace="ops")
    role = only(docs, "Role")
    assert role["metadata"]["namespace"] == "ops"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["rebalancer"],
            "verbs": ["get", "update"],
        },
    ]
    binding = only(docs, "RoleBinding")
    assert binding["metadata"]["namespace"] == "ops"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prod-rebalancer", "namespace": "ops"}
    ]
    named = only(render("lease.name=spread-lock"), "Role")
    assert named["rules"][1]["resourceNames"] == ["spread-lock"]
    assert not [d for d in render("lease.enabled=false") if d["kind"] in ("Role", "RoleBinding")]


@pytest.mark.parametrize("values", VARIANTS, ids=lambda v: ",".join(v) or "defaults")
def test_no_rule_can_delete_or_escalate(values: list[str]) -> None:
    """No Role or ClusterRole of any variant grants delete, wildcards or escalation; pods are
    only read, and the only write near pods is creating evictions."""
    for kind, name, rule in rbac_rules(render(*values)):
        where = f"{kind} {name}: {rule}"
        # the deletes: of rebalancer's own EvictionRequests (withdrawn once followed) and
        # capacity reservations (removed once the replacement is placed); the kubeclient lets
        # only their names through
        own = (rule["apiGroups"], rule["resources"]) in OWN_DELETES
        assert not (FORBIDDEN_VERBS - ({"delete"} if own else set())) & set(rule["verbs"]), where
        assert "*" not in rule["apiGroups"] and "*" not in rule["resources"], where
        for resource in rule["resources"]:
            if resource == "pods":
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, where
            elif resource.startswith("pods/"):
                assert (resource, rule["verbs"]) == ("pods/eviction", ["create"]), where


@pytest.mark.parametrize(
    ("api", "granted"), [("auto", True), ("evictionRequest", True), ("eviction", False)]
)
def test_eviction_requests_are_granted_only_where_the_policy_allows_them(
    api: str, granted: bool
) -> None:
    """create/get/delete of evictionrequests and list of evictions are in the ClusterRole
    exactly when policy.evictionAPI is not eviction."""
    rules = [r for _, _, r in rbac_rules(render(f"policy.evictionAPI={api}"))]
    lifecycle = [r for r in rules if r["apiGroups"] == ["lifecycle.k8s.io"]]
    expected = [
        {
            "apiGroups": ["lifecycle.k8s.io"],
            "resources": ["evictionrequests"],
            "verbs": ["create", "get", "delete"],
        },
        {"apiGroups": ["lifecycle.k8s.io"], "resources": ["evictions"], "verbs": ["list"]},
    ]
    assert lifecycle == (expected if granted else [])


@pytest.mark.parametrize(("mode", "granted"), [("auto", True), ("never", False)])
def test_capacity_reservations_are_granted_only_where_the_policy_allows_them(
    mode: str, granted: bool
) -> None:
    """create/get/list/delete of capacitybuffers and create/list/delete of podtemplates are in
    the ClusterRole exactly when policy.reserveCapacity is not never, never watched (the
    Deployment mode included), and the policy the chart ships says the same."""
    for extra in ([], ["mode=deployment"]):
        docs = render(f"policy.reserveCapacity={mode}", *extra)
        grants = _grants(only(docs, "ClusterRole")["rules"])
        found = {k: v for k, v in grants.items() if k[1] in ("capacitybuffers", "podtemplates")}
        expected = {
            ("autoscaling.x-k8s.io", "capacitybuffers"): {"create", "get", "list", "delete"},
            ("", "podtemplates"): {"create", "list", "delete"},
        }
        assert found == (expected if granted else {}), extra
        policy = load_policy(only(docs, "ConfigMap")["data"]["policy.yaml"], "chart")
        assert policy.reserve_capacity == mode


def test_release_name_and_namespace_are_used_everywhere() -> None:
    """Another release name and namespace name every object and reference consistently."""
    docs = render(release="prod", namespace="ops")
    names = {d["kind"]: d["metadata"]["name"] for d in docs}
    assert names["ClusterRole"] == names["ClusterRoleBinding"] == "prod-rebalancer"
    assert names["ConfigMap"] == "prod-rebalancer-policy"
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == "ops", doc["kind"]
    pod = pod_spec_of(only(docs, "CronJob"))
    assert pod["serviceAccountName"] == names["ServiceAccount"] == "prod-rebalancer"
    assert pod["volumes"][0]["configMap"]["name"] == "prod-rebalancer-policy"
    assert only(docs, "ClusterRoleBinding")["subjects"][0]["namespace"] == "ops"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("mode=daemonset", "/mode"),
        ("dryRun=maybe", "/dryRun"),
        ("kind=Job", "/kind"),
        ("replicas=0", "/replicas"),
        ("policy.minPodAge=100us", "/policy/minPodAge"),
        ("policy.defaultConstraints[0].maxSkew=1", "topologyKey"),
        (
            "policy.defaultConstraints[0].maxSkew=0,policy.defaultConstraints[0].topologyKey=z",
            "maxSkew",
        ),
        ("policy.schedule.windows[0].duration=1h", "cron"),
        ("nameOverride=Bad_Name", "/nameOverride"),
        ("pushgateway.url=pg:9091", "/pushgateway/url"),
        ("output=html5", "/output"),
        ("deployment.interval=ten", "/deployment/interval"),
        ("policy.minPodAge=5 minutes", "/policy/minPodAge"),
        ("policy.nodefit=false", "nodefit"),
        ("policy.gracePeriodSeconds=0", "/policy/gracePeriodSeconds"),
        ("lease.name=Not_A_Name", "/lease/name"),
        ("imagePullPolicy=Always", "imagePullPolicy"),
        (
            "policy.namespaces.include={a},policy.namespaces.exclude={b}",
            "/policy/namespaces/exclude",
        ),
        ("policy.priorityThreshold.value=5,policy.priorityThreshold.name=x", "/priorityThreshold"),
    ],
)
def test_schema_rejects_bad_values_naming_them(value: str, path: str) -> None:
    """values.schema.json refuses a bad value before anything renders, naming where it is."""
    proc = helm("template", "rebalancer", str(CHART), "--set", value)
    assert proc.returncode != 0
    assert path in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_notes_tell_how_to_read_the_plan() -> None:
    """NOTES.txt says dry run, how to start a run and read its plan, and how to evict."""
    text = (CHART / "templates" / "NOTES.txt").read_text()
    for needle in (
        "create job --from=cronjob/",
        "logs job/",
        "rebalancer plan",
        "dryRun=none",
        "DRY RUN",
    ):
        assert needle in text, needle


def test_the_run_holds_the_lease_the_role_names() -> None:
    """The pod passes its namespace as the Lease's, and a renamed Lease by --lease-name."""
    docs = render("lease.name=spread-lock", release="prod", namespace="ops")
    cronjob = only(docs, "CronJob")
    args = container_args(cronjob)
    assert args[args.index("--lease-name") + 1] == "spread-lock"
    (container,) = pod_spec_of(cronjob)["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["REBALANCER_LEASE_NAMESPACE"]["valueFrom"]["fieldRef"] == {
        "fieldPath": "metadata.namespace"
    }
    assert "--lease-name" not in container_args(only(render(), "CronJob"))


# -- the descheduler chart's value names ------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "old"),
    [
        (["kind=Deployment"], ["mode=deployment"]),
        (["kind=CronJob"], ["mode=cronjob"]),
        (["schedule=0 * * * *"], ["cronjob.schedule=0 * * * *"]),
        (
            ["kind=Deployment", "deschedulingInterval=5m"],
            ["mode=deployment", "deployment.interval=5m"],
        ),
        (["dryRun=true"], ["dryRun=client"]),
        (["dryRun=false"], ["dryRun=none"]),
    ],
    ids=",".join,
)
def test_descheduler_names_render_as_the_old_ones(new: list[str], old: list[str]) -> None:
    """kind, schedule, deschedulingInterval and dryRun true/false render exactly what the old
    names (still accepted) render."""
    assert render(*new) == render(*old)


def test_schedule_and_kind_reach_the_objects() -> None:
    """schedule sets the CronJob's; kind Deployment renders a Deployment and no CronJob; an old
    name set explicitly wins over the new one's default."""
    assert only(render("schedule=5 4 * * *"), "CronJob")["spec"]["schedule"] == "5 4 * * *"
    docs = render("kind=Deployment", "deschedulingInterval=3m")
    assert not [d for d in docs if d["kind"] == "CronJob"]
    parsed = build_parser().parse_args(container_args(only(docs, "Deployment")))
    assert parsed.interval == "3m"
    assert only(render("cronjob.schedule=1 1 * * *"), "CronJob")["spec"]["schedule"] == "1 1 * * *"


def test_name_overrides() -> None:
    """nameOverride replaces the chart's name in names and the name label; fullnameOverride
    the whole name."""
    docs = render("nameOverride=spread", release="prod")
    assert only(docs, "ClusterRole")["metadata"]["name"] == "prod-spread"
    assert only(docs, "ConfigMap")["metadata"]["name"] == "prod-spread-policy"
    labels = only(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "spread"
    full = render("fullnameOverride=spreader", release="prod")
    names = {d["metadata"]["name"] for d in full}
    assert names == {"spreader", "spreader-policy", "spreader-lease"}
    pod = pod_spec_of(only(full, "CronJob"))
    assert pod["serviceAccountName"] == "spreader"


def test_replicas_use_the_lease_as_leader_election() -> None:
    """replicas sets the Deployment's; more than one without the Lease is refused, saying why."""
    deployment = only(render("kind=Deployment", "replicas=3"), "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert only(render("kind=Deployment"), "Deployment")["spec"]["replicas"] == 1
    proc = helm(
        "template", "r", str(CHART), "--set", "kind=Deployment,replicas=2,lease.enabled=false"
    )
    assert proc.returncode != 0
    assert "replicas > 1 needs lease.enabled" in proc.stderr


@pytest.mark.parametrize("monitor", ["ServiceMonitor", "PodMonitor"])
def test_monitors_scrape_the_metrics_port(monitor: str) -> None:
    """serviceMonitor / podMonitor render a Prometheus Operator object selecting the metrics
    Service (or the pods) on port metrics; with kind CronJob they are refused, saying why."""
    key = monitor[0].lower() + monitor[1:]
    docs = render(
        "kind=Deployment",
        f"{key}.enabled=true",
        f"{key}.interval=30s",
        f"{key}.additionalLabels.release=prom",
    )
    (obj,) = [d for d in docs if d["kind"] == monitor]
    assert obj["apiVersion"] == "monitoring.coreos.com/v1"
    assert obj["metadata"]["labels"]["release"] == "prom"
    endpoints = obj["spec"]["endpoints" if monitor == "ServiceMonitor" else "podMetricsEndpoints"]
    assert endpoints == [
        {"port": "metrics", "path": "/metrics", "honorLabels": True, "interval": "30s"}
    ]
    selector = obj["spec"]["selector"]["matchLabels"]
    target = only(docs, "Service" if monitor == "ServiceMonitor" else "Deployment")
    target_labels = (
        target["metadata"]["labels"]
        if monitor == "ServiceMonitor"
        else target["spec"]["template"]["metadata"]["labels"]
    )
    assert selector.items() <= target_labels.items()
    if monitor == "ServiceMonitor":
        assert [p["name"] for p in target["spec"]["ports"]] == ["metrics"]
    assert not [d for d in render("kind=Deployment") if d["kind"] == monitor]
    proc = helm("template", "r", str(CHART), "--set", f"{key}.enabled=true")
    assert proc.returncode != 0
    assert f"{monitor} needs kind: Deployment" in proc.stderr


@pytest.mark.parametrize("kind", ["CronJob", "Deployment"])
def test_pushgateway_url_reaches_the_run(kind: str) -> None:
    """pushgateway.url becomes `run --pushgateway URL`; empty, no flag."""
    docs = render(f"kind={kind}", "pushgateway.url=http://pushgateway.monitoring:9091")
    args = container_args(only(docs, kind))
    parsed = build_parser().parse_args(args)
    assert parsed.pushgateway == "http://pushgateway.monitoring:9091"
    assert "--pushgateway" not in container_args(only(render(f"kind={kind}"), kind))


def test_chart_repository_layout(tmp_path: Path) -> None:
    """`helm package` and `helm repo index` give a chart repository: index.yaml listing the
    chart's version with the archive's digest, and the archive installs (template) as the
    directory does."""
    import hashlib  # noqa: PLC0415

    proc = helm("package", str(CHART), "--destination", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    chart = load(CHART / "Chart.yaml")
    archive = tmp_path / f"rebalancer-{chart['version']}.tgz"
    assert archive.is_file()
    proc = helm("repo", "index", str(tmp_path), "--url", "https://charts.example.invalid")
    assert proc.returncode == 0, proc.stderr
    index = load(tmp_path / "index.yaml")
    (entry,) = index["entries"]["rebalancer"]
    assert entry["version"] == chart["version"]
    assert entry["appVersion"] == chart["appVersion"]
    assert entry["urls"] == [f"https://charts.example.invalid/{archive.name}"]
    assert entry["digest"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    packaged = helm("template", "rebalancer", str(archive), "--namespace", "rebalancer")
    assert packaged.returncode == 0, packaged.stderr
    assert [d for d in yaml.safe_load_all(packaged.stdout) if d] == render()


def _rule_windows(docs: list[Any]) -> dict[str, tuple[str | None, str]]:
    """alert -> (its `for`, its expression) in the one PrometheusRule rendered."""
    (group,) = only(docs, "PrometheusRule")["spec"]["groups"]
    return {r["alert"]: (r.get("for"), r["expr"]) for r in group["rules"]}


def _template(*values: str) -> Any:
    """``helm template`` with ``--set`` values, not checked: for what the chart refuses."""
    argv = [a for value in values for a in ("--set", value)]
    return helm("template", "rebalancer", str(CHART), "--namespace", "rebalancer", *argv)


def test_prometheus_rule_carries_the_alerts_of_deploy_monitoring() -> None:
    """prometheusRule.enabled renders, with the chart's defaults, the rule groups of
    deploy/monitoring for the kind: rebalancer.rules.yaml (Deployment, every 10m) and
    rebalancer-cronjob.rules.yaml (CronJob, every 15m)."""
    monitoring = ROOT / "deploy" / "monitoring"
    assert not [d for d in render() if d["kind"] == "PrometheusRule"]
    for kind, file in (
        ("Deployment", "rebalancer.rules.yaml"),
        ("CronJob", "rebalancer-cronjob.rules.yaml"),
    ):
        docs = render(
            f"kind={kind}",
            "prometheusRule.enabled=true",
            "prometheusRule.additionalLabels.a=b",
            "pushgateway.url=http://pushgateway.monitoring:9091",
        )
        rule = only(docs, "PrometheusRule")
        assert rule["apiVersion"] == "monitoring.coreos.com/v1"
        assert rule["metadata"]["labels"]["a"] == "b"
        assert rule["spec"]["groups"] == load(monitoring / file)["groups"], kind


@pytest.mark.parametrize("values", [["kind=CronJob"], ["mode=cronjob", "kind=Deployment"]])
def test_prometheus_rule_of_a_cronjob_needs_a_pushgateway(values: list[str]) -> None:
    """A CronJob's runs end before a scrape: without pushgateway.url the alerts would read
    nothing, so the chart refuses to render them, naming what is missing."""
    proc = _template(*values, "prometheusRule.enabled=true")
    assert proc.returncode != 0
    assert "prometheusRule.enabled with kind CronJob needs pushgateway.url" in proc.stderr


# Hand-worked: the run period P of each schedule, and the windows made of it: no success for
# `for` P (the last success more than P ago), skew and PDB refusals for 2.5 P.
SCHEDULE_WINDOWS = [
    ("*/15 * * * *", "15m", "37m30s"),
    ("*/5 * * * *", "5m", "12m30s"),
    ("*/30 * * * *", "30m", "1h15m"),
    ("7 * * * *", "1h", "2h30m"),
    ("@hourly", "1h", "2h30m"),
    ("0 */6 * * *", "6h", "15h"),
    ("30 4 * * *", "24h", "60h"),
    ("@daily", "24h", "60h"),
    ("CRON_TZ=Europe/Berlin 0 3 * * *", "24h", "60h"),
    ("@every 2h", "2h", "5h"),
]


@pytest.mark.parametrize(("schedule", "period", "skew_for"), SCHEDULE_WINDOWS)
def test_cronjob_alert_windows_follow_the_schedule(
    schedule: str, period: str, skew_for: str
) -> None:
    windows = _rule_windows(
        render(
            "prometheusRule.enabled=true",
            "pushgateway.url=http://pg:9091",
            f"schedule={schedule}",
        )
    )
    no_success_for, expr = windows["RebalancerNoSuccessfulRun"]
    assert no_success_for == period
    assert f"offset {period}" in expr
    assert f"[{period}]" in expr
    assert windows["RebalancerSkewAboveMaxSkew"][0] == skew_for
    assert windows["RebalancerEvictionsBlockedByPDB"][0] == skew_for


@pytest.mark.parametrize("schedule", ["*/7 * * * *", "0 0 * * 1", "0\\,30 * * * *", "0 9-17 * * *"])
def test_a_schedule_without_a_period_needs_run_period(schedule: str) -> None:
    """Schedules whose runs are not evenly spaced (or that the chart does not read) are refused
    unless prometheusRule.runPeriod says the time between runs; then its windows are used."""
    base = ("prometheusRule.enabled=true", "pushgateway.url=http://pg:9091", f"schedule={schedule}")
    proc = _template(*base)
    assert proc.returncode != 0
    assert "set prometheusRule.runPeriod" in proc.stderr
    windows = _rule_windows(render(*base, "prometheusRule.runPeriod=7m"))
    assert windows["RebalancerNoSuccessfulRun"][0] == "7m"
    assert windows["RebalancerSkewAboveMaxSkew"][0] == "17m30s"


@pytest.mark.parametrize(
    ("interval", "pdb_range", "pdb_for", "twice", "skew_for"),
    [
        ("10m", "15m", "30m", "20m", "25m"),
        ("1h", "1h30m", "3h", "2h", "2h30m"),
        ("90s", "2m15s", "4m30s", "3m", "3m45s"),
        ("1h30m", "2h15m", "4h30m", "3h", "3h45m"),
    ],
)
def test_deployment_alert_windows_follow_the_interval(
    interval: str, pdb_range: str, pdb_for: str, twice: str, skew_for: str
) -> None:
    windows = _rule_windows(
        render("kind=Deployment", "prometheusRule.enabled=true", f"deschedulingInterval={interval}")
    )
    pdb_window, pdb_expr = windows["RebalancerEvictionsBlockedByPDB"]
    assert pdb_window == pdb_for
    assert f"[{pdb_range}]" in pdb_expr
    no_success = windows["RebalancerNoSuccessfulRun"][1]
    assert f"[{twice}]" in no_success
    assert f"offset {twice}" in no_success
    assert windows["RebalancerSkewAboveMaxSkew"][0] == skew_for


def test_image_by_digest() -> None:
    """image.digest pins the image (REPO:TAG@DIGEST, the tag the appVersion by default); a value
    that is no sha256 digest is refused by the schema; no digest keeps REPO:TAG."""
    digest = "sha256:" + "ab" * 32
    chart = load(CHART / "Chart.yaml")
    for kind in ("CronJob", "Deployment"):
        docs = render(
            f"kind={kind}", "image.repository=registry.test/rebalancer", f"image.digest={digest}"
        )
        container = pod_spec_of(only(docs, kind))["containers"][0]
        assert container["image"] == f"registry.test/rebalancer:{chart['appVersion']}@{digest}"
    plain = pod_spec_of(only(render(), "CronJob"))["containers"][0]["image"]
    assert plain == f"rebalancer:{chart['appVersion']}"
    refused = helm("template", "r", str(CHART), "--set", "image.digest=latest")
    assert refused.returncode != 0
    assert "digest" in refused.stderr


def test_the_charts_kube_version_is_the_oldest_the_readme_supports() -> None:
    """Chart.yaml's kubeVersion admits exactly the releases README.md supports: from the
    oldest it names on."""
    readme = (ROOT / "README.md").read_text()
    oldest = readme.split("The oldest supported version is **", 1)[1].split("**", 1)[0]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={oldest}.0-0"
