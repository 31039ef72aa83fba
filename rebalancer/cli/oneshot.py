"""A process that ends with its command (the ``rebalancer`` console script, ``python -m
rebalancer``): what it may skip because nothing comes after.

A ``plan`` of 150,000 pods, from a snapshot file or from the cluster, holds a few million
small objects from the load to the end. Two costs then buy nothing in a process about to exit:

* the cyclic garbage collector: the load and the planning pause it (they create no cycles,
  see :mod:`rebalancer.cluster.gcpause`), but every object they allocated is still in its
  youngest generation, so the first collections after the pause scan all of them (about
  0.5 s at 150,000 pods). A one-shot command leaves it off from the load on
  (:func:`loading`): what comes after (planning, rendering) allocates little.
* tearing the objects down at exit (about 0.1 s): :func:`finish` flushes the output, runs
  the exit handlers (logging's included) and ends the process with :func:`os._exit`, with the
  snapshot still held (:func:`keep`).

:func:`rebalancer.cli.main.main`, which tests and other callers use, never turns this on:
there the collector and the exit behave as usual.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import NoReturn

_state = {"active": False}
_held: list[object] = []


def start() -> None:
    """This process ends when the command returns (called by the console script only)."""
    _state["active"] = True


def active() -> bool:
    return _state["active"]


def loading() -> None:
    """A large input is about to be loaded: in a one-shot process the cyclic collector stays
    off until the process exits."""
    if _state["active"]:
        gc.disable()


def keep(value: object) -> None:
    """Hold ``value`` until the process exits (one-shot only), so it is never torn down."""
    if _state["active"]:
        _held.append(value)


def _flush() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True


def finish(code: int) -> NoReturn:
    """Exit with ``code``: at once when the output is flushed and no other thread is left,
    else the interpreter's usual way (which then reports what it could not flush, or waits
    for the threads, as it always did)."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if not _state["active"] or others or not _flush():
        sys.exit(code)
    atexit._run_exitfuncs()  # logging.shutdown among them: every handler flushed and closed
    if not _flush():
        sys.exit(code)
    os._exit(code)
