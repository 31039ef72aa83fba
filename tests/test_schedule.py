"""Maintenance windows: a table of moments, worked out by hand, across daylight-saving changes.

Europe/Berlin in 2026: clocks spring forward on Sunday 29 March at 02:00 CET (01:00 UTC) to
03:00 CEST, so 02:00-02:59 local does not exist; they fall back on Sunday 25 October at
03:00 CEST (01:00 UTC) to 02:00 CET, so 02:00-02:59 local happens twice (00:00-00:59 UTC, then
01:00-01:59 UTC). Durations are elapsed time. Every expected value below is in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from rebalancer.core.schedule import Schedule, Window, describe, window_state

BERLIN = "Europe/Berlin"
H = 3600.0


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


WEEKNIGHTS = (Window("0 2 * * 1-5", 2 * H, BERLIN),)
CASES: list[tuple[str, tuple[Window, ...], str, str | None, str | None]] = [
    # (name, windows, now (UTC), closes_at or None, next_opens_at or None); one of the two is set
    # ---- an ordinary winter week (CET = UTC+1): 02:00-04:00 local is 01:00-03:00 UTC
    ("Tuesday inside", WEEKNIGHTS, "2026-11-24T01:30", "2026-11-24T03:00", None),
    ("opens exactly at the start", WEEKNIGHTS, "2026-11-24T01:00", "2026-11-24T03:00", None),
    ("closed exactly at the end", WEEKNIGHTS, "2026-11-24T03:00", None, "2026-11-25T01:00"),
    ("just before it opens", WEEKNIGHTS, "2026-11-24T00:59", None, "2026-11-24T01:00"),
    ("Friday night -> Monday", WEEKNIGHTS, "2026-11-27T03:00", None, "2026-11-30T01:00"),
    ("Saturday -> Monday", WEEKNIGHTS, "2026-11-28T01:30", None, "2026-11-30T01:00"),
    # ---- summer (CEST = UTC+2): the same local window is 00:00-02:00 UTC
    ("summer Wednesday inside", WEEKNIGHTS, "2026-07-01T01:59", "2026-07-01T02:00", None),
    ("summer Wednesday after", WEEKNIGHTS, "2026-07-01T02:00", None, "2026-07-02T00:00"),
    # ---- spring forward, Sunday 29 March 2026: a daily 02:30 window opens in the skipped hour
    (
        "spring: before the jump",
        (Window("30 2 * * *", 1 * H, BERLIN),),
        "2026-03-29T00:59",
        None,
        "2026-03-29T01:00",  # 02:30 does not exist: it fires as the clocks reach 03:00 CEST
    ),
    (
        "spring: start in the skipped hour",
        (Window("30 2 * * *", 1 * H, BERLIN),),
        "2026-03-29T01:00",
        "2026-03-29T02:00",  # one elapsed hour: 04:00 CEST
        None,
    ),
    (
        "spring: the day before is CET",
        (Window("30 2 * * *", 1 * H, BERLIN),),
        "2026-03-28T01:45",
        "2026-03-28T02:30",
        None,
    ),
    (
        "spring: the day after is CEST",
        (Window("30 2 * * *", 1 * H, BERLIN),),
        "2026-03-29T02:00",
        None,
        "2026-03-30T00:30",
    ),
    (
        "spring: 02:00 window of 2h opens at 03:00 CEST",
        (Window("0 2 * * *", 2 * H, BERLIN),),
        "2026-03-29T02:59",
        "2026-03-29T03:00",  # 05:00 CEST
        None,
    ),
    (
        "spring: a 01:00 window of 2h spans the jump",
        (Window("0 1 * * *", 2 * H, BERLIN),),
        "2026-03-29T01:30",  # 03:30 CEST: 1h30 elapsed since 01:00 CET (00:00 UTC)
        "2026-03-29T02:00",  # 04:00 CEST, not 03:00: elapsed time, not wall clock
        None,
    ),
    # ---- fall back, Sunday 25 October 2026: 02:00-02:59 local happens twice
    (
        "autumn: inside the first 02:30",
        (Window("30 2 * * *", 1 * H, BERLIN),),
        "2026-10-25T00:45",  # 02:45 CEST
        "2026-10-25T01:30",  # 02:30 CET, one elapsed hour later
        None,
    ),
    (
        "autumn: the second 02:45 is outside (fires once)",
        (Window("30 2 * * *", 1 * H, BERLIN),),
        "2026-10-25T01:45",  # 02:45 CET
        None,
        "2026-10-26T01:30",  # next day 02:30 CET, not the past first 02:30
    ),
    (
        "autumn: the second 02:15 does not look back to the first 02:30",
        (Window("30 2 * * *", 30 * 60, BERLIN),),
        "2026-10-25T01:15",  # 02:15 CET: the first 02:30 (00:30 UTC) window closed at 01:00
        None,
        "2026-10-26T01:30",
    ),
    (
        "autumn: the first 02:30 window is still open at the second 02:15",
        (Window("30 2 * * *", 1 * H, BERLIN),),
        "2026-10-25T01:15",
        "2026-10-25T01:30",
        None,
    ),
    (
        "autumn: a 01:00 window of 2h closes at 02:00 CET",
        (Window("0 1 * * *", 2 * H, BERLIN),),
        "2026-10-25T00:30",  # 02:30 CEST
        "2026-10-25T01:00",  # 23:00 UTC + 2h = 02:00 CET (the wall clock shows one hour)
        None,
    ),
    (
        "autumn: ... and is closed at 02:00 CET",
        (Window("0 1 * * *", 2 * H, BERLIN),),
        "2026-10-25T01:00",
        None,
        "2026-10-26T00:00",  # 01:00 CET on Monday
    ),
    # ---- several windows
    (
        "overlapping windows make one",
        (Window("0 1 * * *", 2 * H), Window("0 2 * * *", 2 * H)),
        "2026-11-24T01:30",
        "2026-11-24T04:00",
        None,
    ),
    (
        "touching windows make one",
        (Window("0 1 * * *", 1 * H), Window("0 2 * * *", 1 * H), Window("0 3 * * *", 30 * 60)),
        "2026-11-24T01:10",
        "2026-11-24T03:30",
        None,
    ),
    (
        "the earliest next opening of several",
        (Window("0 9 * * *", H), Window("0 5 * * 2", H, "America/New_York")),
        "2026-11-24T06:00",  # Tuesday 01:00 EST; 05:00 EST is 10:00 UTC
        None,
        "2026-11-24T09:00",
    ),
    (
        "a window longer than its period stays open",
        (Window("0 * * * *", 90 * 60),),
        "2026-11-24T06:10",
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("windows", "now", "closes", "opens"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_window_table(
    windows: tuple[Window, ...], now: str, closes: str | None, opens: str | None
) -> None:
    state = window_state(Schedule(windows), utc(now))
    if closes is None and opens is None:  # never closes within the chain limit
        assert state.inside
        assert state.closes_at is not None and state.closes_at > utc(now) + timedelta(days=10)
        return
    assert state.inside == (closes is not None)
    assert state.closes_at == (utc(closes) if closes else None)
    assert state.next_opens_at == (utc(opens) if opens else None)


def test_any_time_without_windows() -> None:
    state = window_state(Schedule(), utc("2026-11-24T06:00"))
    assert state.inside and state.closes_at is None
    assert describe(state) == "no maintenance windows: evictions may run at any time"


def test_now_in_another_offset_is_the_same_moment() -> None:
    """``now`` may carry any offset: it is a moment, not a wall-clock reading."""
    tokyo = timezone(timedelta(hours=9))
    a = window_state(Schedule(WEEKNIGHTS), datetime(2026, 11, 24, 10, 30, tzinfo=tokyo))
    b = window_state(Schedule(WEEKNIGHTS), utc("2026-11-24T01:30"))
    assert a == b and a.inside


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_state(Schedule(WEEKNIGHTS), datetime(2026, 11, 24, 1, 30))


def test_describe_in_the_window_time_zone() -> None:
    outside = window_state(Schedule(WEEKNIGHTS), utc("2026-11-28T01:30"))
    assert describe(outside, BERLIN) == (
        "outside the maintenance window, next opens at 2026-11-30T02:00+01:00"
    )
    inside = window_state(Schedule(WEEKNIGHTS), utc("2026-07-01T01:00"))
    assert describe(inside, BERLIN) == "inside the maintenance window until 2026-07-01T04:00+02:00"
