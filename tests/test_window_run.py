"""Maintenance windows in ``run`` and ``plan``: evict only inside, stop starting waves at the
close, and say where now stands.

The runner is driven against the fake cluster of tests/test_runner.py with a wall clock the test
moves; the CLI with ``time.time`` patched to a fixed moment.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rebalancer.cli.main import main
from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.runner import (
    OUTSIDE_WINDOW,
    WINDOW_CLOSED,
    Runner,
    RunReport,
    RunSettings,
)
from rebalancer.cluster.api import kubeclient
from rebalancer.core.model import Snapshot
from rebalancer.core.policy import Policy
from rebalancer.core.schedule import Schedule, Window
from tests.fakes import FakeClock, FakeCluster, ScriptedPlanner

SNAPSHOT = Path(__file__).parent / "data" / "cli_snapshot.yaml"
# Monday 24 November 2025, 15:10 UTC
MONDAY_1510 = datetime(2025, 11, 24, 15, 10, tzinfo=UTC).timestamp()
AT_15 = Policy(schedule=Schedule((Window("0 15 * * *", 3600.0),)))  # open 15:00-16:00 UTC
AT_2 = Policy(schedule=Schedule((Window("0 2 * * *", 3600.0),)))  # open 02:00-03:00 UTC
HEADER = "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"


class Wall:
    """A wall clock the test sets; each cluster read may move it."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.after_read: list[float] = []

    def __call__(self) -> float:
        return self.now


@dataclass
class WallSource:
    """The fake cluster's reads; each may move the wall clock (``wall.after_read``)."""

    fake: FakeCluster
    wall: Wall
    rejected: tuple[object, ...] = ()

    def read(self) -> Snapshot:
        snapshot = self.fake.read()
        if self.wall.after_read:
            self.wall.now = self.wall.after_read.pop(0)
        return snapshot

    def last_placement(self) -> float | None:
        return None


def _runner(fake: FakeCluster, policy: Policy, wall: Wall, planner: ScriptedPlanner) -> Runner:
    clock = FakeClock()
    return Runner(
        WallSource(fake, wall),
        fake,
        policy,
        RunSettings(executor=ExecutorSettings(pdb_retries=1), instance="test"),
        plan_fn=planner,
        clock=clock,
        wall_clock=wall,
        sleep=clock.sleep,
    )


def test_outside_the_window_nothing_is_read_or_evicted() -> None:
    """At 15:10 a 02:00-03:00 window is closed: no read, no eviction, end outside-window."""
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    report = _runner(fake, AT_2, Wall(MONDAY_1510), ScriptedPlanner(fake, [2, 1])).run_once()
    assert report.end == OUTSIDE_WINDOW
    assert (fake.reads, fake.posts, report.waves) == (0, [], ())
    assert report.exit_code == 0


def test_inside_the_window_the_run_evicts() -> None:
    """At 15:10 the 15:00-16:00 window is open: the run goes on until balanced."""
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    report = _runner(fake, AT_15, Wall(MONDAY_1510), ScriptedPlanner(fake, [2, 1, 0])).run_once()
    assert report.end == "balanced"
    assert [name for name, _ in fake.posts] == ["web-1", "web-2"]


@pytest.mark.parametrize(
    ("second_read", "posts", "end"),
    [
        (MONDAY_1510 + 49 * 60, ["web-1", "web-2"], "balanced"),  # 15:59: wave 2 still starts
        (MONDAY_1510 + 50 * 60, ["web-1"], WINDOW_CLOSED),  # 16:00: the window is closed
        (MONDAY_1510 + 3 * 3600, ["web-1"], WINDOW_CLOSED),  # long after
    ],
)
def test_no_new_wave_after_the_window_closes(
    second_read: float, posts: list[str], end: str
) -> None:
    """Wave 1 runs in the window; if it has closed when wave 2 would start, the run ends."""
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    wall = Wall(MONDAY_1510)
    wall.after_read = [MONDAY_1510, second_read]
    report = _runner(fake, AT_15, wall, ScriptedPlanner(fake, [2, 1, 0])).run_once()
    assert [name for name, _ in fake.posts] == posts
    assert report.end == end
    if end == WINDOW_CLOSED:
        assert report.final_plan is not None and report.final_plan.evictions  # work left


