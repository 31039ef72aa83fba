"""Fuzzing snapshot and policy loading through the command line (issue 11 §7).

Documents are built from the repository's own examples (snapshots under ``examples/`` and
``tests/data``, policies under ``policies/``) and mutated two ways: structurally (a value in
the decoded document replaced by a random JSON value, a key dropped, a list emptied, then
written back as JSON or YAML) and textually (bytes and YAML/JSON tokens inserted, deleted,
duplicated). Each mutant goes through ``rebalancer.cli.main.main`` in-process, as
``plan --snapshot``, ``policy check`` or ``plan --policy``. Whatever the input: no traceback,
exit 0 or 2, and the memory allocated while it runs (tracemalloc peak) stays within a small
multiple of the input (MEMORY_FLOOR + MEMORY_FACTOR bytes per input byte).

The budget is bounded (``REBALANCER_FUZZ_EXAMPLES`` per test, default 120, deterministic
unless the variable is set), so the whole file runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rebalancer.cli.main import main
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_OK

ROOT: Final = Path(__file__).resolve().parent.parent
DATA: Final = Path(__file__).parent / "data"
SNAPSHOT_SEEDS: Final = (
    DATA / "cli_snapshot.yaml",
    DATA / "snapshot" / "small-list.yaml",
    DATA / "snapshot" / "small-list.json",
    DATA / "snapshot" / "small-multidoc.yaml",
)
POLICY_SEEDS: Final = (
    ROOT / "policies" / "default.yaml",
    *sorted((ROOT / "policies" / "examples").glob("*.yaml")),
)
EXAMPLES: Final = int(os.environ.get("REBALANCER_FUZZ_EXAMPLES", "120"))
FUZZ: Final = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="REBALANCER_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

MEMORY_FACTOR: Final = 100
"""Peak bytes allocated per input byte (decoded YAML costs tens of times its text)..."""
MEMORY_FLOOR: Final = 4 * 1024**2
"""...plus a fixed allowance (a plan and its rendering, caches filled on first use). Measured
on 600 mutants: at most ~1.2 MB in all, for inputs of a few kB."""

TOKENS: Final = (
    b"&a ",
    b"*a",
    b"&b [*a, *a, *a]",
    b"{",
    b"}",
    b"[",
    b"]",
    b"---\n",
    b": ",
    b"- ",
    b"!!binary ",
    b"!!set ",
    b"!!python/object:os.system ",
    b'"',
    b"'",
    b"\n",
    b"\t",
    b"\x00",
    b"\xff",
    b"null",
    b"~",
    b"-1",
    b"0",
    b"1e309",
    b"99999999999999999999",
    b"2024-01-01T00:00:00Z",
    b"kind: List\nitems:\n",
    b'{"kind": "List", "items": [',
    b"?",
    b"%YAML 1.1\n",
    b"<<: *a\n",
)


def _seed_documents(path: Path) -> list[Any]:
    text = path.read_text()
    if path.suffix == ".json":
        return [json.loads(text)]
    return [d for d in yaml.safe_load_all(text) if d is not None]


SNAPSHOT_DOCS: Final = {p.name: _seed_documents(p) for p in SNAPSHOT_SEEDS}
POLICY_DOCS: Final = {p.name: _seed_documents(p) for p in POLICY_SEEDS}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["", "100m", "1Gi", "-1", "In", "DoNotSchedule", "Pod", "List", "zone"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indices)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found.extend(_paths(inner, (*prefix, key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found.extend(_paths(inner, (*prefix, index)))
    return found


def _set(root: Any, path: tuple[Any, ...], make: Any) -> Any:
    """``root`` with the value at ``path`` replaced by ``make(old)`` (``...`` deletes it)."""
    if not path:
        return make(root)
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    new = make(parent[path[-1]])
    if new is ...:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return root


def _emptied(old: Any) -> Any:
    return type(old)() if isinstance(old, list | dict) else None


@st.composite
def structural(draw: st.DrawFn, seeds: dict[str, list[Any]]) -> bytes:
    """A seed's documents with a few values replaced, dropped or emptied, as JSON or YAML."""
    name = draw(st.sampled_from(sorted(seeds)))
    docs = json.loads(json.dumps(seeds[name], default=str))  # a private deep copy
    for _ in range(draw(st.integers(1, 4))):
        d = draw(st.integers(0, len(docs) - 1))
        path = draw(st.sampled_from(_paths(docs[d])))
        action = draw(st.sampled_from(["replace", "drop", "empty", "duplicate"]))
        if action == "replace":
            value = draw(json_values)
            docs[d] = _set(docs[d], path, lambda _old, value=value: value)
        elif action == "drop" and path:
            docs[d] = _set(docs[d], path, lambda _old: ...)
        elif action == "empty":
            docs[d] = _set(
                docs[d], path, lambda old: type(old)() if isinstance(old, list | dict) else None
            )
        elif action == "duplicate" and isinstance(docs[d], dict) and "items" in docs[d]:
            items = docs[d]["items"]
            if isinstance(items, list) and items:
                items.append(json.loads(json.dumps(items[draw(st.integers(0, len(items) - 1))])))
    if draw(st.booleans()):
        return json.dumps(docs[0] if len(docs) == 1 else {"kind": "List", "items": docs}).encode()
    return yaml.safe_dump_all(docs, sort_keys=False).encode()


