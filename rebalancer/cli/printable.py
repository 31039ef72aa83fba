"""Text from the cluster or a file made safe for a terminal: control characters shown escaped.

A pod name, a label value, a zone or an admission webhook's message may hold ESC, OSC, BEL or
CR; written raw they would retitle, recolour or rewrite the operator's terminal. It may also
hold Unicode format characters, which print nothing themselves but change what is around them:
a right-to-left override (U+202E) or isolate (U+2066-U+2069) makes a table row read as
something else, a zero-width space (U+200B) or byte-order mark (U+FEFF) makes two names that
differ look alike. Every C0 character (newline kept where a layout needs it), DEL, every C1
character, every format character (Unicode category Cf), the Unicode line and paragraph
separators and every lone surrogate is written as the escape a JSON string would use
(``\\u001b``, ``\\t``, ``\\u202e``; a surrogate pair above U+FFFF), as ``jq`` shows it. The
result is still valid JSON where the input was, meaning the same string (orjson leaves DEL, C1
and format characters raw inside strings; this escapes them the JSON way), and plain text
everywhere else.

Two uses: :func:`printable_fields` escapes every string of a plan or run report before a table
lays it out (so columns line up and no name adds a line), and the command's writers pass
everything they print through :func:`printable` (newlines kept) as the last guard.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar, cast

import yaml

T = TypeVar("T")

_SHORT: Final = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\b": "\\b", "\f": "\\f"}

FORMAT_CHARACTERS: Final = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
"""Unicode's format characters (category Cf, as of Unicode 15), as a regular expression's
character ranges: bidirectional overrides, embeddings, isolates and marks, zero-width spaces
and joiners, the byte-order mark, invisible operators, tags."""

_UNPRINTABLE: Final = re.compile(
    f"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{FORMAT_CHARACTERS}]"
)
"""C0, DEL, C1, format characters, the Unicode line and paragraph separators, and lone
surrogates (which cannot even be encoded for output)."""

_UNPRINTABLE_KEEP_NEWLINE: Final = re.compile(
    f"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{FORMAT_CHARACTERS}]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character above U+FFFF as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


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


# --------------------------------------------------------------------------------------------
# YAML: escapes that mean the same string

_YAML_QUOTED: Final = re.compile(
    "[^\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
    f"|[\t\u2028\u2029{FORMAT_CHARACTERS}]"
)
"""What :func:`printable` would escape, newlines aside (it keeps them, and so do YAML's quoted
and block scalars): a scalar holding one is written double-quoted, escaped by YAML's rules."""
_YAML_ESCAPED: Final = re.compile(f'{_YAML_QUOTED.pattern}|["\\\\\n]')
_YAML_SHORT: Final = {
    "\0": "0",
    "\x07": "a",
    "\b": "b",
    "\t": "t",
    "\n": "n",
    "\x0b": "v",
    "\f": "f",
    "\r": "r",
    "\x1b": "e",
    '"': '"',
    "\\": "\\",
    "\x85": "N",
    "\u2028": "L",
    "\u2029": "P",
}


def _yaml_escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _YAML_SHORT.get(char)
    if short is not None:
        return "\\" + short
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"  # YAML spells a character above U+FFFF whole, not as a pair


class YamlDumper(yaml.SafeDumper):
    """PyYAML's safe dumper whose output reads back as the same strings and holds nothing
    :func:`printable` would escape. PyYAML writes a format character (U+202E, U+200B, ...) raw,
    in a plain scalar, where the writers' last guard then turns it into the text ``\\u202e``;
    here a string holding one, or a control character, or a line or paragraph separator, is
    double-quoted with each such character escaped as YAML reads it (``"\\u202e"``,
    ``"\\U000e0001"``, ``"\\L"``), so ``yaml.safe_load`` gives the very string ``-o json``
    gives."""

    def choose_scalar_style(self) -> str:
        event = self.event
        if isinstance(event, yaml.ScalarEvent) and _YAML_QUOTED.search(event.value):
            return '"'
        style: str = super().choose_scalar_style()
        return style

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """The scalar on one line (PyYAML's ``split`` is not followed: no line is wrapped)."""
        self.write_indicator('"', True)
        data = _YAML_ESCAPED.sub(_yaml_escape, text)
        self.column += len(data)
        self.stream.write(data.encode(self.encoding) if self.encoding else data)
        self.write_indicator('"', False)


def yaml_text(data: object, width: int = 1_000_000) -> str:
    """``data`` as block YAML in its own key order, non-ASCII text as is, written by
    :class:`YamlDumper`: it loads back as the same strings."""
    text: str = yaml.dump(
        data,
        Dumper=YamlDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=width,
    )
    return text
