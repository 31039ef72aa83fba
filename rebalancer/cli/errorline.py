"""The one writer of error, warning and problem lines on stderr.

Every line passes :func:`rebalancer.cluster.api.redact.redact` (no credential is printed) and
:func:`rebalancer.cli.printable.printable` (no control character from the cluster or a file
reaches the terminal; newlines are kept, a problem list needs them). ``--debug`` tracebacks
take the same path.
"""

from __future__ import annotations

import sys
import traceback
from typing import TextIO

from rebalancer.cli.printable import printable
from rebalancer.cluster.api.redact import redact


def scrub(text: str) -> str:
    """``text`` as it may be shown: credentials redacted, control characters escaped."""
    return printable(redact(text), newlines=True)


def say(text: object, stream: TextIO | None = None) -> None:
    """Write ``text`` and a newline to stderr (or ``stream``), scrubbed."""
    out = sys.stderr if stream is None else stream
    out.write(scrub(str(text)) + "\n")
    out.flush()


def say_traceback() -> None:
    """The traceback of the exception being handled, scrubbed (``--debug``)."""
    say(traceback.format_exc().rstrip("\n"))
