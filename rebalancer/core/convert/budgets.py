"""PodDisruptionBudgets and PriorityClasses: what limits and what forbids an eviction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.disruption import generations, unhealthy_pod_eviction_policy
from rebalancer.core.convert.memo import Caches
from rebalancer.core.convert.meta import identify
from rebalancer.core.convert.selectors import label_selector
from rebalancer.core.model import PodDisruptionBudget, PriorityClass

__all__ = ["pdb", "priority_class"]


def _count(chk: Checker, obj: Mapping[str, Any], key: str, path: str) -> int:
    return chk.integer(obj, key, path, bits=32) or 0


def pdb(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget; problems are appended to ``problems``."""
    chk, meta, namespace, name = identify(obj, "PodDisruptionBudget", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    generation, observed = generations(chk, meta, status)
    return PodDisruptionBudget(
        namespace=namespace,
        name=name,
        selector=label_selector(chk, spec.get("selector"), "spec.selector"),
        disruptions_allowed=_count(chk, status, "disruptionsAllowed", "status"),
        current_healthy=_count(chk, status, "currentHealthy", "status"),
        desired_healthy=_count(chk, status, "desiredHealthy", "status"),
        generation=generation,
        observed_generation=observed,
        unhealthy_pod_eviction_policy=unhealthy_pod_eviction_policy(chk, spec),
    )


def priority_class(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> PriorityClass:
    """A PriorityClass; problems are appended to ``problems``."""
    chk, _, _, name = identify(obj, "PriorityClass", problems, namespaced=False)
    value = chk.integer(obj, "value", "", bits=32)
    if value is None:
        if "value" not in obj or obj["value"] is None:
            chk.bad("value", "must be an integer", None)
        value = 0
    return PriorityClass(name=name, value=value, global_default=chk.flag(obj, "globalDefault", ""))
