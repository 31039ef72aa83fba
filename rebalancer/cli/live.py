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
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from rebalancer.cli import oneshot
from rebalancer.cli.common import (
    PlanOptions,
    add_dry_run_arguments,
    add_hold_arguments,
    add_output_argument,
    add_policy_arguments,
    add_run_shape_arguments,
    plan_and_write,
    resolve_policy,
    window_status,
    write,
)
from rebalancer.cli.errorline import say
from rebalancer.cli.options import (
    DEFAULT_REACT_AFTER,
    DEFAULT_WORKLOAD_COOLDOWN,
    RunOptions,
    add_cluster_arguments,
    checked_connection,
    run_options,
)
from rebalancer.cli.pushgateway import add_pushgateway_arguments, push_metrics
from rebalancer.cli.render import REPORT_FORMATS, render_run
from rebalancer.cli.shutdown import install_stop_handlers
from rebalancer.cluster import logs
from rebalancer.cluster.act.lease import DEFAULT_NAME as DEFAULT_LEASE_NAME
from rebalancer.cluster.act.lease import DEFAULT_NAMESPACE as DEFAULT_LEASE_NAMESPACE
from rebalancer.core.api import EXIT_OK, Policy, RebalancerError

if TYPE_CHECKING:
    from rebalancer.cli.metrics import Metrics
    from rebalancer.cluster.act.runner import RunReport
    from rebalancer.cluster.api.kubeclient import Kube
    from rebalancer.cluster.read.live import Connection
    from rebalancer.core.api import CapacityRules, LoopMemory, Snapshot

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

DEFAULT_COOLDOWN: Final = "10m"
DEFAULT_LEASE_DURATION: Final = "60s"
LEASE_NAMESPACE_ENV: Final = "REBALANCER_LEASE_NAMESPACE"


def configure_logging() -> None:
    """:func:`rebalancer.cli.logconfig.configure`, loaded on use: the offline commands never
    log, and structlog is most of what the command line would load for them."""
    from rebalancer.cli.logconfig import configure  # noqa: PLC0415  # on use

    configure()


