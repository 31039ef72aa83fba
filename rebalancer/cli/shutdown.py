"""Signals: SIGTERM (or SIGINT) at any moment ends rebalancer cleanly.

While a run evicts (:func:`install_stop_handlers`), a signal sets the runner's stop event: the
eviction in flight finishes and is reported, nothing new is sent, and a second signal ends the
process the usual way.

Before that (:func:`install`), nothing has been evicted and nothing needs finishing:
connecting, the RBAC pre-flight, a live ``plan``'s read. There a signal
raises :class:`Terminated`, which unwinds whatever is under way (a blocked socket read
included: the handler runs in the main thread as soon as the read is interrupted), and
:func:`rebalancer.cli.main.main` turns it into a log line and exit 0, instead of the
interpreter's default death by signal (exit 143) or a KeyboardInterrupt traceback.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Final

from rebalancer.cluster import logs

SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


class Terminated(BaseException):  # a request to stop, like KeyboardInterrupt
    """A stop signal arrived before the run loop took signals over."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal = signal.Signals(signum).name


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def install() -> Callable[[], None]:
    """Make SIGTERM and SIGINT raise :class:`Terminated`; returns an undo (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _raise)

    def undo() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    return undo


def report(exc: Terminated) -> None:
    """The one log line of a clean early stop."""
    from rebalancer.cli.logconfig import configure as configure_logging  # noqa: PLC0415  # on use

    configure_logging()
    logs.get_logger("rebalancer.cli").warning(
        logs.SHUTDOWN,
        signal=exc.signal,
        detail="stopped outside the eviction loop: no eviction was under way",
    )


def install_stop_handlers(stop: threading.Event) -> Callable[[], None]:
    """SIGTERM and SIGINT set ``stop``; a second signal acts as the default. Returns an undo."""
    previous = {s: signal.getsignal(s) for s in SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        logs.get_logger("rebalancer.runner").warning(
            logs.SHUTDOWN, signal=signal.Signals(signum).name
        )
        stop.set()
        for s in SIGNALS:  # a second signal ends the process the usual way
            signal.signal(s, signal.SIG_DFL if s == signal.SIGTERM else signal.default_int_handler)

    for s in SIGNALS:
        signal.signal(s, handler)

    def undo() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return undo
