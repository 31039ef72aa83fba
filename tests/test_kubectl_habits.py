"""The command line read and driven as kubectl is: a table that fits the terminal with a
WORKLOAD column and sections in reading order, a summary that says what the next run does,
``-o wide``, ``--dry-run=none|client|server``, ``completion``, ``explain NS/POD`` and
``explain -n NS POD`` (also against the live cluster), ``--log-level`` and ``--log-format``,
and a word on stderr when ``-n`` matches no pod.

The expected figures are read off examples/skewed-cluster.yaml by hand: its plan evicts web
and api pods in three waves (wave 1: 2 evictions, wave 2: 2, wave 3: 1).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from rebalancer.cli import logconfig
from rebalancer.cli.main import build_parser, main
from rebalancer.cli.render import TableStyle, render_plan
from rebalancer.cluster.read import live
from rebalancer.cluster.read.snapshot import load_snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "skewed-cluster.yaml"
POD = "shop/web-vchvtjw47k-j5f5v"


def _out(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> str:
    assert main(argv) == code
    return capsys.readouterr().out


@pytest.fixture(autouse=True)
def _no_policy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REBALANCER_POLICY", raising=False)


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """The logging a test configures (a level, a captured stream) is undone after it."""
    saved, last_resort = structlog.get_config(), logging.lastResort
    yield
    structlog.configure(**saved)
    logging.lastResort = last_resort


# --------------------------------------------------------------------------------------------
# The table


def _summary(table: str) -> str:
    return " ".join(table[: table.index("\n\n")].splitlines())


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            [],
            "Next run (--max-waves 5, --wave-timeout 10m, no limits): waves 1-3 of 3, 5 "
            "evictions, at most 30m waiting for replacements; the whole plan takes one run. "
            "Holds: pods-unplaced 2m, node-drifting; with --interval also thrash-guard 1h.",
        ),
        (
            ["--max-waves", "2"],
            "Next run (--max-waves 2, --wave-timeout 10m, no limits): waves 1-2 of 3, 4 "
            "evictions, at most 20m waiting for replacements; the whole plan takes 2 runs. "
            "Holds: pods-unplaced 2m, node-drifting; with --interval also thrash-guard 1h.",
        ),
        (
            ["--max-waves", "1", "--wave-timeout", "90s"],
            "Next run (--max-waves 1, --wave-timeout 1m30s, no limits): wave 1 of 3, 2 "
            "evictions, at most 1m30s waiting for replacements; the whole plan takes 3 runs. "
            "Holds: pods-unplaced 2m, node-drifting; with --interval also thrash-guard 1h.",
        ),
    ],
)
def test_summary_says_what_the_next_run_does(
    flags: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The summary ends with the next run's waves (up to --max-waves), evictions, its longest
    wait (waves x --wave-timeout), the runs the whole plan takes and the holds in force."""
    table = _out(["plan", "--snapshot", str(EXAMPLE), *flags], capsys)
    assert _summary(table).endswith(expected)


def test_next_run_in_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """-o json has the same figures under nextRun, the policy's limits named."""
    data = json.loads(
        _out(["plan", "--snapshot", str(EXAMPLE), "--max-waves", "2", "-o", "json"], capsys)
    )
    assert data["version"] == 2
    assert data["nextRun"] == {
        "maxWaves": 2,
        "waveTimeoutSeconds": 600,
        "limits": "no limits",
        "waves": 2,
        "evictions": 4,
        "maxSeconds": 1200,
        "planWaves": 3,
        "runs": 2,
        "window": None,
        "holds": {"applied": ["pods-unplaced", "node-drifting"], "loopOnly": ["thrash-guard"]},
        "capacity": {"reserve": False},
    }
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\nlimits: {total: 3}\n"
    )
    data = json.loads(
        _out(["plan", "--snapshot", str(EXAMPLE), "--policy", str(policy), "-o", "json"], capsys)
    )
    assert data["nextRun"]["limits"] == "limits.total 3"
    assert data["nextRun"]["evictions"] == len(data["evictions"]) <= 3


def test_sections_come_in_reading_order(capsys: pytest.CaptureFixture[str]) -> None:
    """Summary, left above maxSkew, violations, plan, skipped."""
    lines = _out(["plan", "--snapshot", str(EXAMPLE)], capsys).splitlines()
    titles = [line.split(" (")[0] for line in lines if line and not line[0].isspace()]
    sections = [t for t in titles if t in {"Left above maxSkew", "Violations", "Plan", "Skipped"}]
    assert sections == ["Left above maxSkew", "Violations", "Plan", "Skipped"]
    assert lines.index(next(t for t in lines if t.startswith("Left above"))) < 8


