"""Steering's writes (SPEC §7): the cost changes of :func:`rebalancer.core.steer.steer`, sent.

Each change is one JSON merge patch of the pod's ``controller.kubernetes.io/pod-deletion-cost``
and rebalancer's ``rebalancer/deletion-cost`` mark (both set to the cost, or both removed),
with the pod's ``metadata.resourceVersion`` in the body: the API server applies it only to the
pod as it was read, and answers 409 otherwise (the next pass reads it again). Nothing else of a
pod is ever sent (the client refuses any other PATCH).

200: written. 409: the pod changed since it was read; skipped. 404: gone. 403: not allowed (no
RBAC for it, or the admission policy refused it): the pass stops writing, since every further
write would be refused alike. Anything else: failed, reported, the pass goes on.

A workload left alone because another writer owns its costs (``foreign-cost``) is named with
that writer: :func:`name_writers` reads the ``managedFields`` of the pod the skip names (one GET
per skipped workload, at most :data:`MAX_WRITER_LOOKUPS` a pass) and keeps the managers that
own its ``pod-deletion-cost``, rebalancer's own left out (e.g. ``karpenter``, or OpenKruise's
``kruise-manager``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from rebalancer.cluster import logs
from rebalancer.cluster.api import errors
from rebalancer.core.api import (
    COST_MARK_ANNOTATION,
    DELETION_COST_ANNOTATION,
    CostChange,
    Steering,
    field_writers,
)

PatchFn = Callable[[str, str, Mapping[str, Any]], tuple[int, dict[str, Any]]]
"""``patch(namespace, name, body) -> (status, answer)``: :meth:`Kube.patch_pod_cost`."""
GetPodFn = Callable[[str, str], Mapping[str, Any] | None]
"""``get_pod(namespace, name) -> the pod, or None``: :meth:`Kube.get_pod`."""
MAX_WRITER_LOOKUPS: Final = 20
"""Pods read in one pass to name the writer of a foreign cost; later skips stay unnamed."""
OWN_MANAGER: Final = "rebalancer"
"""The field manager of rebalancer's writes (the API server takes it from the User-Agent)."""


def name_writers(get_pod: GetPodFn, steering: Steering) -> Steering:
    """``steering`` with each ``foreign-cost`` skip naming the managers that own the deletion
    cost of the pod it names (read live; rebalancer's own left out). A pod gone, a failed read
    or a cost no manager owns leaves the skip unnamed."""
    named = []
    lookups = 0
    for skip in steering.skipped:
        if skip.pod and lookups < MAX_WRITER_LOOKUPS:
            lookups += 1
            namespace, _, name = skip.pod.partition("/")
            try:
                found = get_pod(namespace, name)
            except errors.ClusterError:
                found = None
            meta = found.get("metadata") if isinstance(found, Mapping) else None
            managed = meta.get("managedFields") if isinstance(meta, Mapping) else None
            owners = field_writers(
                managed if isinstance(managed, list) else [], DELETION_COST_ANNOTATION
            )
            writers = [w for w in owners if w != OWN_MANAGER]
            if writers:
                logs.get_logger("rebalancer.steering").info(
                    logs.COSTS_FOREIGN, workload=skip.workload, pod=skip.pod, writers=writers
                )
                named.append(replace(skip, writers=tuple(writers)))
                continue
        named.append(skip)
    return replace(steering, skipped=tuple(named))


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
