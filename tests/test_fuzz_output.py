"""Hostile strings from the cluster or a file never reach the terminal raw (fuzzed).

Pod, node and namespace names, label values, zone names, admission webhook messages, Lease
holders and policy problems holding ESC, OSC, BEL, CR, DEL, C1 characters, bidirectional
overrides, zero-width and other format characters or lone surrogates go
through every renderer (table, wide, cut to a width, explain, views, run, JSON, YAML, HTML) and
out through the command's writers (stdout and the error line): no control character other than
a newline comes out, the output still encodes as UTF-8, and the names are still there, escaped.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import unicodedata
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rebalancer.cli import errorline
from rebalancer.cli.common import write
from rebalancer.cli.main import main
from rebalancer.cli.printable import printable
from rebalancer.cli.render import (
    REPORT_FORMATS,
    TableStyle,
    render_explanation,
    render_plan,
    render_run,
    render_views,
)
from rebalancer.cluster.act.lease import Holder
from rebalancer.cluster.act.outcome import EvictionResult, Outcome, RunEnd
from rebalancer.cluster.act.runner import RunReport, ViewSkew, Wave
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.errors import InputError
from rebalancer.core.explain import explain
from rebalancer.core.model import ZONE_KEY, OwnerRef, Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zone_constraint

CONTROL = frozenset(
    [chr(c) for c in range(0x20) if c != 0x0A]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + [chr(c) for c in range(0xD800, 0xE000)]
    + ["\u2028", "\u2029"]
    + [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
)
"""What must never come out raw: C0 but newline, DEL, C1, line separators, surrogates, and
Unicode's format characters (category Cf: U+202E RIGHT-TO-LEFT OVERRIDE, U+2066-U+2069
isolates, U+200B ZERO WIDTH SPACE, U+FEFF, U+061C ARABIC LETTER MARK, tags, ...)."""

HOSTILE_CHARS = [
    "\x1b",
    "\x07",
    "\r",
    "\t",
    "\x00",
    "\x08",
    "\x7f",
    "\x85",
    "\x9b",
    "\x9d",
    "\ud800",
    "]0;",
    "[31m",
    "\n",
    "a",
    "b",
    "-",
    ".",
    "é",
    "\u2028",
    "\u202e",
    "\u2066",
    "\u2069",
    "\u200b",
    "\ufeff",
    "\u061c",
    "\U000e0041",
]
hostile = st.lists(st.sampled_from(HOSTILE_CHARS), min_size=1, max_size=6).map("".join)
STYLES = (TableStyle(), TableStyle(wide=True), TableStyle(width=60), TableStyle(unicode=False))


def shown(produce: Callable[[], str]) -> str:
    """What the command writes to stdout for ``produce()``'s text."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        write(produce())
    return buf.getvalue()


def said(text: object) -> str:
    """What the command writes to stderr as an error line."""
    buf = io.StringIO()
    errorline.say(text, buf)
    return buf.getvalue()


def assert_clean(text: str) -> None:
    raw = sorted({c for c in text if c in CONTROL})
    assert raw == [], f"raw control characters {raw!r} in {text!r}"
    text.encode("utf-8")  # a lone surrogate would fail here, as on a real stdout


def cluster(zones: list[str], nodes: list[str], names: list[str], value: str) -> Snapshot:
    """Zones [4, 1] or [4, 1, 0] of one hard zone constraint (maxSkew 1): a plan; the pod
    without a controller is skipped."""
    c = zone_constraint("web")
    ns = value
    node_objs = [node(n, z) for n, z in zip(nodes, zones, strict=True)]
    pods = []
    for i, name in enumerate(names):
        where = nodes[0] if i < 4 else nodes[1]
        pods.append(
            pod(
                name,
                where,
                namespace=ns,
                constraints=[c],
                labels={"tier": value},
                created=1000 + i,
                owner=None if i == 0 else OwnerRef("ReplicaSet", value),
            )
        )
    return Snapshot(nodes=tuple(node_objs), pods=tuple(pods))


