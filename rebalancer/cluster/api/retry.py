"""The one retry policy of rebalancer's requests, built on tenacity.

A request is tried again only here: :meth:`~rebalancer.cluster.api.kubeclient.Kube.request`
retries its GETs (and any request that never reached the server), the executor its
evictions (:mod:`rebalancer.cluster.act.executor`), each with a :class:`RetryPolicy`. urllib3
re-sends nothing, and nothing above retries a GET again.

The pause before a retry is the answer's Retry-After when it gives one (at most
:data:`MAX_RETRY_AFTER` seconds), else an exponential backoff (jittered when the policy says
so); the retries end after ``attempts`` tries or once ``max_seconds`` have passed since the
first, whichever comes first, or as soon as the process is stopping
(:func:`~rebalancer.cluster.api.deadline.stop_requests`): then no try starts, whatever the
policy, and :class:`~rebalancer.cluster.api.deadline.Stopped` is raised instead of the last
answer. A pause is a wait that a stop ends (the caller's ``sleep`` should be one too:
:func:`~rebalancer.cluster.api.deadline.pause`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tenacity import RetryCallState, Retrying, stop_after_attempt
from tenacity.stop import stop_base

from rebalancer.cluster.api import deadline

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


class _stop_when(stop_base):
    """Stop as soon as ``stopping()`` says so."""

    def __init__(self, stopping: Callable[[], bool]) -> None:
        self._stopping = stopping

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._stopping()


def retrying(
    policy: RetryPolicy,
    retry: Callable[[object], bool],
    *,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    retry_after: Callable[[object], float | None] = lambda answer: None,
    on_pause: Callable[[object, int, float], None] | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> Retrying:
    """A tenacity controller for ``policy``. Each takes the try's answer (its result, or the
    exception it raised): ``retry`` says whether to try again, ``retry_after`` reads a
    Retry-After from it, ``on_pause(answer, attempt, seconds)`` is told of each pause. When the
    retries end, the last result is returned, or its exception raised.

    Once the process is stopping (:func:`.deadline.stopping`), or ``stopping()`` (the caller's
    own stop) says so, no further try starts: :class:`.deadline.Stopped` is raised in place of
    the last answer, before a pause and again after one (a stop that came during it)."""

    def stopped() -> bool:
        return deadline.stopping() or stopping()

    def before(state: RetryCallState) -> None:
        if stopped():
            raise deadline.Stopped(f"stopping: try {state.attempt_number} not sent")

    def at_end(state: RetryCallState) -> object:
        outcome = state.outcome
        if stopped():
            error = outcome.exception() if outcome is not None and outcome.failed else None
            raise deadline.Stopped(f"stopping: try {state.attempt_number + 1} not sent") from error
        return outcome.result() if outcome else None

    def answer(state: RetryCallState) -> object:
        outcome = state.outcome
        assert outcome is not None  # asked after a try
        return outcome.exception() if outcome.failed else outcome.result()

    def told(state: RetryCallState) -> None:
        if on_pause is not None and state.next_action is not None:
            on_pause(answer(state), state.attempt_number, state.next_action.sleep)

    return Retrying(
        stop=stop_after_attempt(policy.attempts)
        | _stop_after_clock(clock, clock(), policy.max_seconds)
        | _stop_when(stopped),
        wait=lambda state: policy.pause(state.attempt_number, retry_after(answer(state))),
        retry=lambda state: retry(answer(state)),
        sleep=sleep,
        before=before,
        before_sleep=told,
        reraise=True,
        retry_error_callback=at_end,
    )
