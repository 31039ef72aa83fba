"""One unpaginated LIST of pods in protobuf, split into its items as the bytes arrive.

kube-apiserver serves a LIST without ``limit`` (and without resourceVersion: a consistent read)
wholly from its watch cache, for a fraction of the CPU the pages of a paginated LIST cost (every
page after the first goes to etcd). The answer is one message of about 3.3 KB per pod (97 MB
at 30,000 pods): it is never held whole. :class:`PodListSplitter` takes the body in chunks and
cuts out each item's bytes as soon as they are complete; :func:`pod_batches` parses them in
batches (:data:`BATCH` pods) with the generated classes, for
:class:`~rebalancer.cluster.read.protodecode.ProtoBuilder` to convert. At most a chunk, one item
being cut and one batch are alive.

The body, as kube-apiserver writes it: the 4 bytes ``k8s\\0``, then a runtime.Unknown whose
field 1 is the TypeMeta (kind ``PodList``), field 2 the PodList's bytes (length-delimited),
fields 3 and 4 contentEncoding (must be empty) and contentType. Inside the PodList, field 1 is
the ListMeta (resourceVersion, continue), field 2 each item. Fields may come in any order, and
fields of other numbers are skipped by their wire type. Anything else is
:class:`StreamDeclined`: a varint longer than 10 bytes, a length past what is left of its
enclosing message, an item larger than :data:`MAX_ITEM`, a body that ends inside a field, a
missing or second PodList, a continue token (the list is not whole). A length is never trusted
to allocate: bytes are kept only as they arrive. The reader then reads the pods the paginated
way, from scratch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from rebalancer.cluster.read.protodecode import MAGIC
from rebalancer.cluster.read.protodecode import schema_pb2 as pb

__all__ = ["BATCH", "MAX_ITEM", "PodBatch", "PodListSplitter", "StreamDeclined", "pod_batches"]

BATCH: Final = 100
"""Pods parsed and handed over at a time. Batches queue between the reading thread and the
converter, so they are what the pass holds of the answer: at 30,000 pods, batches of 100
rather than 1,000 took its peak RSS from 131-136 MiB to 120-121 MiB, at no cost in time."""
MAX_ITEM: Final = 64 << 20
"""The largest pod taken (etcd stores objects of at most 1.5 MiB by default)."""
MAX_META: Final = 1 << 20
"""The largest TypeMeta, ListMeta or contentEncoding taken."""

_MAGIC: Final = 0  # states
_FIELDS: Final = 1


class StreamDeclined(Exception):
    """The answer is not one whole PodList in protobuf as this module takes it (or not
    protobuf at all): the pods are read the paginated way instead."""


@dataclass(frozen=True, slots=True)
class PodBatch:
    """Pods of a streamed LIST, parsed, not yet converted. The last batch of a list (maybe
    without items) has ``last`` set and the list's resourceVersion."""

    items: Sequence[pb.Pod]
    last: bool = False
    resource_version: str = ""


def _varint(buf: bytearray, pos: int, end: int) -> tuple[int, int] | None:
    """(value, position after it); None when the varint is not complete in ``buf[pos:end]``
    (at most 10 bytes: a longer one is refused at once, not waited for)."""
    value = 0
    shift = 0
    start = pos
    limit = min(end, pos + 10)
    while pos < limit:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value >> 64:
                raise StreamDeclined("a varint larger than 64 bits")
            return value, pos
        shift += 7
    if pos - start >= 10:
        raise StreamDeclined("a varint longer than 10 bytes")
    return None


def _check_magic(head: bytes) -> None:
    if head != MAGIC[: len(head)]:
        raise StreamDeclined("the answer is not protobuf")


def _scalar(wire: int, buf: bytearray, pos: int, end: int) -> int | None:
    """The position after a value of wire type 0, 1 or 5; None when not complete yet."""
    if wire == 0:
        value = _varint(buf, pos, end)
        return None if value is None else value[1]
    if wire in (1, 5):
        size = 8 if wire == 1 else 4
        return pos + size if end - pos >= size else None
    raise StreamDeclined(f"a field of wire type {wire} (groups are not taken)")


