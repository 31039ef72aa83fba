"""deploy/monitoring: the alert rules (checked and unit-tested by the real promtool) and the
Grafana dashboard (every query names metrics the rebalancer exports, and parses as PromQL)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from rebalancer.cli.metrics import Metrics
from tests.fakes import find_kubectl
from tests.packaging_tools import ROOT, run, tool

MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "rebalancer.rules.yaml"
RULE_TESTS = MONITORING / "tests" / "rebalancer.rules.test.yaml"
DASHBOARD = MONITORING / "dashboard.json"
METRIC_NAME = re.compile(r"\brebalancer_[a-z0-9_]+\b")
GRAFANA_VARIABLES = {"$job": ".*", "$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def exported_metrics() -> dict[str, str]:
    """Every series name the metrics module exports -> its metric family, read from a fresh
    registry (counters add _total, histograms _bucket/_count/_sum)."""
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}
    out: dict[str, str] = {}
    for family in Metrics().registry.collect():
        for suffix in suffixes[family.type]:
            out[family.name + suffix] = family.name
    return out


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


def rules() -> list[dict[str, Any]]:
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


# -- alert rules -------------------------------------------------------------------------------


def test_promtool_check_rules() -> None:
    """`promtool check rules` accepts the rule file and counts its three alerts."""
    proc = run(tool("promtool"), "check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 3 rules found" in proc.stdout


def test_promtool_unit_tests_of_every_alert() -> None:
    """`promtool test rules` runs the unit tests of each alert, and they pass."""
    proc = run(tool("promtool"), "test", "rules", str(RULE_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    """Each alert is expected to fire at some time of the unit tests and to be quiet at another."""
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    alerts = {rule["alert"] for rule in rules()}
    assert alerts == {
        "RebalancerSkewAboveMaxSkew",
        "RebalancerEvictionsBlockedByPDB",
        "RebalancerNoSuccessfulRun",
    }
    assert fired == alerts
    assert quiet == alerts


def test_alerts_use_exported_metrics() -> None:
    """Every metric an alert reads is one the rebalancer exports."""
    exported = exported_metrics()
    for rule in rules():
        names = set(METRIC_NAME.findall(rule["expr"]))
        assert names, rule["alert"]
        assert names <= exported.keys(), (rule["alert"], names - exported.keys())


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


def test_dashboard_shows_every_exported_metric() -> None:
    """Each metric family exported appears on some panel: evictions by result, planned moves,
    skew before and after, run duration, runs by result, unreadable objects."""
    exported = exported_metrics()
    shown = {
        exported[name]
        for where, expr in queries()
        if where.startswith("panel")
        for name in METRIC_NAME.findall(expr)
    }
    assert shown == set(exported.values())
    assert shown == {
        "rebalancer_evictions",
        "rebalancer_runs",
        "rebalancer_planned_moves",
        "rebalancer_skew_before",
        "rebalancer_skew_after",
        "rebalancer_run_duration_seconds",
        "rebalancer_invalid_objects",
    }


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
    assert by_title["Evictions by result"]["targets"][0]["legendFormat"] == "{{result}}"
    assert by_title["Runs by result"]["targets"][0]["legendFormat"] == "{{result}}"
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
