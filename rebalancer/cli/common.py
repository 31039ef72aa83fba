"""What every command shares: the policy and output arguments, policy resolution, output."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from rebalancer.cli.printable import printable
from rebalancer.cli.render import FORMATS, Format, TableStyle, render_plan
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES, STDIN
from rebalancer.cluster.read.policyfile import load_policy_file
from rebalancer.core.errors import InputError
from rebalancer.core.policy import Policy, restrict_to_namespace

if TYPE_CHECKING:
    from rebalancer.core.model import Snapshot
    from rebalancer.core.plan import Plan
    from rebalancer.core.steer import Steering

Handler = Callable[[argparse.Namespace], int]
"""A subcommand: gets the parsed arguments, returns the exit code."""
LivePlanHandler = Callable[[argparse.Namespace, Policy], int]
"""``plan`` without ``--snapshot``: gets the arguments and the resolved policy."""

POLICY_ENV: Final = "REBALANCER_POLICY"


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


def add_output_argument(
    parser: argparse.ArgumentParser, formats: tuple[Format, ...] = FORMATS
) -> None:
    """Add ``-o/--output`` with ``formats`` (default table) and ``--wide`` for the table."""
    html = "; html is a self-contained report" if "html" in formats else ""
    parser.add_argument(
        "-o",
        "--output",
        choices=formats,
        default="table",
        help=f"output format (default: table; json and yaml are a stable contract{html})",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="table: show every domain and node and never cut a line (default: the few most- "
        "and least-populated domains, and lines cut to the terminal's width)",
    )


def table_style(args: argparse.Namespace) -> TableStyle:
    """How the table fits stdout: its width when it is a terminal, everything with --wide."""
    stream = sys.stdout
    width = shutil.get_terminal_size().columns if stream.isatty() else None
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    return TableStyle(
        width=width, wide=bool(getattr(args, "wide", False)), unicode=encoding == "utf8"
    )


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

    from rebalancer.core.schedule import describe, window_state  # noqa: PLC0415  # same

    state = window_state(policy.schedule, datetime.fromtimestamp(time.time(), UTC))
    return state.inside, describe(state, policy.schedule.windows[0].time_zone)


def write_plan(
    planned: Plan,
    policy: Policy,
    args: argparse.Namespace,
    snapshot: Snapshot | None = None,
    *,
    server: Any = None,
) -> None:
    """Write a plan as ``-o`` asks; the table ends with whether now is inside a maintenance
    window (when the policy has a schedule). With ``snapshot``, the deletion costs a run would
    write follow (steered scale-downs: when the policy turns them on, or costs of ours remain).
    ``server``: the API server's version and feature gates (JSON/YAML only; a plan from a
    snapshot has none)."""
    fmt: Format = args.output
    steering = steering_of(snapshot, policy) if snapshot is not None else None
    text = render_plan(planned, fmt, table_style(args), steering, server=server)
    status = window_status(policy)
    if status is not None and fmt == "table":
        text += f"Maintenance window: {status[1]}\n"
    write(text)
    if getattr(args, "pushgateway", None):
        from rebalancer.cli.pushgateway import push_plan  # noqa: PLC0415  # prometheus on use

        push_plan(args, planned)


def steering_of(snapshot: Snapshot, policy: Policy) -> Steering | None:
    """The deletion costs a run would write; None when steering is off and no cost is ours."""
    from rebalancer.core.spread import analyze  # noqa: PLC0415  # the core, on use
    from rebalancer.core.steer import ours, steer  # noqa: PLC0415

    if not policy.steer_scale_down and not any(ours(p) for p in snapshot.pods):
        return None
    with gc_paused():
        analysis = analyze(snapshot, policy)
    return steer(snapshot, policy, analysis)


def write(text: str) -> None:
    """Write command output to stdout (errors go to stderr, through :func:`main`), every
    control character escaped except newlines (:mod:`rebalancer.cli.printable`)."""
    sys.stdout.write(printable(text, newlines=True))
    sys.stdout.flush()