def add_live_commands(subparsers: Subparsers) -> None:
    """Add ``snapshot`` and ``run``, and the cluster's flags to ``plan`` and ``explain`` (which
    read the live cluster without --snapshot)."""
    add_cluster_arguments(subparsers.choices["plan"])
    add_cluster_arguments(subparsers.choices["explain"])

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
        choices=("yaml", "json"),
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
    add_cluster_arguments(snapshot)
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
    add_cluster_arguments(run)
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
        help="with --interval: once a workload's replacements are Ready, later runs evict none "
        f"of its pods for this long (default {DEFAULT_WORKLOAD_COOLDOWN}; 0s: off; skips "
        "'cooldown' in the plan)",
    )
    add_hold_arguments(run)
    run.add_argument(
        "--wait-for-nodes-after",
        metavar="DURATION",
        help="with --interval: an eviction whose replacement waits for a node a NodePool adds "
        "is made only once repairs of its workload have needed one, run after run, this long "
        "(default 0s: at once; skips 'launch-deferred' in the plan)",
    )
    run.add_argument(
        "--react-after",
        metavar="DURATION",
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
# Commands


class LiveRead(NamedTuple):
    """What :func:`read_live` read."""

    snapshot: Snapshot
    rejected: Sequence[object]  # objects left out
    server: dict[str, Any] | None  # the server's version and feature gates, when asked
    capacity: CapacityRules | None  # whether a run would reserve first, when asked
    memory: LoopMemory | None  # what the Lease holder's record keeps for the plan, if any


def read_live(
    connection: Connection,
    namespace: str | None,
    *,
    server: bool = False,
    eviction_api: str | None = None,
    reserve_capacity: str | None = None,
    lease: tuple[str, str] | None = None,
) -> LiveRead:
    """One read of the cluster as ``plan`` and ``explain`` make it (GETs only): the snapshot,
    the objects left out, and with ``server`` the server's version and feature gates (and,
    given the policy's ``eviction_api``, the API a run would send the evictions through;
    given its ``reserve_capacity``, whether a run would reserve capacity first, and where it
    would, the refused reservations the record of ``lease`` (namespace, name; default
    rebalancer's) keeps for the back-off, SPEC §5.10)."""
    from rebalancer.cluster.act import reserve  # noqa: PLC0415  # on use
    from rebalancer.cluster.act.evictionrequest import resolve  # noqa: PLC0415  # on use
    from rebalancer.cluster.read.live import LiveSource, connect  # noqa: PLC0415  # on use

    configure_logging()
    source = LiveSource(connect(connection), connection, namespace)
    oneshot.loading()  # as for a snapshot file: the collector stays off from the read on
    rules = memory = None
    try:
        snapshot = source.read()
        info = source.server_info() if server else None
        if info is not None and eviction_api is not None:
            api, why = resolve(
                source.kube, eviction_api, namespace, version=info.get("version"), ask_rbac=False
            )
            info["evictionApi"] = {"policy": eviction_api, "used": api, "why": why}
        if info is not None and reserve_capacity is not None:
            rules = reserve.resolve(source.kube, reserve_capacity, namespace, ask_rbac=False)
            info["capacity"] = reserve.info(reserve_capacity, rules)
            if rules.reserve:
                from rebalancer.core.api import LoopMemory  # noqa: PLC0415  # on use

                where = lease or (
                    os.environ.get(LEASE_NAMESPACE_ENV) or DEFAULT_LEASE_NAMESPACE,
                    DEFAULT_LEASE_NAME,
                )
                refused = reserve.recorded_refusals(source.kube, *where)
                memory = LoopMemory(refused=refused, from_record=True)
    finally:
        source.close()
    oneshot.keep()
    return LiveRead(snapshot, source.rejected, info, rules, memory)


def plan_live(options: PlanOptions, policy: Policy) -> int:
    """``plan`` without --snapshot: read the cluster (GETs only) and print the plan."""
    assert options.connection is not None
    read = read_live(
        options.connection,
        options.namespace,
        server=True,
        eviction_api=policy.eviction_api,
        reserve_capacity=policy.reserve_capacity,
        lease=options.lease,
    )
    if read.capacity is not None:  # the plan says which way each waiting replacement goes
        options = dataclasses.replace(
            options, holds=dataclasses.replace(options.holds, capacity=read.capacity)
        )
    return plan_and_write(
        read.snapshot, read.rejected, policy, options, read.server, memory=read.memory
    )


def _get_json(kube: Kube, path: str) -> tuple[int, bytes]:
    response = kube.request("GET", path, accept="application/json")
    return response.status, response.body


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from rebalancer.cluster.api.serverinfo import read_server_minor  # noqa: PLC0415  # on use
    from rebalancer.cluster.read import reader  # noqa: PLC0415  # on use
    from rebalancer.cluster.read.live import connect, warn_rejected  # noqa: PLC0415
    from rebalancer.cluster.read.snapshot import dump_objects  # noqa: PLC0415  # on use
    from rebalancer.core.api import server_version_item  # noqa: PLC0415

    configure_logging()
    connection = checked_connection(args)
    kube = connect(connection)
    try:
        read: dict[str, Any] = {
            "namespace": args.namespace,
            "keep_objects": True,
            "trim": not args.full,
            "deadline": connection.deadline(),
            "limits": reader.ReadLimits(max_objects=connection.max_objects),
            "skip_invalid": True,  # written all the same: a snapshot is for bug reports too
        }
        result = reader.read_cluster(kube.list_page, **read)
        # Karpenter's NodePools after the rest, where served and allowed
        result = reader.with_optional(result, kube.list_page, reader.served(kube.list_page), **read)
        minor = read_server_minor(lambda path: _get_json(kube, path))
    finally:
        kube.close()
    logs.get_logger("rebalancer.cli").info(logs.READ, **dict(result.counts), pages=result.pages)
    # Written all the same (a snapshot is for bug reports); `plan --snapshot` names it too.
    warn_rejected(result.rejected, "written to the snapshot as read")
    objects = result.objects or ()
    if minor is not None:  # first: a plan of the file follows that release's scheduler rules
        objects = (server_version_item(minor), *objects)
    data: bytes = dump_objects(objects, args.output)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    policy = resolve_policy(args)  # validated before any request: exit 2, nothing sent
    options = run_options(args)
    run = options.run
    if run.settings.plan_only and run.interval is None:
        return plan_live(options.plan, policy)
    status = window_status(policy)
    if status is not None and not status[0] and run.interval is None:
        # Outside every maintenance window: nothing to do, not even a read (exit 0).
        if options.plan.output.format == "table":
            write(status[1] + "\n")
        else:
            say(status[1])
        return EXIT_OK
    from rebalancer.cluster.act.live import run_live  # noqa: PLC0415  # on use, like the client

    configure_logging()
    logs.log_config(policy, options.config())
    report = run_live(run, policy, _Hooks(options))
    if report is None:  # --interval, stopped
        return EXIT_OK
    write(render_run(report, options.plan.output.format, options.plan.output.style()))
    return report.exit_code


@dataclass(slots=True)
class _Hooks:
    """What ``run`` does around its runs: signals, ``--metrics-bind-address`` and
    ``--pushgateway`` (a single run's metrics pushed at its end, an error's too)."""

    options: RunOptions
    metrics: Metrics | None = None  # with --interval and either flag: every run's

    take_signals = staticmethod(install_stop_handlers)

    def serving(self) -> None:
        address = self.options.metrics_address
        if address or self.options.plan.pushgateway:
            from rebalancer.cli.metrics import Metrics  # noqa: PLC0415  # prometheus on use

            self.metrics = Metrics(evicting=self.options.run.evicting)
            if address:
                self.metrics.serve(address)
                logs.get_logger("rebalancer.cli").info(logs.METRICS, address=address)

    def report(self, report: RunReport) -> None:
        self._record(lambda metrics: metrics.record(report))

    def error(self, _exc: RebalancerError) -> None:
        self._record(lambda metrics: metrics.record_error())

    def _record(self, record: Callable[[Metrics], None]) -> None:
        """Into the loop's metrics (pushed when asked); a single run's are its own, pushed."""
        gateway, metrics = self.options.plan.pushgateway, self.metrics
        if metrics is None and gateway:
            from rebalancer.cli.metrics import Metrics  # noqa: PLC0415  # prometheus on use

            metrics = Metrics(evicting=self.options.run.evicting)
        if metrics is not None:
            record(metrics)
            if gateway:
                push_metrics(gateway, metrics)
