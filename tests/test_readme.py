"""README's sample plan is exactly what the command prints for the bundled example; README and
docs/ link to files and sections that exist, and speak to users."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rebalancer.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "$ rebalancer plan --snapshot examples/skewed-cluster.yaml\n"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def test_readme_sample_plan_is_current(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block under 'Reading a plan' equals a fresh plan of examples/skewed-cluster.yaml."""
    monkeypatch.delenv("REBALANCER_POLICY", raising=False)
    readme = (ROOT / "README.md").read_text()
    start = readme.index(COMMAND) + len(COMMAND)
    sample = readme[start : readme.index("```", start)]
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--snapshot", os.path.join("examples", "skewed-cluster.yaml")]) == 0
    assert capsys.readouterr().out == sample


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = FENCE.sub("", page.read_text())
    headings = re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_point_at_files_and_sections_that_exist(page: Path) -> None:
    """Every relative link of README.md and docs/*.md names a file of the repository and, with
    '#section', a heading of that file."""
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    """A page under docs/ that the README does not link is a page nobody finds."""
    readme = (ROOT / "README.md").read_text()
    linked = {t.partition("#")[0] for t in LINK.findall(readme)}
    assert [p.name for p in PAGES[1:] if f"docs/{p.name}" not in linked] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pages_speak_to_users(page: Path) -> None:
    """No issue numbers and no paths of the machine the project is developed on."""
    text = page.read_text()
    assert re.findall(r"\bissue \d+|/work/|/tmp/|shared/SPEC", text, re.IGNORECASE) == []


def test_readme_fits_on_a_few_screens() -> None:
    """The README stays an overview; details go to docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400


BAD_POLICY = """\
apiVersion: rebalancer/v1alpha1
kind: RebalancerPolicy
gracePeriodSeconds: 0
nodefit: true
"""


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "policy.md"])
def test_quoted_policy_check_output_is_current(
    page: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The quoted `policy check bad.yaml` block is what the command prints (on stderr) for a
    policy with those two mistakes."""
    command = "$ rebalancer policy check bad.yaml\n"
    text = page.read_text()
    start = text.index(command) + len(command)
    quoted = text[start : text.index("```", start)]
    (tmp_path / "bad.yaml").write_text(BAD_POLICY)
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "check", "bad.yaml"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == quoted


IMPORT_COMMAND = (
    "$ rebalancer policy import --output helm-values descheduler-values.yaml"
    " > rebalancer-values.yaml"
)

# Every fenced block of README.md and docs/*.md that quotes a command ("$ rebalancer ...") and
# the test above or below that runs it and compares its output with the quote.
CHECK_COMMAND = "$ rebalancer policy check bad.yaml"
QUOTED_COMMANDS = {
    ("README.md", COMMAND.strip()): "test_readme_sample_plan_is_current",
    ("README.md", CHECK_COMMAND): "test_quoted_policy_check_output_is_current",
    ("policy.md", CHECK_COMMAND): "test_quoted_policy_check_output_is_current",
    ("descheduler.md", IMPORT_COMMAND): "test_descheduler_import_quote_is_current",
}


def _fenced(page: Path) -> list[str]:
    """The fenced blocks of a page, each dedented (blocks inside list items are indented)."""
    blocks = re.findall(r"^( *)```[^\n]*\n(.*?)^\1```", page.read_text(), re.DOTALL | re.MULTILINE)
    return [textwrap.dedent(body) for _, body in blocks]


def test_every_quoted_command_has_a_test_of_its_output() -> None:
    """A new `$ rebalancer ...` quote in the docs fails here until a test produces its output
    (listed in QUOTED_COMMANDS), and a quote that was removed leaves no stale entry."""
    found = {
        (page.name, block.splitlines()[0])
        for page in PAGES
        for block in _fenced(page)
        if block.startswith("$ ")
    }
    assert found == set(QUOTED_COMMANDS)
    assert all(name in globals() for name in QUOTED_COMMANDS.values())


