"""The Helm chart and the kubectl plugin against the real control plane (opt-in: --e2e).

- ``helm install --dry-run=server``: the API server sees the chart's objects (both modes), and
  ``kubectl apply --dry-run=server`` of the rendered chart passes the API server's validation.
- A real install: the API server's own authorizer (``kubectl auth can-i`` as the chart's
  ServiceAccount) grants what the rebalancer needs and no delete; a ``run --server-dry-run`` as
  that ServiceAccount works with those rights alone.
- ``kubectl rebalance plan`` and ``explain``, found by the e2e kubectl on PATH (the venv's bin
  dir), plan the imbalance of a scenario and send only GET requests.
- A real ``run --interval --metrics-bind-address`` exports every metric that
  deploy/monitoring's dashboard and alerts query, with the labels they use.
- ``--pushgateway``: a real Prometheus Pushgateway (Debian's, scripts/install-pushgateway.sh) on
  127.0.0.1 receives the metrics of a ``plan --snapshot`` and of an evicting one-shot ``run``
  (a CronJob's) whose evictions a PodDisruptionBudget refuses: read back from the gateway.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster.controlplane import Cluster, free_ports, wait_for
from e2e.test_live import APP, ZONE, Imbalance, need_own_control_plane, rebalancer_requests

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "rebalancer"
METRIC = re.compile(r"\brebalancer_[a-z0-9_]+\b")
NEVER = "0 0 31 2 *"  # February 31st: the CronJob exists but never starts a Job in a test


@pytest.fixture(scope="module")
def helm() -> str:
    """helm from scripts/build-tools.sh (built now if not cached: e2e never skips it)."""
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-tools.sh")],
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    bin_dir = proc.stdout.strip().splitlines()[-1].removeprefix("BIN_DIR=")
    return str(Path(bin_dir) / "helm")


def run_helm(cluster: Cluster, helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    cluster.assert_own_cluster(cluster.kubeconfig)
    return subprocess.run(
        [helm, "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "HELM_CACHE_HOME": str(cluster.run_dir / "helm-cache")},
    )


def out(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize(
    ("values", "notes"),
    [
        ([], "DRY RUN"),
        (["mode=deployment", "dryRun=none"], "EVICTIONS ARE ON"),
    ],
    ids=["cronjob-dry-run", "deployment-evict"],
)
def test_helm_install_dry_run_server(
    cluster: Cluster, namespace: str, helm: str, values: list[str], notes: str
) -> None:
    """`helm install --dry-run=server` succeeds, prints the NOTES and creates nothing; the
    rendered objects pass the API server's validation (kubectl apply --dry-run=server)."""
    release = f"rebalancer-{namespace}"
    sets = [a for v in [*values, f"cronjob.schedule={NEVER}"] for a in ("--set", v)]
    proc = run_helm(
        cluster, helm, "install", release, str(CHART), "-n", namespace, "--dry-run=server", *sets
    )
    assert proc.returncode == 0, out(proc)
    assert "NOTES:" in proc.stdout and notes in proc.stdout, out(proc)
    assert f"kind: {'Deployment' if values else 'CronJob'}" in proc.stdout
    listed = run_helm(cluster, helm, "list", "-n", namespace, "-q")
    assert listed.returncode == 0 and listed.stdout.strip() == "", out(listed)
    left = cluster.get_json("cronjobs,deployments,configmaps,serviceaccounts", "-n", namespace)
    assert not [o for o in left["items"] if o["metadata"]["name"].startswith(release)]
    assert cluster.kubectl("get", "clusterrole", release, check=False).returncode != 0

    # The pods must pass the "restricted" Pod Security Standard, as deploy/'s namespace enforces.
    cluster.kubectl(
        "label",
        "namespace",
        namespace,
        *(f"pod-security.kubernetes.io/{m}=restricted" for m in ("enforce", "warn")),
    )
    rendered = run_helm(cluster, helm, "template", release, str(CHART), "-n", namespace, *sets)
    assert rendered.returncode == 0, out(rendered)
    applied = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=rendered.stdout, check=False
    )
    assert applied.returncode == 0, out(applied)
    assert "PodSecurity" not in applied.stderr, out(applied)
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    lines = [line for line in applied.stdout.splitlines() if line.endswith("(server dry run)")]
    assert len(lines) == len(docs) >= 6, applied.stdout


