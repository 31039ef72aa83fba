"""Live-cluster commands: ``snapshot``, ``run``, and ``plan`` without ``--snapshot``.

Registered by :func:`add_live_commands`, which :mod:`rebalancer.cli.main` calls. The order of
things is part of the safety contract: the policy and every flag are validated before the
first request (exit 2, nothing sent); ``run`` then checks RBAC with SelfSubjectAccessReviews
(:mod:`rebalancer.cluster.api.preflight`; exit 3, naming the verb and resource) before it reads
or evicts anything. ``plan`` and ``run --dry-run`` send only GET requests. Signals:
:mod:`rebalancer.cli.shutdown`.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from rebalancer.cli import oneshot
from rebalancer.cli.common import (
    MAX_WAVES,
    add_dry_run_arguments,
    add_output_argument,
    add_policy_arguments,
    add_run_shape_arguments,
    count_type,
    resolve_policy,
    table_style,
    window_status,
    write,
    write_plan,
)
from rebalancer.cli.errorline import say
from rebalancer.cli.pushgateway import (
    add_pushgateway_arguments,
    check_pushgateway_args,
    push_error,
    push_metrics,
    push_report,
)
from rebalancer.cli.render import REPORT_FORMATS, render_explanation, render_run
from rebalancer.cli.shutdown import install_stop_handlers
from rebalancer.cluster import logs
from rebalancer.cluster.act.lease import DEFAULT_NAME as DEFAULT_LEASE_NAME
from rebalancer.cluster.act.lease import DEFAULT_NAMESPACE as DEFAULT_LEASE_NAMESPACE
from rebalancer.cluster.api.preflight import preflight, run_checks
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.core.errors import EXIT_EVICTIONS_FAILED, EXIT_OK, InputError, RebalancerError
from rebalancer.core.policy import Policy, format_duration, parse_duration

if TYPE_CHECKING:
    from rebalancer.cluster.act.runner import RunReport
    from rebalancer.cluster.api.kubeclient import Kube

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

SNAPSHOT_FORMATS: Final = ("yaml", "json")
DEFAULT_CONNECT_TIMEOUT: Final = "5s"
DEFAULT_REQUEST_TIMEOUT: Final = "60s"
DEFAULT_READ_DEADLINE: Final = "2m"
DEFAULT_COOLDOWN: Final = "10m"
DEFAULT_WORKLOAD_COOLDOWN: Final = "10s"
DEFAULT_REACT_AFTER: Final = "1s"
DEFAULT_LEASE_DURATION: Final = "60s"
LEASE_NAMESPACE_ENV: Final = "REBALANCER_LEASE_NAMESPACE"
VERIFY_ATTEMPTS: Final = 3
VERIFY_PAUSE_SECONDS: Final = 1.0


_DNS_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def configure_logging() -> None:
    """:func:`rebalancer.cli.logconfig.configure`, loaded on use: the offline commands never
    log, and structlog is most of what the command line would load for them."""
    from rebalancer.cli.logconfig import configure  # noqa: PLC0415  # on use

    configure()


# --------------------------------------------------------------------------------------------
# Arguments


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account when "
        "running in a pod, else ~/.kube/config)",
    )
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    parser.add_argument(
        "--connect-timeout",
        metavar="DURATION",
        default=DEFAULT_CONNECT_TIMEOUT,
        help=f"how long to wait for a connection to the API server (default "
        f"{DEFAULT_CONNECT_TIMEOUT})",
    )
    parser.add_argument(
        "--request-timeout",
        metavar="DURATION",
        default=DEFAULT_REQUEST_TIMEOUT,
        help="how long one request may take in all, however slowly the answer arrives "
        f"(default {DEFAULT_REQUEST_TIMEOUT}); past it: exit 3",
    )
    parser.add_argument(
        "--read-deadline",
        metavar="DURATION",
        default=DEFAULT_READ_DEADLINE,
        help=f"how long one read of the whole cluster may take (default {DEFAULT_READ_DEADLINE}"
        ", plus 1s per 1,000 objects read, so it grows with the cluster); past it: exit 3",
    )
    parser.add_argument(
        "--max-objects",
        metavar="N",
        type=count_type(MAX_OBJECTS),
        default=DEFAULT_MAX_OBJECTS,
        help=f"most objects one read of the cluster may take in (default {DEFAULT_MAX_OBJECTS:,}"
        "); past it, or past 16 GiB received: exit 3, whatever the server sends",
    )
    parser.add_argument(
        "--paged-lists",
        action="store_true",
        help="read pods in paginated LISTs (2,000 a page) instead of one LIST read as a stream "
        "(the default: served from the API server's watch cache, at a fraction of the CPU)",
    )


DEFAULT_MAX_OBJECTS: Final = 1_000_000
MAX_OBJECTS: Final = 100_000_000


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The validated connection flags, in seconds."""

    connect: float
    request: float
    read: float


