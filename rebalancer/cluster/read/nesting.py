"""How deep JSON nests, measured before it is parsed (no parser, no recursion).

The decoders recurse once per level: msgspec raises RecursionError near Python's recursion
limit (about 1,000 levels, fewer when the stack is already deep), orjson refuses past 1,024
levels, and anything that walks a parsed value recursively (a problem message, ``orjson.dumps``
of a snapshot, which stops at 255) may fail later. So JSON from a file or the API server is
measured first, and text nested more than :data:`MAX_JSON_DEPTH` deep is refused, whether or
not anything reads the deep part. No Kubernetes object rebalancer reads comes near it: a pod in
a List is about 15 levels deep, managedFields included.

The measure works on bytes with C-speed operations only (``bytes.translate``, ``replace``, one
regular expression on what is left), about a tenth of what parsing the same text costs:

1. escaped backslashes and quotes are removed, so that every quote left opens or closes a
   string;
2. everything but brackets and quotes is dropped;
3. adjacent quote pairs are removed until none is left: a pair with nothing between them is
   either an empty string or the end of one string and the start of the next, and removing it
   leaves every bracket on the same side of every string boundary; what remains are the few
   strings that hold brackets, which a regular expression then cuts out;
4. matched bracket pairs are removed one level per round; the rounds, plus the deepest point
   of whatever does not pair up, are the depth (exact for valid JSON).
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Final

__all__ = ["MAX_JSON_DEPTH", "json_depth", "too_deep"]

MAX_JSON_DEPTH: Final = 128
"""Arrays and objects nested deeper than this are refused."""

_NOT_KEPT: Final = bytes(b for b in range(256) if b not in b'[]{}"')
_ONE_KIND: Final = bytes.maketrans(b"{}", b"[]")  # a mismatch is invalid JSON anyway
_WEIGHTS: Final = bytes.maketrans(b"[]", b"\x02\x00")
_STRING: Final = re.compile(rb'"[^"]*"')


def _structure(data: bytes) -> bytes:
    """The brackets of ``data`` that are not inside a JSON string, ``{}`` written as ``[]``."""
    if b"\\" in data:  # escapes only occur inside strings; most documents have none
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = data.translate(_ONE_KIND, _NOT_KEPT)
    while True:
        shorter = kept.replace(b'""', b"")
        if len(shorter) == len(kept):
            break
        kept = shorter
    if b'"' in kept:  # strings that hold brackets (or an unclosed one: invalid anyway)
        kept = _STRING.sub(b"", kept)
    return kept


def _bracket_depth(brackets: bytes, limit: int) -> int:
    """The nesting depth of a string of ``[`` and ``]``: exact when they balance; once past
    ``limit``, at least ``limit + 1``."""
    rounds = 0
    while brackets and rounds <= limit:
        shorter = brackets.replace(b"[]", b"")  # the innermost pairs: one level
        if len(shorter) == len(brackets):
            break
        rounds += 1
        brackets = shorter
    if not brackets:
        return rounds
    # What is left: its deepest point, as a running count of open brackets (each bracket
    # weighs 2 or 0, minus 1 per position).
    weights = brackets.translate(_WEIGHTS)
    deepest: int = max(map(operator.sub, itertools.accumulate(weights), itertools.count(1)))
    return rounds + max(deepest, 0)


def json_depth(data: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep arrays and objects nest in the JSON text ``data`` (0 for a scalar), exactly
    up to ``limit``; beyond it, some number above ``limit``. (Text that is not JSON gets some
    number too; its parser rejects it anyway.)"""
    return _bracket_depth(_structure(data), limit)


def too_deep(data: bytes, limit: int = MAX_JSON_DEPTH) -> str | None:
    """A problem when the JSON text ``data`` nests more than ``limit`` deep, else None."""
    if json_depth(data, limit) <= limit:
        return None
    return f"JSON nested more than {limit} deep (arrays and objects within each other)"
