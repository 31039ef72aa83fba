"""Reading the fields of one API object and recording every problem with its path.

Shared by the converters, the policy loader and the descheduler import: each reader returns a
usable default after a problem, so the walk goes on and every problem is reported at once.
Paths are formatted only when a problem is recorded.
"""

from __future__ import annotations

import contextlib
import difflib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from rebalancer.core.constants import INT32_MAX
from rebalancer.core.errors import InputError

__all__ = ["EMPTY", "NO_VALUE", "Checker", "at", "raise_if", "show", "suggest"]

EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
NO_VALUE: Final = object()


_SHOWN: Final = 80  # characters of a bad value quoted in a problem
_SORTED_KEYS: Final = 256  # mappings up to this size are shown with their keys sorted


class _Full(Exception):
    """The text of :func:`show` reached its length: stop walking the value."""


def show(value: object) -> str:
    """A bad value as a person reads it in a problem: JSON, cut short.

    The cost is bounded by the length shown, not by the value: a huge or self-referential
    value (YAML aliases) is walked only until the text is long enough.
    """
    parts: list[str] = []
    room = [_SHOWN + 1]

    def emit(text: str) -> None:
        parts.append(text)
        room[0] -= len(text)
        if room[0] <= 0:
            raise _Full

    def walk(item: object) -> None:
        if isinstance(item, Mapping):
            emit("{")
            pairs = list(itertools.islice(item.items(), _SORTED_KEYS + 1))
            if len(pairs) <= _SORTED_KEYS:
                pairs.sort(key=lambda pair: _key_text(pair[0]))
            for n, (key, inner) in enumerate(pairs):
                emit((", " if n else "") + json.dumps(_key_text(key)[: _SHOWN + 1]) + ": ")
                walk(inner)
            emit("}")
        elif isinstance(item, list | tuple | set | frozenset):
            emit("[")
            for n, inner in enumerate(item):
                if n:
                    emit(", ")
                walk(inner)
            emit("]")
        else:
            emit(_scalar(item))

    with contextlib.suppress(_Full):
        walk(value)
    text = "".join(parts)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _scalar(item: object) -> str:
    if item is None or isinstance(item, bool | float):
        return json.dumps(item)
    if isinstance(item, int):
        return str(item) if item.bit_length() <= 256 else f"<a {item.bit_length()}-bit integer>"
    if isinstance(item, str):
        return json.dumps(item[: _SHOWN + 1])
    if isinstance(item, bytes | bytearray):
        return json.dumps(repr(bytes(item[: _SHOWN + 1])))
    return json.dumps(str(item)[: _SHOWN + 1])


def _key_text(key: object) -> str:
    """A mapping key as JSON spells it (keys are strings there)."""
    if isinstance(key, str):
        return key
    return _scalar(key).strip('"')


def at(path: str, key: str | int) -> str:
    """``path.key``, ``key`` at the top, or ``path[index]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
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
    next one. Paths are formatted only when a problem is recorded. The API objects of a
    snapshot are read with the readers that take the parent mapping and a key; a document a
    person wrote (a policy, a descheduler policy) with those that take the value itself, whose
    problems quote it with :attr:`quote`.
    """

    __slots__ = ("problems", "subject")

    quote: Callable[[object], str] = staticmethod(show)
    """How a bad value of a hand-written document is quoted in its problem."""
    key_room: int | None = 80
    """How much of a non-string key a problem shows (None: all of it)."""

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
        if type(value) is dict:
            return value
        return EMPTY if value is None else self.as_obj(value, at(path, key))

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

    def integer(self, parent: Mapping[str, Any], key: str, path: str, bits: int = 64) -> int | None:
        """An integer field of the API (int32 or int64, as ``bits`` says); out of that range
        the API server would refuse it, so it is a problem here too."""
        value = parent.get(key)
        if value is None:
            return None
        if type(value) is int:
            if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
                return value
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            self.bad(at(path, key), f"must fit in int{bits} ({low} to {high})", value)
            return None
        self.bad(at(path, key), "must be an integer", value)
        return None

    def flag(self, parent: Mapping[str, Any], key: str, path: str, default: bool = False) -> bool:
        """A boolean field; absent is ``default``."""
        value = parent.get(key)
        if type(value) is bool:
            return value
        if value is None:
            return default
        self.bad(at(path, key), "must be true or false", value)
        return default

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

    def known_keys(
        self, obj: Mapping[Any, Any], path: str, allowed: Sequence[str], why: str = ""
    ) -> dict[str, Any]:
        """Report every key of ``obj`` not in ``allowed`` (with the closest allowed key and
        ``why``); return the others."""
        known: dict[str, Any] = {}
        for key, value in obj.items():
            if type(key) is not str:
                self.bad(at(path, str(key)[: self.key_room]), "keys must be strings")
            elif key not in allowed:
                self.bad(at(path, key), f"unknown key{suggest(key, allowed)}{why}")
            else:
                known[key] = value
        return known

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

    # Readers of a document a person wrote: each takes the value itself.

    def mapping(
        self,
        value: object,
        path: str,
        allowed: Sequence[str],
        *,
        nullable: bool = False,
        why: str = "",
    ) -> dict[str, Any]:
        """``value`` as a mapping whose unknown keys are reported; {} when it is no mapping."""
        if value is None and nullable:
            return {}
        if not isinstance(value, dict):
            self.bad(path, f"must be a mapping, got {self.quote(value)}")
            return {}
        return self.known_keys(value, path, allowed, why)

    def items(self, value: object, path: str) -> list[Any]:
        """``value`` as a list; null is an empty list."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.bad(path, f"must be a list, got {self.quote(value)}")
            return []
        return value

    def boolean(self, value: object, path: str, default: bool) -> bool:
        if isinstance(value, bool):
            return value
        self.bad(path, f"must be true or false, got {self.quote(value)}")
        return default

    def bounded_int(
        self,
        value: object,
        path: str,
        minimum: int,
        *,
        nullable: bool,
        maximum: int = INT32_MAX,
    ) -> int | None:
        """An integer in [minimum, maximum] (a 32-bit one unless told), or null if nullable;
        None after a problem."""
        if value is None and nullable:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            if value <= maximum:
                return value
            self.bad(path, f"must be at most {maximum}, got {self.quote(value)}")
            return None
        null = " or null" if nullable else ""
        self.bad(path, f"must be an integer >= {minimum}{null}, got {self.quote(value)}")
        return None

    def string(self, value: object, path: str, pattern: re.Pattern[str], what: str) -> str | None:
        if isinstance(value, str) and pattern.match(value):
            return value
        self.bad(path, f"must be {what}, got {self.quote(value)}")
        return None

    def choice(self, value: object, path: str, choices: Sequence[str]) -> str | None:
        if isinstance(value, str) and value in choices:
            return value
        hint = suggest(value, choices) if isinstance(value, str) else ""
        self.bad(path, f"must be one of {', '.join(choices)}, got {self.quote(value)}{hint}")
        return None

    def string_list(
        self, value: object, path: str, pattern: re.Pattern[str], what: str
    ) -> tuple[str, ...]:
        """Strings matching ``pattern``, each once (null is none)."""
        result: dict[str, None] = {}  # insertion-ordered; membership in constant time
        for index, item in enumerate(self.items(value, path)):
            text = self.string(item, at(path, index), pattern, what)
            if text is None:
                continue
            if text in result:
                self.bad(at(path, index), f"{self.quote(text)} is listed twice")
            else:
                result[text] = None
        return tuple(result)