class PodListSplitter:
    """A push parser of the answer: :meth:`feed` it the body's chunks in order, it returns the
    bytes of the items completed so far; :meth:`finish` at the end of the body."""

    def __init__(self, *, max_item: int = MAX_ITEM) -> None:
        self._max_item = max_item
        self._buf = bytearray()
        self._state = _MAGIC
        self._skip = 0  # bytes of a skipped field's value still to come
        self._list_left: int | None = None  # bytes of the PodList still to come (inside it)
        self._list_seen = False
        self.kind: str | None = None
        self.meta: pb.ListMeta | None = None
        self.items_seen = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The items completed by ``chunk`` (each item's own bytes, a Pod message)."""
        buf = self._buf
        buf += chunk
        out: list[bytes] = []
        with memoryview(buf) as view:  # items are copied out once, from the view
            pos = self._parse(buf, view, out)
        del buf[:pos]  # what is left: less than one field (its header, an item being cut)
        return out

    def finish(self) -> pb.ListMeta:
        """The list's metadata, once the whole body was fed; raises :class:`StreamDeclined`
        when the body ended early or is not a whole PodList."""
        if self._state == _MAGIC:
            raise StreamDeclined("the answer is not protobuf")
        if self._buf or self._skip or self._list_left is not None:
            raise StreamDeclined("the answer ends inside a field")
        if self.kind != "PodList":
            raise StreamDeclined(f"the answer is a {self.kind or 'message without a kind'}")
        if not self._list_seen:
            raise StreamDeclined("the answer has no PodList")
        meta = self.meta if self.meta is not None else pb.ListMeta()
        if getattr(meta, "continue"):
            raise StreamDeclined("the list has a continue token: it is not whole")
        return meta

    def _consumed(self, size: int) -> None:
        """``size`` bytes of the PodList were read (inside it): check and count them."""
        left = self._list_left
        if left is None:
            return
        if size > left:
            raise StreamDeclined("a field runs past the end of the PodList")
        left -= size
        self._list_left = left
        if left == 0:
            self._list_left = None

    def _parse(self, buf: bytearray, view: memoryview, out: list[bytes]) -> int:
        """Parse ``buf`` as far as it is complete; the position reached."""
        pos = 0
        end = len(buf)
        while True:
            if self._skip:
                n = min(self._skip, end - pos)
                pos += n
                self._skip -= n
                if self._skip:
                    return pos
            if pos == end:
                return pos
            if self._state == _MAGIC:
                if end - pos < len(MAGIC):
                    _check_magic(bytes(buf[pos:end]))
                    return pos
                _check_magic(bytes(buf[pos : pos + len(MAGIC)]))
                pos += len(MAGIC)
                self._state = _FIELDS
                continue
            start = pos
            header = _varint(buf, pos, end)
            if header is None:
                return start
            tag, pos = header
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise StreamDeclined("a field numbered 0")
            inside = self._list_left is not None
            if wire == 2:
                sized = _varint(buf, pos, end)
                if sized is None:
                    return start
                length, pos = sized
                head = pos - start
                if inside:
                    self._consumed(head)
                    if length > (self._list_left or 0):
                        raise StreamDeclined("a field runs past the end of the PodList")
                    taken = self._in_list(number, length, view, pos, end, out=out)
                else:
                    taken = self._in_envelope(number, length, view, pos, end)
                if taken is None:  # the value is not complete yet: parse it again later
                    if inside:
                        self._list_left = (self._list_left or 0) + head
                    return start
                pos = taken
                continue
            if (number in (1, 2) and inside) or (number <= 3 and not inside):
                raise StreamDeclined(f"field {number} has wire type {wire}, not a message")
            after = _scalar(wire, buf, pos, end)
            if after is None:
                return start
            pos = after
            self._consumed(pos - start)

    def _in_envelope(
        self, number: int, length: int, buf: memoryview, pos: int, end: int
    ) -> int | None:
        """A length-delimited field of the runtime.Unknown; the position after what was taken
        of it, None when it must be complete first."""
        if number == 2:  # raw: the PodList, parsed as it comes
            if self._list_seen:
                raise StreamDeclined("a second PodList in the answer")
            self._list_seen = True
            self._list_left = length or None
            return pos
        if number in (1, 3):
            if length > MAX_META:
                raise StreamDeclined(f"field {number} of the envelope is {length} bytes")
            if end - pos < length:
                return None
            value = bytes(buf[pos : pos + length])
            if number == 1:
                try:
                    self.kind = pb.TypeMeta.FromString(value).kind
                except DecodeError as exc:
                    raise StreamDeclined(f"the TypeMeta does not parse: {exc}") from exc
            elif value:
                raise StreamDeclined("the answer has a contentEncoding")
            return pos + length
        self._skip = length  # contentType, or a field this module does not know
        return pos

    def _in_list(
        self, number: int, length: int, buf: memoryview, pos: int, end: int, *, out: list[bytes]
    ) -> int | None:
        """A length-delimited field of the PodList (its header already counted)."""
        if number == 2:
            if length > self._max_item:
                raise StreamDeclined(f"an item of {length} bytes (at most {self._max_item})")
            if end - pos < length:
                return None
            out.append(bytes(buf[pos : pos + length]))
            self.items_seen += 1
        elif number == 1:
            if length > MAX_META:
                raise StreamDeclined(f"a ListMeta of {length} bytes")
            if end - pos < length:
                return None
            try:
                self.meta = pb.ListMeta.FromString(bytes(buf[pos : pos + length]))
            except DecodeError as exc:
                raise StreamDeclined(f"the ListMeta does not parse: {exc}") from exc
        else:
            self._consumed(length)
            self._skip = length
            return pos
        self._consumed(length)
        return pos + length


def _parsed(items: Iterable[bytes]) -> list[pb.Pod]:
    try:
        return [pb.Pod.FromString(item) for item in items]
    except DecodeError as exc:
        raise StreamDeclined(f"an item does not parse as a Pod: {exc}") from exc


def pod_batches(chunks: Iterable[bytes], batch: int = BATCH) -> Iterator[PodBatch]:
    """The pods of the answer whose body comes as ``chunks``, ``batch`` at a time, parsed; the
    last batch (maybe empty) carries the list's resourceVersion. Raises
    :class:`StreamDeclined` (maybe after some batches) when the answer is not taken."""
    if batch < 1:
        raise ValueError("batch must be >= 1")
    splitter = PodListSplitter()
    pending: list[bytes] = []
    for chunk in chunks:
        pending.extend(splitter.feed(chunk))
        while len(pending) >= batch:
            items = _parsed(pending[:batch])
            del pending[:batch]
            yield PodBatch(items)
    meta = splitter.finish()
    yield PodBatch(_parsed(pending), True, meta.resourceVersion)
