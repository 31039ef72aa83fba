"""The ``rebalancer`` command line: argparse, environment fallbacks, exit codes.

This is the shell around the pure core: it reads files, owns the clock (``time.time()`` is
passed to the planner here) and turns errors into exit codes. It never computes a plan itself.

Live-cluster commands live in :mod:`rebalancer.cli.live`, which is optional. When importable,
its ``add_live_commands(subparsers)`` is called after the offline commands are registered. It
may add ``snapshot`` and ``run``, add arguments to ``plan`` and make ``plan`` work without
``--snapshot`` by setting the plan parser's ``live_handler`` default::

    plan = subparsers.choices["plan"]
    plan.add_argument("--kubeconfig")
    plan.set_defaults(live_handler=plan_live)  # plan_live(args, policy) -> exit code

Every subcommand sets a ``handler(args) -> int`` default; :func:`main` calls it and maps
:class:`~rebalancer.core.errors.RebalancerError` to its exit code. Live commands reuse
:func:`add_policy_arguments`, :func:`add_output_argument`, :func:`resolve_policy` and
:func:`write`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import yaml

from rebalancer import __version__
from rebalancer.cli.render import (
    FORMATS,
    REPORT_FORMATS,
    Format,
    TableStyle,
    render_explanation,
    render_plan,
)
from rebalancer.cluster.policyfile import load_policy_file
from rebalancer.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CLUSTER,
    EXIT_EVICTIONS_FAILED,
    EXIT_OK,
    InputError,
    RebalancerError,
)
from rebalancer.core.policy import Policy, policy_to_dict, restrict_to_namespace

if TYPE_CHECKING:
    from rebalancer.core.plan import Plan

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[argparse.Namespace], int]
"""A subcommand: gets the parsed arguments, returns the exit code."""
LivePlanHandler = Callable[[argparse.Namespace, Policy], int]
"""``plan`` without ``--snapshot``: gets the arguments and the resolved policy."""

POLICY_ENV: Final = "REBALANCER_POLICY"
LIVE_MODULE: Final = "rebalancer.cli.live"

_EPILOG: Final = f"""\
exit codes:
  {EXIT_OK}  success
  {EXIT_EVICTIONS_FAILED}  some evictions failed (run)
  {EXIT_BAD_INPUT}  bad input: policy, snapshot or arguments (nothing was written)
  {EXIT_CLUSTER}  cluster error: unreachable, or RBAC denied a request

environment:
  {POLICY_ENV}  policy file used when --policy is not given
