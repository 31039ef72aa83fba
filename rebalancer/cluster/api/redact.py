"""Credentials kept out of every line rebalancer prints or logs.

Two nets, applied together by :func:`redact` where log lines and error messages are formatted
(:mod:`rebalancer.cli.logconfig`, :mod:`rebalancer.cli.errorline`):

- the credentials this process loaded (a bearer token, a password, the userinfo of a server
  URL) are remembered when the client is built (:func:`remember`) and replaced wherever they
  appear, whatever the text around them;
- shapes catch a credential in text, remembered or not: ``Bearer``/``Basic`` credentials,
  ``Authorization`` header values, ``user:password@`` in URLs, PEM private key blocks, and the
  value of every key whose name looks secret (:func:`secret_name`), whatever its prefix or
  suffix, in the shapes ``KEY=value``, ``KEY: value``, ``"key": "value"``, ``KEY='a b c'`` and
  ``--key VALUE``.
  A quoted value is replaced whole, quotes kept (an unterminated one to the end of its line).

A log line is redacted field by field before it is rendered (:func:`redact_fields`): a field
whose name looks secret loses its whole value, every other string goes through
:func:`redact`, so a JSON line stays JSON.

What counts as a key that looks secret: its name, lower-cased without ``-``, ``_`` and ``.``,
holds one of :data:`SECRET_STEMS` (``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``client_secret``, ``x-api-key``, ``passwd``), unless it names a file (``tokenFile``,
``client-key-file``, ``aws-credentials.yaml``: a path, shown) or a label key (``key``,
``topologyKey``, ``matchLabelKeys``: the Kubernetes vocabulary this tool prints everywhere).

``KEY: value`` with an unquoted value is read as a credential where a key stands: at the start
of a line or after ``{ , ( [ ; : = | - "`` or a quote, or when the name is spelt as an
identifier (``clientSecret``, ``AWS_SESSION_TOKEN``, ``client-key-data``); the value then runs
to the end of the line (or a ``,``, ``}``, ``]``), so ``password: correct horse battery staple``
goes whole. After a plain word (``cannot load cluster credentials: no configuration found``)
it is prose and left alone; ``=`` and a quoted value are redacted wherever they stand.

Every expression here is linear in the text: no quantifier is nested, each scan starts only where
a run of key characters starts, and a quoted value without its closing quote ends at its line.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any, Final

REDACTED: Final = "<redacted>"

MIN_REMEMBERED: Final = 6
"""Shorter values are not remembered: replacing every "abc" would mangle ordinary text; the
patterns still catch them in their usual places."""

SECRET_STEMS: Final = (
    "secret",
    "token",
    "passw",
    "pwd",
    "passphrase",
    "key",
    "cred",
    "session",
    "auth",
    "bearer",
    "private",
    "cert",
    "cookie",
    "signature",
)
"""A key whose name holds one of these (lower case, ``-_.`` removed) looks secret."""

PUBLIC_NAMES: Final = frozenset(
    {
        "key",
        "keys",
        "topologykey",
        "topologykeys",
        "matchlabelkeys",
        "mismatchlabelkeys",
        "labelkey",
        "labelkeys",
    }
)
"""Names holding a stem that are the Kubernetes vocabulary of label and taint keys."""

PATH_SUFFIXES: Final = ("file", "filename", "path", "dir")
"""A key named like ``tokenFile`` holds where a credential is, not the credential."""
FILE_EXTENSIONS: Final = (
    *(".yaml", ".yml", ".json", ".txt", ".conf", ".cfg", ".toml", ".ini", ".log", ".csv"),
    *(".html", ".md"),
)
"""A name ending so is a file's (``aws-credentials.yaml: 2 problem(s)`` heads an error)."""

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
    # scheme://user:password@host -> scheme://<redacted>@host (the last @ before the path)
    (
        re.compile(r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]*://)[^/?#\s'\"<>]+@"),
        rf"\1{REDACTED}@",
    ),
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
)

