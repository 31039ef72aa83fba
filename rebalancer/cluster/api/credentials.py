"""Credentials as kubectl handles them: bearer tokens trimmed, and remembered for redaction.

kubectl trims the whitespace around a ``tokenFile``'s content (``echo`` ends it in a newline)
and around an exec plugin's token; the Python client sends either as read, and a header value
ending in a newline makes ``http.client`` raise ``ValueError`` with the token in its message.
:func:`tidy` trims every bearer token the client configuration holds, now and after each
refresh (exec plugins and in-cluster tokens are re-read when they expire), refuses a token
that an HTTP header cannot carry, and remembers each credential so that
:func:`rebalancer.cluster.api.redact.redact` replaces it wherever it might be printed.

Works on the client's ``Configuration`` by its attributes only: the client library is imported
by :mod:`rebalancer.cluster.api.kubeclient` alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

from rebalancer.cluster.api import errors, redact

_HEADER_SAFE: Final = re.compile(r"[\x21-\x7e]+")
"""A token is visible ASCII, nothing else (RFC 6750's b64token is narrower still)."""

_SCHEMES: Final = ("Bearer ", "bearer ")


def _trimmed(value: str) -> str:
    """``Bearer <token>`` (or a bare token) with the whitespace around the token removed."""
    scheme = next((s for s in _SCHEMES if value.startswith(s)), "")
    token = value[len(scheme) :].strip()
    _check(token)
    redact.remember(token)
    return scheme + token


def _check(token: str) -> None:
    if token and not _HEADER_SAFE.fullmatch(token):
        raise errors.ClusterError(
            "cannot load cluster credentials: the bearer token holds spaces or control "
            "characters inside it, which an HTTP header cannot carry"
        )


def _trim_all(configuration: Any) -> None:
    keys = getattr(configuration, "api_key", None)
    if not isinstance(keys, dict):
        return
    for name, value in list(keys.items()):
        if isinstance(value, str):
            keys[name] = _trimmed(value)


def tidy(configuration: Any) -> None:
    """Trim and remember the credentials of a client ``Configuration``, now and on refresh."""
    _trim_all(configuration)
    for attribute in ("password", "proxy", "host"):
        value = getattr(configuration, attribute, None)
        if not isinstance(value, str) or not value:
            continue
        if attribute == "password":
            redact.remember(value)
        else:
            userinfo = urlsplit(value).netloc.rpartition("@")[0]
            redact.remember(userinfo)
    hook: Callable[[Any], None] | None = getattr(configuration, "refresh_api_key_hook", None)
    if hook is None or getattr(hook, "_rebalancer_trims", False):
        return

    def refreshed(config: Any) -> None:
        hook(config)
        tidy(config)  # the client's hook may have installed a new hook: wrap that one too

    refreshed._rebalancer_trims = True  # type: ignore[attr-defined]  # marks the wrapper
    configuration.refresh_api_key_hook = refreshed
