"""Reading a live cluster: paginated LISTs of raw JSON, converted page by page into the model.

The API client's model objects are never built (they are slow at 100k pods): each page arrives
as bytes from a transport function, is parsed with orjson, fed object by object into the
converter's incremental builder, and dropped. Only when the raw objects are asked for (the
``snapshot`` command) are they kept, in read order, so that dumping them as a ``kind: List`` and
loading that file converts into exactly the same :class:`~rebalancer.core.model.Snapshot`.

The transport is a plain function, ``list_page(resource, namespace, limit, continue_token) ->
bytes``; :meth:`rebalancer.cluster.api.kubeclient.Kube.list_page` is the real one, tests pass
their own.
A second one may ask for the protobuf encoding (:func:`~rebalancer.cluster.read.encoding.
protobuf_pages`): pod pages then come as protobuf when the server answers so, and are decoded
by :mod:`rebalancer.cluster.read.protodecode` (a page it cannot take exactly is read again as JSON).
A third, ``list_stream(resource, namespace) -> chunks`` (:func:`~rebalancer.cluster.read.encoding.
protobuf_stream`), reads all pods in ONE unpaginated protobuf LIST, consumed as a stream
(:mod:`rebalancer.cluster.read.protodecode.stream`): kube-apiserver serves it from its watch cache,
where the continue pages of a paginated LIST go to etcd.

Which of these a read uses is its :class:`Route`, chosen before the first request from what the
caller asks and the transports it offers (:func:`first_route`) and logged (``read.route``). A
route that cannot go on (the stream answered in JSON, a pod the protobuf decoder does not take
exactly) returns :class:`Declined`; the read starts again, with a fresh builder, on the next
route (:func:`next_route`), logged again with the reason.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Final, Protocol

import orjson

from rebalancer.cluster import logs
from rebalancer.cluster.api import deadline, errors
from rebalancer.cluster.api.resources import OPTIONAL_RESOURCES, RESOURCES, Resource
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.read import fastdecode, protodecode
from rebalancer.cluster.read.nesting import too_deep
from rebalancer.cluster.read.overlap import Overlapped, Prepared, SidePages, replay
from rebalancer.cluster.read.protodecode import ProtoBuilder, ProtoPage
from rebalancer.cluster.read.protodecode.stream import PodBatch, StreamDeclined, pod_batches
from rebalancer.cluster.read.slim import slim
from rebalancer.core.api import Rejected, Snapshot, SnapshotBuilder

ListPage = Callable[[str, str | None, int, str | None], bytes]
"""``list_page(resource, namespace, limit, continue_token) -> bytes`` (one LIST page as JSON)."""
ListStream = Callable[[str, str | None], Iterable[bytes]]
"""``list_stream(resource, namespace) -> chunks``: one unpaginated LIST in protobuf, its body in
chunks; raises :class:`StreamDeclined` when the answer is not protobuf."""


class ListPageAt(Protocol):
    """``list_page`` that can pin a LIST to one version: the first page (no continue token) at
    exactly ``resource_version`` (:meth:`rebalancer.cluster.api.kubeclient.Kube.list_page`)."""

    def __call__(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        /,
        *,
        resource_version: str | None = None,
    ) -> bytes: ...


DEFAULT_PAGE_SIZE: Final = 2000
MAX_RESTARTS: Final = 3  # a read starts again when a continue token expires (410 Gone)
PREFETCH: Final = 2
"""Pages a background thread fetches ahead of the one being converted (0: no thread)."""
PROTOBUF_RESOURCES: Final = frozenset({"pods"})
"""The resources read as protobuf when a protobuf transport is given (the rest stay JSON)."""
SIDE_PREFETCH: Final = 64
"""Pages of the other resources fetched (and converted) ahead while the pods are streamed."""


class Route(StrEnum):
    """How one read takes the cluster in, named in the log (``read.route``)."""

    STREAM = "protobuf-stream"
    """The pods in ONE unpaginated LIST in protobuf, converted in batches as it arrives; every
    other resource paged as JSON, read beside it (:mod:`.overlap`) and typed-decoded."""
    PROTOBUF_PAGES = "protobuf-pages"
    """The pods' pages asked for in protobuf (a page the decoder does not take exactly, or
    answered in JSON, is taken as JSON from the same list snapshot); the rest as ``json-typed``."""
    JSON_TYPED = "json-typed"
    """Every page JSON, typed-decoded straight into the model (:mod:`.fastdecode`; a page it
    does not take is parsed whole, as ``json`` does)."""
    JSON = "json"
    """Every page JSON parsed whole (orjson), each object given to the builder: the raw
    objects are kept, or the builder is not the converter's."""