DURATION_RANGES: Final[dict[str, tuple[float, float]]] = {
    # flag: (lowest, highest) seconds; 0 as the lowest means "> 0" unless it is the cooldown.
    "--connect-timeout": (0.0, 600.0),
    "--request-timeout": (0.0, 3600.0),
    "--read-deadline": (0.0, 86400.0),
    "--interval": (1.0, 30 * 86400.0),
    "--wave-timeout": (1.0, 86400.0),
    "--cooldown": (0.0, 30 * 86400.0),
    "--workload-cooldown": (0.0, 86400.0),
    "--react-after": (0.0, 3600.0),
    "--lease-duration": (3.0, 86400.0),
}
"""The range every duration flag must fall in (a huge or zero value is a typo, and one the API
server or the run would meet much later): ``--wave-timeout 0s`` would turn off the wait for each
replacement, ``--lease-duration`` beyond a day blocks every other run that long after a crash."""
ZERO_ALLOWED: Final = frozenset({"--cooldown", "--workload-cooldown", "--react-after"})


def parse_duration_flag(flag: str, text: str, problems: list[str], fallback: float) -> float:
    """``text`` in seconds, checked against :data:`DURATION_RANGES`; a problem naming the flag
    and the value is added (and ``fallback`` returned) when it is not a duration in range."""
    try:
        value = parse_duration(text)
    except ValueError as exc:
        problems.append(f"{flag}: {exc}")
        return fallback
    low, high = DURATION_RANGES[flag]
    if low == 0 and value <= 0 and flag not in ZERO_ALLOWED:
        problems.append(f"{flag}: must be > 0, got {text!r}")
        return fallback
    if value < low or value > high:
        problems.append(
            f"{flag}: must be between {format_duration(low)} and {format_duration(high)}, "
            f"got {text!r}"
        )
        return fallback
    return value


def _timeouts(args: argparse.Namespace, problems: list[str]) -> Timeouts:
    """Parse the timeout flags, adding a problem for each bad one."""
    values: list[float] = []
    for flag in ("connect_timeout", "request_timeout", "read_deadline"):
        name = "--" + flag.replace("_", "-")
        values.append(parse_duration_flag(name, getattr(args, flag), problems, 1.0))
    return Timeouts(*values)


def _checked_timeouts(args: argparse.Namespace) -> Timeouts:
    problems: list[str] = []
    timeouts = _timeouts(args, problems)
    if problems:
        raise InputError(args.command, problems)
    return timeouts


