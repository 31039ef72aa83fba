"""The plan table of bench.gen's 30,000-pod cluster in a real terminal (tmux) at 80, 110 and
200 columns: every name it prints in a name column is a name of the snapshot, so any of them
can be copied into ``explain``.

The oracle reads the snapshot file itself (pods, nodes, namespaces, workloads through their
owners, PodDisruptionBudgets, zones and hostnames), and the screen is read back from tmux's
pane, cut into cells by the positions of the headings: a name cut in its middle (``nod…0543``)
or at the line's end is in no set and fails. tmux is a Debian package (scripts/test.sh
installs it); without it the test is skipped, saying so.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent
TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed (apt-get install tmux): no real terminal to test"
)

SHORT_KINDS = {
    "Deployment": "deploy",
    "StatefulSet": "sts",
    "ReplicaSet": "rs",
    "DaemonSet": "ds",
    "Job": "job",
    "CronJob": "cj",
}
"""kubectl's short names, as the table writes a workload (written out here, not imported)."""
DOMAIN = re.compile(r"(\S+):\d+->\d+")
MORE = re.compile(r" \(\+\d+ more\)$")
GROUP = re.compile(r"  +\d+  [a-z-]+: ")  # a group of skipped pods: its count, its code


@dataclass
class Names:
    """Every name the snapshot holds, by kind."""

    pods: set[str] = field(default_factory=set)  # namespace/name
    nodes: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)
    workloads: set[tuple[str, str]] = field(default_factory=set)  # (namespace, kind/name)
    pdbs: set[tuple[str, str]] = field(default_factory=set)  # (namespace, name)
    domains: set[str] = field(default_factory=set)  # zones and hostnames


def snapshot_names(path: Path) -> Names:
    items = orjson.loads(path.read_bytes())["items"]
    names = Names()
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    for item in items:
        meta = item["metadata"]
        kind = item["kind"]
        if kind == "Node":
            names.nodes.add(meta["name"])
            names.domains.update(meta.get("labels", {}).values())
        elif kind == "PodDisruptionBudget":
            names.pdbs.add((meta["namespace"], meta["name"]))
        elif kind == "Pod":
            names.pods.add(f"{meta['namespace']}/{meta['name']}")
            names.namespaces.add(meta["namespace"])
        if kind in ("ReplicaSet", "StatefulSet"):
            refs = meta.get("ownerReferences") or [{"kind": kind, "name": meta["name"]}]
            owners[(kind, meta["name"])] = (refs[0]["kind"], refs[0]["name"])
            ns = meta["namespace"]
            top_kind, top_name = owners[(kind, meta["name"])]
            names.workloads.add((ns, f"{SHORT_KINDS.get(top_kind, top_kind)}/{top_name}"))
    return names


