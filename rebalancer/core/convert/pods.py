"""Pods: effective requests, normalised spread constraints, scheduling fragments, volumes.

The fragments a workload's pods share (constraints, tolerations, affinity, requests, labels,
node selector) are parsed once per snapshot through :class:`~rebalancer.core.convert.memo.Caches`
and the pod records which template it belongs to (``label_set``, ``template``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, cast

from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.disruption import pod_conditions, resource_claims
from rebalancer.core.convert.memo import EMPTY_NUMBER, Caches, fingerprint
from rebalancer.core.convert.meta import controller_owner, epoch, identify
from rebalancer.core.convert.nodes import TAINT_EFFECTS
from rebalancer.core.convert.quantities import add, maximum, resource_list, to_units
from rebalancer.core.convert.selectors import label_selector, node_selector
from rebalancer.core.model import (
    HARD,
    HONOR,
    IGNORE,
    SOFT,
    LabelSelector,
    NodeSelector,
    Pod,
    Requirement,
    SpreadConstraint,
    Toleration,
)

__all__ = ["LAST_APPLIED_ANNOTATION", "MIRROR_ANNOTATION", "pod"]

MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
_POD_LEVEL_RESOURCES: Final = ("cpu", "memory")  # plus every hugepages-* resource
_RESIZE: Final = "PodResizePending"
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


def _tolerations(
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


def _required_node_affinity(
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


# --- spread constraints ---------------------------------------------------------------------


def _positive(chk: Checker, obj: Mapping[str, Any], key: str, path: str, default: int) -> int:
    """An integer > 0 (``maxSkew``, ``minDomains``); ``default`` if bad (reported)."""
    value = obj.get(key)
    if type(value) is int and value > 0:
        return value
    chk.bad(f"{path}.{key}", "must be an integer > 0", value)
    return default


def _one_of(
    chk: Checker, obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, str]
) -> str | None:
    value = obj.get(key)
    if value in allowed:
        return cast(str, value)
    chk.bad(f"{path}.{key}", f"must be {allowed[0]} or {allowed[1]}", value)
    return None


def _is_merged(requirement: Requirement) -> bool:
    """The shape kube-apiserver (1.34+) writes when it merges a matchLabelKeys key itself."""
    return requirement.operator == "In" and len(requirement.values) == 1


def _check_match_label_keys(
    chk: Checker, selector: LabelSelector, keys: tuple[str, ...], path: str
) -> None:
    """Report a matchLabelKeys key that the labelSelector also names (an API error).

    Since 1.34 kube-apiserver stores each key the pod carries as an ``In [value]`` expression
    in the labelSelector (MatchLabelKeysInPodTopologySpreadSelectorMerge), so exactly one such
    expression per key is the server's own merge, not a conflict.
    """
    in_labels = {key for key, _ in selector.match_labels}
    for i, key in enumerate(keys):
        exprs = [r for r in selector.match_expressions if r.key == key]
        merged_only = len(exprs) == 1 and _is_merged(exprs[0])
        if key in in_labels or (exprs and not merged_only):
            chk.bad(f"{path}.matchLabelKeys[{i}]", "must not also be in labelSelector", key)


def _merge_match_label_keys(
    selector: LabelSelector | None, keys: tuple[str, ...], labels: Mapping[str, str]
) -> LabelSelector | None:
    """The effective selector: ``key In [pod's value]`` added for each key the pod carries.

    A nil labelSelector stays nil even if matchLabelKeys would add requirements: kube-scheduler
    turns a nil selector into ``labels.Nothing()``, and merging a label set into Nothing keeps
    Nothing (``mergeLabelSetWithSelector`` returns it unchanged), so the constraint matches no
    pod. (Recent API servers reject matchLabelKeys without a labelSelector; older ones did not.)
    Requirements the API server already merged are not added twice.
    """
    if selector is None or not keys:
        return selector
    added = []
    for key in keys:
        value = labels.get(key)
        if value is None:
            continue  # keys the pod lacks are ignored
        requirement = Requirement(key, "In", (value,))
        if requirement not in selector.match_expressions and requirement not in added:
            added.append(requirement)
    if not added:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + tuple(added))


def _spread_constraint(chk: Checker, raw: object, path: str) -> SpreadConstraint:
    """One constraint, validated and defaulted; its selector is merged later, per pod."""
    obj = chk.as_obj(raw, path)
    max_skew = _positive(chk, obj, "maxSkew", path, 1)
    topology_key = chk.required_text(obj, "topologyKey", path)
    when = _one_of(chk, obj, "whenUnsatisfiable", path, (HARD, SOFT)) or HARD
    min_domains = 1
    if obj.get("minDomains") is not None:
        min_domains = _positive(chk, obj, "minDomains", path, 1)
        if when == SOFT:  # kube-apiserver rejects it
            chk.bad(
                f"{path}.minDomains",
                "may only be set when whenUnsatisfiable is DoNotSchedule",
                obj.get("minDomains"),
            )
    affinity_policy = HONOR
    if obj.get("nodeAffinityPolicy") is not None:
        affinity_policy = _one_of(chk, obj, "nodeAffinityPolicy", path, (HONOR, IGNORE)) or HONOR
    taints_policy = IGNORE
    if obj.get("nodeTaintsPolicy") is not None:
        taints_policy = _one_of(chk, obj, "nodeTaintsPolicy", path, (HONOR, IGNORE)) or IGNORE
    selector = label_selector(chk, obj.get("labelSelector"), f"{path}.labelSelector")
    keys = chk.strings(obj, "matchLabelKeys", path)
    if selector is not None and keys:
        _check_match_label_keys(chk, selector, keys, path)
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        when_unsatisfiable=when,
        selector=selector,
        min_domains=min_domains,
        node_affinity_policy=affinity_policy,
        node_taints_policy=taints_policy,
        match_label_keys=keys,
    )


def _parse_spread_constraints(
    chk: Checker, raw: Sequence[Any]
) -> tuple[tuple[SpreadConstraint, ...], tuple[str, ...]]:
    """The constraints with selectors not yet merged with matchLabelKeys, and all their keys."""
    result = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        path = f"spec.topologySpreadConstraints[{i}]"
        constraint = _spread_constraint(chk, item, path)
        pair = (constraint.topology_key, constraint.when_unsatisfiable)
        if pair in seen:
            chk.bad(path, "duplicate {topologyKey, whenUnsatisfiable} pair", list(pair))
        seen.add(pair)
        result.append(constraint)
    keys = sorted({key for c in result if c.selector is not None for key in c.match_label_keys})
    return tuple(result), tuple(keys)


def _with_label_keys(
    constraints: tuple[SpreadConstraint, ...], labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    return tuple(
        replace(c, selector=_merge_match_label_keys(c.selector, c.match_label_keys, labels))
        if c.match_label_keys
        else c
        for c in constraints
    )


def _spread_constraints(
    chk: Checker, spec: Mapping[str, Any], labels: Mapping[str, str], caches: Caches
) -> tuple[tuple[SpreadConstraint, ...], int]:
    raw = chk.seq(spec, "topologySpreadConstraints", "spec")
    if not raw:
        return (), EMPTY_NUMBER
    key = fingerprint(raw)
    (parsed, label_keys), number = caches.constraints.get(
        chk, key, lambda: _parse_spread_constraints(chk, raw)
    )
    if not label_keys:
        return parsed, number
    values = tuple(labels.get(k) for k in label_keys)
    merged_key = None if key is None else (key, values)
    return caches.merged.get(chk, merged_key, lambda: _with_label_keys(parsed, labels))


# --- requests -------------------------------------------------------------------------------


def _container_requests(
    chk: Checker, container: Mapping[str, Any], path: str, caches: Caches
) -> dict[str, int]:
    """A container's requests in nano-units, defaulted from its limits like kube-apiserver does."""
    resources = chk.obj(container, "resources", path)
    if not resources:
        return {}
    rpath = f"{path}.resources"
    quantities = caches.quantities
    requests = resource_list(
        chk, chk.obj(resources, "requests", rpath), f"{rpath}.requests", quantities
    )
    limits = chk.obj(resources, "limits", rpath)
    if limits:
        for name, amount in resource_list(chk, limits, f"{rpath}.limits", quantities).items():
            requests.setdefault(name, amount)  # SetDefaults_Pod: requests default to limits
    return requests


class _StatusResources:
    """In-place resize: the resources the kubelet reports per container (``status``).

    kube-scheduler (InPlacePodVerticalScaling) takes, per container that reports resources,
    max(spec requests, status requests, allocatedResources); if the resize is Infeasible,
    only the status values.
    """

    __slots__ = ("by_name", "infeasible")

    def __init__(self, chk: Checker, status: Mapping[str, Any]) -> None:
        self.by_name: dict[str, tuple[Mapping[str, Any], str]] = {}
        for key in ("containerStatuses", "initContainerStatuses"):
            for i, raw in enumerate(chk.seq(status, key, "status")):
                path = f"status.{key}[{i}]"
                cs = chk.as_obj(raw, path)
                if cs.get("resources") is not None and type(cs.get("name")) is str:
                    self.by_name[cs["name"]] = (cs, path)
        self.infeasible = False
        if self.by_name:
            for cond in chk.seq(status, "conditions", "status"):
                if isinstance(cond, Mapping) and cond.get("type") == _RESIZE:
                    self.infeasible = cond.get("reason") == "Infeasible"
                    break

    def apply(
        self, chk: Checker, name: object, spec_requests: dict[str, int], caches: Caches
    ) -> dict[str, int]:
        found = self.by_name.get(name) if type(name) is str else None
        if found is None:
            return spec_requests
        cs, path = found
        resources = chk.obj(cs, "resources", path)
        reported = resource_list(
            chk,
            chk.obj(resources, "requests", f"{path}.resources"),
            f"{path}.resources.requests",
            caches.quantities,
        )
        allocated = resource_list(
            chk,
            chk.obj(cs, "allocatedResources", path),
            f"{path}.allocatedResources",
            caches.quantities,
        )
        result = {} if self.infeasible else dict(spec_requests)
        maximum(result, reported)
        maximum(result, allocated)
        return result


def _has_status_resources(status: Mapping[str, Any]) -> bool:
    for key in ("containerStatuses", "initContainerStatuses"):
        statuses = status.get(key)
        if type(statuses) is list:
            for cs in statuses:
                if isinstance(cs, Mapping) and cs.get("resources") is not None:
                    return True
    return False


def _resized(status: Mapping[str, Any], key: str) -> list[Any] | None:
    """The resource fields of the container statuses that report resources (in-place resize)."""
    statuses = status.get(key)
    if not statuses:
        return None
    return [
        (cs.get("name"), cs.get("resources"), cs.get("allocatedResources"))
        for cs in statuses
        if cs.get("resources") is not None
    ]


def _requests_key(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bytes | None:
    """Everything :func:`_compute_requests` reads, as a memo key; None for malformed input.

    Whole container specs go in (orjson is faster than picking their resources out); of the
    status, only the resource fields, since the rest differs from pod to pod.
    """
    try:
        resized = (_resized(status, "containerStatuses"), _resized(status, "initContainerStatuses"))
        reasons = None
        if resized[0] or resized[1]:
            conditions = status.get("conditions") or ()
            reasons = [c.get("reason") for c in conditions if c.get("type") == _RESIZE]
    except (AttributeError, TypeError):
        return None
    return fingerprint(
        (
            spec.get("containers"),
            spec.get("initContainers"),
            spec.get("overhead"),
            spec.get("resources"),
            resized,
            reasons,
        )
    )


def _pod_requests(
    chk: Checker, spec: Mapping[str, Any], status: Mapping[str, Any], caches: Caches
) -> Mapping[str, int]:
    key = _requests_key(spec, status)
    found, _ = caches.requests.get(chk, key, lambda: _compute_requests(chk, spec, status, caches))
    return found


def _compute_requests(
    chk: Checker, spec: Mapping[str, Any], status: Mapping[str, Any], caches: Caches
) -> dict[str, int]:
    """The effective request per resource, as kube-scheduler's ``PodRequests`` computes it.

    sum(containers) + sum(sidecars), raised to max over regular init containers of (its request
    + the sidecars declared before it); then pod-level requests (cpu, memory, hugepages-*)
    replace the aggregate; then ``spec.overhead`` is added. Summed exactly, rounded up once.
    """
    resized = _StatusResources(chk, status) if _has_status_resources(status) else None
    total: dict[str, int] = {}
    for i, raw in enumerate(chk.seq(spec, "containers", "spec")):
        path = f"spec.containers[{i}]"
        container = chk.as_obj(raw, path)
        requests = _container_requests(chk, container, path, caches)
        if resized is not None:
            requests = resized.apply(chk, container.get("name"), requests, caches)
        add(total, requests)
    init_containers = chk.seq(spec, "initContainers", "spec")
    if init_containers:
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for i, raw in enumerate(init_containers):
            path = f"spec.initContainers[{i}]"
            container = chk.as_obj(raw, path)
            requests = _container_requests(chk, container, path, caches)
            if container.get("restartPolicy") == "Always":  # a sidecar: runs for the pod's life
                if resized is not None:
                    requests = resized.apply(chk, container.get("name"), requests, caches)
                add(total, requests)
                add(sidecars, requests)
                maximum(init_peak, sidecars)
            else:
                using = dict(requests)
                add(using, sidecars)
                maximum(init_peak, using)
        maximum(total, init_peak)
    pod_level = chk.obj(chk.obj(spec, "resources", "spec"), "requests", "spec.resources")
    if pod_level:
        for name, amount in resource_list(
            chk, pod_level, "spec.resources.requests", caches.quantities
        ).items():
            if name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
                total[name] = amount
    overhead = chk.obj(spec, "overhead", "spec")
    if overhead:
        add(total, resource_list(chk, overhead, "spec.overhead", caches.quantities))
    return to_units(total)


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


def pod(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> Pod:
    """A Pod (effective requests, normalised constraints); problems go to ``problems``."""
    chk, meta, namespace, name = identify(obj, "Pod", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    labels, label_set = caches.labels.get(chk, meta, "labels", "metadata")
    # The last-applied annotation is a copy of the whole spec: memory only.
    annotations, _ = caches.annotations.get(
        chk, meta, "annotations", "metadata", drop=LAST_APPLIED_ANNOTATION
    )
    pvc_names, local_storage = _volumes(chk, spec, name)
    # Read in the order of the fields, so problems come out in that order.
    uid = chk.text(meta, "uid", "metadata")
    node_name = sys.intern(chk.text(spec, "nodeName", "spec")) or None
    created = epoch(chk, meta.get("creationTimestamp"), "metadata.creationTimestamp")
    phase = chk.text(status, "phase", "status") or "Pending"
    priority = chk.integer(spec, "priority", "spec")
    priority_class_name = chk.text(spec, "priorityClassName", "spec") or None
    owner = controller_owner(chk, meta, caches.owners)
    node_selector, selector_number = caches.node_selectors.get(chk, spec, "nodeSelector", "spec")
    affinity, affinity_number = _required_node_affinity(chk, spec, caches)
    tolerations, tolerations_number = _tolerations(chk, spec, caches)
    constraints, constraints_number = _spread_constraints(chk, spec, labels, caches)
    requests = _pod_requests(chk, spec, status, caches)
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
        tolerations=tolerations,
        constraints=constraints,
        requests=requests,
        pvc_names=pvc_names,
        local_storage=local_storage,
        mirror=MIRROR_ANNOTATION in annotations,
        grace_period_seconds=grace_period_seconds,
        annotations=annotations,
        ready=ready,
        disruption_target=disruption_target,
        resource_claims=resource_claims(chk, spec),
        label_set=label_set,
        template=caches.template(
            (selector_number, affinity_number, tolerations_number, constraints_number)
        ),
    )
