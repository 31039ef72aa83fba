"""The run loop against a fake cluster: re-plan after each wave, limits carried, clean stops."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from rebalancer.cli.logconfig import configure as configure_logging
from rebalancer.cli.main import main
from rebalancer.cli.metrics import Metrics, parse_bind_address
from rebalancer.cli.render import render_run
from rebalancer.cluster import logs
from rebalancer.cluster.act import runner as runner_mod
from rebalancer.cluster.act.events import BLOCKED, REBALANCED
from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.outcome import Outcome
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.cluster.api import errors, kubeclient
from rebalancer.cluster.api.kubeclient import connect
from rebalancer.cluster.api.preflight import preflight, run_checks
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CLUSTER,
    EXIT_OK,
    RebalancerError,
)
from rebalancer.core.model import Snapshot
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Limits, Policy
from tests.fakes import NOW, PDB_429, FakeClock, FakeCluster, ScriptedPlanner

ZONE = "topology.kubernetes.io/zone"
NS = "shop"


@dataclass
class ReadBy:
    """A source whose reads are ``read`` (the fake's, wrapped) and whose last placement is
    ``placement``'s."""

    read: Callable[[], Snapshot]
    placement: Callable[[], float | None] = lambda: None
    rejected: tuple[object, ...] = ()

    def last_placement(self) -> float | None:
        return self.placement()


def runner(
    fake: FakeCluster,
    policy: Policy | None = None,
    *,
    plan_fn: Callable[..., Plan] | None = None,
    stop: threading.Event | None = None,
    source: ReadBy | None = None,
    **settings: Any,
) -> Runner:
    clock = FakeClock()
    executor = ExecutorSettings(server_dry_run=settings.pop("server_dry_run", False), pdb_retries=1)
    return Runner(
        source or fake,
        fake,
        policy or Policy(),
        RunSettings(executor=executor, instance="test", **settings),
        plan_fn=plan_fn,
        stop=stop,
        clock=clock,
        wall_clock=lambda: NOW,
        sleep=clock.sleep,
    )


def test_each_wave_is_replanned_with_the_evictions_so_far() -> None:
    """Only wave 1 runs; the next plan comes from a fresh read with evicted_before."""
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    planner = ScriptedPlanner(fake, [2, 1, 0])
    report = runner(fake, plan_fn=planner).run_once("r1")
    assert planner.calls == [(), ("web-1",), ("web-1", "web-2")]
    assert fake.reads == 3
    assert [name for name, _ in fake.posts] == ["web-1", "web-2"]
    assert [len(w.results) for w in report.waves] == [1, 1]
    assert report.end == "balanced"
    assert report.evicted == 2
    assert report.planned == 2
    assert report.exit_code == 0


def test_a_wave_whose_replacements_come_back_ends_the_run() -> None:
    """When the scheduler puts every replacement back, the run stops instead of churning."""
    fake = FakeCluster({"a": 4, "b": 0})
    fake.stubborn = True
    planner = ScriptedPlanner(fake, [1, 1, 1, 1])
    report = runner(fake, plan_fn=planner, max_waves=4).run_once()
    assert report.end == "no-progress"
    assert len(fake.posts) == 1
    assert fake.zone_counts() == {"a": 4, "b": 0}


class SwappingCluster(FakeCluster):
    """A scheduler that puts every replacement on ``land_on``: from [2,1,0], a pod evicted
    from zone a lands in b, and the counts become [1,2,0]: a and b swapped."""

    land_on = ""

    def _add(self, node: str) -> str:
        return super()._add(self.land_on or node)


def test_a_wave_that_only_swaps_two_domains_counts_ends_the_run() -> None:
    """The same counts in other domains are no progress either (an unhelpful scheduler could
    swap them wave after wave): the run stops after the one wave, as when a replacement lands
    back where it was."""
    fake = SwappingCluster({"a": 2, "b": 1, "c": 0})
    fake.land_on = "node-b"
    planner = ScriptedPlanner(fake, [1, 1, 1, 1])
    report = runner(fake, plan_fn=planner, max_waves=4).run_once()
    assert fake.zone_counts() == {"a": 1, "b": 2, "c": 0}
    assert report.end == "no-progress"
    assert len(fake.posts) == 1


def test_a_wave_that_changes_the_counts_goes_on() -> None:
    """[2,1,0] -> [1,1,1] is progress (and here balanced by the script's next empty plan)."""
    fake = SwappingCluster({"a": 2, "b": 1, "c": 0})
    fake.land_on = "node-c"
    planner = ScriptedPlanner(fake, [1, 0])
    report = runner(fake, plan_fn=planner, max_waves=4).run_once()
    assert fake.zone_counts() == {"a": 1, "b": 1, "c": 1}
    assert report.end == "balanced"


def test_max_waves_bounds_a_run() -> None:
    """A run executes at most max_waves waves, then leaves the rest for the next run."""
    fake = FakeCluster({"a": 6, "b": 0})
    planner = ScriptedPlanner(fake, [5, 5, 5, 5])
    report = runner(fake, plan_fn=planner, max_waves=2).run_once()
    assert len(report.waves) == 2
    assert report.end == "max-waves"
    assert len(fake.posts) == 2
    assert report.final_plan is not None


def test_blocked_wave_ends_the_run_and_reports_it() -> None:
    """When nothing in a wave could be evicted, the run stops and reports it; a refusal by a
    PodDisruptionBudget is an outcome, not a failure (exit 0)."""
    fake = FakeCluster({"a": 3, "b": 0}, answers={"web-1": (429, PDB_429)})
    planner = ScriptedPlanner(fake, [1, 1, 1])
    report = runner(fake, plan_fn=planner).run_once()
    assert report.end == "nothing-evicted"
    assert report.blocked_by_pdb == 1
    assert report.exit_code == EXIT_OK
    assert fake.reads == 1
    assert [e["reason"] for e in fake.events] == [BLOCKED]
    assert fake.events[0]["type"] == "Warning"


def test_stop_during_a_wave_finishes_it_and_starts_no_new_one() -> None:
    """SIGTERM mid-wave: the eviction in flight completes, no further eviction or wave."""
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    stop = threading.Event()
    fake.on_post = stop.set
    planner = ScriptedPlanner(fake, [3, 3, 3])
    planner_calls_before = len(planner.calls)
    report = runner(fake, plan_fn=planner, stop=stop).run_once()
    assert report.end == "stopped"
    assert len(fake.posts) == 1
    assert len(planner.calls) == planner_calls_before + 1
    assert report.exit_code == 0


def test_dry_run_sends_nothing() -> None:
    """run --dry-run reads and plans, and never calls the transport."""
    fake = FakeCluster({"a": 3, "b": 0})
    report = runner(fake, plan_fn=ScriptedPlanner(fake, [1]), plan_only=True).run_once()
    assert report.end == "dry-run"
    assert fake.posts == []
    assert fake.events == []
    assert report.planned == 1


def test_server_dry_run_runs_one_wave_and_emits_no_events() -> None:
    """--server-dry-run sends wave 1 with dryRun=All once, changes nothing, emits no event."""
    fake = FakeCluster({"a": 3, "b": 0})
    report = runner(fake, plan_fn=ScriptedPlanner(fake, [2, 2]), server_dry_run=True).run_once()
    assert report.end == "server-dry-run"
    assert [r.outcome for r in report.results] == [Outcome.WOULD_EVICT]
    assert all(b["deleteOptions"]["dryRun"] == ["All"] for _, b in fake.posts)
    assert fake.zone_counts() == {"a": 3, "b": 0}
    assert fake.events == []


def test_real_planner_converges_and_emits_rebalanced_events() -> None:
    """With the real planner, zones [3,1,0] maxSkew 1 end balanced with one eviction."""
    fake = FakeCluster({"a": 3, "b": 1, "c": 0})
    report = runner(fake).run_once()
    assert report.end == "balanced"
    assert report.evicted == 1
    assert sorted(fake.zone_counts().values()) == [1, 1, 2]
    assert report.skew_before == 3
    assert report.skew_after == 1
    event = fake.events[0]
    assert event["reason"] == REBALANCED
    assert event["type"] == "Normal"
    assert event["involvedObject"]["kind"] == "Pod"
    assert ZONE in event["message"]
    assert f"{ZONE}=a" in event["message"]
    assert "node-c" in event["message"]


def test_real_planner_limits_carry_over_between_waves() -> None:
    """limits.total counts evictions of earlier waves: the run stops at the limit."""
    fake = FakeCluster({"a": 4, "b": 0})
    report = runner(fake, Policy(limits=Limits(total=1))).run_once()
    assert report.evicted == 1
    assert len(fake.posts) == 1
    assert report.end in ("nothing-to-evict", "balanced")
    assert report.final_plan is not None


def test_interval_mode_survives_a_failed_run_and_stops_on_request() -> None:
    """run_forever logs a run's cluster error, runs again, and returns 0 once stopped."""
    fake = FakeCluster({"a": 1, "b": 1})
    stop = threading.Event()
    reads = 0
    real_read = fake.read

    def flaky_read() -> Snapshot:
        nonlocal reads
        reads += 1
        if reads == 1:
            raise errors.Unreachable("connection refused")
        return real_read()

    r = runner(fake, plan_fn=ScriptedPlanner(fake, []), stop=stop, source=ReadBy(flaky_read))
    reports: list[Any] = []
    failures: list[RebalancerError] = []

    def on_report(report: Any) -> None:
        reports.append(report)
        stop.set()

    assert r.run_forever(0.01, on_report=on_report, on_error=failures.append) == 0
    assert len(failures) == 1
    assert len(reports) == 1


class _StopAfter(threading.Event):
    """A stop event whose waits are recorded (not slept) and which stops the loop after
    ``runs`` of them."""

    def __init__(self, runs: int) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.runs = runs

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        if len(self.waits) >= self.runs:
            self.set()
        return self.is_set()


@pytest.mark.parametrize(
    ("interval", "read_seconds", "expected"),
    [
        (5.0, 0.0, 5.0),  # an idle run: the whole interval
        (5.0, 1.5, 2.0),  # reads of 1.5 s each, two of them (before and after the wave)
        (10.0, 4.0, 2.0),
        (5.0, 3.0, 0.0),  # the run took 6 s: the next one starts at once
    ],
)
def test_interval_runs_from_start_to_start(
    interval: float, read_seconds: float, expected: float
) -> None:
    """--interval is a period, start to start (the descheduler's NonSlidingUntil): the wait
    after a run is the interval less the run's own time, never below zero. Here every run
    reads twice (one eviction, then the re-read), each read taking ``read_seconds`` of the
    runner's clock; the run's Ready wait is the fake's, which takes no time."""
    stop = _StopAfter(runs=2)
    fake = FakeCluster({"a": 2, "b": 0})
    source = ReadBy(fake.read)
    r = runner(fake, plan_fn=None, stop=stop, source=source)
    clock = r._clock
    assert isinstance(clock, FakeClock)

    def slow_read() -> Snapshot:
        clock.now += read_seconds
        return fake.read()

    source.read = slow_read
    assert r.run_forever(interval) == 0
    # the first run evicts once (two reads); the second finds it balanced (one read)
    assert stop.waits == [expected, max(0.0, interval - read_seconds)]


class _ClockStop(threading.Event):
    """A stop event whose waits move the runner's fake clock; stops at ``until``."""

    def __init__(self, clock: FakeClock, until: float) -> None:
        super().__init__()
        self.clock = clock
        self.until = until

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None and timeout >= 0
        self.clock.now = min(self.clock.now + timeout, self.until)
        if self.clock.now >= self.until:
            self.set()
        return self.is_set()


@pytest.mark.parametrize(
    ("interval", "react_after", "change_at", "second_run_at"),
    [
        (10.0, 1.0, None, 10.0),  # nothing placed: the interval
        (10.0, 1.0, 2.0, 3.0),  # placed at 2 s: 1 s later
        (10.0, 0.0, 2.0, 10.0),  # reacting off
        (10.0, 3.0, 8.0, 10.0),  # 3 s after 8 s is past the interval: the interval wins
        (30.0, 1.0, 0.5, 3.0),  # no sooner than a tenth of the interval after the start
        (10.0, 1.0, -1.0, 10.0),  # a change before the run started was in its read
    ],
)
def test_pods_placed_bring_the_next_run_forward(
    interval: float, react_after: float, change_at: float | None, second_run_at: float
) -> None:
    """--react-after: a placement seen since the run started makes the next run start
    react_after after it, no sooner than max(react_after, interval / 10) after the start,
    never later than the interval. Times by hand; the first run starts at 0."""
    fake = FakeCluster({"a": 1, "b": 1})
    clock = FakeClock()
    stop = _ClockStop(clock, until=100.0)
    starts: list[float] = []

    def read() -> Snapshot:
        starts.append(clock.now)
        if len(starts) == 2:
            stop.set()
        return fake.read()

    source = ReadBy(read, lambda: change_at)
    r = runner(fake, plan_fn=ScriptedPlanner(fake, []), stop=stop, source=source)
    r._clock = clock
    assert r.run_forever(interval, react_after=react_after) == 0
    assert starts == [0.0, second_run_at]


# -- the shell around the runner: credentials, pre-flight, flags, output, logs, metrics --------


def _kubeconfig(tmp_path: Path, name: str, contexts: dict[str, str]) -> Path:
    """A kubeconfig with one context per (name -> server)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": c, "cluster": {"server": s}} for c, s in contexts.items()],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": c, "context": {"cluster": c, "user": "u"}} for c in contexts],
        "current-context": next(iter(contexts)),
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def test_connect_uses_flag_then_context_then_env(tmp_path: Path) -> None:
    """--kubeconfig wins over $KUBECONFIG; --context picks the cluster."""
    flag = _kubeconfig(
        tmp_path, "flag", {"a": "https://127.0.0.1:7001", "b": "https://127.0.0.1:7002"}
    )
    env = _kubeconfig(tmp_path, "env", {"e": "https://127.0.0.1:7003"})
    kube = connect(str(flag), env={"KUBECONFIG": str(env)})
    assert kube.server == "https://127.0.0.1:7001"
    assert connect(str(flag), "b", env={}).server == "https://127.0.0.1:7002"
    from_env = connect(env={"KUBECONFIG": str(env), "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert from_env.server == "https://127.0.0.1:7003"
    assert from_env.source.startswith("$KUBECONFIG")


def test_connect_in_cluster_without_a_token_is_a_cluster_error() -> None:
    """In a pod (KUBERNETES_SERVICE_HOST set) the service account is used; no token: exit 3."""
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(errors.ClusterError, match="credentials") as caught:
        connect(env=env)
    assert caught.value.exit_code == EXIT_CLUSTER


class FakeAccess:
    """Answers SelfSubjectAccessReviews from a set of denied (verb, resource) pairs."""

    def __init__(self, denied: set[str]) -> None:
        self.denied = denied
        self.asked: list[tuple[str, str, str | None]] = []

    def can_i(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str | None = None,
        name: str = "",
    ) -> tuple[bool, str]:
        del name  # asked about one object: this fake answers per resource
        name = f"{resource}/{subresource}" if subresource else resource
        self.asked.append((verb, name, namespace))
        return f"{verb} {name}" not in self.denied, ""


def test_preflight_names_the_denied_verb_and_resource() -> None:
    """Missing create on pods/eviction fails the pre-flight with exit 3, naming it."""
    with pytest.raises(errors.Forbidden) as caught:
        preflight(FakeAccess({"create pods/eviction"}), None)
    assert str(caught.value).startswith("RBAC: cannot create pods/eviction (cluster-wide)")
    assert caught.value.exit_code == EXIT_CLUSTER


def test_preflight_scopes_to_the_namespace_and_only_warns_about_events() -> None:
    """With -n the checks are namespaced (nodes stay cluster-wide); events are optional."""
    access = FakeAccess({"create events"})
    preflight(access, "shop")
    assert ("create", "pods/eviction", "shop") in access.asked
    assert ("list", "nodes", None) in access.asked


def test_preflight_only_warns_without_nodepools_and_asks_cluster_wide() -> None:
    """A ClusterRole from before NodePools were read: the run goes on (they read as none)."""
    denied = {"list nodepools", "watch nodepools"}
    access = FakeAccess(denied)
    checks = run_checks(evicting=False, watching=True, steering=False)
    with structlog.testing.capture_logs() as logged:
        preflight(access, "shop", checks)
    assert ("list", "nodepools", None) in access.asked
    assert ("watch", "nodepools", None) in access.asked
    warned = [e["missing"] for e in logged if e["event"] == "run.preflight_warning"]
    assert warned == ["list nodepools.karpenter.sh", "watch nodepools.karpenter.sh"]
    assert [e["event"] for e in logged][-1] == "run.preflight"


_ASKED_BY_EVERY_RUN = {
    "create pods/eviction",
    "get pods",
    "list pods",
    "get nodes",
    "list nodes",
    "create events",
    "list deployments.apps",
    "get poddisruptionbudgets.policy",
    "list nodepools.karpenter.sh",
}


@pytest.mark.parametrize("evicting", [False, True])
@pytest.mark.parametrize("watching", [False, True])
@pytest.mark.parametrize("steering", [False, True])
def test_a_run_asks_for_what_its_mode_uses(evicting: bool, watching: bool, steering: bool) -> None:
    """The Lease's verbs only when evicting, the watches only in watch mode, the PATCH of pods
    only when steering; every run asks the rest."""
    expected = set(_ASKED_BY_EVERY_RUN)
    if evicting:
        expected |= {"get leases.coordination.k8s.io", "create leases.coordination.k8s.io"}
        expected |= {"update leases.coordination.k8s.io"}
    if watching:
        expected |= {"watch pods", "watch nodes", "watch nodepools.karpenter.sh"}
    if steering:
        expected |= {"patch pods"}
    checks = run_checks(evicting=evicting, watching=watching, steering=steering)
    assert sorted(f"{c.verb} {c.name}" for c in checks) == sorted(expected)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--interval", "5x"], "--interval"),
        (["run", "--max-waves", "0"], "--max-waves"),
        (["run", "--wave-timeout", "soon"], "--wave-timeout"),
        (["run", "--metrics-bind-address", "127.0.0.1:8080"], "only with --interval"),
        (["run", "--interval", "1m", "--metrics-bind-address", "nowhere"], "HOST:PORT"),
        (["run", "--interval", "1m", "--workload-cooldown", "soon"], "--workload-cooldown"),
        (["run", "--interval", "1m", "--verify-state-every", "-1"], "must be >= 0"),
        (["run", "--verify-state-every", "2"], "only with --interval and the watch"),
        (["run", "--interval", "1m", "--relist", "--verify-state-every", "2"], "not --relist"),
    ],
)
def test_bad_run_flags_exit_2_before_any_request(
    argv: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Flag problems exit 2 and no connection to any cluster is even attempted."""
    monkeypatch.setattr(kubeclient, "connect", lambda *a, **k: pytest.fail("connected"))
    assert main(argv) == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def test_grace_zero_policy_exits_2_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy with gracePeriodSeconds 0 is rejected before rebalancer connects."""
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\ngracePeriodSeconds: 0\n"
    )
    monkeypatch.setattr(kubeclient, "connect", lambda *a, **k: pytest.fail("connected"))
    assert main(["run", "--policy", str(policy)]) == EXIT_BAD_INPUT


def test_run_output_as_json_has_plan_results_and_summary() -> None:
    """run -o json carries the first plan, one row per eviction, the summary and exit code."""
    fake = FakeCluster({"a": 3, "b": 1, "c": 0})
    report = runner(fake).run_once("abc")
    data = json.loads(render_run(report, "json"))
    assert data["runId"] == "abc"
    assert len(data["plan"]["evictions"]) == 1
    assert data["results"][0]["outcome"] == "evicted"
    assert data["summary"]["evicted"] == 1
    assert data["exitCode"] == 0
    table = render_run(report, "table")
    assert "Executed:" in table and "evicted" in table


def test_logs_are_json_lines_with_the_run_id_off_a_terminal() -> None:
    """Off a terminal, every log line is one JSON object carrying the bound run id."""
    stream = io.StringIO()
    configure_logging(stream=stream)
    try:
        logs.bind_run_id("r-42")
        logs.get_logger().info(logs.RUN_SUMMARY, planned=2, evicted=1)
    finally:
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["event"] == "run.summary"
    assert line["run_id"] == "r-42"
    assert line["planned"] == 2


def test_metrics_record_a_run() -> None:
    """Evictions by result, planned moves, skews and the run duration are exported."""
    fake = FakeCluster({"a": 3, "b": 1, "c": 0})
    report = runner(fake).run_once()
    metrics = Metrics()
    metrics.record(report)
    value = metrics.registry.get_sample_value
    assert value("rebalancer_evictions_total", {"result": "evicted"}) == 1
    assert value("rebalancer_evictions_total", {"result": "blocked-by-pdb"}) == 0
    assert value("rebalancer_planned_moves") == 1
    assert value("rebalancer_run_duration_seconds_count") == 1
    labels = {
        "namespace": NS,
        "topology_key": ZONE,
        "selector": "app=web",
        "max_skew": "1",
        "when_unsatisfiable": "DoNotSchedule",
    }
    assert value("rebalancer_skew_before", labels) == 3
    assert value("rebalancer_skew_after", labels) == 1
    assert value("rebalancer_runs_total", {"result": "ok"}) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        (":9090", ("0.0.0.0", 9090)),
        ("[::1]:80", ("::1", 80)),
    ],
)
def test_bind_address_parsing(text: str, expected: tuple[str, int]) -> None:
    """HOST:PORT, :PORT and [v6]:PORT are accepted."""
    assert parse_bind_address(text) == expected


# -- PodDisruptionBudgets between waves --------------------------------------------------------


class BudgetCluster(FakeCluster):
    """FakeCluster with a PDB (maxUnavailable 1) over the web pods: an eviction spends its
    budget, and the 'disruption controller' gives it back only after ``lag`` GETs of it."""

    def __init__(self, zones: dict[str, int], lag: int) -> None:
        super().__init__(zones)
        self.allowed = 1
        self.lag = lag
        self.pending = 0
        self.gets = 0
        self.allowed_at_read: list[int] = []

    def pdb(self) -> dict[str, Any]:
        pods = len(self.pods)
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": NS, "generation": 1},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {
                "observedGeneration": 1,
                "disruptionsAllowed": self.allowed,
                "currentHealthy": pods - 1 + self.allowed,
                "desiredHealthy": pods - 1,
                "expectedPods": pods,
            },
        }

    def read(self) -> Snapshot:
        self.reads += 1
        self.allowed_at_read.append(self.allowed)
        return snapshot_from_objects([*self.nodes.values(), *self.pods.values(), self.pdb()])

    def post_eviction(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        assert self.allowed > 0, "the plan sent an eviction the API server would answer 429"
        answer = super().post_eviction(namespace, name, body)
        self.allowed -= 1
        self.pending = self.lag
        return answer

    def get_pdb(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        if self.pending > 0:
            self.pending -= 1
        else:
            self.allowed = 1
        return self.pdb()


def budget_runner(fake: BudgetCluster, *, wait: bool) -> tuple[Runner, FakeClock]:
    clock = FakeClock()
    settle = RunSettings().pdb_settle_seconds if wait else 0.0
    settings = RunSettings(
        executor=ExecutorSettings(pdb_retries=0), instance="test", pdb_settle_seconds=settle
    )
    run = Runner(
        fake, fake, Policy(), settings, clock=clock, wall_clock=lambda: NOW, sleep=clock.sleep
    )
    return run, clock


def test_the_next_wave_waits_for_the_pdb_to_give_its_budget_back() -> None:
    """[3,0,0] under a PDB allowing 1: wave 1 evicts one pod, the runner waits (GETs of the
    PDB, 0.5 s apart) until the budget is back, re-plans, and wave 2 evicts the other."""
    fake = BudgetCluster({"a": 3, "b": 0, "c": 0}, lag=3)
    run, clock = budget_runner(fake, wait=True)
    report = run.run_once("r1")
    assert [e.wave for e in report.first_plan.evictions] == [1, 2]
    assert {e.pdb for e in report.first_plan.evictions} == {"web"}
    assert [len(w.results) for w in report.waves] == [1, 1]
    assert report.evicted == 2 and report.blocked_by_pdb == 0
    assert report.end == "balanced"
    assert fake.allowed_at_read == [1, 1, 1]  # every plan saw the budget back
    assert fake.gets == 2 * (3 + 1)
    assert clock.sleeps.count(0.5) == 2 * 3
    assert fake.zone_counts() == {"a": 1, "b": 1, "c": 1}


def test_without_the_wait_a_lagging_pdb_makes_the_next_plan_skip_its_pods() -> None:
    """The same cluster, no PDB GETs: the re-plan sees the budget spent and skips (pdb)."""
    fake = BudgetCluster({"a": 3, "b": 0, "c": 0}, lag=3)
    run, _ = budget_runner(fake, wait=False)
    report = run.run_once("r1")
    assert report.evicted == 1
    assert report.end == "nothing-to-evict"
    assert report.final_plan is not None
    skipped = report.final_plan.skipped
    in_a = {p["metadata"]["name"] for p in fake.pods.values() if p["spec"]["nodeName"] == "node-a"}
    landed = str(report.results[0].replacement)
    # the replacement that just landed is held by the thrash guard too, but the spent budget,
    # a rule that forbids the eviction at all, is the reason named first (SPEC §3.12)
    pdb = {s.name for s in skipped if s.reason.code == "pdb"}
    assert in_a <= pdb <= in_a | {landed.partition("/")[2]}
    assert {f"{s.namespace}/{s.name}" for s in skipped if s.reason.code != "pdb"} <= {landed}
    assert fake.gets == 0


def test_a_budget_that_never_comes_back_ends_the_wait_at_pdb_settle_seconds() -> None:
    """A PDB stuck at 0 is polled for pdb_settle_seconds (fake clock), then the run re-plans."""
    fake = BudgetCluster({"a": 3, "b": 0, "c": 0}, lag=10_000)
    run, clock = budget_runner(fake, wait=True)
    report = run.run_once("r1")
    assert report.evicted == 1
    assert report.end == "nothing-to-evict"
    assert 30.0 <= clock.now < 31.0
    assert fake.gets == 61  # at 0, 0.5, ..., 30 s


class ShrunkCluster(BudgetCluster):
    """The workload was scaled down during the wave: the disruption controller now expects
    fewer pods, all of them healthy, and allows ``allowed_now`` (less than before the wave)."""

    def __init__(self, zones: dict[str, int], *, allowed_now: int, healthy_gap: int) -> None:
        super().__init__(zones, lag=10_000)
        self.allowed_now = allowed_now
        self.healthy_gap = healthy_gap  # expected pods not healthy (0: all healthy)
        self.disrupted: dict[str, str] = {}

    def get_pdb(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        doc = self.pdb()
        expected = len(self.pods) - 1
        doc["status"].update(
            disruptionsAllowed=self.allowed_now,
            expectedPods=expected,
            currentHealthy=expected - self.healthy_gap,
            desiredHealthy=expected - 1,
        )
        if self.disrupted:
            doc["status"]["disruptedPods"] = self.disrupted
        return doc


@pytest.mark.parametrize(
    ("allowed_now", "healthy_gap", "disrupted", "waits"),
    [
        (0, 0, False, False),  # all it expects healthy: the smaller budget is the new size
        (0, 1, False, True),  # a pod it expects is not healthy: wait (to the bound)
        (0, 0, True, True),  # an eviction not yet observed (disruptedPods): wait
        (1, 1, False, False),  # the budget is back whatever the health
    ],
)
def test_a_pdb_whose_workload_shrank_ends_the_wait_once_all_it_expects_is_healthy(
    allowed_now: int, healthy_gap: int, disrupted: bool, waits: bool
) -> None:
    """Before the wave the PDB allowed 1; after it the workload shrank, so its budget stays
    below that. The runner waits only while the PDB's status shows a pod it expects unhealthy
    or an eviction not yet observed."""
    fake = ShrunkCluster({"a": 3, "b": 0, "c": 0}, allowed_now=allowed_now, healthy_gap=healthy_gap)
    if disrupted:
        fake.disrupted = {"web-3": "2026-01-01T00:00:00Z"}
    clock = FakeClock()
    settings = RunSettings(executor=ExecutorSettings(pdb_retries=0), instance="test")
    run = Runner(
        fake, fake, Policy(), settings, clock=clock, wall_clock=lambda: NOW, sleep=clock.sleep
    )
    run.run_once("r1")
    if waits:
        assert fake.gets == 61 and 30.0 <= clock.now < 31.0
    else:
        assert fake.gets == 1 and clock.now < 1.0


def test_a_pdb_rbac_will_not_let_us_read_ends_the_wait_at_once() -> None:
    """403 on the PDB GET: no waiting (nothing to learn); the re-plan decides from the read."""

    class Forbidden(BudgetCluster):
        def get_pdb(self, namespace: str, name: str) -> dict[str, Any] | None:
            self.gets += 1
            raise errors.Forbidden(403, "denied", verb="get", resource="poddisruptionbudgets")

    fake = Forbidden({"a": 3, "b": 0, "c": 0}, lag=10_000)
    clock = FakeClock()
    settings = RunSettings(executor=ExecutorSettings(pdb_retries=0), instance="test")
    run = Runner(
        fake, fake, Policy(), settings, clock=clock, wall_clock=lambda: NOW, sleep=clock.sleep
    )
    report = run.run_once("r1")
    assert fake.gets == 1
    assert 0.5 not in clock.sleeps
    assert report.evicted == 1 and report.end == "nothing-to-evict"


def _all_planned_snapshots() -> list[tuple[str, Any, Any]]:
    """(name, snapshot, policy) for every planner case, the bundled example, and generated
    clusters under a few policies."""
    from bench.gen import generate  # noqa: PLC0415
    from rebalancer.cluster.read.policyfile import load_policy  # noqa: PLC0415
    from rebalancer.cluster.read.snapshot import load_snapshot  # noqa: PLC0415
    from tests.casedsl import build_snapshot  # noqa: PLC0415

    root = Path(__file__).parent
    out: list[tuple[str, Any, Any]] = []
    cases = yaml.safe_load((root / "data" / "planner_cases.yaml").read_text())["cases"]
    for case in cases:
        doc = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy"}
        doc.update(case.get("policy") or {})
        out.append((case["name"], build_snapshot(case), load_policy(yaml.safe_dump(doc), "case")))
    out.append(
        ("example", load_snapshot(str(root.parent / "examples" / "skewed-cluster.yaml")), Policy())
    )
    anyway = load_policy(
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"
        "constraints: [DoNotSchedule, ScheduleAnyway]\n",
        "both",
    )
    for seed in (1, 2, 3):
        snap = snapshot_from_objects(list(generate(40, 600, seed)), "gen")
        out.append((f"gen-{seed}", snap, Policy()))
        out.append((f"gen-{seed}-anyway", snap, anyway))
    return out


def _skews_by_analysis(snap: Snapshot, policy: Policy) -> dict[tuple[str, str, str, int, str], int]:
    """The oracle: every view's skew from a second, separate analysis, the largest per key."""
    from rebalancer.core.selectors import selector_string  # noqa: PLC0415
    from rebalancer.core.spread import analyze  # noqa: PLC0415

    skews: dict[tuple[str, str, str, int, str], int] = {}
    for view in analyze(snap, policy).views:
        c = view.spec.constraint
        key = (
            view.spec.namespace,
            c.topology_key,
            selector_string(c.selector),
            c.max_skew,
            c.when_unsatisfiable,
        )
        skews[key] = max(skews.get(key, 0), view.skew)
    return skews


def test_a_plans_skews_are_what_a_second_analysis_of_its_snapshot_reports() -> None:
    """A run reports the skews after from the last plan (runner.plan_skews: the plan carries
    every view's skew) instead of analysing the whole cluster again: they equal a separate
    analysis's, on every planner case, the example and generated clusters."""
    checked = 0
    for name, snap, policy in _all_planned_snapshots():
        result = plan(snap, policy, 1_000_000.0)
        carried = runner_mod.plan_skews(result)
        assert carried == _skews_by_analysis(snap, policy), name
        checked += sum(1 for v in result.violations if v.key in carried)
    assert checked > 50  # the check saw many violated views
