"""Kubernetes Events about evictions: what a person sees in ``kubectl describe pod`` (pure).

``Rebalanced`` (Normal) on each evicted pod, naming the topology key, the domain it leaves and
where the simulation expects its replacement; ``RebalanceBlocked`` (Warning) when a
PodDisruptionBudget refused the eviction; ``RebalanceFailed`` (Warning) when it failed or, sent
as an EvictionRequest, was withdrawn still in progress at the wave's timeout. An eviction sent as
an EvictionRequest says so, with the responder's reason when it has one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from rebalancer.cluster.act.outcome import EvictionResult, Outcome
from rebalancer.core.api import EVICTION_REQUEST_API

COMPONENT: Final = "rebalancer"
REBALANCED: Final = "Rebalanced"
BLOCKED: Final = "RebalanceBlocked"
FAILED: Final = "RebalanceFailed"
MAX_MESSAGE: Final = 1024  # the API server truncates longer event messages anyway


def _target(result: EvictionResult) -> str:
    target = result.eviction.target_node
    return f"node {target}" if target else "new capacity (nodeFit: false)"


def event_message(result: EvictionResult) -> tuple[str, str, str] | None:
    """(type, reason, message) for a result, or None when it deserves no event."""
    described = _described(result)
    if described is None or result.api != EVICTION_REQUEST_API:
        return described
    kind, reason, message = described
    why = f" (reason {result.reason})" if result.reason else ""
    return kind, reason, f"{message} [sent as an EvictionRequest{why}]"


def _described(result: EvictionResult) -> tuple[str, str, str] | None:
    e = result.eviction
    where = f"{e.topology_key}={e.domain}"
    if result.outcome is Outcome.EVICTED:
        message = (
            f"Evicted by rebalancer to repair topology spread on {e.topology_key}: leaving "
            f"{where}, replacement planned on {_target(result)} (wave {e.wave}). {e.reason}"
        )
        return "Normal", REBALANCED, message
    if result.outcome is Outcome.BLOCKED_BY_PDB:
        message = (
            f"Eviction to repair topology spread on {e.topology_key} (leaving {where}) was "
            f"refused by a PodDisruptionBudget; rebalancer tries again next run. {result.detail}"
        )
        return "Warning", BLOCKED, message
    if result.outcome is Outcome.WITHDRAWN:
        message = (
            f"Eviction to repair topology spread on {e.topology_key} (leaving {where}) was "
            f"withdrawn: {result.detail}"
        )
        return "Warning", FAILED, message
    if result.outcome is Outcome.FAILED:
        message = (
            f"Eviction to repair topology spread on {e.topology_key} (leaving {where}) "
            f"failed: {result.detail}"
        )
        return "Warning", FAILED, message
    return None


def _timestamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(result: EvictionResult, *, now: datetime, instance: str) -> dict[str, Any] | None:
    """A core/v1 Event on the pod for this result, or None when it deserves none."""
    described = event_message(result)
    if described is None:
        return None
    kind, reason, message = described
    e = result.eviction
    stamp = _timestamp(now)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{e.name}.rebalancer-", "namespace": e.namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": e.namespace,
            "name": e.name,
            "uid": e.uid,
        },
        "type": kind,
        "reason": reason,
        "message": message,
        "action": "Evict",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance[:128],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
