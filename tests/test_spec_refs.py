"""Every "SPEC §N" in the repository names a section of docs/spec.md, the behaviour contract.

A citation is ``SPEC §4``, ``SPEC §3.4``, ``SPEC §3.4's``, or several sections at once:
``SPEC §2.1-§2.4``, ``SPEC §2.1/2.4``, ``SPEC §2.2, §5.6``; ``docs/spec.md §2.4`` is read the
same way. Each number must be the number of a heading of docs/spec.md (``## §3 ...``,
``### §3.4 ...``). Inside docs/spec.md every bare ``§N`` is checked too. A citation names the
subsection where its section has them (``SPEC §3.4``, not the whole of §3), except in a range
of whole sections (``docs/spec.md §2-§3``), which cites them whole on purpose.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "spec.md"

HEADING = re.compile(r"^#{2,4} §(\d+(?:\.\d+)?) \S", re.MULTILINE)
NUMBER = r"\d+(?:\.\d+)?"
# "SPEC §2.4", then any further sections joined by -, /, "," or "and", with or without their §.
CITATION = re.compile(rf"(?:\bSPEC|docs/spec\.md) ?§{NUMBER}(?:(?: ?[-/] ?| and |, )§?{NUMBER})*")
BARE = re.compile(rf"§{NUMBER}")

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist"})
HIDDEN_KEPT = frozenset({".ci", ".github"})  # other dot-folders: git, virtualenvs, caches
MAX_BYTES = 2 * 1024 * 1024  # generated data, not prose


def sections(spec_text: str) -> set[str]:
    """The section numbers docs/spec.md's headings carry."""
    return set(HEADING.findall(spec_text))


def cited(text: str) -> Iterator[tuple[int, str]]:
    """(line, section number) of every section a "SPEC §" citation in ``text`` names."""
    for line_no, line in enumerate(text.splitlines(), 1):
        for match in CITATION.finditer(line):
            for number in re.findall(NUMBER, match.group(0).partition("§")[2]):
                yield line_no, number


def whole(text: str, known: set[str], *, bare: bool = False) -> list[tuple[int, str]]:
    """The citations in ``text`` of a whole section that has subsections in ``known`` (so a
    reader cannot tell which one is meant), a range of whole sections aside; with ``bare``,
    every ``§N`` counts as one."""
    parents = {number.partition(".")[0] for number in known if "." in number}
    pattern = BARE if bare else CITATION
    found = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if bare and line.startswith("#"):
            continue  # a heading names its own section
        for match in pattern.finditer(line):
            cites = "§" + match.group(0).partition("§")[2]
            if re.fullmatch(r"§\d+ ?- ?§\d+", cites):
                continue
            numbers = re.findall(NUMBER, cites)
            found += [(line_no, n) for n in numbers if n in parents]
    return found


def dangling(text: str, known: set[str], *, bare: bool = False) -> list[tuple[int, str]]:
    """The citations in ``text`` naming no section in ``known``; with ``bare``, every ``§N``
    counts as one (docs/spec.md's references to its own sections)."""
    if bare:
        found = [
            (n, m.group(0)[1:])
            for n, line in enumerate(text.splitlines(), 1)
            for m in BARE.finditer(line)
        ]
    else:
        found = list(cited(text))
    return [(line, number) for line, number in found if number not in known]


def text_files() -> Iterator[Path]:
    """The repository's text files (its own tree, not the virtualenv or git's store)."""
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS
            and not d.endswith(".egg-info")
            and (not d.startswith(".") or d in HIDDEN_KEPT)
        )
        for name in sorted(files):
            path = Path(folder) / name
            if path.stat().st_size > MAX_BYTES:
                continue
            data = path.read_bytes()
            if b"\0" in data:
                continue
            yield path


def test_the_spec_has_numbered_sections() -> None:
    known = sections(SPEC.read_text())
    assert {"1", "2", "3", "4", "5", "6", "7"} <= known
    assert {"3.4", "3.9", "5.5", "6.4"} <= known  # victim order, waves, retries, loop timing


def test_every_spec_citation_resolves() -> None:
    known = sections(SPEC.read_text())
    problems = []
    count = 0
    for path in text_files():
        text = path.read_text(errors="replace")
        count += sum(1 for _ in cited(text))
        for line, number in dangling(text, known):
            problems.append(f"{path.relative_to(ROOT)}:{line}: SPEC §{number}")
    assert problems == []
    assert count > 50  # the scan did find the code's citations


def test_every_citation_names_the_subsection() -> None:
    """A citation of a section that has subsections names the one meant (``SPEC §3.4``, not
    the whole of §3), in the repository and inside docs/spec.md."""
    spec_text = SPEC.read_text()
    known = sections(spec_text)
    problems = [f"docs/spec.md:{line}: §{n}" for line, n in whole(spec_text, known, bare=True)]
    for path in text_files():
        text = path.read_text(errors="replace")
        for line, number in whole(text, known):
            problems.append(f"{path.relative_to(ROOT)}:{line}: SPEC §{number}")
    assert problems == []


def test_a_whole_section_citation_is_found() -> None:
    """Built here so that this file itself cites nothing."""
    known = {"1", "2", "2.1", "3", "3.4", "4"}
    fake = "\n".join(
        [
            "# victims: SPEC " + "§3's order",
            "# the filter (SPEC " + "§2.1), priority (SPEC " + "§4)",
            "# written from docs/spec.md " + "§2-" + "§3 alone",
            "# SPEC " + "§1 and " + "§3",
        ]
    )
    assert whole(fake, known) == [(1, "3"), (4, "3")]
    assert whole("see " + "§3, then " + "§3.4", known, bare=True) == [(1, "3")]


def test_the_spec_cites_only_its_own_sections() -> None:
    text = SPEC.read_text()
    assert dangling(text, sections(text), bare=True) == []


def test_a_dangling_citation_is_found() -> None:
    """A comment citing a section the spec does not have fails the check (built here so
    that this file itself cites nothing)."""
    known = {"1", "2", "3", "3.4", "5"}
    fake = "\n".join(
        [
            '"""The waves (SPEC ' + "§3)." + '"""',
            "# retries: SPEC " + "§9",
            "x = 1  # SPEC " + "§3.4's order",
        ]
    )
    assert dangling(fake, known) == [(2, "9")]


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("SPEC " + "§3", ["3"]),
        ("(SPEC " + "§3's formula)", ["3"]),
        ("SPEC " + "§3.4, rule 2", ["3.4"]),
        ("written from SPEC " + "§2-" + "§3 alone", ["2", "3"]),
        ("points at SPEC " + "§2/3/5/7", ["2", "3", "5", "7"]),
        ("condition (SPEC " + "§2, " + "§5).", ["2", "5"]),
        ("docs/spec.md " + "§2-" + "§3", ["2", "3"]),
        ("SPEC" + "§6 and " + "§7", ["6", "7"]),
        ("issue 11 " + "§3, nothing cited", []),
        ("the end of SPEC " + "§5.", ["5"]),
    ],
)
def test_citation_forms(text: str, numbers: list[str]) -> None:
    assert [n for _, n in cited(text)] == numbers


def test_a_missing_sub_section_is_dangling() -> None:
    known = {"3", "3.4"}
    assert dangling("SPEC " + "§3.5 and " + "§3.4", known) == [(1, "3.5")]
    assert dangling("see " + "§3.5", known, bare=True) == [(1, "3.5")]
