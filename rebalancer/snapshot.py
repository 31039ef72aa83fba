"""Snapshot files: what ``kubectl get nodes,pods,pdb,... -A -o yaml`` (or ``-o json``) prints.

Reads (a) a ``kind: List`` with ``items`` in YAML, (b) the same in JSON, (c) multi-document YAML
of single objects and/or Lists, nested Lists included; typed lists (``PodList``, as the API
returns them) lend their item kind to items that lack one. JSON is recognised by its first
character and parsed with orjson; YAML with libyaml when available. Every problem is reported
as one :class:`InputError` naming the file.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

import orjson
import yaml

from rebalancer.convert import gc_paused, snapshot_from_objects
from rebalancer.errors import InputError
from rebalancer.model import Snapshot

__all__ = ["dump_objects", "load_objects", "load_snapshot", "parse_objects"]

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_UTF8_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"


def _read(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes; ``-`` is standard input."""
    try:
        if str(path) == "-":
            return sys.stdin.buffer.read()
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from exc


def _is_json(data: bytes) -> bool:
    start = data.lstrip(_WHITESPACE)[:1]
    return start in (b"{", b"[")


def _json_documents(data: bytes, source: str) -> list[Any]:
    try:
        with gc_paused():  # orjson builds millions of dicts; see gc_paused
            document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        problem = f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        raise InputError(source, [problem]) from exc
    # A top-level array is a sequence of documents, like multi-document YAML.
    return document if isinstance(document, list) else [document]


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return f"invalid YAML: {exc}"
    problem = getattr(exc, "problem", None) or str(exc)
    return f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {problem}"


def _yaml_documents(data: bytes, source: str) -> list[Any]:
    try:
        with gc_paused():
            return list(yaml.load_all(data, Loader=_Loader))
    except yaml.YAMLError as exc:
        raise InputError(source, [_yaml_error(exc)]) from exc


def _type_name(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _is_list(doc: Mapping[str, Any]) -> bool:
    """``kind: List``, a typed list (``PodList``), or a kind-less object with ``items``."""
    kind = doc.get("kind")
    if "items" not in doc:
        return False
    return kind is None or (isinstance(kind, str) and kind.endswith("List"))


def _flatten(doc: Any, where: str, item_kind: str | None, problems: list[str]) -> Iterator[Any]:
    """The API objects in one document, Lists unrolled (nested ones too)."""
    if not isinstance(doc, dict):
        problems.append(
            f"{where}: must be an object (an API object or a List), got {_type_name(doc)}"
        )
        return
    if _is_list(doc):
        kind = doc.get("kind") or ""
        inner = kind[: -len("List")] if kind.endswith("List") and kind != "List" else None
        items = doc.get("items") or []
        if not isinstance(items, list):
            problems.append(f"{where}: items must be a list, got {_type_name(items)}")
            return
        for i, item in enumerate(items):
            yield from _flatten(item, f"{where}, items[{i}]", inner, problems)
        return
    kind = doc.get("kind")
    if kind is None and item_kind is not None:
        doc["kind"] = kind = item_kind  # the API leaves kind out of a typed list's items
    if not isinstance(kind, str) or not kind:
        problems.append(
            f"{where}: kind must be a non-empty string, got {json.dumps(kind, default=str)}"
        )
        return
    yield doc


def parse_objects(data: bytes, source: str) -> list[dict[str, Any]]:
    """The API objects in the bytes of a snapshot file; ``source`` names it in problems."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    documents = _json_documents(data, source) if _is_json(data) else _yaml_documents(data, source)
    problems: list[str] = []
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if document is None:  # an empty YAML document, e.g. after a trailing ---
            continue
        objects.extend(_flatten(document, f"document {number}", None, problems))
    if problems:
        raise InputError(source, problems)
    return objects


def load_objects(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The API objects in a snapshot file (``-`` reads standard input), Lists unrolled."""
    return parse_objects(_read(path), str(path))


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot file into a :class:`Snapshot`; raises :class:`InputError` with every
    problem in the file and its objects."""
    return snapshot_from_objects(load_objects(path), source=str(path))


def _plain(value: object) -> object:
    """orjson's fallback: other mappings and sequences as plain dicts and lists."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to a snapshot")


def dump_objects(objects: Iterable[Mapping[str, Any]], fmt: Literal["yaml", "json"]) -> bytes:
    """A ``kind: List`` of the objects, as ``kubectl get -o yaml|json`` writes it.

    Keys are sorted and timestamps written as RFC 3339 with ``Z``, so the same objects always
    give the same bytes, and loading the result gives the objects back.
    """
    document = {
        "apiVersion": "v1",
        "items": list(objects),
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }
    options = orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC
    if fmt == "json":
        return orjson.dumps(document, default=_plain, option=options | orjson.OPT_INDENT_2) + b"\n"
    if fmt == "yaml":
        # Through JSON first: one set of type rules (datetimes, mappings) for both formats.
        plain = orjson.loads(orjson.dumps(document, default=_plain, option=options))
        text = yaml.dump(
            plain,
            Dumper=_Dumper,
            sort_keys=True,
            default_flow_style=False,
            allow_unicode=True,
            width=1_000_000,
        )
        return text.encode("utf-8")
    raise ValueError(f"unknown snapshot format {fmt!r}; use yaml or json")
