"""Maintenance windows: a table of moments, worked out by hand, across daylight-saving changes.

Europe/Berlin in 2026: clocks spring forward on Sunday 29 March at 02:00 CET (01:00 UTC) to
03:00 CEST, so 02:00-02:59 local does not exist; they fall back on Sunday 25 October at
03:00 CEST (01:00 UTC) to 02:00 CET, so 02:00-02:59 local happens twice (00:00-00:59 UTC, then
01:00-01:59 UTC). Durations are elapsed time. Every expected value below is in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from cronsim.cronsim import Field
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.schedule import (
    CHAIN_LIMIT,
    Schedule,
    Window,
    WindowState,
    _compact,
    describe,
    window_state,
)

BERLIN = "Europe/Berlin"
H = 3600.0
SECOND = timedelta(seconds=1)


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


# --- evaluation costs a few questions to cron, whatever the duration -------------------------


def walked_state(windows: tuple[Window, ...], now: datetime) -> WindowState:
    """The oracle: every opening walked, one at a time, with cronsim (the cost grew with the
    duration), merged as the windows are."""
    at = now.astimezone(UTC)

    def fires(window: Window, after: datetime) -> CronSim:
        return CronSim(window.cron, after.astimezone(ZoneInfo(window.time_zone)))

    def open_until(window: Window, moment: datetime) -> datetime | None:
        duration = timedelta(seconds=window.duration_seconds)
        end = None
        for start in fires(window, moment - duration):
            opened = start.astimezone(UTC)
            if opened > moment:
                break
            if opened + duration > moment:
                end = opened + duration if end is None else max(end, opened + duration)
        return end

    def next_opening(window: Window, after: datetime) -> datetime | None:
        for count, start in enumerate(fires(window, after)):
            if start.astimezone(UTC) > after:
                return start.astimezone(UTC)
            if count >= CHAIN_LIMIT:
                break
        return None

    ends = [e for w in windows if (e := open_until(w, at)) is not None]
    if not ends:
        starts = [s for w in windows if (s := next_opening(w, at)) is not None]
        return WindowState(False, None, min(starts, default=None))
    closes = max(ends)
    for _ in range(CHAIN_LIMIT):
        later = [e for w in windows if (e := open_until(w, closes)) is not None]
        if not later:
            break
        closes = max(later)
    return WindowState(True, closes, None)


_CRONS = st.tuples(
    st.sampled_from(["0", "30", "0,30", "5-10", "*/15", "*/7,3", "59"]),
    st.sampled_from(["*", "2", "1-3", "*/6", "0,12", "2,3"]),
    st.sampled_from(["*", "1", "L", "15,L", "*/10", "29"]),
    st.sampled_from(["*", "3", "3,10", "*/2", "10-12"]),
    st.sampled_from(["*", "0", "1-5", "SUN", "5L", "1#2", "*/3"]),
).map(" ".join)
_ZONES = st.sampled_from(
    ["UTC", BERLIN, "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"]
)
_WINDOWS = st.lists(
    st.builds(
        Window,
        _CRONS,
        st.integers(min_value=1, max_value=3 * 3600).map(float),
        _ZONES,
    ),
    min_size=1,
    max_size=3,
).map(tuple)
# Around the changes of 2026 (Europe 29 March and 25 October, America 8 March and 1 November,
# Lord Howe's half hour 5 April and 4 October) and an ordinary day.
_MOMENTS = st.builds(
    lambda base, seconds, micro: utc(base) + timedelta(seconds=seconds, microseconds=micro),
    st.sampled_from(
        [
            "2026-03-29T01:00",
            "2026-10-25T01:00",
            "2026-03-08T07:00",
            "2026-11-01T06:00",
            "2026-04-04T15:00",
            "2026-10-03T15:30",
            "2026-06-15T12:00",
        ]
    ),
    st.integers(min_value=-3 * 86400, max_value=3 * 86400),
    st.sampled_from([0, 1, 999_999]),
)


@settings(max_examples=150, deadline=None)
@given(_WINDOWS, _MOMENTS)
def test_window_state_is_what_walking_every_opening_finds(
    windows: tuple[Window, ...], now: datetime
) -> None:
    """Inside or not, until when or from when: the same as walking every opening, across
    daylight-saving changes (a half-hour one included), with seconds and microseconds."""
    assert window_state(Schedule(windows), now) == walked_state(windows, now)


@pytest.mark.parametrize(
    "expression",
    ["* * * * *", "*/5,7 */6,1 L,15 */2 5L,1#2", "0,0,1-3,2 2 * * MON-FRI", "*/60 1 */31 * *"],
)
def test_a_compact_cron_fires_as_written(expression: str) -> None:
    """Each field written as its set fires at the same moments, in a zone with changes."""
    start = datetime(2026, 3, 27, tzinfo=ZoneInfo(BERLIN))
    written = CronSim(expression, start)
    compact = CronSim(_compact(expression), start)
    assert [next(written) for _ in range(200)] == [next(compact) for _ in range(200)]


def _field(terms: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(terms), min_size=1, max_size=4).map(",".join)


_FIELD_TEXTS = st.tuples(
    _field(["*", "*/7", "0", "59", "5-10", "10-20/3", "0-59/30"]),
    _field(["*", "*/5", "0", "23", "1-3", "2-22/4"]),
    _field(["*", "*/10", "1", "31", "L", "LW", "15", "3-9/2"]),
    _field(["*", "*/2", "1", "12", "JAN", "DEC", "3-5"]),
    _field(["*", "*/3", "0", "7", "MON-FRI", "SUN", "5L", "1#2", "6#5"]),
).map(" ".join)


@given(_FIELD_TEXTS)
def test_compact_fields_stand_for_the_same_sets(expression: str) -> None:
    """Whatever the lists, steps, ranges, names and special days, the compact form is read
    as the same sets and the same day and daylight-saving rules, in at most 60 entries each."""
    moment = datetime(2026, 3, 27, tzinfo=ZoneInfo(BERLIN))
    try:
        written = CronSim(expression, moment)
    except CronSimError:
        return  # not a cron expression (policy loading refuses it)
    compact = CronSim(_compact(expression), moment)
    fields = ("minutes", "hours", "days", "months", "weekdays", "day_and", "fixup_tz")
    assert [getattr(compact, f) for f in fields] == [getattr(written, f) for f in fields]
    assert all(len(part.split(",")) <= 61 for part in _compact(expression).split())


def _counting_openings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many openings cronsim hands out from here on (one count per opening read)."""
    read = [0]
    step = CronSim.__next__

    def counted(sim: CronSim) -> datetime:
        read[0] += 1
        return step(sim)

    monkeypatch.setattr(CronSim, "__next__", counted)
    return read