def test_workload_column_and_the_pdb_named(capsys: pytest.CaptureFixture[str]) -> None:
    """A view is named by its workload (kubectl's short kind), the PDB holding a view by its
    name, and a plan row gives workload, target and the key and skew it repairs."""
    lines = _out(["plan", "--snapshot", str(EXAMPLE)], capsys).splitlines()
    left = lines.index("Left above maxSkew (2, worst first)")
    held = ["payments", "zone", "3->3", "1", "pdb", "worker", "3", "deploy/worker"]
    assert lines[left + 2].split() == held
    assert lines[left + 3].split() == ["data", "zone", "2->2", "1", "has-pvc", "2", "sts/cache"]
    row = next(line for line in lines if line.startswith(f"  1     {POD}"))
    assert row.split() == [
        "1",
        POD,
        "deploy/web",
        "node-a3",
        "node-c2",
        "(eu-west-1c)",
        "zone",
        "skew",
        "5>1,",
        "pdb",
        "web",
    ]


def test_wide_keeps_the_whole_reason(capsys: pytest.CaptureFixture[str]) -> None:
    """-o wide is --wide: the full reason, the priority, the selector, nothing cut."""
    wide = _out(["plan", "--snapshot", str(EXAMPLE), "-o", "wide"], capsys)
    assert wide == _out(["plan", "--snapshot", str(EXAMPLE), "--wide"], capsys)
    assert (
        "topology.kubernetes.io/zone=eu-west-1a holds 6 pods matching app=web,pod-template-hash"
        " in (vchvtjw47k), global min 1, skew 5 > maxSkew 1" in wide
    )
    assert "PRIORITY" in wide and "SELECTOR" in wide


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench.gen's small cluster (100 nodes, 3,000 pods)."""
    out = tmp_path_factory.mktemp("gen") / "small.json"
    subprocess.run(
        [sys.executable, "-m", "bench.gen", "--size", "small", "-o", str(out)],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    return out


def _plan_rows(lines: list[str]) -> list[str]:
    """The Plan section's rows, each with the line folded under it (if any) joined to it."""
    at = next(i for i, line in enumerate(lines) if line.startswith("Plan ("))
    rows: list[str] = []
    for line in lines[at + 2 : lines.index("", at)]:
        if re.match(r"  \d", line):
            rows.append(line)
        elif line.startswith("    ") and rows:
            rows[-1] += line
    return rows


@pytest.mark.parametrize("width", [80, 109, 119])
def test_a_generated_cluster_fits_the_width(small_cluster: Path, width: int) -> None:
    """Every line fits, counted in UTF-8 bytes (what mawk's length counts); every shown plan
    row keeps its pod, workload, node and target whole, on its line or the one folded under
    it; each long section ends with how many more."""
    planned = plan(load_snapshot(str(small_cluster)), Policy(), 1_000_000.0)
    assert len(planned.evictions) > 10
    table = render_plan(planned, "table", TableStyle(width=width))
    lines = table.splitlines()
    assert max(len(line.encode()) for line in lines) <= width
    rows = _plan_rows(lines)
    for row, e in zip(rows, planned.evictions[:10], strict=True):
        kind, _, name = e.workload.partition("/")
        short = {"Deployment": "deploy", "StatefulSet": "sts"}.get(kind, kind.lower())
        assert row.split()[:4] == [str(e.wave), e.key, f"{short}/{name}", e.node]
        assert f"{e.target_node} ({e.target_domain})" in row
    assert len(rows) == 10
    assert (
        f"  (+{len(planned.evictions) - 10} more evictions, in {len(planned.waves)} waves: "
        "--all lists them all, -o wide in full)"
    ) in lines
    every = render_plan(planned, "table", TableStyle(width=width, rows=None)).splitlines()
    assert [row.split()[0] for row in _plan_rows(every)] == [str(e.wave) for e in planned.evictions]


def test_piped_output_is_120_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """Not a terminal: 120 columns, unless -o wide."""
    out = _out(["plan", "--snapshot", str(EXAMPLE)], capsys)
    assert max(len(line.encode()) for line in out.splitlines()) <= 120
    wide = _out(["plan", "--snapshot", str(EXAMPLE), "-o", "wide"], capsys)
    assert max(len(line) for line in wide.splitlines()) > 120


def test_a_terminal_keeps_its_last_column_free() -> None:
    """In a 110-column pseudo-terminal (as `script -qec "stty cols 110; ..."` shows it) no line
    reaches the last column, whatever its characters take in bytes."""
    if shutil.which("script") is None:
        pytest.skip("script(1) is not installed")
    command = f"stty cols 110; {sys.executable} -m rebalancer plan --snapshot {EXAMPLE}"
    out = subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        capture_output=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    ).stdout
    lines = out.replace(b"\r", b"").splitlines()
    assert any(line.startswith(b"Plan (") for line in lines)
    assert max(len(line) for line in lines) <= 109


# --------------------------------------------------------------------------------------------
# kubectl's flags


