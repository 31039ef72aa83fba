"""Tests for rebalancer.cluster.read.snapshot: snapshot files in, API objects and Snapshots out."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import orjson
import pytest
import yaml

from rebalancer.cluster.read.snapshot import (
    dump_objects,
    load_objects,
    load_snapshot,
    parse_objects,
)
from rebalancer.core.errors import InputError
from rebalancer.core.model import LabelSelector, Requirement

DATA = Path(__file__).parent / "data" / "snapshot"
ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "skewed-cluster.yaml"


def write(tmp_path: Path, text: str, name: str = "snap.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load_problems(path: Path) -> tuple[str, ...]:
    with pytest.raises(InputError) as info:
        load_objects(path)
    assert info.value.source == str(path)
    return info.value.problems


# --- formats --------------------------------------------------------------------------------


def test_list_yaml_json_and_multidoc_give_equal_snapshots() -> None:
    """kubectl's YAML List, its JSON List and multi-document YAML load to one Snapshot."""
    from_yaml = load_snapshot(DATA / "small-list.yaml")
    from_json = load_snapshot(DATA / "small-list.json")
    from_docs = load_snapshot(DATA / "small-multidoc.yaml")
    assert from_yaml == from_json == from_docs
    assert [p.key for p in from_yaml.pods] == ["data/cache-0", "shop/web-7d9f8-abcde"]
    assert [n.name for n in from_yaml.nodes] == ["node-a", "node-b"]
    assert len(from_yaml.pdbs) == len(from_yaml.pvs) == len(from_yaml.services) == 1


def test_snapshot_file_contents_are_converted() -> None:
    """The loaded snapshot carries the converted fields, matchLabelKeys merged."""
    snapshot = load_snapshot(DATA / "small-list.yaml")
    web = snapshot.pods[1]
    assert web.requests == {"cpu": 250, "memory": 256 * 1024**2}
    (zone,) = web.constraints
    assert zone.selector == LabelSelector(
        (("app", "web"),), (Requirement("pod-template-hash", "In", ("7d9f8",)),)
    )
    assert snapshot.pods[0].pvc_names == ("data-cache-0",)
    assert [n.ready for n in snapshot.nodes] == [True, False]


def test_objects_are_the_same_in_every_format() -> None:
    """load_objects unrolls Lists into the same objects, in file order."""
    objects = load_objects(DATA / "small-list.yaml")
    assert load_objects(DATA / "small-list.json") == objects
    assert load_objects(DATA / "small-multidoc.yaml") == objects
    assert [o["kind"] for o in objects][:3] == ["Node", "Node", "Pod"]
    assert len(objects) == 11


def test_json_is_detected_after_leading_whitespace(tmp_path: Path) -> None:
    """A JSON file may start with blank lines; a top-level array holds documents."""
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "d"}}
    path = write(
        tmp_path, "\n   \n" + orjson.dumps([pod, {"kind": "List", "items": [pod]}]).decode()
    )
    assert load_objects(path) == [pod, pod]


def test_utf8_bom_is_ignored(tmp_path: Path) -> None:
    """A byte order mark before the JSON does not hide it."""
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"kind": "Node", "metadata": {"name": "n"}}')
    assert load_objects(path) == [{"kind": "Node", "metadata": {"name": "n"}}]


def test_typed_list_lends_its_kind_to_items(tmp_path: Path) -> None:
    """Items of a PodList (as the API returns it) without kind become Pods."""
    text = "kind: PodList\napiVersion: v1\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n"
    objects = load_objects(write(tmp_path, text))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("Pod", "a"), ("Pod", "b")]


def test_empty_documents_and_lists_are_skipped(tmp_path: Path) -> None:
    """Empty YAML documents and `items: null` contribute nothing."""
    text = "---\n---\nkind: List\nitems: null\n---\nkind: Node\nmetadata: {name: n}\n---\n"
    assert load_objects(write(tmp_path, text)) == [{"kind": "Node", "metadata": {"name": "n"}}]


def test_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """`-` reads the snapshot from standard input."""
    stdin = SimpleNamespace(buffer=io.BytesIO(b'{"kind": "Node", "metadata": {"name": "n"}}'))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert load_objects("-") == [{"kind": "Node", "metadata": {"name": "n"}}]


