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
# Evaluation


def _fires(window: Window, after: datetime) -> CronSim:
    """The window's opening times strictly after ``after``, as aware datetimes."""
    local = after.astimezone(_zone(window.time_zone))
    return CronSim(window.cron, local)


def _open_until(window: Window, at: datetime) -> datetime | None:
    """When the openings of ``window`` that cover ``at`` close (UTC), or None if none does."""
    duration = timedelta(seconds=window.duration_seconds)
    end: datetime | None = None
    for start in _fires(window, at - duration):
        start_utc = start.astimezone(UTC)
        if start_utc > at:
            break
        close = start_utc + duration  # elapsed time: the arithmetic is done in UTC
        if close > at:
            end = close if end is None else max(end, close)
    return end


def _next_opening(window: Window, after: datetime) -> datetime | None:
    # In the hour that repeats in autumn, the local clock reads the same twice: an opening at
    # the first reading can come back for a start in the second one, which is already past.
    for count, start in enumerate(_fires(window, after)):
        if start.astimezone(UTC) > after:
            return start.astimezone(UTC)
        if count >= CHAIN_LIMIT:
            break
    return None


def window_state(schedule: Schedule, now: datetime) -> WindowState:
    """Where ``now`` (timezone-aware) stands in ``schedule``; times come back in UTC."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    at = now.astimezone(UTC)
    if not schedule.windows:
        return WindowState(inside=True, closes_at=None, next_opens_at=None)
    ends = [e for w in schedule.windows if (e := _open_until(w, at)) is not None]
    if not ends:
        starts = [s for w in schedule.windows if (s := _next_opening(w, at)) is not None]
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