@pytest.fixture
def installed(cluster: Cluster, namespace: str, helm: str) -> Iterator[str]:
    """The chart installed for real in the test's namespace; yields the ServiceAccount name."""
    release = f"rebalancer-{uuid.uuid4().hex[:6]}"
    proc = run_helm(
        cluster,
        helm,
        "install",
        release,
        str(CHART),
        "-n",
        namespace,
        "--set",
        f"cronjob.schedule={NEVER}",
    )
    assert proc.returncode == 0, out(proc)
    try:
        yield release  # the release name is the full name: it contains "rebalancer"
    finally:
        gone = run_helm(cluster, helm, "uninstall", release, "-n", namespace, "--wait")
        assert gone.returncode == 0, out(gone)
        assert cluster.kubectl("get", "clusterrole", release, check=False).returncode != 0


def can_i(cluster: Cluster, sa: str, ns: str, *args: str) -> bool:
    proc = cluster.kubectl(
        "auth", "can-i", *args, f"--as=system:serviceaccount:{ns}:{sa}", check=False
    )
    assert proc.stdout.strip() in ("yes", "no"), out(proc)
    return proc.stdout.strip() == "yes"


def test_installed_chart_grants_least_privilege(
    cluster: Cluster, namespace: str, installed: str
) -> None:
    """The API server's authorizer, asked as the chart's ServiceAccount: reads, evictions,
    events and the one Lease in the release namespace are allowed; deleting pods is not."""
    sa, ns = installed, namespace
    allowed = [
        ("list", "pods", "--all-namespaces"),
        ("get", "nodes"),
        ("list", "poddisruptionbudgets.policy", "--all-namespaces"),
        ("create", "pods", "--subresource=eviction", "-n", "default"),
        ("create", "events", "-n", "default"),
        ("create", "leases.coordination.k8s.io", "-n", ns),
        ("get", "leases.coordination.k8s.io/rebalancer", "-n", ns),
        ("update", "leases.coordination.k8s.io/rebalancer", "-n", ns),
    ]
    denied = [
        ("delete", "pods", "-n", "default"),
        ("deletecollection", "pods", "-n", "default"),
        ("patch", "pods", "-n", "default"),
        ("update", "pods", "-n", "default"),
        ("create", "pods", "-n", "default"),
        ("delete", "nodes"),
        ("get", "secrets", "-n", ns),
        ("get", "leases.coordination.k8s.io/other", "-n", ns),
        ("update", "leases.coordination.k8s.io/rebalancer", "-n", "default"),
        ("create", "leases.coordination.k8s.io", "-n", "default"),
        ("delete", "leases.coordination.k8s.io/rebalancer", "-n", ns),
        ("patch", "events", "-n", "default"),  # events are created, never patched
        ("watch", "pods", "--all-namespaces"),  # only the Deployment mode watches
        ("watch", "nodes"),
    ]
    for args in allowed:
        assert can_i(cluster, sa, ns, *args), f"{sa} cannot {args}"
    for args in denied:
        assert not can_i(cluster, sa, ns, *args), f"{sa} can {args}"


READ: Final = frozenset(
    {
        "nodes",
        "pods",
        "persistentvolumeclaims",
        "persistentvolumes",
        "services",
        "replicationcontrollers",
        "poddisruptionbudgets.policy",
        "priorityclasses.scheduling.k8s.io",
        "replicasets.apps",
        "statefulsets.apps",
        "deployments.apps",
    }
)
AUTHENTICATED: Final = {  # what every authenticated user may do (system:basic-user)
    "selfsubjectreviews.authentication.k8s.io": {"create"},
    "selfsubjectaccessreviews.authorization.k8s.io": {"create"},
    "selfsubjectrulesreviews.authorization.k8s.io": {"create"},
}
_CAN_I_ROW: Final = re.compile(r"^(\S+)\s+\[[^\]]*\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$")


