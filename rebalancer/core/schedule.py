"""Maintenance windows: when ``run`` may evict (pure: the caller passes ``now``).

A window opens at each time its cron expression fires, in its time zone, and stays open for its
duration, measured in elapsed time (a 2h window opened at 01:30 on the night clocks fall back
closes at 02:30 local time, 2 hours later). Cron fields follow Debian cron, through the
``cronsim`` library, including its daylight-saving rules: a fixed-time job in the hour that is
skipped in spring fires when the clocks have jumped (02:30 becomes 03:00), and in the hour that
repeats in autumn it fires once, at the first occurrence.

Windows that overlap or touch make one longer window. With no windows at all, any time is
inside (the policy sets no schedule).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from cronsim.cronsim import RANGES, Field

CHAIN_LIMIT: Final = 1000
"""Windows followed at most when one closes as the next opens (``* * * * *`` for 1m)."""
_PROBE: Final = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Window:
    """One maintenance window: opens when ``cron`` fires in ``time_zone``, lasts ``duration``."""

    cron: str
    duration_seconds: float
    time_zone: str = "UTC"


@dataclass(frozen=True, slots=True)
class Schedule:
    """When ``run`` may evict; no windows means at any time."""

    windows: tuple[Window, ...] = ()


@dataclass(frozen=True, slots=True)
class WindowState:
    """Whether ``now`` is inside a window, when that closes, or when the next one opens."""

    inside: bool
    closes_at: datetime | None  # inside a window: when it (and any window it runs into) closes
    next_opens_at: datetime | None  # outside: the next opening; None when none ever comes


# --------------------------------------------------------------------------------------------
# Validation (used by rebalancer.core.policy)


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a 5-field cron expression that ever fires, or None."""
    fields = expression.split()
    if len(fields) != 5:
        return "must have 5 fields: minute hour day-of-month month day-of-week"
    try:
        next(CronSim(expression, _PROBE))
    except CronSimError as exc:
        return f"not a cron expression: {exc}" if str(exc) else "not a cron expression"
    except StopIteration:
        return "never fires"
    return None