@pytest.mark.parametrize(
    ("flags", "dry_run", "server_dry_run"),
    [
        ([], False, False),
        (["--dry-run"], True, False),
        (["--dry-run=client"], True, False),
        (["--dry-run=server"], False, True),
        (["--dry-run=none"], False, False),
        (["--server-dry-run"], False, True),
    ],
)
def test_dry_run_spellings(flags: list[str], dry_run: bool, server_dry_run: bool) -> None:
    """kubectl's --dry-run=none|client|server and the older flags mean the same run."""
    args = build_parser().parse_args(["run", *flags])
    assert (args.dry_run, args.server_dry_run) == (dry_run, server_dry_run)


def test_dry_run_refuses_an_unknown_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--dry-run=all"]) == 2
    assert "--dry-run" in capsys.readouterr().err


def test_explain_positional_forms(capsys: pytest.CaptureFixture[str]) -> None:
    """NAMESPACE/POD, -n NAMESPACE POD and --pod NAMESPACE/POD explain the same pod."""
    base = ["explain", "--snapshot", str(EXAMPLE)]
    by_pod = _out([*base, "--pod", POD], capsys)
    assert by_pod.startswith(f"Pod {POD}, on node node-a3\n")
    assert _out([*base, POD], capsys) == by_pod
    namespace, name = POD.split("/")
    assert _out([*base, "-n", namespace, name], capsys) == by_pod
    assert main([*base, name]) == 2
    assert "needs its namespace" in capsys.readouterr().err
    assert main([*base, "-n", "data", POD]) == 2
    assert "is not in -n data" in capsys.readouterr().err
    assert main([*base]) == 2
    assert "give the pod once" in capsys.readouterr().err


def test_explain_reads_the_live_cluster_without_snapshot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --snapshot, explain reads the cluster with plan's reader (here replaced by one
    that returns the example's objects) and says what explain --snapshot says."""
    offline = _out(["explain", "--snapshot", str(EXAMPLE), POD], capsys)
    read: list[Any] = []

    class Kube:
        def close(self) -> None:
            read.append("closed")

    def reader_call(self: Any) -> Any:
        read.append(self.namespace)
        return load_snapshot(str(EXAMPLE))

    monkeypatch.setattr(live, "connect", lambda connection: Kube())
    monkeypatch.setattr(live.LiveSource, "read", reader_call)
    monkeypatch.setattr(logconfig, "_chosen", {})
    assert _out(["explain", POD], capsys) == offline
    assert read == [None, "closed"]  # the whole cluster, as plan reads it


