"""The small LISTs read beside the one streamed LIST of pods, and converted ahead.

kube-apiserver takes a quarter of a second at 30,000 pods before the first bytes of the
streamed LIST (:mod:`rebalancer.cluster.read.protodecode.stream`), and the pods then keep the
reader busy until their last byte. Read one after the other, the other resources (nodes,
PDBs, Services, controllers...) would add their requests and their conversion before and
after it. :class:`Overlapped` sends the stream's request first and reads the others at the
same time, in a second :class:`~rebalancer.cluster.read.reader.PageFetcher` thread, which also
parses and converts their pages (:class:`SidePages`) while the reader waits for the pods.

What the reader builds stays exactly what the sequential read builds: it still takes every
page in plan order (the others' pages wait in their queue), and each page is added to its
builder by :func:`replay` as :meth:`~rebalancer.core.convert.SnapshotBuilder.add` would have
added it: an object converted without a problem as that object
(:meth:`~rebalancer.core.convert.SnapshotBuilder.add_converted`), any other given to ``add``
itself, which converts it again and records its problems in their place. The kinds read
beside the pods share no numbered fragment with them (only owner references and quantities,
whose values do not depend on what was converted first), so converting them ahead with caches
of their own gives equal objects. An error of either thread is raised where the sequential
read would meet it: the pods first, then the others in plan order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.resources import Resource
from rebalancer.cluster.read import fastdecode
from rebalancer.cluster.read.fastdecode import FastBuilder, Sink
from rebalancer.cluster.read.protodecode.stream import PodBatch
from rebalancer.core.api import Caches, convert_one

__all__ = ["Overlapped", "Prepared", "SidePages", "replay"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A JSON page of a LIST, parsed and converted ahead of its turn.

    ``entries``, in the page's order: ``(kind, object)`` for an item converted without a
    problem, ``(None, item)`` for one to give to the builder's ``add`` (the parsed item, kind
    set). ``whole`` is False when an item after those is not an object (the read fails
    there). ``token``: the continue token the page itself carries."""

    resource: Resource
    entries: Sequence[tuple[str | None, Any]]
    count: int  # items on the page
    token: str | None
    whole: bool = True


class _Recorder:
    """A :class:`~rebalancer.cluster.read.fastdecode.Sink` that converts and keeps, in order,
    what a :class:`FastBuilder` hands over."""

    def __init__(self) -> None:
        self.caches = Caches()  # the kinds read beside the pods number no shared fragment
        self.entries: list[tuple[str | None, Any]] = []

    def add(self, obj: Any) -> None:
        item, problems = convert_one(obj, self.caches)
        self.entries.append((None, obj) if problems or item is None else (obj["kind"], item))

    def add_converted(self, kind: str, item: Any) -> None:
        self.entries.append((kind, item))


class SidePages:
    """Prepares the JSON pages of one read, in the thread that fetches them: ``prepare(raw,
    resource)`` is the page as :class:`Prepared`, or ``raw`` itself when it is not a plain
    list (the reader's general path then names what is wrong)."""

    def __init__(self) -> None:
        self._recorder = _Recorder()
        self._fast = FastBuilder(self._recorder)

    def __call__(self, raw: bytes, resource: Resource) -> Prepared | bytes:
        listed = fastdecode.page_items(raw)
        if listed is None:
            return raw
        items, token = listed
        del raw
        recorder = self._recorder
        recorder.entries = []
        # all() stops at the first item that is not an object, as the sequential read does.
        whole = all(self._fast.add_listed(item, resource.kind) for item in items)
        entries, recorder.entries = recorder.entries, []
        return Prepared(resource, entries, len(items), token, whole)


def replay(page: Prepared, builder: Sink) -> int:
    """Add a prepared page's objects to ``builder`` as the sequential read adds them; how many
    items the page has. Raises where the sequential read raises (an item not an object)."""
    add, add_converted = builder.add, builder.add_converted
    for kind, value in page.entries:
        if kind is None:
            add(value)
        else:
            add_converted(kind, value)
    if not page.whole:
        raise errors.ClusterError(f"LIST {page.resource.name}: an item is not an object")
    return page.count


_F = TypeVar("_F", bound=tuple[Resource, object, str | None])
_F_co = TypeVar("_F_co", bound=tuple[Resource, object, str | None], covariant=True)


class Source(Protocol[_F_co]):
    """What :class:`Overlapped` reads from: a :class:`~rebalancer.cluster.read.reader.PageFetcher`
    (its pages or batches, each with its resource and continue token)."""

    def __enter__(self) -> Any: ...

    def __iter__(self) -> Iterator[_F_co]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


def _last(fetched: tuple[Resource, object, str | None]) -> bool:
    """Whether ``fetched`` ends its resource: a page without continue token, the last batch."""
    _, page, token = fetched
    return page.last if isinstance(page, PodBatch) else token is None


class Overlapped(Generic[_F]):
    """Two sources read at once, taken in plan order: every resource of ``streamed`` from
    ``stream``, every other from ``side``. ``stream`` starts first (its request goes out
    first); leaving the ``with`` block stops both, whatever happened."""

    def __init__(
        self,
        plan: Sequence[Resource],
        streamed: frozenset[str],
        stream: Source[_F],
        side: Source[_F],
    ) -> None:
        self._plan = tuple(plan)
        self._streamed = streamed
        self._stream = stream
        self._side = side
        self._entered: list[Source[_F]] = []

    def __enter__(self) -> Overlapped[_F]:
        try:
            for source in (self._stream, self._side):
                source.__enter__()
                self._entered.append(source)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop both threads at once, then wait for them (the last started first)."""
        entered, self._entered = self._entered, []
        for source in entered:
            source.stop()
        for source in reversed(entered):
            source.close()

    def __iter__(self) -> Iterator[_F]:
        stream, side = iter(self._stream), iter(self._side)
        for resource in self._plan:
            source = stream if resource.name in self._streamed else side
            for fetched in source:
                if fetched[0] != resource:  # pragma: no cover - both follow the plan
                    raise RuntimeError(f"{fetched[0].name} read in place of {resource.name}")
                yield fetched
                if _last(fetched):
                    break
            else:  # pragma: no cover - a source always ends its resources
                raise RuntimeError(f"LIST {resource.name} ended without its last page")
