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

SlowCallback = Callable[[str, float, float], None]
"""``on_slow(what, waited_seconds, deadline_seconds)``."""

DEFAULT_WARN_AFTER: Final = 5.0

_local = threading.local()


class Watch:
    """One request under watch: its deadline, and the sockets it uses."""

    __slots__ = (
        "_lock",
        "_sockets",
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
        if fired:
            _cut(sock)

    def fire(self) -> None:
        """The deadline passed: cut every attached socket."""
        with self._lock:
            self.fired = True
            sockets = list(self._sockets)
        for sock in sockets:
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
        """Watch one request for ``seconds``; the calling thread's sockets attach to it."""
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
        _local.watch = w
        try:
            yield w
        finally:
            _local.watch = previous
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