# --- errors ---------------------------------------------------------------------------------


def test_unreadable_file(tmp_path: Path) -> None:
    """A missing file is an InputError naming it."""
    problems = load_problems(tmp_path / "missing.yaml")
    assert problems == ("cannot read the file: No such file or directory",)


def test_bad_yaml_reports_line_and_column(tmp_path: Path) -> None:
    """A YAML syntax error names the line and column."""
    text = "kind: List\nitems:\n- kind: Pod\n  metadata: {name: [unclosed\n"
    (problem,) = load_problems(write(tmp_path, text))
    assert problem.startswith("line 5, column 1: invalid YAML:")


def test_bad_json_reports_line_and_column(tmp_path: Path) -> None:
    """A JSON syntax error names the line and column."""
    text = '{\n  "kind": "List",\n  "items": [,]\n}\n'
    (problem,) = load_problems(write(tmp_path, text, "snap.json"))
    assert problem.startswith("line 3, column 13: invalid JSON:")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a\n- b\n", "document 1: must be an object (an API object or a List), got a list"),
        (
            "kind: Node\n---\njust text\n",
            "document 2: must be an object (an API object or a List), got a string",
        ),
        ("metadata: {name: n}\n", "document 1: kind must be a non-empty string, got null"),
        (
            "kind: List\nitems:\n- kind: Node\n- metadata: {name: x}\n",
            "document 1, items[1]: kind must be a non-empty string, got null",
        ),
        (
            "kind: List\nitems:\n- kind: List\n  items: [{kind: ''}]\n",
            'document 1, items[0], items[0]: kind must be a non-empty string, got ""',
        ),
        ("kind: List\nitems: {a: 1}\n", "document 1: items must be a list, got dict"),
    ],
)
def test_document_problems(tmp_path: Path, text: str, problem: str) -> None:
    """Documents that are not objects and items without kind are named by index."""
    assert load_problems(write(tmp_path, text)) == (problem,)


def test_every_file_problem_is_reported(tmp_path: Path) -> None:
    """All bad documents and items are reported together."""
    text = "- 1\n---\nkind: List\nitems: [{}, {kind: Pod}, 3]\n"
    problems = load_problems(write(tmp_path, text))
    assert problems == (
        "document 1: must be an object (an API object or a List), got a list",
        "document 2, items[0]: kind must be a non-empty string, got null",
        "document 2, items[2]: must be an object (an API object or a List), got int",
    )


def test_conversion_problems_name_the_file(tmp_path: Path) -> None:
    """Problems in the objects are raised with the file as source."""
    text = "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: lots}}\n"
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_snapshot(path)
    assert info.value.source == str(path)
    assert info.value.problems[0].startswith("Node n: status.allocatable.cpu: must be a quantity")


# --- dump -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_dump_round_trips(tmp_path: Path, fmt: Any) -> None:
    """What dump_objects writes loads back to the same objects and Snapshot."""
    objects = load_objects(DATA / "small-list.yaml")
    path = tmp_path / f"out.{fmt}"
    path.write_bytes(dump_objects(objects, fmt))
    assert load_objects(path) == objects
    assert load_snapshot(path) == load_snapshot(DATA / "small-list.yaml")


def test_dump_is_deterministic_and_sorted() -> None:
    """Key order in the input does not change the bytes; keys come out sorted."""
    a = [{"kind": "Node", "metadata": {"name": "n", "labels": {"b": "1", "a": "2"}}}]
    b = [{"metadata": {"labels": {"a": "2", "b": "1"}, "name": "n"}, "kind": "Node"}]
    for fmt in ("yaml", "json"):
        assert dump_objects(a, fmt) == dump_objects(b, fmt)
    assert dump_objects(a, "yaml").startswith(b"apiVersion: v1\nitems:\n- kind: Node\n")
    document = orjson.loads(dump_objects(a, "json"))
    assert (document["kind"], document["apiVersion"]) == ("List", "v1")


def test_dump_writes_timestamps_as_rfc3339_z() -> None:
    """Datetimes (unquoted YAML timestamps) are written as kubectl writes them."""
    moment = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    objects = [{"kind": "Pod", "metadata": {"creationTimestamp": moment}}]
    written = yaml.safe_load(dump_objects(objects, "yaml"))
    assert written["items"][0]["metadata"]["creationTimestamp"] == "2025-01-02T03:04:05Z"


