"""Wall-clock deadlines for blocking requests: a watchdog that cuts the socket.

A socket read timeout bounds one ``recv``, not a request: a server that sends one byte per
second never trips it. Each request therefore runs inside :meth:`Watchdog.watch`, which gives it
a wall-clock deadline. The sockets the request uses are attached to its :class:`Watch` (the
HTTP layer does that from the thread that sends the request, see :func:`current`); when the
deadline passes, one watchdog thread shuts them down, so the blocked ``recv`` returns at once
and the request fails. The request's owner then sees ``watch.fired`` and reports the deadline,
not whatever the cut socket raised.

The same thread calls ``on_slow`` while a request is still waiting after ``warn_after`` seconds,
then after twice that, and so on, so a person watching the logs knows why nothing happens.

A streamed answer (a LIST read in chunks) calls :meth:`Watchdog.extend` after each chunk: its
deadline then bounds the wait for the next chunk, not the whole answer (a stream that keeps
making progress is never cut; one that stalls is).

No HTTP library is imported here: tests drive it with plain sockets.

Stopping (SIGTERM, SIGINT): :func:`stop_requests` is the process's one switch, thrown from
the signal handler (:mod:`rebalancer.cli.shutdown`). From then on no request starts
(:meth:`Watchdog.watch` raises :class:`Stopped` before anything is sent, and the retries of
:mod:`.retry` end), the sockets of every request in flight, in any thread, are cut, and
:func:`pause` returns at once. It takes no lock: a signal handler may interrupt the main thread
while it holds any of them. The handler also abandons the main thread's own work at once when
:func:`may_interrupt` says it is waiting on a request or inside :func:`interruptible`.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

from rebalancer.cluster.api import errors

SlowCallback = Callable[[str, float, float], None]
"""``on_slow(what, waited_seconds, deadline_seconds)``."""

DEFAULT_WARN_AFTER: Final = 5.0

_local = threading.local()


class Stopped(errors.ClusterError):
    """The process is stopping (SIGTERM or SIGINT): a request was not sent, or, when
    ``abandoned``, was in flight and its answer is not awaited (it may have reached the
    server)."""

    def __init__(self, message: str, *, abandoned: bool = False) -> None:
        super().__init__(message)
        self.abandoned = abandoned


_stopping = [False]  # a plain flag: read and thrown without a lock
_wake = threading.Event()  # set by :func:`wake` (never from a signal handler)
_in_flight: set[Watch] = set()  # every watched request of every Watchdog
_sections = [0]  # how deep the main thread is in :func:`interruptible` sections


def stop_requests() -> None:
    """No request starts from now on, and every request in flight is cut (its socket shut
    down, whichever thread waits on it). Safe in a signal handler: it takes no lock.
    :func:`pause` wakes only once :func:`wake` runs, outside the handler."""
    _stopping[0] = True
    for watch in list(_in_flight):  # copied in one step: no other thread runs meanwhile
        watch.abort()


def wake() -> None:
    """End every :func:`pause` now and from now on (after :func:`stop_requests`; it takes a
    lock, so not in a signal handler)."""
    _wake.set()


def stopping() -> bool:
    """Whether :func:`stop_requests` was called."""
    return _stopping[0]


def check(what: str) -> None:
    """Raise :class:`Stopped` if stopping: ``what`` is not sent."""
    if _stopping[0]:
        raise Stopped(f"stopping: {what} not sent")


def pause(seconds: float) -> None:
    """Sleep ``seconds``, or less: a stop ends it (:func:`wake`). A retry's pause."""
    if not _stopping[0] and seconds > 0:
        _wake.wait(seconds)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Work whose result a stop throws away (a read, a plan): in the main thread, a stop
    signal raises :class:`Stopped` wherever it is in it (see :func:`may_interrupt`)."""
    main = threading.current_thread() is threading.main_thread()
    if main:
        _sections[0] += 1
    try:
        yield
    finally:
        if main:
            _sections[0] -= 1


def may_interrupt() -> bool:
    """Whether the main thread (the caller: a signal handler runs there) may be interrupted
    now: it is waiting on a request of its own, or inside :func:`interruptible`."""
    return _sections[0] > 0 or current() is not None


class Watch:
    """One request under watch: its deadline, and the sockets it uses."""

    __slots__ = (
        "_lock",
        "_sockets",
        "aborted",
        "connect_by",
        "deadline",
        "fired",
        "seconds",
        "started",
        "what",
    )

    def __init__(self, what: str, started: float, seconds: float) -> None:
        self.what = what
        self.started = started
        self.seconds = seconds
        self.deadline = started + seconds
        self.connect_by: float | None = None
        """When connecting (every attempt together) must be done (``time.monotonic``)."""
        self.fired = False
        self.aborted = False
        """Cut because the process is stopping (:func:`stop_requests`), not by its deadline."""
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def attach(self, sock: socket.socket | None) -> None:
        """Cut ``sock`` too when the deadline passes (at once if it already has)."""
        if sock is None:
            return
        with self._lock:
            if sock not in self._sockets:
                self._sockets.append(sock)
            fired = self.fired
        if fired or self.aborted:  # read after the append: :meth:`abort` takes no lock
            _cut(sock)

    def fire(self) -> None:
        """The deadline passed: cut every attached socket."""
        with self._lock:
            self.fired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _cut(sock)

    def abort(self) -> None:
        """The process is stopping: cut every attached socket (no lock: a signal handler calls
        it; a socket attached meanwhile sees ``aborted`` and is cut by :meth:`attach`)."""
        self.aborted = True
        for sock in list(self._sockets):
            _cut(sock)

    def detach_all(self) -> None:
        with self._lock:
            self._sockets.clear()


def _cut(sock: socket.socket) -> None:
    """Shut the socket down both ways: a ``recv`` blocked on it returns at once.

    ``socket.socket.shutdown`` is called on the base class, so a TLS socket is shut down at
    the TCP level without touching its TLS state, which another thread is using.
    """
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def current() -> Watch | None:
    """The watch of the request the calling thread is sending, if any."""
    watch: Watch | None = getattr(_local, "watch", None)
    return watch


class Watchdog:
    """One daemon thread that enforces the deadlines of every watched request."""

    def __init__(
        self,
        *,
        warn_after: float = DEFAULT_WARN_AFTER,
        on_slow: SlowCallback | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.warn_after = warn_after
        self._on_slow = on_slow
        self._clock = clock
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, str, Watch]] = []  # (when, seq, "warn"|"fire", w)
        self._active: set[Watch] = set()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watch(self, what: str, seconds: float) -> Iterator[Watch]:
        """Watch one request for ``seconds``; the calling thread's sockets attach to it.
        Raises :class:`Stopped` (nothing sent) once the process is stopping."""
        check(what)
        w = Watch(what, self._clock(), seconds)
        with self._cond:
            self._active.add(w)
            heapq.heappush(self._heap, (w.deadline, next(self._seq), "fire", w))
            if 0 < self.warn_after < seconds:
                warn_at = w.started + self.warn_after
                heapq.heappush(self._heap, (warn_at, next(self._seq), "warn", w))
            self._ensure_thread()
            self._cond.notify()
        previous = current()
        _in_flight.add(w)
        _local.watch = w
        try:
            if _stopping[0]:  # stopped since the check: cut whatever it attaches
                w.abort()
            yield w
        finally:
            _local.watch = previous
            _in_flight.discard(w)
            with self._cond:
                self._active.discard(w)
            w.detach_all()

    def extend(self, w: Watch, seconds: float) -> None:
        """Progress on ``w`` (a chunk of a streamed answer arrived): its deadline is now
        ``seconds`` from now, and the slow-warnings count from now too."""
        with self._cond:
            if w.fired or w not in self._active:
                return
            w.started = self._clock()
            w.seconds = seconds
            w.deadline = w.started + seconds
            heapq.heappush(self._heap, (w.deadline, next(self._seq), "fire", w))
            self._cond.notify()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="rebalancer-request-watchdog", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][3] not in self._active:
                        heapq.heappop(self._heap)  # finished in time
                    if not self._heap:
                        self._cond.wait()
                        continue
                    when = self._heap[0][0]
                    now = self._clock()
                    if when <= now:
                        _, _, kind, w = heapq.heappop(self._heap)
                        if kind == "fire" and when < w.deadline:
                            continue  # extended since this entry was queued
                        break
                    self._cond.wait(when - now)
                waited = now - w.started
                if kind == "warn":
                    if waited < self.warn_after:  # progress since (extended): not slow
                        heapq.heappush(
                            self._heap, (w.started + self.warn_after, next(self._seq), kind, w)
                        )
                        continue
                    heapq.heappush(self._heap, (w.started + 2 * waited, next(self._seq), kind, w))
            if kind == "fire":
                w.fire()
            elif self._on_slow is not None:
                with contextlib.suppress(Exception):  # a log line must not kill the watchdog
                    self._on_slow(w.what, waited, w.seconds)