@pytest.mark.parametrize("hours", [1, 24, 8760])
def test_an_always_open_window_costs_the_same_whatever_its_duration(
    hours: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``* * * * *`` for 1 h, 24 h or a year: inside, until the chain's end (each minute's
    window runs into the next), reading the same 10,017 openings at any duration. It read
    every minute of the duration at each of the chain's 1,001 steps (61,061 openings at 1h,
    121,121 at 2h, 526 million at 8760h; `plan` 4.6 s at 1h and 92 s at 24h on a loaded
    machine, about 1.5 h at 8760h idle); `plan` now takes 3.5-3.9 s at each (2.6 s with no
    window)."""
    read = _counting_openings(monkeypatch)
    now = utc("2026-11-24T01:30") + timedelta(seconds=12.5)
    state = window_state(Schedule((Window("* * * * *", hours * H),)), now)
    minute = utc("2026-11-24T01:30")
    assert state == WindowState(True, minute + (CHAIN_LIMIT + 1) * timedelta(hours=hours), None)
    assert read[0] <= 10 * (CHAIN_LIMIT + 1) + 20


@pytest.mark.parametrize("entries", [160, 1600, 16_000])
def test_a_long_minute_list_is_parsed_once(entries: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A minute list of 16,000 entries (every even minute, over and over) for 10 minutes: the
    windows of the whole chain are found parsing the list once and reading 6,006 openings
    at every length (it was parsed for each question: `plan` 152 s on a loaded machine, 66 s
    idle); `plan` now 5.0 s, 26 MB."""
    minutes = ",".join(str(2 * (i % 30)) for i in range(entries))
    parsed: list[str] = []
    parse = Field.parse

    def counted(field: Field, text: str) -> set[int | tuple[int, int]]:
        parsed.append(text)
        return parse(field, text)

    monkeypatch.setattr(Field, "parse", counted)
    read = _counting_openings(monkeypatch)
    now = utc("2026-11-24T01:31")
    state = window_state(Schedule((Window(f"{minutes} * * * *", 600.0),)), now)
    closes = utc("2026-11-24T01:30") + (CHAIN_LIMIT + 1) * 600 * SECOND
    assert state == WindowState(True, closes, None)
    assert parsed.count(minutes) == 1  # then cron reads the 30 minutes it stands for
    assert max(len(s) for s in parsed if s != minutes) == len(",".join(map(str, range(0, 60, 2))))
    assert read[0] <= 6 * (CHAIN_LIMIT + 1) + 20
