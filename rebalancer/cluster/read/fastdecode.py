"""Typed decoding of API objects straight into the model (msgspec), with the converter as
the authority.

A pod is decoded by :mod:`msgspec` into small Structs that declare only the fields the planner
reads: everything else (managedFields, env, probes, images, container statuses...) is skipped
at C speed and never becomes a Python object. The fragments a workload's pods share (labels,
owner references, node selector, affinity, tolerations, spread constraints, containers) stay
raw JSON bytes: each distinct fragment is decoded and converted once, by the very functions of
:mod:`rebalancer.core.convert`, and its bytes are the memo key from then on. Annotations are
decoded as a string map, of which only five keys are read (mirror, the descheduler's two,
the deletion cost and rebalancer's mark of it).

The converter stays the authority on what is valid and on every problem's wording: an object
the typed path cannot take exactly as the converter would (a field of an unexpected type, any
problem at all, a kind other than Pod) is parsed with orjson and given to
:meth:`SnapshotBuilder.add`, which converts it or names its problems with their paths. Any
doubt about the document's shape (not a List, nested Lists, invalid JSON) returns ``None`` and
the caller takes the general path. tests/test_fastdecode.py checks both paths give equal
snapshots.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any, Final, Protocol

import msgspec
import orjson
from msgspec import Raw, Struct

from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.read.nesting import MAX_JSON_DEPTH, too_deep
from rebalancer.core.convert import SnapshotBuilder
from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.constraints import spread_constraints
from rebalancer.core.convert.disruption import resource_claims
from rebalancer.core.convert.features import NO_FEATURES
from rebalancer.core.convert.memo import EMPTY_NUMBER, Caches
from rebalancer.core.convert.meta import controller_owner, epoch
from rebalancer.core.convert.pods import (
    COST_MARK_ANNOTATION,
    DELETION_COST_ANNOTATION,
    EVICT_ANNOTATION,
    MIRROR_ANNOTATION,
    PREFER_NO_EVICTION_ANNOTATION,
    required_node_affinity,
    tolerations,
)
from rebalancer.core.convert.requests import pod_requests
from rebalancer.core.model import Pod, new_pod

__all__ = ["FastBuilder", "load_lines", "load_list"]

_ABSENT: Final = Raw()
_NULL: Final = Raw(b"null")
_INT_MIN: Final = -(2**63)
_INT_END: Final = 2**63  # int64, as the API has it (the converter names anything beyond)
_INT32_MIN: Final = -(2**31)
_INT32_END: Final = 2**31
_MEMO_LIMIT: Final = 16384
_RESIZE: Final = "PodResizePending"
_MISSING: Final = object()
_NO_VOLUMES: Final[tuple[tuple[str, ...], bool]] = ((), False)
_JOIN: Final = b"\0".join
_intern: Final = sys.intern
# RFC 3339 as the API server writes it (UTC, whole seconds): its seconds are read as a number.
_API_TIME: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-5][0-9]Z")


# --- the shapes read (field names are the API's) ---------------------------------------------


class _Meta(Struct):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: Raw = _ABSENT
    labels: Raw = _ABSENT
    # Only whether the mirror key (and the descheduler's two) is present is kept; decoding
    # them as strings checks them as the converter would (anything else fails the item,
    # which then takes the general path and is reported there), at C speed: most pods'
    # annotations are their own.
    annotations: dict[str, str] | None = None
    ownerReferences: Raw = _ABSENT
    resourceVersion: str | None = None


class _Volume(Struct):
    name: str | None = None
    emptyDir: Raw = _ABSENT
    persistentVolumeClaim: Raw = _ABSENT
    ephemeral: Raw = _ABSENT


class _SchedulingGroup(Struct):
    podGroupName: str | None = None


class _Spec(Struct):
    nodeName: str | None = None
    nodeSelector: Raw = _ABSENT
    affinity: Raw = _ABSENT
    tolerations: Raw = _ABSENT
    topologySpreadConstraints: Raw = _ABSENT
    priority: int | None = None
    priorityClassName: str | None = None
    terminationGracePeriodSeconds: int | None = None
    containers: Raw = _ABSENT
    initContainers: Raw = _ABSENT
    overhead: Raw = _ABSENT
    resources: Raw = _ABSENT
    resourceClaims: Raw = _ABSENT
    volumes: list[_Volume] | None = None
    schedulingGroup: _SchedulingGroup | None = None
    # Read only to send the rare pod that may need a node feature to the general path.
    hostNetwork: bool | None = None
    hostUsers: Raw = _ABSENT
    ephemeralContainers: Raw = _ABSENT


class _Condition(Struct):
    type: str | None = None
    status: str | None = None
    reason: str | None = None


class _ContainerStatus(Struct):
    name: str | None = None
    resources: Raw = _ABSENT
    allocatedResources: Raw = _ABSENT


class _Status(Struct):
    phase: str | None = None
    conditions: list[_Condition] | None = None
    containerStatuses: list[_ContainerStatus] | None = None
    initContainerStatuses: list[_ContainerStatus] | None = None


class _Item(Struct):
    kind: str | None = None
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | None = None
    items: Raw = _ABSENT  # a nested List: the general path unrolls it


class _List(Struct):
    kind: str | None = None
    items: list[Raw] | None = None


class _PageMeta(Struct):
    continue_: str | None = msgspec.field(default=None, name="continue")
    resourceVersion: str | None = None


class _Page(Struct):
    metadata: _PageMeta | None = None
    items: list[Raw] = msgspec.field(default_factory=list)


_EMPTY_META: Final = _Meta()
_EMPTY_SPEC: Final = _Spec()
_EMPTY_STATUS: Final = _Status()
_ITEM: Final = msgspec.json.Decoder(_Item)
_LIST: Final = msgspec.json.Decoder(_List)
_PAGE: Final = msgspec.json.Decoder(_Page)


# Container fields from which kube-scheduler infers node features a pod needs
# (rebalancer.core.convert.features): a pod naming one takes the general path.
_FEATURE_FIELDS: Final = (b'"restartPolicyRules"', b'"bindMountOptions"')


def _given(raw: Raw) -> bool:
    """The field is present and not ``null``."""
    return len(raw) > 0 and raw != _NULL


def _key(raw: Raw) -> bytes:
    return bytes(raw)


_Digest = tuple[Any, ...]
"""What :meth:`FastBuilder._digest` returns."""


def _fragments(key: Any) -> tuple[_Meta, _Spec]:
    """The shared fragments a template key was joined from, as the decoder gave them."""
    joined = key if type(key) is bytes else key[0]
    (
        labels,
        owners,
        node_selector,
        affinity,
        tolerations_,
        constraints,
        containers,
        init_containers,
        overhead,
        resources,
        claims,
    ) = joined.split(b"\0")
    meta = _Meta(labels=Raw(labels), ownerReferences=Raw(owners))
    spec = _Spec(
        nodeSelector=Raw(node_selector),
        affinity=Raw(affinity),
        tolerations=Raw(tolerations_),
        topologySpreadConstraints=Raw(constraints),
        containers=Raw(containers),
        initContainers=Raw(init_containers),
        overhead=Raw(overhead),
        resources=Raw(resources),
        resourceClaims=Raw(claims),
    )
    return meta, spec


class _Fallback(Exception):  # control flow, never escapes this module
    """The typed path cannot take this object exactly as the converter would."""


class _Memo:
    """Converted fragments keyed by their raw bytes (bounded: cleared when full). An absent
    (``b""``) or ``null`` fragment maps to the converter's value for an absent field."""

    __slots__ = ("absent", "data")

    def __init__(self, absent: Any = None) -> None:
        self.absent = absent
        self.data: dict[Any, Any] = {b"": absent, b"null": absent}

    def put(self, key: Any, value: Any) -> Any:
        if len(self.data) >= _MEMO_LIMIT:
            self.data = {b"": self.absent, b"null": self.absent}
        self.data[key] = value
        return value


