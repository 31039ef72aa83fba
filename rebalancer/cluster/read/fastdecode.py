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

import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec
import orjson
from msgspec import Raw, Struct

from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.read.nesting import MAX_JSON_DEPTH, too_deep
from rebalancer.cluster.read.podconvert import (
    MEMO_LIMIT,
    NO_VOLUMES,
    RESIZE,
    Fallback,
    Own,
    PodConverter,
    Resized,
    annotation_flags,
    conditions,
    volumes,
)
from rebalancer.core.api import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    KINDS,
    Caches,
    Pod,
    SnapshotBuilder,
    epoch,
)

__all__ = ["FastBuilder", "load_lines", "load_list"]

_ABSENT: Final = Raw()
_NULL: Final = Raw(b"null")
_JOIN: Final = b"\0".join
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
    startTime: str | None = None
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


def _loads(key: bytes) -> Any:
    """A fragment as the general path would have parsed it (orjson)."""
    try:
        return orjson.loads(key)
    except orjson.JSONDecodeError as exc:
        raise Fallback from exc


class _JsonShapes:
    """Fragments as JSON bytes (an absent field empty, a null one ``null``): their JSON shape is
    what orjson makes of them."""

    absent = (b"", b"null")
    labels = owners = affinity = tolerations = constraints = claims = requirements = staticmethod(
        _loads
    )

    @staticmethod
    def split(key: Hashable) -> list[bytes]:
        """The fragments a template key was joined from (:meth:`FastBuilder._digest`)."""
        joined: bytes = key if type(key) is bytes else key[0]  # type: ignore[index]
        parts = joined.split(b"\0")
        for raw in parts[6:8]:  # containers, init containers
            if _FEATURE_FIELDS[0] in raw or _FEATURE_FIELDS[1] in raw:
                raise Fallback  # it may need node features: the general path infers them
        return parts

    @staticmethod
    def label_keys(key: bytes) -> tuple[str, ...]:
        found: set[str] = set()
        doc = _loads(key)
        for constraint in doc if type(doc) is list else ():
            keys = constraint.get("matchLabelKeys") if type(constraint) is dict else None
            found.update(k for k in keys if type(k) is str) if type(keys) is list else None
        return tuple(sorted(found))

    @staticmethod
    def spec_requests(parts: Sequence[bytes]) -> dict[str, object]:
        fields = ("containers", "initContainers", "overhead", "resources")
        return {f: _loads(raw) for f, raw in zip(fields, parts, strict=True) if raw}

    @staticmethod
    def allocated(key: bytes) -> object:
        return _loads(key) if key else None


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
        self.pods = PodConverter(self.caches, _JsonShapes())
        self._volume_claims: dict[bytes, str] = {}
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
            if kind in KINDS:
                return self._add_general(raw, kind, listed)
            self.builder.add({"kind": kind})  # counted as ignored
            return True
        try:
            converted = self._pod(item)
        except Fallback:
            self.pods.problems.clear()
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

    def _pod(self, item: _Item) -> Pod:
        key, own = self._digest(item)
        return self.pods.pod(key, own)

    def _digest(self, item: _Item) -> tuple[Hashable, Own]:
        """The key of the fragments the pod's workload shares and what the pod holds of its own
        (:class:`~rebalancer.cluster.read.podconvert.Own`): everything but the shared
        conversions, which number fragments and so happen in file order."""
        meta = item.metadata or _EMPTY_META
        spec = item.spec or _EMPTY_SPEC
        status = item.status or _EMPTY_STATUS
        name = meta.name
        if (
            not name
            or (spec.hostNetwork and _given(spec.hostUsers))
            or _given(spec.ephemeralContainers)
        ):
            raise Fallback  # no name; or it may need node features (convert.features)
        # One lookup for everything a workload's pods share, by the bytes of its fragments,
        # joined by NUL (which JSON text never holds unescaped, so distinct fragments give
        # distinct keys; an absent field is empty, a null one "null"). One join per pod: a
        # key lives only for its lookup, so none is kept per pod.
        key: Hashable = _JOIN(
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
        resized: Resized = ()
        reasons: tuple[str | None, ...] = ()
        if status.containerStatuses or status.initContainerStatuses:
            resized = (_resized(status.containerStatuses), _resized(status.initContainerStatuses))
            if resized[0] or resized[1]:
                reasons = tuple(c.reason for c in status.conditions or () if c.type == RESIZE)
                key = (key, resized, reasons)
            else:
                resized = ()
        own = Own()
        (
            own.mirror,
            own.evict_requested,
            own.prefer_no_eviction,
            own.deletion_cost,
            own.cost_mark,
        ) = annotation_flags(meta.annotations or {})
        own.pvc_names, own.local_storage = (
            volumes(
                (
                    (
                        v.name,
                        _given(v.emptyDir),
                        self._claim_name(v.persistentVolumeClaim)
                        if _given(v.persistentVolumeClaim)
                        else None,
                        _given(v.ephemeral),
                    )
                    for v in spec.volumes
                ),
                name,
            )
            if spec.volumes
            else NO_VOLUMES
        )
        priority = spec.priority
        if priority is not None and not INT32_MIN <= priority <= INT32_MAX:
            raise Fallback
        grace = spec.terminationGracePeriodSeconds
        if grace is not None and not INT64_MIN <= grace <= INT64_MAX:
            raise Fallback  # the converter names it
        own.ready, own.disruption_target = conditions(status.conditions or ())
        timestamp = meta.creationTimestamp
        created = 0.0 if timestamp is None else self._time(timestamp)
        group = spec.schedulingGroup
        own.resized = resized
        own.reasons = reasons
        own.namespace = meta.namespace or "default"
        own.name = name
        own.uid = meta.uid or ""
        own.node = spec.nodeName or None
        own.created = created
        own.phase = status.phase or "Pending"
        own.terminating = _given(meta.deletionTimestamp)
        own.priority = priority
        own.priority_class_name = spec.priorityClassName or None
        own.grace_period_seconds = grace
        own.resource_version = meta.resourceVersion or ""
        own.scheduling_group = (group.podGroupName or None) if group is not None else None
        own.started = self._time(status.startTime) if status.startTime is not None else None
        return key, own

    def _time(self, value: str) -> float:
        """A timestamp in epoch seconds, looked up, else converted (:meth:`_epoch`)."""
        found = self._times.get(value)
        return found if found is not None else self._epoch(value)

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
        if len(self._times) >= MEMO_LIMIT:
            self._times.clear()
        self._times[value] = found
        return found

    def _parse_time(self, value: str) -> float:
        found = epoch(self.pods.chk, value, "metadata.creationTimestamp")
        if self.pods.problems:
            raise Fallback
        return found

    def _claim_name(self, raw: Raw) -> str:
        key = bytes(raw)
        found = self._volume_claims.get(key)
        if found is None:
            claim = _loads(key)
            name = claim.get("claimName") if type(claim) is dict else None
            if type(name) is not str or not name:
                raise Fallback
            if len(self._volume_claims) >= MEMO_LIMIT:
                self._volume_claims.clear()
            found = self._volume_claims[key] = name
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


# --- documents ------------------------------------------------------------------------------


def may_nest_deeper(body: bytes, limit: int) -> bool:
    """Whether one item's JSON may nest more than ``limit`` deep: cheap (two counts) for the
    usual item, measured (:func:`~rebalancer.cluster.read.nesting.too_deep`) when it has many
    brackets."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    return too_deep(body, limit) is not None


def load_list(data: bytes, source: str, stop_after: int | None = None) -> SnapshotBuilder | None:
    """The objects of a JSON ``kind: List`` (or a typed list such as ``PodList``) in a
    builder; None when the document is anything else or strays from plain API objects (the
    general path then parses it whole and names every problem). ``stop_after``: as for
    :func:`load_lines`."""
    try:
        document = _LIST.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):
        return None
    kind = document.kind
    if document.items is None or (kind is not None and not kind.endswith("List")):
        return None
    inner = kind[: -len("List")] if kind is not None and kind != "List" else None
    builder = SnapshotBuilder(source, stop_after)
    add = FastBuilder(builder).add_raw
    items = document.items
    del document
    with gc_paused():
        for raw in items:
            if not add(raw, inner):
                return None
            if builder.stopped:
                break
    return builder


def load_lines(
    lines: Iterable[bytes], source: str, tail: bytes, stop_after: int | None = None
) -> SnapshotBuilder | None:
    """The objects of the line-per-item layout after its first line (see
    :func:`rebalancer.cluster.read.snapshot.dump_objects`) in a builder; None when the text strays
    from it. ``stop_after``: the reading stops after that many problems (the builder's
    :attr:`~SnapshotBuilder.stopped`)."""
    builder = SnapshotBuilder(source, stop_after)
    add = FastBuilder(builder).add_raw
    with gc_paused():
        try:
            for body in _line_bodies(lines, tail):
                if not add(body):
                    return None
                if builder.stopped:
                    return builder
        except _Stray:
            return None
    return builder


class _Stray(Exception):  # control flow, never escapes this module
    """The text strays from the line-per-item layout."""


def _line_bodies(lines: Iterable[bytes], tail: bytes) -> Iterator[bytes]:
    """Each item line's item; raises :class:`_Stray` on text after the closing line, and when
    there is none."""
    ended = False
    for raw in lines:
        if raw[-2:] == b",\n" and not ended:  # an item and its comma: most lines
            if may_nest_deeper(raw, MAX_JSON_DEPTH):
                raise _Stray  # the general path measures the whole text and refuses it
            yield raw[:-2]
            continue
        line = raw.rstrip(b"\r\n")
        if ended:
            if line.strip(b" \t\r\n"):
                raise _Stray  # text after the closing line
            continue
        if line == tail:
            ended = True
            continue
        body = line[:-1] if line.endswith(b",") else line
        if may_nest_deeper(body, MAX_JSON_DEPTH):
            raise _Stray
        yield body
    if not ended:
        raise _Stray


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
