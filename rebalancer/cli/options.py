"""The live commands' flags turned into frozen options, every problem found before anything is
sent (exit 2): the connection flags every live command takes (:func:`add_cluster_arguments`,
:func:`checked_connection`), ``plan``'s and ``run``'s options (:func:`plan_options`,
:func:`run_options`). Nothing past a command's handler reads its ``argparse.Namespace``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from rebalancer.cli.common import Output, PlanOptions, count_type, plan_holds
from rebalancer.cli.pushgateway import pushgateway_of
from rebalancer.cluster.read.live import DEFAULT_MAX_OBJECTS, Connection
from rebalancer.core.api import DNS_SUBDOMAIN, InputError, format_duration, parse_duration

if TYPE_CHECKING:
    from rebalancer.cluster.act.live import LiveRun

DEFAULT_CONNECT_TIMEOUT: Final = "5s"
DEFAULT_REQUEST_TIMEOUT: Final = "60s"
DEFAULT_READ_DEADLINE: Final = "2m"
DEFAULT_WORKLOAD_COOLDOWN: Final = "10s"
DEFAULT_REACT_AFTER: Final = "1s"
MAX_OBJECTS: Final = 100_000_000

DURATION_RANGES: Final[dict[str, tuple[float, float]]] = {
    # flag: (lowest, highest) seconds; 0 as the lowest means "> 0" unless it is the cooldown.
    "--connect-timeout": (0.0, 600.0),
    "--request-timeout": (0.0, 3600.0),
    "--read-deadline": (0.0, 86400.0),
    "--interval": (1.0, 30 * 86400.0),
    "--wave-timeout": (1.0, 86400.0),
    "--cooldown": (0.0, 30 * 86400.0),
    "--workload-cooldown": (0.0, 86400.0),
    "--wait-for-nodes-after": (0.0, 86400.0),
    "--unplaced-grace": (0.0, 86400.0),
    "--react-after": (0.0, 3600.0),
    "--lease-duration": (3.0, 86400.0),
}
"""The range every duration flag must fall in (a huge or zero value is a typo, and one the API
server or the run would meet much later): ``--wave-timeout 0s`` would turn off the wait for each
replacement, ``--lease-duration`` beyond a day blocks every other run that long after a crash."""
ZERO_ALLOWED: Final = frozenset(
    {
        "--cooldown",
        "--workload-cooldown",
        "--wait-for-nodes-after",
        "--unplaced-grace",
        "--react-after",
    }
)


CONNECTION_FLAGS: Final = (
    ("--kubeconfig", "kubeconfig"),
    ("--context", "context"),
    ("--connect-timeout", "connect_timeout"),
    ("--request-timeout", "request_timeout"),
    ("--read-deadline", "read_deadline"),
    ("--max-objects", "max_objects"),
    ("--paged-lists", "paged_lists"),
)
"""The flags :func:`add_cluster_arguments` adds, and their ``argparse`` names: each defaults to
None (``--paged-lists`` to False) so that one given where no cluster is read is seen, and
refused."""


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every command that talks to a cluster: which one, and the timeouts (their
    defaults are filled in by :func:`connection_of`)."""
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
        help=f"how long to wait for a connection to the API server (default "
        f"{DEFAULT_CONNECT_TIMEOUT})",
    )
    parser.add_argument(
        "--request-timeout",
        metavar="DURATION",
        help="how long one request may take in all, however slowly the answer arrives "
        f"(default {DEFAULT_REQUEST_TIMEOUT}); past it: exit 3",
    )
    parser.add_argument(
        "--read-deadline",
        metavar="DURATION",
        help=f"how long one read of the whole cluster may take (default {DEFAULT_READ_DEADLINE}"
        ", plus 1s per 1,000 objects read, so it grows with the cluster); past it: exit 3",
    )
    parser.add_argument(
        "--max-objects",
        metavar="N",
        type=count_type(MAX_OBJECTS),
        help=f"most objects one read of the cluster may take in (default {DEFAULT_MAX_OBJECTS:,}"
        "); past it, or past 16 GiB received: exit 3, whatever the server sends",
    )
    parser.add_argument(
        "--paged-lists",
        action="store_true",
        help="read pods in paginated LISTs (2,000 a page) instead of one LIST read as a stream "
        "(the default: served from the API server's watch cache, at a fraction of the CPU)",
    )


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


def connection_of(args: argparse.Namespace, problems: list[str]) -> Connection:
    """The connection flags, adding a problem for each bad timeout."""
    connect, request, read = (
        parse_duration_flag(
            flag, _or(getattr(args, flag[2:].replace("-", "_")), text), problems, 1.0
        )
        for flag, text in (
            ("--connect-timeout", DEFAULT_CONNECT_TIMEOUT),
            ("--request-timeout", DEFAULT_REQUEST_TIMEOUT),
            ("--read-deadline", DEFAULT_READ_DEADLINE),
        )
    )
    max_objects = args.max_objects if args.max_objects is not None else DEFAULT_MAX_OBJECTS
    return Connection(
        args.kubeconfig, args.context, connect, request, read, max_objects, args.paged_lists
    )


