"""Hostile and broken input (issue 11 §4): every case ends with one clear error, exit 2 (or 4
for a bug), bounded time and memory, never a traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rebalancer.cli.main import main
from rebalancer.cluster.inputs import MAX_FLOW_DEPTH
from rebalancer.cluster.read import snapshot as snapshot_module
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.cluster.read.snapshot import MAX_LIST_DEPTH, load_objects
from rebalancer.core.convert.checker import show
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, InputError

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).parent / "data" / "cli_snapshot.yaml"
HEADER = "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"

# Nine levels of nine aliases each: 9**9 (387 million) leaves written in under 400 bytes.
ALIAS_BOMB = (
    "kind: Pod\nmetadata:\n  name: p\n  annotations:\n    a: &a [x,x,x,x,x,x,x,x,x]\n"
    + "".join(
        f"    {name}: &{name} [{','.join(['*' + below] * 9)}]\n"
        for below, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
)


def _peak(work: Callable[[], object]) -> int:
    """Peak bytes allocated (tracemalloc) while ``work`` runs."""
    tracemalloc.start()
    try:
        work()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(data), closed=False))


# --- the cost of reporting a bad value -----------------------------------------------------


def test_show_walks_only_what_it_prints() -> None:
    """A bad value that expands to billions of leaves (shared sublists, as YAML aliases build
    them) or refers to itself is quoted in 80 characters with almost no memory."""
    shared: list[Any] = ["x"] * 9
    for _ in range(9):
        shared = [shared] * 9
    looped: dict[str, Any] = {}
    looped["self"] = looped
    for value in (shared, looped, ["y" * 10_000_000], 10**5000):
        text = ""

        def quote(value: object = value) -> None:
            nonlocal text
            text = show(value)

        assert _peak(quote) < 100_000
        assert 0 < len(text) <= 80


def test_show_quotes_small_values_as_json() -> None:
    """Small values read as sorted JSON, as they always did."""
    assert show({"b": 1, "a": [None, True, 1.5, "t"]}) == '{"a": [null, true, 1.5, "t"], "b": 1}'
    assert show("é") == '"\\u00e9"'
    assert show({1: "x", "a": "y"}) == '{"1": "x", "a": "y"}'  # mixed keys do not raise


def test_alias_bomb_fails_fast_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ~300-byte alias chain is refused before it is expanded: exit 2, little memory."""
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 400
    result: list[tuple[int, str, str]] = []
    peak = _peak(lambda: result.append(_run(["plan", "--snapshot", str(path)], capsys)))
    code, out, err = result[0]
    assert code == EXIT_BAD_INPUT and out == ""
    assert "aliases expand" in err and "Traceback" not in err
    assert peak < 20_000_000


def test_alias_bomb_in_a_policy_is_refused() -> None:
    """The policy loader bounds aliases too."""
    body = (
        HEADER
        + "x0: &a0 [1,1,1,1,1,1,1,1,1]\n"
        + "".join(f"x{n}: &a{n} [{','.join([f'*a{n - 1}'] * 9)}]\n" for n in range(1, 8))
    )
    with pytest.raises(InputError) as info:
        load_policy(body, "p.yaml")
    assert "aliases expand" in info.value.problems[0]


def test_moderate_aliases_still_load(tmp_path: Path) -> None:
    """Anchors used the ordinary way (one template, a few uses) are fine."""
    path = tmp_path / "anchors.yaml"
    path.write_text(
        "kind: List\nitems:\n"
        "- {kind: Node, metadata: &m {name: n1, labels: {zone: a}}}\n"
        "- {kind: Node, metadata: {name: n2, labels: *l}}\n".replace("*l", "{zone: b}")
        + "- {kind: Pod, metadata: {name: p, labels: &l {app: web}}, spec: {nodeName: n1}}\n"
        "- {kind: Pod, metadata: {name: q, labels: *l}, spec: {nodeName: n2}}\n"
    )
    assert [o["metadata"]["name"] for o in load_objects(path)] == ["n1", "n2", "p", "q"]


# --- structure ------------------------------------------------------------------------------


