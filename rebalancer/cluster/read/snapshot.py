"""Snapshot files: what ``kubectl get nodes,pods,pdb,... -A -o yaml`` (or ``-o json``) prints.

Reads (a) a ``kind: List`` with ``items`` in YAML, (b) the same in JSON, (c) multi-document YAML
of single objects and/or Lists, nested Lists included; typed lists (``PodList``, as the API
returns them) lend their item kind to items that lack one. JSON is recognised by its first
character and parsed with orjson (text that starts like JSON but is not, such as flow-style
YAML, is parsed as YAML); YAML with libyaml when available, aliases bounded
(:mod:`rebalancer.cluster.inputs`). The input size is capped (``max_bytes``). Every problem is
reported as one :class:`InputError` naming the file.

``rebalancer snapshot -o json`` writes a ``kind: List`` with one item per line (still plain
JSON, see :func:`dump_objects`). :func:`load_snapshot` recognises that layout by its first line
and converts it item by item, so the parsed objects of a 150,000-pod cluster never exist all at
once; any other JSON or YAML is parsed whole. The way a file is read is one of four named
routes (:class:`LoadRoute`), tried in order from the first the file's start allows; a route
that does not take the file says so, and the next one reads it.
"""

from __future__ import annotations

import io
import os
import shlex
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import StrEnum
from typing import IO, Any, Final, Literal

import orjson
import yaml

from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.inputs import (
    DEFAULT_MAX_SNAPSHOT_BYTES,
    MAX_YAML_BYTES,
    binary_problem,
    open_input,
    read_bytes,
    read_pipe,
    yaml_documents,
)
from rebalancer.cluster.read import fastdecode
from rebalancer.cluster.read.nesting import MAX_JSON_DEPTH, too_deep
from rebalancer.core.api import InputError, Rejected, Snapshot, SnapshotBuilder, show

__all__ = ["LoadRoute", "dump_objects", "load_objects", "load_snapshot", "parse_objects"]

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_UTF8_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"
_JSON_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC
# The line-per-item layout dump_objects writes (keys sorted: "items" comes before "kind").
_LINES_HEAD: Final = b'{"apiVersion":"v1","items":['
_LINES_TAIL: Final = b'],"kind":"List","metadata":{"resourceVersion":""}}'
_FIRST_LINE_MAX: Final = len(_UTF8_BOM) + len(_LINES_HEAD) + 2  # + "\r\n"
_HEAD_BYTES: Final = 1 << 16
"""A regular file's first bytes, looked at for binary data before it is read."""
MAX_PROBLEMS: Final = 1000
"""Reading the documents stops after this many problems: a file of millions of bad items
(``[{},{},...]``) would otherwise hold, format and print a problem for each, many times the
file's size."""
MAX_LIST_DEPTH: Final = 32
"""Lists inside Lists (kubectl never writes any) deeper than this are refused."""


def _is_json(data: bytes) -> bool:
    start = data.lstrip(_WHITESPACE)[:1]
    return start in (b"{", b"[")


def _check_depth(data: bytes, source: str) -> None:
    """Raise :class:`InputError` when JSON text nests too deep to parse safely."""
    deep = too_deep(data)
    if deep is not None:
        raise InputError(source, [deep])


def _json_documents(data: bytes, source: str) -> list[Any]:
    _check_depth(data, source)
    try:
        with gc_paused():  # orjson builds millions of dicts; see gc_paused
            document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        problem = f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        raise InputError(source, [problem]) from exc
    # A top-level array is a sequence of documents, like multi-document YAML.
    return document if isinstance(document, list) else [document]


_TO_JSON: Final = (
    "; convert it to JSON, which costs about twice its size: "
    "yq . {source} > snapshot.json (python yq; with the Go yq: yq -o=json {source}), or read "
    "the cluster with kubectl get ... -o json or rebalancer snapshot -o json"
)


