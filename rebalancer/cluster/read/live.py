"""The live cluster as ``plan``, ``explain`` and ``run`` read it: a :class:`LiveSource`
reads it, keeps it current with WATCH (:mod:`rebalancer.cluster.read.watch`), checks that
state against the server (:meth:`LiveSource.verify`), reads the server's version and closes
what it opened. An object it cannot convert leaves its namespace out of the read (logged, and
listed in :attr:`LiveSource.rejected`) instead of stopping everything. The client, the reader
and the watch are loaded on use: the offline commands never need them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from rebalancer.cluster import logs
from rebalancer.core.api import MAX_PROBLEMS_SHOWN

if TYPE_CHECKING:
    from rebalancer.cluster.api.kubeclient import Kube
    from rebalancer.cluster.api.resources import Resource
    from rebalancer.cluster.read.reader import ReadDeadline
    from rebalancer.cluster.read.watch import ClusterWatch
    from rebalancer.core.api import Snapshot

DEFAULT_MAX_OBJECTS: Final = 1_000_000
VERIFY_ATTEMPTS: Final = 3
VERIFY_PAUSE_SECONDS: Final = 1.0
_LEFT_OUT: Final = "its namespace is left out of this run"


@dataclass(frozen=True, slots=True)
class Connection:
    """Which cluster, and how long and how much a read of it may take: the flags every live
    command takes, validated (durations in seconds)."""

    kubeconfig: str | None
    context: str | None
    connect_timeout: float
    request_timeout: float
    read_deadline: float
    max_objects: int = DEFAULT_MAX_OBJECTS
    paged: bool = False

    def deadline(self) -> ReadDeadline:
        """How long one read of the whole cluster may take (``--read-deadline``, and growth)."""
        from rebalancer.cluster.read.reader import ReadDeadline  # noqa: PLC0415  # on use

        return ReadDeadline(base_seconds=self.read_deadline)


def connect(connection: Connection) -> Kube:
    """The API client for ``connection`` (exit 3 when no usable configuration is found)."""
    from rebalancer.cluster.api.kubeclient import connect as client  # noqa: PLC0415  # on use

    timeout = (connection.connect_timeout, connection.request_timeout)
    return client(connection.kubeconfig, connection.context, timeout=timeout)


def warn_rejected(rejected: Sequence[Any], detail: str) -> None:
    """One warning per object a read could not convert, naming it and its problems, for the
    first :data:`~rebalancer.core.errors.MAX_PROBLEMS_SHOWN` of them; one more counting the
    rest (a server answering with millions of bad objects must not log a line for each)."""
    log = logs.get_logger("rebalancer.cli")
    for r in rejected[:MAX_PROBLEMS_SHOWN]:
        log.warning(
            logs.INVALID_OBJECT,
            kind=r.kind,
            namespace=r.namespace,
            name=r.name,
            problems=list(r.problems[:MAX_PROBLEMS_SHOWN]),
            detail=detail,
        )
    if len(rejected) > MAX_PROBLEMS_SHOWN:
        log.warning(
            logs.INVALID_OBJECT,
            more_objects=len(rejected) - MAX_PROBLEMS_SHOWN,
            namespaces=len({r.namespace for r in rejected}),
            detail=detail,
        )


class LiveSource:
    """Snapshots of the live cluster, read with LISTs each time, or with ``watch`` kept current
    by LIST + WATCH between reads (the first read LISTs, later ones send no request); with
    ``verify_every`` (``--verify-state-every``), every that many reads are :meth:`verify`-ed."""

    def __init__(
        self,
        kube: Kube,
        connection: Connection,
        namespace: str | None,
        *,
        watch: bool = False,
        verify_every: int = 0,
    ) -> None:
        from rebalancer.cluster.read import encoding  # noqa: PLC0415  # the client, on use
        from rebalancer.cluster.read.reader import ReadLimits  # noqa: PLC0415

        self.kube = kube
        self.connection = connection
        self.namespace = namespace
        self.rejected: tuple[Any, ...] = ()
        """The objects left out by the last read."""
        self.differences = 0
        """State checks that found a difference, so far."""
        self._verify_every = verify_every
        self._reads = 0
        self._minor: int | None = None
        self._minor_asked = False
        self._limits = ReadLimits(max_objects=connection.max_objects)
        self._pages = encoding.protobuf_pages(kube)  # the pods' LISTs as protobuf, when served
        # the pods in one LIST, streamed (paginated as above when it is not taken)
        self._stream = None if connection.paged else encoding.protobuf_stream(kube)
        self._watching = watch
        self._watch: ClusterWatch | None = None  # started by the first read
        self._optional: tuple[Resource, ...] | None = None  # asked by the first read

    def _served(self) -> tuple[Resource, ...]:
        """The optional kinds (Karpenter's NodePools) the first read found served and allowed;
        one not found is none for the life of this source, logged once."""
        from rebalancer.cluster.read.reader import served  # noqa: PLC0415

        if self._optional is None:
            self._optional = served(self.kube.list_page)
        return self._optional

    def _started_watch(self) -> ClusterWatch | None:
        if self._watching and self._watch is None:
            from rebalancer.cluster.api.resources import RESOURCES  # noqa: PLC0415
            from rebalancer.cluster.read.watch import ClusterWatch, WatchSettings  # noqa: PLC0415

            settings = WatchSettings(
                sync_timeout=max(WatchSettings().sync_timeout, self.connection.read_deadline),
                max_objects=self.connection.max_objects,
            )
            self._watch = ClusterWatch(
                self.kube.list_page,
                self.kube.watch_lines,
                namespace=self.namespace,
                resources=(*RESOURCES, *self._served()),
                settings=settings,
                list_page_proto=self._pages,
                list_stream=self._stream,
            )
        return self._watch

    def read(self) -> Snapshot:
        """The cluster now; a cluster without nodes is an error (exit 3)."""
        from rebalancer.cluster.read.reader import (  # noqa: PLC0415
            read_cluster,
            require_nodes,
            with_optional,
        )

        watch = self._started_watch()
        if watch is not None:
            snapshot = require_nodes(self._stamped(watch.snapshot(skip_invalid=True)))
            self.rejected = watch.rejected
            warn_rejected(self.rejected, _LEFT_OUT)
            self._reads += 1
            if self._verify_every and self._reads % self._verify_every == 0:
                self.verify()
            return snapshot
        read: dict[str, Any] = {
            "namespace": self.namespace,
            "deadline": self.connection.deadline(),
            "limits": self._limits,
            "skip_invalid": True,
        }
        result = read_cluster(
            self.kube.list_page, list_page_proto=self._pages, list_stream=self._stream, **read
        )
        result = with_optional(result, self.kube.list_page, self._served(), **read)
        self.rejected = result.rejected
        warn_rejected(result.rejected, _LEFT_OUT)
        return require_nodes(self._stamped(result.snapshot))

    def _stamped(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the server's minor, asked once (the scheduler's rules follow it)."""
        from rebalancer.cluster.api.serverinfo import read_server_minor  # noqa: PLC0415

        if not self._minor_asked:
            self._minor_asked = True
            self._minor = read_server_minor(self._get_json)
        return replace(snapshot, server_minor=self._minor)

    def _get_json(self, path: str) -> tuple[int, bytes]:
        response = self.kube.request("GET", path, accept="application/json")
        return response.status, response.body

    def server_info(self) -> dict[str, Any]:
        """The server's version and behaviour-changing feature gates (GETs only; best
        effort)."""
        from rebalancer.cluster.api.serverinfo import read_server_info  # noqa: PLC0415

        def get(path: str) -> tuple[int, bytes]:
            accept = "text/plain" if path == "/metrics" else "application/json"
            response = self.kube.request("GET", path, accept=accept)
            return response.status, response.body

        return read_server_info(get).data()

    def last_placement(self) -> float | None:
        """When the watch last saw a pod bound, deleted or terminating (``--react-after``);
        None without the watch."""
        return None if self._watch is None else self._watch.last_placement()

    def verify(self) -> list[str]:
        """Compare the watch-fed state with the cluster, resource by resource
        (:func:`statecheck.check`): each store against a LIST at exactly the resourceVersion
        it reflects, so a difference is a gap in the watch, not its lag; where the server
        cannot serve that version (410, refused), a fresh LIST of that resource looked at
        again, up to 3 times a second apart, while they differ (:func:`statecheck.verify`).
        Logged with the version of each resource or why it fell back (``state.verified`` /
        ``state.differs``); a check that found a difference is counted in
        :attr:`differences`."""
        from rebalancer.cluster.api.resources import RESOURCES_BY_NAME  # noqa: PLC0415
        from rebalancer.cluster.read import statecheck  # noqa: PLC0415  # on use
        from rebalancer.cluster.read.reader import read_at_version, read_cluster  # noqa: PLC0415

        watch, scope, list_page = self._watch, self.namespace, self.kube.list_page
        assert watch is not None, "a state check needs the watch"

        def list_at(name: str, version: str) -> Any:
            resource, deadline = RESOURCES_BY_NAME[name], self.connection.deadline()
            read = read_at_version(list_page, resource, version, namespace=scope, deadline=deadline)
            return read.snapshot

        def list_now(name: str) -> Any:
            return read_cluster(
                list_page,
                namespace=scope,
                resources=[RESOURCES_BY_NAME[name]],
                deadline=self.connection.deadline(),
                skip_invalid=True,
                list_page_proto=self._pages,
            ).snapshot

        def retried(name: str) -> tuple[list[str], int]:
            return statecheck.verify(
                lambda: watch.held(name)[1],
                lambda: list_now(name),
                attempts=VERIFY_ATTEMPTS,
                pause=VERIFY_PAUSE_SECONDS,
            )

        names = [r.name for r in watch.resources]
        checks = statecheck.check(names, watch.held, list_at, retried)
        found = [line for c in checks for line in c.differences]
        fields: dict[str, Any] = {
            "exact": {c.resource: c.version for c in checks if c.version is not None},
            "fallback": {c.resource: c.fallback for c in checks if c.version is None},
            "attempts": max((c.attempts for c in checks), default=1),
        }
        log = logs.get_logger("rebalancer.cli")
        if not found:
            log.info(logs.STATE_VERIFIED, **fields)
            return found
        self.differences += 1
        log.warning(
            logs.STATE_DIFFERS,
            count=len(found),
            differences=found[: statecheck.MAX_NAMED],
            gap=[c.resource for c in checks if c.differences and c.version is not None],
            unsettled=[c.resource for c in checks if c.differences and c.version is None],
            checks_differing=self.differences,
            **fields,
        )
        return found

    def close(self) -> None:
        """Stop the watch (if any) and close the connection."""
        if self._watch is not None:
            self._watch.close()
        self.kube.close()
