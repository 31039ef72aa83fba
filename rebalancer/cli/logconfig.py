"""Logging, configured in one place: structlog, JSON lines off a terminal, console on one.

Logs go to stderr, so stdout stays the command's output (a plan, a snapshot). The format
follows stderr unless ``--log-format`` chooses: JSON lines when it is not a terminal (a
CronJob, a pipe), a console renderer (``text``) when it is. ``--log-level`` (default info)
drops the lines below it. The event names are in :mod:`rebalancer.cluster.logs`.

Every line is redacted field by field before it is rendered
(:func:`rebalancer.cluster.api.redact.redact_fields`: a field whose name looks secret loses its
value, every string loses the credentials it holds), so a JSON line stays JSON. Once rendered,
control characters are escaped (JSON escapes C0 itself but leaves DEL and C1 raw; the console
renderer escapes nothing), and a console line is redacted again as text
(:func:`rebalancer.cli.errorline.scrub`: a traceback it formats is text).

Libraries log through the standard ``logging`` module, and one of them (the Kubernetes client)
calls ``logging.error`` on the root logger, which installs a handler of its own
(``logging.basicConfig``: ``ERROR:root:...``, raw) when the root logger has none. So the root
logger gets one here: every record of WARNING and above becomes a ``library.log`` line of the
same format (JSON or console), through the same scrub; Python's warnings (``warnings.warn``)
go the same way. The last-resort handler, for a logger that does not propagate, writes to the
same stream, scrubbed.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Any, TextIO, cast

import orjson
import structlog

from rebalancer.cli.errorline import scrub
from rebalancer.cli.printable import printable
from rebalancer.cluster import logs
from rebalancer.cluster.api.redact import redact_fields


def _dumps(value: Any, **_: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def _redacted(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """The processor before the renderer: every field as it may be shown (``exc_info`` is left
    to the console renderer, whose text is redacted as a whole)."""
    return {
        key: value if key == "exc_info" else redact_fields(value, key)
        for key, value in event.items()
    }


def _scrubbed(_logger: Any, _method: str, line: str) -> str:
    """The last processor of a console line: the rendered line, as it may be shown."""
    return scrub(line)


def _printable(_logger: Any, _method: str, line: str) -> str:
    """The last processor of a JSON line: its control characters escaped (its fields were
    redacted before it was rendered; redacting the rendered text could break its quoting)."""
    return printable(line, newlines=True)


class _ScrubbingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


_chosen: dict[str, str] = {}


def choose(*, level: str | None = None, log_format: str | None = None) -> None:
    """Record ``--log-level`` and ``--log-format`` for :func:`configure` (the command line
    calls this while it parses, before any command configures logging)."""
    if level is not None:
        _chosen["level"] = level
    if log_format is not None:
        _chosen["format"] = log_format


def configure(*, json_output: bool | None = None, stream: TextIO | None = None) -> None:
    """Configure structlog for the process; ``json_output=None`` takes ``--log-format``, else
    decides by ``stream.isatty()``."""
    out = stream if stream is not None else cast(TextIO, _StderrNow())
    if json_output is None and "format" in _chosen:
        json_output = _chosen["format"] == "json"
    if json_output is None:
        json_output = not _isatty(out)
    level = getattr(logging, _chosen.get("level", "info").upper())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json_output:
        processors += [
            structlog.processors.dict_tracebacks,
            _redacted,
            structlog.processors.JSONRenderer(serializer=_dumps),
            _printable,
        ]
    else:
        processors += [_redacted, structlog.dev.ConsoleRenderer(colors=False), _scrubbed]
    _route_stdlib_logging(out)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


class _StderrNow(io.TextIOBase):
    """``sys.stderr`` as it is when a line is written, not when logging was configured: a
    process (or a test) that replaces its stderr later still gets the lines there."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


class _ToStructlog(logging.Handler):
    """The root logger's handler: a library's record as a ``library.log`` line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format
            message = str(record.msg)
        structlog.get_logger("rebalancer.library").log(
            record.levelno, logs.LIBRARY_LOG, logger=record.name, message=message
        )


def _route_stdlib_logging(out: TextIO) -> None:
    """Records of the standard ``logging`` module (a library's) and Python's warnings go to
    ``out`` as log lines, scrubbed; the root logger has a handler, so no library's
    ``logging.error`` installs one of its own."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _ToStructlog)]:
        root.removeHandler(old)
    handler = _ToStructlog(logging.WARNING)
    root.addHandler(handler)
    logging.captureWarnings(True)
    last = logging.StreamHandler(out)
    last.setLevel(logging.WARNING)
    last.setFormatter(_ScrubbingFormatter("%(message)s"))
    logging.lastResort = last


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
