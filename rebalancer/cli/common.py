"""What every command shares: the policy and output arguments, policy resolution, output."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from rebalancer.cli.printable import printable
from rebalancer.cli.render import FORMATS, Format, TableStyle, render_plan
from rebalancer.cli.wording import RunShape, next_run
from rebalancer.cluster.act.defaults import DEFAULT_MAX_WAVES, DEFAULT_WAVE_TIMEOUT
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES, STDIN
from rebalancer.cluster.read.policyfile import load_policy_file
from rebalancer.core.api import (
    EXIT_EVICTIONS_FAILED,
    EXIT_OK,
    THRASH_GUARD_SECONDS,
    HoldRules,
    InputError,
    Policy,
    parse_duration,
    restrict_to_namespace,
)

if TYPE_CHECKING:
    from rebalancer.cli.pushgateway import Pushgateway
    from rebalancer.cluster.read.live import Connection
    from rebalancer.core.api import LoopMemory, Snapshot

Handler = Callable[[argparse.Namespace], int]
"""A subcommand: gets the parsed arguments, returns the exit code."""

POLICY_ENV: Final = "REBALANCER_POLICY"
MAX_WAVES: Final = 1000
"""The most waves one run may be given (``--max-waves``)."""


def add_policy_arguments(parser: argparse.ArgumentParser, *, namespace: bool = True) -> None:
    """Add ``--policy FILE`` (falling back to $REBALANCER_POLICY) and, optionally, ``-n NS``."""
    parser.add_argument(
        "--policy",
        metavar="FILE",
        default=os.environ.get(POLICY_ENV) or None,
        help=f"policy file, - for standard input (default: ${POLICY_ENV}, else the built-in "
        "defaults, "
        "as in policies/default.yaml)",
    )
    if namespace:
        parser.add_argument(
            "-n",
            "--namespace",
            metavar="NAMESPACE",
            help="only rebalance this namespace: narrows the policy's namespaces.include to it "
            "(an error if the policy excludes it or includes other namespaces only)",
        )


PIPE_WIDTH: Final = 120
"""The width of the table when stdout is not a terminal (a pipe, a file, ``less``)."""


class _OutputAction(argparse.Action):
    """``-o wide`` is the table with ``--wide`` (kubectl's spelling); any other ``-o`` value is
    stored as given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values == "wide":
            namespace.wide = True
            values = "table"
        setattr(namespace, self.dest, values)


def add_output_argument(
    parser: argparse.ArgumentParser, formats: tuple[Format, ...] = FORMATS
) -> None:
    """Add ``-o/--output`` with ``formats`` (default table; ``wide`` is the table with
    ``--wide``), ``--wide`` and ``--all`` for the table."""
    html = "; html is a self-contained report" if "html" in formats else ""
    choices = [formats[0], "wide", *formats[1:]] if formats[0] == "table" else list(formats)
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        default="table",
        action=_OutputAction,
        help="output format (default: table, fitted to the terminal's width, or "
        f"{PIPE_WIDTH} columns when piped; wide: every row, domain and node, full reasons, "
        f"nothing cut; json and yaml are a stable contract{html})",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="the same as -o wide",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="all_rows",
        help="table: list every row of every section (default: the first 10, worst first, "
        "then how many more), still fitted to the width",
    )


@dataclass(frozen=True, slots=True)
class Output:
    """``-o``, ``--wide`` and ``--all``: how a command writes its result."""

    format: Format
    wide: bool = False
    all_rows: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace) -> Output:
        return cls(args.output, getattr(args, "wide", False), getattr(args, "all_rows", False))

    def style(self) -> TableStyle:
        """How the table fits stdout: a terminal's width less its last column (a line that
        fills it makes some terminals wrap), or :data:`PIPE_WIDTH` when stdout is not a
        terminal; everything with -o wide."""
        stream = sys.stdout
        width = shutil.get_terminal_size().columns - 1 if stream.isatty() else PIPE_WIDTH
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        style = TableStyle(width=width, wide=self.wide, unicode=encoding == "utf8")
        return dataclasses.replace(style, rows=None) if self.all_rows else style


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """``plan``'s flags (and those of ``run --dry-run``, which is ``plan``)."""

    output: Output
    namespace: str | None = None
    max_waves: int = DEFAULT_MAX_WAVES  # with wave_timeout: what the next run is given
    wave_timeout: str = DEFAULT_WAVE_TIMEOUT  # as given: read when the summary is written
    pushgateway: Pushgateway | None = None
    connection: Connection | None = None  # the live cluster's (None with --snapshot)
    holds: HoldRules = field(default_factory=lambda: plan_holds(DEFAULT_UNPLACED_GRACE_SECONDS))
    """The holds ``run`` applies (SPEC §3.12); a plan applies those that need no memory."""
    lease: tuple[str, str] | None = None
    """The Lease whose record a live plan reads (namespace, name; SPEC §5.10's back-off): a
    run's ``--lease-namespace`` and ``--lease-name``; None: the default one."""