def can_i_list(cluster: Cluster, sa: str, ns: str, where: str) -> dict[str, set[str]]:
    """``kubectl auth can-i --list`` as the ServiceAccount in namespace ``where``: verbs per
    resource (rows naming particular objects, such as the Lease, are left out)."""
    proc = cluster.kubectl(
        "auth", "can-i", "--list", "-n", where, f"--as=system:serviceaccount:{ns}:{sa}"
    )
    grants: dict[str, set[str]] = {}
    for line in proc.stdout.splitlines()[1:]:
        row = _CAN_I_ROW.match(line)
        if row is None or row.group(2):  # a non-resource URL, or named objects only
            continue
        grants.setdefault(row.group(1), set()).update(row.group(3).split())
    return grants


@pytest.mark.parametrize("mode", ["cronjob", "deployment"])
def test_installed_chart_grants_exactly_what_each_mode_uses(
    cluster: Cluster, namespace: str, helm: str, mode: str
) -> None:
    """The API server's whole list of what the chart's ServiceAccount may do, per mode: get and
    list on what is read (and watch on it in the Deployment mode only, which keeps the cluster
    current with WATCH), create evictions and events (no patch), create, get and delete of its
    own EvictionRequests and list of their Evictions (evictionAPI auto), create, list and delete
    of its capacity reservations (reserveCapacity auto, never watched), the Lease only in the
    release's namespace; nothing more than what every authenticated user has."""
    release = f"rebalancer-{uuid.uuid4().hex[:6]}"
    proc = run_helm(
        cluster,
        helm,
        "install",
        release,
        str(CHART),
        "-n",
        namespace,
        "--set",
        f"mode={mode}",
        "--set",
        f"cronjob.schedule={NEVER}",
    )
    assert proc.returncode == 0, out(proc)
    try:
        read = {"get", "list", "watch"} if mode == "deployment" else {"get", "list"}
        expected = {
            **{resource: set(read) for resource in READ},
            "namespaces": read - {"get"},  # listed only, for namespaceLabelSelector
            "nodepools.karpenter.sh": read - {"get"},  # listed where served (Karpenter's)
            "pods/eviction": {"create"},
            "events": {"create"},
            # evictionAPI auto (the default): its own EvictionRequests where served (spec §5.11)
            "evictionrequests.lifecycle.k8s.io": {"create", "get", "delete"},
            "evictions.lifecycle.k8s.io": {"list"},
            # reserveCapacity auto (the default): its own capacity reservations (spec §5.10)
            "capacitybuffers.autoscaling.x-k8s.io": {"create", "get", "list", "delete"},
            "podtemplates": {"create", "list", "delete"},
            **AUTHENTICATED,
        }
        assert can_i_list(cluster, release, namespace, "default") == expected
        in_release = can_i_list(cluster, release, namespace, namespace)
        assert in_release == {**expected, "leases.coordination.k8s.io": {"create"}}
    finally:
        gone = run_helm(cluster, helm, "uninstall", release, "-n", namespace, "--wait")
        assert gone.returncode == 0, out(gone)


def test_run_as_the_chart_service_account(cluster: Cluster, namespace: str, installed: str) -> None:
    """`kubectl rebalance run --server-dry-run` with the chart's ServiceAccount token: RBAC
    pre-flight, reads and dry-run evictions all pass with the chart's rights alone."""
    need_own_control_plane(cluster)
    imbalance = Imbalance(cluster, namespace)
    try:
        kubeconfig = cluster.token_kubeconfig(namespace, installed)
        proc = kubectl_rebalance(
            cluster,
            "run",
            "--server-dry-run",
            "-n",
            namespace,
            "-o",
            "json",
            kubeconfig=kubeconfig,
        )
        assert proc.returncode == 0, out(proc)
        report = json.loads(proc.stdout)
        outcomes = {r["outcome"] for r in report["results"]}
        assert outcomes == {"would-evict"}, out(proc)  # wave 1 sent, dryRun=All, none refused
    finally:
        imbalance.cleanup()


