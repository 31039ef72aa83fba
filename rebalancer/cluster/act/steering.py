"""Steering's writes (SPEC §7): the cost changes of :func:`rebalancer.core.steer.steer`, sent.

Each change is one JSON merge patch of the pod's ``controller.kubernetes.io/pod-deletion-cost``
and rebalancer's ``rebalancer/deletion-cost`` mark (both set to the cost, or both removed),
with the pod's ``metadata.resourceVersion`` in the body: the API server applies it only to the
pod as it was read, and answers 409 otherwise (the next pass reads it again). Nothing else of a
pod is ever sent (the client refuses any other PATCH).

200: written. 409: the pod changed since it was read; skipped. 404: gone. 403: not allowed (no
RBAC for it, or the admission policy refused it): the pass stops writing, since every further
write would be refused alike. Anything else: failed, reported, the pass goes on.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.cluster import logs
from rebalancer.cluster.api import errors
from rebalancer.core.convert.pods import COST_MARK_ANNOTATION, DELETION_COST_ANNOTATION
from rebalancer.core.steer import CostChange, Steering

PatchFn = Callable[[str, str, Mapping[str, Any]], tuple[int, dict[str, Any]]]
"""``patch(namespace, name, body) -> (status, answer)``: :meth:`Kube.patch_pod_cost`."""


class CostOutcome(enum.StrEnum):
    WRITTEN = "written"
    CONFLICT = "conflict"  # 409: the pod changed since it was read
    GONE = "gone"  # 404
    REFUSED = "refused"  # 403: RBAC or admission said no; the pass stops writing
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class CostResult:
    change: CostChange
    outcome: CostOutcome
    status: int
    message: str = ""


def patch_body(change: CostChange) -> dict[str, Any]:
    """The merge patch of one change: the cost and its mark, and the resourceVersion read."""
    value = None if change.cost is None else str(change.cost)
    return {
        "metadata": {
            "resourceVersion": change.resource_version,
            "annotations": {DELETION_COST_ANNOTATION: value, COST_MARK_ANNOTATION: value},
        }
    }


_OUTCOMES = {200: CostOutcome.WRITTEN, 409: CostOutcome.CONFLICT, 404: CostOutcome.GONE}


def write_costs(patch: PatchFn, steering: Steering) -> tuple[CostResult, ...]:
    """Send every change of ``steering``, in order; stops at the first 403 or lost connection."""
    log = logs.get_logger("rebalancer.steering")
    results: list[CostResult] = []
    for change in steering.changes:
        if not change.resource_version:  # read from a file: a write needs its precondition
            results.append(CostResult(change, CostOutcome.FAILED, 0, "no resourceVersion"))
            continue
        try:
            status, answer = patch(change.namespace, change.name, patch_body(change))
        except errors.ClusterError as exc:
            results.append(CostResult(change, CostOutcome.FAILED, 0, str(exc)))
            log.warning(logs.COST_FAILED, pod=f"{change.namespace}/{change.name}", error=str(exc))
            break
        outcome = _OUTCOMES.get(status, CostOutcome.FAILED)
        if status == 403:
            outcome = CostOutcome.REFUSED
        message = "" if outcome is CostOutcome.WRITTEN else str(answer.get("message") or "")
        results.append(CostResult(change, outcome, status, message))
        if outcome in (CostOutcome.FAILED, CostOutcome.REFUSED):
            log.warning(
                logs.COST_FAILED,
                pod=f"{change.namespace}/{change.name}",
                status=status,
                error=message,
            )
        if outcome is CostOutcome.REFUSED:
            break
    log.info(
        logs.COSTS_WRITTEN,
        enabled=steering.enabled,
        workloads=steering.workloads,
        planned=len(steering.changes),
        deferred=steering.deferred,
        skipped_workloads=len(steering.skipped),
        **{str(o): sum(1 for r in results if r.outcome is o) for o in CostOutcome},
    )
    return tuple(results)
