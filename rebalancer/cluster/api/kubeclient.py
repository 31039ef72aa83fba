"""The API adapter: the requests rebalancer sends to the API server, and the one place that
uses the ``kubernetes`` package, for configuration and credentials only (kubeconfig, in-cluster
service account, exec plugins). Requests go out through rebalancer's own HTTP pool
(:mod:`.transport`), never through the package's API client.

Everything above this module sees plain dicts and bytes, and rebalancer's own errors
(:mod:`rebalancer.core.errors`); no client object or client exception leaks out. Requests go
through :meth:`Kube.request`, which only knows GET and POST, plus PUT on a coordination.k8s.io
Lease and DELETE of rebalancer's own EvictionRequests (``rebalancer-<pod uid>``, its
withdrawal) and of its own capacity reservations (PodTemplates and CapacityBuffers named
``rebalancer-reserve-<hash>``, the only ones it may create): rebalancer deletes nothing else,
and this module makes a pod DELETE (or any write to a pod but an eviction) impossible to issue
by mistake.

Every request has a wall-clock deadline (``request_timeout``), enforced by a
:class:`~rebalancer.cluster.api.deadline.Watchdog` that cuts the socket: a server that trickles
its answer cannot hold a request longer than that. A request still waiting after a few seconds
is logged as a warning.

Credentials, in order: ``--kubeconfig`` (with ``--context``), else ``$KUBECONFIG``, else the
in-cluster service account when ``$KUBERNETES_SERVICE_HOST`` is set, else ``~/.kube/config``.
"""

from __future__ import annotations

import os
import re
import ssl
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, NoReturn
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import should_bypass_proxies
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from rebalancer.cluster import logs
from rebalancer.cluster.api import credentials, deadline, errors, redact, transport
from rebalancer.cluster.api.preflight import review_answer
from rebalancer.cluster.api.resources import RESOURCES_BY_NAME
from rebalancer.cluster.api.retry import GET as GET_RETRY
from rebalancer.cluster.api.retry import RetryPolicy, retrying
from rebalancer.cluster.api.transport import Endpoint
from rebalancer.cluster.inputs import check_kubeconfig
from rebalancer.core.api import InputError

ALLOWED_METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
LEASE_PATH: Final = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases/[^/]+$")
"""The only thing rebalancer ever PUTs: one Lease (SPEC §5.7, one rebalancer at a time)."""
POD_PATH: Final = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+$")
"""The only thing rebalancer ever PATCHes: a pod, and only its deletion cost (SPEC §7)."""
REQUEST_PATH: Final = re.compile(
    r"^/apis/lifecycle\.k8s\.io/v1alpha1/namespaces/[^/]+/evictionrequests/rebalancer-[0-9a-f-]+$"
)
"""What rebalancer DELETEs: its own EvictionRequest, named after the pod's uid (SPEC §5.11:
deleting it withdraws it; never a pod), and its own capacity reservations
(:data:`RESERVATION_PATH`)."""
RESERVE_PREFIX: Final = "rebalancer-reserve-"
"""The name of every PodTemplate and CapacityBuffer rebalancer creates (SPEC §5.10): the prefix,
then a short hex hash. Nothing else of those kinds is ever created or deleted."""
BUFFERS: Final = "/apis/autoscaling.x-k8s.io/v1beta1"
"""The CapacityBuffer API rebalancer reserves capacity through (``autoscaling.x-k8s.io``)."""
_RESERVATION_KINDS: Final = (
    r"(?:/api/v1/namespaces/[^/]+/podtemplates"
    r"|/apis/autoscaling\.x-k8s\.io/v1beta1/namespaces/[^/]+/capacitybuffers)"
)
_RESERVE_NAME: Final = rf"{RESERVE_PREFIX}[0-9a-f]{{1,32}}"
RESERVE_NAME: Final = re.compile(rf"^{_RESERVE_NAME}$")
RESERVATION_PATH: Final = re.compile(rf"^{_RESERVATION_KINDS}/{_RESERVE_NAME}$")
"""A PodTemplate or CapacityBuffer of rebalancer's own: the only other DELETE it sends."""
RESERVATION_COLLECTION: Final = re.compile(rf"^{_RESERVATION_KINDS}$")
"""Where a reservation is created: a POST there must name one of rebalancer's own."""
MERGE_PATCH: Final = "application/merge-patch+json"
PATCHED_ANNOTATIONS: Final = frozenset(
    {"controller.kubernetes.io/pod-deletion-cost", "rebalancer/deletion-cost"}
)
"""The only keys a PATCH may carry (under metadata.annotations, beside metadata.resourceVersion)."""
DEFAULT_CONNECT_TIMEOUT: Final = 5.0
DEFAULT_REQUEST_TIMEOUT: Final = 60.0
DEFAULT_TIMEOUT: Final = (DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT)
"""(connect, whole request) seconds."""
JSON: Final = "application/json"
STREAM_CHUNK: Final = 1 << 20
"""Bytes read at a time from a streamed LIST (:meth:`Kube.list_stream`)."""
MAX_BODY_BYTES: Final = 1024**3
"""The largest answer read whole (a page of a LIST, one namespace's pods); larger: an error."""
ERROR_BODY_BYTES: Final = 1 << 20
"""The largest error answer read (a Status is a few hundred bytes)."""
RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
StatusOf = Callable[[bytes], Mapping[str, Any] | None]
"""``status_of(body)``: an error answer in another encoding than JSON, as the JSON fields of its
``metav1.Status`` (None: not one); given by the caller that asked for that encoding."""