_KEY: Final = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]+)([\"']?)[ \t]*([:=])[ \t]*")
"""A key (a whole run of key characters), its closing quote, and ``:`` or ``=``."""
_QUOTED: Final = re.compile(r"\"(?:[^\"\\\n]|\\.)*(\")?|'(?:[^'\\\n]|\\.)*(')?")
"""A quoted value, escapes included; without its closing quote, to the end of the line."""
_EQ_VALUE: Final = re.compile(r"[^\s\"',;&)}\]]+")
"""An unquoted value after ``=``: up to a space, a quote or a separator."""
_COLON_VALUE: Final = re.compile(
    r"(?i)((?:bearer|basic|digest|negotiate)[ \t]+)?[^\s,}\]][^\n\r,}\]]*"
)
"""An unquoted value after ``:``: to the end of the line (or ``,``, ``}``, ``]``), an
authorization scheme before it kept."""
_FLAG: Final = re.compile(
    r"(?<![A-Za-z0-9_.\-])(--?[A-Za-z0-9_.][A-Za-z0-9_.\-]*[ \t]+)"
    r"(\"(?:[^\"\\\n]|\\.)*\"?|'(?:[^'\\\n]|\\.)*'?|[^\s\-\"'][^\s\"',;&)}\]]*)"
)
"""A command-line flag and the value after it (``--token VALUE``)."""
_IDENTIFIER: Final = re.compile(r".[A-Z]|[_.\-0-9]")
"""A name spelt as an identifier (camelCase, ALLCAPS of two letters or more, separators)."""
_STRUCTURE: Final = frozenset("\n\r{,([;:=|-\"'`")
"""What may stand before a key (spaces aside) for ``KEY: value`` to be read as one."""


def secret_name(name: str) -> bool:
    """Whether a key called ``name`` holds a secret (see the module's docstring)."""
    lower = name.lower()
    compact = lower.replace("-", "").replace("_", "").replace(".", "")
    if compact in PUBLIC_NAMES or compact.endswith(PATH_SUFFIXES):
        return False
    if lower.endswith(FILE_EXTENSIONS):
        return False
    return any(stem in compact for stem in SECRET_STEMS)


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
    return _FLAG.sub(_flag_value, _redact_values(text))


def redact_fields(value: Any, name: str | None = None) -> Any:
    """A log line's field ``value`` as it may be rendered: all of it under a name that looks
    secret (None and booleans aside), else every string in it through :func:`redact`;
    mappings, lists and tuples field by field; other objects as their redacted text."""
    if value is None or isinstance(value, bool):
        return value
    if name is not None and secret_name(name):
        return REDACTED
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, Mapping):
        return {k: redact_fields(v, k if isinstance(k, str) else None) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_fields(v) for v in value]
    return redact(str(value))


def _redact_values(text: str) -> str:
    """The values of keys that look secret replaced, in one pass from left to right."""
    out: list[str] = []
    done = 0  # text[:done] is in out
    pos = 0
    while (match := _KEY.search(text, pos)) is not None:
        pos = match.end()
        key, quote, sep = match.group(1), match.group(2), match.group(3)
        if not secret_name(key.strip("-_.")) or text.startswith(REDACTED, pos):
            continue
        start = pos
        quoted = _QUOTED.match(text, pos)
        if quoted is not None:
            end = quoted.end()
            closing = quoted.group(1) or quoted.group(2) or ""
            replacement = text[pos] + REDACTED + closing
        elif sep == "=":
            value = _EQ_VALUE.match(text, pos)
            if value is None:
                continue
            end, replacement = value.end(), REDACTED
        else:
            if not (quote or _IDENTIFIER.search(key) or _after_structure(text, match.start())):
                continue  # a word in a sentence, then a colon: prose
            value = _COLON_VALUE.match(text, pos)
            if value is None:
                continue
            end = value.end()
            replacement = (value.group(1) or "") + REDACTED
        out.append(text[done:start])
        out.append(replacement)
        done = pos = end
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _flag_value(match: re.Match[str]) -> str:
    flag, value = match.group(1), match.group(2)
    if not secret_name(flag.strip().strip("-_.")) or value.startswith(REDACTED):
        return match.group(0)
    if value[0] in "\"'":
        closed = len(value) >= 2 and value[-1] == value[0]
        return flag + value[0] + REDACTED + (value[0] if closed else "")
    return flag + REDACTED


def _after_structure(text: str, start: int) -> bool:
    """Whether what stands before ``start`` (spaces and tabs aside) starts a key: the text's
    start or one of :data:`_STRUCTURE`."""
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _STRUCTURE