@st.composite
def hostile_clusters(draw: st.DrawFn) -> tuple[Snapshot, str]:
    zones = draw(st.lists(hostile, min_size=2, max_size=3, unique=True))
    nodes = [f"n{i}{z}" for i, z in enumerate(zones)]
    names = draw(st.lists(hostile, min_size=5, max_size=5, unique=True))
    return cluster(zones, nodes, [f"p{i}{n}" for i, n in enumerate(names)], draw(hostile)), draw(
        hostile
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_clusters())
def test_no_renderer_lets_a_control_character_through(case: tuple[Snapshot, str]) -> None:
    """Plans, explanations, views and runs of a hostile cluster, in every format and style."""
    snapshot, message = case
    planned = plan(snapshot, Policy(), 2000.0)
    assert planned.evictions, "the cluster is skewed: something is planned"
    target = snapshot.pods[-1]
    expl = explain(snapshot, Policy(), target.namespace, target.name)
    results = tuple(
        EvictionResult(e, outcome, f"denied {message}", status)
        for e, (outcome, status) in zip(
            planned.evictions,
            [(Outcome.FAILED, 403), (Outcome.EVICTED, 201), (Outcome.BLOCKED_BY_PDB, 429)],
            strict=False,
        )
    )
    view = planned.violations[0]
    skews = (
        ViewSkew(
            view.namespace, view.topology_key, view.selector, 1, view.when_unsatisfiable, 2, 0
        ),
    )
    report = RunReport(message, planned, (Wave(1, planned, results),), None, RunEnd.MAX_WAVES,
                       skews, 1.0)  # fmt: skip
    held = RunReport(message, planned, (), None, RunEnd.LEASE_HELD, (), 0.1,
                     lease_holder=Holder(message, message, "", 10.0))  # fmt: skip
    outputs: list[str] = []
    for fmt in REPORT_FORMATS:
        outputs.append(shown(partial(render_plan, planned, fmt)))
        outputs.append(shown(partial(render_run, report, fmt)))
        outputs.append(shown(partial(render_run, held, fmt)))
    for fmt in ("table", "json", "yaml"):
        outputs.append(shown(partial(render_explanation, expl, fmt)))
        outputs.append(shown(partial(render_views, planned.violations, fmt)))
    for style in STYLES:
        # Tables escape each cell themselves, before the writers' last guard.
        assert_clean(render_plan(planned, "table", style))
        assert_clean(render_run(report, "table", style))
        assert_clean(render_explanation(expl, "table", style))
        outputs.append(shown(partial(render_plan, planned, "table", style)))
        outputs.append(shown(partial(render_run, report, "table", style)))
        outputs.append(shown(partial(render_explanation, expl, "table", style)))
    outputs.append(said(f"rebalancer: cluster error: eviction of x: {message}"))
    for text in outputs:
        assert_clean(text)
    table = outputs[0]
    for e in planned.evictions:
        assert printable(e.key) in table  # still there, escaped
    run_table = outputs[1]
    assert printable(f"denied {message}").rstrip() in run_table  # a last column is rstripped
    for text in (o for o in outputs if o.lstrip().startswith("{")):
        json.loads(text)  # escaping kept the JSON valid


@settings(max_examples=60, deadline=None)
@given(key=hostile, value=hostile)
def test_policy_problems_are_printable(key: str, value: str) -> None:
    """A policy whose keys and values hold control characters: every problem line is clean."""
    text = (
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"
        f"{json.dumps(key)}: 1\nnamespaces: {{include: [{json.dumps(value)}]}}\n"
        f"minPodAge: {json.dumps(value)}\n"
    )
    try:
        load_policy(text, f"policy{value}.yaml")
    except InputError as exc:
        assert_clean(said(exc))
    else:
        pytest.fail("a policy with an unknown key loaded")


def hostile_snapshot(tmp_path: Path) -> tuple[Path, str]:
    """examples/skewed-cluster.yaml with escapes in a zone, a label value and every pod name."""
    doc = yaml.safe_load(Path("examples/skewed-cluster.yaml").read_text())
    evil = "\x1b]0;PWNED\x07\r\x9b31m\u202e\u2066\u200b\ufeff\u061c"
    first = ""
    for item in doc["items"]:
        meta = item["metadata"]
        labels = meta.setdefault("labels", {})
        if labels.get(ZONE_KEY) == "eu-west-1a":
            labels[ZONE_KEY] = "eu-west-1a" + evil
        if item["kind"] == "Pod":
            meta["name"] += evil
            labels["tier"] = evil
            first = first or f"{meta['namespace']}/{meta['name']}"
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, first


@pytest.mark.parametrize(
    "args",
    [
        ["plan"],
        ["plan", "--wide"],
        ["plan", "-o", "json"],
        ["plan", "-o", "yaml"],
        ["plan", "-o", "html"],
        ["explain"],
        ["explain", "-o", "json"],
    ],
)
def test_the_cli_prints_a_hostile_snapshot_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """The real command on a snapshot with escapes in names, zones and labels: none gets out."""
    path, first = hostile_snapshot(tmp_path)
    extra = ["--pod", first] if args[0] == "explain" else []
    code = main([*args, "--snapshot", str(path), *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert_clean(out)
    assert_clean(err)
    assert "PWNED" in out
    if "-o" not in args:
        assert "\\u001b]0;PWNED\\u0007\\r\\u009b31m\\u202e\\u2066\\u200b\\ufeff\\u061c" in out


def test_json_output_of_a_hostile_snapshot_reads_back_the_names_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``plan -o json``: the escapes are JSON's own, so a program reading the output gets the
    pod's name exactly as the snapshot has it, format characters included."""
    path, first = hostile_snapshot(tmp_path)
    code = main(["plan", "--snapshot", str(path), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert_clean(out)
    assert "\u202e" in first
    found: list[str] = []

    def strings(value: object) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for inner in value.values():
                strings(inner)
        elif isinstance(value, list):
            for inner in value:
                strings(inner)

    strings(json.loads(out))
    evil = "\x1b]0;PWNED\x07\r\x9b31m\u202e\u2066\u200b\ufeff\u061c"  # as hostile_snapshot
    assert any(text.endswith(evil) for text in found)


def test_policy_import_notes_quote_the_file_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``policy import`` writes a note per setting it does not carry, quoting the file's
    plugin name: a name holding an OSC title change and a right-to-left override comes out
    escaped on stderr, like every other line there."""
    path = tmp_path / "descheduler.yaml"
    path.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
        '  - name: p\n    pluginConfig:\n      - name: "Evil\\u202eName\\e]0;PWN\\a"\n'
        "        args: {}\n    plugins:\n      balance:\n"
        "        enabled: [RemovePodsViolatingTopologySpreadConstraint]\n"
    )
    assert main(["policy", "import", str(path)]) == 0
    out, err = capsys.readouterr()
    assert_clean(out)
    assert_clean(err)
    assert "Evil\\u202eName\\u001b]0;PWN\\u0007's args are not carried" in err