def test_namespace_without_pods_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """-n on a namespace with no pod: the empty plan on stdout, the reason on stderr."""
    assert main(["plan", "--snapshot", str(EXAMPLE), "-n", "nosuch"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "No violations: nothing to evict.\n"
    assert captured.err == "rebalancer: no pods in namespace 'nosuch'\n"
    assert main(["plan", "--snapshot", str(EXAMPLE), "-n", "shop"]) == 0
    assert capsys.readouterr().err == ""


def test_a_selector_matching_no_pod_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"
        "labelSelector: {matchLabels: {app: nothing-here}}\n"
    )
    assert main(["plan", "--snapshot", str(EXAMPLE), "--policy", str(policy)]) == 0
    assert capsys.readouterr().err == (
        "rebalancer: the policy's labelSelector app=nothing-here matches no pod\n"
    )


@pytest.mark.parametrize(
    ("flags", "json_lines", "shown"),
    [
        (["--log-format", "json"], True, {"info", "warning"}),
        (["--log-format", "text", "--log-level", "warning"], False, {"warning"}),
        (["--log-level", "error", "--log-format=json"], True, set()),
    ],
)
def test_log_flags(
    flags: list[str],
    json_lines: bool,
    shown: set[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--log-format chooses JSON lines or text whatever stderr is; --log-level drops the lines
    below it. Accepted before or after the command."""
    monkeypatch.setattr(logconfig, "_chosen", {})
    build_parser().parse_args([*flags[:2], "plan", *flags[2:]])
    stream = io.StringIO()
    logconfig.configure(stream=stream)
    log = structlog.get_logger()
    log.info("one")
    log.warning("two")
    lines = stream.getvalue().splitlines()
    levels = set()
    for line in lines:
        if json_lines:
            levels.add(json.loads(line)["level"])
        else:
            assert not line.startswith("{")
            levels.add("warning" if "warning" in line else "info")
    assert levels == shown


# --------------------------------------------------------------------------------------------
# completion


def _complete(script: str, words: list[str]) -> list[str]:
    """What bash offers for ``words`` (the last one being typed), with the script loaded."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    array = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; "
        "_rebalancer_complete; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    done = subprocess.run(
        [bash, "--norc", "-c", program], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_bash_completion(capsys: pytest.CaptureFixture[str]) -> None:
    """`completion bash` loaded in a real bash completes commands, subcommands, flags and the
    values of flags with a fixed set."""
    script = _out(["completion", "bash"], capsys)
    assert _complete(script, ["rebalancer", "pl"]) == ["plan"]
    assert _complete(script, ["rebalancer", "policy", "c"]) == ["check"]
    assert _complete(script, ["rebalancer", "plan", "-o", ""]) == [
        "table",
        "wide",
        "json",
        "yaml",
        "html",
    ]
    assert _complete(script, ["rebalancer", "run", "--dry-run", "s"]) == ["server"]
    assert "--snapshot" in _complete(script, ["rebalancer", "explain", "--"])
    assert _complete(script, ["rebalancer", "completion", ""])[:3] == ["bash", "zsh", "fish"]
    assert _complete(script, ["rebalancer", "--log-level", "w"]) == ["warning"]
    # a value with no fixed set: no word of its own (not the flags), so bash lists the files
    assert _complete(script, ["rebalancer", "plan", "--snapshot", ""]) == []
    assert _complete(script, ["rebalancer", "explain", "--policy", "po"]) == []


def _typed(tmux: list[str], keys: list[str], env: dict[str, str]) -> str:
    """The pane once ``keys`` are sent and bash is done with them (its screen stops changing)."""
    subprocess.run([*tmux, "send-keys", *keys], check=True, env=env)
    screen = ""
    for _ in range(100):
        time.sleep(0.2)
        now = subprocess.run(
            [*tmux, "capture-pane", "-p"], check=True, capture_output=True, text=True, env=env
        ).stdout
        if now == screen:
            return now
        screen = now
    return screen


def test_bash_completes_a_snapshot_with_file_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """In an interactive bash (a tmux pane) with `completion bash` sourced, `rebalancer plan
    --snapshot <TAB><TAB>` lists the directory's files, not the flags after inserting `-`, and
    `--snapshot clu<TAB>` on one match writes its whole name."""
    tmux_path, bash = shutil.which("tmux"), shutil.which("bash")
    if tmux_path is None or bash is None:
        pytest.skip("tmux and bash are needed for an interactive shell (apt-get install tmux)")
    (tmp_path / "completion.bash").write_text(_out(["completion", "bash"], capsys))
    for name in ("cluster-a.json", "other-b.yaml"):
        (tmp_path / name).write_text("{}")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    tmux = [tmux_path, "-L", f"completion-{time.monotonic_ns()}", "-f", "/dev/null"]
    shell = f"cd {tmp_path} && PS1='$ ' exec {bash} --norc --noprofile -i"
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "120", "-y", "20", "sh", "-c", shell],
        check=True,
        env=env,
    )
    try:
        _typed(tmux, ["source completion.bash", "Enter"], env)
        screen = _typed(tmux, ["rebalancer plan --snapshot ", "Tab", "Tab"], env)
        line = next(x for x in screen.splitlines() if "rebalancer plan --snapshot" in x)
        assert line.rstrip() == "$ rebalancer plan --snapshot", screen
        listed = screen[screen.index(line) + len(line) :].split()
        assert {"cluster-a.json", "other-b.yaml", "completion.bash"} <= set(listed), screen
        assert "--policy" not in listed
        screen = _typed(tmux, ["C-u", "rebalancer plan --snapshot clu", "Tab"], env)
        assert "$ rebalancer plan --snapshot cluster-a.json" in screen, screen
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, env=env, capture_output=True)


def test_zsh_and_fish_completion(capsys: pytest.CaptureFixture[str]) -> None:
    """zsh loads the bash function through bashcompinit; fish gets a complete line per
    command and flag."""
    zsh = _out(["completion", "zsh"], capsys)
    assert zsh.startswith("#compdef rebalancer\n") and "bashcompinit" in zsh
    assert "complete -o default -F _rebalancer_complete rebalancer" in zsh
    fish = _out(["completion", "fish"], capsys).splitlines()
    for command in ("plan", "explain", "policy", "snapshot", "run", "completion"):
        assert any(f"'__fish_use_subcommand' -a {command} -d" in line for line in fish), command
    assert any("__fish_seen_subcommand_from policy" in line and "-a check" in line for line in fish)
    assert any("__fish_seen_subcommand_from run" in line and "-l dry-run" in line for line in fish)
    assert main(["completion", "tcsh"]) == 2


def test_completion_offers_what_the_parser_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """Every flag of `plan` is offered after `rebalancer plan --`."""
    script = _out(["completion", "bash"], capsys)
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    plan_flags = {
        o
        for a in sub.choices["plan"]._actions
        for o in a.option_strings
        if o.startswith("--") and a.help != argparse.SUPPRESS
    }
    assert plan_flags <= set(_complete(script, ["rebalancer", "plan", "--"]))
