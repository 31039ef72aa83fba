"""The caches of one snapshot's conversion, owned by its builder (never by the module).

The pods of one ReplicaSet share their constraints, tolerations, affinity, resources, labels
and owner, so each distinct fragment is parsed once and the converted value shared between
them. Each shared fragment gets a number, unique within one :class:`Caches`, and a pod's
``label_set`` and ``template`` fields are built from these numbers: downstream caches key on
them instead of object identity. Two snapshots converted in one process share nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast

import orjson

from rebalancer.core.convert.checker import Checker
from rebalancer.core.model import OwnerRef

__all__ = ["EMPTY_NUMBER", "Caches", "Memo", "SharedMaps", "fingerprint"]

_T = TypeVar("_T")

EMPTY_NUMBER: Final = 0
"""The number of an absent fragment (no tolerations, no labels, ...): equal for every pod."""


def fingerprint(value: object) -> bytes | None:
    """JSON bytes of a fragment as a memo key; None when it is not plain JSON (no memo)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: non-string keys, unusual types
        return None


class Memo:
    """Conversions of identical fragments, keyed by the fragment's JSON bytes, with a number.

    Only problem-free results are kept (a bad fragment is re-reported for every object that has
    it); results are immutable or never mutated, so pods share them. Bounded: cleared when
    full (numbers are never reused, so a cleared entry only costs a finer grouping).
    """

    __slots__ = ("data", "numbers")
    LIMIT: Final = 8192

    def __init__(self, numbers: Callable[[], int]) -> None:
        self.data: dict[Any, tuple[Any, int]] = {}
        self.numbers = numbers

    def get(self, chk: Checker, key: object, compute: Callable[[], _T]) -> tuple[_T, int]:
        """The converted fragment and its number; ``key`` None: computed, a fresh number."""
        if key is not None:
            found = self.data.get(key)
            if found is not None:
                return cast(tuple[_T, int], found)
        before = len(chk.problems)
        value = compute()
        entry = (value, self.numbers())
        if key is not None and len(chk.problems) == before:
            if len(self.data) >= self.LIMIT:
                self.data.clear()
            self.data[key] = entry
        return entry


class SharedMaps:
    """One dict per distinct string map: a workload's pods carry equal labels and node selectors,
    so 150,000 pods hold a few thousand dicts instead of 150,000 (nobody mutates them).
    Each distinct map has a number. Bounded: cleared when full."""

    __slots__ = ("data", "numbers")
    LIMIT: Final = 16384

    def __init__(self, numbers: Callable[[], int]) -> None:
        self.data: dict[tuple[tuple[Any, Any], ...], tuple[dict[str, str], int]] = {}
        self.numbers = numbers

    def get(
        self,
        chk: Checker,
        parent: Mapping[str, Any],
        key: str,
        path: str,
        drop: str | None = None,
    ) -> tuple[dict[str, str], int]:
        """The map at ``parent[key]`` (``drop`` removed) and its number."""
        raw = parent.get(key)
        items: tuple[tuple[Any, Any], ...] | None = None
        if type(raw) is dict and raw:
            try:
                items = tuple(raw.items())
                found = self.data.get(items)
            except TypeError:  # an unhashable value: string_map reports it
                items = found = None
            if found is not None:
                return found
        elif raw is None or type(raw) is dict:  # absent or empty
            return {}, EMPTY_NUMBER
        before = len(chk.problems)
        result = chk.string_map(parent, key, path)
        if drop is not None:
            result.pop(drop, None)
        entry = (result, self.numbers())
        if items is not None and len(chk.problems) == before:
            if len(self.data) >= self.LIMIT:
                self.data.clear()
            self.data[items] = entry
        return entry


class Caches:
    """Every cache of one conversion: memos, shared maps, owners, quantities, templates."""

    __slots__ = (
        "affinity",
        "constraints",
        "labels",
        "merged",
        "node_selectors",
        "owners",
        "quantities",
        "requests",
        "templates",
        "tolerations",
    )

    def __init__(self) -> None:
        numbers = itertools.count(EMPTY_NUMBER + 1).__next__
        self.tolerations = Memo(numbers)
        self.affinity = Memo(numbers)
        self.constraints = Memo(numbers)
        self.merged = Memo(numbers)
        self.requests = Memo(numbers)
        self.labels = SharedMaps(numbers)
        self.node_selectors = SharedMaps(numbers)
        self.owners: dict[tuple[str, str, str], OwnerRef] = {}
        self.quantities: dict[str, int | None] = {}
        self.templates: dict[tuple[int, int, int, int], int] = {}

    def template(self, parts: tuple[int, int, int, int]) -> int:
        """The number of a pod template: equal for equal (node selector, affinity, tolerations,
        constraints) numbers."""
        found = self.templates.get(parts)
        if found is None:
            found = self.templates[parts] = len(self.templates)
        return found