@dataclass(frozen=True, slots=True)
class Response:
    """An API answer as bytes; ``status`` is the HTTP status, whatever it is."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        """The body parsed as a JSON object; an empty dict when it is empty or not an object."""
        if not self.body:
            return {}
        try:
            value = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


class Kube:
    """A connection to one API server (:class:`~.transport.Endpoint`).

    Every method returns plain data. Connection failures raise :class:`errors.Unreachable`;
    error statuses raise an :class:`errors.ApiError` subclass, except :meth:`post_eviction`,
    which returns the status for the executor to interpret.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        source: str,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        warn_after: float = deadline.DEFAULT_WARN_AFTER,
        retry: RetryPolicy = GET_RETRY,
        sleep: Callable[[float], None] = deadline.pause,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        """``timeout`` is (connect seconds, whole-request seconds); a GET answered 429 or 5xx,
        or cut off, is sent again as ``retry`` says (:mod:`.retry`)."""
        self.endpoint = endpoint
        self._http = transport.Transport(endpoint)
        self.source = source
        self.max_body_bytes = max_body_bytes
        self.timeout = timeout
        self.retry = retry
        self._sleep = sleep
        self._log = logs.get_logger("rebalancer.kube")
        self._watchdog = deadline.Watchdog(warn_after=warn_after, on_slow=self._slow)

    def _slow(self, what: str, waited: float, limit: float) -> None:
        self._log.warning(
            logs.REQUEST_SLOW,
            request=what,
            waited_seconds=round(waited, 1),
            deadline_seconds=limit,
            server=self.server,
        )

    @property
    def server(self) -> str:
        return self.endpoint.server

    def close(self) -> None:
        self._http.close()

    # -- the single HTTP entry point -------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        accept: str = JSON,
    ) -> Response:
        """Send one request; returns any HTTP status, raises only when there is no answer.

        Retried as :attr:`retry` says: a GET answered 429 or 5xx or cut off, and any request
        that found no connection (nothing was sent) while the connect timeout lasts, which
        covers every try. Nothing else is retried here: the executor decides about evictions.
        """
        connect_by = [0.0]

        def once() -> Response:
            if not connect_by[0]:  # not a retry of a failed connection: a timeout of its own
                connect_by[0] = time.monotonic() + self.timeout[0]
            try:
                response = self._request_once(
                    method, path, connect_by[0], query=query, body=body, accept=accept
                )
            except errors.NotConnected as exc:
                if time.monotonic() < connect_by[0]:
                    raise
                raise errors.NotConnected(
                    f"cannot reach {self.server} ({method} {path}): no connection within "
                    f"{self.timeout[0]:g}s (--connect-timeout), every try included"
                ) from exc
            except errors.ClusterError:
                connect_by[0] = 0.0
                raise
            connect_by[0] = 0.0
            return response

        def again(answer: object) -> bool:
            if isinstance(answer, errors.NotConnected):  # nothing was sent
                return time.monotonic() < connect_by[0]
            if method != "GET":
                return False
            if isinstance(answer, Response):
                return answer.status in RETRY_STATUSES
            return isinstance(answer, errors.Unreachable) and not isinstance(
                answer, errors.DeadlineExceeded
            )

        result: Response = self._retrying(f"{method} {path}", again)(once)
        return result

    def _retrying(self, request: str, retry: Callable[[object], bool]) -> Any:
        """The tenacity controller of one request, each pause logged (``request.retry``)."""

        def told(answer: object, attempt: int, seconds: float) -> None:
            status = answer.status if isinstance(answer, Response | _Again) else None
            self._log.warning(
                logs.REQUEST_RETRY,
                request=request,
                status=status,
                error=None if status is not None else str(answer),
                attempt=attempt,
                sleep_seconds=seconds,
            )

        return retrying(
            self.retry,
            retry,
            sleep=self._sleep,
            clock=time.monotonic,
            retry_after=lambda answer: retry_after(getattr(answer, "headers", {})),
            on_pause=told,
        )

    def _request_once(
        self,
        method: str,
        path: str,
        connect_by: float,
        *,
        query: Sequence[tuple[str, str]],
        body: Mapping[str, Any] | None,
        accept: str,
    ) -> Response:
        if (
            method not in ALLOWED_METHODS
            or (method == "PUT" and not LEASE_PATH.match(path))
            or (
                method == "DELETE"
                and not (REQUEST_PATH.match(path) or RESERVATION_PATH.match(path))
            )
            or (
                method == "POST"
                and RESERVATION_COLLECTION.match(path) is not None
                and not _own_reservation(body)
            )
            or (method == "PATCH" and not (POD_PATH.match(path) and _cost_patch(body)))
        ):
            # Not an assert: this must hold with python -O too.
            raise ValueError(f"rebalancer never sends {method} {path}")
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = MERGE_PATCH if method == "PATCH" else JSON
        request_timeout = self.timeout[1]
        with self._watchdog.watch(f"{method} {path}", request_timeout) as watch:
            watch.connect_by = connect_by
            try:
                response = self._send(method, path, query, body, headers)
            except errors.ClusterError:
                if watch.aborted:  # cut by a stop (SIGTERM), not by the deadline
                    raise _abandoned(method, path) from None
                if watch.fired:
                    raise self._deadline(method, path) from None
                raise
            if watch.aborted:
                raise _abandoned(method, path)
            if watch.fired:  # the socket was cut: what came back may be cut short
                raise self._deadline(method, path)
            return response

    def _deadline(self, method: str, path: str) -> errors.DeadlineExceeded:
        return errors.DeadlineExceeded(
            f"no complete answer from {self.server} to {method} {path} within "
            f"{self.timeout[1]:g}s (--request-timeout)"
        )

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        body: Mapping[str, Any] | None,
        headers: dict[str, str],
    ) -> Response:
        try:
            payload = orjson.dumps(dict(body)) if body is not None else None
            raw = self._http.open(
                method, path, headers, timeout=self.timeout, query=query, body=payload
            )
            data = self._body(raw, f"{method} {path}")
            response_headers = {str(k): str(v) for k, v in raw.headers.items()}
        except transport.BROKEN as exc:
            cause = getattr(exc, "reason", None) or exc  # MaxRetryError wraps the real one
            if isinstance(cause, urllib3.exceptions.SSLError | ssl.SSLError):
                raise self._tls_failed(method, path, cause) from exc
            if isinstance(cause, urllib3.exceptions.ResponseError):  # a redirect: not followed
                raise errors.ClusterError(
                    f"{self.server} answered {method} {path} with a redirect, which rebalancer "
                    "does not follow: check the server URL in the kubeconfig (not retried)"
                ) from exc
            unreachable = (
                errors.NotConnected
                if isinstance(cause, urllib3.exceptions.ConnectTimeoutError)  # refused too
                else errors.Unreachable
            )
            raise unreachable(f"cannot reach {self.server} ({method} {path}): {cause}") from exc
        return Response(raw.status, data, response_headers)

    def _tls_failed(self, method: str, path: str, reason: object) -> errors.ClusterError:
        """A TLS failure (an untrusted or mismatched certificate, a client certificate the
        server refuses): not transient, so a cluster error that is not retried."""
        text = " ".join(str(reason).replace("SSLError\n", "").split())
        return errors.ClusterError(
            f"cannot reach {self.server} ({method} {path}): TLS failed: {text}; check the "
            "kubeconfig's certificate-authority(-data), tls-server-name and client "
            "certificate (not retried)"
        )

    def _body(
        self, response: urllib3.BaseHTTPResponse, request: str, limit: int | None = None
    ) -> bytes:
        """The whole body of a urllib3 response, read in chunks and refused past ``limit``
        bytes (default :attr:`max_body_bytes`): a server that answers without end never
        fills memory. The connection goes back to the pool only when the body was read."""
        cap = self.max_body_bytes if limit is None else limit
        parts: list[bytes] = []
        total = 0
        while chunk := response.read(STREAM_CHUNK):
            total += len(chunk)
            if total > cap:
                response.close()  # the rest must not reach the next request
                raise errors.ReadTooLarge(
                    f"the answer from {self.server} to {request} is larger than {cap} bytes"
                )
            parts.append(chunk)
        response.release_conn()
        return b"".join(parts)

    def _checked(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: str,
        namespace: str | None = None,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        accept: str = JSON,
        status_of: StatusOf | None = None,
    ) -> Response:
        response = self.request(method, path, query=query, body=body, accept=accept)
        if response.status >= 400:
            self._fail(response, status_of, verb=verb, resource=resource, namespace=namespace)
        return response

    @staticmethod
    def _fail(
        answer: Response | _Again,
        status_of: StatusOf | None,
        *,
        verb: str,
        resource: str,
        namespace: str | None,
    ) -> NoReturn:
        """Raise the error of an error answer (:func:`errors.for_status`), its body read as
        JSON, or by ``status_of`` when the caller asked for another encoding."""
        fields = status_of(answer.body) if status_of is not None else None
        if fields is None:
            fields = Response(answer.status, answer.body).json()
        raise errors.for_status(
            answer.status, fields, verb=verb, resource=resource, namespace=namespace
        )

    # -- reads -----------------------------------------------------------------------------

    def list_page(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        *,
        resource_version: str | None = None,
    ) -> bytes:
        """One page of a LIST as raw JSON bytes (the reader's transport); ``resource_version``
        as :meth:`list_page_as` takes it."""
        return self.list_page_as(
            resource,
            namespace,
            limit,
            continue_token,
            accept=JSON,
            resource_version=resource_version,
        )[1]

    def list_page_as(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        *,
        accept: str,
        status_of: StatusOf | None = None,
        resource_version: str | None = None,
    ) -> tuple[str, bytes]:
        """One page of a LIST asking for ``accept``: the answer's media type (its
        Content-Type without parameters) and its body, as sent. Deciding what to make of
        them is the reader's (:mod:`rebalancer.cluster.read.encoding`).

        ``resource_version``: the first page is asked for at exactly that version
        (``resourceVersionMatch=Exact``: served as the collection was then, or 410 Gone once
        etcd has compacted it); a continue page is not, its token carries the version (the
        API refuses both at once)."""
        spec = RESOURCES_BY_NAME[resource]
        query = [("limit", str(limit))]
        if continue_token:
            query.append(("continue", continue_token))
        elif resource_version:
            query += [("resourceVersion", resource_version), ("resourceVersionMatch", "Exact")]
        scoped = namespace if spec.namespaced else None
        response = self._checked(
            "GET",
            spec.path(scoped),
            verb="list",
            resource=spec.rbac_name,
            namespace=scoped,
            query=query,
            accept=accept,
            status_of=status_of,
        )
        return media_type(response.headers), response.body

    def list_stream(
        self,
        resource: str,
        namespace: str | None,
        *,
        accept: str,
        expect: str,
        status_of: StatusOf | None = None,
    ) -> Generator[bytes, None, None]:
        """One LIST without ``limit`` (and without resourceVersion: a consistent read, served
        from kube-apiserver's watch cache), asking for ``accept``; the body as it arrives, in
        chunks of :data:`STREAM_CHUNK` bytes (never held whole).

        Deadline: per chunk, not per answer. The answer's headers must come within the request
        deadline (``--request-timeout``) as for any request, and then each chunk within that
        deadline from the previous one (:meth:`.deadline.Watchdog.extend`): a stream that keeps
        coming is never cut, however long (150,000 pods are about 485 MB), one that stalls or
        trickles is cut within the deadline (:class:`errors.DeadlineExceeded`). The read
        deadline of the whole read (:class:`~rebalancer.cluster.read.reader.ReadDeadline`, growing
        with the objects read) is checked by the reader after each batch.

        An answer in another media type than ``expect`` (a server or proxy answering JSON)
        raises :class:`errors.UnexpectedMediaType` before its body is read; 429 and 5xx are
        retried as :meth:`request` does, other error statuses raise their
        :class:`errors.ApiError`. The connection is closed when the stream is left early."""
        spec = RESOURCES_BY_NAME[resource]
        scoped = namespace if spec.namespaced else None
        path = spec.path(scoped)
        try:
            for attempt in self._retrying(f"GET {path}", _is_again):
                with attempt:
                    error = yield from self._stream_once(path, accept, expect)
                    if error is not None:
                        raise error
        except _Again as last:  # not to retry, or retries spent: its error
            self._fail(last, status_of, verb="list", resource=spec.rbac_name, namespace=scoped)

    def _stream_once(
        self, path: str, accept: str, expect: str
    ) -> Generator[bytes, None, _Again | None]:
        """One try of :meth:`list_stream`: yields the chunks and returns None, or returns the
        error answer (not yielding anything)."""
        limit = self.timeout[1]
        with self._watchdog.watch(f"GET {path} (stream)", limit) as watch:
            watch.connect_by = time.monotonic() + self.timeout[0]
            response = None
            finished = False
            try:
                response = self._http.open("GET", path, {"Accept": accept}, timeout=self.timeout)
                status = int(response.status)
                headers = {str(k): str(v) for k, v in response.headers.items()}
                if status >= 400:
                    body = self._body(response, f"GET {path}", ERROR_BODY_BYTES)
                    return _Again(status, body, headers)
                answered = media_type(headers)
                if answered != expect:
                    raise errors.UnexpectedMediaType(
                        f"GET {path}: answered {answered or '(none)'}, not {expect}"
                    )
                while chunk := response.read(STREAM_CHUNK):
                    if watch.fired:
                        break
                    self._watchdog.extend(watch, limit)
                    yield chunk
                if watch.fired:  # a cut socket reads as the end of the body
                    raise self._stream_stalled(path)
                finished = True
                return None
            except transport.BROKEN as exc:
                # The socket's read timeout (the same seconds, per recv) may beat the watchdog.
                if watch.fired or isinstance(
                    exc, urllib3.exceptions.ReadTimeoutError | TimeoutError
                ):
                    raise self._stream_stalled(path) from None
                cause = getattr(exc, "reason", None) or exc
                raise errors.Unreachable(
                    f"cannot reach {self.server} (LIST {path}): {cause}"
                ) from exc
            finally:
                if response is not None:
                    if finished:
                        response.release_conn()
                    else:  # left early: the rest must not reach the next request
                        response.close()

    def _stream_stalled(self, path: str) -> errors.DeadlineExceeded:
        return errors.DeadlineExceeded(
            f"the answer from {self.server} to GET {path} stalled: no {STREAM_CHUNK >> 20} MiB "
            f"within {self.timeout[1]:g}s (--request-timeout)"
        )

    def watch_lines(
        self,
        resource: str,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int,
    ) -> Iterator[bytes]:
        """A WATCH from ``resource_version``: its events as they arrive, one JSON line each.

        Bookmarks are asked for. The server ends the watch after ``timeout_seconds``; an error
        status raises an :class:`errors.ApiError` subclass (410: :class:`errors.Gone`) before
        the first line, a broken connection :class:`errors.Unreachable` while reading.
        """
        spec = RESOURCES_BY_NAME[resource]
        scoped = namespace if spec.namespaced else None
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        path = spec.path(scoped)
        try:
            response = self._http.open(
                "GET",
                path,
                {"Accept": JSON},
                timeout=(self.timeout[0], timeout_seconds + self.timeout[1]),
                query=query,
            )
        except transport.BROKEN as exc:
            cause = getattr(exc, "reason", None) or exc
            raise errors.Unreachable(f"cannot reach {self.server} (WATCH {path}): {cause}") from exc
        if int(response.status) >= 400:
            body = self._body(response, f"WATCH {path}", ERROR_BODY_BYTES)
            self._fail(
                Response(int(response.status), body),
                None,
                verb="watch",
                resource=spec.rbac_name,
                namespace=scoped,
            )
        return self._lines(response, path)

    def _lines(self, response: urllib3.BaseHTTPResponse, path: str) -> Iterator[bytes]:
        """The lines of a streamed answer; the connection is released at the end."""
        pending = b""
        finished = False
        try:
            for chunk in response.stream(65536, decode_content=True):
                pending += chunk
                if b"\n" not in chunk:
                    continue
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line
            if pending.strip():
                yield pending
            finished = True
        except transport.BROKEN as exc:
            raise errors.Unreachable(f"WATCH {path} broke off: {exc}") from exc
        finally:
            if finished:
                response.release_conn()
            else:  # left early: the rest of the stream must not reach the next request
                response.close()

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as JSON, or None when it does not exist."""
        path = f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}"
        return self._get(path, resource="pods", namespace=namespace)

    def get_node(self, name: str) -> dict[str, Any] | None:
        """The node as JSON, or None when it does not exist."""
        return self._get(f"/api/v1/nodes/{_seg(name)}", resource="nodes")

    def get_pdb(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The PodDisruptionBudget as JSON, or None when it does not exist."""
        path = f"/apis/policy/v1/namespaces/{_seg(namespace)}/poddisruptionbudgets/{_seg(name)}"
        return self._get(path, resource="poddisruptionbudgets.policy", namespace=namespace)

    def get_owner(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        """The apps/v1 ReplicaSet or StatefulSet that owns an evicted pod, or None when it does
        not exist (the executor reads its ``spec.replicas``: is a replacement still coming?).
        Any other error raises, a 403 as :class:`errors.Forbidden`. Other kinds: ValueError."""
        spec = _OWNERS.get(kind)
        if spec is None:
            # Not an assert: this must hold with python -O too.
            raise ValueError(f"rebalancer reads no owner of kind {kind!r}")
        path = f"{spec.path(_seg(namespace))}/{_seg(name)}"
        return self._get(path, resource=spec.rbac_name, namespace=namespace)

    def _get(
        self, path: str, *, resource: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        response = self.request("GET", path)
        if response.status == 404:
            return None
        if response.status >= 400:
            self._fail(response, None, verb="get", resource=resource, namespace=namespace)
        return response.json()

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """All pods of a namespace matching ``label_selector`` (one unpaginated LIST)."""
        query = [("labelSelector", label_selector)] if label_selector else []
        body = self._checked(
            "GET",
            f"/api/v1/namespaces/{_seg(namespace)}/pods",
            verb="list",
            resource="pods",
            namespace=namespace,
            query=query,
        ).json()
        items = body.get("items") or []
        return [item for item in items if isinstance(item, dict)]

    # -- writes ----------------------------------------------------------------------------

    def post_eviction(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """POST a policy/v1 Eviction; returns (status, body) for the executor to interpret.

        A ``dryRun`` in the body's deleteOptions is also sent as the query parameter, so the
        API server (and its audit log) treat the whole request as a dry run.
        """
        options = body.get("deleteOptions") or {}
        query = [("dryRun", "All")] if options.get("dryRun") else []
        response = self.request(
            "POST",
            f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}/eviction",
            query=query,
            body=body,
        )
        answer = response.json() if response.status == 403 else None
        if response.status == 401 or (answer is not None and not errors.budget_forbidden(answer)):
            self._fail(response, None, verb="create", resource="pods/eviction", namespace=namespace)
        answer = response.json()
        wait = retry_after(response.headers)
        if response.status == 429 and wait is not None:
            # The executor reads details.retryAfterSeconds; a header without it counts too.
            details = answer.get("details")
            if not isinstance(details, dict):
                details = answer["details"] = {}
            details.setdefault("retryAfterSeconds", wait)
        return response.status, answer

    # -- EvictionRequests (lifecycle.k8s.io/v1alpha1, KEP-4563) -------------------------------

    def create_eviction_request(
        self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """POST an EvictionRequest; (status, body) for the caller to interpret (409: one of
        that name exists). 401 and 403 raise, as RBAC's denial."""
        response = self.request(
            "POST",
            f"{_REQUESTS}/namespaces/{_seg(namespace)}/evictionrequests",
            query=[("dryRun", "All")] if dry_run else [],
            body=body,
        )
        if response.status in (401, 403):
            self._fail(response, None, verb="create", resource=_ER, namespace=namespace)
        return response.status, response.json() if response.body else {}

    def get_eviction_request(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The EvictionRequest, or None when it does not exist."""
        path = f"{_REQUESTS}/namespaces/{_seg(namespace)}/evictionrequests/{_seg(name)}"
        return self._get(path, resource=_ER, namespace=namespace)

    def delete_eviction_request(self, namespace: str, name: str) -> int:
        """DELETE rebalancer's own EvictionRequest (its withdrawal); the HTTP status (404: gone
        already). Nothing else is ever deleted."""
        path = f"{_REQUESTS}/namespaces/{_seg(namespace)}/evictionrequests/{_seg(name)}"
        response = self.request("DELETE", path)
        if response.status >= 400 and response.status != 404:
            self._fail(response, None, verb="delete", resource=_ER, namespace=namespace)
        return response.status

    def list_evictions(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """The Evictions (lifecycle.k8s.io/v1alpha1) of a namespace matching the selector."""
        query = [("labelSelector", label_selector)] if label_selector else []
        body = self._checked(
            "GET",
            f"{_REQUESTS}/namespaces/{_seg(namespace)}/evictions",
            verb="list",
            resource="evictions.lifecycle.k8s.io",
            namespace=namespace,
            query=query,
        ).json()
        return [item for item in body.get("items") or [] if isinstance(item, dict)]

    # -- capacity reservations (SPEC §5.10): PodTemplates and CapacityBuffers ---------------

    def create_reservation(
        self, kind: str, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """POST one of rebalancer's own PodTemplates or CapacityBuffers (``kind``:
        ``podtemplates``, ``capacitybuffers``); (status, body) for the caller to interpret.
        401 and 403 raise, as RBAC's denial."""
        path, rbac = _reservation_path(kind, namespace)
        response = self.request(
            "POST", path, query=[("dryRun", "All")] if dry_run else [], body=body
        )
        if response.status in (401, 403):
            self._fail(response, None, verb="create", resource=rbac, namespace=namespace)
        return response.status, response.json() if response.body else {}

    def get_capacity_buffer(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The CapacityBuffer (its status says how its provisioning goes), or None."""
        path, rbac = _reservation_path("capacitybuffers", namespace)
        return self._get(f"{path}/{_seg(name)}", resource=rbac, namespace=namespace)

    def list_reservations(
        self, kind: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]:
        """The PodTemplates or CapacityBuffers matching ``label_selector``, in ``namespace``
        or (None) in every namespace; none when the API is not served (404)."""
        path, rbac = _reservation_path(kind, namespace)
        response = self.request("GET", path, query=[("labelSelector", label_selector)])
        if response.status == 404:
            return []
        if response.status >= 400:
            self._fail(response, None, verb="list", resource=rbac, namespace=namespace)
        return [item for item in response.json().get("items") or [] if isinstance(item, dict)]

    def delete_reservation(self, kind: str, namespace: str, name: str) -> int:
        """DELETE one of rebalancer's own PodTemplates or CapacityBuffers (``rebalancer-
        reserve-...``; nothing else can be sent); the HTTP status (404: gone already)."""
        path, rbac = _reservation_path(kind, namespace)
        response = self.request("DELETE", f"{path}/{_seg(name)}")
        if response.status >= 400 and response.status != 404:
            self._fail(response, None, verb="delete", resource=rbac, namespace=namespace)
        return response.status

    def list_nodes(self, label_selector: str) -> list[dict[str, Any]]:
        """The nodes matching ``label_selector`` (one unpaginated LIST: a pool's nodes in a
        zone)."""
        body = self._checked(
            "GET",
            "/api/v1/nodes",
            verb="list",
            resource="nodes",
            query=[("labelSelector", label_selector)],
        ).json()
        return [item for item in body.get("items") or [] if isinstance(item, dict)]

    def list_pods_on_node(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to ``node``, in every namespace (what takes its room)."""
        body = self._checked(
            "GET",
            "/api/v1/pods",
            verb="list",
            resource="pods",
            query=[("fieldSelector", f"spec.nodeName={node}")],
        ).json()
        return [item for item in body.get("items") or [] if isinstance(item, dict)]

    def patch_pod_cost(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """A JSON merge patch of a pod's deletion cost (and rebalancer's mark of it), with the
        pod's resourceVersion in the body as the precondition; returns (status, body) for the
        caller to interpret (409: the pod changed since it was read). Nothing else of a pod
        can be sent (:func:`_cost_patch`)."""
        response = self.request(
            "PATCH", f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}", body=body
        )
        return response.status, response.json() if response.body else {}

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        """Create a core/v1 Event."""
        self._checked(
            "POST",
            f"/api/v1/namespaces/{_seg(namespace)}/events",
            verb="create",
            resource="events",
            namespace=namespace,
            body=body,
        )

    # -- the Lease (one rebalancer evicting at a time) ---------------------------------------

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The coordination.k8s.io/v1 Lease, or None when it does not exist."""
        return self._get(_lease_path(namespace, name), resource=_LEASES, namespace=namespace)

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create the Lease; :class:`errors.Conflict` (409) when it exists already."""
        return self._checked(
            "POST",
            f"/apis/coordination.k8s.io/v1/namespaces/{_seg(namespace)}/leases",
            verb="create",
            resource=_LEASES,
            namespace=namespace,
            body=body,
        ).json()

    def update_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the Lease (PUT); the body's resourceVersion makes it fail with
        :class:`errors.Conflict` (409) when someone else wrote it first."""
        return self._checked(
            "PUT",
            _lease_path(namespace, name),
            verb="update",
            resource=_LEASES,
            namespace=namespace,
            body=body,
        ).json()

    def can_i(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str | None = None,
        name: str = "",
    ) -> tuple[bool, str]:
        """Ask the API server (SelfSubjectAccessReview) whether we may do this; (allowed, why).

        ``name``: about that one object (a Role may grant a verb on named objects only)."""
        attributes: dict[str, str] = {"verb": verb, "resource": resource, "group": group}
        if subresource:
            attributes["subresource"] = subresource
        if namespace:
            attributes["namespace"] = namespace
        if name:
            attributes["name"] = name
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        answer = self._checked(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            verb="create",
            resource="selfsubjectaccessreviews.authorization.k8s.io",
            body=review,
        ).json()
        return review_answer(answer)  # strictly: only true allows


_LEASES: Final = "leases.coordination.k8s.io"
_REQUESTS: Final = "/apis/lifecycle.k8s.io/v1alpha1"
_ER: Final = "evictionrequests.lifecycle.k8s.io"
_OWNERS: Final = {
    r.kind: r for r in (RESOURCES_BY_NAME["replicasets"], RESOURCES_BY_NAME["statefulsets"])
}
"""The owners :meth:`Kube.get_owner` reads, by kind."""


def _cost_patch(body: Mapping[str, Any] | None) -> bool:
    """Whether ``body`` is a merge patch of nothing but the deletion cost and its mark, with a
    resourceVersion precondition: ``{"metadata": {"resourceVersion": ..., "annotations":
    {...}}}``, values strings or null."""
    if body is None or set(body) != {"metadata"}:
        return False
    meta = body["metadata"]
    if not isinstance(meta, Mapping) or set(meta) != {"resourceVersion", "annotations"}:
        return False
    annotations = meta["annotations"]
    return (
        isinstance(meta["resourceVersion"], str)
        and bool(meta["resourceVersion"])
        and isinstance(annotations, Mapping)
        and bool(annotations)
        and set(annotations) <= PATCHED_ANNOTATIONS
        and all(v is None or isinstance(v, str) for v in annotations.values())
    )


def _own_reservation(body: Mapping[str, Any] | None) -> bool:
    """Whether ``body`` names one of rebalancer's own reservations (:data:`RESERVE_PREFIX`)."""
    meta = body.get("metadata") if body is not None else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return isinstance(name, str) and RESERVE_NAME.match(name) is not None


def _reservation_path(kind: str, namespace: str | None) -> tuple[str, str]:
    """The collection of ``kind`` (``podtemplates`` or ``capacitybuffers``) in ``namespace``
    (None: every namespace), and its RBAC name."""
    if kind == "podtemplates":
        base, rbac = "/api/v1", "podtemplates"
    elif kind == "capacitybuffers":
        base, rbac = BUFFERS, "capacitybuffers.autoscaling.x-k8s.io"
    else:
        # Not an assert: this must hold with python -O too.
        raise ValueError(f"rebalancer reserves nothing of kind {kind!r}")
    scoped = f"/namespaces/{_seg(namespace)}" if namespace is not None else ""
    return f"{base}{scoped}/{kind}", rbac


def _lease_path(namespace: str, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{_seg(namespace)}/leases/{_seg(name)}"


class _Again(Exception):
    """An error answer to a streamed LIST: retried when its status is one to retry."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers


def _abandoned(method: str, path: str) -> deadline.Stopped:
    return deadline.Stopped(f"stopping: {method} {path} abandoned in flight", abandoned=True)


def _is_again(answer: object) -> bool:
    return isinstance(answer, _Again) and answer.status in RETRY_STATUSES


def media_type(headers: Mapping[str, str]) -> str:
    """The Content-Type of an answer without its parameters (empty when there is none)."""
    value = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return value.split(";", maxsplit=1)[0].strip()


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The Retry-After header in seconds (the API server sends whole seconds), or None."""
    for key, value in headers.items():
        if key.lower() == "retry-after":
            try:
                seconds = float(value)
            except ValueError:
                return None
            return seconds if seconds >= 0 else None
    return None


def _seg(value: str) -> str:
    """One URL path segment, escaped."""
    return quote(value, safe="")


def _load_kubeconfig(
    files: str, context: str | None, configuration: Any, plugin_timeout: float
) -> tuple[str, str]:
    """Load the kubeconfig(s) into ``configuration`` as the client does, except that an exec
    credential plugin is run here (:mod:`.execplugin`: under ``plugin_timeout``, bounded,
    redacted) and what it gives is handed to the client as a static credential. Returns the
    user and cluster entries in use, as error messages name them."""
    merged = kube_config.KubeConfigMerger(files)  # type: ignore[no-untyped-call]  # untyped client
    if merged.config is None:
        raise ConfigException("no configuration found")
    user = credentials.active_user(merged.config.value, context)
    plugin = credentials.exec_plugin(user) if user is not None else None
    credential = None
    if user is not None and plugin is not None:
        credential = plugin.run(plugin_timeout)
        replaced = credentials.with_credential(user.entry, credential)
        user.entry.clear()  # the very mapping the client's loader reads
        user.entry.update(replaced)
    loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]  # untyped client
        config_dict=merged.config, active_context=context, config_base_path=None
    )
    loader.load_and_set(configuration)  # type: ignore[no-untyped-call]  # untyped client
    if plugin is not None and credential is not None:
        credentials.refreshing(configuration, plugin, credential, plugin_timeout)
    if user is None:
        return "the user", "the cluster"
    return f"users[{user.name}]", f"clusters[{user.cluster_name}]"


def _endpoint(configuration: Any) -> Endpoint:
    """What the client's ``Configuration`` found, as plain values; the Authorization header
    is asked of it at each request (its refresh hook renews an exec plugin's token, re-reads
    the service account's)."""
    host = str(configuration.host)
    proxy = configuration.proxy or None
    if proxy and should_bypass_proxies(host, configuration.no_proxy or ""):
        proxy = None
    if proxy and proxy.lower().startswith("socks"):
        raise errors.ClusterError(
            f"cannot reach {host}: the proxy {redact.redact(proxy)} is a SOCKS proxy, which "
            "rebalancer does not support (an HTTP or HTTPS proxy-url works)"
        )
    return Endpoint(
        server=host,
        ca_file=configuration.ssl_ca_cert or None,
        cert_file=configuration.cert_file or None,
        key_file=configuration.key_file or None,
        verify=bool(configuration.verify_ssl),
        server_name=configuration.tls_server_name or None,
        proxy=proxy,
        authorization=partial(credentials.authorization, configuration),
    )


def _check_tls_files(endpoint: Endpoint, source: str, entries: tuple[str, str]) -> None:
    """A client certificate and key, or a CA bundle, that TLS cannot load: a cluster error
    (exit 3) naming the kubeconfig fields, now, rather than on every request."""
    user, cluster = entries
    context = ssl.create_default_context()
    cert, key, ca = endpoint.cert_file, endpoint.key_file, endpoint.ca_file
    try:
        if cert:
            context.load_cert_chain(cert, key or None)
    except (ssl.SSLError, OSError) as exc:
        raise errors.ClusterError(
            f"cannot load cluster credentials from {source}: {user}.user.client-certificate"
            f"(-data) and client-key(-data) are not a PEM certificate and its key ({exc})"
        ) from exc
    try:
        if ca:
            context.load_verify_locations(ca)
    except (ssl.SSLError, OSError) as exc:
        raise errors.ClusterError(
            f"cannot load cluster credentials from {source}: {cluster}.cluster."
            f"certificate-authority(-data) is not a PEM certificate ({exc})"
        ) from exc


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    warn_after: float = deadline.DEFAULT_WARN_AFTER,
) -> Kube:
    """Build a :class:`Kube` from the flags, ``$KUBECONFIG`` or the in-cluster service account.

    Raises :class:`errors.ClusterError` when no usable configuration is found.
    """
    env = os.environ if env is None else env
    configuration = client.Configuration()
    entries = ("the service account", "the cluster")
    if kubeconfig:
        files, source = kubeconfig, f"kubeconfig {kubeconfig}"
    elif env.get("KUBECONFIG"):
        files, source = env["KUBECONFIG"], f"$KUBECONFIG {env['KUBECONFIG']}"
    elif env.get("KUBERNETES_SERVICE_HOST") and not context:
        files, source = "", "in-cluster service account"
    else:
        files = str(Path("~/.kube/config").expanduser())
        source = f"kubeconfig {files}"
    try:
        if files:
            check_kubeconfig(files)  # too large, too deep or not YAML: exit 2, named
            entries = _load_kubeconfig(files, context, configuration, timeout[0])
        else:
            config.load_incluster_config(  # type: ignore[no-untyped-call]  # untyped client
                client_configuration=configuration
            )
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        if files and not isinstance(exc, OSError):  # what the file says is wrong: bad input
            raise InputError(source, [f"cannot load cluster credentials: {exc}"]) from exc
        raise errors.ClusterError(f"cannot load cluster credentials: {exc}") from exc
    credentials.tidy(configuration)
    endpoint = _endpoint(configuration)
    _check_tls_files(endpoint, source, entries)
    if not endpoint.verify:
        # Said once here; urllib3 would warn on every request, outside the log.
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        logs.get_logger("rebalancer.kube").warning(
            logs.TLS_INSECURE,
            server=endpoint.server,
            detail="insecure-skip-tls-verify: the server's certificate is not checked",
        )
    return Kube(endpoint, source=source, timeout=timeout, warn_after=warn_after)
