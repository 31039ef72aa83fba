"""The command line: exit codes, stdout/stderr, environment fallbacks and the live commands."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rebalancer import __version__
from rebalancer.cli.common import POLICY_ENV, PlanOptions
from rebalancer.cli.main import main
from rebalancer.cli.options import add_cluster_arguments
from rebalancer.cluster.api.errors import ClusterError
from rebalancer.core.policy import Policy, policy_to_dict

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_POLICY = ROOT / "policies" / "default.yaml"
SNAPSHOT = Path(__file__).parent / "data" / "cli_snapshot.yaml"
HEADER = "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"


@pytest.fixture
def bad_policy(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(HEADER + "gracePeriodSeconds: 0\nnodefit: false\nlimits: {perNode: -1}\n")
    return path


def _fake_live(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, Policy]]) -> None:
    """Stand-ins for the live plan and the live commands (plan's cluster flags, a run)."""

    def plan_live(options: PlanOptions, policy: Policy) -> int:
        assert options.connection is not None
        context = options.connection.context or "kind"
        calls.append((context, policy))
        if context == "unreachable":
            raise ClusterError("cannot reach https://127.0.0.1:6443: connection refused")
        return 0

    def add_live_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        add_cluster_arguments(subparsers.choices["plan"])
        add_cluster_arguments(subparsers.choices["explain"])
        run = subparsers.add_parser("run")
        run.set_defaults(handler=lambda args: 1)

    monkeypatch.setattr("rebalancer.cli.main.add_live_commands", add_live_commands)
    monkeypatch.setattr("rebalancer.cli.main.plan_live", plan_live)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version and exits 0."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rebalancer {__version__}"


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Running without a subcommand prints usage to stderr and exits 2."""
    assert main([]) == 2
    assert "usage: rebalancer" in capsys.readouterr().err


def test_policy_check_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """policy check on a valid file says 'FILE: ok' on stderr and prints nothing on stdout;
    -o yaml prints the effective policy on stdout, a file policy check accepts again."""
    assert main(["policy", "check", str(DEFAULT_POLICY)]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"{DEFAULT_POLICY}: ok\n")
    assert main(["policy", "check", str(DEFAULT_POLICY), "-o", "yaml"]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"{DEFAULT_POLICY}: ok\n"
    assert yaml.safe_load(captured.out) == policy_to_dict(Policy())
    effective = tmp_path / "eff.yaml"
    effective.write_text(captured.out)
    assert main(["policy", "check", str(effective)]) == 0
    assert capsys.readouterr().err == f"{effective}: ok\n"


def test_policy_check_points_a_descheduler_policy_at_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DeschedulerPolicy given to policy check gets one problem: convert it with policy
    import (not a list of unknown keys); exit 2."""
    policy = tmp_path / "descheduler.yaml"
    policy.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
        "- name: p\n  pluginConfig: []\n  plugins: {}\n"
    )
    assert main(["policy", "check", str(policy)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{policy}: 1 problem(s):",
        f"  - this is a descheduler policy: convert it with `rebalancer policy import {policy}`",
    ]


def test_policy_check_reports_every_problem(
    bad_policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """policy check on a bad file lists every problem on stderr, no traceback, exit 2."""
    assert main(["policy", "check", str(bad_policy)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"{bad_policy}: 3 problem(s):",
        "  - nodefit: unknown key; did you mean nodeFit?",
        "  - limits.perNode: must be an integer >= 0 or null, got -1",
        "  - gracePeriodSeconds: 0 means no grace period; use >= 1 or omit",
    ]


def test_policy_check_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """policy check on a file that does not exist exits 2 naming the file."""
    missing = tmp_path / "missing.yaml"
    assert main(["policy", "check", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err
    assert "Traceback" not in err


def test_plan_with_a_missing_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """plan with a snapshot path that does not exist exits 2 with a message naming it."""
    missing = tmp_path / "nope.yaml"
    assert main(["plan", "--snapshot", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert str(missing) in captured.err
    assert "Traceback" not in captured.err


def test_plan_bad_policy_from_env(
    bad_policy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """$REBALANCER_POLICY is used when --policy is absent; its problems exit 2."""
    monkeypatch.setenv(POLICY_ENV, str(bad_policy))
    assert main(["plan", "--snapshot", str(SNAPSHOT)]) == 2
    assert f"{bad_policy}: 3 problem(s):" in capsys.readouterr().err


def test_policy_flag_beats_env(
    bad_policy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--policy overrides $REBALANCER_POLICY."""
    monkeypatch.setenv(POLICY_ENV, str(DEFAULT_POLICY))
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--policy", str(bad_policy)]) == 2
    assert str(bad_policy) in capsys.readouterr().err


def test_plan_namespace_excluded_by_policy(capsys: pytest.CaptureFixture[str]) -> None:
    """-n with a namespace the policy excludes exits 2 instead of planning nothing."""
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-n", "kube-system"]) == 2
    assert "kube-system is in the policy's namespaces.exclude" in capsys.readouterr().err


def test_explain_pod_must_be_namespace_slash_name(capsys: pytest.CaptureFixture[str]) -> None:
    """explain --pod without a namespace is a usage error, exit 2."""
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--pod", "web-0"]) == 2
    assert "must be NAMESPACE/NAME" in capsys.readouterr().err


def test_live_hook_handles_plan_without_snapshot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The live plan handler gets the options and the policy narrowed by -n."""
    calls: list[tuple[str, Policy]] = []
    _fake_live(monkeypatch, calls)
    assert main(["plan", "--context", "prod", "-n", "shop"]) == 0
    [(context, policy)] = calls
    assert context == "prod"
    assert policy.namespaces_include == ("shop",)


def test_live_hook_adds_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands the live module registers run through main and return their exit code."""
    _fake_live(monkeypatch, [])
    assert main(["run"]) == 1


def test_cluster_error_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ClusterError from a live command exits 3 with its message on stderr."""
    _fake_live(monkeypatch, [])
    assert main(["plan", "--context", "unreachable"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("rebalancer: cluster error: cannot reach")
    assert "Traceback" not in err


def test_python_dash_m(tmp_path: Path) -> None:
    """`python -m rebalancer` runs the same command line."""
    result = subprocess.run(
        [sys.executable, "-m", "rebalancer", "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"rebalancer {__version__}"


# ---- These need the planner, the snapshot loader and explain. ----------------------------------


def test_plan_json_from_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    """plan --snapshot -o json prints the JSON contract: zones [3,1] maxSkew 1 -> 1 eviction."""
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["evictions"] == 1
    assert data["summary"]["minimal"] is True
    assert data["evictions"][0]["domain"] == "eu-west-1a"


def test_plan_table_from_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    """plan --snapshot prints the table for people by default."""
    assert main(["plan", "--snapshot", str(SNAPSHOT)]) == 0
    out = capsys.readouterr().out
    assert "eu-west-1a:3->2 eu-west-1b:1->2" in out
    assert out.splitlines()[0].startswith("1 eviction, proven minimal, in 1 wave (a run re-plans")


def test_plan_namespace_without_pods(capsys: pytest.CaptureFixture[str]) -> None:
    """-n narrows the plan to one namespace: another namespace has nothing to evict."""
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-n", "billing", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["evictions"] == []


def test_explain_json_from_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    """explain -o json shows the pod's constraint with a count for each zone."""
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--pod", "shop/web-0", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["namespace"], data["name"], data["node"]) == ("shop", "web-0", "node-a1")
    assert list(data["constraints"][0]["matchCounts"]) == ["eu-west-1a", "eu-west-1b"]


def test_explain_unknown_pod(capsys: pytest.CaptureFixture[str]) -> None:
    """explain for a pod not in the snapshot exits 2."""
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--pod", "shop/nope"]) == 2
    err = capsys.readouterr().err
    assert "shop/nope" in err
    assert "Traceback" not in err


def _no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt ends the command with exit 3 and says so."""

    def connect(*_args: object, **_kwargs: object) -> None:
        raise ClusterError("reached the cluster")

    monkeypatch.setattr("rebalancer.cluster.act.live.connect", connect)
    monkeypatch.setattr("rebalancer.cluster.read.live.connect", connect)


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["run", "--relist"], "--relist: only with --interval"),
        (["run", "--workload-cooldown", "10s"], "--workload-cooldown: only with --interval"),
        (["run", "--workload-cooldown", "0s"], "--workload-cooldown: only with --interval"),
        (["run", "--react-after", "1s"], "--react-after: only with --interval and the watch"),
        (
            ["run", "--interval", "1m", "--relist", "--react-after", "5s"],
            "--react-after: only with --interval and the watch, not --relist",
        ),
        (["run", "--wait-for-nodes-after", "0s"], "--wait-for-nodes-after: only with --interval"),
        (["run", "--pushgateway-job", "nightly"], "--pushgateway-job: only with --pushgateway"),
        (["plan", "--pushgateway-job", "nightly"], "--pushgateway-job: only with --pushgateway"),
        (["plan", "--skip-invalid"], "--skip-invalid: only with --snapshot"),
        (["plan", "--snapshot", str(SNAPSHOT), "--context", "kind"], "--context: not with"),
        (["plan", "--snapshot", str(SNAPSHOT), "--paged-lists"], "--paged-lists: not with"),
        (
            ["plan", "--snapshot", str(SNAPSHOT), "--request-timeout", "60s"],
            "--request-timeout: not with --snapshot",
        ),
        (
            ["explain", "--snapshot", str(SNAPSHOT), "default/web-0", "--max-objects", "10"],
            "--max-objects: not with --snapshot",
        ),
        (["explain", "default/web-0", "--paged-lists"], "--paged-lists: not with explain"),
    ],
)
def test_a_flag_that_does_not_apply_is_refused(
    argv: list[str],
    reason: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A flag given where it changes nothing (its default's value included) exits 2 naming the
    flag and why, before any connection; it is never ignored."""
    _no_cluster(monkeypatch)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert reason in err
    assert "reached the cluster" not in err


def test_the_refusals_name_every_flag_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """All loop-mode flags given to a one-shot run are refused in one message."""
    _no_cluster(monkeypatch)
    argv = ["run", "--relist", "--workload-cooldown", "1m", "--react-after", "2s"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(flag in err for flag in ("--relist:", "--workload-cooldown:", "--react-after:"))


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--interval", "1m", "--relist", "--workload-cooldown", "0s"],
        ["run", "--interval", "1m", "--react-after", "0s", "--wait-for-nodes-after", "1m"],
        ["run", "--pushgateway", "http://127.0.0.1:9091", "--pushgateway-job", "nightly"],
        ["plan", "--context", "kind", "--request-timeout", "5s", "--paged-lists"],
        ["explain", "default/web-0", "--context", "kind"],
    ],
)
def test_the_same_flags_where_they_apply_are_taken(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the flags they need, the same flags pass the checks: the command goes on to the
    cluster (here: exit 3 from a stand-in connection)."""
    _no_cluster(monkeypatch)
    assert main(argv) == 3
    assert "reached the cluster" in capsys.readouterr().err
