"""A pod's effective requests, as kube-scheduler's ``PodRequests`` sums them (init containers,
sidecars, pod-level resources, overhead, in-place resize), once per distinct pod spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.memo import Caches, fingerprint
from rebalancer.core.convert.quantities import add, maximum, resource_list, to_units

__all__ = ["pod_requests"]

_POD_LEVEL_RESOURCES: Final = ("cpu", "memory")  # plus every hugepages-* resource
_RESIZE: Final = "PodResizePending"


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


def pod_requests(
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