def _loads(key: bytes) -> Any:
    """A fragment as the general path would have parsed it (orjson)."""
    try:
        return orjson.loads(key)
    except orjson.JSONDecodeError as exc:
        raise _Fallback from exc


class Sink(Protocol):
    """Where converted objects go: a :class:`SnapshotBuilder`, or a watch store."""

    @property
    def caches(self) -> Caches: ...

    def add(self, obj: Mapping[str, Any]) -> None: ...

    def add_converted(self, kind: str, item: Any) -> None: ...


class FastBuilder:
    """Feeds a :class:`SnapshotBuilder` (or any :class:`Sink`): pods through the typed path,
    everything else (and any pod the typed path cannot take) through its ``add``."""

    def __init__(self, builder: Sink) -> None:
        self.builder = builder
        self.caches: Caches = builder.caches
        add_pod = getattr(builder, "add_pod", None)
        self._add_pod: Callable[[Pod], None] = add_pod or (
            lambda pod: builder.add_converted("Pod", pod)
        )
        self._problems: list[str] = []
        self._chk = Checker("", self._problems)
        no_map: tuple[dict[str, str], int] = ({}, EMPTY_NUMBER)
        self._labels = _Memo(no_map)
        self._owners = _Memo(None)
        self._node_selectors = _Memo(no_map)
        self._affinity = _Memo((None, EMPTY_NUMBER))
        self._tolerations = _Memo(((), EMPTY_NUMBER))
        self._constraints = _Memo()
        self._constraint_docs = _Memo()
        self._requests = _Memo()
        self._claims = _Memo(())
        self._templates = _Memo()
        self._volume_claims = _Memo()
        self._times: dict[str, float] = {}
        self._minutes: dict[str, float] = {}

    # --- one item ---------------------------------------------------------------------------

    def add_raw(self, raw: bytes | Raw, kind: str | None = None) -> bool:
        """Add one item of a file from its JSON bytes; ``kind`` is the item kind of a typed
        list (the API leaves it out of list items). False when the document must take the
        general path (the item is not an object, has no kind, or is itself a List)."""
        try:
            item = _ITEM.decode(raw)
        except msgspec.ValidationError:
            return self._add_general(raw, kind, listed=False)
        except (msgspec.DecodeError, UnicodeDecodeError):  # not UTF-8: the general path says so
            return False
        item_kind = item.kind if item.kind is not None else kind
        if not item_kind or len(item.items) > 0:
            return self._add_general(raw, kind, listed=False)
        return self._add_item(item, item_kind, raw, listed=False)

    def add_listed(self, raw: bytes | Raw, kind: str) -> bool:
        """Add one item of a LIST page of ``kind`` (which the item itself leaves out); False
        when it is not an object."""
        try:
            item = _ITEM.decode(raw)
        except msgspec.ValidationError:
            return self._add_general(raw, kind, listed=True)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return False
        return self._add_item(item, kind, raw, listed=True)

    def _add_item(self, item: _Item, kind: str, raw: bytes | Raw, listed: bool) -> bool:
        if kind != "Pod":
            if kind in _KINDS:
                return self._add_general(raw, kind, listed)
            self.builder.add({"kind": kind})  # counted as ignored
            return True
        try:
            converted = self._pod(item)
        except _Fallback:
            self._problems.clear()
            return self._add_general(raw, kind, listed)
        self._add_pod(converted)
        return True

    def _add_general(self, raw: bytes | Raw, kind: str | None, listed: bool) -> bool:
        """The item through orjson and :meth:`SnapshotBuilder.add`, as the general path does."""
        try:
            obj = orjson.loads(bytes(raw))
        except orjson.JSONDecodeError:
            return False
        if not isinstance(obj, dict):
            return False
        if listed:
            obj["kind"] = kind
        else:
            if "items" in obj:
                return False
            if obj.get("kind") is None and kind is not None:
                obj["kind"] = kind
            item_kind = obj.get("kind")
            if type(item_kind) is not str or not item_kind:
                return False
        self.builder.add(obj)
        return True

    # --- pods -------------------------------------------------------------------------------

    def _shared(self, memo: _Memo, raw: Raw, convert: Callable[[Any], Any]) -> Any:
        """The converted fragment for ``raw``: looked up by its bytes, else converted."""
        key = bytes(raw)
        found = memo.data.get(key, _MISSING)
        if found is _MISSING:
            found = convert(_loads(key))
            if self._problems:
                raise _Fallback
            memo.put(key, found)
        return found

    # Conversions of one distinct fragment each, by the converter's own functions.
    def _labels_of(self, value: Any) -> Any:
        return self.caches.labels.get(self._chk, {"labels": value}, "labels", "metadata")

    def _owner_of(self, value: Any) -> Any:
        return controller_owner(self._chk, {"ownerReferences": value}, self.caches.owners)

    def _node_selector_of(self, value: Any) -> Any:
        return self.caches.node_selectors.get(
            self._chk, {"nodeSelector": value}, "nodeSelector", "spec"
        )

    def _affinity_of(self, value: Any) -> Any:
        return required_node_affinity(self._chk, {"affinity": value}, self.caches)

    def _tolerations_of(self, value: Any) -> Any:
        return tolerations(self._chk, {"tolerations": value}, self.caches)

    def _claims_of(self, value: Any) -> Any:
        return resource_claims(self._chk, {"resourceClaims": value})

    def _template(self, meta: _Meta, spec: _Spec, resized: Any, reasons: Any) -> tuple[Any, ...]:
        """What a workload's pods share, each fragment through its own memo."""
        for raw in (bytes(spec.containers), bytes(spec.initContainers)):
            if _FEATURE_FIELDS[0] in raw or _FEATURE_FIELDS[1] in raw:
                raise _Fallback  # it may need node features: the general path infers them
        shared = self._shared
        labels, label_set = shared(self._labels, meta.labels, self._labels_of)
        node_selector, selector_number = shared(
            self._node_selectors, spec.nodeSelector, self._node_selector_of
        )
        affinity, affinity_number = shared(self._affinity, spec.affinity, self._affinity_of)
        tolerations_, tolerations_number = shared(
            self._tolerations, spec.tolerations, self._tolerations_of
        )
        constraints, constraints_number = self._constraints_of(
            spec.topologySpreadConstraints, labels, label_set
        )
        return (
            labels,
            label_set,
            shared(self._owners, meta.ownerReferences, self._owner_of),
            node_selector,
            affinity,
            tolerations_,
            constraints,
            self._requests_of(spec, resized, reasons),
            shared(self._claims, spec.resourceClaims, self._claims_of),
            self.caches.template(
                (selector_number, affinity_number, tolerations_number, constraints_number)
            ),
        )

    def _pod(self, item: _Item) -> Pod:
        digest = self._digest(item)
        return self._finish(digest[0], digest, item)

    def _digest(self, item: _Item) -> _Digest:
        """What one pod holds of its own (its name, node, timestamps, annotations, volumes,
        conditions) and the key of the fragments its workload shares: everything but the
        shared conversions, which number fragments and so must happen in file order
        (:meth:`_finish`). Plain values: a worker process may compute it (see
        :func:`_fork`)."""
        meta = item.metadata or _EMPTY_META
        spec = item.spec or _EMPTY_SPEC
        status = item.status or _EMPTY_STATUS
        name = meta.name
        if (
            not name
            or (spec.hostNetwork and _given(spec.hostUsers))
            or _given(spec.ephemeralContainers)
        ):
            raise _Fallback  # no name; or it may need node features (convert.features)
        # One lookup for everything a workload's pods share, by the bytes of its fragments,
        # joined by NUL (which JSON text never holds unescaped, so distinct fragments give
        # distinct keys; an absent field is empty, a null one "null"). One join per pod: a
        # key lives only for its lookup (a worker sends each distinct key once, then its
        # number), so none is kept per pod.
        key: Any = _JOIN(
            (
                meta.labels,
                meta.ownerReferences,
                spec.nodeSelector,
                spec.affinity,
                spec.tolerations,
                spec.topologySpreadConstraints,
                spec.containers,
                spec.initContainers,
                spec.overhead,
                spec.resources,
                spec.resourceClaims,
            )
        )
        resized: Any = ()
        reasons: Any = ()
        if status.containerStatuses or status.initContainerStatuses:
            resized = (_resized(status.containerStatuses), _resized(status.initContainerStatuses))
            if resized[0] or resized[1]:
                reasons = tuple(c.reason for c in status.conditions or () if c.type == _RESIZE)
                key = (key, resized, reasons)
            else:
                resized = ()
        annotations = meta.annotations
        if annotations:
            mirror = MIRROR_ANNOTATION in annotations
            evict = EVICT_ANNOTATION in annotations
            prefer_no = PREFER_NO_EVICTION_ANNOTATION in annotations
            cost = annotations.get(DELETION_COST_ANNOTATION)
            mark = annotations.get(COST_MARK_ANNOTATION)
        else:
            mirror = evict = prefer_no = False
            cost = mark = None
        pvc_names, local_storage = (
            self._volumes(spec.volumes, name) if spec.volumes else _NO_VOLUMES
        )
        priority = spec.priority
        if priority is not None and not _INT32_MIN <= priority < _INT32_END:
            raise _Fallback
        grace = spec.terminationGracePeriodSeconds
        if grace is not None and not _INT_MIN <= grace < _INT_END:
            raise _Fallback
        ready = disruption_target = False
        for condition in status.conditions or ():
            if condition.type == "Ready":
                ready = condition.status == "True"
            elif condition.type == "DisruptionTarget":
                disruption_target = condition.status == "True"
        timestamp = meta.creationTimestamp
        created = 0.0
        if timestamp is not None:
            found = self._times.get(timestamp)
            created = found if found is not None else self._epoch(timestamp)
        group = spec.schedulingGroup
        return (
            key,
            resized,
            reasons,
            meta.namespace or "default",
            name,
            meta.uid or "",
            spec.nodeName or None,
            created,
            status.phase or "Pending",
            _given(meta.deletionTimestamp),
            priority,
            spec.priorityClassName or None,
            pvc_names,
            local_storage,
            mirror,
            grace,
            ready,
            disruption_target,
            evict,
            prefer_no,
            cost,
            mark,
            meta.resourceVersion or "",
            (group.podGroupName or None) if group is not None else None,
        )

    def _finish(self, key: Any, digest: _Digest, item: _Item | None = None) -> Pod:
        """The Pod of a digest: its workload's shared fragments looked up by ``key`` (the
        digest's first field, or what it stands for in a worker's answer; converted when
        new, from ``item`` or else from the key's own bytes), then built."""
        (
            _,
            resized,
            reasons,
            namespace,
            name,
            uid,
            node,
            created,
            phase,
            terminating,
            priority,
            priority_class_name,
            pvc_names,
            local_storage,
            mirror,
            grace,
            ready,
            disruption_target,
            evict,
            prefer_no,
            cost,
            mark,
            resource_version,
            pod_group,
        ) = digest
        template = self._templates.data.get(key)
        if template is None:
            if item is not None:
                meta, spec = item.metadata or _EMPTY_META, item.spec or _EMPTY_SPEC
            else:
                meta, spec = _fragments(key)
            template = self._templates.put(key, self._template(meta, spec, resized, reasons))
        (
            labels,
            label_set,
            owner,
            node_selector,
            affinity,
            tolerations_,
            constraints,
            requests,
            claims,
            template_number,
        ) = template
        # Positional, in the order of the model's fields (new_pod: the fastest way to build it).
        # The strings many pods hold alike are interned: one object each, not one per pod
        # (150,000 pods: about 16 MiB less for the phase and the priority class alone).
        return new_pod(
            _intern(namespace),
            name,
            uid,
            labels,
            _intern(node) if node else None,
            created,
            _intern(phase),
            terminating,
            priority,
            _intern(priority_class_name) if priority_class_name else None,
            owner,
            node_selector,
            affinity,
            tolerations_,
            constraints,
            requests,
            pvc_names,
            local_storage,
            mirror,
            grace,
            ready,
            disruption_target,
            claims,
            evict,
            prefer_no,
            cost,
            mark,
            resource_version,
            pod_group,
            NO_FEATURES,
            label_set,
            template_number,
        )

    def _epoch(self, value: str) -> float:
        """``metadata.creationTimestamp`` in epoch seconds, as the converter reads it. A
        timestamp in the API's own form (``2025-10-09T08:55:07Z``) is its minute's (converted
        once) plus its seconds: the same number, without parsing a date per pod."""
        if _API_TIME.fullmatch(value):
            minute = value[:17]
            start = self._minutes.get(minute)
            if start is None:
                start = self._minutes[minute] = self._parse_time(minute + "00Z")
            found = start + int(value[17:19])
        else:
            found = self._parse_time(value)
        if len(self._times) >= _MEMO_LIMIT:
            self._times.clear()
        self._times[value] = found
        return found

    def _parse_time(self, value: str) -> float:
        found = epoch(self._chk, value, "metadata.creationTimestamp")
        if self._problems:
            raise _Fallback
        return found

    def _volumes(self, volumes: list[_Volume], pod_name: str) -> tuple[tuple[str, ...], bool]:
        """As :func:`rebalancer.core.convert.pods._volumes` reads them."""
        claims: list[str] = []
        local = False
        for volume in volumes:
            if _given(volume.emptyDir):
                local = True
            if _given(volume.persistentVolumeClaim):
                claims.append(self._claim_name(volume.persistentVolumeClaim))
            elif _given(volume.ephemeral):
                if not volume.name:
                    raise _Fallback
                claims.append(f"{pod_name}-{volume.name}")
        return tuple(claims), local

    def _claim_name(self, raw: Raw) -> str:
        key = bytes(raw)
        found: str | None = self._volume_claims.data.get(key)
        if found is None:
            claim = _loads(key)
            name = claim.get("claimName") if type(claim) is dict else None
            if type(name) is not str or not name:
                raise _Fallback
            found = self._volume_claims.put(key, name)
        return found

    def _constraints_of(self, raw: Raw, labels: Mapping[str, str], label_set: int) -> Any:
        if not _given(raw):
            return (), EMPTY_NUMBER
        doc_key = bytes(raw)
        key = (doc_key, label_set)
        found = self._constraints.data.get(key)
        if found is None:
            doc = self._constraint_docs.data.get(doc_key)
            if doc is None:
                doc = self._constraint_docs.put(doc_key, _loads(doc_key))
            found = spread_constraints(
                self._chk, {"topologySpreadConstraints": doc}, labels, self.caches
            )
            if self._problems:
                raise _Fallback
            self._constraints.put(key, found)
        return found

    def _requests_of(self, spec: _Spec, resized: Any, reasons: Any) -> Any:
        if not resized:
            resized = ((), ())
        key = (
            _key(spec.containers),
            _key(spec.initContainers),
            _key(spec.overhead),
            _key(spec.resources),
            resized,
            reasons,
        )
        found = self._requests.data.get(key)
        if found is None:
            spec_doc: dict[str, Any] = {}
            for field, raw in (
                ("containers", spec.containers),
                ("initContainers", spec.initContainers),
                ("overhead", spec.overhead),
                ("resources", spec.resources),
            ):
                if len(raw) > 0:
                    spec_doc[field] = _loads(bytes(raw))
            status_doc: dict[str, Any] = {}
            for field, statuses in (
                ("containerStatuses", resized[0]),
                ("initContainerStatuses", resized[1]),
            ):
                if statuses:
                    status_doc[field] = [
                        {
                            "name": name,
                            "resources": _loads(resources),
                            "allocatedResources": _loads(allocated) if allocated else None,
                        }
                        for name, resources, allocated in statuses
                    ]
            if reasons:
                status_doc["conditions"] = [{"type": _RESIZE, "reason": r} for r in reasons]
            found = pod_requests(self._chk, spec_doc, status_doc, self.caches)
            if self._problems:
                raise _Fallback
            self._requests.put(key, found)
        return found