class _OneRound(threading.Event):
    """A stop event whose first wait ends the loop, as SIGTERM during the sleep would."""

    def wait(self, timeout: float | None = None) -> bool:
        self.set()
        return True


def test_interval_mode_outside_the_window_reports_nothing() -> None:
    """An interval run outside the window neither reads nor counts as a run in the metrics."""
    fake = FakeCluster({"a": 4, "b": 0, "c": 0})
    runner = _runner(fake, AT_2, Wall(MONDAY_1510), ScriptedPlanner(fake, [2]))
    runner.stop = _OneRound()
    reports: list[RunReport] = []
    assert runner.run_forever(600, on_report=reports.append) == 0
    assert (reports, fake.reads) == ([], 0)


def _policy_file(tmp_path: Path, cron: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        HEADER + f'schedule:\n  windows:\n    - {{cron: "{cron}", duration: 1h, timeZone: UTC}}\n'
    )
    return path


def test_run_outside_the_window_exits_0_without_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """run outside every window: exit 0, says when the next opens, never connects."""
    monkeypatch.setattr("rebalancer.cli.main.time.time", lambda: MONDAY_1510)
    monkeypatch.setattr(kubeclient, "connect", lambda *a, **k: pytest.fail("connected"))
    assert main(["run", "--policy", str(_policy_file(tmp_path, "0 2 * * *"))]) == 0
    out = capsys.readouterr().out
    assert out == "outside the maintenance window, next opens at 2025-11-25T02:00+00:00\n"


def test_plan_says_whether_now_is_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan always plans; its summary says what the next run does while the window is closed
    (nothing) or open (its waves), and the window's state; -o json gives the same in
    ``nextRun`` and is otherwise the plan without a schedule."""
    monkeypatch.setattr("rebalancer.cli.main.time.time", lambda: MONDAY_1510)
    outside = str(_policy_file(tmp_path, "0 2 * * *"))
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--policy", outside]) == 0
    text = capsys.readouterr().out
    summary = " ".join(text[: text.index("\n\n")].splitlines())
    assert summary.startswith("1 eviction, proven minimal, in 1 wave ")
    assert summary.endswith(
        "Next run (--max-waves 5, --wave-timeout 10m, no limits): evicts nothing while the "
        "maintenance window is closed. Holds: pods-unplaced 2m, node-drifting; with --interval "
        "also thrash-guard 1h. Maintenance window: outside the maintenance window, next opens at "
        "2025-11-25T02:00+00:00."
    )
    inside = str(_policy_file(tmp_path, "0 15 * * 1"))
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--policy", inside]) == 0
    text = capsys.readouterr().out
    summary = " ".join(text[: text.index("\n\n")].splitlines())
    assert summary.endswith(
        "Next run (--max-waves 5, --wave-timeout 10m, no limits): wave 1 of 1, 1 eviction, at "
        "most 10m waiting for replacements; the whole plan takes one run. Holds: pods-unplaced 2m, "
        "node-drifting; with --interval also thrash-guard 1h. Maintenance window: inside the "
        "maintenance window until 2025-11-24T16:00+00:00."
    )
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--policy", inside, "-o", "json"]) == 0
    with_schedule = json.loads(capsys.readouterr().out)
    assert with_schedule["nextRun"]["window"] == {
        "open": True,
        "detail": "inside the maintenance window until 2025-11-24T16:00+00:00",
    }
    outside = str(_policy_file(tmp_path, "0 2 * * *"))  # the same file, written again
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--policy", outside, "-o", "json"]) == 0
    closed = json.loads(capsys.readouterr().out)["nextRun"]
    assert (closed["window"]["open"], closed["waves"], closed["evictions"]) == (False, 0, 0)
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-o", "json"]) == 0
    without = json.loads(capsys.readouterr().out)
    assert without["nextRun"]["window"] is None
    del with_schedule["nextRun"], without["nextRun"]
    assert with_schedule == without
