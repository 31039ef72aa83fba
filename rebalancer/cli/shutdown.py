"""Signals: SIGTERM (or SIGINT) at any moment stops rebalancer within moments, and nothing is
sent to the cluster after it.

Whatever the phase, a signal first throws the process's one switch,
:func:`rebalancer.cluster.api.deadline.stop_requests`: no request starts from then on (the
retries of every loop end), and the sockets of the requests in flight, in every thread, are
cut. A second signal ends the process the operating system's way (SIG_DFL: death by that
signal, exit 128 + its number to a shell).

Before a run evicts (:func:`install`: connecting, the RBAC pre-flight, a live ``plan``'s or
``snapshot``'s read, and every offline command), nothing needs finishing: the signal raises
:class:`Terminated`, which unwinds whatever is under way (a blocked read included: the handler
runs in the main thread as soon as the read is interrupted), and
:func:`rebalancer.cli.main.main` ends the command with :func:`stopped`: one line on stderr and
exit 130 (SIGINT) or 143 (SIGTERM), as shells expect of an interrupted command; ``run``, which
had evicted nothing yet, logs the stop and exits 0.

While a run evicts (:func:`install_stop_handlers`), the signal also sets the runner's stop
event, and the main thread drops what it was waiting on: the request in flight is abandoned
(:class:`~rebalancer.cluster.api.deadline.Stopped` raised in it), as is a read or a plan under
way (:func:`~rebalancer.cluster.api.deadline.interruptible`). The run then reports what it
sent, and sends nothing more.

A handler takes no lock: it may interrupt the main thread while it holds any (a log line being
written, an Event being waited on). What needs one (the log line, setting the stop event,
waking the pauses) is done by a small relay thread the handler writes a byte to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Final

from rebalancer.cluster import logs
from rebalancer.cluster.api import deadline
from rebalancer.core.api import EXIT_OK

SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
_received: list[int] = []  # the signals received, in order


class Terminated(BaseException):  # a request to stop, like KeyboardInterrupt
    """A stop signal arrived before the run loop took signals over."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal = signal.Signals(signum).name
        self.signum = signum


def received() -> int | None:
    """The first stop signal received, if any."""
    return _received[0] if _received else None


def _stop(signum: int) -> None:
    """What every handler does first (no lock taken): the switch thrown, and a second signal
    left to the operating system."""
    _received.append(signum)
    deadline.stop_requests()
    for s in SIGNALS:
        signal.signal(s, signal.SIG_DFL)


def _raise(signum: int, frame: FrameType | None) -> None:
    _stop(signum)
    raise Terminated(signum)


def install() -> Callable[[], None]:
    """Make SIGTERM and SIGINT raise :class:`Terminated`; returns an undo (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    return _handle_signals(_raise)


def _handle_signals(handler: Callable[[int, FrameType | None], None]) -> Callable[[], None]:
    """``handler`` for SIGTERM and SIGINT; returns an undo that puts back the previous ones
    (unless a signal came meanwhile: the next one is then the operating system's)."""
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, handler)

    def undo() -> None:
        for s, h in previous.items():
            if signal.getsignal(s) is handler:
                signal.signal(s, h)

    return undo


def exit_code(signum: int, *, run: bool) -> int:
    """The exit code of a command stopped by ``signum`` before its end: 128 + the signal's
    number (130 for SIGINT, 143 for SIGTERM), as a shell reports a command a signal ended;
    0 for ``run`` (a stop is how a run is meant to end when asked to)."""
    return EXIT_OK if run else 128 + signum


def stopped(signum: int | None, *, run: bool) -> int:
    """Say that the command was stopped by ``signum`` (None: SIGTERM) on stderr, in one line,
    and return its exit code."""
    signum = signal.SIGTERM if signum is None else signum
    name = signal.Signals(signum).name
    if run:
        from rebalancer.cli.logconfig import configure as configure_logging  # noqa: PLC0415

        configure_logging()
        logs.get_logger("rebalancer.cli").warning(
            logs.SHUTDOWN,
            signal=name,
            detail="stopped outside the eviction loop: no eviction was under way",
        )
    else:
        from rebalancer.cli.errorline import say  # noqa: PLC0415  # on use

        say(f"rebalancer: interrupted by {name}: stopped before the command finished")
    return exit_code(signum, run=run)


def install_stop_handlers(stop: threading.Event) -> Callable[[], None]:
    """SIGTERM and SIGINT set ``stop`` and stop every request (see the module's text); a
    second signal acts as the default. Returns an undo."""
    read_end, write_end = os.pipe()

    def relay() -> None:
        try:
            while data := os.read(read_end, 16):  # b"": the undo closed the other end
                logs.get_logger("rebalancer.runner").warning(
                    logs.SHUTDOWN,
                    signal=signal.Signals(data[0]).name,
                    detail="nothing more is sent: the request in flight is abandoned",
                )
                stop.set()
                deadline.wake()
        finally:
            os.close(read_end)

    thread = threading.Thread(target=relay, name="rebalancer-stop", daemon=True)
    thread.start()

    def handler(signum: int, frame: FrameType | None) -> None:
        _stop(signum)
        with contextlib.suppress(OSError):
            os.write(write_end, bytes([signum]))
        if deadline.may_interrupt():
            name = signal.Signals(signum).name
            raise deadline.Stopped(f"stopping ({name}): abandoned in flight", abandoned=True)

    undo_signals = _handle_signals(handler)

    def undo() -> None:
        undo_signals()
        os.close(write_end)
        thread.join(1.0)  # its log line out before the run's last ones

    return undo
