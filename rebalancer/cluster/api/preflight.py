"""The RBAC pre-flight of ``run``: before it reads or evicts anything, ask the API server
(SelfSubjectAccessReviews) for every permission the run will use, and fail on the first one
denied (exit 3, naming the verb, the resource and the namespace); an optional one only warns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from rebalancer.cluster import logs
from rebalancer.cluster.api import errors


class Access(Protocol):
    """What the pre-flight asks of the API (:meth:`rebalancer.cluster.api.kubeclient.Kube.can_i`,
    which reads the answer with :func:`review_answer`)."""

    def can_i(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str | None = None,
        name: str = "",
    ) -> tuple[bool, str]: ...


@dataclass(frozen=True, slots=True)
class Check:
    """One RBAC permission a run needs, as a SelfSubjectAccessReview asks it."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    required: bool = True
    in_lease_namespace: bool = False  # asked in the Lease's namespace, not the run's
    about_the_lease: bool = False  # asked about the Lease by name (Roles may name it)

    @property
    def name(self) -> str:
        base = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{base}/{self.subresource}" if self.subresource else base


RUN_CHECKS: Final = (
    Check("create", "pods", subresource="eviction"),
    Check("get", "pods"),
    Check("list", "pods"),
    Check("get", "nodes"),
    Check("list", "nodes"),
    Check("create", "events", required=False),
    # Read since rollouts are left alone: a ClusterRole from before then fails here, named.
    Check("list", "deployments", group="apps"),
    # The wait for a PodDisruptionBudget's budget to come back between waves (GET).
    Check("get", "poddisruptionbudgets", group="policy", required=False),
    # Karpenter's NodePools, read where served: without them the read goes on (read.absent).
    Check("list", "nodepools", group="karpenter.sh", required=False),
)
"""What ``run`` needs beyond the LISTs (which fail on their own with the resource named)."""

WATCH_CHECKS: Final = (
    Check("watch", "pods"),
    Check("watch", "nodes"),
    Check("watch", "nodepools", group="karpenter.sh", required=False),
)
"""Loop mode keeps a WATCH on every resource it reads (a denied one fails the run named)."""

LEASE_CHECKS: Final = tuple(
    Check(
        verb,
        "leases",
        group="coordination.k8s.io",
        in_lease_namespace=True,
        about_the_lease=verb != "create",  # a create names no object to RBAC
    )
    for verb in ("get", "create", "update")
)
"""What a run that evicts needs for its Lease, in the Lease's namespace only."""

STEER_CHECKS: Final = (Check("patch", "pods"),)
"""What ``steerScaleDown: true`` adds: PATCH of pods (the steer overlay's Role; the admission
policy beside it lets the ServiceAccount change nothing but the deletion cost)."""

CLUSTER_SCOPED: Final = frozenset({"nodes", "nodepools"})

_REVIEW: Final = "SelfSubjectAccessReview"


_ABSENT: Final = object()


def _malformed(field: str, want: str, value: object) -> errors.ClusterError:
    shown = "nothing" if value is _ABSENT else json.dumps(value, default=str)[:80]
    return errors.ClusterError(
        f"the API server's answer to a {_REVIEW} is malformed: {field} must be {want}, got {shown}"
    )


def review_answer(body: object) -> tuple[bool, str]:
    """(allowed, why) from the API server's answer to a SelfSubjectAccessReview, read strictly:
    only the JSON boolean ``true`` allows (``"yes"``, ``1`` or a missing field do not), and an
    answer of another shape raises :class:`errors.ClusterError` (exit 3) naming the field."""
    if not isinstance(body, Mapping):
        raise _malformed("the answer", "an object", body)
    status = body.get("status", _ABSENT)
    if not isinstance(status, Mapping):
        raise _malformed("status", "an object", status)
    allowed = status.get("allowed", _ABSENT)
    if not isinstance(allowed, bool):
        raise _malformed("status.allowed", "true or false", allowed)
    reasons = []
    for key in ("reason", "evaluationError"):
        value = status.get(key)
        if value is not None and not isinstance(value, str):
            raise _malformed(f"status.{key}", "a string", value)
        reasons.append(value or "")
    return allowed, reasons[0] or reasons[1]


def run_checks(*, evicting: bool, watching: bool, steering: bool) -> tuple[Check, ...]:
    """What a run asks before it reads: :data:`RUN_CHECKS`; when it evicts, its Lease's; with
    a WATCH, the watches; when it steers scale-downs, the PATCH of pods."""
    checks = (*RUN_CHECKS, *LEASE_CHECKS) if evicting else RUN_CHECKS
    if watching:
        checks = (*checks, *WATCH_CHECKS)
    if steering:
        checks = (*checks, *STEER_CHECKS)
    return checks


def preflight(
    kube: Access,
    namespace: str | None,
    checks: Sequence[Check] = RUN_CHECKS,
    *,
    lease_namespace: str | None = None,
    lease_name: str = "",
) -> None:
    """Raise :class:`errors.Forbidden` for the first required permission RBAC denies."""
    log = logs.get_logger("rebalancer.preflight")
    for check in checks:
        scope = None if check.resource in CLUSTER_SCOPED else namespace
        if check.in_lease_namespace:
            scope = lease_namespace
        allowed, why = kube.can_i(
            check.verb,
            check.resource,
            group=check.group,
            subresource=check.subresource,
            namespace=scope,
            name=lease_name if check.about_the_lease else "",
        )
        if allowed:
            continue
        if not check.required:
            log.warning("run.preflight_warning", missing=f"{check.verb} {check.name}", reason=why)
            continue
        raise errors.Forbidden(
            403,
            why or "denied by a SelfSubjectAccessReview",
            verb=check.verb,
            resource=check.name,
            namespace=scope,
        )
    log.info(logs.PREFLIGHT, checks=[f"{c.verb} {c.name}" for c in checks])
