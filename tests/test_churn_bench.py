"""bench.churn's own arithmetic and its trace (figures derived by hand): the trace is the same
for a seed, replacements are matched within 5 s, thrash and unavailability are counted as
documented, and a 429 loop is three 429s in a row for one object."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from bench.churn import loops_429, most_unavailable, replacements, thrash
from bench.trace import DRAIN, ROLLOUT, SCALE, UNCORDON, ZONE_DOWN, ZONE_UP, full_trace, short_trace


def test_the_trace_is_seeded_and_has_every_kind_of_event() -> None:
    one, again, other = full_trace(1), full_trace(1), full_trace(2)
    assert one == again
    assert one.events != other.events
    kinds = Counter(e.kind for e in one.events)
    assert {k: kinds[k] for k in (ROLLOUT, DRAIN, UNCORDON, ZONE_DOWN, ZONE_UP)} == dict.fromkeys(
        (ROLLOUT, DRAIN, UNCORDON, ZONE_DOWN, ZONE_UP), 1
    )
    for w in one.workloads:
        scales = [e for e in one.events if e.kind == SCALE and e.target == w.name]
        gaps = [b.at - a.at for a, b in itertools.pairwise(scales)]
        assert scales and all(19.9 <= g <= 60.1 for g in gaps)
        assert all(w.low <= e.value <= w.high for e in scales)
    assert [e.value for e in short_trace().events] == [15, 6, 12, 5, 11, 14, 7, 10, 4, 9]


SEEN = {
    "a": ("web", 0.0),
    "b": ("web", 0.0),
    "r1": ("web", 11.0),
    "r2": ("web", 13.0),
    "late": ("web", 30.0),
}


def test_replacements_are_the_first_new_pods_within_5_seconds() -> None:
    matched = replacements([(10.0, "a"), (12.0, "b"), (20.0, "r1")], SEEN)
    assert matched == [
        (10.0, "a", "web", "r1"),
        (12.0, "b", "web", "r2"),
        (20.0, "r1", "web", None),  # "late" came 10 s after: a scale-up's, not a replacement
    ]
    assert thrash(matched) == 1  # r1, a's replacement, evicted 10 s later


def test_most_unavailable_counts_open_evictions_from_ready_counts() -> None:
    """a at 10 s (5 Ready before) is open until 5 are Ready again (14.5 s); b at 12 s (4 Ready
    before) until 13.5 s: both open at once from 12 to 13.5. A scale of web at 11 s closes a."""
    ready = [
        (9.5, Counter(web=5)),
        (10.5, Counter(web=4)),
        (11.5, Counter(web=4)),
        (12.5, Counter(web=3)),
        (13.5, Counter(web=4)),
        (14.5, Counter(web=5)),
    ]
    evictions = [(10.0, "a"), (12.0, "b")]
    assert most_unavailable(evictions, SEEN, ready, []) == {"web": 2}
    assert most_unavailable(evictions, SEEN, ready, [(11.0, "web")]) == {"web": 1}
    assert most_unavailable(evictions, SEEN, ready, [(11.0, "api")]) == {"web": 2}


def _answer(name: str, code: int) -> dict[str, Any]:
    ref = {"namespace": "ns", "name": name, "subresource": "eviction"}
    return {"objectRef": ref, "responseStatus": {"code": code}}


def test_a_429_loop_is_three_in_a_row_for_one_object() -> None:
    answers = [_answer("p", 429), _answer("q", 429), _answer("p", 429), _answer("p", 201)]
    assert loops_429(answers) == 0
    answers += [_answer("q", 429), _answer("q", 429)]
    assert loops_429(answers) == 1
