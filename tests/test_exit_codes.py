"""One table of exit codes (rebalancer/cli/exitcodes.py), the same wherever it is shown:
``rebalancer --help``, ``kubectl rebalance --help``, the chart's NOTES.txt, README.md,
docs/reference.md. And what the table says of PodDisruptionBudgets holds for a run: a refusal
exits 0, a failure 1."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from rebalancer.cli import kubectl_plugin
from rebalancer.cli.exitcodes import EXIT_CODES
from rebalancer.cli.main import main
from rebalancer.cluster.act.events import BLOCKED
from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.core.policy import Policy
from tests.fakes import NOW, PDB_429, FakeClock, FakeCluster, ScriptedPlanner
from tests.packaging_tools import ROOT

TEXT_ROW = re.compile(r"^ +(\d+) {2}(\S.*)$")
MARKDOWN_ROW = re.compile(r"^\| (\d+) \| (.+) \|$")


def _words(text: str) -> str:
    return " ".join(text.split())


def text_table(text: str, header: str) -> list[tuple[int, str]]:
    """The rows of the plain-text table under the line ``header``: ``  N  meaning`` with the
    meaning's wrapped lines indented under it; the table ends at the first other line."""
    lines = text.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.strip() == header]
    rows: list[tuple[int, str]] = []
    indent = 0
    for line in lines[start + 1 :]:
        match = TEXT_ROW.match(line)
        if match:
            rows.append((int(match.group(1)), match.group(2)))
            indent = match.start(2)
        elif rows and line.startswith(" " * indent) and line.strip() and line[indent] != " ":
            code, meaning = rows[-1]
            rows[-1] = (code, f"{meaning} {line.strip()}")
        else:
            break
    return [(code, _words(meaning)) for code, meaning in rows]


def markdown_table(text: str) -> list[tuple[int, str]]:
    """The rows of the Markdown table whose header is ``| code | meaning |``."""
    lines = text.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line == "| code | meaning |"]
    rows = []
    for line in lines[start + 2 :]:
        match = MARKDOWN_ROW.match(line)
        if not match:
            break
        rows.append((int(match.group(1)), _words(match.group(2))))
    return rows


EXPECTED = [(code, _words(meaning)) for code, meaning in EXIT_CODES]


def test_the_table_covers_every_code_once() -> None:
    """0 to 4, then 130 and 143 (128 + SIGINT, SIGTERM), each once, in order, each with a
    meaning (hand-written list of codes)."""
    assert [code for code, _ in EXIT_CODES] == [0, 1, 2, 3, 4, 130, 143]
    assert all(meaning.strip() for _, meaning in EXIT_CODES)
    ok, failed = EXIT_CODES[0][1], EXIT_CODES[1][1]
    assert "PodDisruptionBudget" in ok  # a refusal is ok
    assert "another reason than a PodDisruptionBudget" in failed


def _help(argv: list[str], entry: object) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = entry(argv)  # type: ignore[operator]
    assert code == 0
    return out.getvalue()


@pytest.mark.parametrize(
    "argv", [["--help"], ["plan", "--help"], ["explain", "--help"]], ids=" ".join
)
def test_rebalancer_help_shows_the_table(argv: list[str]) -> None:
    assert text_table(_help(argv, main), "exit codes:") == EXPECTED


def test_kubectl_plugin_help_shows_the_table() -> None:
    shown = _help(["--help"], kubectl_plugin.main)
    assert text_table(shown, "exit codes (the rebalancer's):") == EXPECTED


def test_chart_notes_show_the_table() -> None:
    notes = (ROOT / "charts" / "rebalancer" / "templates" / "NOTES.txt").read_text()
    shown = text_table(
        notes, "The exit code says how the run went (a Job fails on any code but 0):"
    )
    assert shown == EXPECTED


@pytest.mark.parametrize("path", ["README.md", "docs/reference.md"])
def test_docs_show_the_table(path: str) -> None:
    assert markdown_table((ROOT / path).read_text()) == EXPECTED


def test_the_parser_notices_a_changed_row() -> None:
    """The comparison can fail: a README whose row 1 still says "blocked by a PDB" differs."""
    readme = (ROOT / "README.md").read_text()
    old = readme.replace(
        "| 1 | some evictions failed for another reason than a PodDisruptionBudget",
        "| 1 | some evictions failed or were blocked by a PodDisruptionBudget",
    )
    assert old != readme
    assert markdown_table(old) != EXPECTED


# -- what a run exits with ---------------------------------------------------------------------


def _run(answers: dict[str, tuple[int, object]]) -> tuple[FakeCluster, int, int, int]:
    """A run of one wave of 2 evictions (zones a: 4, b: 0 -> web-1, web-2) whose answers are
    scripted; (cluster, exit code, blocked, failed)."""
    fake = FakeCluster({"a": 4, "b": 0}, answers=answers)
    clock = FakeClock()
    runner = Runner(
        fake,
        fake,
        Policy(),
        RunSettings(executor=ExecutorSettings(pdb_retries=1), instance="test", max_waves=1),
        plan_fn=ScriptedPlanner(fake, [2, 2]),
        clock=clock,
        wall_clock=lambda: NOW,
        sleep=clock.sleep,
    )
    report = runner.run_once()
    return fake, report.exit_code, report.blocked_by_pdb, report.failed


def test_a_run_whose_evictions_a_pdb_refuses_exits_0() -> None:
    """The wave's first eviction answered 429 by a PodDisruptionBudget: blocked, reported (an
    Event on the pod), the wave stops there, exit 0."""
    fake, code, blocked, failed = _run({"web-1": (429, PDB_429), "web-2": (429, PDB_429)})
    assert (code, blocked, failed) == (0, 1, 0)
    assert [e["reason"] for e in fake.events] == [BLOCKED]


def test_a_run_with_a_failed_eviction_exits_1() -> None:
    """An eviction failing otherwise (a 422 the API will not take): exit 1."""
    invalid = {"kind": "Status", "code": 422, "reason": "Invalid", "message": "bad"}
    _, code, blocked, failed = _run({"web-1": (422, invalid)})
    assert (code, blocked, failed) == (1, 0, 1)
