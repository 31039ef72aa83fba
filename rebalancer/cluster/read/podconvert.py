"""A decoded pod to the model: the one conversion behind both typed decoders.

The JSON decoder (:mod:`rebalancer.cluster.read.fastdecode`, msgspec) and the protobuf decoder
(:mod:`rebalancer.cluster.read.protodecode`) each read a pod into what it holds of its own
(:class:`Own`: name, node, timestamps, the five annotations read, volumes, conditions...) and a
key of the fragments its workload shares (labels, owner references, node selector, affinity,
tolerations, spread constraints, containers...), which stay encoded. A :class:`PodConverter`
turns each distinct fragment once into the JSON shape the API would have sent (by the
decoder's :class:`Shapes`), converts it with the converter's own functions (so validation and
every problem's wording stay the converter's) and builds the :class:`~rebalancer.core.model.Pod`.
Anything it cannot take exactly as the converter would raises :class:`Fallback`: the decoder
then takes the general path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, Protocol

from rebalancer.core.api import (
    COST_MARK_ANNOTATION,
    DELETION_COST_ANNOTATION,
    DO_NOT_DISRUPT_ANNOTATION,
    EMPTY_NUMBER,
    EVICT_ANNOTATION,
    MIRROR_ANNOTATION,
    NO_FEATURES,
    PREFER_NO_EVICTION_ANNOTATION,
    Caches,
    Checker,
    NodeSelector,
    OwnerRef,
    Pod,
    SpreadConstraint,
    Toleration,
    controller_owner,
    do_not_disrupt,
    new_pod,
    pod_requests,
    required_node_affinity,
    resource_claims,
    spread_constraints,
    tolerations,
)

__all__ = [
    "MEMO_LIMIT",
    "NO_VOLUMES",
    "RESIZE",
    "Fallback",
    "Fragment",
    "Memo",
    "Own",
    "PodConverter",
    "Resized",
    "Shapes",
    "annotation_flags",
    "conditions",
    "volumes",
]

MEMO_LIMIT: Final = 16384
RESIZE: Final = "PodResizePending"
NO_VOLUMES: Final[tuple[tuple[str, ...], bool]] = ((), False)
_MISSING: Final = object()
_intern: Final = sys.intern

Fragment = bytes | tuple[bytes, ...] | None
"""One shared fragment as a decoder keeps it: its encoded bytes (or entries' bytes)."""
Resized = tuple[tuple[Any, ...], ...]
"""Per container list, the statuses that report resources: (name, resources, allocated)."""


class Own:
    """What one pod holds of its own, as a decoder reads it (what its workload shares is the
    key of its fragments beside it). A decoder makes one per pod and sets every field by name;
    :meth:`PodConverter.pod` reads them. Set field by field, not built by a 23-keyword call
    (a NamedTuple or dataclass): that call made a read of 30,000 pods about a quarter slower.
    A field a decoder leaves unset fails when read (``AttributeError``), never goes unnoticed.
    """

    __slots__ = (
        "cost_mark",
        "created",
        "deletion_cost",
        "disruption_target",
        "evict_requested",
        "grace_period_seconds",
        "local_storage",
        "mirror",
        "name",
        "namespace",
        "node",
        "phase",
        "prefer_no_eviction",
        "priority",
        "priority_class_name",
        "pvc_names",
        "ready",
        "reasons",
        "resized",
        "resource_version",
        "scheduling_group",
        "started",
        "terminating",
        "uid",
    )

    resized: Resized  # () unless a container status reports resources
    reasons: tuple[str | None, ...]  # the PodResizePending conditions' reasons (with resized)
    namespace: str
    name: str
    uid: str
    node: str | None
    created: float
    phase: str
    terminating: bool
    priority: int | None
    priority_class_name: str | None
    pvc_names: tuple[str, ...]
    local_storage: bool
    mirror: bool
    grace_period_seconds: int | None
    ready: bool
    disruption_target: bool
    evict_requested: bool
    prefer_no_eviction: bool
    deletion_cost: str | None
    cost_mark: str | None
    resource_version: str
    scheduling_group: str | None
    started: float | None  # status.startTime, None when not started


class Fallback(Exception):  # control flow, never escapes the decoders
    """The typed path cannot take this object exactly as the converter would."""


class Template(NamedTuple):
    """What the pods of one workload share, converted."""

    labels: Mapping[str, str]
    label_set: int
    owner: OwnerRef | None
    node_selector: Mapping[str, str]
    affinity: NodeSelector | None
    tolerations: tuple[Toleration, ...]
    constraints: tuple[SpreadConstraint, ...]
    requests: Mapping[str, int]
    claims: tuple[str, ...]
    number: int


class Memo:
    """Converted fragments keyed by their encoded bytes (bounded: cleared when full); each key
    in ``absent`` maps to the converter's value for an absent field."""

    __slots__ = ("absent", "data", "empty")

    def __init__(self, empty: object, absent: tuple[Hashable, ...]) -> None:
        self.empty = empty
        self.absent = absent
        self.data: dict[Hashable, Any] = dict.fromkeys(absent, empty)

    def put(self, key: Hashable, value: Any) -> Any:
        if len(self.data) >= MEMO_LIMIT:
            self.data = dict.fromkeys(self.absent, self.empty)
        self.data[key] = value
        return value


class Shapes(Protocol):
    """How one decoder's fragments become the JSON shape the converter reads (Go's
    encoding/json: an empty field left out)."""

    @property
    def absent(self) -> tuple[Hashable, ...]:
        """The keys of an absent fragment."""

    def split(self, key: Any) -> Sequence[Any]:
        """A template key's fragments: labels, owner references, node selector, affinity,
        tolerations, spread constraints, containers, init containers, overhead, pod-level
        resources, resource claims. Raises :class:`Fallback` for a pod that may need node
        features (the general path infers them)."""

    def labels(self, key: Any) -> object: ...
    def owners(self, key: Any) -> object: ...
    def affinity(self, key: Any) -> object: ...
    def tolerations(self, key: Any) -> object: ...
    def constraints(self, key: Any) -> object: ...
    def claims(self, key: Any) -> object: ...

    def label_keys(self, key: Any) -> tuple[str, ...]:
        """The ``matchLabelKeys`` of a constraints fragment, sorted."""

    def spec_requests(self, parts: Sequence[Any]) -> dict[str, object]:
        """The spec fields requests are computed from (containers, init containers, overhead,
        pod-level resources), of their four fragments."""

    def requirements(self, key: Any) -> object:
        """A container status's resources."""

    def allocated(self, key: Any) -> object:
        """A container status's allocatedResources."""


class PodConverter:
    """Pods of one decoder into the model, each shared fragment converted once per distinct
    encoding (memos of its own: its keys are one decoder's bytes) with ``caches`` (those of the
    builder fed, so fragments get the same numbers as on the general path)."""

    def __init__(self, caches: Caches, shapes: Shapes) -> None:
        self.caches = caches
        self.shapes = shapes
        self.problems: list[str] = []
        self.chk = Checker("", self.problems)
        no_map: tuple[dict[str, str], int] = ({}, EMPTY_NUMBER)
        absent = shapes.absent
        self._labels = Memo(no_map, absent)
        self._owners = Memo(None, absent)
        self._node_selectors = Memo(no_map, absent)
        self._affinity = Memo((None, EMPTY_NUMBER), absent)
        self._tolerations = Memo(((), EMPTY_NUMBER), absent)
        self._claims = Memo((), absent)
        self._label_keys = Memo((), absent)  # constraints' bytes -> their matchLabelKeys
        self._constraints = Memo(((), EMPTY_NUMBER), absent)
        self._requests = Memo(None, ())
        self.templates = Memo(None, ())

    def pod(self, key: Hashable, own: Own) -> Pod:
        """The Pod of what it holds of its own and the key of its workload's fragments (looked
        up, else converted)."""
        template = self.templates.data.get(key)
        if template is None:
            template = self.templates.put(key, self._template(key, own.resized, own.reasons))
        # Positional, in the order of the model's fields (new_pod: the fastest way to build it).
        # The strings many pods hold alike are interned: one object each, not one per pod
        # (150,000 pods: about 16 MiB less for the phase and the priority class alone).
        return new_pod(
            _intern(own.namespace),
            own.name,
            own.uid,
            template.labels,
            _intern(node) if (node := own.node) else None,
            own.created,
            _intern(own.phase),
            own.terminating,
            own.priority,
            _intern(pcn) if (pcn := own.priority_class_name) else None,
            template.owner,
            template.node_selector,
            template.affinity,
            template.tolerations,
            template.constraints,
            template.requests,
            own.pvc_names,
            own.local_storage,
            own.mirror,
            own.grace_period_seconds,
            own.ready,
            own.disruption_target,
            template.claims,
            own.evict_requested,
            own.prefer_no_eviction,
            own.deletion_cost,
            own.cost_mark,
            own.resource_version,
            own.scheduling_group,
            NO_FEATURES,  # a pod that may need node features takes the general path
            False,  # do_not_disrupt: a pod it protects takes the general path (annotation_flags)
            own.started,
            template.label_set,
            template.number,
        )

    # --- the shared fragments ---------------------------------------------------------------

    def _shared(
        self,
        memo: Memo,
        key: Fragment,
        shape: Callable[[Fragment], object],
        convert: Callable[[Checker, object], object],
    ) -> Any:
        """The converted fragment for ``key``: looked up, else shaped and converted."""
        found = memo.data.get(key, _MISSING)
        if found is _MISSING:
            found = convert(self.chk, shape(key))
            if self.problems:
                raise Fallback
            memo.put(key, found)
        return found

    def _template(
        self, key: Hashable, resized: Resized, reasons: tuple[str | None, ...]
    ) -> Template:
        shapes = self.shapes
        caches = self.caches
        parts = shapes.split(key)
        shared = self._shared
        labels, label_set = shared(self._labels, parts[0], shapes.labels, self._label_map)
        node_selector, selector_number = shared(
            self._node_selectors, parts[2], shapes.labels, self._node_selector
        )
        affinity, affinity_number = shared(
            self._affinity, parts[3], shapes.affinity, self._required_affinity
        )
        tolerations_, tolerations_number = shared(
            self._tolerations, parts[4], shapes.tolerations, self._toleration_list
        )
        constraints, constraints_number = self._constraints_of(parts[5], labels)
        owner = shared(self._owners, parts[1], shapes.owners, self._owner)
        requests = self._requests_of(parts[6:10], resized or ((), ()), reasons)
        claims = shared(self._claims, parts[10], shapes.claims, self._claim_names)
        number = caches.template(
            (selector_number, affinity_number, tolerations_number, constraints_number)
        )
        return Template(
            labels,
            label_set,
            owner,
            node_selector,
            affinity,
            tolerations_,
            constraints,
            requests,
            claims,
            number,
        )

    # The converter's own functions, on one fragment in the JSON shape.
    def _label_map(self, chk: Checker, value: object) -> object:
        return self.caches.labels.get(chk, {"labels": value}, "labels", "metadata")

    def _node_selector(self, chk: Checker, value: object) -> object:
        return self.caches.node_selectors.get(chk, {"nodeSelector": value}, "nodeSelector", "spec")

    def _required_affinity(self, chk: Checker, value: object) -> object:
        return required_node_affinity(chk, {"affinity": value}, self.caches)

    def _toleration_list(self, chk: Checker, value: object) -> object:
        return tolerations(chk, {"tolerations": value}, self.caches)

    def _owner(self, chk: Checker, value: object) -> object:
        return controller_owner(chk, {"ownerReferences": value}, self.caches.owners)

    def _claim_names(self, chk: Checker, value: object) -> object:
        return resource_claims(chk, {"resourceClaims": value})

    def _constraints_of(
        self, key: Fragment, labels: Mapping[str, str]
    ) -> tuple[tuple[SpreadConstraint, ...], int]:
        if key in self.shapes.absent:
            return (), EMPTY_NUMBER
        # The pod's labels matter only to constraints with matchLabelKeys, and only the values
        # of those keys: the constraints are memoised by their bytes and those values (on
        # v1.35 kube-apiserver copies the node's zone onto each pod it binds, so a workload's
        # pods carry one label set per zone, all with the same pod-template-hash).
        label_keys = self._label_keys.data.get(key)
        if label_keys is None:
            label_keys = self._label_keys.put(key, self.shapes.label_keys(key))
        memo_key = (key, tuple(map(labels.get, label_keys))) if label_keys else key
        found = self._constraints.data.get(memo_key)
        if found is None:
            doc = {"topologySpreadConstraints": self.shapes.constraints(key)}
            found = spread_constraints(self.chk, doc, labels, self.caches)
            if self.problems:
                raise Fallback
            self._constraints.put(memo_key, found)
        return found

    def _requests_of(
        self, parts: Sequence[Fragment], resized: Resized, reasons: tuple[str | None, ...]
    ) -> Mapping[str, int]:
        key = (tuple(parts), resized, reasons)
        found = self._requests.data.get(key)
        if found is None:
            shapes = self.shapes
            status_doc: dict[str, object] = {}
            for field, statuses in zip(
                ("containerStatuses", "initContainerStatuses"), resized, strict=True
            ):
                if statuses:
                    status_doc[field] = [
                        {
                            "name": name,
                            "resources": shapes.requirements(resources),
                            "allocatedResources": shapes.allocated(allocated),
                        }
                        for name, resources, allocated in statuses
                    ]
            if reasons:
                status_doc["conditions"] = [{"type": RESIZE, "reason": r} for r in reasons]
            spec_doc = shapes.spec_requests(parts)
            found = pod_requests(self.chk, spec_doc, status_doc, self.caches)
            if self.problems:
                raise Fallback
            self._requests.put(key, found)
        return found


# --- what a pod holds of its own ---------------------------------------------------------------


class _Condition(Protocol):
    @property
    def type(self) -> str | None: ...
    @property
    def status(self) -> str | None: ...


def conditions(found: Iterable[_Condition]) -> tuple[bool, bool]:
    """(Ready, DisruptionTarget), as :func:`rebalancer.core.convert.disruption.pod_conditions`."""
    ready = disruption_target = False
    for condition in found:
        kind = condition.type
        if kind == "Ready":
            ready = condition.status == "True"
        elif kind == "DisruptionTarget":
            disruption_target = condition.status == "True"
    return ready, disruption_target


def annotation_flags(found: Mapping[str, str]) -> tuple[bool, bool, bool, str | None, str | None]:
    """The five annotations read (as :func:`rebalancer.core.convert.pods.pod`): whether the pod
    carries a static pod's mirror, the descheduler's evict and prefer-no-eviction; the deletion
    cost and rebalancer's mark of it. A pod that ``karpenter.sh/do-not-disrupt`` protects raises
    :class:`Fallback`: the general path reads it (the typed paths build every pod unprotected)."""
    if not found:
        return False, False, False, None, None
    if do_not_disrupt(found.get(DO_NOT_DISRUPT_ANNOTATION)):
        raise Fallback
    return (
        MIRROR_ANNOTATION in found,
        EVICT_ANNOTATION in found,
        PREFER_NO_EVICTION_ANNOTATION in found,
        found.get(DELETION_COST_ANNOTATION),
        found.get(COST_MARK_ANNOTATION),
    )


def volumes(
    found: Iterable[tuple[str | None, bool, str | None, bool]], pod_name: str
) -> tuple[tuple[str, ...], bool]:
    """As :func:`rebalancer.core.convert.pods._volumes` reads them, of each volume's (name,
    whether it has an emptyDir, the claim name of its persistentVolumeClaim or None, whether it
    has an ephemeral source)."""
    claims: list[str] = []
    local = False
    for name, empty_dir, claim, ephemeral in found:
        if empty_dir:
            local = True
        if claim is not None:
            if not claim:
                raise Fallback
            claims.append(claim)
        elif ephemeral:
            if not name:
                raise Fallback
            claims.append(f"{pod_name}-{name}")
    return tuple(claims), local