def test_self_referential_list_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A List that contains itself (through an alias) is exit 2, not a RecursionError."""
    path = tmp_path / "loop.yaml"
    path.write_text("&top\nkind: List\nitems:\n- *top\n")
    code, _, err = _run(["plan", "--snapshot", str(path)], capsys)
    assert code == EXIT_BAD_INPUT
    assert "an alias refers to a node that contains it" in err


def test_deeply_nested_lists_are_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lists nested deeper than MAX_LIST_DEPTH are exit 2 naming the limit."""
    doc: dict[str, Any] = {"kind": "Node", "metadata": {"name": "n"}}
    for _ in range(MAX_LIST_DEPTH + 5):
        doc = {"kind": "List", "items": [doc]}
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(doc))
    code, _, err = _run(["plan", "--snapshot", str(path)], capsys)
    assert code == EXIT_BAD_INPUT
    assert f"Lists nested more than {MAX_LIST_DEPTH} deep" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x: " + "[" * (MAX_FLOW_DEPTH + 1) + "]" * (MAX_FLOW_DEPTH + 1), "nested more than"),
        # Block nesting: no C stack overflow. PyYAML before 6.0.4 builds the nested lists (not
        # an object); 6.0.4 and later refuse the nesting depth itself.
        ("- " * 60_000 + "x\n", ("must be an object", "invalid YAML: exceeded maximum nesting")),
        ("a: " + "9" * 5000 + "\n", "invalid YAML"),  # int() refuses 5000 digits
    ],
    ids=["flow", "block", "huge-int"],
)
def test_pathological_yaml_ends_cleanly(
    tmp_path: Path, text: str, expected: str | tuple[str, ...]
) -> None:
    """Deep flow or block nesting and huge integers give exit 2 and one clear problem, in a
    child process (a crash of the YAML parser would kill pytest itself)."""
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "rebalancer", "plan", "--snapshot", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    accepted = (expected,) if isinstance(expected, str) else expected
    assert any(message in proc.stderr for message in accepted), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n  - ") == 1


def test_flow_style_yaml_starting_with_a_brace_loads(tmp_path: Path) -> None:
    """``{kind: List, items: [...]}`` is YAML, not broken JSON."""
    path = tmp_path / "flow.yaml"
    path.write_text("{kind: List, items: [{kind: Node, metadata: {name: n1}}]}\n")
    assert load_objects(path) == [{"kind": "Node", "metadata": {"name": "n1"}}]


def test_broken_json_still_reports_the_json_error(tmp_path: Path) -> None:
    """Text that is neither JSON nor YAML gets the JSON error, with line and column."""
    path = tmp_path / "broken.json"
    path.write_text('{"kind": "List", "items": [}\n')
    with pytest.raises(InputError) as info:
        load_objects(path)
    assert "invalid JSON" in info.value.problems[0]


# --- the command line -------------------------------------------------------------------------


def test_empty_snapshot_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot without nodes (a failed kubectl get piped in) is not a balanced cluster."""
    for text in ("", "kind: List\nitems: []\n", "[]", "---\n---\n"):
        path = tmp_path / "empty.yaml"
        path.write_text(text)
        code, out, err = _run(["plan", "--snapshot", str(path)], capsys)
        assert (code, out) == (EXIT_BAD_INPUT, ""), text
        assert "no nodes in the snapshot" in err


def test_unexpected_error_is_one_line_and_exit_4(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug is one line naming the exception (exit 4); --debug adds the traceback."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(snapshot_module, "load_snapshot_skipping", broken)
    code, out, err = _run(["plan", "--snapshot", str(SNAPSHOT)], capsys)
    assert (code, out) == (EXIT_INTERNAL, "")
    assert err.strip().splitlines() == [
        "rebalancer: unexpected error: ZeroDivisionError: division by zero "
        "(--debug prints the traceback)"
    ]
    for argv in (["--debug", "plan"], ["plan", "--debug"]):
        code, _, err = _run([*argv, "--snapshot", str(SNAPSHOT)], capsys)
        assert code == EXIT_INTERNAL
        assert "Traceback (most recent call last)" in err and "ZeroDivisionError" in err


def test_policy_check_and_policy_flag_read_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``policy check -`` and ``--policy -`` read the policy from standard input."""
    _stdin(monkeypatch, (HEADER + "nodeFit: false\n").encode())
    code, out, err = _run(["policy", "check", "-", "-o", "yaml"], capsys)
    assert code == EXIT_OK
    assert err == "standard input: ok\n" and "nodeFit: false" in out
    _stdin(monkeypatch, (HEADER + "limits: {total: 0}\n").encode())
    code, out, _ = _run(
        ["plan", "--snapshot", str(SNAPSHOT), "--policy", "-", "-o", "json"], capsys
    )
    assert code == EXIT_OK
    assert json.loads(out)["evictions"] == []
    code, _, err = _run(["plan", "--snapshot", "-", "--policy", "-"], capsys)
    assert code == EXIT_BAD_INPUT and "cannot both read standard input" in err