@st.composite
def textual(draw: st.DrawFn, seeds: tuple[Path, ...]) -> bytes:
    """A seed file's bytes with tokens inserted and ranges deleted or duplicated."""
    data = bytearray(draw(st.sampled_from(seeds)).read_bytes())
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "duplicate", "byte"]))
        if action == "insert":
            data[at:at] = draw(st.sampled_from(TOKENS) | st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif action == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 256))]
        elif data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
    return bytes(data)


def _run(argv: list[str], data: bytes, suffix: str) -> tuple[int, str, int]:
    """Exit code, stderr and the tracemalloc peak of ``main(argv + [file holding data])``."""
    with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
        handle.write(data)
        handle.flush()
        out, err = io.StringIO(), io.StringIO()
        tracemalloc.start()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main([*argv, handle.name])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return code, err.getvalue(), peak


def _check(code: int, err: str, peak: int, data: bytes) -> None:
    assert code in (EXIT_OK, EXIT_BAD_INPUT), err
    assert "Traceback" not in err and "unexpected error" not in err, err
    assert peak <= MEMORY_FLOOR + MEMORY_FACTOR * len(data), (peak, len(data))


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """Import everything the commands import on first use, outside the measured runs."""
    for seed in SNAPSHOT_SEEDS[:1]:
        _run(["plan", "--snapshot"], seed.read_bytes(), ".yaml")
    _run(["policy", "check"], POLICY_SEEDS[0].read_bytes(), ".yaml")


@FUZZ
@given(data=structural(SNAPSHOT_DOCS) | textual(SNAPSHOT_SEEDS))
def test_mutated_snapshots(data: bytes) -> None:
    """``plan --snapshot`` on a mutated snapshot: exit 0 or 2, no traceback, bounded memory."""
    _check(*_run(["plan", "-o", "json", "--snapshot"], data, ".yaml"), data)


@FUZZ
@given(data=structural(POLICY_DOCS) | textual(POLICY_SEEDS))
def test_mutated_policies(data: bytes) -> None:
    """``policy check`` on a mutated policy: exit 0 or 2, no traceback, bounded memory."""
    _check(*_run(["policy", "check"], data, ".yaml"), data)


@FUZZ
@given(data=structural(POLICY_DOCS) | textual(POLICY_SEEDS))
def test_mutated_policies_drive_a_plan(data: bytes) -> None:
    """``plan`` with a mutated policy over a valid snapshot: a policy that loads plans without
    error (exit 0), any other is exit 2; never a traceback, bounded memory."""
    argv = ["plan", "-o", "json", "--snapshot", str(SNAPSHOT_SEEDS[0]), "--policy"]
    _check(*_run(argv, data, ".yaml"), data)
