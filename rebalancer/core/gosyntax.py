"""Text forms of Go's libraries that policies carry (pure): ``time.Duration`` strings and
the string label selectors of ``k8s.io/apimachinery/pkg/labels`` (``labels.Parse``).

Read into rebalancer's own forms: seconds, and a :class:`~rebalancer.core.model.LabelSelector`
(the form a rebalancer policy writes). Worked example: ``"zone in (a, b),!spot,tier=web"``
is ``matchLabels {tier: web}`` with ``zone In [a, b]`` and ``spot DoesNotExist``.
"""

from __future__ import annotations

import re
from typing import Final

from rebalancer.core.convert.checker import show
from rebalancer.core.convert.selectors import LABEL_VALUE, is_label_key
from rebalancer.core.goduration import scan_go_duration
from rebalancer.core.model import LabelSelector, Requirement

__all__ = ["and_selectors", "parse_go_duration", "parse_label_selector"]


def parse_go_duration(text: str) -> float:
    """A Go ``time.Duration`` string (``metav1.Duration``: ``90s``, ``1h30m0s``, ``1.5h``,
    ``500ms``, ``0``) in seconds. Raises :class:`ValueError` for anything else, and for a
    negative one (no age is below zero)."""
    shown = show(text)
    if text.startswith("-"):
        raise ValueError(f"must not be negative, got {shown}")
    duration = scan_go_duration(text)
    if duration is None:
        raise ValueError(f"must be a Go duration like 90s, 5m or 1h30m0s, got {shown}")
    return duration.seconds


# One requirement of a string label selector (k8s.io/apimachinery labels.Parse): `!key`,
# `key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`,
# `key>1`, `key<1`.
_REQ: Final = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[^\s,=!<>()]+)"
    r"|(?P<key>[^\s,=!<>()]+)\s*"
    r"(?:(?P<op>==|=|!=|>|<)\s*(?P<value>[^\s,=!<>()]*)"
    r"|\s(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)\s*(?:,|$)"
)


def parse_label_selector(text: str) -> LabelSelector:
    """A string label selector (the descheduler's ``nodeSelector``) as a label selector:
    Exists, DoesNotExist, In and NotIn; ``=`` and ``==`` as matchLabels, ``!=`` as NotIn
    (both match nodes lacking the key). Raises :class:`ValueError` naming the part that has
    no counterpart (``>`` and ``<``) or does not parse."""
    labels: dict[str, str] = {}
    expressions: list[Requirement] = []
    pos = 0
    stripped = text.strip()
    while pos < len(stripped):
        match = _REQ.match(stripped, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"does not parse as a label selector at {show(stripped[pos:])}")
        pos = match.end()
        part = match.group(0).strip().rstrip(",").strip()
        if match.group("absent") is not None:
            key = match.group("absent")
            _check_key(key, part)
            expressions.append(Requirement(key, "DoesNotExist"))
            continue
        key = match.group("key")
        _check_key(key, part)
        op = match.group("op")
        if op in (">", "<"):
            raise ValueError(
                f"{show(part)}: {op} (a numeric comparison) has no label selector counterpart"
            )
        if op is not None:
            value = match.group("value")
            _check_value(value, part)
            if op == "!=":
                expressions.append(Requirement(key, "NotIn", (value,)))
            elif key in labels and labels[key] != value:
                expressions.append(Requirement(key, "In", (value,)))
            else:
                labels[key] = value
        elif match.group("set") is not None:
            values = tuple(v.strip() for v in match.group("values").split(","))
            if values == ("",):
                raise ValueError(f"{show(part)}: {match.group('set')} needs at least one value")
            for value in values:
                _check_value(value, part)
            expressions.append(
                Requirement(key, "In" if match.group("set") == "in" else "NotIn", values)
            )
        else:
            expressions.append(Requirement(key, "Exists"))
    return LabelSelector(tuple(sorted(labels.items())), tuple(expressions))


def _check_key(key: str, part: str) -> None:
    if not is_label_key(key):
        raise ValueError(f"{show(part)}: {show(key)} is not a label key")


def _check_value(value: str, part: str) -> None:
    if not LABEL_VALUE.match(value):
        raise ValueError(f"{show(part)}: {show(value)} is not a label value")


def and_selectors(
    first: LabelSelector | None, second: LabelSelector | None
) -> LabelSelector | None:
    """Both selectors at once (None selects everything). A key both pin to different values
    becomes two ``In`` requirements, which no object meets, as the two selectors together."""
    if first is None:
        return second
    if second is None:
        return first
    labels = dict(first.match_labels)
    expressions = list(first.match_expressions)
    for key, value in second.match_labels:
        if key in labels and labels[key] != value:
            expressions.append(Requirement(key, "In", (value,)))
        else:
            labels[key] = value
    expressions.extend(second.match_expressions)
    return LabelSelector(tuple(sorted(labels.items())), tuple(expressions))