def test_descheduler_import_quote_is_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/descheduler.md's worked switch: its quoted rebalancer-values.yaml is exactly what the
    quoted import command writes for its quoted descheduler-values.yaml, and each note of the
    file is a line on stderr, in order."""
    blocks = _fenced(ROOT / "docs" / "descheduler.md")
    values = next(b for b in blocks if b.startswith("kind: CronJob\n"))
    at = next(i for i, b in enumerate(blocks) if b.startswith(IMPORT_COMMAND + "\n"))
    quoted = blocks[at + 1]
    args = shlex.split(IMPORT_COMMAND)
    assert args[:2] == ["$", "rebalancer"] and args[-2] == ">"
    (tmp_path / "descheduler-values.yaml").write_text(values)
    monkeypatch.chdir(tmp_path)
    assert main(args[2:-2]) == 0
    captured = capsys.readouterr()
    assert captured.out == quoted
    notes: list[str] = []
    current: int | None = None
    for line in (line.strip() for line in quoted.splitlines()):
        if line.startswith("# note: "):
            current = len(notes)
            notes.append(line.removeprefix("# "))
        elif line.startswith("#   ") and current is not None:
            notes[current] += " " + line.removeprefix("#   ")
        else:
            current = None
    assert len(notes) == 7
    assert captured.err.splitlines() == notes


def test_reading_a_plan_quotes_the_next_run_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/reading-a-plan.md quotes the README example's next-run sentence as the command
    prints it."""
    monkeypatch.delenv("REBALANCER_POLICY", raising=False)
    page = " ".join((ROOT / "docs" / "reading-a-plan.md").read_text().split())
    start = page.index("`Next run (") + 1
    quoted = page[start : page.index("`", start)]
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--snapshot", os.path.join("examples", "skewed-cluster.yaml")]) == 0
    out = capsys.readouterr().out
    assert quoted in " ".join(out[: out.index("\n\n")].split())


def test_reading_a_plan_figures_of_the_generated_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The figures docs/reading-a-plan.md gives for bench.gen's 30,000-pod cluster are what
    `plan` prints for it (its screenshot shows the same run)."""
    monkeypatch.delenv("REBALANCER_POLICY", raising=False)
    page = " ".join((ROOT / "docs" / "reading-a-plan.md").read_text().split())
    found = re.search(
        r"all (\d+) lines of it: ([\d,]+) evictions in (\d+) waves, the next run's waves 1-(\d+)"
        r" \(([\d,]+) evictions, at most (\d+) minutes of waiting, (\d+) runs for the whole plan\)",
        page,
    )
    assert found is not None
    lines, evictions, waves, next_waves, next_evictions, minutes, runs = (
        int(g.replace(",", "")) for g in found.groups()
    )
    snapshot = tmp_path / "medium.json"
    subprocess.run(
        [sys.executable, "-m", "bench.gen", "--size", "medium", "-o", str(snapshot)],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    assert main(["plan", "--snapshot", str(snapshot), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    run = data["nextRun"]
    assert (len(data["evictions"]), len(data["waves"])) == (evictions, waves)
    assert (run["waves"], run["evictions"], run["maxSeconds"], run["runs"]) == (
        next_waves,
        next_evictions,
        minutes * 60,
        runs,
    )
    assert main(["plan", "--snapshot", str(snapshot)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == lines


# (glossary heading's anchor, the forms of the word reading-a-plan.md uses)
GLOSSARY_TERMS = [
    ("view", r"views?"),
    ("domain", r"domains?"),
    ("wave", r"waves?"),
    ("pinned", r"pinned"),
    ("held", r"held|holds?"),
    ("moot-replacement", r"moot"),
    ("unrepaired--left-above-maxskew", r"unrepaired|left above maxSkew"),
]


@pytest.mark.parametrize(("anchor", "forms"), GLOSSARY_TERMS, ids=[t[0] for t in GLOSSARY_TERMS])
def test_reading_a_plan_links_each_term_to_the_glossary_where_first_used(
    anchor: str, forms: str
) -> None:
    """The first use of each word in docs/reading-a-plan.md (after its title) sits in a link to
    the word's entry of docs/glossary.md, and that entry exists."""
    assert anchor in _anchors(ROOT / "docs" / "glossary.md")
    text = (ROOT / "docs" / "reading-a-plan.md").read_text()
    text = FENCE.sub("", text[text.index("\n") :])
    first = re.search(rf"\b(?:{forms})\b", text, re.IGNORECASE)
    assert first is not None
    around = [
        link.group(2)
        for link in re.finditer(r"\[([^\]]+)\]\(([^)\s]+)\)", text)
        if link.start(1) <= first.start() < link.end(1)
    ]
    assert around == [f"glossary.md#{anchor}"]