def _yaml_documents(data: bytes, source: str) -> list[Any]:
    hint = _TO_JSON.format(source="FILE" if source == "-" else shlex.quote(source))
    with gc_paused():
        documents, _ = yaml_documents(data, source, _Loader, too_big_hint=hint)
        return documents


_YAML_FALLBACK_BYTES: Final = MAX_YAML_BYTES
"""Text that starts like JSON but is not is tried as YAML up to this size (flow-style YAML is
written by hand; a large broken JSON file is reported at once)."""


def _documents(data: bytes, source: str) -> tuple[list[Any], str | None]:
    """The documents, and the JSON problem when text that starts like JSON was read as YAML.

    Flow-style YAML (``{kind: List, ...}``) also starts with ``{``, so text that is not JSON is
    tried as YAML before the JSON error is reported.
    """
    if not _is_json(data):
        return _yaml_documents(data, source), None
    _check_depth(data, source)  # refused as it is, not tried as YAML
    try:
        return _json_documents(data, source), None
    except InputError as json_error:
        if len(data) > _YAML_FALLBACK_BYTES:
            raise
        try:
            return _yaml_documents(data, source), json_error.problems[0]
        except InputError:
            raise json_error from None


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


def _flatten(doc: Any, where: str, problems: list[str]) -> Iterator[Any]:
    """The API objects in one document, Lists unrolled (nested ones too, up to
    :data:`MAX_LIST_DEPTH` deep; a List that contains itself is a problem, not a hang)."""
    # A stack of (value, where, item kind of the enclosing typed list, Lists enclosing it).
    stack: list[tuple[Any, str, str | None, tuple[int, ...]]] = [(doc, where, None, ())]
    while stack and len(problems) < MAX_PROBLEMS:
        value, at, item_kind, enclosing = stack.pop()
        if not isinstance(value, dict):
            problems.append(
                f"{at}: must be an object (an API object or a List), got {_type_name(value)}"
            )
            continue
        if _is_list(value):
            if id(value) in enclosing:
                problems.append(f"{at}: a List that contains itself")
                continue
            if len(enclosing) >= MAX_LIST_DEPTH:
                problems.append(f"{at}: Lists nested more than {MAX_LIST_DEPTH} deep")
                continue
            kind = value.get("kind") or ""
            inner = kind[: -len("List")] if kind.endswith("List") and kind != "List" else None
            items = value.get("items") or []
            if not isinstance(items, list):
                problems.append(f"{at}: items must be a list, got {_type_name(items)}")
                continue
            inside = (*enclosing, id(value))
            stack.extend(
                (item, f"{at}, items[{i}]", inner, inside)
                for i, item in reversed(list(enumerate(items)))
            )
            continue
        kind = value.get("kind")
        if kind is None and item_kind is not None:
            value["kind"] = kind = item_kind  # the API leaves kind out of a typed list's items
        if not isinstance(kind, str) or not kind:
            problems.append(f"{at}: kind must be a non-empty string, got {show(kind)}")
            continue
        yield value