def _resized(
    statuses: list[_ContainerStatus] | None,
) -> tuple[tuple[str | None, bytes, bytes], ...]:
    """The container statuses that report resources (in-place resize), as memo key parts."""
    if not statuses:
        return ()
    return tuple(
        (cs.name, bytes(cs.resources), bytes(cs.allocatedResources))
        for cs in statuses
        if _given(cs.resources)
    )


_KINDS: Final = frozenset(
    {
        "Node",
        "PodDisruptionBudget",
        "PriorityClass",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "Service",
        "ReplicaSet",
        "StatefulSet",
        "ReplicationController",
        "Deployment",
    }
)


# --- documents ------------------------------------------------------------------------------


def may_nest_deeper(body: bytes, limit: int) -> bool:
    """Whether one item's JSON may nest more than ``limit`` deep: cheap (two counts) for the
    usual item, measured (:func:`~rebalancer.cluster.read.nesting.too_deep`) when it has many
    brackets."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    return too_deep(body, limit) is not None


def load_list(data: bytes, source: str) -> SnapshotBuilder | None:
    """The objects of a JSON ``kind: List`` (or a typed list such as ``PodList``) in a
    builder; None when the document is anything else or strays from plain API objects (the
    general path then parses it whole and names every problem). A large document's later
    items are digested by a second process meanwhile (:func:`_fork`)."""
    try:
        document = _LIST.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):
        return None
    kind = document.kind
    if document.items is None or (kind is not None and not kind.endswith("List")):
        return None
    inner = kind[: -len("List")] if kind is not None and kind != "List" else None
    builder = SnapshotBuilder(source)
    fast = FastBuilder(builder)
    add = fast.add_raw
    items = document.items
    del document
    with gc_paused():
        mine = len(items)
        worker = None
        if len(data) >= SPLIT_MIN_BYTES and _can_fork():
            split = int(len(items) * (1 - _WORKER_SHARE))
            worker = _fork(
                fast, lambda: _item_digests(fast, enumerate(items[split:], split), inner)
            )
            mine = split if worker is not None else mine
        try:
            for raw in items[:mine]:
                if not add(raw, inner):
                    return None
            if worker is not None and not _replay(fast, worker, inner, items.__getitem__):
                return None
        except _Stray:  # an item the worker could not decode
            return None
        finally:
            if worker is not None:
                worker.close()
    return builder


def load_lines(lines: Iterable[bytes], source: str, tail: bytes) -> SnapshotBuilder | None:
    """The objects of the line-per-item layout after its first line (see
    :func:`rebalancer.cluster.read.snapshot.dump_objects`) in a builder; None when the text strays
    from it."""
    builder = SnapshotBuilder(source)
    fast = FastBuilder(builder)
    add = fast.add_raw
    with gc_paused():
        try:
            for _, body in _line_bodies(lines, tail, 0, whole=True):
                if not add(body):
                    return None
        except _Stray:
            return None
    return builder


def load_file_lines(fh: IO[bytes], source: str, tail: bytes) -> SnapshotBuilder | None:
    """:func:`load_lines` from a file positioned after its first line; a large file's later
    lines are digested by a second process meanwhile (:func:`_fork`)."""
    split = _line_split(fh)
    if split is None:
        return load_lines(fh, source, tail)
    start, stop, fd, other = split
    builder = SnapshotBuilder(source)
    fast = FastBuilder(builder)
    add = fast.add_raw

    def later() -> Iterator[object]:
        other.seek(stop)
        return _item_digests(fast, _line_bodies(other, tail, stop, whole=True), None)

    def body_at(locator: tuple[int, int]) -> bytes:
        return os.pread(fd, locator[1], locator[0])

    with gc_paused():
        worker = _fork(fast, later)
        other.close()
        if worker is None:
            return load_lines(fh, source, tail)
        try:
            for _, body in _line_bodies(_until(fh, start, stop), tail, start, whole=False):
                if not add(body):
                    return None
            if not _replay(fast, worker, None, body_at):
                return None
        except _Stray:
            return None
        finally:
            worker.close()
    return builder


# --- a second process -----------------------------------------------------------------------
# A large document is converted by two processes: this one converts its first items while a
# forked worker digests the others (decoding and everything each pod holds of its own, see
# FastBuilder._digest) and sends the digests back, pickled; this one then finishes them in file
# order, so that the shared fragments are converted and numbered exactly as in one process
# (tests/test_fastdecode.py compares both). Only in a process with no other thread, on a machine
# with a second core; a worker that fails leaves the document to the general path.

SPLIT_MIN_BYTES = 48 * 2**20
"""Documents smaller than this are converted by one process (forking costs a few ms)."""
# Of a document's items. This process also reads the file, cuts it into items and finishes
# every digest, so a worker that digests most items still keeps ahead of it (474 MB kubectl
# document of 150,000 pods: load 1.94 s with a quarter here, 1.75 s with a tenth; with less
# it waits for the worker's frames).
_WORKER_SHARE: Final = 0.9
# Of a line-per-item file's bytes. Its lines are small and cheap to digest (4.7 us each at
# 150,000 pods, against about 7 us to finish one here), so the worker keeps ahead of this
# process from its first frame on: this process only needs a short head of its own to fill
# the wait for that frame. A quarter, as for a document, left the worker idle for half the
# load while this process converted its share (150,000 pods: load 1.36 s -> 1.18 s).
_LINES_WORKER_SHARE: Final = 0.95
_FRAME: Final = 2048  # answers per pickle


class _Stray(Exception):  # control flow, never escapes this module
    """The text strays from the line-per-item layout."""


def _can_fork() -> bool:
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    return (
        hasattr(os, "fork")
        and cores >= 2
        and threading.current_thread() is threading.main_thread()
        and threading.active_count() == 1
    )


def _line_bodies(
    lines: Iterable[bytes], tail: bytes, offset: int, *, whole: bool
) -> Iterator[tuple[tuple[int, int], bytes]]:
    """Each item line's (offset and length of its item, its item) from ``offset`` on; raises
    :class:`_Stray` on text after the closing line, and (``whole``) when there is none."""
    ended = False
    for raw in lines:
        at = offset
        offset += len(raw)
        if raw[-2:] == b",\n" and not ended:  # an item and its comma: most lines
            if may_nest_deeper(raw, MAX_JSON_DEPTH):
                raise _Stray  # the general path measures the whole text and refuses it
            yield (at, len(raw) - 2), raw[:-2]
            continue
        line = raw.rstrip(b"\r\n")
        if ended:
            if line.strip(b" \t\r\n"):
                raise _Stray  # text after the closing line
            continue
        if line == tail:
            if not whole:
                raise _Stray  # the closing line before the split: one process reads it all
            ended = True
            continue
        body = line[:-1] if line.endswith(b",") else line
        if may_nest_deeper(body, MAX_JSON_DEPTH):
            raise _Stray
        yield (at, len(body)), body
    if whole and not ended:
        raise _Stray


def _until(fh: IO[bytes], start: int, stop: int) -> Iterator[bytes]:
    """The lines of ``fh`` (at ``start``) that end at or before ``stop`` (a line start)."""
    at = start
    for raw in fh:
        yield raw
        at += len(raw)
        if at >= stop:
            return


def _line_split(fh: IO[bytes]) -> tuple[int, int, int, IO[bytes]] | None:
    """Where a second process should take over a line-per-item file: (this process's start,
    the worker's start, the file descriptor, a second handle on the file for the worker);
    None when one process should read it all."""
    try:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        start = fh.tell()
    except (OSError, AttributeError, ValueError):
        return None
    if size - start < SPLIT_MIN_BYTES or not _can_fork():
        return None
    middle = start + int((size - start) * (1 - _LINES_WORKER_SHARE))
    newline = os.pread(fd, 1 << 20, middle).find(b"\n")
    if newline < 0:
        return None
    try:  # its own offset: the worker must not move this process's
        other = open(f"/proc/self/fd/{fd}", "rb")  # noqa: SIM115  # closed after the fork
    except OSError:
        return None
    return start, middle + newline + 1, fd, other


def _item_digests(
    fast: FastBuilder, items: Iterable[tuple[Any, bytes | Raw]], kind: str | None
) -> Iterator[object]:
    """The worker's answer per item: (its locator, the pod's digest) for a pod the typed path
    takes, its template key replaced by a number (a new key comes first, alone in a list);
    the item's bytes (lines) or index (a list) for anything else, which this process adds as
    usual. Raises msgspec.DecodeError for an item that is no JSON object."""
    keys: dict[Any, int] = {}
    for locator, raw in items:
        try:
            item = _ITEM.decode(raw)
        except msgspec.ValidationError:
            yield locator if type(locator) is int else bytes(raw)
            continue
        item_kind = item.kind if item.kind is not None else kind
        if item_kind == "Pod" and len(item.items) == 0:
            try:
                digest = fast._digest(item)
            except _Fallback:
                fast._problems.clear()
            else:
                number = keys.get(digest[0])
                if number is None:
                    number = keys[digest[0]] = len(keys)
                    yield [digest[0]]
                yield locator, (number, *digest[1:])
                continue
        yield locator if type(locator) is int else bytes(raw)


class _Worker:
    """A forked worker's answers: pickled frames of :data:`_FRAME` answers, which it appends
    to a spool file (so it never waits for this process), and one byte per frame written on a
    pipe once the frame is whole."""

    def __init__(self, pid: int, spool: IO[bytes], ready_fd: int) -> None:
        self.pid = pid
        self.spool = spool
        self.ready_fd = ready_fd

    def answers(self) -> Iterator[object]:
        """The worker's answers in order; raises :class:`_Stray` when its items strayed from
        the layout, or EOFError when it failed."""
        fd = self.spool.fileno()
        offset = ready = 0
        while True:
            if not ready:
                ready = len(os.read(self.ready_fd, 1 << 16))  # waits for the next frames
                if not ready:
                    raise EOFError("the worker ended early")
            size = int.from_bytes(os.pread(fd, 8, offset), "big")
            answers = pickle.loads(os.pread(fd, size, offset + 8))
            offset += 8 + size
            ready -= 1
            if answers is None:
                return
            if answers is False:
                raise _Stray
            yield from answers

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)  # done already, or no longer needed
        os.waitpid(self.pid, 0)
        os.close(self.ready_fd)
        self.spool.close()


def _spool() -> IO[bytes]:
    """An anonymous file for the worker's frames: in memory where the system allows."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        with contextlib.suppress(OSError):
            return open(memfd("rebalancer-digests", os.MFD_CLOEXEC), "w+b")
    return tempfile.TemporaryFile()  # closed by _Worker.close