def _or(given: str | None, default: str) -> str:
    """A flag's text, or its default when it was not given."""
    return default if given is None else given


def no_cluster_flags(args: argparse.Namespace, command: str) -> None:
    """Exit 2 naming every connection flag given to ``command --snapshot``: no cluster is read,
    so it would be ignored."""
    given = [flag for flag, dest in CONNECTION_FLAGS if getattr(args, dest) not in (None, False)]
    if given:
        raise InputError(
            command,
            [
                f"{flag}: not with --snapshot ({command} reads the file, no cluster)"
                for flag in given
            ],
        )


def checked_connection(args: argparse.Namespace) -> Connection:
    """The connection flags; exit 2 naming every bad one."""
    problems: list[str] = []
    connection = connection_of(args, problems)
    if problems:
        raise InputError(args.command, problems)
    return connection


def plan_options(args: argparse.Namespace) -> PlanOptions:
    """``plan``'s flags (the connection's only without ``--snapshot``, ``--skip-invalid`` only
    with it)."""
    if args.snapshot is not None:
        no_cluster_flags(args, "plan")
    elif args.skip_invalid:
        raise InputError(
            "plan",
            [
                "--skip-invalid: only with --snapshot (a live plan always leaves an object it "
                "cannot read, and its namespace, out)"
            ],
        )
    gateway = pushgateway_of(args)
    live = checked_connection(args) if args.snapshot is None else None  # else: none needed
    problems: list[str] = []
    grace = parse_duration_flag("--unplaced-grace", args.unplaced_grace, problems, 0.0)
    if problems:
        raise InputError("plan", problems)
    return PlanOptions(
        Output.of(args),
        args.namespace,
        args.max_waves,
        args.wave_timeout,
        gateway,
        live,
        plan_holds(grace),
    )


@dataclass(frozen=True, slots=True)
class ExplainOptions:
    """``explain``'s flags (the pod aside)."""

    output: Output
    connection: Connection | None = None  # the live cluster's (None with --snapshot)


def explain_options(args: argparse.Namespace) -> ExplainOptions:
    """``explain``'s flags: the connection's only without ``--snapshot``, and never
    ``--paged-lists`` (it reads the pods as ``plan`` does, in one streamed LIST)."""
    if args.snapshot is not None:
        no_cluster_flags(args, "explain")
    elif args.paged_lists:
        raise InputError(
            "explain",
            ["--paged-lists: not with explain (it reads the pods as plan does, in one LIST)"],
        )
    return ExplainOptions(
        Output.of(args), checked_connection(args) if args.snapshot is None else None
    )


@dataclass(frozen=True, slots=True)
class RunOptions:
    """``run``'s flags, validated: those it shares with ``plan`` (its output, and all of
    ``run --dry-run``), the run as the cluster layer takes it, and the metrics endpoint."""

    plan: PlanOptions
    run: LiveRun
    metrics_address: str

    def config(self) -> dict[str, Any]:
        """The settings the ``config`` log line shows."""
        run, s, c = self.run, self.run.settings, self.run.connection
        lease, executor = s.lease, s.executor
        assert lease is not None
        dry = "dry-run" if s.plan_only else "server-dry-run" if executor.server_dry_run else ""
        return {
            "mode": dry or "evict",
            "interval": format_duration(run.interval) if run.interval else None,
            "max_waves": s.max_waves,
            "wave_timeout": format_duration(executor.wave_timeout_seconds),
            "namespace": run.namespace,
            "metrics_bind_address": self.metrics_address or None,
            "lease": f"{lease.namespace}/{lease.name}" if run.evicting else None,
            "cooldown": format_duration(lease.cooldown_seconds),
            "workload_cooldown": format_duration(s.workload_cooldown_seconds),
            "wait_for_nodes_after": format_duration(s.wait_for_nodes_after_seconds),
            "unplaced_grace": format_duration(s.unplaced_grace_seconds),
            "verify_state_every": run.verify_every or None,
            "react_after": format_duration(run.react_after) if run.react_after else None,
            "connect_timeout": format_duration(c.connect_timeout),
            "request_timeout": format_duration(c.request_timeout),
            "read_deadline": format_duration(c.read_deadline),
        }


