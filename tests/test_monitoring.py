"""deploy/monitoring: the alert rules of both kinds (checked and unit-tested by the real promtool)
and the Grafana dashboard (every query names metrics the rebalancer exports, and parses as
PromQL); what a CronJob's alerts and dashboard read is a gauge, never a counter that restarts
with every run."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from rebalancer.cli.metrics import Metrics
from tests.builders import zones_cluster
from tests.fakes import find_kubectl
from tests.packaging_tools import ROOT, run, tool

MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "rebalancer.rules.yaml"
CRONJOB_RULES = MONITORING / "rebalancer-cronjob.rules.yaml"
RULE_FILES = {"Deployment": RULES, "CronJob": CRONJOB_RULES}
RULE_TESTS = {
    kind: MONITORING / "tests" / f"{path.stem}.test.yaml" for kind, path in RULE_FILES.items()
}
ALERTS = {
    "RebalancerSkewAboveMaxSkew",
    "RebalancerEvictionsBlockedByPDB",
    "RebalancerNoSuccessfulRun",
}
DASHBOARD = MONITORING / "dashboard.json"
METRIC_NAME = re.compile(r"\brebalancer_[a-z0-9_]+\b")
GRAFANA_VARIABLES = {"$job": ".*", "$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def exported_metrics(kind: str | None = None) -> dict[str, str]:
    """Every series name the metrics module exports -> its metric family, read from the
    registry of a process that has finished a run (counters add _total, histograms
    _bucket/_count/_sum). ``kind="gauge"``: the gauges only."""
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}
    metrics = Metrics()
    metrics.record_error()
    metrics.record_plan(_empty_plan(), 1.0)  # a success: the last success time is set
    out: dict[str, str] = {}
    for family in metrics.registry.collect():
        if kind is None or family.type == kind:
            for suffix in suffixes[family.type]:
                out[family.name + suffix] = family.name
    return out


def _empty_plan() -> Any:
    from rebalancer.core.model import Snapshot  # noqa: PLC0415
    from rebalancer.core.planner import plan  # noqa: PLC0415
    from rebalancer.core.policy import Policy  # noqa: PLC0415

    nodes, pods = zones_cluster([1, 1])
    return plan(Snapshot(tuple(nodes), tuple(pods)), Policy(), 0.0)


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows hold their panels


def queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable of the dashboard."""
    dashboard = json.loads(DASHBOARD.read_text())
    out = [
        (f"panel {p['title']!r} {t['refId']}", t["expr"])
        for p in panels(dashboard)
        for t in p.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            out.append((f"variable {variable['name']}", variable["query"]["query"]))
    return out


def rules(kind: str = "Deployment") -> list[dict[str, Any]]:
    path = RULE_FILES[kind]
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]


