"""Trim API objects to what the planner reads, for ``rebalancer snapshot``.

A pod as the API returns it carries probes, env, images, container statuses and managed
fields that no planning step reads; dropping them makes snapshot files several times smaller
and faster to load, while ``plan --snapshot`` of a trimmed file gives the same plan
(tests/test_slim.py converts both forms and compares the models).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalancer.cluster.read import podfields

DROP_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
# A pod keeps the fields rebalancer.cluster.read.podfields declares read.
POD_SPEC_KEYS = tuple(
    k for k in podfields.SPEC if k not in podfields.CONTAINER_LISTS and k != "volumes"
)
CONTAINER_KEYS = tuple(k for k in podfields.CONTAINER if k != "volumeMounts")
CONDITION_KEYS = podfields.CONDITION


def _pick(obj: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: obj[k] for k in keys if k in obj}


def _metadata(meta: Mapping[str, Any], keep_version: bool = False) -> dict[str, Any]:
    """``keep_version``: a pod's resourceVersion stays (steering's writes are conditional on it)."""
    dropped = ("managedFields",) if keep_version else ("managedFields", "resourceVersion")
    out = {k: v for k, v in meta.items() if k not in dropped}
    annotations = out.get("annotations")
    if annotations:
        kept = {k: v for k, v in annotations.items() if k not in DROP_ANNOTATIONS}
        if kept:
            out["annotations"] = kept
        else:
            del out["annotations"]
    return out


def _conditions(status: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    conditions = status.get("conditions")
    if conditions is None:
        return None
    return [_pick(c, CONDITION_KEYS) for c in conditions]


def _container(container: Mapping[str, Any]) -> dict[str, Any]:
    """What the requests and the node features a pod needs come from (mounts: bind options)."""
    out = _pick(container, CONTAINER_KEYS)
    mounts = [
        {"bindMountOptions": m["bindMountOptions"]}
        for m in container.get("volumeMounts") or ()
        if m.get("bindMountOptions")
    ]
    if mounts:
        out["volumeMounts"] = mounts
    return out


def _pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    out_spec = _pick(spec, POD_SPEC_KEYS)
    for key in podfields.CONTAINER_LISTS:
        if key in spec:
            out_spec[key] = [_container(c) for c in spec[key]]
    if "volumes" in spec:
        out_spec["volumes"] = [
            v for v in spec["volumes"] if any(src in v for src in podfields.VOLUME_SOURCES)
        ]
    status = obj.get("status") or {}
    out_status = _pick(status, ("phase", "startTime"))
    conditions = [
        _pick(c, CONDITION_KEYS)
        for c in status.get("conditions", ())
        if c.get("type") in podfields.CONDITION_TYPES
    ]
    if conditions:
        out_status["conditions"] = conditions
    for key in ("containerStatuses", "initContainerStatuses"):
        kept = [_pick(c, podfields.CONTAINER_STATUS) for c in status.get(key, ())]
        kept = [c for c in kept if len(c) > 1]  # only resize data matters
        if kept:
            out_status[key] = kept
    head = {k: v for k, v in obj.items() if k in ("apiVersion", "kind")}
    head["metadata"] = _metadata(obj.get("metadata") or {}, keep_version=True)
    return {**head, "spec": out_spec, "status": out_status}


def _node(obj: Mapping[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    out_status = _pick(status, ("allocatable", "capacity", "declaredFeatures"))
    conditions = _conditions(status)
    if conditions is not None:
        out_status["conditions"] = conditions
    return {**_head(obj), "spec": obj.get("spec") or {}, "status": out_status}


def _controller(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    out = {**_head(obj), "spec": _pick(spec, ("selector", "replicas"))}
    revisions = _pick(obj.get("status") or {}, ("currentRevision", "updateRevision"))
    if revisions:  # a StatefulSet's: mid-rollout while they differ
        out["status"] = revisions
    return out


def _deployment(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Its rollout state: revision annotation, generations, paused, the Progressing condition."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    out_status = _pick(status, ("observedGeneration",))
    conditions = _conditions(status)
    if conditions is not None:
        out_status["conditions"] = [c for c in conditions if c.get("type") == "Progressing"]
    return {
        **_head(obj),
        "spec": _pick(spec, ("selector", "replicas", "paused")),
        "status": out_status,
    }


def _head(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k in ("apiVersion", "kind")}
    out["metadata"] = _metadata(obj.get("metadata") or {})
    return out


def slim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object with only what the planner reads; unknown kinds keep all but managedFields."""
    kind = obj.get("kind")
    if kind == "Pod":
        return _pod(obj)
    if kind == "Node":
        return _node(obj)
    if kind in ("ReplicaSet", "StatefulSet", "ReplicationController"):
        return _controller(obj)
    if kind == "Deployment":
        return _deployment(obj)
    out = dict(obj)
    if "metadata" in out:
        out["metadata"] = _metadata(out["metadata"])
    return out
