"""rebalancer's own error tree. Exit codes are part of the CLI contract (see README)."""

from __future__ import annotations

from collections.abc import Sequence

EXIT_OK = 0
EXIT_EVICTIONS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CLUSTER = 3


class RebalancerError(Exception):
    """Base of every error rebalancer raises on purpose."""

    exit_code = EXIT_BAD_INPUT


class InputError(RebalancerError):
    """Bad input: a policy, snapshot or API object. Reports every problem found, each with a path.

    Nothing is ever written to the cluster after one of these.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s):\n{lines}")


class ClusterError(RebalancerError):
    """The cluster is unreachable, or RBAC denied a request (names the verb and resource)."""

    exit_code = EXIT_CLUSTER


class Unreachable(ClusterError):
    """The API server could not be reached: connection refused, DNS, TLS or a timeout."""


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