def test_dump_rejects_unknown_format() -> None:
    """Only yaml and json are written."""
    with pytest.raises(ValueError, match="unknown snapshot format 'xml'"):
        dump_objects([], "xml")  # type: ignore[arg-type]


# --- the example ----------------------------------------------------------------------------


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "example_generate", ROOT / "examples" / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_is_what_the_generator_writes() -> None:
    """examples/skewed-cluster.yaml is up to date with examples/generate.py."""
    assert load_generator().render() == EXAMPLE.read_bytes()


def test_example_loads_as_a_skewed_cluster() -> None:
    """The example converts cleanly and holds the workloads its docstring promises."""
    snapshot = load_snapshot(EXAMPLE)
    text = EXAMPLE.read_text()
    assert text.count("\n") < 3000
    assert len(snapshot.nodes) == 10
    assert [n.name for n in snapshot.nodes if not n.ready] == ["node-c3"]
    assert [n.name for n in snapshot.nodes if n.unschedulable] == ["node-b3"]
    zones = {n.name: n.labels["topology.kubernetes.io/zone"][-1] for n in snapshot.nodes}
    web = [p for p in snapshot.pods if p.namespace == "shop" and p.labels.get("app") == "web"]
    counts = [sum(zones[p.node_name or ""] == z for p in web) for z in "abc"]
    assert counts == [6, 2, 1]
    daemon = [p for p in snapshot.pods if p.owner is not None and p.owner.kind == "DaemonSet"]
    assert sorted(p.node_name or "" for p in daemon) == sorted(zones)
    assert [p.key for p in snapshot.pods if p.mirror] == ["kube-system/kube-apiserver-cp-1"]
    assert [p.key for p in snapshot.pods if p.owner is None] == ["default/debug-shell"]
    assert [p.disruptions_allowed for p in snapshot.pdbs] == [0, 1, 1]
    assert {c.name: c.value for c in snapshot.priority_classes}["batch-low"] == 1000
    assert all(v.node_affinity is not None for v in snapshot.pvs)


def test_parse_objects_names_its_source() -> None:
    """parse_objects reads bytes already in memory and names the given source in problems."""
    assert parse_objects(b"kind: Node\nmetadata: {name: n}\n", "page") == [
        {"kind": "Node", "metadata": {"name": "n"}}
    ]
    with pytest.raises(InputError) as info:
        parse_objects(b"[1]", "page")
    assert info.value.source == "page"


# --- the line-per-item JSON layout ------------------------------------------------------------


def _no_whole_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the whole-document path fail, so a load that succeeds must have streamed."""

    def refuse(data: bytes, source: str) -> list[dict[str, Any]]:
        raise AssertionError("parsed the whole document")

    monkeypatch.setattr("rebalancer.cluster.read.snapshot.parse_objects", refuse)


def test_json_dump_has_one_item_per_line() -> None:
    """A first line, one compact object per line, a last line; still one JSON document."""
    objects = load_objects(DATA / "small-list.yaml")
    lines = dump_objects(objects, "json").decode().splitlines()
    assert lines[0] == '{"apiVersion":"v1","items":['
    assert lines[-1] == '],"kind":"List","metadata":{"resourceVersion":""}}'
    middle = lines[1:-1]
    assert [orjson.loads(line.removesuffix(",")) for line in middle] == objects
    assert all(line.endswith(",") for line in middle[:-1]) and not middle[-1].endswith(",")
    assert orjson.loads("\n".join(lines))["items"] == objects


def test_line_layout_is_streamed_item_by_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_snapshot converts the line layout without parsing the whole document."""
    expected = load_snapshot(DATA / "small-list.yaml")
    path = tmp_path / "snap.json"
    path.write_bytes(dump_objects(load_objects(DATA / "small-list.yaml"), "json"))
    _no_whole_parse(monkeypatch)
    assert load_snapshot(path) == expected


