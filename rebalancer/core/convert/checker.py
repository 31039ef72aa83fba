"""Reading the fields of one API object and recording every problem with its path.

Shared by the converters and the policy loader: each reader returns a usable default after a
problem, so the walk goes on and every problem is reported at once. Paths are formatted only
when a problem is recorded.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from rebalancer.core.errors import InputError

__all__ = ["EMPTY", "NO_VALUE", "Checker", "at", "raise_if", "show", "suggest"]

EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
NO_VALUE: Final = object()


def show(value: object) -> str:
    """A bad value as a person reads it in a problem: JSON, cut short."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except ValueError:  # a circular structure; cannot come from a decoder
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def at(path: str, key: str) -> str:
    """``path.key``, or ``key`` at the top."""
    return f"{path}.{key}" if path else key


def suggest(word: str, choices: Iterable[str]) -> str:
    """``; did you mean X?`` for the closest choice (case-insensitive), or an empty string."""
    lowered = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower()[:100], list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]}?" if close else ""


def raise_if(problems: list[str], source: str) -> None:
    """Raise one :class:`InputError` named ``source`` when ``problems`` holds any."""
    if problems:
        raise InputError(source, problems)


class Checker:
    """Reads the fields of one object, recording each problem with the object's name.

    Every reader returns a usable default after a problem, so conversion goes on and finds the
    next one. Paths are formatted only when a problem is recorded.
    """

    __slots__ = ("problems", "subject")

    def __init__(self, subject: str, problems: list[str]) -> None:
        self.subject = subject
        self.problems = problems

    def bad(self, path: str, rule: str, value: object = NO_VALUE) -> None:
        """Record ``subject: path: rule, got value`` (each part only when given)."""
        text = f"{path}: {rule}" if path else rule
        if self.subject:
            text = f"{self.subject}: {text}"
        if value is not NO_VALUE:
            text = f"{text}, got {show(value)}"
        self.problems.append(text)

    def as_obj(self, value: Any, path: str) -> Mapping[str, Any]:
        if value is None:
            return EMPTY
        if type(value) is dict or isinstance(value, Mapping):
            return value
        self.bad(path, "must be an object", value)
        return EMPTY

    def obj(self, parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = parent.get(key)
        if value is None:
            return EMPTY
        if type(value) is dict or isinstance(value, Mapping):
            return value
        self.bad(at(path, key), "must be an object", value)
        return EMPTY

    def seq(self, parent: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
        value = parent.get(key)
        if value is None:
            return ()
        if type(value) is list or type(value) is tuple:
            return value
        self.bad(at(path, key), "must be a list", value)
        return ()

    def text(self, parent: Mapping[str, Any], key: str, path: str) -> str:
        """A string field; absent is ``""``."""
        value = parent.get(key)
        if type(value) is str:
            return value
        if value is None:
            return ""
        self.bad(at(path, key), "must be a string", value)
        return ""

    def required_text(self, parent: Mapping[str, Any], key: str, path: str) -> str:
        value = parent.get(key)
        if type(value) is str and value:
            return value
        self.bad(at(path, key), "must be a non-empty string", value)
        return ""

    def integer(self, parent: Mapping[str, Any], key: str, path: str) -> int | None:
        value = parent.get(key)
        if type(value) is int or value is None:
            return value
        self.bad(at(path, key), "must be an integer", value)
        return None

    def flag(self, parent: Mapping[str, Any], key: str, path: str) -> bool:
        value = parent.get(key)
        if type(value) is bool:
            return value
        if value is None:
            return False
        self.bad(at(path, key), "must be true or false", value)
        return False

    def string_map(self, parent: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        """A map of strings (labels, annotations, nodeSelector), shallow-copied."""
        raw = self.obj(parent, key, path)
        if not raw:
            return {}
        result = dict(raw)
        try:  # str.join rejects anything but strings, at C speed
            "".join(result)
            "".join(result.values())
        except TypeError:
            pass
        else:
            return result
        for name, value in list(result.items()):
            if type(name) is not str or type(value) is not str:
                self.bad(f"{at(path, key)}[{name}]", "must be a string", value)
                del result[name]
        return result

    def known_keys(self, obj: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
        """Report every key of ``obj`` not in ``allowed`` (with the closest allowed key)."""
        for key in obj:
            if type(key) is not str:
                self.bad(at(path, str(key)[:80]), "keys must be strings")
            elif key not in allowed:
                self.bad(at(path, key), f"unknown key{suggest(key, allowed)}")

    def strings(self, parent: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
        items = self.seq(parent, key, path)
        try:  # str.join rejects anything but strings, at C speed
            "".join(items)
        except TypeError:
            pass
        else:
            return tuple(items)
        for i, item in enumerate(items):
            if type(item) is not str:
                self.bad(f"{at(path, key)}[{i}]", "must be a string", item)
        return tuple(x for x in items if type(x) is str)