@dataclass(frozen=True, slots=True)
class Declined:
    """A route that cannot go on, and why: the read starts again on the next route."""

    reason: str


def first_route(
    *,
    keep_objects: bool,
    converter: bool,
    resources: Sequence[Resource],
    list_page_proto: ListPage | None,
    list_stream: ListStream | None,
) -> tuple[Route, str]:
    """The route a read starts on, from what the caller asks (``keep_objects``, a builder of
    the ``converter``'s) and the transports it offers; and why."""
    if keep_objects:
        return Route.JSON, "the raw objects are kept"
    if not converter:
        return Route.JSON, "the builder is not the converter's"
    if not any(r.name in PROTOBUF_RESOURCES for r in resources):
        return Route.JSON_TYPED, "no resource read is one asked for in protobuf"
    if list_stream is not None:
        return Route.STREAM, "a streamed protobuf LIST of the pods is offered"
    if list_page_proto is not None:
        return Route.PROTOBUF_PAGES, "protobuf pages of the pods are offered"
    return Route.JSON_TYPED, "only JSON pages are offered"


def next_route(route: Route, list_page_proto: ListPage | None) -> Route:
    """Where a read goes when ``route`` declines: from the stream to the pods' protobuf pages
    (when offered, else JSON), from protobuf pages to JSON; the JSON routes never decline."""
    if route is Route.STREAM and list_page_proto is not None:
        return Route.PROTOBUF_PAGES
    if route in (Route.STREAM, Route.PROTOBUF_PAGES):
        return Route.JSON_TYPED
    raise ValueError(f"route {route} does not decline")  # pragma: no cover - never declines