@pytest.fixture(scope="module")
def medium(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Names]:
    """bench.gen's medium cluster (1,000 nodes, 30,000 pods), as docs/reading-a-plan.md's
    picture, and its names."""
    out = tmp_path_factory.mktemp("gen") / "medium.json"
    subprocess.run(
        [sys.executable, "-m", "bench.gen", "--size", "medium", "-o", str(out)],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    return out, snapshot_names(out)


def in_tmux(command: list[str], columns: int, tmp: Path) -> list[str]:
    """``command``'s screen in a detached tmux session ``columns`` wide: every line it wrote,
    wrapped lines joined back (``capture-pane -J``), from the scrollback's start."""
    assert TMUX is not None
    config = tmp / "tmux.conf"
    config.write_text("set -g history-limit 200000\nset -g remain-on-exit on\n")
    socket = f"rebalancer-test-{columns}-{time.monotonic_ns()}"
    tmux = [TMUX, "-L", socket, "-f", str(config)]
    env = {
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "PATH": "/usr/bin:/bin",
    }
    status = tmp / f"status-{columns}"
    status.unlink(missing_ok=True)
    # The exit status goes to a file: tmux reports a dead pane's status only once it has reaped
    # the process, which a server started from some job-control setups never does.
    shell = (
        f"cd {shlex.quote(str(ROOT))} && {shlex.join(command)}; "
        f"echo $? > {shlex.quote(str(status))}"
    )
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", str(columns), "-y", "50", "sh", "-c", shell],
        check=True,
        env=env,
    )
    try:
        for _ in range(1200):  # up to 10 minutes on a loaded machine
            written = status.read_text().strip() if status.exists() else ""
            if written:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"{command} did not end in the terminal")
        assert written == "0", f"{command} exited {written}"
        screen = subprocess.run(
            [*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-"],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        ).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, env=env, capture_output=True)
    lines = [line.rstrip() for line in screen.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if lines and lines[-1].startswith("Pane is dead"):
        lines.pop()
    return lines


def sections(lines: list[str]) -> dict[str, list[str]]:
    """The table's sections by their title's first words (a title starts in column 0)."""
    found: dict[str, list[str]] = {}
    title = ""
    for line in lines:
        if line and not line.startswith(" "):
            title = line.split(" (")[0]
            found.setdefault(title, [])
        elif title and line:
            found[title].append(line)
    return found


def cells(section: list[str], headings: list[str]) -> list[list[dict[str, str]]]:
    """Each row of a section in columns as cut by its headings' positions: one mapping per
    line of the row (the row's own, then each line folded under it). The first one or two
    lines are headings; a row starts two spaces in, a folded line four."""
    heads = [
        line
        for line in section[:2]
        if any(
            f"{line} ".startswith(f"  {h} ") or f"{line} ".startswith(f"    {h} ") for h in headings
        )
    ]
    starts: list[list[tuple[int, str]]] = []
    for head in heads:
        found = [(re.search(rf"(?<!\S){re.escape(h)}(?!\S)", head), h) for h in headings]
        starts.append(sorted((match.start(), h) for match, h in found if match))
    rows: list[list[dict[str, str]]] = []
    for line in section[len(heads) :]:
        if line.startswith("  (+"):
            continue
        level = 0 if not line.startswith("    ") else 1
        if level == 1 and not rows:
            raise AssertionError(f"a folded line with no row: {line!r}")
        if level >= len(starts):  # the violations' bar and domains line, not in columns
            rows[-1].append({"": line})
            continue
        spots = starts[level]
        row = {
            h: line[at : spots[i + 1][0] if i + 1 < len(spots) else None].strip()
            for i, (at, h) in enumerate(spots)
        }
        if level == 0:
            rows.append([row])
        else:
            rows[-1].append(row)
    return rows


def check_names(lines: list[str], names: Names) -> dict[str, int]:
    """Every name in the name columns of ``lines`` (the plan table) is one of ``names``; the
    count of names checked per kind."""
    checked = dict.fromkeys(("pod", "node", "namespace", "workload", "pdb", "domain"), 0)

    def is_name(kind: str, value: object, known: set[str] | set[tuple[str, str]]) -> None:
        assert value in known, f"{kind} {value!r} is not in the snapshot"
        checked[kind] += 1

    def workload(namespace: str, cell: str) -> None:
        if not cell.startswith("selector "):
            is_name("workload", (namespace, cell), names.workloads)

    def pdb(namespace: str, text: str) -> None:
        for part in text.split(", "):
            if part.startswith("pdb "):
                is_name("pdb", (namespace, part.split()[1]), names.pdbs)

    found = sections(lines)
    left = ["NAMESPACE", "KEY", "SKEW", "NEEDS", "HELD BY (pods)", "WORKLOAD (or selector)"]
    for row in cells(found.get("Left above maxSkew", []), left):
        merged = {k: v for line in row for k, v in line.items()}
        is_name("namespace", merged["NAMESPACE"], names.namespaces)
        workload(merged["NAMESPACE"], merged["WORKLOAD (or selector)"])
        pdb(merged["NAMESPACE"], merged["HELD BY (pods)"])
    violations = ["NAMESPACE", "KEY", "MAXSKEW", "SKEW", "WORKLOAD (or selector)", "SPREAD"]
    for row in cells(found.get("Violations", []), violations):
        first = row[0]
        is_name("namespace", first["NAMESPACE"], names.namespaces)
        workload(first["NAMESPACE"], first["WORKLOAD (or selector)"])
        for line in row[1:]:
            for domain in DOMAIN.findall(" ".join(line.values())):
                is_name("domain", domain, names.domains)
    plan = ["WAVE", "POD", "WORKLOAD", "NODE", "TARGET", "REASON"]
    for row in cells(found["Plan"], plan):
        merged = {k: v for line in row for k, v in line.items()}
        namespace = merged["POD"].partition("/")[0]
        is_name("pod", merged["POD"], names.pods)
        workload(namespace, merged["WORKLOAD"])
        is_name("node", merged["NODE"], names.nodes)
        target = re.fullmatch(r"(\S+) \((\S+)\)", merged["TARGET"])
        assert target is not None, merged["TARGET"]
        is_name("node", target.group(1), names.nodes)
        is_name("domain", target.group(2), names.domains)
        pdb(namespace, merged["REASON"])
    skipped = found["Skipped"]
    heads = [i for i, line in enumerate(skipped) if GROUP.match(line)]
    for end in [*heads[1:], len(skipped)]:  # a group's pods: the last line before the next
        for pod in MORE.sub("", skipped[end - 1].strip()).split(", "):
            is_name("pod", pod, names.pods)
    return checked


@pytest.mark.parametrize(("columns", "extra"), [(80, ["--all"]), (110, []), (200, [])], ids=str)
def test_every_name_on_the_screen_is_a_name_of_the_snapshot(
    medium: tuple[Path, Names], tmp_path: Path, columns: int, extra: list[str]
) -> None:
    """``rebalancer plan`` of 30,000 pods in a tmux pane ``columns`` wide: no line wraps (every
    name here fits the width), and every pod, node, namespace, workload, PodDisruptionBudget
    and domain in the table's name columns is the snapshot's, whole."""
    path, names = medium
    command = [sys.executable, "-m", "rebalancer", "plan", "--snapshot", str(path), *extra]
    lines = in_tmux(command, columns, tmp_path)
    assert lines[0].startswith("1986 evictions"), lines[:3]
    assert max(len(line) for line in lines) < columns  # the last column is left free
    checked = check_names(lines, names)
    rows = 1986 if extra else 10
    assert checked["pod"] >= rows  # the plan's rows were read
    assert checked["node"] >= 2 * rows
    assert min(checked.values()) > 0, checked
