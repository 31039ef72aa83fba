"""Errors about the cluster: unreachable, RBAC denied, or an API error status.

The API adapter (:mod:`rebalancer.cluster.api.kubeclient`) wraps every client-library failure in one
of these, so nothing above it sees the client's own exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rebalancer.core.api import EXIT_CLUSTER, RebalancerError


class ClusterError(RebalancerError):
    """The cluster is unreachable, or RBAC denied a request (names the verb and resource)."""

    exit_code = EXIT_CLUSTER


class Unreachable(ClusterError):
    """The API server could not be reached: connection refused, DNS, TLS or a timeout."""


class NotConnected(Unreachable):
    """No connection could be made: nothing was sent, so any request may be tried again."""


class DeadlineExceeded(Unreachable):
    """A request, or the whole read of the cluster, got no complete answer in time."""


class ReadTooLarge(ClusterError):
    """A read of the cluster took in more objects or bytes than its limits allow."""


class UnexpectedMediaType(ClusterError):
    """The answer came in another encoding than the one its reader takes."""


class LeaseError(ClusterError):
    """The Lease that lets one rebalancer evict at a time could not be taken or kept."""


class LeaseLost(LeaseError):
    """Another holder took the Lease, or it could not be renewed before it expired."""


class ApiError(ClusterError):
    """The API server answered a request with an error status.

    ``verb`` and ``resource`` name the request the way RBAC does (``create``, ``pods/eviction``),
    so a message can say exactly what was refused.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        verb: str = "",
        resource: str = "",
        namespace: str | None = None,
        reason: str = "",
    ) -> None:
        self.status = status
        self.message = message
        self.verb = verb
        self.resource = resource
        self.namespace = namespace
        self.reason = reason
        super().__init__(self._describe())

    @property
    def scope(self) -> str:
        return f"in namespace {self.namespace}" if self.namespace else "cluster-wide"

    def _describe(self) -> str:
        what = f"{self.verb} {self.resource} ({self.scope})" if self.verb else self.resource
        return f"API error {self.status} on {what}: {self.message}"


class ClientError(ApiError):
    """A 4xx answer: the request itself was refused."""


class Unauthorized(ClientError):
    """401: the credentials were not accepted."""

    def _describe(self) -> str:
        return f"unauthorized (401): the API server rejected the credentials: {self.message}"


class Forbidden(ClientError):
    """403: RBAC denied the request; the message names the verb and resource."""

    def _describe(self) -> str:
        return f"RBAC: cannot {self.verb} {self.resource} ({self.scope}): {self.message}"


class NotFound(ClientError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ClientError):
    """409: the object changed (e.g. a uid precondition failed)."""


class Gone(ClientError):
    """410: a list's continue token expired; the list must start again."""


class TooManyRequests(ClientError):
    """429: throttled, or, for an eviction, a PodDisruptionBudget forbids it now."""


class ServerError(ApiError):
    """A 5xx answer."""


BY_STATUS: Final[Mapping[int, type[ApiError]]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    429: TooManyRequests,
}
"""The error of each status with its own; other 4xx are :class:`ClientError`, 5xx
:class:`ServerError`."""


def for_status(
    status: int,
    body: Mapping[str, Any],
    *,
    verb: str,
    resource: str,
    namespace: str | None = None,
) -> ApiError:
    """The error for an error status and its ``metav1.Status`` body, naming the request."""
    message = body.get("message")
    text = message if isinstance(message, str) and message else f"HTTP {status}"
    kind = BY_STATUS.get(status) or (ServerError if status >= 500 else ClientError)
    reason = str(body.get("reason", ""))
    return kind(status, text, verb=verb, resource=resource, namespace=namespace, reason=reason)


DISRUPTION_BUDGET: Final = "DisruptionBudget"
"""``details.causes[].reason`` of an eviction a PodDisruptionBudget refused (policy/v1
``DisruptionBudgetCause``)."""


def budget_causes(body: Mapping[str, Any]) -> list[str]:
    """The messages of a Status's ``DisruptionBudget`` causes (one each; "" when it has none)."""
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    if not isinstance(causes, list):
        return []
    return [
        str(c.get("message") or "")
        for c in causes
        if isinstance(c, Mapping) and c.get("reason") == DISRUPTION_BUDGET
    ]


def budget_forbidden(body: Mapping[str, Any]) -> bool:
    """Whether a 403 answer to an eviction is a PodDisruptionBudget's refusal, not RBAC's: from
    1.37 it carries a ``DisruptionBudget`` cause; before, its details name the budget
    (``poddisruptionbudget.policy "NAME" is forbidden``), where an RBAC denial names pods."""
    if budget_causes(body):
        return True
    details = body.get("details")
    return (
        isinstance(details, Mapping)
        and details.get("group") == "policy"
        and details.get("kind") == "poddisruptionbudget"
    )
