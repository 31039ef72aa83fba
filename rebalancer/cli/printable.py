"""Text from the cluster or a file made safe for a terminal: control characters shown escaped.

A pod name, a label value, a zone or an admission webhook's message may hold ESC, OSC, BEL or
CR; written raw they would retitle, recolour or rewrite the operator's terminal. Every C0
character (newline kept where a layout needs it), DEL, every C1 character and every lone
surrogate is written as the escape a JSON string would use (``\\u001b``, ``\\t``, ``\\r``), as
``jq`` shows it. The result is still valid JSON where the input was (orjson leaves DEL and C1
raw inside strings; this escapes them the JSON way) and plain text everywhere else.
"""

from __future__ import annotations

import re
from typing import Final

_SHORT: Final = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\b": "\\b", "\f": "\\f"}

_UNPRINTABLE: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""C0, DEL, C1 and lone surrogates (which cannot even be encoded for output)."""

_UNPRINTABLE_KEEP_NEWLINE: Final = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character escaped; ``newlines=True`` keeps ``\\n`` as is."""
    pattern = _UNPRINTABLE_KEEP_NEWLINE if newlines else _UNPRINTABLE
    return pattern.sub(_escape, text)
