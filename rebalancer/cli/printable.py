"""Text from the cluster or a file made safe for a terminal: control characters shown escaped.

A pod name, a label value, a zone or an admission webhook's message may hold ESC, OSC, BEL or
CR; written raw they would retitle, recolour or rewrite the operator's terminal. Every C0
character (newline kept where a layout needs it), DEL, every C1 character, the Unicode line and
paragraph separators and every lone surrogate is written as the escape a JSON string would use
(``\\u001b``, ``\\t``, ``\\r``), as ``jq`` shows it. The result is still valid JSON where the
input was (orjson leaves DEL and C1 raw inside strings; this escapes them the JSON way) and
plain text everywhere else.

Two uses: :func:`printable_fields` escapes every string of a plan or run report before a table
lays it out (so columns line up and no name adds a line), and the command's writers pass
everything they print through :func:`printable` (newlines kept) as the last guard.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar, cast

T = TypeVar("T")

_SHORT: Final = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\b": "\\b", "\f": "\\f"}

_UNPRINTABLE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
"""C0, DEL, C1, the Unicode line and paragraph separators, and lone surrogates (which cannot
even be encoded for output)."""

_UNPRINTABLE_KEEP_NEWLINE: Final = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character escaped; ``newlines=True`` keeps ``\\n`` as is."""
    pattern = _UNPRINTABLE_KEEP_NEWLINE if newlines else _UNPRINTABLE
    return pattern.sub(_escape, text)


def printable_fields(value: T) -> T:
    """``value`` (a frozen dataclass of the plan or run report, a tuple, a mapping, a string)
    with every string in it made :func:`printable`, newlines included: a table escapes each
    cell before its layout, so columns line up and no name adds a line. Objects without such
    a string are returned as they are (no copy)."""
    return cast("T", _fields(value))


def _fields(value: object) -> object:
    if isinstance(value, str):
        return printable(value) if _UNPRINTABLE.search(value) else value
    if isinstance(value, tuple):
        items = tuple(_fields(v) for v in value)
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        make: Any = type(value)
        return make(*items) if hasattr(value, "_fields") else items  # a namedtuple stays one
    if isinstance(value, Mapping):
        pairs = [(_fields(k), _fields(v)) for k, v in value.items()]
        if all(k is a and v is b for (k, v), (a, b) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    names = _init_fields(type(value))
    if names:
        changes = {}
        for name in names:
            old = getattr(value, name)
            new = _fields(old)
            if new is not old:
                changes[name] = new
        rebuilt: Any = value
        return dataclasses.replace(rebuilt, **changes) if changes else value
    return value


_INIT_FIELDS: dict[type, tuple[str, ...]] = {}


def _init_fields(kind: type) -> tuple[str, ...]:
    """The fields a dataclass's constructor takes; () for any other type (cached per type)."""
    names = _INIT_FIELDS.get(kind)
    if names is None:
        is_dataclass = dataclasses.is_dataclass(kind)
        names = tuple(f.name for f in dataclasses.fields(kind) if f.init) if is_dataclass else ()
        _INIT_FIELDS[kind] = names
    return names
