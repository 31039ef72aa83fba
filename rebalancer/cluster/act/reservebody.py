"""What a capacity reservation is made of (SPEC §5.10), without I/O: which evictions of a wave
share one, its name, the PodTemplate and CapacityBuffer sent, and whether a node has room.

A wave's evictions whose plan says ``capacity: reserve`` are grouped by workload and by the
node labels the reservation pins (:attr:`Eviction.reserve_in`: the pool's and the zone's); each
group gets one PodTemplate and one CapacityBuffer of as many replicas as it has evictions, in
the pods' namespace, both named ``rebalancer-reserve-<hash of run, workload and pin>`` and
labelled as rebalancer's (``app.kubernetes.io/managed-by: rebalancer``) and this run's
(``rebalancer/run``). The template is the victim as re-read, reduced to what decides where its
replacement fits: containers' images and resources, the node selector with the pinned labels
merged in, tolerations, required node affinity and priority class; no spread constraint, no
pod (anti-)affinity, and rebalancer's labels only, so the placeholder pods the autoscaler
imagines from it count in nobody's spread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rebalancer.cluster.api.kubeclient import RESERVE_PREFIX
from rebalancer.core.api import (
    NODEPOOL_LABEL,
    RESERVE,
    ZONE_KEY,
    Caches,
    Eviction,
    format_duration,
)
from rebalancer.core.api import node as convert_node
from rebalancer.core.api import pod as convert_pod

MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGER: Final = "rebalancer"
RUN_LABEL: Final = "rebalancer/run"
"""The run that made a reservation: a later run removes those of any other (orphans)."""
FOR_ANNOTATION: Final = "rebalancer/reserved-for"
"""Which replacements a reservation is for (for people)."""
OWN: Final = f"{MANAGED_BY}={MANAGER}"
"""The label selector of every reservation rebalancer made."""
INITIALIZED_LABEL: Final = "karpenter.sh/initialized"
"""Karpenter's mark of a node it launched that is initialized (Ready, startup taints gone)."""
DISRUPTED_TAINT: Final = "karpenter.sh/disrupted"
BUFFER_API: Final = "autoscaling.x-k8s.io/v1beta1"
KINDS: Final = ("capacitybuffers", "podtemplates")
"""The kinds of a reservation, in the order they are deleted (the buffer first: it names the
template)."""

Pin = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Group:
    """The evictions of one wave that share a reservation: one workload, one pin."""

    workload: str  # :attr:`Eviction.workload_key`
    namespace: str
    pin: Pin
    evictions: tuple[Eviction, ...]

    def name(self, run_id: str) -> str:
        """``rebalancer-reserve-<hash>``: one per run, workload and pin."""
        text = "|".join((run_id, self.workload, *(f"{k}={v}" for k, v in self.pin)))
        return RESERVE_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:10]

    @property
    def where(self) -> str:
        """``NodePool pb in zone-c`` (``NodePool pb`` when it pins no zone)."""
        labels = dict(self.pin)
        pool = f"NodePool {labels.get(NODEPOOL_LABEL, '?')}"
        zone = labels.get(ZONE_KEY)
        return f"{pool} in {zone}" if zone else pool

    @property
    def selector(self) -> str:
        """The label selector of the nodes it waits for: the pinned labels, initialized."""
        return ",".join([*(f"{k}={v}" for k, v in self.pin), f"{INITIALIZED_LABEL}=true"])


def groups(wave: Iterable[Eviction]) -> list[Group]:
    """The reservations a wave needs: its evictions marked ``reserve``, by workload and pin, in
    the order of their first eviction."""
    found: dict[tuple[str, Pin], list[Eviction]] = {}
    for e in wave:
        if e.capacity == RESERVE and e.reserve_in:
            found.setdefault((e.workload_key, tuple(e.reserve_in)), []).append(e)
    return [
        Group(workload, members[0].namespace, pin, tuple(members))
        for (workload, pin), members in found.items()
    ]


def labels(run_id: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, RUN_LABEL: run_id}