def add_live_commands(subparsers: Subparsers) -> None:
    """Add ``snapshot`` and ``run``, and make ``plan`` read a live cluster without --snapshot."""
    plan = subparsers.choices["plan"]
    _add_cluster_arguments(plan)
    plan.set_defaults(live_handler=plan_live)
    explain = subparsers.choices["explain"]
    _add_cluster_arguments(explain)
    explain.set_defaults(live_handler=explain_live)

    snapshot = subparsers.add_parser(
        "snapshot",
        help="write what rebalancer reads from the cluster, as a kind: List",
        description="Read the cluster (nodes, pods, PDBs, PriorityClasses, PVCs, PVs, "
        "Services, ReplicaSets, StatefulSets, Deployments, ReplicationControllers, "
        "Namespaces) and write it as one kind: List to stdout. 'plan --snapshot FILE' on it "
        "gives the same plan as the live 'plan'. Sends only GET requests.",
    )
    snapshot.add_argument(
        "-o",
        "--output",
        choices=SNAPSHOT_FORMATS,
        default="json",
        help="format (default json: one object per line, which plan --snapshot reads item by "
        "item; yaml is easier to read but much slower to load on large clusters)",
    )
    snapshot.add_argument(
        "-n", "--namespace", metavar="NAMESPACE", help="read namespaced objects of this one only"
    )
    snapshot.add_argument(
        "--full",
        action="store_true",
        help="write the objects as the API returns them (default: trimmed to what the planner "
        "reads, several times smaller; the plan is the same)",
    )
    _add_cluster_arguments(snapshot)
    snapshot.set_defaults(handler=_cmd_snapshot)

    run = subparsers.add_parser(
        "run",
        help="plan, then evict through the Eviction API, wave by wave",
        description="Plan, evict the first wave through the Eviction API, wait for the "
        "replacements, read again and re-plan, until balanced (at most --max-waves waves). "
        "Evictions a PodDisruptionBudget refuses are reported, not failures (exit 0); the exit "
        "codes are those of `rebalancer --help`.",
    )
    add_policy_arguments(run)
    add_output_argument(run, REPORT_FORMATS)
    _add_cluster_arguments(run)
    add_dry_run_arguments(run)
    run.add_argument(
        "--interval",
        metavar="DURATION",
        default=os.environ.get("REBALANCER_INTERVAL") or None,
        help="start a run every DURATION (e.g. 10m; start to start, as the descheduler's "
        "interval) until SIGTERM (default: once; $REBALANCER_INTERVAL)",
    )
    run.add_argument(
        "--relist",
        action="store_true",
        help="with --interval: LIST the whole cluster every run instead of keeping it "
        "current with WATCH between runs (the default; needs the watch verb)",
    )
    add_run_shape_arguments(run)
    run.add_argument(
        "--lease-namespace",
        metavar="NAMESPACE",
        default=os.environ.get(LEASE_NAMESPACE_ENV) or DEFAULT_LEASE_NAMESPACE,
        help="namespace of the Lease that lets one rebalancer evict at a time (default: "
        f"${LEASE_NAMESPACE_ENV}, else {DEFAULT_LEASE_NAMESPACE}); it must exist",
    )
    run.add_argument(
        "--lease-name",
        metavar="NAME",
        default=DEFAULT_LEASE_NAME,
        help=f"name of that Lease (default {DEFAULT_LEASE_NAME})",
    )
    run.add_argument(
        "--lease-duration",
        metavar="DURATION",
        default=DEFAULT_LEASE_DURATION,
        help="leaseDurationSeconds: how long a silent holder (a crashed run) blocks the others "
        f"(default {DEFAULT_LEASE_DURATION}; renewed every third of it)",
    )
    run.add_argument(
        "--cooldown",
        metavar="DURATION",
        default=DEFAULT_COOLDOWN,
        help="evictions made by earlier runs this recently count against the policy's limits, "
        "and their workloads wait for the replacements to be Ready "
        f"(default {DEFAULT_COOLDOWN}; recorded in the Lease)",
    )
    run.add_argument(
        "--workload-cooldown",
        metavar="DURATION",
        default=DEFAULT_WORKLOAD_COOLDOWN,
        help="with --interval: once a workload's replacements are Ready, later runs evict none "
        f"of its pods for this long (default {DEFAULT_WORKLOAD_COOLDOWN}; 0s: off; skips "
        "'cooldown' in the plan)",
    )
    run.add_argument(
        "--react-after",
        metavar="DURATION",
        default=DEFAULT_REACT_AFTER,
        help="with --interval and the watch: when pods are bound, deleted or start "
        "terminating, start the next run this long after the last such change instead of "
        "waiting for the interval; at most one early run per tenth of the interval "
        f"(default {DEFAULT_REACT_AFTER}; 0s: off, runs only every interval)",
    )
    run.add_argument(
        "--verify-state-every",
        type=int,
        default=0,
        metavar="N",
        help="with --interval and the watch (debug): every N runs, compare the watch-fed state "
        "with a LIST at exactly the resourceVersion each store reflects, so a difference is a "
        "gap in the watch, not lag (a fresh LIST, retried, where that version is gone) and log "
        "it (state.verified / state.differs; default 0: never)",
    )
    run.add_argument(
        "--metrics-bind-address",
        metavar="HOST:PORT",
        default=os.environ.get("REBALANCER_METRICS_BIND_ADDRESS", ""),
        help="serve Prometheus metrics here in --interval mode, e.g. 127.0.0.1:8080 (default: off)",
    )
    add_pushgateway_arguments(run)
    run.set_defaults(handler=_cmd_run)