"""


# --------------------------------------------------------------------------------------------
# Helpers shared with rebalancer.cli.live


def add_policy_arguments(parser: argparse.ArgumentParser, *, namespace: bool = True) -> None:
    """Add ``--policy FILE`` (falling back to $REBALANCER_POLICY) and, optionally, ``-n NS``."""
    parser.add_argument(
        "--policy",
        metavar="FILE",
        default=os.environ.get(POLICY_ENV) or None,
        help=f"policy file (default: ${POLICY_ENV}, else the built-in defaults, "
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


def resolve_policy(args: argparse.Namespace) -> Policy:
    """The policy from ``--policy``/$REBALANCER_POLICY (or the defaults), narrowed by ``-n``."""
    path: str | None = getattr(args, "policy", None)
    policy = load_policy_file(path) if path else Policy()
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


def write_plan(planned: Plan, policy: Policy, args: argparse.Namespace) -> None:
    """Write a plan as ``-o`` asks; the table ends with whether now is inside a maintenance
    window (when the policy has a schedule)."""
    fmt = _format(args)
    text = render_plan(planned, fmt, table_style(args))
    status = window_status(policy)
    if status is not None and fmt == "table":
        text += f"Maintenance window: {status[1]}\n"
    write(text)


def write(text: str) -> None:
    """Write command output to stdout (errors go to stderr, through :func:`main`)."""
    sys.stdout.write(text)
    sys.stdout.flush()


# --------------------------------------------------------------------------------------------
# Commands


def _cmd_plan(args: argparse.Namespace) -> int:
    policy = resolve_policy(args)
    if args.snapshot is None:
        live: LivePlanHandler | None = args.live_handler
        if live is None:
            raise InputError(
                "plan",
                ["--snapshot FILE is required: live-cluster support is not available"],
            )
        return live(args, policy)
    from rebalancer.cluster.snapshot import load_snapshot  # noqa: PLC0415  # same
    from rebalancer.core.planner import plan  # noqa: PLC0415  # on use: policy check needs no core

    snapshot = load_snapshot(args.snapshot)
    write_plan(plan(snapshot, policy, time.time()), policy, args)
    return EXIT_OK


def _cmd_explain(args: argparse.Namespace) -> int:
    from rebalancer.cluster.snapshot import load_snapshot  # noqa: PLC0415  # same
    from rebalancer.core.explain import explain  # noqa: PLC0415  # on use: policy check needs no core

    policy = resolve_policy(args)
    snapshot = load_snapshot(args.snapshot)
    namespace, name = args.pod
    expl = explain(snapshot, policy, namespace, name)
    write(render_explanation(expl, _format(args), table_style(args)))
    return EXIT_OK


def _cmd_policy_check(args: argparse.Namespace) -> int:
    policy = load_policy_file(args.file)
    effective = yaml.safe_dump(policy_to_dict(policy), sort_keys=False)
    write(f"{args.file}: ok\n# effective policy:\n{effective}")
    return EXIT_OK


def _format(args: argparse.Namespace) -> Format:
    fmt: Format = args.output
    return fmt


def _pod_ref(text: str) -> tuple[str, str]:
    namespace, slash, name = text.partition("/")
    if not (slash and namespace and name) or "/" in name:
        raise argparse.ArgumentTypeError(f"must be NAMESPACE/NAME, got {text!r}")
    return namespace, name


# --------------------------------------------------------------------------------------------
# Parser


def _add_plan(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="print the violations and the fewest evictions that repair them (dry run)",
        description="Print the spread violations and the plan that repairs them. Writes "
        "nothing. With --snapshot the input is a file (kubectl get ... -o yaml); without, "
        "the live cluster.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--snapshot", metavar="FILE", help="plan offline from this snapshot")
    add_policy_arguments(parser)
    add_output_argument(parser, REPORT_FORMATS)
    parser.set_defaults(handler=_cmd_plan, live_handler=None)


def _add_explain(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show where a pod could go and why not elsewhere",
        description="Show a pod's spread constraints as kube-scheduler sees them, the nodes "
        "they allow, and the filter that rejects every other node.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--snapshot", metavar="FILE", required=True, help="snapshot file")
    parser.add_argument(
        "--pod", metavar="NAMESPACE/NAME", required=True, type=_pod_ref, help="the pod"
    )
    add_policy_arguments(parser, namespace=False)
    add_output_argument(parser)
    parser.set_defaults(handler=_cmd_explain)


def _add_policy(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("policy", help="work with policy files")
    commands = parser.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="validate a policy file and print the effective policy",
        description="Validate FILE. Prints 'FILE: ok' and the effective policy (every key, "
        "defaults filled in), or every problem found (exit 2).",
    )
    check.add_argument("file", metavar="FILE")
    check.set_defaults(handler=_cmd_policy_check)


def _add_live(subparsers: Subparsers) -> None:
    """Let :mod:`rebalancer.cli.live`, when present, add and extend commands."""
    try:
        live = importlib.import_module(LIVE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != LIVE_MODULE:
            raise
        return
    live.add_live_commands(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalancer",
        description="Repairs Kubernetes topology spread with the fewest evictions, "
        "only through the Eviction API.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rebalancer {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_plan(subparsers)
    _add_explain(subparsers)
    _add_policy(subparsers)
    _add_live(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code instead of exiting."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or EXIT_OK
        return EXIT_BAD_INPUT
    handler: Handler = args.handler
    try:
        return handler(args)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return exc.exit_code
    except RebalancerError as exc:
        kind = "cluster error" if exc.exit_code == EXIT_CLUSTER else "error"
        print(f"rebalancer: {kind}: {exc}", file=sys.stderr)
        return exc.exit_code
