"""What the disruption and rollout rules read (issue 10): a pod's readiness, its
DisruptionTarget condition and DRA claims; a PDB's generations and unhealthy-pod policy;
ReplicaSet and StatefulSet revisions; Deployments."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.memo import Caches
from rebalancer.core.convert.meta import identify
from rebalancer.core.model import ALWAYS_ALLOW, IF_HEALTHY_BUDGET, Deployment

__all__ = [
    "REVISION_ANNOTATION",
    "deployment",
    "generations",
    "pod_conditions",
    "resource_claims",
    "revision",
    "stateful_set_revisions",
    "unhealthy_pod_eviction_policy",
]

REVISION_ANNOTATION: Final = "deployment.kubernetes.io/revision"
_UNHEALTHY_POLICIES: Final = (IF_HEALTHY_BUDGET, ALWAYS_ALLOW)


def pod_conditions(chk: Checker, status: Mapping[str, Any]) -> tuple[bool, bool]:
    """(Ready, DisruptionTarget): whether each condition is "True". A pod without a Ready
    condition is not Ready, as the Eviction API's ``IsPodReady`` has it."""
    ready = leaving = False
    for i, raw in enumerate(chk.seq(status, "conditions", "status")):
        condition = chk.as_obj(raw, f"status.conditions[{i}]")
        kind = condition.get("type")
        if kind == "Ready":
            ready = condition.get("status") == "True"
        elif kind == "DisruptionTarget":
            leaving = condition.get("status") == "True"
    return ready, leaving


def resource_claims(chk: Checker, spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the pod's DRA ``spec.resourceClaims``."""
    claims = chk.seq(spec, "resourceClaims", "spec")
    return tuple(
        chk.required_text(
            chk.as_obj(raw, f"spec.resourceClaims[{i}]"), "name", f"spec.resourceClaims[{i}]"
        )
        for i, raw in enumerate(claims)
    )


def generations(
    chk: Checker, meta: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[int, int]:
    """(metadata.generation, status.observedGeneration), 0 when absent."""
    return (
        chk.integer(meta, "generation", "metadata") or 0,
        chk.integer(status, "observedGeneration", "status") or 0,
    )


def unhealthy_pod_eviction_policy(chk: Checker, spec: Mapping[str, Any]) -> str:
    """``spec.unhealthyPodEvictionPolicy``; absent means IfHealthyBudget."""
    value = spec.get("unhealthyPodEvictionPolicy")
    if value is None:
        return IF_HEALTHY_BUDGET
    if value in _UNHEALTHY_POLICIES:
        return str(value)
    chk.bad("spec.unhealthyPodEvictionPolicy", "must be IfHealthyBudget or AlwaysAllow", value)
    return IF_HEALTHY_BUDGET


def revision(chk: Checker, meta: Mapping[str, Any]) -> int | None:
    """The ``deployment.kubernetes.io/revision`` annotation as a number, None when absent."""
    annotations = meta.get("annotations")
    value = annotations.get(REVISION_ANNOTATION) if isinstance(annotations, Mapping) else None
    if value is None:
        return None
    if type(value) is str and value.isdigit():
        return int(value)
    chk.bad(f"metadata.annotations[{REVISION_ANNOTATION}]", "must be a whole number", value)
    return None


def stateful_set_revisions(chk: Checker, status: Mapping[str, Any]) -> tuple[str, str]:
    """A StatefulSet's (status.currentRevision, status.updateRevision)."""
    return (
        chk.text(status, "currentRevision", "status"),
        chk.text(status, "updateRevision", "status"),
    )


def _progressing(chk: Checker, status: Mapping[str, Any]) -> tuple[str, str]:
    """The Deployment's Progressing condition: (status, reason), ("", "") when absent."""
    for i, raw in enumerate(chk.seq(status, "conditions", "status")):
        condition = chk.as_obj(raw, f"status.conditions[{i}]")
        if condition.get("type") == "Progressing":
            path = f"status.conditions[{i}]"
            return chk.text(condition, "status", path), chk.text(condition, "reason", path)
    return "", ""


def deployment(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> Deployment:
    """An apps/v1 Deployment's rollout state; problems are appended to ``problems``."""
    chk, meta, namespace, name = identify(obj, "Deployment", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    generation, observed = generations(chk, meta, status)
    progressing_status, progressing_reason = _progressing(chk, status)
    return Deployment(
        namespace=namespace,
        name=name,
        revision=revision(chk, meta),
        generation=generation,
        observed_generation=observed,
        paused=chk.flag(spec, "paused", "spec"),
        progressing_status=progressing_status,
        progressing_reason=progressing_reason,
    )
