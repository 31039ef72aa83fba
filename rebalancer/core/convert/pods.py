"""Pods: scheduling fragments (node selector, affinity, tolerations), volumes, metadata; the
constraints (:mod:`.constraints`) and requests (:mod:`.requests`) have modules of their own.

The fragments a workload's pods share (constraints, tolerations, affinity, requests, labels,
node selector) are parsed once per snapshot through :class:`~rebalancer.core.convert.memo.Caches`
and the pod records which template it belongs to (``label_set``, ``template``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.constraints import spread_constraints
from rebalancer.core.convert.disruption import pod_conditions, resource_claims
from rebalancer.core.convert.features import pod_features
from rebalancer.core.convert.memo import EMPTY_NUMBER, Caches, fingerprint
from rebalancer.core.convert.meta import controller_owner, epoch, identify
from rebalancer.core.convert.nodes import TAINT_EFFECTS
from rebalancer.core.convert.requests import pod_requests
from rebalancer.core.convert.selectors import node_selector
from rebalancer.core.karpenter.marks import DO_NOT_DISRUPT_ANNOTATION, do_not_disrupt
from rebalancer.core.model import (
    NodeSelector,
    Pod,
    Toleration,
)

__all__ = [
    "COST_MARK_ANNOTATION",
    "DELETION_COST_ANNOTATION",
    "EVICT_ANNOTATION",
    "MIRROR_ANNOTATION",
    "PREFER_NO_EVICTION_ANNOTATION",
    "pod",
    "required_node_affinity",
    "tolerations",
]

MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
# The descheduler's per-pod annotations, with its meaning (their presence counts, not the value):
# opt the pod in despite the policy's protections, and prefer evicting the pod last.
EVICT_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/evict"
PREFER_NO_EVICTION_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
# The ReplicaSet controller removes pods with a lower cost first; rebalancer's own mark holds
# the cost it last wrote, so a cost that differs from the mark was set by someone else.
DELETION_COST_ANNOTATION: Final = "controller.kubernetes.io/pod-deletion-cost"
COST_MARK_ANNOTATION: Final = "rebalancer/deletion-cost"
_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"


# --- tolerations and affinity ---------------------------------------------------------------


def _toleration(chk: Checker, raw: object, path: str) -> Toleration:
    obj = chk.as_obj(raw, path)
    key = chk.text(obj, "key", path)
    operator = chk.text(obj, "operator", path) or "Equal"
    value = chk.text(obj, "value", path)
    effect = chk.text(obj, "effect", path)
    if operator not in ("Equal", "Exists"):
        chk.bad(f"{path}.operator", "must be Equal or Exists", operator)
    elif operator == "Exists" and value:
        chk.bad(f"{path}.value", "must be empty when operator is Exists", value)
    elif operator == "Equal" and not key:
        chk.bad(f"{path}.operator", "must be Exists when key is empty", operator)
    if effect and effect not in TAINT_EFFECTS:
        chk.bad(
            f"{path}.effect", "must be empty, NoSchedule, PreferNoSchedule or NoExecute", effect
        )
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def tolerations(
    chk: Checker, spec: Mapping[str, Any], caches: Caches
) -> tuple[tuple[Toleration, ...], int]:
    raw = chk.seq(spec, "tolerations", "spec")
    if not raw:
        return (), EMPTY_NUMBER
    return caches.tolerations.get(
        chk,
        fingerprint(raw),
        lambda: tuple(_toleration(chk, t, f"spec.tolerations[{i}]") for i, t in enumerate(raw)),
    )


def required_node_affinity(
    chk: Checker, spec: Mapping[str, Any], caches: Caches
) -> tuple[NodeSelector | None, int]:
    affinity = chk.obj(spec, "affinity", "spec")
    if not affinity:
        return None, EMPTY_NUMBER
    raw = chk.obj(affinity, "nodeAffinity", "spec.affinity").get(_REQUIRED)
    if raw is None:
        return None, EMPTY_NUMBER
    return caches.affinity.get(
        chk,
        fingerprint(raw),
        lambda: node_selector(chk, raw, f"spec.affinity.nodeAffinity.{_REQUIRED}"),
    )


# --- volumes and the pod --------------------------------------------------------------------


def _volumes(chk: Checker, spec: Mapping[str, Any], pod_name: str) -> tuple[tuple[str, ...], bool]:
    """The pod's PVC names (ephemeral volumes claim ``<pod>-<volume>``) and emptyDir use."""
    claims: list[str] = []
    local = False
    for i, raw in enumerate(chk.seq(spec, "volumes", "spec")):
        path = f"spec.volumes[{i}]"
        volume = chk.as_obj(raw, path)
        if volume.get("emptyDir") is not None:
            local = True
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            claims.append(
                chk.required_text(
                    chk.as_obj(claim, path), "claimName", f"{path}.persistentVolumeClaim"
                )
            )
        elif volume.get("ephemeral") is not None:
            claims.append(f"{pod_name}-{chk.required_text(volume, 'name', path)}")
    return tuple(claims), local


