"""Loop mode's debug check: the watch-fed state against a LIST (``--verify-state-every``).

:func:`differences` compares two Snapshots object by object (kind, namespace, name) and names
what one has that the other has not, or has otherwise. It is pure.

:func:`check` compares each resource exactly: its store, with the resourceVersion it reflects
(taken together), against a LIST at exactly that version (``resourceVersionMatch=Exact``). The
two show the same moment of the collection, so a difference is a real gap in the watch (an
event lost or misapplied), never the watch's delivery lag. A resource whose version the server
cannot serve (410 Gone once etcd compacted it, a refusal, an answer at another version), or
whose store has no version (listing again after a 410), falls back to :func:`verify`: a fresh
LIST, looked at again while the two differ, which tells a gap from lag only by waiting.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rebalancer.cluster.read.reader import VersionUnavailable
from rebalancer.core.api import Snapshot

MAX_NAMED: Final = 10
"""Differences named in full at most (the count is always exact)."""


def _index(objs: Iterable[Any]) -> dict[tuple[str, str], Any]:
    return {(getattr(o, "namespace", "") or "", o.name): o for o in objs}


def differences(watched: Snapshot, listed: Snapshot) -> list[str]:
    """One line per object that differs: ``only in watch``, ``only in LIST`` or ``differs``,
    by kind (the Snapshot field), then namespace/name."""
    out: list[str] = []
    for f in dataclasses.fields(Snapshot):
        if f.name == "server_minor":  # not an object list: the same source for both
            continue
        a = _index(getattr(watched, f.name))
        b = _index(getattr(listed, f.name))
        for key in sorted(a.keys() | b.keys()):
            name = "/".join(k for k in key if k)
            if key not in b:
                out.append(f"{f.name} {name}: only in watch")
            elif key not in a:
                out.append(f"{f.name} {name}: only in LIST")
            elif a[key] != b[key]:
                out.append(f"{f.name} {name}: differs")
    return out


def verify(
    watched: Callable[[], Snapshot],
    listed: Callable[[], Snapshot],
    *,
    attempts: int = 3,
    pause: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[str], int]:
    """Compare a fresh LIST with the watch-fed state (looked at after the LIST, so that it has
    had the time to catch up), up to ``attempts`` times ``pause`` seconds apart while they
    differ: the differences of the last attempt (empty when they agreed) and the attempts."""
    found: list[str] = []
    for attempt in range(1, attempts + 1):
        if attempt > 1:
            sleep(pause)
        fresh = listed()
        found = differences(watched(), fresh)
        if not found:
            return found, attempt
    return found, attempts


@dataclass(frozen=True, slots=True)
class KindCheck:
    """One resource's comparison: at exactly ``version``, or (``version`` None) by
    :func:`verify` after ``fallback`` said why not."""

    resource: str
    version: str | None
    fallback: str
    attempts: int
    differences: tuple[str, ...]


def check(
    resources: Sequence[str],
    held: Callable[[str], tuple[str | None, Snapshot]],
    list_at: Callable[[str, str], Snapshot],
    retried: Callable[[str], tuple[list[str], int]],
) -> list[KindCheck]:
    """Each resource's store (``held(resource) -> (version, snapshot)``, taken atomically)
    against ``list_at(resource, version)``, a LIST at exactly that version; where there is no
    version, or ``list_at`` raises :class:`VersionUnavailable`, ``retried(resource)`` instead
    (:func:`verify` on that resource alone)."""
    out: list[KindCheck] = []
    for resource in resources:
        version, watched = held(resource)
        if version is None:
            why = "the store has no resourceVersion (listing again after a 410)"
        else:
            try:
                listed = list_at(resource, version)
            except VersionUnavailable as exc:
                why = str(exc)
            else:
                found = tuple(differences(watched, listed))
                out.append(KindCheck(resource, version, "", 1, found))
                continue
        lines, attempts = retried(resource)
        out.append(KindCheck(resource, None, why, attempts, tuple(lines)))
    return out
