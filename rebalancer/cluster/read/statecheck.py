"""Loop mode's debug check: the watch-fed state against a fresh LIST (``--verify-state-every``).

:func:`differences` compares two Snapshots object by object (kind, namespace, name) and names
what one has that the other has not, or has otherwise. It is pure; the reader that calls it
takes the fresh LIST and retries, since a cluster that moves between the LIST and the look at
the watch's stores differs for a moment without anything being wrong.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any, Final

from rebalancer.core.model import Snapshot

MAX_NAMED: Final = 10
"""Differences named in full at most (the count is always exact)."""


def _index(objs: Iterable[Any]) -> dict[tuple[str, str], Any]:
    return {(getattr(o, "namespace", "") or "", o.name): o for o in objs}


def differences(watched: Snapshot, listed: Snapshot) -> list[str]:
    """One line per object that differs: ``only in watch``, ``only in LIST`` or ``differs``,
    by kind (the Snapshot field), then namespace/name."""
    out: list[str] = []
    for f in dataclasses.fields(Snapshot):
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
