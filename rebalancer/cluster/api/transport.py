"""HTTP to the API server: rebalancer's own urllib3 pool manager, whose connections carry the
request deadlines of :mod:`.deadline`.

The ``kubernetes`` package works out where the server is and who we are (kubeconfig,
in-cluster service account, exec plugins: :mod:`.kubeclient`); what it found is handed over
here as an :class:`Endpoint` of plain values, and every request goes out through
:meth:`Transport.open`. urllib3 re-sends nothing and follows no redirect: retries are
:mod:`.retry`'s alone.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from rebalancer import __version__
from rebalancer.cluster.api import deadline

USER_AGENT: Final = f"rebalancer/{__version__}"
NO_RETRIES: Final = urllib3.Retry(total=0, redirect=0, raise_on_status=False)
POOL_SIZE: Final = 16
"""Connections kept alive per server: the reader's second thread and the watches run beside
the main thread, and a connection beyond this is closed after use."""


def _anonymous() -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One API server and the credentials for it, as plain values.

    ``authorization`` gives the ``Authorization`` header at the moment a request is sent (a
    token renewed by an exec plugin or re-read from the service account), None for none."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    server_name: str | None = None
    """The name the server's certificate must carry (``tls-server-name``), when not its host."""
    proxy: str | None = None
    authorization: Callable[[], str | None] = _anonymous


class _WatchedHTTPConnection(HTTPConnection):
    """Attaches its socket to the calling thread's deadline watch (see :mod:`.deadline`)."""

    def connect(self) -> None:
        _connect_budget(self)
        super().connect()
        _attach(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _attach(self)  # a kept-alive connection: already connected
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(_WatchedHTTPConnection, HTTPSConnection):
    """The TLS form of :class:`_WatchedHTTPConnection` (its methods come first in the MRO)."""


class _WatchedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def _connect_budget(conn: HTTPConnection) -> None:
    """Give this connection attempt only what is left of the request's connect timeout, so
    that the retries of a connection that times out share it (``--connect-timeout 5s`` gives
    up after 5 s, not after 5 s per attempt)."""
    watch = deadline.current()
    if watch is None or watch.connect_by is None:
        return
    left = watch.connect_by - time.monotonic()
    if left <= 0:
        raise urllib3.exceptions.ConnectTimeoutError(
            "no connection within the connect timeout (--connect-timeout), retries included"
        )
    timeout = conn.timeout
    if not isinstance(timeout, int | float) or timeout > left:
        conn.timeout = left


def _attach(conn: HTTPConnection) -> None:
    watch = deadline.current()
    if watch is not None:
        watch.attach(conn.sock)


BROKEN: Final = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
"""What a request with no (complete) answer raises."""


class Transport:
    """The connections to one :class:`Endpoint`: its TLS settings, its proxy, every socket
    watched."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        settings: dict[str, Any] = {
            "cert_reqs": "CERT_REQUIRED" if endpoint.verify else "CERT_NONE",
            "ca_certs": endpoint.ca_file,
            "cert_file": endpoint.cert_file,
            "key_file": endpoint.key_file,
            "retries": NO_RETRIES,
            "maxsize": POOL_SIZE,
        }
        if endpoint.server_name:
            settings["server_hostname"] = endpoint.server_name
        self._pools = (
            urllib3.ProxyManager(endpoint.proxy, **settings)
            if endpoint.proxy
            else urllib3.PoolManager(**settings)
        )
        self._pools.pool_classes_by_scheme = {  # this manager's own pools, nobody else's
            "http": _WatchedHTTPConnectionPool,
            "https": _WatchedHTTPSConnectionPool,
        }

    def open(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        *,
        timeout: tuple[float, float],
        query: Sequence[tuple[str, str]] = (),
        body: bytes | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request; the answer with its body not read yet. ``timeout`` is (connect,
        read) seconds, the read timeout bounding each ``recv`` (the whole request's deadline
        is the watchdog's). Raises one of :data:`BROKEN` when there is no answer."""
        url = self.endpoint.server.rstrip("/") + path
        if query:
            url += "?" + urlencode(query)
        sent = {"User-Agent": USER_AGENT, **headers}
        authorization = self.endpoint.authorization()
        if authorization:
            sent["Authorization"] = authorization
        return self._pools.urlopen(
            method,
            url,
            body=body,
            headers=sent,
            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
            retries=NO_RETRIES,
            preload_content=False,
        )

    def close(self) -> None:
        self._pools.clear()