# --------------------------------------------------------------------------------------------
# Shared steps


def _connect(args: argparse.Namespace, timeouts: Timeouts) -> Kube:
    from rebalancer.cluster.api.kubeclient import connect  # noqa: PLC0415  # the client loads on use only

    return connect(
        getattr(args, "kubeconfig", None),
        getattr(args, "context", None),
        timeout=(timeouts.connect, timeouts.request),
    )


def _read_deadline(timeouts: Timeouts) -> Any:
    from rebalancer.cluster.read.reader import ReadDeadline  # noqa: PLC0415  # on use

    return ReadDeadline(base_seconds=timeouts.read)


def _read_limits(args: argparse.Namespace) -> Any:
    from rebalancer.cluster.read.reader import ReadLimits  # noqa: PLC0415  # on use

    return ReadLimits(max_objects=getattr(args, "max_objects", DEFAULT_MAX_OBJECTS))


@dataclass(slots=True, eq=False)  # compared and hashed by identity, as before
class _Reader:
    """Reads the live cluster; an object it cannot convert leaves its namespace out of the
    read (logged, and counted in :attr:`rejected`) instead of stopping everything."""

    kube: Kube
    namespace: str | None
    timeouts: Timeouts
    paged: bool = field(default=False, kw_only=True)
    limits: Any = field(default=None, kw_only=True)
    rejected: tuple[Any, ...] = field(default=(), init=False)
    """The objects left out by the last read."""
    minor: int | None = field(default=None, init=False)
    asked: bool = field(default=False, init=False)

    def stamped(self, snapshot: Any) -> Any:
        """``snapshot`` with the server's minor, asked once (the scheduler's rules follow it)."""
        from rebalancer.cluster.api.serverinfo import read_server_minor  # noqa: PLC0415

        if not self.asked:
            self.asked = True
            self.minor = read_server_minor(lambda path: _get_json(self.kube, path))
        return replace(snapshot, server_minor=self.minor)

    def __call__(self) -> Any:
        from rebalancer.cluster.read.encoding import (  # noqa: PLC0415  # on use
            protobuf_pages,
            protobuf_stream,
        )
        from rebalancer.cluster.read.reader import (  # noqa: PLC0415  # on use
            read_cluster,
            require_nodes,
        )

        result = read_cluster(
            self.kube.list_page,
            namespace=self.namespace,
            deadline=_read_deadline(self.timeouts),
            limits=self.limits,
            skip_invalid=True,
            list_page_proto=protobuf_pages(self.kube),  # pods as protobuf, when served so
            # pods in one LIST, streamed (paginated as above when it is not taken)
            list_stream=None if self.paged else protobuf_stream(self.kube),
        )
        self.rejected = result.rejected
        _warn_rejected(result.rejected, "its namespace is left out of this run")
        return require_nodes(self.stamped(result.snapshot))


def _get_json(kube: Kube, path: str) -> tuple[int, bytes]:
    response = kube.request("GET", path, accept="application/json")
    return response.status, response.body