def time_zone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone the tz database knows, or None."""
    try:
        _zone(name)
    except (ZoneInfoNotFoundError, ValueError):
        return "unknown time zone; use an IANA name like Europe/Berlin or UTC"
    return None


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    if not name or name != name.strip():
        raise ValueError(name)
    return ZoneInfo(name)


# --------------------------------------------------------------------------------------------
# Evaluation. Cron is asked "the first opening after t", which cronsim answers by walking the
# fields (a month, a day, an hour at a time), never the minutes in between. The last opening
# before a moment is the last of a few openings walked or, when there are more, found by
# galloping back from the moment and halving, so a window costs a few dozen questions whatever
# its duration or how often its cron fires (the chain of windows that run into each other is
# followed at most CHAIN_LIMIT times, as before).

_FIELDS: Final = (Field.MINUTE, Field.HOUR, Field.DAY, Field.MONTH, Field.DOW)
_SECOND: Final = timedelta(seconds=1)
_WALK: Final = 8
"""Openings walked one by one before the last one is searched for instead."""


@lru_cache(maxsize=256)
def _compact(expression: str) -> str:
    """``expression`` with each field written as the set it stands for, at most 60 entries
    (a list of 16,000 minutes is at most the 60 minutes): cronsim parses an expression each
    time it starts, so the cost of a long list is paid once. Fields starting with ``*`` still
    do (cronsim's daylight-saving and day-of-week rules look at that)."""
    out = []
    for field, text in zip(_FIELDS, expression.upper().split(), strict=True):
        items = field.parse(text)
        numbers = sorted(i for i in items if isinstance(i, int) and i >= 0)
        special = sorted(i for i in items if not (isinstance(i, int) and i >= 0))
        whole = RANGES[field]
        star = text.startswith("*")
        if star and not special and numbers == list(whole):
            out.append("*")
            continue
        # A field starting with * holds its first value: "*/60" is minute 0, "*/8" Sunday.
        terms = [f"*/{len(whole)}"] if star else []
        terms += [str(i) for i in numbers if not (star and i == whole[0])]
        terms += [_special(i) for i in special]
        out.append(",".join(terms))
    return " ".join(out)


def _special(item: int | tuple[int, int]) -> str:
    """The text of one of cronsim's special items (``L``, ``LW``, ``5L``, ``5#2``)."""
    if isinstance(item, tuple):
        day, nth = item
        return f"{day}L" if nth == CronSim.LAST else f"{day}#{nth}"
    return "L" if item == CronSim.LAST else "LW"


def _after(window: Window, moment: datetime) -> datetime | None:
    """The window's first opening strictly after ``moment`` (UTC), None when none comes.

    In the hour that repeats in autumn, the local clock reads the same twice: an opening at
    the first reading can come back for a start in the second one, which is already past."""
    local = moment.astimezone(_zone(window.time_zone))
    for count, start in enumerate(CronSim(_compact(window.cron), local)):
        if start.astimezone(UTC) > moment:
            return start.astimezone(UTC)
        if count >= CHAIN_LIMIT:
            break
    return None  # or cronsim gave up: no opening in 50 years


def _last_opening(window: Window, at: datetime, after: datetime) -> datetime | None:
    """The window's last opening in ``(after, at]``, or None.

    The first :data:`_WALK` openings after ``after`` are walked; when there are more, it
    gallops back from ``at`` (1 s, 2 s, 4 s, ...) to a moment with an opening between it and
    ``at``, then halves that stretch down to a second: openings fall on whole seconds, so the
    first opening after its start is the last one. At most about 2 log2(at - after) + 8
    questions, however many openings lie between."""
    found = None
    local = after.astimezone(_zone(window.time_zone))
    for count, start in enumerate(CronSim(_compact(window.cron), local)):
        opened = start.astimezone(UTC)
        if opened > at:
            return found
        if opened > after:  # see _after: an opening already past can come back
            found = opened
        if count >= _WALK:
            break
    else:
        return found  # cronsim gave up: no opening in 50 years
    high = at  # invariant: no opening in (high, at]
    step = _SECOND
    while True:
        low = at - step
        final = low <= after
        if final:
            low = after
        found = _after(window, low)
        if found is not None and found <= at:
            break
        if final:
            return None
        high, step = low, step * 2
    while high - low > _SECOND:  # invariant: an opening in (low, at], found is the first
        middle = low + (high - low) / 2
        first = _after(window, middle)
        if first is not None and first <= at:
            low, found = middle, first
        else:
            high = middle
    return found


def _open_until(window: Window, at: datetime) -> datetime | None:
    """When the openings of ``window`` that cover ``at`` close (UTC), or None if none does:
    the last one at or before ``at`` covers it when it opened less than its duration ago
    (elapsed time: the arithmetic is done in UTC)."""
    duration = timedelta(seconds=window.duration_seconds)
    start = _last_opening(window, at, at - duration)
    return None if start is None else start + duration


def window_state(schedule: Schedule, now: datetime) -> WindowState:
    """Where ``now`` (timezone-aware) stands in ``schedule``; times come back in UTC."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    at = now.astimezone(UTC)
    if not schedule.windows:
        return WindowState(inside=True, closes_at=None, next_opens_at=None)
    ends = [e for w in schedule.windows if (e := _open_until(w, at)) is not None]
    if not ends:
        starts = [s for w in schedule.windows if (s := _after(w, at)) is not None]
        return WindowState(inside=False, closes_at=None, next_opens_at=min(starts, default=None))
    closes = max(ends)
    for _ in range(CHAIN_LIMIT):  # a window open when this one closes carries on
        later = [e for w in schedule.windows if (e := _open_until(w, closes)) is not None]
        if not later:
            break
        closes = max(later)
    return WindowState(inside=True, closes_at=closes, next_opens_at=None)


def describe(state: WindowState, zone: str = "UTC") -> str:
    """``inside the maintenance window until ...`` or ``outside ..., next opens at ...``."""

    def show(moment: datetime) -> str:
        return moment.astimezone(_zone(zone)).isoformat(timespec="minutes")

    if state.inside:
        if state.closes_at is None:
            return "no maintenance windows: evictions may run at any time"
        return f"inside the maintenance window until {show(state.closes_at)}"
    if state.next_opens_at is None:
        return "outside the maintenance window, and no window ever opens again"
    return f"outside the maintenance window, next opens at {show(state.next_opens_at)}"