def test_closed_stdin_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With standard input closed, ``-`` is exit 2 saying so (no traceback)."""
    monkeypatch.setattr(sys, "stdin", None)
    for argv in (["policy", "check", "-"], ["plan", "--snapshot", "-"]):
        code, _, err = _run(argv, capsys)
        assert code == EXIT_BAD_INPUT
        assert "standard input" in err and "closed" in err


def test_closed_stdin_in_a_real_process() -> None:
    """The same with the descriptor really closed (``<&-``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "rebalancer", "policy", "check", "-"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        preexec_fn=lambda: __import__("os").close(0),
    )
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "closed" in proc.stderr and "Traceback" not in proc.stderr


def test_input_size_is_capped(capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot above the cap, which --max-input-bytes sets, ends with a clear error."""
    code, _, err = _run(["plan", "--snapshot", str(SNAPSHOT), "--max-input-bytes", "4096"], capsys)
    assert code == EXIT_BAD_INPUT
    assert "larger than 4096 bytes" in err and "--max-input-bytes" in err
    code, _, err = _run(["--max-input-bytes", "10", "policy", "check", str(SNAPSHOT)], capsys)
    assert code == EXIT_BAD_INPUT and "larger than 10 bytes" in err
    code, _, err = _run(["--max-input-bytes", "0", "policy", "check", str(SNAPSHOT)], capsys)
    assert code == EXIT_BAD_INPUT and "must be a number of bytes" in err
    code, _, _ = _run(["plan", "--snapshot", str(SNAPSHOT), "--max-input-bytes", "1000000"], capsys)
    assert code == EXIT_OK


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            "gracePeriodSeconds: 99999999999999999999\n",
            "gracePeriodSeconds: must be at most 9223372036854775807, got 99999999999999999999",
        ),
        ("gracePeriodSeconds: 9223372036854775807\n", None),
        ("limits: {total: 4294967296}\n", "limits.total: must be at most 2147483647"),
        (
            "defaultConstraints: [{maxSkew: 2147483648, topologyKey: zone}]\n",
            "defaultConstraints[0].maxSkew: must be at most 2147483647",
        ),
        ("minPodAge: " + "9" * 100 + "h\n", "minPodAge: must be at most 8760h (365 days), got"),
        ("minPodAge: " + "9" * 400 + "h\n", "minPodAge: must be at most 8760h (365 days), got"),
        ("minPodAge: 8760h\n", None),
        ("minPodAge: 525601m\n", 'minPodAge: must be at most 8760h (365 days), got "525601m"'),
        (
            "schedule: {windows: [{cron: '0 2 * * *', duration: 8760h0m0.001s}]}\n",
            'schedule.windows[0].duration: must be at most 8760h (365 days), got "8760h0m0.001s"',
        ),
    ],
)
def test_integer_policy_fields_have_ranges(body: str, problem: str | None) -> None:
    """Integers must fit the API type they end up in (int64 grace period, int32 counts);
    durations are at most a year (365 x 24 h = 8760h = 525600m)."""
    if problem is None:
        load_policy(HEADER + body, "p.yaml")
        return
    with pytest.raises(InputError) as info:
        load_policy(HEADER + body, "p.yaml")
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems


@pytest.mark.parametrize("shape", ["array", "list"])
def test_millions_of_bad_items_stop_at_the_problem_cap(
    tmp_path: Path, shape: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """300,000 items that are no API object (``{}``: 3 bytes each), as a top-level array or
    a List's items: the first 1,000 problems are reported and reading stops there, instead of
    a problem held, formatted and printed for each (3.6 GB for 3 million of them)."""
    items = ",".join(["{}"] * 300_000)
    body = f"[{items}]" if shape == "array" else f'{{"kind":"List","items":[{items}]}}'
    path = tmp_path / "bad.json"
    path.write_text(body)
    code, _, err = _run(["plan", "--snapshot", str(path)], capsys)
    assert code == EXIT_BAD_INPUT
    assert f"{path}: 1001 problem(s):" in err
    assert err.count("kind must be a non-empty string, got null") == 1000
    assert "more problems after these 1000: the rest is not read" in err