def _server_info(kube: Kube) -> dict[str, Any]:
    """The server's version and behaviour-changing feature gates (GETs only; best effort)."""
    from rebalancer.cluster.api.serverinfo import read_server_info  # noqa: PLC0415  # on use

    def get(path: str) -> tuple[int, bytes]:
        accept = "text/plain" if path == "/metrics" else "application/json"
        response = kube.request("GET", path, accept=accept)
        return response.status, response.body

    return read_server_info(get).data()


def _warn_rejected(rejected: Sequence[Any], detail: str) -> None:
    """One warning per object a read could not convert, naming it and its problems."""
    log = logs.get_logger("rebalancer.cli")
    for r in rejected:
        log.warning(
            logs.INVALID_OBJECT,
            kind=r.kind,
            namespace=r.namespace,
            name=r.name,
            problems=list(r.problems),
            detail=detail,
        )


class _WatchReader:
    """Loop mode's read: the cluster kept current by LIST + WATCH between runs
    (:mod:`rebalancer.cluster.read.watch`); the first read LISTs, later ones send no request."""

    def __init__(
        self,
        kube: Kube,
        namespace: str | None,
        timeouts: Timeouts,
        *,
        paged: bool = False,
        max_objects: int = DEFAULT_MAX_OBJECTS,
        verify: int = 0,
    ) -> None:
        from rebalancer.cluster.read.encoding import (  # noqa: PLC0415  # on use
            protobuf_pages,
            protobuf_stream,
        )
        from rebalancer.cluster.read.watch import ClusterWatch, WatchSettings  # noqa: PLC0415

        self._verify_every = verify
        self._reads = 0
        self._fresh = _Reader(kube, namespace, timeouts, paged=paged)
        self.differences = 0
        """State checks (``--verify-state-every``) that found a difference, so far."""

        settings = WatchSettings(
            sync_timeout=max(WatchSettings().sync_timeout, timeouts.read),
            max_objects=max_objects,
        )
        self._watch = ClusterWatch(
            kube.list_page,
            kube.watch_lines,
            namespace=namespace,
            settings=settings,
            list_page_proto=protobuf_pages(kube),  # the pods' LISTs as protobuf, when served so
            list_stream=None if paged else protobuf_stream(kube),  # or in one LIST, streamed
        )
        self.rejected: tuple[Any, ...] = ()

    def __call__(self) -> Any:
        from rebalancer.cluster.read.reader import require_nodes  # noqa: PLC0415  # on use

        snapshot = require_nodes(self._fresh.stamped(self._watch.snapshot(skip_invalid=True)))
        self.rejected = self._watch.rejected
        _warn_rejected(self.rejected, "its namespace is left out of this run")
        self._reads += 1
        if self._verify_every and self._reads % self._verify_every == 0:
            self.verify()
        return snapshot

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
        from rebalancer.cluster.read.encoding import protobuf_pages  # noqa: PLC0415
        from rebalancer.cluster.read.reader import read_at_version, read_cluster  # noqa: PLC0415

        fresh = self._fresh
        scope = fresh.namespace

        def list_at(name: str, version: str) -> Any:
            resource = RESOURCES_BY_NAME[name]
            deadline = _read_deadline(fresh.timeouts)
            read = read_at_version(
                fresh.kube.list_page, resource, version, namespace=scope, deadline=deadline
            )
            return read.snapshot

        def list_now(name: str) -> Any:
            return read_cluster(
                fresh.kube.list_page,
                namespace=scope,
                resources=[RESOURCES_BY_NAME[name]],
                deadline=_read_deadline(fresh.timeouts),
                skip_invalid=True,
                list_page_proto=protobuf_pages(fresh.kube),
            ).snapshot

        def retried(name: str) -> tuple[list[str], int]:
            return statecheck.verify(
                lambda: self._watch.held(name)[1],
                lambda: list_now(name),
                attempts=VERIFY_ATTEMPTS,
                pause=VERIFY_PAUSE_SECONDS,
            )

        names = [r.name for r in self._watch.resources]
        checks = statecheck.check(names, self._watch.held, list_at, retried)
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

    def last_placement(self) -> float | None:
        """When the watch last saw a pod bound, deleted or terminating (``--react-after``)."""
        return self._watch.last_placement()

    def close(self) -> None:
        self._watch.close()


