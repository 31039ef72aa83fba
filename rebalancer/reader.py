"""Reading a live cluster: paginated LISTs of raw JSON, converted page by page into the model.

The API client's model objects are never built (they are slow at 100k pods): each page arrives
as bytes from a transport function, is parsed with orjson, fed object by object into the
converter's incremental builder, and dropped. Only when the raw objects are asked for (the
``snapshot`` command) are they kept, in read order, so that dumping them as a ``kind: List`` and
loading that file converts into exactly the same :class:`~rebalancer.model.Snapshot`.

The transport is a plain function, ``list_page(resource, namespace, limit, continue_token) ->
bytes``; :meth:`rebalancer.kubeclient.Kube.list_page` is the real one, tests pass their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from rebalancer import errors
from rebalancer.convert import SnapshotBuilder, gc_paused
from rebalancer.model import Snapshot
from rebalancer.slim import slim

ListPage = Callable[[str, str | None, int, str | None], bytes]
"""``list_page(resource, namespace, limit, continue_token) -> bytes`` (one LIST page as JSON)."""

DEFAULT_PAGE_SIZE: Final = 500
MAX_RESTARTS: Final = 3  # a read starts again when a continue token expires (410 Gone)


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource type rebalancer reads, with what list items lack (``kind``, ``apiVersion``)."""

    name: str  # plural, as in the URL and in RBAC rules
    kind: str
    api_version: str  # "v1" or "group/version"
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def rbac_name(self) -> str:
        """The resource as ``kubectl auth can-i`` names it: ``pods``, ``replicasets.apps``."""
        return f"{self.name}.{self.group}" if self.group else self.name

    def path(self, namespace: str | None) -> str:
        """The LIST URL path, namespace-scoped when a namespace is given and the kind has one."""
        prefix = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.name}"
        return f"{prefix}/{self.name}"


RESOURCES: Final = (
    Resource("nodes", "Node", "v1", namespaced=False),
    Resource("pods", "Pod", "v1", namespaced=True),
    Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", namespaced=True),
    Resource("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1", namespaced=False),
    Resource("persistentvolumeclaims", "PersistentVolumeClaim", "v1", namespaced=True),
    Resource("persistentvolumes", "PersistentVolume", "v1", namespaced=False),
    Resource("services", "Service", "v1", namespaced=True),
    Resource("replicasets", "ReplicaSet", "apps/v1", namespaced=True),
    Resource("statefulsets", "StatefulSet", "apps/v1", namespaced=True),
    Resource("replicationcontrollers", "ReplicationController", "v1", namespaced=True),
)
"""What rebalancer reads, in read order (the order of a written snapshot)."""

RESOURCES_BY_NAME: Final = {r.name: r for r in RESOURCES}


class Builder(Protocol):
    """The converter's incremental builder: objects in one at a time, a Snapshot out."""

    def add(self, obj: dict[str, Any]) -> None: ...

    def build(self) -> Snapshot: ...


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What one read of the cluster produced."""

    snapshot: Snapshot
    objects: tuple[dict[str, Any], ...] | None  # the raw objects, only when asked for
    counts: tuple[tuple[str, int], ...]  # resource -> objects read
    pages: int  # LIST requests made


def _default_builder() -> Builder:
    builder: Builder = SnapshotBuilder("cluster")
    return builder


def read_cluster(
    list_page: ListPage,
    *,
    namespace: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    keep_objects: bool = False,
    trim: bool = False,
    resources: Sequence[Resource] = RESOURCES,
    builder_factory: Callable[[], Builder] = _default_builder,
) -> ReadResult:
    """Read every resource, page by page, into a Snapshot (and the raw objects if asked).

    ``trim`` keeps the objects trimmed to what the planner reads (:mod:`rebalancer.slim`).

    With ``namespace``, namespaced kinds are read in that namespace only; nodes, PVs and
    PriorityClasses are cluster-scoped and always read whole. An expired continue token (410)
    starts the whole read again, at most :data:`MAX_RESTARTS` times, so the result is never a
    mix of two list versions.
    """
    if page_size < 1:
        raise ValueError("page_size must be >= 1")
    for attempt in range(MAX_RESTARTS + 1):
        try:
            with gc_paused():
                return _read_once(
                    list_page,
                    namespace=namespace,
                    page_size=page_size,
                    keep_objects=keep_objects,
                    trim=trim,
                    resources=resources,
                    builder=builder_factory(),
                )
        except errors.Gone:
            if attempt == MAX_RESTARTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _read_once(
    list_page: ListPage,
    *,
    namespace: str | None,
    page_size: int,
    keep_objects: bool,
    trim: bool,
    resources: Sequence[Resource],
    builder: Builder,
) -> ReadResult:
    kept: list[dict[str, Any]] | None = [] if keep_objects else None
    counts: list[tuple[str, int]] = []
    pages = 0
    for resource in resources:
        scoped = namespace if resource.namespaced else None
        token: str | None = None
        count = 0
        while True:
            raw = list_page(resource.name, scoped, page_size, token)
            pages += 1
            page = _parse_page(raw, resource)
            for item in page.get("items") or ():
                obj = _complete(item, resource)
                builder.add(obj)
                if kept is not None:
                    kept.append(slim(obj) if trim else obj)
                count += 1
            token = (page.get("metadata") or {}).get("continue") or None
            del page, raw  # the page is converted: let it go before fetching the next
            if token is None:
                break
        counts.append((resource.name, count))
    objects = tuple(kept) if kept is not None else None
    return ReadResult(builder.build(), objects, tuple(counts), pages)


def _parse_page(raw: bytes, resource: Resource) -> dict[str, Any]:
    try:
        page = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise errors.ClusterError(f"LIST {resource.name}: the answer is not JSON: {exc}") from exc
    if not isinstance(page, dict) or not isinstance(page.get("items", []), list):
        raise errors.ClusterError(f"LIST {resource.name}: the answer is not a list")
    return page


def _complete(item: Any, resource: Resource) -> dict[str, Any]:
    """A list item as a standalone object: ``kind``/``apiVersion`` set, managedFields dropped."""
    if not isinstance(item, dict):
        raise errors.ClusterError(f"LIST {resource.name}: an item is not an object")
    item["kind"] = resource.kind
    item["apiVersion"] = resource.api_version
    metadata = item.get("metadata")
    if isinstance(metadata, dict):
        # Bookkeeping of server-side apply: large, and nothing rebalancer reads.
        metadata.pop("managedFields", None)
    # Put kind and apiVersion first, as kubectl writes them.
    return {"apiVersion": item.pop("apiVersion"), "kind": item.pop("kind"), **item}