class Builder(Protocol):
    """The converter's incremental builder: objects in one at a time, a Snapshot out."""

    def add(self, obj: dict[str, Any]) -> None: ...

    def build(self, *, skip_invalid: bool = False) -> Snapshot: ...

    @property
    def rejected(self) -> tuple[Rejected, ...]: ...


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What one read of the cluster produced."""

    snapshot: Snapshot
    objects: tuple[dict[str, Any], ...] | None  # the raw objects, only when asked for
    counts: tuple[tuple[str, int], ...]  # resource -> objects read
    pages: int  # LIST requests made
    rejected: tuple[Rejected, ...] = ()  # left out, with their namespaces (skip_invalid)


MAX_GROWTH_SECONDS: Final = 600.0
"""The most a read deadline grows with the objects read (600,000 objects' worth)."""
DEFAULT_MAX_OBJECTS: Final = 1_000_000
"""Objects one read may hold at most (``--max-objects``): about 3 times what Kubernetes'
largest tested clusters hold (150,000 pods, and their ReplicaSets, Services, PDBs...)."""
MAX_READ_BYTES: Final = 16 * 1024**3
"""Bytes one read may take from the API server at most, over every page, stream and restart
(150,000 pods as JSON with their managedFields are about 1.5 GB)."""


@dataclass(frozen=True, slots=True)
class ReadDeadline:
    """How long a whole read of the cluster may take: a base, plus a little per object read,
    so the limit grows with the cluster (``--read-deadline`` sets the base), but by
    ``max_growth_seconds`` at most: whatever the server sends, a read ends by then."""

    base_seconds: float = 120.0
    seconds_per_1000_objects: float = 1.0
    max_growth_seconds: float = MAX_GROWTH_SECONDS

    def limit(self, objects: int) -> float:
        """Seconds allowed once ``objects`` objects have been read."""
        growth = self.seconds_per_1000_objects * objects / 1000
        return self.base_seconds + min(growth, self.max_growth_seconds)

    def check(self, elapsed: float, objects: int) -> None:
        """Raise :class:`errors.DeadlineExceeded` when ``elapsed`` is past the limit."""
        limit = self.limit(objects)
        if elapsed > limit:
            raise errors.DeadlineExceeded(
                f"reading the cluster took more than {limit:.0f}s ({objects} objects read; "
                f"--read-deadline {self.base_seconds:g}s plus "
                f"{self.seconds_per_1000_objects:g}s per 1,000 objects, "
                f"{self.max_growth_seconds:g}s more at most)"
            )


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """How much one read of the cluster may take in, restarts included, whatever the server
    sends (a server that pages forever ends here, not in memory)."""

    max_objects: int = DEFAULT_MAX_OBJECTS
    max_bytes: int = MAX_READ_BYTES


class _Budget:
    """One read's time, objects and bytes, shared by the threads that fetch its pages.

    The consumer checks objects and the deadline after each page or batch (:meth:`check`).
    The fetching threads, which may be pages ahead of it, add the bytes they receive and check
    the clock against the deadline's ceiling (its base and all its growth) before each request
    and after each chunk of a stream (:meth:`spend`): a stream that never completes a batch
    ends there. Either raises, and the read ends."""

    def __init__(
        self,
        deadline: ReadDeadline | None,
        limits: ReadLimits,
        clock: Callable[[], float],
    ) -> None:
        self._deadline = deadline
        self._limits = limits
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self.objects = 0
        self.bytes = 0

    def check(self, objects: int) -> None:
        """After a page: ``objects`` read so far (this try); raises past a bound."""
        self.objects = objects
        if objects > self._limits.max_objects:
            raise errors.ReadTooLarge(
                f"reading the cluster: more than {self._limits.max_objects} objects "
                f"(--max-objects); the server keeps sending, or the limit is too low"
            )
        if self._deadline is not None:
            self._deadline.check(self._clock() - self._started, objects)

    def spend(self, size: int) -> None:
        """``size`` more bytes received (0: about to send a request); raises past a bound."""
        if size:
            with self._lock:
                self.bytes += size
                total = self.bytes
            if total > self._limits.max_bytes:
                raise errors.ReadTooLarge(
                    f"reading the cluster: more than {self._limits.max_bytes} bytes received; "
                    "the server keeps sending"
                )
        if self._deadline is not None:  # the most it can grow to: the objects lag behind here
            self._deadline.check(self._clock() - self._started, self._limits.max_objects)

    def pages(self, list_page: ListPage) -> ListPage:
        """``list_page`` with every answer counted and the clock checked before it."""

        def counted(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
            self.spend(0)
            raw = list_page(resource, namespace, limit, token)
            self.spend(len(raw))
            return raw

        return counted

    def stream(self, list_stream: ListStream) -> ListStream:
        """``list_stream`` with every chunk counted and the clock checked after it."""

        def counted(resource: str, namespace: str | None) -> Iterator[bytes]:
            self.spend(0)
            chunks = list_stream(resource, namespace)
            try:
                for chunk in chunks:
                    self.spend(len(chunk))
                    yield chunk
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()

        return counted


def _default_builder() -> Builder:
    builder: Builder = SnapshotBuilder("cluster")
    return builder


def require_nodes(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` when it holds a node; else :class:`errors.ClusterError` (exit 3). A cluster
    read with no node cannot run a pod: planning on it would report a balanced cluster (a
    snapshot file without nodes is refused the same way, exit 2)."""
    if not snapshot.nodes:
        raise errors.ClusterError(
            "LIST nodes answered no node: nothing to plan on (a cluster with no nodes, or an "
            "API server that is not the cluster's)"
        )
    return snapshot


def served(
    list_page: ListPage, optional: Sequence[Resource] = OPTIONAL_RESOURCES
) -> tuple[Resource, ...]:
    """Of the ``optional`` resources (read where served), those this client may LIST: one
    request each (a page of one object). One the server does not serve (404: Karpenter is not
    installed) or RBAC does not allow (403: a ClusterRole from before it was read) is left
    out, logged (``read.absent``) and never an error; any other failure raises."""
    log = logs.get_logger("rebalancer.read")
    found = []
    for resource in optional:
        try:
            list_page(resource.name, None, 1, None)
        except (errors.NotFound, errors.Forbidden) as exc:
            reason = "not served" if isinstance(exc, errors.NotFound) else "forbidden"
            log.info(logs.READ_ABSENT, resource=resource.rbac_name, reason=reason)
            continue
        found.append(resource)
    return tuple(found)


def with_optional(
    base: ReadResult,
    list_page: ListPage,
    optional: Sequence[Resource],
    **read: Any,
) -> ReadResult:
    """``base`` (a read of :data:`RESOURCES`) with the ``optional`` resources found
    :func:`served` read after it (``read``: :func:`read_cluster`'s keywords, as for ``base``):
    their objects after ``base``'s, in the snapshot as Karpenter's NodePools."""
    if not optional:
        return base
    extra = read_cluster(list_page, resources=optional, **read)
    objects = None
    if base.objects is not None:
        objects = (*base.objects, *(extra.objects or ()))
    return ReadResult(
        snapshot=replace(base.snapshot, node_pools=extra.snapshot.node_pools),
        objects=objects,
        counts=(*base.counts, *extra.counts),
        pages=base.pages + extra.pages,
        rejected=(*base.rejected, *extra.rejected),
    )


def read_cluster(
    list_page: ListPage,
    *,
    namespace: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    keep_objects: bool = False,
    trim: bool = False,
    resources: Sequence[Resource] = RESOURCES,
    builder_factory: Callable[[], Builder] = _default_builder,
    prefetch: int = PREFETCH,
    deadline: ReadDeadline | None = None,
    clock: Callable[[], float] = time.monotonic,
    skip_invalid: bool = False,
    list_page_proto: ListPage | None = None,
    list_stream: ListStream | None = None,
    limits: ReadLimits | None = None,
) -> ReadResult:
    """Read every resource, page by page, into a Snapshot (and the raw objects if asked).

    ``skip_invalid``: an object that cannot be converted (version skew, a field rebalancer does
    not know) leaves its namespace out of the snapshot instead of failing the read; the result
    lists it in ``rejected``. Problems with cluster-scoped objects still raise.

    ``deadline`` bounds the whole read (checked before each request, after each page and
    after each chunk of a stream; a request itself is bounded by the request deadline of the
    transport), restarts included. ``limits`` bound the objects and bytes it takes in, also
    over restarts; past any bound the read raises (:class:`errors.DeadlineExceeded`,
    :class:`errors.ReadTooLarge`) and nothing it read is kept.

    ``trim`` keeps the objects trimmed to what the planner reads
    (:mod:`rebalancer.cluster.read.slim`).

    With ``namespace``, namespaced kinds are read in that namespace only; nodes, PVs and
    PriorityClasses are cluster-scoped and always read whole. An expired continue token (410)
    starts the whole read again, at most :data:`MAX_RESTARTS` times, so the result is never a
    mix of two list versions.

    ``list_page_proto``: the transport asking for protobuf, used for the pages of
    :data:`PROTOBUF_RESOURCES` on the ``protobuf-pages`` route. A page
    :mod:`~rebalancer.cluster.read.protodecode` cannot take exactly is read again as JSON with
    the same continue token (the same list snapshot); when that is the first page of a
    resource, the route declines and the read starts again on ``json-typed``.

    ``list_stream``: the transport of one unpaginated protobuf LIST, used instead of pages for
    :data:`PROTOBUF_RESOURCES` on the ``protobuf-stream`` route. Its body is split and
    converted in batches as it arrives. An answer that is not protobuf, bytes that do not
    parse, a batch the decoder cannot take exactly: the route declines, and the read starts
    again with a fresh builder on the next route (pods paginated: ``protobuf-pages`` when
    ``list_page_proto`` is given, else ``json-typed``), so no half-read list is left.
    The ``deadline`` is checked after each batch (the transport bounds each chunk's wait).

    With ``prefetch`` > 0 a :class:`PageFetcher` thread requests the pages, in the same order
    and with the same arguments, up to ``prefetch`` pages ahead of the one being converted: the
    API server encodes the next page while this one is parsed and converted. When the pods are
    streamed, the stream's request goes out first and a second thread reads the other
    resources meanwhile, parsing and converting their pages ahead (:mod:`.overlap`); they are
    still added in plan order, into the same snapshot, and their errors raised in that order.
    """
    if page_size < 1:
        raise ValueError("page_size must be >= 1")
    if prefetch < 0:
        raise ValueError("prefetch must be >= 0")
    budget = _Budget(deadline, limits or ReadLimits(), clock)
    check = budget.check
    list_page = budget.pages(list_page)
    if list_page_proto is not None:
        list_page_proto = budget.pages(list_page_proto)
    if list_stream is not None:
        list_stream = budget.stream(list_stream)

    builder = builder_factory()
    route, why = first_route(
        keep_objects=keep_objects,
        converter=isinstance(builder, SnapshotBuilder),
        resources=resources,
        list_page_proto=list_page_proto,
        list_stream=list_stream,
    )
    log = logs.get_logger("rebalancer.read")
    attempt = 0
    while True:
        log.info(logs.READ_ROUTE, route=str(route), reason=why)
        try:
            with gc_paused():
                outcome = _read_once(
                    route,
                    list_page,
                    namespace=namespace,
                    page_size=page_size,
                    trim=trim,
                    resources=resources,
                    builder=builder,
                    prefetch=prefetch,
                    check=check,
                    skip_invalid=skip_invalid,
                    list_page_proto=list_page_proto,
                    list_stream=list_stream,
                )
        except errors.Gone as exc:  # the list snapshot expired: the same route, from the start
            if attempt == MAX_RESTARTS:
                raise
            attempt += 1
            why = f"read again from the start: {exc}"
        else:
            if isinstance(outcome, ReadResult):
                return outcome
            route, why = next_route(route, list_page_proto), f"{route} declined: {outcome.reason}"
        builder = builder_factory()


class VersionUnavailable(errors.ClusterError):
    """A LIST at one exact resourceVersion that the server cannot or will not serve: 410 Gone
    (etcd compacted it), a 400 or 422 refusing ``resourceVersionMatch``, or an answer at
    another version (a server that ignores the parameter)."""


def read_at_version(
    list_page: ListPageAt,
    resource: Resource,
    version: str,
    *,
    namespace: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    deadline: ReadDeadline | None = None,
    limits: ReadLimits | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ReadResult:
    """One resource as it was at exactly ``version`` (``resourceVersionMatch=Exact``, paged:
    the continue tokens keep the version), on the ``json-typed`` route, converted as every read
    is, objects the converter rejects leaving their namespaces out (``skip_invalid``).

    Not logged as a route and never started again: a 410 is etcd's compaction, not an expired
    token, and the same request would meet it again; it, a refusal (400, 422) and an answer
    at another version raise :class:`VersionUnavailable`."""
    answered: list[str | None] = []

    def pinned(name: str, scope: str | None, limit: int, token: str | None) -> bytes:
        raw = list_page(name, scope, limit, token, resource_version=None if token else version)
        if token is None:
            parts = fastdecode.page_parts(raw)
            answered.append(parts[2] if parts is not None else None)
        return raw

    budget = _Budget(deadline, limits or ReadLimits(), clock)
    builder = SnapshotBuilder("cluster")
    try:
        with gc_paused():
            outcome = _read_once(
                Route.JSON_TYPED,
                budget.pages(pinned),
                namespace=namespace,
                page_size=page_size,
                trim=False,
                resources=[resource],
                builder=builder,
                prefetch=0,
                check=budget.check,
                skip_invalid=True,
            )
    except errors.Gone as exc:
        raise VersionUnavailable(f"410 Gone: {exc.message}") from exc
    except errors.ClientError as exc:
        if exc.status not in (400, 422):  # the API server's answer to list options it refuses
            raise
        raise VersionUnavailable(f"refused ({exc.status}): {exc.message}") from exc
    assert isinstance(outcome, ReadResult)  # json-typed never declines
    wrong = [v for v in answered if v != version]
    if wrong:
        raise VersionUnavailable(
            f"answered at resourceVersion {wrong[0] or '(none)'}, not exactly {version}"
        )
    return outcome


def _read_once(
    route: Route,
    list_page: ListPage,
    *,
    namespace: str | None,
    page_size: int,
    trim: bool,
    resources: Sequence[Resource],
    builder: Builder,
    prefetch: int,
    check: Callable[[int], None],
    skip_invalid: bool,
    list_page_proto: ListPage | None = None,
    list_stream: ListStream | None = None,
) -> ReadResult | Declined:
    """One read on ``route``: its result, or why the route cannot go on."""
    kept: list[dict[str, Any]] | None = [] if route is Route.JSON else None
    counts = dict.fromkeys((r.name for r in resources), 0)
    pages = 0
    plan = [(r, namespace if r.namespaced else None) for r in resources]
    # Decoded straight into the model on every route but plain JSON.
    fast = (
        ProtoBuilder(builder)
        if isinstance(builder, SnapshotBuilder) and route is not Route.JSON
        else None
    )
    fetcher = _fetcher(
        list_page,
        plan,
        page_size=page_size,
        prefetch=prefetch,
        list_page_proto=list_page_proto if route is Route.PROTOBUF_PAGES else None,
        list_stream=list_stream if route is Route.STREAM else None,
    )
    with fetcher:
        for resource, fetched, token in fetcher:
            if isinstance(fetched, Declined):  # the streamed LIST is not taken
                return fetched
            # A batch of the one streamed LIST of pods, or a page converted ahead beside it.
            if isinstance(fetched, PodBatch | Prepared):
                added = _add_ready(fast, fetched, counts, resource.name, token)
                if added is None:
                    return Declined("a pod the protobuf decoder does not take exactly")
                pages += added
                check(sum(counts.values()))
                continue
            pages += 1
            if isinstance(fetched, ProtoPage):
                assert fast is not None  # only asked for with a builder of the converter's
                added = fast.add_page(fetched)
                if added is not None:
                    counts[resource.name] += added
                    check(sum(counts.values()))
                    continue
                if fetched.requested is None:  # no list snapshot yet to read it again from
                    return Declined("the first page of pods does not decode exactly")
                pages += 1
                raw = again_as_json(
                    list_page, fetched, resource, namespace=namespace, size=page_size, token=token
                )
            else:
                raw = fetched
            del fetched
            listed = fastdecode.page_items(raw) if fast is not None else None
            if fast is not None and listed is not None:
                raw_items, page_token = listed
                if page_token != token:  # pragma: no cover - continue_token misread the page
                    raise errors.ClusterError(f"LIST {resource.name}: inconsistent continue token")
                del raw, listed
                counts[resource.name] += _add_listed(fast, raw_items, resource)
                del raw_items
                check(sum(counts.values()))
                continue
            page = _parse_page(raw, resource)
            if _token_of(page) != token:  # pragma: no cover - continue_token misread the page
                raise errors.ClusterError(f"LIST {resource.name}: inconsistent continue token")
            items = page.get("items") or ()
            del page, raw  # only the items are needed from here on
            _add_parsed(items, resource, builder, kept, trim=trim)
            counts[resource.name] += len(items)
            del items  # converted: let the page go before the next one is parsed
            check(sum(counts.values()))
    snapshot = builder.build(skip_invalid=skip_invalid)
    objects = tuple(kept) if kept is not None else None
    return ReadResult(
        snapshot, objects, tuple(counts.items()), pages, builder.rejected if skip_invalid else ()
    )


def _fetcher(
    list_page: ListPage,
    plan: Sequence[tuple[Resource, str | None]],
    *,
    page_size: int,
    prefetch: int,
    list_page_proto: ListPage | None,
    list_stream: ListStream | None,
) -> PageFetcher | Overlapped[Fetched]:
    """The pages of ``plan`` in order. With a stream and a fetch thread, the streamed LIST in
    one thread and every other resource in a second, converted ahead (:mod:`.overlap`)."""
    streamed = [p for p in plan if p[0].name in PROTOBUF_RESOURCES]
    others = [p for p in plan if p[0].name not in PROTOBUF_RESOURCES]
    if list_stream is None or prefetch == 0 or not streamed or not others:
        return PageFetcher(
            list_page, plan, page_size, prefetch, list_page_proto, list_stream=list_stream
        )
    stream = PageFetcher(list_page, streamed, page_size, prefetch, list_stream=list_stream)
    side = PageFetcher(
        list_page,
        others,
        page_size,
        SIDE_PREFETCH,
        prepare=SidePages(),
        name="rebalancer-list-others",
    )
    return Overlapped([r for r, _ in plan], PROTOBUF_RESOURCES, stream, side)


def _add_ready(
    fast: ProtoBuilder | None,
    ready: PodBatch | Prepared,
    counts: dict[str, int],
    resource: str,
    token: str | None,
) -> int | None:
    """A batch of streamed pods, or a page converted ahead (:func:`.overlap.replay`), into
    the builder, counted; the LIST requests it completes (1 for a page and the last batch).
    None for a batch the decoder cannot take exactly (the stream declines: the pods paginated
    name each problem)."""
    assert fast is not None  # only asked for with a builder of the converter's
    if isinstance(ready, Prepared):
        if ready.token != token:  # pragma: no cover - continue_token misread the page
            raise errors.ClusterError(f"LIST {resource}: inconsistent continue token")
        counts[resource] += replay(ready, fast.builder)
        return 1
    added = fast.add_items(ready.items)
    if added is None:
        return None
    counts[resource] += added
    return int(ready.last)


def _add_parsed(
    items: Sequence[Any],
    resource: Resource,
    builder: Builder,
    kept: list[dict[str, Any]] | None,
    *,
    trim: bool,
) -> None:
    """A parsed JSON page's items into the builder (and into ``kept``, whole or trimmed)."""
    if kept is None:
        for item in items:
            builder.add(_typed(item, resource))
        return
    for item in items:
        obj = _complete(item, resource)
        builder.add(obj)
        kept.append(slim(obj) if trim else obj)


def _add_listed(fast: ProtoBuilder, raw_items: Sequence[Any], resource: Resource) -> int:
    """A JSON page's items (typed decoding) into the builder; how many."""
    for raw_item in raw_items:
        if not fast.add_listed(raw_item, resource.kind):
            raise errors.ClusterError(f"LIST {resource.name}: an item is not an object")
    return len(raw_items)


def again_as_json(
    list_page: ListPage,
    page: ProtoPage,
    resource: Resource,
    *,
    namespace: str | None,
    size: int,
    token: str | None,
) -> bytes:
    """A protobuf page the decoder could not take exactly (not the first: it has a list
    snapshot), read again as JSON from the same list snapshot (its continue token)."""
    raw = list_page(resource.name, namespace if resource.namespaced else None, size, page.requested)
    if continue_token(raw, resource) != token:
        raise errors.ClusterError(
            f"LIST {resource.name}: the page read again as JSON ends elsewhere"
        )
    return drop_managed_fields(raw)


def _parse_page(raw: bytes, resource: Resource) -> dict[str, Any]:
    deep = too_deep(raw)
    if deep is not None:  # refused before any parser recurses into it
        raise errors.ClusterError(f"LIST {resource.name}: the answer is {deep}")
    try:
        page = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise errors.ClusterError(f"LIST {resource.name}: the answer is not JSON: {exc}") from exc
    if not isinstance(page, dict) or not isinstance(page.get("items", []), list):
        raise errors.ClusterError(f"LIST {resource.name}: the answer is not a list")
    return page


def _token_of(page: dict[str, Any]) -> str | None:
    """The continue token of a parsed list page, None on the last page."""
    metadata = page.get("metadata")
    token = metadata.get("continue") if isinstance(metadata, dict) else None
    return token if isinstance(token, str) and token else None


_ITEMS: Final = b'"items":'
_HEAD_MAX: Final = 1 << 16


def continue_token(raw: bytes, resource: Resource) -> str | None:
    """The continue token of a raw list page without parsing its items.

    The API server writes ``kind``, ``apiVersion`` and ``metadata`` before ``items``, so the
    bytes before the top-level ``"items":`` key, closed with ``}``, are the page without its
    items. (A raw ``"items":`` can only be a key, and it closes into valid JSON only at the top
    level.) Anything else is parsed whole.
    """
    end = raw.find(_ITEMS, 0, _HEAD_MAX)
    if end > 0:
        head = raw[:end].rstrip()
        if head.endswith(b","):
            try:
                value = orjson.loads(head[:-1] + b"}")
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict) and "metadata" in value:
                return _token_of(value)
    return _token_of(_parse_page(raw, resource))


_MANAGED: Final = b',"managedFields":['
_MANAGED_END: Final = b'},"spec":{'
_ITEM_START: Final = b'{"metadata":{'


def drop_managed_fields(raw: bytes) -> bytes:
    """A raw list page without its items' ``metadata.managedFields``, cut out as bytes.

    managedFields is server-side apply's bookkeeping: nothing rebalancer reads (the reader
    drops it from every object anyway), and about 40% of a pod's JSON, which orjson would
    otherwise build into dicts. The API server writes it last in ``metadata``, and the kinds
    read here put ``spec`` right after ``metadata``, so ``,"managedFields":[...]`` ends just
    before ``},"spec":{``. Both patterns begin with an unescaped quote, so they can only be
    JSON syntax, never the inside of a string; and no key inside managedFields is a bare
    ``spec``. A cut is made only when the array closes right there (``]``) and no item starts
    in between (``{"metadata":{``); anything else is left as it is.
    """
    find = raw.find
    start = find(_MANAGED)
    if start < 0:
        return raw
    view = memoryview(raw)
    parts: list[memoryview] = []
    pos = 0
    while start >= 0:
        end = find(_MANAGED_END, start)
        if end < 0:
            break
        if raw[end - 1] == 0x5D and find(_ITEM_START, start, end) < 0:  # "]"
            parts.append(view[pos:start])
            pos = end
        start = find(_MANAGED, max(pos, start + 1))
    if not parts:
        return raw
    parts.append(view[pos:])
    return b"".join(parts)


def _typed(item: Any, resource: Resource) -> dict[str, Any]:
    """A list item with ``kind``/``apiVersion`` set (the API leaves them out of list items)."""
    if not isinstance(item, dict):
        raise errors.ClusterError(f"LIST {resource.name}: an item is not an object")
    item["kind"] = resource.kind
    item["apiVersion"] = resource.api_version
    return item


def _complete(item: Any, resource: Resource) -> dict[str, Any]:
    """A list item as a standalone object: ``kind``/``apiVersion`` set, managedFields dropped."""
    item = _typed(item, resource)
    metadata = item.get("metadata")
    if isinstance(metadata, dict):
        # Bookkeeping of server-side apply: large, and nothing rebalancer reads.
        metadata.pop("managedFields", None)
    # Put kind and apiVersion first, as kubectl writes them.
    return {"apiVersion": item.pop("apiVersion"), "kind": item.pop("kind"), **item}


Fetched = tuple[Resource, bytes | ProtoPage | PodBatch | Prepared | Declined, str | None]
"""One page: its resource, its raw JSON (or a decoded protobuf page of pods, when a protobuf
transport is given; or a batch of the streamed list of pods, when a stream transport is, and
:class:`Declined` in place of the next batch when the stream is not taken; or the page parsed
and converted ahead, when a ``prepare`` function is), and the continue token read from it
(None: last, and always for a batch)."""
Prepare = Callable[[bytes, Resource], "bytes | Prepared"]
"""``prepare(raw, resource)``: a JSON page made ready in the fetch thread (or left as it is)."""

_DONE: Final = object()
STOPPING_JOIN_SECONDS: Final = 0.2
"""How long a fetch thread is waited for once the process is stopping."""


class PageFetcher:
    """The pages of paginated LISTs, in order, fetched ``depth`` pages ahead by a thread.

    Iterating yields ``(resource, raw, continue_token)`` for every page of every
    ``(resource, namespace)`` in ``plan``, in that order, each resource listed from the start
    and followed by its continue tokens (read from each page by :func:`continue_token`). With
    ``depth`` 0 each page is requested when it is asked for, in the caller's thread. Otherwise
    a daemon thread requests them, at most ``depth`` pages queued that the consumer has not
    taken (plus the one it is fetching); an exception it meets (a 410 Gone, an API or
    connection error) is raised to the consumer in place of the page it was fetching, and the
    thread stops there. Leaving the ``with`` block stops the thread, whatever happened.
    ``prepare`` turns each JSON page into what is handed over, in the fetching thread.
    """

    def __init__(
        self,
        list_page: ListPage,
        plan: Sequence[tuple[Resource, str | None]],
        page_size: int,
        depth: int = PREFETCH,
        list_page_proto: ListPage | None = None,
        *,
        list_stream: ListStream | None = None,
        prepare: Prepare | None = None,
        name: str = "rebalancer-list-pages",
    ) -> None:
        self._list_page = list_page
        self._prepare = prepare
        self._name = name
        self._list_stream = list_stream
        self._list_page_proto = list_page_proto
        self._plan = tuple(plan)
        self._page_size = page_size
        self._depth = depth
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PageFetcher:
        if self._depth > 0:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stop(self) -> None:
        """Tell the thread to stop, without waiting for it (:meth:`close` waits)."""
        self._stop.set()
        while True:  # unblock a put; the thread puts nothing once it sees the stop
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread: it ends at its next page boundary (a request in flight finishes).
        Once the process is stopping (SIGTERM), its request is cut and sends nothing more, and
        it is waited for :data:`STOPPING_JOIN_SECONDS` at most: a daemon, it ends with the
        process."""
        self.stop()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(min(timeout, STOPPING_JOIN_SECONDS) if deadline.stopping() else timeout)

    @property
    def alive(self) -> bool:
        """Whether the fetch thread is running (for tests)."""
        return self._thread is not None and self._thread.is_alive()

    def __iter__(self) -> Iterator[Fetched]:
        if self._depth == 0:
            yield from self._pages()
            return
        if self._thread is None:
            raise RuntimeError("PageFetcher: iterate inside 'with'")
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]  # a Fetched: the only other thing queued

    def _pages(self) -> Generator[Fetched, None, None]:
        for resource, namespace in self._plan:
            if self._list_stream is not None and resource.name in PROTOBUF_RESOURCES:
                yield from self._streamed(self._list_stream, resource, namespace)
                continue
            token: list[str | None] = [None]
            while True:
                # No local keeps the page: it is freed as soon as its consumer drops it.
                yield self._fetch(resource, namespace, token)
                if token[0] is None:
                    break

    @staticmethod
    def _streamed(
        list_stream: ListStream, resource: Resource, namespace: str | None
    ) -> Iterator[Fetched]:
        """The batches of one unpaginated LIST (the connection closed however it ends), then
        :class:`Declined` if the answer is not taken (not protobuf, or not a list of pods as
        the schema has it): the last thing yielded."""
        chunks: Iterable[bytes] = ()
        try:
            chunks = list_stream(resource.name, namespace)
            for batch in pod_batches(chunks):
                yield resource, batch, None
                del batch
        except StreamDeclined as exc:
            yield resource, Declined(f"LIST {resource.name}: {exc}"), None
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def _fetch(self, resource: Resource, namespace: str | None, token: list[str | None]) -> Fetched:
        """Request the page after ``token[0]``; set ``token[0]`` to the page's own token."""
        requested = token[0]
        if self._list_page_proto is not None and resource.name in PROTOBUF_RESOURCES:
            raw = self._list_page_proto(resource.name, namespace, self._page_size, requested)
            if protodecode.is_protobuf(raw):
                page = protodecode.parse_page(raw, requested)
                del raw
                if page is not None:
                    token[0] = page.continue_token
                    return resource, page, token[0]
                # Not a page of pods as the schema has it: the same page as JSON.
                raw = self._list_page(resource.name, namespace, self._page_size, requested)
        else:
            raw = self._list_page(resource.name, namespace, self._page_size, requested)
        token[0] = continue_token(raw, resource)
        if self._prepare is not None:
            return resource, self._prepare(drop_managed_fields(raw), resource), token[0]
        return resource, drop_managed_fields(raw), token[0]

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
            except queue.Full:
                continue
            return True
        return False

    def _run(self) -> None:
        pages = self._pages()
        try:
            for fetched in pages:
                if self._stop.is_set() or not self._put(fetched):
                    return
                del fetched
            self._put(_DONE)
        except BaseException as exc:  # handed over, raised in the consumer's thread
            self._put(exc)
        finally:
            pages.close()  # a stream left early: its connection closed now, not at collection