DEFAULT_UNPLACED_GRACE: Final = "2m"
DEFAULT_UNPLACED_GRACE_SECONDS: Final = 120.0


def plan_holds(unplaced_grace_seconds: float) -> HoldRules:
    """The holds of a ``plan`` (and of a one-shot ``run``'s first plan): pods not placed yet,
    with ``--unplaced-grace``, and drifted landings; the loop's memory adds none."""
    return HoldRules(
        unplaced_grace_seconds=unplaced_grace_seconds,
        drifting=True,
        thrash_guard_seconds=THRASH_GUARD_SECONDS,  # named as a loop's, as run --dry-run does
    )


def add_hold_arguments(parser: argparse.ArgumentParser) -> None:
    """``--unplaced-grace``: ``plan`` and ``run`` hold the same pods (SPEC §3.12)."""
    parser.add_argument(
        "--unplaced-grace",
        metavar="DURATION",
        default=DEFAULT_UNPLACED_GRACE,
        help="a workload with pods not placed yet (not bound, Pending, younger than this) is "
        "not repaired: the scheduler places them first, into the domains with the fewest "
        f"(default {DEFAULT_UNPLACED_GRACE}; 0s: off; skips 'pods-unplaced' in the plan)",
    )


class _LogAction(argparse.Action):
    """``--log-level`` / ``--log-format``: recorded for the logging set up later (structlog
    is loaded only when one is given)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from rebalancer.cli import logconfig  # noqa: PLC0415  # structlog on use

        if self.dest == "log_level":
            logconfig.choose(level=values)
        else:
            logconfig.choose(log_format=values)
        setattr(namespace, self.dest, values)


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    """``--log-level debug|info|warning|error`` and ``--log-format json|text`` (default: JSON
    lines when stderr is not a terminal, text when it is). Accepted at every level."""
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        action=_LogAction,
        default=argparse.SUPPRESS,
        help="lowest level of the log lines written to stderr (default info)",
    )
    parser.add_argument(
        "--log-format",
        choices=("json", "text"),
        action=_LogAction,
        default=argparse.SUPPRESS,
        help="log lines as JSON or text (default: json when stderr is not a terminal, text "
        "when it is)",
    )


class _DryRunAction(argparse.Action):
    """``--dry-run[=none|client|server]`` as kubectl spells it: bare or ``client`` is today's
    ``--dry-run`` (plan only), ``server`` is ``--server-dry-run``, ``none`` evicts."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        namespace.dry_run = values == "client"
        if values == "server":
            namespace.server_dry_run = True


def add_dry_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dry-run[=none|client|server]`` and ``--server-dry-run`` (one of them)."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        choices=("none", "client", "server"),
        default=False,
        action=_DryRunAction,
        metavar="none|client|server",
        help="client (or bare --dry-run): only plan, the same as 'plan', sends no write "
        "request at all; server: the same as --server-dry-run; none: evict (the default)",
    )
    mode.add_argument(
        "--server-dry-run",
        action="store_true",
        help="send each eviction of the plan with dryRun=All: the API server gives its "
        "PodDisruptionBudget verdicts, nothing is evicted",
    )


def count_type(high: int, unit: str = "") -> Callable[[str], int]:
    """An argparse ``type``: a whole number from 1 to ``high``; ``unit`` (e.g. ``"of bytes "``)
    is named in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if not 1 <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a number {unit}from 1 to {high}, got {text!r}"
            )
        return value

    return parse


def max_input_bytes(args: argparse.Namespace, default: int) -> int:
    """``--max-input-bytes`` when given, else ``default`` (which differs per kind of input)."""
    given: int | None = getattr(args, "max_input_bytes", None)
    return default if given is None else given


def resolve_policy(args: argparse.Namespace) -> Policy:
    """The policy from ``--policy``/$REBALANCER_POLICY (or the defaults), narrowed by ``-n``.

    ``--policy -`` reads standard input.
    """
    path: str | None = getattr(args, "policy", None)
    if path == STDIN and getattr(args, "snapshot", None) == STDIN:
        raise InputError("--policy", ["- and --snapshot - cannot both read standard input"])
    limit = max_input_bytes(args, DEFAULT_MAX_POLICY_BYTES)
    policy = load_policy_file(path, limit) if path else Policy()
    namespace: str | None = getattr(args, "namespace", None)
    return restrict_to_namespace(policy, namespace) if namespace else policy


def window_status(policy: Policy) -> tuple[bool, str] | None:
    """(inside, sentence) for the policy's maintenance windows now; None without a schedule."""
    if not policy.schedule.windows:
        return None
    from datetime import UTC, datetime  # noqa: PLC0415  # only with a schedule

    from rebalancer.core.api import describe, window_state  # noqa: PLC0415  # same

    state = window_state(policy.schedule, datetime.fromtimestamp(time.time(), UTC))
    return state.inside, describe(state, policy.schedule.windows[0].time_zone)