# --------------------------------------------------------------------------------------------
# Commands


def plan_live(args: argparse.Namespace, policy: Policy) -> int:
    """``plan`` without --snapshot: read the cluster (GETs only) and print the plan."""
    from rebalancer.core.planner import plan  # noqa: PLC0415  # the core, loaded on use

    configure_logging()
    timeouts = _checked_timeouts(args)
    kube = _connect(args, timeouts)
    reader = _Reader(
        kube,
        args.namespace,
        timeouts,
        paged=getattr(args, "paged_lists", False),
        limits=_read_limits(args),
    )
    oneshot.loading()  # as for a snapshot file: the collector stays off from the read on
    try:
        snapshot = reader()
        server = _server_info(kube)
    finally:
        kube.close()
    oneshot.keep(snapshot)
    with gc_paused():
        planned = plan(snapshot, policy, time.time())
    write_plan(planned, policy, args, snapshot, server=server)
    # Objects rebalancer could not read left their namespaces out of the plan: exit 1.
    return EXIT_EVICTIONS_FAILED if reader.rejected else EXIT_OK


def explain_live(args: argparse.Namespace, policy: Policy, namespace: str, name: str) -> int:
    """``explain`` without --snapshot: read the cluster as ``plan`` does (GETs only), plan,
    and explain the pod, as ``explain --snapshot`` does on a snapshot of it."""
    from rebalancer.core.explain import explain  # noqa: PLC0415  # the core, loaded on use
    from rebalancer.core.planner import plan  # noqa: PLC0415

    configure_logging()
    timeouts = _checked_timeouts(args)
    kube = _connect(args, timeouts)
    reader = _Reader(kube, None, timeouts, limits=_read_limits(args))
    oneshot.loading()
    try:
        snapshot = reader()
    finally:
        kube.close()
    oneshot.keep(snapshot)
    with gc_paused():
        expl = explain(snapshot, policy, namespace, name, plan(snapshot, policy, time.time()))
    write(render_explanation(expl, args.output, table_style(args)))
    return EXIT_OK


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from rebalancer.cluster.read.reader import read_cluster  # noqa: PLC0415  # on use
    from rebalancer.cluster.read.snapshot import dump_objects  # noqa: PLC0415  # on use

    configure_logging()
    timeouts = _checked_timeouts(args)
    kube = _connect(args, timeouts)
    try:
        result = read_cluster(
            kube.list_page,
            namespace=args.namespace,
            keep_objects=True,
            trim=not args.full,
            deadline=_read_deadline(timeouts),
            limits=_read_limits(args),
            skip_invalid=True,  # written all the same: a snapshot is for bug reports too
        )
    finally:
        kube.close()
    logs.get_logger("rebalancer.cli").info(logs.READ, **dict(result.counts), pages=result.pages)
    # Written all the same (a snapshot is for bug reports); `plan --snapshot` names it too.
    _warn_rejected(result.rejected, "written to the snapshot as read")
    data: bytes = dump_objects(result.objects or (), args.output)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return EXIT_OK


@dataclass(frozen=True, slots=True)
class RunArgs:
    """The validated ``run`` flags."""

    interval: float | None
    wave_timeout: float
    max_waves: int
    metrics_address: str
    timeouts: Timeouts
    cooldown: float
    lease_duration: int
    workload_cooldown: float = 0.0
    verify_every: int = 0
    react_after: float = 0.0