def pod_group(chk: Checker, spec: Mapping[str, Any]) -> str | None:
    """``spec.schedulingGroup.podGroupName`` (Kubernetes 1.36+, the workload API): the PodGroup
    whose pods are scheduled as a gang; None when the pod belongs to none."""
    group = chk.obj(spec, "schedulingGroup", "spec")
    return chk.text(group, "podGroupName", "spec.schedulingGroup") or None


def pod(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> Pod:
    """A Pod (effective requests, normalised constraints); problems go to ``problems``."""
    chk, meta, namespace, name = identify(obj, "Pod", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    labels, label_set = caches.labels.get(chk, meta, "labels", "metadata")
    # Annotations are checked, and only six are kept (four as flags, the deletion cost and
    # rebalancer's mark of it as text): a pod's annotations are often its own, and nothing
    # else in them is read.
    annotations = chk.string_map(meta, "annotations", "metadata")
    mirror = MIRROR_ANNOTATION in annotations
    pvc_names, local_storage = _volumes(chk, spec, name)
    # Read in the order of the fields, so problems come out in that order.
    uid = chk.text(meta, "uid", "metadata")
    node_name = sys.intern(chk.text(spec, "nodeName", "spec")) or None
    created = epoch(chk, meta.get("creationTimestamp"), "metadata.creationTimestamp")
    phase = chk.text(status, "phase", "status") or "Pending"
    priority = chk.integer(spec, "priority", "spec", bits=32)
    priority_class_name = chk.text(spec, "priorityClassName", "spec") or None
    owner = controller_owner(chk, meta, caches.owners)
    node_selector, selector_number = caches.node_selectors.get(chk, spec, "nodeSelector", "spec")
    affinity, affinity_number = required_node_affinity(chk, spec, caches)
    tolerations_, tolerations_number = tolerations(chk, spec, caches)
    constraints, constraints_number = spread_constraints(chk, spec, labels, caches)
    requests = pod_requests(chk, spec, status, caches)
    grace_period_seconds = chk.integer(spec, "terminationGracePeriodSeconds", "spec")
    ready, disruption_target = pod_conditions(chk, status)
    return Pod(
        namespace=sys.intern(namespace),
        name=name,
        uid=uid,
        labels=labels,
        node_name=node_name,
        created=created,
        phase=phase,
        terminating=meta.get("deletionTimestamp") is not None,
        priority=priority,
        priority_class_name=priority_class_name,
        owner=owner,
        node_selector=node_selector,
        required_affinity=affinity,
        tolerations=tolerations_,
        constraints=constraints,
        requests=requests,
        pvc_names=pvc_names,
        local_storage=local_storage,
        mirror=mirror,
        grace_period_seconds=grace_period_seconds,
        ready=ready,
        disruption_target=disruption_target,
        resource_claims=resource_claims(chk, spec),
        evict_requested=EVICT_ANNOTATION in annotations,
        prefer_no_eviction=PREFER_NO_EVICTION_ANNOTATION in annotations,
        deletion_cost=annotations.get(DELETION_COST_ANNOTATION),
        cost_mark=annotations.get(COST_MARK_ANNOTATION),
        resource_version=chk.text(meta, "resourceVersion", "metadata"),
        scheduling_group=pod_group(chk, spec),
        required_features=pod_features(chk, spec),
        do_not_disrupt=do_not_disrupt(annotations.get(DO_NOT_DISRUPT_ANNOTATION)),
        started=(
            epoch(chk, status["startTime"], "status.startTime")
            if status.get("startTime") is not None
            else None
        ),
        label_set=label_set,
        template=caches.template(
            (selector_number, affinity_number, tolerations_number, constraints_number)
        ),
    )