# -- alert rules -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", RULE_FILES)
def test_promtool_check_rules(kind: str) -> None:
    """`promtool check rules` accepts each rule file and counts its three alerts."""
    proc = run(tool("promtool"), "check", "rules", str(RULE_FILES[kind]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 3 rules found" in proc.stdout


@pytest.mark.parametrize("kind", RULE_FILES)
def test_promtool_unit_tests_of_every_alert(kind: str) -> None:
    """`promtool test rules` runs the unit tests of each alert of each kind, and they pass."""
    proc = run(tool("promtool"), "test", "rules", str(RULE_TESTS[kind]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@pytest.mark.parametrize("kind", RULE_FILES)
def test_every_alert_has_a_firing_and_a_quiet_unit_test(kind: str) -> None:
    """Each alert is expected to fire at some time of the unit tests and to be quiet at another."""
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS[kind].read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    alerts = {rule["alert"] for rule in rules(kind)}
    assert alerts == ALERTS
    assert fired == alerts
    assert quiet == alerts


def test_cronjob_unit_tests_cover_healthy_failing_blocked_and_lease_held() -> None:
    """The CronJob's unit tests hold a healthy job that never raises an alert, and a failing
    one, one whose runs PDBs refuse, one that lost the Lease and one that never got it, each
    raising its alert."""
    fired: dict[str, set[str]] = {}
    for case in yaml.safe_load(RULE_TESTS["CronJob"].read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            for alert in check["exp_alerts"]:
                job = alert["exp_labels"].get("job", "")
                fired.setdefault(check["alertname"], set()).add(job)
    assert fired["RebalancerNoSuccessfulRun"] == {"failing", "held", "never", ""}
    assert fired["RebalancerEvictionsBlockedByPDB"] == {"blocked"}
    assert "healthy" not in set().union(*fired.values())


@pytest.mark.parametrize("kind", RULE_FILES)
def test_alerts_use_exported_metrics(kind: str) -> None:
    """Every metric an alert reads is one the rebalancer exports."""
    exported = exported_metrics()
    for rule in rules(kind):
        names = set(METRIC_NAME.findall(rule["expr"]))
        assert names, rule["alert"]
        assert names <= exported.keys(), (rule["alert"], names - exported.keys())


def test_cronjob_alerts_read_gauges_only() -> None:
    """A CronJob's push replaces the last run's: its alerts read gauges, never increase() or
    rate() of a counter that starts again with every run."""
    gauges = exported_metrics("gauge")
    for rule in rules("CronJob"):
        assert "increase(" not in rule["expr"] and "rate(" not in rule["expr"], rule["alert"]
        assert set(METRIC_NAME.findall(rule["expr"])) <= gauges.keys(), rule["alert"]


def test_prometheusrule_carries_the_rule_file() -> None:
    """The Prometheus Operator's PrometheusRule holds exactly the groups of the rule file."""
    resource = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert resource["apiVersion"] == "monitoring.coreos.com/v1"
    assert resource["kind"] == "PrometheusRule"
    assert resource["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


# -- dashboard ---------------------------------------------------------------------------------


def test_dashboard_queries_name_exported_metrics() -> None:
    """Every panel query (and query variable) names at least one metric, and only metrics the
    metrics module exports."""
    exported = exported_metrics()
    found = queries()
    assert len(found) >= 10
    for where, expr in found:
        names = set(METRIC_NAME.findall(expr))
        assert names, f"{where}: no rebalancer metric in {expr!r}"
        assert names <= exported.keys(), f"{where}: not exported: {names - exported.keys()}"


def test_dashboard_reads_gauges_only() -> None:
    """Every panel reads gauges (right for a CronJob's pushes as for a scraped Deployment), and
    every gauge but the view skews' duplicate is on some panel."""
    gauges = exported_metrics("gauge")
    shown: set[str] = set()
    for where, expr in queries():
        names = set(METRIC_NAME.findall(expr))
        assert names <= gauges.keys(), f"{where}: not a gauge: {names - gauges.keys()}"
        assert "increase(" not in expr and "rate(" not in expr, where
        shown |= names
    assert (
        shown
        == set(gauges)
        == {
            "rebalancer_last_run_timestamp_seconds",
            "rebalancer_last_run_result",
            "rebalancer_last_success_timestamp_seconds",
            "rebalancer_last_run_evictions",
            "rebalancer_last_run_duration_seconds",
            "rebalancer_last_run_invalid_objects",
            "rebalancer_planned_moves",
            "rebalancer_skew_before",
            "rebalancer_skew_after",
            "rebalancer_unrepaired_skew",
            "rebalancer_build_info",
        }
    )


def test_dashboard_panels_are_wired() -> None:
    """Unique panel ids, a datasource variable on every panel, grouped legends by result/view."""
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "rebalancer"
    for panel in panels(dashboard):
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
    by_title = {p["title"]: p for p in panels(dashboard)}
    assert by_title["Evictions of each run by result"]["targets"][0]["legendFormat"] == "{{result}}"
    assert by_title["Result of the last run"]["targets"][0]["legendFormat"] == "{{result}}"
    skew = [t["legendFormat"] for t in by_title["Skew before / after per view"]["targets"]]
    assert [s.split()[0] for s in skew] == ["before", "after"]
    assert all("{{topology_key}}" in s and "{{namespace}}" in s for s in skew)


def test_dashboard_queries_parse() -> None:
    """promtool parses every dashboard query (Grafana's variables replaced by sample values)."""
    promtool = tool("promtool")
    for where, grafana_expr in queries():
        expr = grafana_expr
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        if expr.startswith("label_values("):  # Grafana's own function: check its metric only
            expr = expr.removeprefix("label_values(").split(",")[0]
        proc = run(promtool, "--experimental", "promql", "format", expr)
        assert proc.returncode == 0, f"{where}: {proc.stdout}{proc.stderr}"


def test_monitoring_kustomization_renders() -> None:
    """`kubectl kustomize deploy/monitoring`: the PrometheusRule, the PodMonitor of the
    rebalancer pod's metrics port, and the dashboard ConfigMap for Grafana's sidecar."""
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("kubectl not found: kustomize rendering not checked")
    out = subprocess.run(
        [kubectl, "kustomize", str(MONITORING)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(out) if d}
    assert set(docs) == {"PrometheusRule", "PodMonitor", "ConfigMap"}
    assert {d["metadata"]["namespace"] for d in docs.values()} == {"rebalancer"}
    configmap = docs["ConfigMap"]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["rebalancer.json"]) == json.loads(DASHBOARD.read_text())
    monitor = docs["PodMonitor"]["spec"]
    deployment = yaml.safe_load(
        (ROOT / "deploy" / "overlays" / "deployment" / "deployment.yaml").read_text()
    )
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= pod_labels.items()
    (endpoint,) = monitor["podMetricsEndpoints"]
    ports = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert endpoint["port"] in {p["name"] for p in ports}
    assert endpoint["honorLabels"] is True  # keeps the views' own `namespace` label


# -- alert series on a large cluster -------------------------------------------------------------


def _series(metrics: Metrics, name: str) -> list[dict[str, str]]:
    return [
        sample.labels
        for family in metrics.registry.collect()
        if family.name == name
        for sample in family.samples
    ]


@pytest.fixture(scope="module")
def medium_cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """bench.gen's 1,000-node, 30,000-pod cluster (seed 1) and its plan with the default policy."""
    from bench.gen import SIZES, generate  # noqa: PLC0415
    from rebalancer.cluster.read.snapshot import dump_objects, load_snapshot  # noqa: PLC0415
    from rebalancer.core.planner import plan  # noqa: PLC0415
    from rebalancer.core.policy import Policy  # noqa: PLC0415

    path = tmp_path_factory.mktemp("bench") / "medium.json"
    nodes, pods = SIZES["medium"]
    path.write_bytes(dump_objects(list(generate(nodes, pods, 1)), "json"))
    snapshot = load_snapshot(path)
    return snapshot, plan(snapshot, Policy(), 1_760_100_000.0)


def _report(planned: Any, after: str, *, server_dry_run: bool = False) -> Any:
    """A run of ``planned`` whose views end as ``after`` says: "before" (nothing moved: every
    eviction blocked) or "planned" (the simulated end state, what a run that evicts reaches)."""
    from rebalancer.cluster.act.outcome import RunEnd  # noqa: PLC0415
    from rebalancer.cluster.act.runner import RunReport, ViewSkew  # noqa: PLC0415

    ends = {id(v): a.skew for v, a in zip(planned.violations, planned.after, strict=True)}
    skews = tuple(
        ViewSkew(
            v.namespace,
            v.topology_key,
            v.selector,
            v.max_skew,
            v.when_unsatisfiable,
            v.skew,
            v.skew if after == "before" else ends[id(v)],
        )
        for v in planned.violations
    )
    return RunReport(
        "r", planned, (), None, RunEnd.NOTHING_EVICTED, skews, 1.0, server_dry_run=server_dry_run
    )


def test_skew_alert_series_on_the_30000_pod_cluster(medium_cluster: tuple[Any, Any]) -> None:
    """On bench.gen's 30,000-pod cluster the old alert (rebalancer_skew_before > 0) had one
    series per violated view, 457, firing in dry run too. Now: none in dry run or server dry
    run, none once a run reaches its plan, and even when every eviction is blocked at most one
    per workload, none with a pod-template-hash in its labels."""
    snapshot, planned = medium_cluster
    assert len(planned.violations) == 457  # the old alert's series (and alerts)
    hashes = {
        p.labels["pod-template-hash"] for p in snapshot.pods if "pod-template-hash" in p.labels
    }
    assert hashes

    for evicting, server in ((False, False), (True, True)):
        quiet = Metrics(evicting=evicting)
        quiet.record(_report(planned, "before", server_dry_run=server))
        assert _series(quiet, "rebalancer_unrepaired_skew") == []
    repaired = Metrics(evicting=True)
    repaired.record(_report(planned, "planned"))
    assert _series(repaired, "rebalancer_unrepaired_skew") == []

    blocked = Metrics(evicting=True)
    blocked.record(_report(planned, "before"))
    series = _series(blocked, "rebalancer_unrepaired_skew")
    workloads = {(p.namespace, p.owner.kind, p.owner.name) for p in snapshot.pods if p.owner}
    # Only views the plan brings within maxSkew; one series per workload at most.
    repairable = [a for a in planned.after if a.skew <= a.max_skew]
    assert 0 < len(series) <= len(repairable) < len(planned.violations)
    assert len(series) <= len(workloads)
    assert len({(s["namespace"], s["workload"]) for s in series}) == len(series)
    for labels in series:
        assert set(labels) == {"namespace", "workload"}
        assert not any(h in labels["workload"] for h in hashes), labels
    print(  # the figures in docs/monitoring.md (pytest -s)
        f"alert series: before {len(planned.violations)}, dry run 0, "
        f"all evictions blocked {len(series)}, repaired 0"
    )
    # The dashboard's view gauges lose the hashes too.
    for labels in _series(blocked, "rebalancer_skew_before"):
        assert not any(h in labels["selector"] for h in hashes), labels