def _fork(fast: FastBuilder, answers: Callable[[], Iterator[object]]) -> _Worker | None:
    """Start a worker computing ``answers()`` (in a copy of this process) and sending them;
    None when it cannot be started (one process then converts everything)."""
    try:
        spool = _spool()
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        spool.close()
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid:
        os.close(write_fd)
        return _Worker(pid, spool, read_fd)
    code = 1  # the worker: never returns
    try:
        os.close(read_fd)
        out = open(spool.fileno(), "wb", closefd=False)  # noqa: SIM115  # flushed below

        def send(value: object) -> None:
            frame = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
            out.write(len(frame).to_bytes(8, "big"))
            out.write(frame)
            out.flush()
            os.write(write_fd, b"+")

        chunk: list[object] = []
        try:
            for answer in answers():
                chunk.append(answer)
                if len(chunk) == _FRAME:
                    send(chunk)
                    chunk = []
            send(chunk)
            send(None)
        except (_Stray, msgspec.DecodeError):
            send(False)
        code = 0
    finally:
        os._exit(code)


def _replay(
    fast: FastBuilder, worker: _Worker, kind: str | None, body_of: Callable[[Any], bytes | Raw]
) -> bool:
    """Add the worker's items in order; False when the document must take the general path
    (raises :class:`_Stray` for lines that strayed from the layout)."""
    add = fast.add_raw
    finish = fast._finish
    add_pod = fast._add_pod
    keys: list[Any] = []
    try:
        for answer in worker.answers():
            if type(answer) is tuple:
                locator, digest = answer  # the digest holds its key's number
                try:
                    pod = finish(keys[digest[0]], digest)
                except _Fallback:
                    fast._problems.clear()
                    if not fast._add_general(body_of(locator), kind, listed=False):
                        return False
                    continue
                add_pod(pod)
            elif type(answer) is list:
                keys.append(answer[0])
            elif not add(body_of(answer) if type(answer) is int else answer, kind):  # type: ignore[arg-type]
                return False
    except (EOFError, pickle.UnpicklingError, OSError):
        return False
    return True


def page_parts(raw: bytes) -> tuple[list[Raw], str | None, str | None] | None:
    """A LIST page's items (raw), continue token (None on the last page) and
    resourceVersion; None when the page is not a plain list (the reader then parses it with
    its general path, which names what is wrong)."""
    if too_deep(raw) is not None:
        return None  # the general path refuses it, naming the list
    try:
        page = _PAGE.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):
        return None
    if page.metadata is None:
        return page.items, None, None
    return page.items, page.metadata.continue_ or None, page.metadata.resourceVersion


def page_items(raw: bytes) -> tuple[list[Raw], str | None] | None:
    """A LIST page's items (raw) and its continue token; None as for :func:`page_parts`."""
    parts = page_parts(raw)
    return None if parts is None else (parts[0], parts[1])
