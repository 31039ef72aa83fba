"""Credentials as kubectl handles them: bearer tokens trimmed, and remembered for redaction.

kubectl trims the whitespace around a ``tokenFile``'s content (``echo`` ends it in a newline)
and around an exec plugin's token; the Python client sends either as read, and a header value
ending in a newline makes ``http.client`` raise ``ValueError`` with the token in its message.
:func:`tidy` trims every bearer token the client configuration holds, :func:`authorization`
the header of each request (exec plugins and in-cluster tokens are re-read when they expire);
both refuse a token that an HTTP header cannot carry, and remember each credential so that
:func:`rebalancer.cluster.api.redact.redact` replaces it wherever it might be printed.

A kubeconfig user's ``exec`` plugin is run by rebalancer, never by the client
(:mod:`rebalancer.cluster.api.execplugin`): :func:`active_user` finds the user entry of the
context in use, :func:`with_credential` puts what the plugin gave in place of its ``exec`` (the
client then loads it as a static credential), and :func:`refreshing` runs the plugin again
when its token expires.

A ``username``/``password`` user (HTTP Basic) is sent as kubectl sends it,
``Authorization: Basic``; Kubernetes API servers stopped accepting it in 1.19, a proxy in front
of one may still.

Works on the client's ``Configuration`` and its merged kubeconfig by their attributes only: the
client library is imported by :mod:`rebalancer.cluster.api.kubeclient` alone.
"""

from __future__ import annotations

import base64
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from rebalancer.cluster.api import errors, redact
from rebalancer.cluster.api.execplugin import ExecCredential, ExecPlugin, ExecPluginError

_HEADER_SAFE: Final = re.compile(r"[\x21-\x7e]+")
"""A token is visible ASCII, nothing else (RFC 6750's b64token is narrower still)."""

_SCHEMES: Final = ("Bearer ", "bearer ", "Basic ")
"""``Basic``: a ``username``/``password`` user, base64 of ``user:password`` after it."""
REFRESH_EARLY: Final = 30.0
"""An exec plugin's token is renewed this many seconds before its expirationTimestamp."""


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
            "cannot load cluster credentials: the bearer token (or the Basic credential of "
            "username and password) holds spaces or control characters inside it, which an "
            "HTTP header cannot carry"
        )


def _trim_all(configuration: Any) -> None:
    keys = getattr(configuration, "api_key", None)
    if not isinstance(keys, dict):
        return
    for name, value in list(keys.items()):
        if isinstance(value, str):
            keys[name] = _trimmed(value)


def tidy(configuration: Any) -> None:
    """Trim and remember the credentials of a client ``Configuration``."""
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


def authorization(configuration: Any) -> str | None:
    """The Authorization header of a client ``Configuration`` now, trimmed and remembered: its
    refresh hook runs first (an exec plugin's token renewed, the service account's re-read)."""
    value = configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
    return _trimmed(value) if isinstance(value, str) and value else None


# -- exec credential plugins ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActiveUser:
    """The user entry of the context in use: its name, its ``user`` mapping (the very one the
    client will load), the file it came from and the cluster entry beside it."""

    name: str
    entry: dict[str, Any]
    path: str | None
    cluster: Mapping[str, Any] | None
    cluster_name: str


def _items(config: Mapping[str, Any], key: str) -> list[tuple[dict[str, Any], str | None]]:
    """The named entries of a merged kubeconfig's list ``key``, each with its file (the client
    wraps each entry in a node with ``value`` and ``path``; a plain dict has no file)."""
    found = []
    for item in config.get(key) or []:
        value = getattr(item, "value", item)
        if isinstance(value, dict):
            found.append((value, getattr(item, "path", None)))
    return found


def _named(config: Mapping[str, Any], key: str, name: object) -> tuple[dict[str, Any], str | None]:
    return next(((v, p) for v, p in _items(config, key) if v.get("name") == name), ({}, None))


def active_user(config: Mapping[str, Any], context: str | None) -> ActiveUser | None:
    """The user of ``context`` (or of ``current-context``) in a merged kubeconfig; None when
    there is none (the client then says what is missing)."""
    wanted = context or config.get("current-context")
    entry, _ = _named(config, "contexts", wanted)
    settings = entry.get("context")
    if not isinstance(settings, dict):
        return None
    item, path = _named(config, "users", settings.get("user"))
    user = item.get("user")
    if not isinstance(user, dict):
        return None
    cluster = _named(config, "clusters", settings.get("cluster"))[0].get("cluster")
    return ActiveUser(
        str(item.get("name")),
        user,
        path,
        cluster if isinstance(cluster, dict) else None,
        str(settings.get("cluster")),
    )


def exec_plugin(user: ActiveUser) -> ExecPlugin | None:
    """The user's exec plugin when the client would use it: the user has ``exec`` and no
    credential the client takes first (an auth-provider, a token, a tokenFile)."""
    entry = user.entry
    if "exec" not in entry or any(k in entry for k in ("auth-provider", "token", "tokenFile")):
        return None
    base_dir = os.path.dirname(os.path.abspath(user.path)) if user.path else None
    return ExecPlugin.from_config(
        entry["exec"], user=user.name, base_dir=base_dir, cluster=user.cluster
    )


def with_credential(entry: Mapping[str, Any], credential: ExecCredential) -> dict[str, Any]:
    """A user entry with what an exec plugin gave in place of its ``exec``: ``token``, or
    ``client-certificate-data`` and ``client-key-data`` (base64 of the PEM, as a kubeconfig
    holds them)."""
    user = {k: v for k, v in entry.items() if k != "exec"}
    if credential.token is not None:
        user["token"] = credential.token
    else:
        for key, pem in (
            ("client-certificate-data", credential.client_certificate),
            ("client-key-data", credential.client_key),
        ):
            user[key] = base64.b64encode((pem or "").encode()).decode()
    return user


def refreshing(
    configuration: Any,
    plugin: ExecPlugin,
    credential: ExecCredential,
    timeout: float,
    *,
    clock: Callable[[], float] = time.time,
) -> None:
    """Run ``plugin`` again (under ``timeout``) when its token is about to expire, before the
    request that would send it; installed as the configuration's refresh hook. A plugin that
    gave a client certificate, or no expiry, is not run again (the connection pool of
    :mod:`.transport` keeps one TLS identity)."""
    if credential.token is None or credential.expires is None:
        return
    current = [credential]

    def refresh(config: Any) -> None:
        expires = current[0].expires
        if expires is None or clock() < expires - REFRESH_EARLY:
            return
        renewed = plugin.run(timeout)
        if renewed.token is None:
            raise ExecPluginError(
                f"exec credential plugin failed: {plugin.command}: it gave a client "
                "certificate on renewal where it had given a token"
            )
        current[0] = renewed
        config.api_key["BearerToken"] = f"Bearer {renewed.token}"

    configuration.refresh_api_key_hook = refresh
