"""Go's ``time.Duration`` strings (``time.ParseDuration``), read in one place (pure).

Policies (``minPodAge``, a window's ``duration``), imported descheduler policies and the
``karpenter.sh/do-not-disrupt`` annotation all write them; each reader takes what
:func:`scan_go_duration` finds and may ask for a narrower form on top (a policy refuses
``ns``, ``us``, a sign and the bare ``0``). Worked example: ``"1h30m"`` is two parts, ``("1",
"h")`` and ``("30", "m")``, 5400 seconds; ``"1.5h"`` is the same; ``"90"`` (no unit) and
``"1.5.5s"`` are not durations.

Kept apart from :mod:`rebalancer.core.gosyntax` (which reads it too) so that the modules that
convert API objects can use it without importing the converters back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["GO_DURATION_UNITS", "GoDuration", "scan_go_duration"]

GO_DURATION_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 MICRO SIGN
    "μs": 1e-6,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
"""Seconds in each unit Go's ``time.ParseDuration`` knows."""

# One part (time.ParseDuration): ASCII digits with an optional fraction ("1.", ".5", "1.5"),
# then a unit. Every quantifier is possessive and the alternatives start differently, so a
# match never backtracks: a run of n digits then a letter costs n steps, not n squared.
_UNIT: Final = "ns|us|µs|μs|ms|s|m|h"
_NUMBER: Final = r"[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++"
_PART: Final = re.compile(f"({_NUMBER})({_UNIT})")
_WHOLE: Final = re.compile(f"([+-]?)(0|(?:(?:{_NUMBER})(?:{_UNIT}))++)")


@dataclass(frozen=True, slots=True)
class GoDuration:
    """A Go ``time.Duration`` string as written: its sign and its parts."""

    sign: str
    """``""``, ``"+"`` or ``"-"``."""
    parts: tuple[tuple[str, str], ...]
    """(number, unit) in order, as written (``("1.5", "h")``); empty for the bare ``0``."""

    @property
    def seconds(self) -> float:
        """The duration in seconds (negative with a ``-``)."""
        total = sum(float(number) * GO_DURATION_UNITS[unit] for number, unit in self.parts)
        return -total if self.sign == "-" else total

    @property
    def positive(self) -> bool:
        """Above zero: no ``-`` and some part with a digit other than 0."""
        return self.sign != "-" and any(number.strip("0.") for number, _ in self.parts)


def scan_go_duration(text: str) -> GoDuration | None:
    """``text`` as Go's ``time.ParseDuration`` reads it (``90s``, ``1h30m0s``, ``1.5h``,
    ``+.5m``, ``-2us``, ``0``), or None when it does not. In time linear in its length, the
    one definition every reader of a Go duration uses (policies take a narrower form on top).
    Values Go refuses as too large (above about 292 years) are not told apart."""
    whole = _WHOLE.fullmatch(text)
    if whole is None:
        return None
    body = whole.group(2)
    parts = () if body == "0" else tuple(m.groups() for m in _PART.finditer(body))
    return GoDuration(whole.group(1), parts)  # type: ignore[arg-type]  # two groups each