def _validate_run_args(args: argparse.Namespace) -> RunArgs:
    """Every flag problem at once, before anything is sent (exit 2)."""
    problems: list[str] = []
    interval: float | None = None
    if args.interval is not None:
        interval = parse_duration_flag("--interval", args.interval, problems, 1.0)
    wave_timeout = parse_duration_flag("--wave-timeout", args.wave_timeout, problems, 1.0)
    timeouts = _timeouts(args, problems)
    cooldown = parse_duration_flag("--cooldown", args.cooldown, problems, 0.0)
    workload_cooldown = _loop_flags(args, problems)
    react_after = parse_duration_flag("--react-after", args.react_after, problems, 0.0)
    lease_duration = math.ceil(
        parse_duration_flag("--lease-duration", args.lease_duration, problems, 60.0)
    )
    for flag, value in (
        ("--lease-namespace", args.lease_namespace),
        ("--lease-name", args.lease_name),
    ):
        if not _DNS_NAME.match(value or ""):
            problems.append(f"{flag}: must be a DNS name (a-z, 0-9, '-', '.'), got {value!r}")
    if not 1 <= args.max_waves <= MAX_WAVES:
        problems.append(f"--max-waves: must be between 1 and {MAX_WAVES}, got {args.max_waves}")
    address = args.metrics_bind_address or ""
    if address:
        from rebalancer.cli.metrics import parse_bind_address  # noqa: PLC0415  # prometheus on use

        try:
            parse_bind_address(address)
        except ValueError as exc:
            problems.append(f"--metrics-bind-address: {exc}")
        if args.interval is None:
            problems.append("--metrics-bind-address: only with --interval (a one-shot run exits)")
    if problems:
        raise InputError("run", problems)
    return RunArgs(
        interval,
        wave_timeout,
        args.max_waves,
        address,
        timeouts,
        cooldown,
        lease_duration,
        workload_cooldown if interval is not None else 0.0,
        args.verify_state_every,
        react_after if interval is not None and not args.relist else 0.0,
    )


def _loop_flags(args: argparse.Namespace, problems: list[str]) -> float:
    """Check --workload-cooldown and --verify-state-every; the cooldown in seconds."""
    workload_cooldown = parse_duration_flag(
        "--workload-cooldown", args.workload_cooldown, problems, 0.0
    )
    if args.verify_state_every < 0:
        problems.append(f"--verify-state-every: must be >= 0, got {args.verify_state_every}")
    elif args.verify_state_every and (args.interval is None or args.relist):
        problems.append("--verify-state-every: only with --interval and the watch (not --relist)")
    return workload_cooldown