def loop_flag_problems(args: argparse.Namespace) -> list[str]:
    """A problem for each of ``run``'s loop-mode flags given where it does not apply: without
    ``--interval`` (one run, then exit), or the watch's with ``--relist``. Refused, not ignored,
    so that a flag given never changes nothing in silence."""
    loop = args.interval is not None
    watch = loop and not args.relist
    rules = (
        (
            "--relist",
            args.relist,
            loop,
            "only with --interval (a one-shot run reads the cluster once, with LISTs)",
        ),
        (
            "--workload-cooldown",
            args.workload_cooldown is not None,
            loop,
            "only with --interval (a one-shot run keeps no memory of the replacements it waited "
            "for)",
        ),
        (
            "--wait-for-nodes-after",
            args.wait_for_nodes_after is not None,
            loop,
            "only with --interval (a one-shot run has no memory of earlier plans; a CronJob's "
            "schedule is its wait)",
        ),
        (
            "--react-after",
            args.react_after is not None,
            watch,
            "only with --interval and the watch, not --relist (it reacts to what the watch sees "
            "between runs)",
        ),
        (
            "--verify-state-every",
            args.verify_state_every > 0,
            watch,
            "only with --interval and the watch (not --relist)",
        ),
        (
            "--metrics-bind-address",
            bool(args.metrics_bind_address),
            loop,
            "only with --interval (a one-shot run exits)",
        ),
    )
    return [f"{flag}: {reason}" for flag, given, applies, reason in rules if given and not applies]


def run_options(args: argparse.Namespace) -> RunOptions:
    """Every ``run`` flag problem at once, before anything is sent (exit 2)."""
    problems: list[str] = []
    interval: float | None = None
    if args.interval is not None:
        interval = parse_duration_flag("--interval", args.interval, problems, 1.0)
    wave_timeout = parse_duration_flag("--wave-timeout", args.wave_timeout, problems, 1.0)
    connection = connection_of(args, problems)
    cooldown = parse_duration_flag("--cooldown", args.cooldown, problems, 0.0)
    problems.extend(loop_flag_problems(args))
    workload_cooldown = parse_duration_flag(
        "--workload-cooldown",
        _or(args.workload_cooldown, DEFAULT_WORKLOAD_COOLDOWN),
        problems,
        0.0,
    )
    wait_for_nodes = parse_duration_flag(
        "--wait-for-nodes-after", _or(args.wait_for_nodes_after, "0s"), problems, 0.0
    )
    unplaced_grace = parse_duration_flag("--unplaced-grace", args.unplaced_grace, problems, 0.0)
    if args.verify_state_every < 0:
        problems.append(f"--verify-state-every: must be >= 0, got {args.verify_state_every}")
    react_after = parse_duration_flag(
        "--react-after", _or(args.react_after, DEFAULT_REACT_AFTER), problems, 0.0
    )
    lease_duration = parse_duration_flag("--lease-duration", args.lease_duration, problems, 60.0)
    for flag, value in (
        ("--lease-namespace", args.lease_namespace),
        ("--lease-name", args.lease_name),
    ):
        if not DNS_SUBDOMAIN.match(value or ""):
            problems.append(f"{flag}: must be a DNS name (a-z, 0-9, '-', '.'), got {value!r}")
    address = args.metrics_bind_address or ""
    if address:
        from rebalancer.cli.metrics import parse_bind_address  # noqa: PLC0415  # prometheus on use

        try:
            parse_bind_address(address)
        except ValueError as exc:
            problems.append(f"--metrics-bind-address: {exc}")
    if problems:
        raise InputError("run", problems)
    gateway = pushgateway_of(args)
    shown = Output.of(args)
    plan = PlanOptions(
        shown,
        args.namespace,
        args.max_waves,
        args.wave_timeout,
        gateway,
        connection,
        lease=(args.lease_namespace, args.lease_name),
    )  # its holds: the run's, set below
    from rebalancer.cluster.act.executor import ExecutorSettings  # noqa: PLC0415  # on use
    from rebalancer.cluster.act.lease import LeaseSettings  # noqa: PLC0415
    from rebalancer.cluster.act.live import LiveRun  # noqa: PLC0415
    from rebalancer.cluster.act.runner import RunSettings  # noqa: PLC0415

    duration = math.ceil(lease_duration)
    lease = LeaseSettings(args.lease_namespace, args.lease_name, duration, duration / 3, cooldown)
    settings = RunSettings(
        plan_only=args.dry_run,
        max_waves=args.max_waves,
        executor=ExecutorSettings(
            server_dry_run=args.server_dry_run, wave_timeout_seconds=wave_timeout
        ),
        instance=os.environ.get("POD_NAME") or RunSettings().instance,
        lease=lease,  # held only by a run that evicts (neither dry run takes a Lease)
        workload_cooldown_seconds=workload_cooldown if interval is not None else 0.0,
        wait_for_nodes_after_seconds=wait_for_nodes,
        unplaced_grace_seconds=unplaced_grace,
    )
    plan = dataclasses.replace(plan, holds=settings.holds)
    watch = interval is not None and not args.relist
    run = LiveRun(
        connection,
        args.namespace,
        settings,
        interval,
        watch,
        react_after if watch else 0.0,
        args.verify_state_every,
    )
    return RunOptions(plan, run, address)
