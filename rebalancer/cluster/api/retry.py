"""The one retry policy of rebalancer's requests, built on tenacity.

A request is tried again only here: :meth:`~rebalancer.cluster.api.kubeclient.Kube.request`
retries its GETs (and any request that never reached the server), the executor its
evictions (:mod:`rebalancer.cluster.act.executor`), each with a :class:`RetryPolicy`. urllib3
re-sends nothing, and nothing above retries a GET again.

The pause before a retry is the answer's Retry-After when it gives one (at most
:data:`MAX_RETRY_AFTER` seconds), else an exponential backoff (jittered when the policy says
so); the retries end after ``attempts`` tries or once ``max_seconds`` have passed since the
first, whichever comes first.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tenacity import RetryCallState, Retrying, stop_after_attempt
from tenacity.stop import stop_base

MAX_RETRY_AFTER: Final = 10.0
"""The longest pause a Retry-After may ask for."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often, and how patiently, one request is tried."""

    attempts: int
    """Tries in all, the first included."""
    backoff_seconds: float
    """The first pause; it doubles each time."""
    backoff_max_seconds: float
    """The longest pause of the backoff."""
    max_seconds: float
    """No retry starts once this long has passed since the first try."""
    jitter: bool = False
    """Each pause drawn between 0 and the backoff (evictions: runs do not retry in step)."""

    def pause(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER)
        backoff = min(self.backoff_seconds * 2 ** (retry - 1), self.backoff_max_seconds)
        return random.uniform(0, backoff) if self.jitter else backoff


GET: Final = RetryPolicy(attempts=7, backoff_seconds=0.5, backoff_max_seconds=8.0, max_seconds=60.0)
"""A GET answered 429 or 5xx, or cut off: 6 more tries over 23.5 s of pauses (0.5 s doubling,
8 s at most), about what the executor's re-read of a pod used to allow through its two nested
loops (4 GETs with 3.5 s of pauses, up to 5 times with jittered pauses between)."""


class _stop_after_clock(stop_base):
    """Stop once ``seconds`` have passed since ``start`` on ``clock``."""

    def __init__(self, clock: Callable[[], float], start: float, seconds: float) -> None:
        self._clock = clock
        self._start = start
        self._seconds = seconds

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._clock() - self._start >= self._seconds


def retrying(
    policy: RetryPolicy,
    retry: Callable[[object], bool],
    *,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    retry_after: Callable[[object], float | None] = lambda answer: None,
    on_pause: Callable[[object, int, float], None] | None = None,
) -> Retrying:
    """A tenacity controller for ``policy``. Each takes the try's answer (its result, or the
    exception it raised): ``retry`` says whether to try again, ``retry_after`` reads a
    Retry-After from it, ``on_pause(answer, attempt, seconds)`` is told of each pause. When the
    retries end, the last result is returned, or its exception raised."""

    def answer(state: RetryCallState) -> object:
        outcome = state.outcome
        assert outcome is not None  # asked after a try
        return outcome.exception() if outcome.failed else outcome.result()

    def told(state: RetryCallState) -> None:
        if on_pause is not None and state.next_action is not None:
            on_pause(answer(state), state.attempt_number, state.next_action.sleep)

    return Retrying(
        stop=stop_after_attempt(policy.attempts)
        | _stop_after_clock(clock, clock(), policy.max_seconds),
        wait=lambda state: policy.pause(state.attempt_number, retry_after(answer(state))),
        retry=lambda state: retry(answer(state)),
        sleep=sleep,
        before_sleep=told,
        reraise=True,
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
