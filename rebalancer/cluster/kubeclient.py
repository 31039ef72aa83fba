"""The one place that builds the ``kubernetes`` client and talks HTTP to the API server.

Everything above this module sees plain dicts and bytes, and rebalancer's own errors
(:mod:`rebalancer.core.errors`); no client object or client exception leaks out. Requests go through
:meth:`Kube.request`, which only knows GET and POST: rebalancer never deletes anything, and this
module makes a pod DELETE impossible to issue by mistake.

Credentials, in order: ``--kubeconfig`` (with ``--context``), else ``$KUBECONFIG``, else the
in-cluster service account when ``$KUBERNETES_SERVICE_HOST`` is set, else ``~/.kube/config``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from rebalancer import __version__
from rebalancer.cluster import errors
from rebalancer.cluster.resources import RESOURCES_BY_NAME

ALLOWED_METHODS: Final = frozenset({"GET", "POST"})
DEFAULT_TIMEOUT: Final = (5.0, 60.0)  # (connect, read) seconds
JSON: Final = "application/json"


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


def status_message(body: Mapping[str, Any], fallback: str = "") -> str:
    """The ``message`` of a ``metav1.Status`` body, or ``fallback``."""
    message = body.get("message")
    return message if isinstance(message, str) and message else fallback


def api_error(
    status: int,
    body: Mapping[str, Any],
    *,
    verb: str,
    resource: str,
    namespace: str | None = None,
) -> errors.ApiError:
    """The rebalancer error for an error status, naming the verb and resource requested."""
    message = status_message(body, f"HTTP {status}")
    reason = str(body.get("reason", ""))
    kinds: dict[int, type[errors.ApiError]] = {
        401: errors.Unauthorized,
        403: errors.Forbidden,
        404: errors.NotFound,
        409: errors.Conflict,
        410: errors.Gone,
        429: errors.TooManyRequests,
    }
    kind = kinds.get(status)
    if kind is None:
        kind = errors.ServerError if status >= 500 else errors.ClientError
    return kind(status, message, verb=verb, resource=resource, namespace=namespace, reason=reason)


class Kube:
    """A connection to one API server; wraps a ``kubernetes.client.ApiClient``.

    Every method returns plain data. Connection failures raise :class:`errors.Unreachable`;
    error statuses raise an :class:`errors.ApiError` subclass, except :meth:`post_eviction`,
    which returns the status for the executor to interpret.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        source: str,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        self._api = api_client
        self.source = source
        self.timeout = timeout

    @property
    def server(self) -> str:
        return str(self._api.configuration.host)

    def close(self) -> None:
        self._api.close()

    # -- the single HTTP entry point -------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
    ) -> Response:
        """Send one request; returns any HTTP status, raises only when there is no answer."""
        if method not in ALLOWED_METHODS:
            # Not an assert: this must hold with python -O too.
            raise ValueError(f"rebalancer never sends {method} requests")
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = JSON
        try:
            _, url, headers, _, _ = self._api.param_serialize(
                method,
                path,
                query_params=list(query) or None,
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            raw = self._api.call_api(
                method,
                url,
                header_params=headers,
                body=dict(body) if body is not None else None,
                _request_timeout=self.timeout,
            )
            data = raw.read()
            status = int(raw.status)
            response_headers = {str(k): str(v) for k, v in (raw.getheaders() or {}).items()}
        except ApiException as exc:  # raised for TLS errors, with status 0
            if exc.status:
                text = exc.body if isinstance(exc.body, bytes) else str(exc.body or "").encode()
                return Response(int(exc.status), text, {})
            raise errors.Unreachable(f"cannot reach {self.server}: {exc.reason}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            cause = getattr(exc, "reason", None) or exc  # MaxRetryError wraps the real one
            raise errors.Unreachable(
                f"cannot reach {self.server} ({method} {path}): {cause}"
            ) from exc
        return Response(status, data or b"", response_headers)

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
    ) -> Response:
        response = self.request(method, path, query=query, body=body)
        if response.status >= 400:
            raise api_error(
                response.status,
                response.json(),
                verb=verb,
                resource=resource,
                namespace=namespace,
            )
        return response

    # -- reads -----------------------------------------------------------------------------

    def list_page(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
    ) -> bytes:
        """One page of a LIST as raw JSON bytes (the reader's transport)."""
        spec = RESOURCES_BY_NAME[resource]
        query = [("limit", str(limit))]
        if continue_token:
            query.append(("continue", continue_token))
        scoped = namespace if spec.namespaced else None
        return self._checked(
            "GET",
            spec.path(scoped),
            verb="list",
            resource=spec.rbac_name,
            namespace=scoped,
            query=query,
        ).body

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

    def _get(
        self, path: str, *, resource: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        response = self.request("GET", path)
        if response.status == 404:
            return None
        if response.status >= 400:
            raise api_error(
                response.status,
                response.json(),
                verb="get",
                resource=resource,
                namespace=namespace,
            )
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
        if response.status in (401, 403):
            raise api_error(
                response.status,
                response.json(),
                verb="create",
                resource="pods/eviction",
                namespace=namespace,
            )
        return response.status, response.json()

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

    def can_i(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str | None = None,
    ) -> tuple[bool, str]:
        """Ask the API server (SelfSubjectAccessReview) whether we may do this; (allowed, why)."""
        attributes: dict[str, str] = {"verb": verb, "resource": resource, "group": group}
        if subresource:
            attributes["subresource"] = subresource
        if namespace:
            attributes["namespace"] = namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        status = (
            self._checked(
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                verb="create",
                resource="selfsubjectaccessreviews.authorization.k8s.io",
                body=review,
            )
            .json()
            .get("status", {})
        )
        why = str(status.get("reason") or status.get("evaluationError") or "")
        return bool(status.get("allowed")), why


def _seg(value: str) -> str:
    """One URL path segment, escaped."""
    return quote(value, safe="")


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    timeout: tuple[float, float] = DEFAULT_TIMEOUT,
) -> Kube:
    """Build a :class:`Kube` from the flags, ``$KUBECONFIG`` or the in-cluster service account.

    Raises :class:`errors.ClusterError` when no usable configuration is found.
    """
    env = os.environ if env is None else env
    configuration = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped client
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
            source = f"kubeconfig {kubeconfig}"
        elif env.get("KUBECONFIG"):
            config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped client
                config_file=env["KUBECONFIG"],
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
            source = f"$KUBECONFIG {env['KUBECONFIG']}"
        elif env.get("KUBERNETES_SERVICE_HOST") and not context:
            config.load_incluster_config(  # type: ignore[no-untyped-call]  # untyped client
                client_configuration=configuration
            )
            source = "in-cluster service account"
        else:
            default = Path("~/.kube/config").expanduser()
            config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped client
                config_file=str(default),
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
            source = f"kubeconfig {default}"
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        raise errors.ClusterError(f"cannot load cluster credentials: {exc}") from exc
    api = client.ApiClient(configuration)
    api.user_agent = f"rebalancer/{__version__}"
    return Kube(api, source=source, timeout=timeout)
