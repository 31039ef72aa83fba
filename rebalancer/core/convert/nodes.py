"""Nodes (labels, allocatable, taints, readiness)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.features import node_features
from rebalancer.core.convert.memo import Caches
from rebalancer.core.convert.meta import identify
from rebalancer.core.convert.quantities import resource_list, to_units
from rebalancer.core.karpenter.marks import NODEPOOL_HASH, NODEPOOL_HASH_VERSION
from rebalancer.core.model import Node, Taint

__all__ = ["TAINT_EFFECTS", "node"]

TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _taint(chk: Checker, raw: object, path: str) -> Taint:
    obj = chk.as_obj(raw, path)
    key = chk.required_text(obj, "key", path)
    effect = chk.text(obj, "effect", path)
    if effect not in TAINT_EFFECTS:
        chk.bad(f"{path}.effect", "must be NoSchedule, PreferNoSchedule or NoExecute", effect)
    return Taint(key=key, value=chk.text(obj, "value", path), effect=effect)


def ready_condition(chk: Checker, status: Mapping[str, Any]) -> object:
    """The ``status`` of the object's first Ready condition; None when it has none."""
    for i, raw in enumerate(chk.seq(status, "conditions", "status")):
        condition = chk.as_obj(raw, f"status.conditions[{i}]")
        if condition.get("type") == "Ready":
            return condition.get("status")
    return None


def node(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> Node:
    """A Node; problems are appended to ``problems``."""
    chk, meta, _, name = identify(obj, "Node", problems, namespaced=False)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    allocatable = chk.obj(status, "allocatable", "status")
    return Node(
        name=name,
        labels=chk.string_map(meta, "labels", "metadata"),
        allocatable=to_units(
            resource_list(chk, allocatable, "status.allocatable", caches.quantities)
        ),
        taints=tuple(
            _taint(chk, t, f"spec.taints[{i}]")
            for i, t in enumerate(chk.seq(spec, "taints", "spec"))
        ),
        unschedulable=chk.flag(spec, "unschedulable", "spec"),
        ready=ready_condition(chk, status) == "True",  # not False, Unknown, nor missing
        declared_features=node_features(chk, status),
        pool_hash=pool_hash(chk.string_map(meta, "annotations", "metadata")),
    )


def pool_hash(annotations: Mapping[str, str]) -> str:
    """``version/hash`` from Karpenter's ``karpenter.sh/nodepool-hash-version`` and
    ``karpenter.sh/nodepool-hash`` annotations (on a NodePool: its template now; on a Node:
    the template it was launched from); "" unless both are there."""
    version = annotations.get(NODEPOOL_HASH_VERSION)
    value = annotations.get(NODEPOOL_HASH)
    return f"{version}/{value}" if version and value else ""