def parse_objects(data: bytes, source: str) -> list[dict[str, Any]]:
    """The API objects in the bytes of a snapshot file; ``source`` names it in problems."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    documents, not_json = _documents(data, source)
    problems: list[str] = []
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if len(problems) >= MAX_PROBLEMS:
            break
        if document is None:  # an empty YAML document, e.g. after a trailing ---
            continue
        objects.extend(_flatten(document, f"document {number}", problems))
    if len(problems) >= MAX_PROBLEMS:
        problems.append(f"more problems after these {MAX_PROBLEMS}: the rest is not read")
    if problems and not_json is not None:
        problems.append(f"read as YAML since it is not JSON: {not_json}")
    if problems:
        raise InputError(source, problems)
    return objects


def load_objects(
    path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES
) -> list[dict[str, Any]]:
    """The API objects in a snapshot file (``-`` reads standard input), Lists unrolled."""
    return parse_objects(read_bytes(path, max_bytes), str(path))


def _stream_lines(lines: Iterable[bytes], source: str, skip_invalid: bool) -> Loaded | None:
    """A Snapshot from the line-per-item layout after its first line (already checked),
    converting each item as it is read.

    None when the text strays from that layout (the caller then parses the whole text, which
    also finds the exact line and column of any JSON error).
    """
    builder = SnapshotBuilder(source, _stop_after(skip_invalid))
    ended = False
    with gc_paused():
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            if ended:
                if line.strip(_WHITESPACE):
                    return None  # text after the closing line
                continue
            if line == _LINES_TAIL:
                ended = True
                continue
            if fastdecode.may_nest_deeper(line, MAX_JSON_DEPTH):
                return None  # the whole text is measured, and refused, by the general path
            try:
                item = orjson.loads(line[:-1] if line.endswith(b",") else line)
            except orjson.JSONDecodeError:
                return None
            if not isinstance(item, dict) or "items" in item:
                return None  # nested Lists and the like: the general path handles them
            builder.add(item)
            if builder.stopped:
                break  # the build raises the problems found
    if not ended and not builder.stopped:
        return None
    return builder.build(skip_invalid=skip_invalid), builder.rejected


class LoadRoute(StrEnum):
    """How a snapshot file is read."""

    LINES_TYPED = "lines-typed"
    """The line-per-item layout, item by item, typed decoding (:mod:`.fastdecode`)."""
    LINES = "lines"
    """The same layout, each line parsed (orjson) and converted."""
    WHOLE_TYPED = "whole-typed"
    """JSON read whole, its List typed-decoded."""
    WHOLE = "whole"
    """JSON or YAML parsed whole, Lists unrolled, each object converted (every problem named)."""


OnRoute = Callable[[LoadRoute, str], None]
"""``on_route(route, why)``: told of each route a load takes, the first and each fallback."""


def _untold(route: LoadRoute, why: str) -> None:
    """An offline command logs nothing."""


def _whole(fh: IO[bytes]) -> bytes:
    """Every byte of ``fh`` from its start. A file's are read with one ``pread`` into the
    result: ``read()`` after the first line has been read returns what it buffered joined to
    the rest, one more copy of the whole file (474 MB: 0.47 s against 0.19 s)."""
    try:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
    except (OSError, AttributeError, ValueError):  # not a file (io.UnsupportedOperation)
        fh.seek(0)
        return fh.read()
    data = os.pread(fd, size + 1, 0)  # one byte more: a file that grew meanwhile shows it
    if len(data) != size:  # it changed meanwhile, or one read returns less (over 2 GiB)
        fh.seek(len(data))
        data += fh.read()
    return data


Loaded = tuple[Snapshot, tuple[Rejected, ...]]
"""A snapshot, and the objects left out with their namespaces (``skip_invalid`` only)."""


def _stop_after(skip_invalid: bool) -> int | None:
    """When a load stops reading: after :data:`MAX_PROBLEMS` problems, on every route, unless
    ``--skip-invalid`` leaves bad objects out (then every object is read)."""
    return None if skip_invalid else MAX_PROBLEMS


def _load(
    fh: IO[bytes], source: str, skip_invalid: bool = False, on_route: OnRoute = _untold
) -> Loaded:
    """The snapshot in a seekable file: streamed when it has the line-per-item layout, on
    the routes of :class:`LoadRoute` in order, each one taken told to ``on_route``."""
    # At most the layout's first line: a document on one long line is not read twice.
    first = fh.readline(_FIRST_LINE_MAX)
    if first.startswith(_UTF8_BOM):
        first = first[len(_UTF8_BOM) :]
    why = "not the line-per-item layout"
    if first.rstrip(b"\r\n") == _LINES_HEAD:
        on_route(LoadRoute.LINES_TYPED, "the line-per-item layout")
        typed = fastdecode.load_lines(fh, source, _LINES_TAIL, _stop_after(skip_invalid))
        if typed is not None:
            return typed.build(skip_invalid=skip_invalid), typed.rejected
        on_route(LoadRoute.LINES, "lines-typed declined: a line the typed decoder does not take")
        fh.seek(0)
        fh.readline(_FIRST_LINE_MAX)  # the first line again, as checked above
        streamed = _stream_lines(fh, source, skip_invalid)
        if streamed is not None:
            return streamed
        why = "lines declined: the text strays from the layout"
    data = _whole(fh)
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    if _is_json(data):
        on_route(LoadRoute.WHOLE_TYPED, f"{why}; JSON")
        _check_depth(data, source)
        typed_list = fastdecode.load_list(data, source, _stop_after(skip_invalid))
        if typed_list is not None:
            return typed_list.build(skip_invalid=skip_invalid), typed_list.rejected
        why = "whole-typed declined: not a List the typed decoder takes"
    on_route(LoadRoute.WHOLE, why)
    builder = SnapshotBuilder(source, _stop_after(skip_invalid))
    with gc_paused():
        builder.add_all(parse_objects(data, source))
    return builder.build(skip_invalid=skip_invalid), builder.rejected


def load_snapshot(
    path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES
) -> Snapshot:
    """Read a snapshot file (``-`` is standard input) into a :class:`Snapshot`; raises
    :class:`InputError` with every problem in the file and its objects, or when it holds more
    than ``max_bytes`` bytes."""
    return load_snapshot_skipping(path, skip_invalid=False, max_bytes=max_bytes)[0]


def load_snapshot_skipping(
    path: str | os.PathLike[str],
    *,
    skip_invalid: bool,
    max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES,
    on_route: OnRoute = _untold,
) -> Loaded:
    """:func:`load_snapshot`; with ``skip_invalid`` an object that cannot be converted leaves
    its namespace out instead of failing the load (``plan --snapshot --skip-invalid``).
    ``on_route(route, why)`` is told of each :class:`LoadRoute` taken."""
    source = str(path)
    if source == "-":
        return _load(io.BytesIO(read_bytes(path, max_bytes)), source, skip_invalid, on_route)
    try:
        with open_input(source) as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):  # a pipe: read it capped
                data = read_pipe(fh, source, max_bytes, "--max-input-bytes")
                return _load(io.BytesIO(data), source, skip_invalid, on_route)
            if info.st_size > max_bytes:
                raise InputError(
                    source,
                    [
                        f"larger than {max_bytes} bytes; raise the limit with "
                        "--max-input-bytes if this is right"
                    ],
                )
            binary = binary_problem(os.pread(fh.fileno(), _HEAD_BYTES, 0))
            if binary is not None:  # refused before the file is read
                raise InputError(source, [binary])
            return _load(fh, source, skip_invalid, on_route)
    except OSError as exc:
        raise InputError(source, [f"cannot read the file: {exc.strerror or exc}"]) from exc


def _plain(value: object) -> object:
    """orjson's fallback: other mappings and sequences as plain dicts and lists."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to a snapshot")


def dump_objects(objects: Iterable[Mapping[str, Any]], fmt: Literal["yaml", "json"]) -> bytes:
    """A ``kind: List`` of the objects, as ``kubectl get -o yaml|json`` would hold them.

    JSON has one compact item per line between a first and a last line, so that
    :func:`load_snapshot` can convert it item by item; it is still one JSON document. Keys are
    sorted and timestamps written as RFC 3339 with ``Z``, so the same objects always give the
    same bytes, and loading the result gives the objects back.
    """
    if fmt == "json":
        body = b",\n".join(orjson.dumps(o, default=_plain, option=_JSON_OPTIONS) for o in objects)
        return (
            b"\n".join((_LINES_HEAD, body, _LINES_TAIL) if body else (_LINES_HEAD, _LINES_TAIL))
            + b"\n"
        )
    if fmt == "yaml":
        document = {
            "apiVersion": "v1",
            "items": list(objects),
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }
        # Through JSON first: one set of type rules (datetimes, mappings) for both formats.
        plain = orjson.loads(orjson.dumps(document, default=_plain, option=_JSON_OPTIONS))
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