def _cmd_run(args: argparse.Namespace) -> int:
    policy = resolve_policy(args)  # validated before any request: exit 2, nothing sent
    checked = _validate_run_args(args)
    check_pushgateway_args(args)
    if args.dry_run and checked.interval is None:
        return plan_live(args, policy)
    status = window_status(policy)
    if status is not None and not status[0] and checked.interval is None:
        # Outside every maintenance window: nothing to do, not even a read (exit 0).
        if args.output == "table":
            write(status[1] + "\n")
        else:
            say(status[1])
        return EXIT_OK

    from rebalancer.cluster.act.executor import ExecutorSettings  # noqa: PLC0415  # on use
    from rebalancer.cluster.act.lease import LeaseSettings  # noqa: PLC0415  # on use
    from rebalancer.cluster.act.runner import (  # noqa: PLC0415  # on use, like the client
        Cluster,
        Runner,
        RunSettings,
    )

    configure_logging()
    evicting = not (args.dry_run or args.server_dry_run)
    watching = checked.interval is not None and not args.relist
    mode = "dry-run" if args.dry_run else "server-dry-run" if args.server_dry_run else "evict"
    lease = LeaseSettings(
        namespace=args.lease_namespace,
        name=args.lease_name,
        duration_seconds=checked.lease_duration,
        renew_seconds=checked.lease_duration / 3,
        cooldown_seconds=checked.cooldown,
    )
    settings = RunSettings(
        plan_only=args.dry_run,
        max_waves=checked.max_waves,
        executor=ExecutorSettings(
            server_dry_run=args.server_dry_run,
            wave_timeout_seconds=checked.wave_timeout,
        ),
        instance=os.environ.get("POD_NAME") or RunSettings().instance,
        lease=lease if evicting else None,
        workload_cooldown_seconds=checked.workload_cooldown,
    )
    logs.log_config(
        policy,
        {
            "mode": mode,
            "interval": format_duration(checked.interval) if checked.interval else None,
            "max_waves": checked.max_waves,
            "wave_timeout": format_duration(checked.wave_timeout),
            "namespace": args.namespace,
            "metrics_bind_address": checked.metrics_address or None,
            "lease": f"{lease.namespace}/{lease.name}" if evicting else None,
            "cooldown": format_duration(checked.cooldown),
            "workload_cooldown": format_duration(checked.workload_cooldown),
            "verify_state_every": checked.verify_every or None,
            "react_after": format_duration(checked.react_after) if checked.react_after else None,
            "connect_timeout": format_duration(checked.timeouts.connect),
            "request_timeout": format_duration(checked.timeouts.request),
            "read_deadline": format_duration(checked.timeouts.read),
        },
    )
    kube = _connect(args, checked.timeouts)
    try:
        if not args.dry_run:
            checks = run_checks(
                evicting=evicting,
                watching=watching,
                steering=evicting and policy.steer_scale_down,
            )
            preflight(
                kube,
                args.namespace,
                checks,
                lease_namespace=lease.namespace,
                lease_name=lease.name,
            )
        paged = bool(getattr(args, "paged_lists", False))
        reader: _Reader | _WatchReader = (
            _WatchReader(
                kube,
                args.namespace,
                checked.timeouts,
                paged=paged,
                max_objects=getattr(args, "max_objects", DEFAULT_MAX_OBJECTS),
                verify=checked.verify_every,
            )
            if watching
            else _Reader(
                kube, args.namespace, checked.timeouts, paged=paged, limits=_read_limits(args)
            )
        )
        cluster = Cluster(
            read=reader,
            transport=kube,
            create_event=kube.create_event,
            get_pdb=kube.get_pdb,
            lease=kube,
            rejected=lambda: reader.rejected,
            patch_pod_cost=kube.patch_pod_cost,
        )
        stop = threading.Event()
        undo = install_stop_handlers(stop)
        try:
            runner = Runner(cluster, policy, settings, stop=stop)
            runner.server = _server_info(kube)  # read once: in every run's summary line
            if checked.interval is not None:
                placements = reader.last_placement if isinstance(reader, _WatchReader) else None
                return _loop(runner, checked, args, evicting=evicting, placements=placements)
            report = _run_once(runner, args, evicting=evicting)
        finally:
            undo()
            if isinstance(reader, _WatchReader):
                reader.close()
    finally:
        kube.close()
    write(render_run(report, args.output, table_style(args)))
    return report.exit_code


def _run_once(runner: Any, args: argparse.Namespace, *, evicting: bool) -> RunReport:
    """One run; its metrics pushed at the end when ``--pushgateway`` asks (an error too)."""
    try:
        report: RunReport = runner.run_once()
    except RebalancerError:
        if args.pushgateway:
            push_error(args)
        raise
    if args.pushgateway:
        push_report(args, report, evicting=evicting)
    return report


def _loop(
    runner: Any,
    checked: RunArgs,
    args: argparse.Namespace,
    *,
    evicting: bool,
    placements: Callable[[], float | None] | None = None,
) -> int:
    on_report = None
    on_error = None
    if checked.metrics_address or args.pushgateway:
        from rebalancer.cli.metrics import Metrics  # noqa: PLC0415  # prometheus on use

        metrics = Metrics(evicting=evicting)
        if checked.metrics_address:
            metrics.serve(checked.metrics_address)
            logs.get_logger("rebalancer.cli").info(logs.METRICS, address=checked.metrics_address)

        def on_report(report: RunReport) -> None:
            metrics.record(report)
            if args.pushgateway:
                push_metrics(args, metrics)

        def on_error(_exc: RebalancerError) -> None:
            metrics.record_error()
            if args.pushgateway:
                push_metrics(args, metrics)

    code: int = runner.run_forever(
        checked.interval,
        on_report=on_report,
        on_error=on_error,
        placements=placements,
        react_after=checked.react_after,
    )
    return code
