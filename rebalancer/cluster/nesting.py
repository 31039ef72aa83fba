"""How deep JSON nests, measured before it is parsed (no parser, no recursion).

The decoders recurse once per level: msgspec raises RecursionError near Python's recursion
limit (about 1,000 levels, fewer when the stack is already deep), orjson refuses past 1,024
levels, and anything that walks a parsed value recursively (a problem message, ``orjson.dumps``
of a snapshot, which stops at 255) may fail later. So JSON from a file or the API server is
measured first, and text nested more than :data:`MAX_JSON_DEPTH` deep is refused, whether or
not anything reads the deep part. No Kubernetes object rebalancer reads comes near it: a pod in
a List is about 15 levels deep, managedFields included.

The measure works on bytes at C speed (about 1 ms per MB): brackets are picked out with
``bytes.translate`` and matched pairs removed one level per round. Brackets inside strings
count too, which can only over-estimate; when the estimate is over the limit, the strings are
cut out (their escapes first) and the brackets measured again, which is exact for valid JSON.
"""

from __future__ import annotations

import itertools
import operator
from typing import Final

__all__ = ["MAX_JSON_DEPTH", "json_depth", "too_deep"]

MAX_JSON_DEPTH: Final = 128
"""Arrays and objects nested deeper than this are refused."""

_OTHERS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND: Final = bytes.maketrans(b"{}", b"[]")  # a mismatch is invalid JSON anyway
_WEIGHTS: Final = bytes.maketrans(b"[]", b"\x02\x00")


def _bracket_depth(brackets: bytes, limit: int) -> int:
    """The nesting depth of a string of ``[`` and ``]``: exact when they balance, otherwise an
    upper bound; once it is known to pass ``limit``, some number above it."""
    rounds = 0
    while brackets and rounds <= limit:
        shorter = brackets.replace(b"[]", b"")  # the innermost pairs: one level
        if len(shorter) == len(brackets):
            break
        rounds += 1
        brackets = shorter
    if not brackets:
        return rounds
    # What is left does not pair up: its deepest point, as a running count of open brackets
    # (each bracket weighs 2 or 0, minus 1 per position).
    weights = brackets.translate(_WEIGHTS)
    deepest: int = max(map(operator.sub, itertools.accumulate(weights), itertools.count(1)))
    return rounds + max(deepest, 0)


def _outside_strings(data: bytes) -> bytes:
    """The text of ``data`` that is not inside a JSON string (escaped backslashes and quotes
    first removed, so every remaining quote opens or closes a string)."""
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(plain.split(b'"')[::2])


def json_depth(data: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep arrays and objects nest in the JSON text ``data`` (0 for a scalar), when that
    is at most ``limit``; some number above ``limit`` otherwise."""
    depth = _bracket_depth(data.translate(_ONE_KIND, _OTHERS), limit)
    if depth <= limit:
        return depth
    # Brackets inside strings may have counted: measure without them.
    return _bracket_depth(_outside_strings(data).translate(_ONE_KIND, _OTHERS), limit)


def too_deep(data: bytes, limit: int = MAX_JSON_DEPTH) -> str | None:
    """A problem when the JSON text ``data`` nests more than ``limit`` deep, else None."""
    if json_depth(data, limit) <= limit:
        return None
    return f"JSON nested more than {limit} deep (arrays and objects within each other)"
