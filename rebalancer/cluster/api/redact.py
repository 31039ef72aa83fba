"""Credentials kept out of every line rebalancer prints or logs.

Two nets, applied together by :func:`redact` where log lines and error messages are formatted
(:mod:`rebalancer.cli.logconfig`, :mod:`rebalancer.cli.errorline`):

- the credentials this process loaded (a bearer token, a password, the userinfo of a server
  URL) are remembered when the client is built (:func:`remember`) and replaced wherever they
  appear, whatever the text around them;
- patterns catch the shapes a credential takes in text, remembered or not: ``Bearer``/``Basic``
  credentials, ``Authorization`` header values, ``user:password@`` in URLs, PEM private key
  blocks, and the values of keys named like ``token``, ``password``, ``client-key-data``.
"""

from __future__ import annotations

import re
import threading
from typing import Final

REDACTED: Final = "<redacted>"

MIN_REMEMBERED: Final = 6
"""Shorter values are not remembered: replacing every "abc" would mangle ordinary text; the
patterns still catch them in their usual places."""

_remembered: set[str] = set()
_lock = threading.Lock()

_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        REDACTED,
    ),
    # scheme://user:password@host -> scheme://<redacted>@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@'\"<>]+@"), rf"\1{REDACTED}@"),
    # Bearer/Basic credentials: at least 6 characters, one of them a digit or punctuation
    # (so "bearer token" in a sentence stays as it is).
    (
        re.compile(r"(?i)\b(bearer|basic)(\s+)(?=[^\s'\"<>]*[0-9._\-=/+\\])[^\s'\"<>,;)}\]]{6,}"),
        rf"\1\2{REDACTED}",
    ),
    # Authorization: <anything but a scheme already handled above>
    (
        re.compile(
            r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            r"(?!(?:bearer|basic)\s|<redacted>)[^\s'\",}]+"
        ),
        rf"\1{REDACTED}",
    ),
    # "token": "...", password=..., client-key-data: ...
    (
        re.compile(
            r"(?i)(\b(?:password|passwd|secret|token|(?:access|id|refresh|bearer)[-_]?token|"
            r"client[-_]?key(?:[-_]?data)?|api[-_]?key)[\"']?\s*[:=]\s*)([\"']?)"
            r"(?!<redacted>)[^\s'\",}]+"
        ),
        rf"\1\2{REDACTED}",
    ),
)


def remember(secret: str | None) -> None:
    """Replace ``secret`` wherever it appears in text passed to :func:`redact` from now on."""
    if not secret:
        return
    value = secret.strip()
    if len(value) >= MIN_REMEMBERED:
        with _lock:
            _remembered.add(value)


def forget_all() -> None:
    """Forget every remembered credential (tests)."""
    with _lock:
        _remembered.clear()


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``<redacted>``."""
    with _lock:
        known = sorted(_remembered, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