def plan_and_write(
    snapshot: Snapshot,
    rejected: Sequence[object],
    policy: Policy,
    options: PlanOptions,
    server: Any = None,
    *,
    memory: LoopMemory | None = None,
) -> int:
    """Plan ``snapshot`` and write the plan as ``-o`` asks, with what the next ``run`` does
    (:func:`run_shape`: its waves, how long it may wait, whether the maintenance window is
    open), then the deletion costs a run would write (steered scale-downs: when the policy
    turns them on, or costs of ours remain). ``server``: the API server's version and feature
    gates (JSON/YAML only; a plan from a snapshot has none). Exit 1 when objects that could not
    be read (``rejected``) left their namespaces out of the plan. ``memory``: what a live plan
    read from the Lease holder's record (refused reservations, SPEC §5.10)."""
    from rebalancer.core.api import plan  # noqa: PLC0415  # on use: policy check needs no core

    with gc_paused():
        planned = plan(snapshot, policy, time.time(), rules=options.holds, memory=memory)
    say_what_matches_nothing(options.namespace, policy, snapshot)
    run = next_run(planned, run_shape(options, policy))
    output = options.output
    write(
        render_plan(
            planned, output.format, output.style(), planned.steering, server=server, run=run
        )
    )
    if options.pushgateway is not None:
        from rebalancer.cli.pushgateway import push_plan  # noqa: PLC0415  # prometheus on use

        push_plan(options.pushgateway, planned)
    return EXIT_EVICTIONS_FAILED if rejected else EXIT_OK


def add_run_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-waves`` and ``--wave-timeout``: a run's, and for ``plan`` what its summary
    says the next run does."""
    parser.add_argument(
        "--max-waves",
        type=count_type(MAX_WAVES),
        default=DEFAULT_MAX_WAVES,
        metavar="N",
        help=f"waves per run at most (default {DEFAULT_MAX_WAVES})",
    )
    parser.add_argument(
        "--wave-timeout",
        metavar="DURATION",
        default=DEFAULT_WAVE_TIMEOUT,
        help="how long one wave waits for replacements to be scheduled and Ready "
        f"(default {DEFAULT_WAVE_TIMEOUT})",
    )


def run_shape(options: PlanOptions, policy: Policy) -> RunShape:
    """What the next ``run`` is given: ``--max-waves`` and ``--wave-timeout``, the policy's
    limits and window now."""
    max_waves, text = options.max_waves, options.wave_timeout
    try:
        wave_timeout = parse_duration(text)
    except ValueError as exc:
        raise InputError("--wave-timeout", [str(exc)]) from None
    if wave_timeout <= 0:
        raise InputError("--wave-timeout", [f"must be > 0, got {text!r}"])
    lim = policy.limits
    set_limits = [
        f"limits.{name} {value}"
        for name, value in (
            ("total", lim.total),
            ("perNode", lim.per_node),
            ("perNamespace", lim.per_namespace),
            ("perWorkload", lim.per_workload),
        )
        if value is not None
    ]
    return RunShape(
        max_waves=max_waves,
        wave_timeout=wave_timeout,
        limits=", ".join(set_limits) or "no limits",
        window=window_status(policy),
        holds=options.holds,
    )


def say_what_matches_nothing(namespace: str | None, policy: Policy, snapshot: Snapshot) -> None:
    """On stderr: ``-n NAMESPACE`` that holds no pod, or a policy labelSelector that matches
    none, so that an empty plan is not read as a balanced one."""
    from rebalancer.cli.errorline import say  # noqa: PLC0415  # only to warn
    from rebalancer.core.api import selector_matches, selector_string  # noqa: PLC0415

    pods = snapshot.pods
    if namespace:
        pods = tuple(p for p in pods if p.namespace == namespace)
        if not pods:
            say(f"rebalancer: no pods in namespace {namespace!r}")
            return
    selector = policy.label_selector
    if selector is not None and not any(selector_matches(selector, p.labels) for p in pods):
        where = f" in namespace {namespace!r}" if namespace else ""
        shown = selector_string(selector)
        say(f"rebalancer: the policy's labelSelector {shown} matches no pod{where}")


def write(text: str) -> None:
    """Write command output to stdout (errors go to stderr, through :func:`main`), every
    control character escaped except newlines (:mod:`rebalancer.cli.printable`)."""
    sys.stdout.write(printable(text, newlines=True))
    sys.stdout.flush()