def test_line_layout_streams_crlf_bom_stdin_and_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CRLF line ends, a BOM, standard input and an empty List all stream too."""
    expected = load_snapshot(DATA / "small-list.yaml")
    data = dump_objects(load_objects(DATA / "small-list.yaml"), "json")
    crlf = tmp_path / "crlf.json"
    crlf.write_bytes(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"))
    empty = tmp_path / "empty.json"
    empty.write_bytes(dump_objects([], "json"))
    _no_whole_parse(monkeypatch)
    assert load_snapshot(crlf) == expected
    assert load_snapshot(empty).pods == ()
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(data)))
    assert load_snapshot("-") == expected


def test_line_layout_problems_match_the_whole_parse(tmp_path: Path) -> None:
    """A bad object is reported the same way whether the file was streamed or not."""
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "a"}, "spec": {"priority": "x"}}
    streamed = tmp_path / "lines.json"
    streamed.write_bytes(dump_objects([pod], "json"))
    whole = tmp_path / "whole.json"
    whole.write_bytes(orjson.dumps({"kind": "List", "items": [pod]}, option=orjson.OPT_INDENT_2))
    problems = []
    for path in (streamed, whole):
        with pytest.raises(InputError) as info:
            load_snapshot(path)
        problems.append(info.value.problems)
    assert problems[0] == problems[1]
    assert any("spec.priority: must be an integer" in p for p in problems[0])


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda lines: [*lines[:2], b"{not json},", *lines[3:]], "line 3, column 2: invalid JSON"),
        (lambda lines: lines[:-1], "invalid JSON: unexpected end of data"),  # no last line
        (lambda lines: [*lines, b"trailing"], "invalid JSON"),
    ],
    ids=["bad-item", "truncated", "trailing-text"],
)
def test_line_layout_errors_name_line_and_column(tmp_path: Path, edit: Any, expected: str) -> None:
    """A broken line-layout file falls back to the whole parse, which names line and column."""
    objects = load_objects(DATA / "small-list.yaml")
    lines = dump_objects(objects, "json").splitlines()
    path = tmp_path / "broken.json"
    path.write_bytes(b"\n".join(edit(lines)) + b"\n")
    with pytest.raises(InputError) as info:
        load_snapshot(path)
    assert info.value.source == str(path)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_line_layout_with_hand_edits_still_loads(tmp_path: Path) -> None:
    """An item spread over several lines, or a nested List, is read by the whole parse."""
    objects = load_objects(DATA / "small-list.yaml")
    expected = load_snapshot(DATA / "small-list.yaml")
    lines = dump_objects(objects, "json").splitlines()
    spread = [lines[0], orjson.dumps(objects[0], option=orjson.OPT_INDENT_2) + b",", *lines[2:]]
    nested = [lines[0], orjson.dumps({"kind": "List", "items": objects}), lines[-1]]
    for i, text in enumerate((spread, nested)):
        path = tmp_path / f"edited-{i}.json"
        path.write_bytes(b"\n".join(text) + b"\n")
        assert load_snapshot(path) == expected


# --- reading a whole file ---------------------------------------------------------------------


def test_whole_file_is_read_from_its_start_after_its_first_line(tmp_path: Path) -> None:
    from rebalancer.cluster.read.snapshot import _whole  # noqa: PLC0415  # private helper

    body = b'{"kind": "List",\n' + b"x" * 100_000 + b"\nend\n"
    path = tmp_path / "doc.json"
    path.write_bytes(body)
    with path.open("rb") as fh:
        assert fh.readline(30) == body[:17]
        assert _whole(fh) == body
    assert _whole(io.BytesIO(body)) == body  # no file descriptor: read as before


def _stale_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The size before another writer appended: fstat says 4 bytes."""
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> Any:
        return SimpleNamespace(st_size=4, st_mode=real_fstat(fd).st_mode)

    monkeypatch.setattr(os, "fstat", stale_fstat)


def _short_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``pread`` returns at most about 2 GiB on Linux; here at most 3 bytes."""
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: real_pread(fd, min(n, 3), at))


@pytest.mark.parametrize("disturb", [_stale_size, _short_reads])
def test_whole_file_is_read_to_its_end_when_one_read_does_not_get_it_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disturb: Any
) -> None:
    from rebalancer.cluster.read.snapshot import _whole  # noqa: PLC0415  # private helper

    path = tmp_path / "doc.json"
    path.write_bytes(b"0123456789")
    with path.open("rb") as fh:
        disturb(monkeypatch)
        assert _whole(fh) == b"0123456789"
