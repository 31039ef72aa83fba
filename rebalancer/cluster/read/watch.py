"""Loop mode (``run --interval``): the cluster kept current by LIST + WATCH between passes.

One thread per resource: a paginated LIST (typed decoding, pods asked for as protobuf when a
protobuf transport is given, as the reader does; with a stream transport, the pods in one
unpaginated protobuf LIST read as a stream, paginated again if it is declined), then a WATCH
from the list's resourceVersion with bookmarks; each event updates that resource's store of
model objects. The API server ends a watch after ``timeoutSeconds`` (a random 5 to 10 minutes,
as client-go's reflector asks); it is resumed from the last resourceVersion seen (an event's
or a bookmark's). A 410 Gone (that version left the API server's window) lists again; any other
failure is retried after a bounded exponential backoff with jitter. A pass
(:meth:`ClusterWatch.snapshot`) builds its Snapshot from the stores without any request.

The stores lag the API server by the watch's delivery time (milliseconds): the executor's
re-read of each pod and its node right before the eviction stays the guard, and the
Eviction API enforces the PodDisruptionBudgets itself.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from msgspec import Raw, Struct

from rebalancer.cluster import logs
from rebalancer.cluster.api import deadline, errors
from rebalancer.cluster.api.resources import RESOURCES, Resource
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.read.fastdecode import page_parts
from rebalancer.cluster.read.nesting import too_deep
from rebalancer.cluster.read.protodecode import ProtoBuilder, ProtoPage
from rebalancer.cluster.read.protodecode import schema_pb2 as pb
from rebalancer.cluster.read.protodecode.stream import PodBatch
from rebalancer.cluster.read.reader import (
    DEFAULT_PAGE_SIZE,
    MAX_RESTARTS,
    PROTOBUF_RESOURCES,
    STOPPING_JOIN_SECONDS,
    Declined,
    ListStream,
    PageFetcher,
    Route,
    again_as_json,
    first_route,
    next_route,
)
from rebalancer.core.api import Caches, InputError, Rejected, Snapshot, SnapshotBuilder, convert_one

__all__ = ["ClusterWatch", "ListPage", "WatchLines", "WatchSettings"]

ListPage = Callable[[str, str | None, int, str | None], bytes]
WatchLines = Callable[[str, str | None, str, int], Iterator[bytes]]
"""``watch_lines(resource, namespace, resource_version, timeout_seconds)``: the event lines."""

_Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class WatchSettings:
    page_size: int = DEFAULT_PAGE_SIZE
    min_timeout_seconds: int = 300  # each watch asks for 1x to 2x this (client-go: 5-10 min)
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    sync_timeout: float = 900.0  # the first LIST of every resource, at most
    stale_after: float = 120.0  # a resource whose watch has failed this long fails the pass
    max_objects: int = 1_000_000  # objects one resource may hold (a server that pages or adds
    # objects without end fails the watch here, not in memory; --max-objects)


class _Event(Struct):
    type: str = ""
    object: Raw = Raw()


class _IdentMeta(Struct):
    name: str | None = None
    namespace: str | None = None
    resourceVersion: str | None = None


class _Ident(Struct):
    metadata: _IdentMeta | None = None


class _Status(Struct):
    code: int | None = None
    message: str | None = None
    reason: str | None = None


_EVENT: Final = msgspec.json.Decoder(_Event)
_IDENT: Final = msgspec.json.Decoder(_Ident)
_STATUS: Final = msgspec.json.Decoder(_Status)
_NO_META: Final = _IdentMeta()


def _placed_or_leaving(before: Any, after: Any) -> bool:
    """Whether a pod's change moves a spread: bound to a node (or to another one), or
    terminating now. Other kinds (no ``node_name``) never do."""
    if after is None or not hasattr(after, "node_name"):
        return False
    if after.node_name and after.node_name != getattr(before, "node_name", None):
        return True
    return bool(after.terminating) and not getattr(before, "terminating", False)


class _ResourceWatch:
    """One resource: its store, the thread that keeps it current, and what it did."""

    def __init__(
        self,
        resource: Resource,
        *,
        namespace: str | None,
        list_page: ListPage,
        watch_lines: WatchLines,
        settings: WatchSettings,
        caches: Caches,
        list_page_proto: ListPage | None = None,
        list_stream: ListStream | None = None,
        lock: threading.Lock,
        list_gate: threading.Lock,
        stop: threading.Event,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self._list_page = list_page
        self._list_page_proto = list_page_proto
        self._list_stream = list_stream
        self._watch_lines = watch_lines
        self._settings = settings
        self._caches = caches
        self._lock = lock
        self._list_gate = list_gate
        self._stop = stop
        self._clock = clock
        self._rng = rng
        self._fast = ProtoBuilder(self)
        self._converted: tuple[Any, list[str]] = (None, [])
        self.items: dict[_Key, Any] = {}
        self.problems: dict[_Key, list[str]] = {}
        self.version: str | None = None
        self.synced = threading.Event()
        self.error: errors.ClusterError | None = None
        self.failing_since: float | None = None
        self.counts: dict[str, int] = dict.fromkeys(
            ("lists", "list_pages", "watches", "events", "bookmarks", "gone", "failures"), 0
        )
        self.thread: threading.Thread | None = None
        self.on_placement: Callable[[], None] | None = None
        """Called (under the lock) when a watched pod is bound, moved, deleted or starts
        terminating: the events that can change a spread (loop mode's early run)."""

    # --- the sink FastBuilder writes to ------------------------------------------------------

    @property
    def caches(self) -> Caches:
        return self._caches

    def add(self, obj: Mapping[str, Any]) -> None:
        self._converted = convert_one(obj, self._caches)

    def add_converted(self, kind: str, item: Any) -> None:
        self._converted = (item, [])

    # --- applying objects ----------------------------------------------------------------

    def _key(self, meta: _IdentMeta) -> _Key:
        """The store key as the model has it: a namespaced object without one is "default"."""
        if not self.resource.namespaced:
            return "", meta.name or ""
        return meta.namespace or "default", meta.name or ""

    def _apply(self, items: dict[_Key, Any], problems: dict[_Key, list[str]], raw: Raw) -> None:
        """Convert one object (under the lock) into ``items``, or its problems."""
        self._converted = (None, [])
        if not self._fast.add_listed(raw, self.resource.kind):
            raise errors.ClusterError(f"LIST {self.resource.name}: an item is not an object")
        item, found = self._converted
        if item is not None:
            key: _Key = (getattr(item, "namespace", ""), item.name)
            items[key] = item
            problems.pop(key, None)
            return
        try:
            meta = _IDENT.decode(raw).metadata or _NO_META
        except msgspec.DecodeError:
            meta = _NO_META
        key = self._key(meta)
        problems[key] = found
        items.pop(key, None)

    # --- LIST ----------------------------------------------------------------------------

    def _add_proto_items(
        self, items: dict[_Key, Any], problems: dict[_Key, list[str]], pods_in: Iterable[pb.Pod]
    ) -> bool:
        """Pods in protobuf into ``items``; False when the decoder declines one of them."""
        with self._lock, gc_paused():
            pods = self._fast.convert_items(pods_in)
            if pods is None:
                return False
            for pod in pods:
                key: _Key = (pod.namespace, pod.name)
                items[key] = pod
                problems.pop(key, None)
        return True

    def _relist(self) -> None:
        # One LIST at a time: eleven at once only compete for the API server and the GIL.
        with self._list_gate:
            for attempt in range(MAX_RESTARTS + 1):
                try:
                    self._list_once()
                    return
                except errors.Gone:
                    if attempt == MAX_RESTARTS:
                        raise

    def _list_once(self) -> None:
        """One LIST on the reader's routes (:class:`~.reader.Route`), logged for the pods: a
        route that declines leaves it for the next, from scratch, and for good (a server that
        answers so once will again)."""
        route, why = first_route(
            keep_objects=False,
            converter=True,
            resources=[self.resource],
            list_page_proto=self._list_page_proto,
            list_stream=self._list_stream,
        )
        while True:
            if self.resource.name in PROTOBUF_RESOURCES:
                logs.get_logger("rebalancer.watch").info(
                    logs.READ_ROUTE, resource=self.resource.name, route=str(route), reason=why
                )
            declined = self._list_items(route)
            if declined is None:
                return
            why = f"{route} declined: {declined.reason}"
            if route is Route.STREAM:
                self._list_stream = None
            route = next_route(route, self._list_page_proto)
            if route is Route.JSON_TYPED:
                self._list_page_proto = None

    def _list_items(self, route: Route) -> Declined | None:
        items: dict[_Key, Any] = {}
        problems: dict[_Key, list[str]] = {}
        version: str | None = None
        name = self.resource.name
        # The reader's fetcher: the next pages are requested while this one is converted.
        fetcher = PageFetcher(
            self._list_page,
            [(self.resource, self.namespace)],
            self._settings.page_size,
            list_page_proto=self._list_page_proto if route is Route.PROTOBUF_PAGES else None,
            list_stream=self._list_stream if route is Route.STREAM else None,
        )
        with fetcher:
            for _, fetched, token in fetcher:
                if isinstance(fetched, Declined):  # the streamed LIST is not taken
                    return fetched
                if isinstance(fetched, PodBatch):  # the one streamed LIST of pods
                    if not self._add_proto_items(items, problems, fetched.items):
                        return Declined("a pod the protobuf decoder does not take exactly")
                    if fetched.last:
                        version = fetched.resource_version
                        self.counts["list_pages"] += 1
                    continue
                if isinstance(fetched, ProtoPage):
                    if self._add_proto_items(items, problems, fetched.items):
                        self.counts["list_pages"] += 1
                        version = version or fetched.resource_version
                        continue
                    if fetched.requested is None:  # no list snapshot yet to read it from
                        return Declined("the first page of pods does not decode exactly")
                    raw = again_as_json(
                        self._list_page,
                        fetched,
                        self.resource,
                        namespace=self.namespace,
                        size=self._settings.page_size,
                        token=token,
                    )
                else:
                    assert isinstance(fetched, bytes)  # no page is prepared for the watch
                    raw = fetched
                del fetched
                parts = page_parts(raw)
                del raw
                if parts is None:
                    raise errors.ClusterError(f"LIST {name}: the answer is not a list")
                page, _, page_version = parts
                version = version or page_version
                self.counts["list_pages"] += 1
                with self._lock, gc_paused():
                    for item in page:
                        self._apply(items, problems, item)
                del page, parts
                self._check_size(len(items))
        if not version:
            raise errors.ClusterError(f"LIST {name}: the answer has no resourceVersion")
        with self._lock:
            self.items, self.problems, self.version = items, problems, version
        self.counts["lists"] += 1
        self.synced.set()
        return None

    # --- WATCH ---------------------------------------------------------------------------

    def _watch(self) -> bool:
        """One watch, until the server ends it (or stop); raises on errors. False when it
        ended at once without a line (then the next one waits, as after a failure)."""
        assert self.version is not None
        minimum = self._settings.min_timeout_seconds
        timeout = minimum + self._rng.randrange(max(1, minimum))
        deadline.check(f"WATCH {self.resource.name}")  # a WATCH has no deadline watch of its own
        lines = self._watch_lines(self.resource.name, self.namespace, self.version, timeout)
        self.counts["watches"] += 1
        self.error = None
        self.failing_since = None
        started = self._clock()
        seen = False
        try:
            for line in lines:
                if self._stop.is_set() or deadline.stopping():
                    return True
                seen = True
                self._event(line)
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                close()
        return seen or self._clock() - started >= 1.0

    def _check_size(self, held: int) -> None:
        if held > self._settings.max_objects:
            raise errors.ReadTooLarge(
                f"{self.resource.name}: more than {self._settings.max_objects} objects "
                "(--max-objects); the server keeps sending, or the limit is too low"
            )

    def _event(self, line: bytes) -> None:
        name = self.resource.name
        deep = too_deep(line)
        if deep is not None:  # refused before the decoder recurses into it
            raise errors.ClusterError(f"WATCH {name}: an event is {deep}")
        try:
            event = _EVENT.decode(line)
        except msgspec.DecodeError as exc:
            raise errors.ClusterError(f"WATCH {name}: an event is not JSON: {exc}") from exc
        if event.type == "ERROR":
            try:
                status = _STATUS.decode(event.object)
            except msgspec.DecodeError:
                status = _Status()
            message = status.message or "the watch ended with an error"
            if status.code == 410:
                raise errors.Gone(410, message, verb="watch", resource=self.resource.rbac_name)
            raise errors.ClusterError(f"WATCH {name}: {message}")
        try:
            meta = _IDENT.decode(event.object).metadata or _NO_META
        except msgspec.DecodeError as exc:
            raise errors.ClusterError(f"WATCH {name}: an event's object is not JSON") from exc
        # The store and the version it reflects change together, under the lock: a state
        # check (:meth:`ClusterWatch.held`) never sees one without the other.
        held = 0
        with self._lock:
            if event.type == "BOOKMARK":
                self.counts["bookmarks"] += 1
            elif event.type in ("ADDED", "MODIFIED"):
                key = self._key(meta)
                before = self.items.get(key)
                self._apply(self.items, self.problems, event.object)
                held = len(self.items)
                self.counts["events"] += 1
                if self.on_placement is not None and _placed_or_leaving(
                    before, self.items.get(key)
                ):
                    self.on_placement()
            elif event.type == "DELETED":
                key = self._key(meta)
                gone = self.items.pop(key, None)
                self.problems.pop(key, None)
                self.counts["events"] += 1
                if self.on_placement is not None and getattr(gone, "node_name", None):
                    self.on_placement()
            if meta.resourceVersion:
                self.version = meta.resourceVersion
        self._check_size(held)

    # --- the thread ----------------------------------------------------------------------

    def run(self) -> None:
        delay = self._settings.backoff_initial
        gone_before = False
        while not self._stop.is_set() and not deadline.stopping():
            try:
                if self.version is None:
                    self._relist()
                if self._watch():
                    delay = self._settings.backoff_initial
                else:  # a watch that ends at once, again and again, must not spin
                    self._stop.wait(delay)
                    delay = min(delay * 2, self._settings.backoff_max)
                gone_before = False
            except errors.Gone:
                self.version = None  # list again
                self.counts["gone"] += 1
                if gone_before:  # twice in a row: do not hammer the API server
                    self._stop.wait(delay)
                    delay = min(delay * 2, self._settings.backoff_max)
                gone_before = True
            except Exception as exc:  # any failure: retried, reported to passes
                self.counts["failures"] += 1
                self.error = (
                    exc
                    if isinstance(exc, errors.ClusterError)
                    else errors.ClusterError(f"watching {self.resource.name}: {exc!r}")
                )
                if isinstance(exc, errors.Forbidden | errors.Unauthorized):
                    self.failing_since = float("-inf")  # no point serving old data: fail now
                elif self.failing_since is None:
                    self.failing_since = self._clock()
                self._stop.wait(delay * (0.5 + self._rng.random() / 2))
                delay = min(delay * 2, self._settings.backoff_max)


class ClusterWatch:
    """The cluster's objects, kept current by one LIST + WATCH per resource.

    :meth:`snapshot` is the loop's ``read``: the first call starts the watches and waits for
    every first LIST; every call builds a Snapshot from the stores, without a request.
    """

    def __init__(
        self,
        list_page: ListPage,
        watch_lines: WatchLines,
        *,
        namespace: str | None = None,
        resources: Sequence[Resource] = RESOURCES,
        settings: WatchSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        seed: int | None = None,
        list_page_proto: ListPage | None = None,
        list_stream: ListStream | None = None,
    ) -> None:
        """``list_page_proto``: the LIST transport asking for protobuf, for the pods' LISTs
        (as :func:`rebalancer.cluster.read.reader.read_cluster` uses it); ``list_stream``: the pods
        in one unpaginated protobuf LIST instead, read as a stream (the first LIST and every
        relist after a 410). The WATCH stays JSON."""
        self.settings = settings or WatchSettings()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._clock = clock
        caches = Caches()  # one for every resource: shared fragments keep their numbers
        list_gate = threading.Lock()
        rng = random.Random(seed)
        self._watches = [
            _ResourceWatch(
                resource,
                namespace=namespace,
                list_page=list_page,
                list_page_proto=list_page_proto,
                list_stream=list_stream,
                watch_lines=watch_lines,
                settings=self.settings,
                caches=caches,
                lock=self._lock,
                list_gate=list_gate,
                stop=self._stop,
                clock=clock,
                rng=random.Random(rng.random()),
            )
            for resource in resources
        ]
        self._started = False
        self.rejected: tuple[Rejected, ...] = ()
        """The objects the last :meth:`snapshot` left out with their namespaces."""
        self._last_placement: float | None = None
        for watch in self._watches:
            if watch.resource.kind == "Pod":
                watch.on_placement = self._placement_seen

    def _placement_seen(self) -> None:
        if self._started and all(w.synced.is_set() for w in self._watches):
            self._last_placement = self._clock()

    def last_placement(self) -> float | None:
        """When (on the watch's clock) a watched pod was last bound, deleted or started
        terminating after every first LIST; None: not since then."""
        return self._last_placement

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        for watch in self._watches:
            watch.thread = threading.Thread(
                target=watch.run, name=f"rebalancer-watch-{watch.resource.name}", daemon=True
            )
            watch.thread.start()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the threads (a watch blocked in a read ends with its connection). Once the
        process is stopping (SIGTERM), they are waited for :data:`STOPPING_JOIN_SECONDS` in
        all at most: daemons, they end with the process, and send nothing more."""
        self._stop.set()
        if deadline.stopping():
            timeout = min(timeout, STOPPING_JOIN_SECONDS)
        until = time.monotonic() + timeout
        for watch in self._watches:
            if watch.thread is not None:
                watch.thread.join(max(0.0, until - time.monotonic()))

    def __enter__(self) -> ClusterWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        """Per resource: lists, list pages, watches, events, bookmarks, 410s, failures."""
        return {w.resource.name: dict(w.counts) for w in self._watches}

    @property
    def resources(self) -> tuple[Resource, ...]:
        """The resources watched, in read order."""
        return tuple(w.resource for w in self._watches)

    def held(self, resource: str) -> tuple[str | None, Snapshot]:
        """One resource's store and the resourceVersion it reflects (the last event's or
        bookmark's, or its LIST's; None while it lists again after a 410), taken together
        under the lock; as a Snapshot with only that kind, the namespaces of objects the
        converter rejects left out (as ``snapshot(skip_invalid=True)`` and a fresh read do)."""
        watch = next(w for w in self._watches if w.resource.name == resource)
        with self._lock:
            version = watch.version
            items = list(watch.items.items())
            rejected = list(watch.problems)
        skipped = {namespace for namespace, _ in rejected} if watch.resource.namespaced else set()
        builder = SnapshotBuilder("cluster")
        with gc_paused():
            for (namespace, _), item in items:
                if namespace not in skipped:
                    builder.add_converted(watch.resource.kind, item)
            return version, builder.build()

    def _wait_synced(self) -> None:
        deadline = self._clock() + self.settings.sync_timeout
        for watch in self._watches:
            while not watch.synced.wait(0.05):
                if watch.error is not None:
                    raise watch.error
                if self._stop.is_set():
                    raise errors.ClusterError("the cluster watch was stopped")
                if self._clock() > deadline:
                    raise errors.ClusterError(
                        f"LIST {watch.resource.name}: not done after "
                        f"{self.settings.sync_timeout:g} s"
                    )

    def snapshot(self, *, skip_invalid: bool = False) -> Snapshot:
        """The cluster as the watches have it now; raises the error of a resource whose watch
        has been failing for longer than ``stale_after``, and :class:`InputError` for objects
        the converter rejects (as a fresh read would). ``skip_invalid``: a namespaced object
        the converter rejects leaves its namespace out instead (:attr:`rejected` lists them),
        as :func:`rebalancer.cluster.read.reader.read_cluster` does."""
        self.start()
        self._wait_synced()
        now = self._clock()
        for watch in self._watches:
            since = watch.failing_since
            stale = since is not None and now - since > self.settings.stale_after
            if stale and watch.error is not None:
                raise watch.error
        builder = SnapshotBuilder("cluster")
        rejected: list[Rejected] = []
        with self._lock, gc_paused():
            problems: list[str] = []
            for watch in self._watches:
                for key in sorted(watch.problems):
                    found = watch.problems[key]
                    if skip_invalid and watch.resource.namespaced:
                        rejected.append(Rejected(watch.resource.kind, *key, tuple(found)))
                    else:
                        problems.extend(found)
            if problems:
                raise InputError("cluster", problems)
            skipped = {r.namespace for r in rejected}
            for watch in self._watches:
                kind = watch.resource.kind
                add = builder.add_converted
                if skipped and watch.resource.namespaced:
                    for (namespace, _), item in watch.items.items():
                        if namespace not in skipped:
                            add(kind, item)
                else:
                    for item in watch.items.values():
                        add(kind, item)
        self.rejected = tuple(rejected)
        return builder.build()