def _part(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _containers(spec: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """Containers reduced to name, image and resource requests and limits (a DRA claim names
    the pod's own claims, which the template does not have); a sidecar keeps its restart
    policy (its requests then count as a container's)."""
    out = []
    for c in spec.get(key) or ():
        if not isinstance(c, Mapping):
            continue
        resources = _part(c, "resources")
        kept: dict[str, Any] = {"name": c.get("name"), "image": c.get("image")}
        shape = {k: resources[k] for k in ("requests", "limits") if k in resources}
        if shape:
            kept["resources"] = shape
        if c.get("restartPolicy"):
            kept["restartPolicy"] = c["restartPolicy"]
        out.append(kept)
    return out


def pod_template(
    name: str, run_id: str, pod: Mapping[str, Any], pin: Pin, group: Group
) -> dict[str, Any]:
    """The PodTemplate of a reservation: the replacement's shape, pinned (module docstring)."""
    spec = _part(pod, "spec")
    template: dict[str, Any] = {"containers": _containers(spec, "containers")}
    init = _containers(spec, "initContainers")
    if init:
        template["initContainers"] = init
    template["nodeSelector"] = {**dict(_part(spec, "nodeSelector")), **dict(pin)}
    if spec.get("tolerations"):
        template["tolerations"] = spec["tolerations"]
    required = _part(_part(spec, "affinity"), "nodeAffinity").get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required:
        template["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    if spec.get("priorityClassName"):
        template["priorityClassName"] = spec["priorityClassName"]
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": _metadata(name, group, run_id),
        "template": {"metadata": {"labels": labels(run_id)}, "spec": template},
    }


def capacity_buffer(
    name: str, run_id: str, group: Group, template_uid: str | None
) -> dict[str, Any]:
    """The CapacityBuffer of a reservation: as many of the template as the group has
    evictions. Owned by its template (deleting the template removes it too)."""
    meta = _metadata(name, group, run_id)
    if template_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "PodTemplate", "name": name, "uid": template_uid}
        ]
    return {
        "apiVersion": BUFFER_API,
        "kind": "CapacityBuffer",
        "metadata": meta,
        "spec": {"podTemplateRef": {"name": name}, "replicas": len(group.evictions)},
    }


def _metadata(name: str, group: Group, run_id: str) -> dict[str, Any]:
    count = len(group.evictions)
    what = "1 replacement" if count == 1 else f"{count} replacements"
    return {
        "name": name,
        "namespace": group.namespace,
        "labels": labels(run_id),
        "annotations": {FOR_ANNOTATION: f"{what} of {group.workload} from {group.where}"},
    }


# -- room on the nodes it brings ----------------------------------------------------------------


def requests_of(pod: Mapping[str, Any]) -> dict[str, int]:
    """The effective requests of a pod as the plan counts them (cpu in millicores)."""
    return dict(convert_pod(pod, [], Caches()).requests)


def free_room(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """What is left of a node for one more pod: allocatable less the requests of the pods
    bound there (those not Succeeded or Failed), and ``pods`` its free pod slots; None when
    no replacement may go there now (not Ready, cordoned, being disrupted)."""
    found = convert_node(node, [], Caches())
    if (
        not found.ready
        or found.unschedulable
        or any(t.key == DISRUPTED_TAINT for t in found.taints)
    ):
        return None
    free = dict(found.allocatable)
    caches = Caches()
    for obj in pods:
        pod = convert_pod(obj, [], caches)
        if pod.phase in ("Succeeded", "Failed"):
            continue
        for resource, amount in pod.requests.items():
            free[resource] = free.get(resource, 0) - amount
        if "pods" in free:
            free["pods"] -= 1
    return free


def place(free: Sequence[Mapping[str, int]], claims: Sequence[Mapping[str, int]]) -> bool:
    """Whether every claim (a replacement's requests) fits the nodes' free room, first fit in
    order: each node's room taken by the claims placed before."""
    left = [dict(f) for f in free]
    for claim in claims:
        for room in left:
            if ("pods" not in room or room["pods"] >= 1) and all(
                amount <= 0 or room.get(resource, 0) >= amount for resource, amount in claim.items()
            ):
                for resource, amount in claim.items():
                    room[resource] = room.get(resource, 0) - amount
                if "pods" in room:
                    room["pods"] -= 1
                break
        else:
            return False
    return True


# -- what a reservation that brought no node says -----------------------------------------------

_SAYS: Final = (
    ("LimitedByQuotas", "True"),
    ("ReadyForProvisioning", "False"),
    ("Provisioning", "False"),
)
"""The buffer's conditions that say why no node came, in the order they are quoted."""


def buffer_says(buffer: Mapping[str, Any] | None) -> str:
    """The message of the buffer's first condition that says why no node came, or ""."""
    conditions = _part(buffer or {}, "status").get("conditions") or ()
    for kind, status in _SAYS:
        for c in conditions:
            if (
                isinstance(c, Mapping)
                and c.get("type") == kind
                and c.get("status") == status
                and c.get("message")
            ):
                return f"{kind}: {c['message']}"
    return ""


def not_added(group: Group, seconds: float, says: str) -> str:
    """``NodePool pb added no node in zone-c within 10m`` (and what the buffer says)."""
    labels_ = dict(group.pin)
    text = f"NodePool {labels_.get(NODEPOOL_LABEL, '?')} added no node"
    zone = labels_.get(ZONE_KEY)
    if zone:
        text += f" in {zone}"
    text += f" within {format_duration(round(seconds))}"
    return f"{text}: {says}" if says else text