def kubectl_rebalance(
    cluster: Cluster, *args: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`kubectl rebalance ARGS` with the e2e kubectl, which finds kubectl-rebalance in the venv's
    bin dir on PATH (as `pip install .` put it there)."""
    kc = kubeconfig or cluster.kubeconfig
    cluster.assert_own_cluster(kc)
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / "kubectl-rebalance").is_file(), "pip install . did not install the plugin"
    kubectl_dir = Path(cluster.kubectl_bin).resolve().parent
    path = os.pathsep.join([str(venv_bin), str(kubectl_dir), os.environ.get("PATH", "")])
    return subprocess.run(
        [cluster.kubectl_bin, "rebalance", *args, "--kubeconfig", str(kc)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PATH": path},
    )


def test_kubectl_rebalance_plan_and_explain(cluster: Cluster, namespace: str) -> None:
    """`kubectl rebalance plan -n NS` plans the [4, 0, 0] imbalance (2 evictions, as the
    minimum for maxSkew 1 over 3 zones is [2, 1, 1]); `explain POD -n NS` reads the cluster and
    explains that pod; neither sends anything but GET."""
    cluster_ = need_own_control_plane(cluster)
    imbalance = Imbalance(cluster_, namespace)
    try:
        since = len(cluster_.audit_events())
        proc = kubectl_rebalance(cluster, "-n", namespace, "plan", "-o", "json")
        assert proc.returncode == 0, out(proc)
        plan = json.loads(proc.stdout)
        assert plan["summary"]["evictions"] == 2, out(proc)
        assert {e["namespace"] for e in plan["evictions"]} == {namespace}
        pods = {p["metadata"]["name"] for p in cluster.pods(namespace, f"app={APP}")}
        assert {e["name"] for e in plan["evictions"]} <= pods

        pod = sorted(pods)[0]
        proc = kubectl_rebalance(cluster, "explain", pod, "-n", namespace)
        assert proc.returncode == 0, out(proc)
        assert f"Pod {namespace}/{pod}" in proc.stdout, out(proc)

        table = kubectl_rebalance(cluster, "plan", "--namespace", namespace)
        assert table.returncode == 0, out(table)
        assert "Plan (2 evictions, by wave)" in table.stdout, out(table)

        sent = cluster_.wait_for(
            "the plugin's requests in the audit log",
            lambda: rebalancer_requests(cluster_, since) or None,
            timeout=15,
            interval=0.25,
        )
        verbs = {e["verb"] for e in sent}
        assert verbs <= {"get", "list"}, verbs
    finally:
        imbalance.cleanup()


def test_chart_values_file_round_trip(tmp_path: Path, helm: str, cluster: Cluster) -> None:
    """A values file with a policy installs (dry run on the server) and carries the policy."""
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump({"policy": {"nodeFit": False, "limits": {"total": 3}}, "mode": "cronjob"})
    )
    proc = run_helm(
        cluster,
        helm,
        "install",
        "rebalancer-values",
        str(CHART),
        "-n",
        "default",
        "--dry-run=server",
        "-f",
        str(values),
    )
    assert proc.returncode == 0, out(proc)
    manifest = proc.stdout.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
    configmap = next(d for d in yaml.safe_load_all(manifest) if d and d["kind"] == "ConfigMap")
    policy = yaml.safe_load(configmap["data"]["policy.yaml"])
    assert policy["nodeFit"] is False and policy["limits"]["total"] == 3


def test_live_metrics_feed_the_dashboard_and_alerts(cluster: Cluster, namespace: str) -> None:
    """A real `run --interval --metrics-bind-address` (dry run) exports every metric the
    dashboard and the alerts query, with the labels their legends and annotations use."""
    cluster_ = need_own_control_plane(cluster)
    imbalance = Imbalance(cluster_, namespace)
    (port,) = free_ports(1)
    cluster.assert_own_cluster(cluster.kubeconfig)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rebalancer", "run", "--dry-run", "--interval", "30s",
         "--metrics-bind-address", f"127.0.0.1:{port}", "-n", namespace,
         "--kubeconfig", str(cluster.kubeconfig)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:

        def scrape() -> dict[str, list[Any]] | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                return None
            samples: dict[str, list[Any]] = {}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    samples.setdefault(sample.name, []).append(sample)
            ok = samples.get("rebalancer_runs_total", [])
            return samples if any(s.value >= 1 for s in ok) else None

        samples = cluster.wait_for("a finished run in the metrics", scrape, timeout=120)
    finally:
        proc.terminate()
        stderr = proc.communicate(timeout=60)[1]
        imbalance.cleanup()
    assert proc.returncode == 0, stderr[-3000:]

    monitoring = ROOT / "deploy" / "monitoring"
    dashboard = json.loads((monitoring / "dashboard.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in METRIC.findall(target["expr"])
    }
    for group in yaml.safe_load((monitoring / "rebalancer.rules.yaml").read_text())["groups"]:
        for rule in group["rules"]:
            queried |= set(METRIC.findall(rule["expr"]))
    # A dry run repairs nothing, so it sets no rebalancer_unrepaired_skew (the skew alert's);
    # the evicting run of test_pushgateway_receives_an_evicting_run does.
    assert queried - {"rebalancer_unrepaired_skew"} <= samples.keys(), queried - samples.keys()

    (runs,) = [s for s in samples["rebalancer_runs_total"] if s.labels["result"] == "ok"]
    assert runs.value >= 1
    assert [s.value for s in samples["rebalancer_planned_moves"]] == [2.0]
    (skew,) = samples["rebalancer_skew_before"]
    assert skew.labels == {
        "namespace": namespace,
        "topology_key": ZONE,
        "selector": f"app={APP}",
        "max_skew": "1",
        "when_unsatisfiable": "DoNotSchedule",
    }
    assert skew.value == 4  # [4, 0, 0]
    results = {s.labels["result"] for s in samples["rebalancer_evictions_total"]}
    assert "blocked-by-pdb" in results  # the label value the PDB alert selects


# -- --pushgateway ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pushgateway() -> Iterator[str]:
    """A real Prometheus Pushgateway on 127.0.0.1 (in memory); its URL."""
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-pushgateway.sh")],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    binary = proc.stdout.strip().splitlines()[-1].removeprefix("PUSHGATEWAY=")
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    gateway = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for("the Pushgateway to answer", lambda: _get(f"{url}/-/ready"), timeout=60)
        yield url
    finally:
        gateway.terminate()
        gateway.communicate(timeout=30)


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text: str = response.read().decode()
            return text
    except OSError:
        return None


def pushed(url: str, job: str) -> dict[str, list[Any]]:
    """The rebalancer samples the gateway holds for ``job``, by sample name."""
    text = _get(f"{url}/metrics")
    assert text is not None
    samples: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("rebalancer_") and sample.labels.get("job") == job:
                samples.setdefault(sample.name, []).append(sample)
    return samples


def test_pushgateway_receives_a_snapshot_plan(pushgateway: str) -> None:
    """`plan --snapshot --pushgateway URL`: the gateway then holds the plan's moves and one
    skew series per violated view, under the job named, and no unrepaired skew (a plan
    evicts nothing)."""
    snapshot = str(ROOT / "examples" / "skewed-cluster.yaml")
    argv = [sys.executable, "-m", "rebalancer", "plan", "--snapshot", snapshot, "-o", "json"]
    proc = subprocess.run(
        [*argv, "--pushgateway", pushgateway, "--pushgateway-job", "plan-e2e"],
        capture_output=True, text=True, check=False, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, out(proc)
    assert "warning" not in proc.stderr
    plan = json.loads(proc.stdout)
    samples = pushed(pushgateway, "plan-e2e")
    assert [s.value for s in samples["rebalancer_planned_moves"]] == [len(plan["evictions"])]
    assert len(samples["rebalancer_skew_before"]) == len(plan["violations"]) > 0
    assert {s.value for s in samples["rebalancer_skew_before"]} <= {
        float(v["skew"]) for v in plan["violations"]
    }
    (ok,) = [s for s in samples["rebalancer_runs_total"] if s.labels["result"] == "ok"]
    assert ok.value == 1
    assert "rebalancer_unrepaired_skew" not in samples
    # The gauges the CronJob's alerts read: the last run's result, and the last success time
    # in its own group too (which a failed run's push would not replace).
    (result,) = [s for s in samples["rebalancer_last_run_result"] if s.value == 1]
    assert result.labels["result"] == "ok"
    last_success = samples["rebalancer_last_success_timestamp_seconds"]
    groups = {s.labels.get("rebalancer_push") for s in last_success}
    assert groups == {None, "last-success"}
    # The gateway down: the plan is still printed, exit 0, and a warning names the URL.
    (dead,) = free_ports(1)
    proc = subprocess.run(
        [*argv, "--pushgateway", f"http://127.0.0.1:{dead}"],
        capture_output=True, text=True, check=False, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, out(proc)
    assert json.loads(proc.stdout) == plan
    assert f"could not push the metrics to http://127.0.0.1:{dead}" in proc.stderr


def test_pushgateway_receives_an_evicting_run(
    cluster: Cluster, namespace: str, pushgateway: str
) -> None:
    """A one-shot evicting `run --pushgateway URL` (what the chart's CronJob runs) stopped
    before its plan is done: a PodDisruptionBudget lets one pod go per wave and --max-waves 1
    ends the run after the first. The gateway holds the eviction, the run, and the skew the
    workload was left with above maxSkew, labelled by workload: the skew alert's series."""
    cluster_ = need_own_control_plane(cluster)
    imbalance = Imbalance(cluster_, namespace, pdb_min_available=3)  # [4, 0, 0]
    cluster.assert_own_cluster(cluster.kubeconfig)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rebalancer", "run", "-n", namespace, "--max-waves", "1",
             "--wave-timeout", "60s", "--lease-namespace", namespace, "-o", "json",
             "--pushgateway", pushgateway, "--pushgateway-job", "run-e2e",
             "--kubeconfig", str(cluster.kubeconfig)],
            capture_output=True, text=True, check=False, timeout=300, cwd=ROOT,
        )  # fmt: skip
    finally:
        imbalance.cleanup()
    assert proc.returncode == 0, out(proc)
    report = json.loads(proc.stdout)
    assert report["summary"]["planned"] == 2, out(proc)  # [2, 1, 1]: two waves of one
    assert report["summary"]["evicted"] == 1, out(proc)
    assert report["summary"]["end"] == "max-waves", out(proc)
    left = report["summary"]["skewAfter"]
    assert left == 3, out(proc)  # [3, 1, 0]
    samples = pushed(pushgateway, "run-e2e")
    by_result = {s.labels["result"]: s.value for s in samples["rebalancer_evictions_total"]}
    assert by_result["evicted"] == 1
    runs = {s.labels["result"]: s.value for s in samples["rebalancer_runs_total"]}
    assert runs == {"ok": 1, "evictions-failed": 0, "lease-held": 0, "error": 0}
    (unrepaired,) = samples["rebalancer_unrepaired_skew"]
    assert unrepaired.labels == {
        "job": "run-e2e",
        "instance": "",
        "namespace": namespace,
        "workload": f"Deployment/{APP}",
    }
    assert unrepaired.value == left - 1  # maxSkew 1


# -- the single-file plugin through krew -----------------------------------------------------------


def _script(*argv: str, timeout: float = 1800) -> str:
    """Run a build script; the value of its last line (``NAME=VALUE``)."""
    proc = subprocess.run(
        list(argv), capture_output=True, text=True, check=False, timeout=timeout, cwd=ROOT
    )
    assert proc.returncode == 0, out(proc)
    return proc.stdout.strip().splitlines()[-1].partition("=")[2]


def test_krew_installs_the_single_file_plugin(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The single-file kubectl-rebalance for this machine (scripts/build_plugin.py: its
    dependencies inside, the compiled ones for this CPython), packaged for krew, installs with
    `kubectl krew install --manifest=... --archive=...` (krew built from Go modules, kubectl of
    the e2e cache) and plans the cluster's imbalance as `kubectl rebalance plan`, run by a
    python3 that has nothing installed (a fresh venv without pip)."""
    import platform as host  # noqa: PLC0415

    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[host.machine()]
    os_name = {"linux": "linux", "darwin": "darwin"}[sys.platform]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    out_dir = tmp_path / "plugin"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_plugin.py"), "-o", str(out_dir),
         "--platform", f"{os_name}/{arch}", "--python", python,
         "--krew", "https://downloads.example.org/rebalancer", "--homepage",
         "https://rebalancer.example.org"],
        capture_output=True, text=True, check=False, timeout=1800, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, out(proc)
    manifest = out_dir / "krew" / "rebalance.yaml"
    (archive,) = (out_dir / "krew").glob("*.tar.gz")

    krew_bin = Path(_script("bash", str(ROOT / "scripts" / "build-krew.sh")))
    bare = tmp_path / "bare-python"  # a Python with nothing installed: the system's, as it were
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    nothing = subprocess.run(
        [str(bare / "bin" / "python3"), "-c", "import yaml"], capture_output=True, check=False
    )
    assert nothing.returncode != 0  # no PyYAML (nor anything else) there
    krew_root = tmp_path / "krew-root"
    kubectl_dir = Path(cluster.kubectl_bin).resolve().parent
    env = {
        "HOME": str(tmp_path / "home"),  # krew's and shiv's caches start empty
        "KREW_ROOT": str(krew_root),
        "PATH": os.pathsep.join(
            [str(krew_root / "bin"), str(krew_bin), str(kubectl_dir), str(bare / "bin"),
             "/usr/bin", "/bin"]
        ),
    }  # fmt: skip
    (tmp_path / "home").mkdir()

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cluster.kubectl_bin, *args], capture_output=True, text=True, check=False,
            timeout=600, env=env, cwd=tmp_path,
        )  # fmt: skip

    installed = kubectl("krew", "install", f"--manifest={manifest}", f"--archive={archive}")
    assert installed.returncode == 0, out(installed)
    assert "Installed plugin: rebalance" in installed.stdout + installed.stderr
    link = krew_root / "bin" / "kubectl-rebalance"
    assert link.resolve().is_relative_to(krew_root / "store" / "rebalance")
    assert "/kubectl-rebalance" in kubectl("plugin", "list").stdout

    usage = kubectl("rebalance", "--help")
    assert usage.returncode == 0, out(usage)
    assert usage.stdout.startswith("usage: kubectl rebalance")

    need_own_control_plane(cluster)
    imbalance = Imbalance(cluster, namespace)
    cluster.assert_own_cluster(cluster.kubeconfig)
    try:
        plan = kubectl(
            "rebalance", "plan", "-n", namespace, "-o", "json", "--kubeconfig",
            str(cluster.kubeconfig),
        )  # fmt: skip
    finally:
        imbalance.cleanup()
    assert plan.returncode == 0, out(plan)
    assert len(json.loads(plan.stdout)["evictions"]) == 2  # [4, 0, 0] -> [2, 1, 1]
    # The file ran on the bare Python: shiv unpacked it under the test's HOME.
    assert list((tmp_path / "home" / ".shiv").glob("kubectl-rebalance_*"))
