"""The ``rebalancer`` command line: argparse, environment fallbacks, exit codes.

This is the shell around the pure core: it reads files, owns the clock (``time.time()`` is
passed to the planner here) and turns errors into exit codes. It never computes a plan itself.

The offline commands (``plan --snapshot``, ``explain``, ``policy check``) are here; the
live-cluster ones are added by :func:`rebalancer.cli.live.add_live_commands`, which also makes
``plan`` work without ``--snapshot`` by setting the plan parser's ``live_handler`` default.
What both share (policy and output arguments, :func:`~rebalancer.cli.common.write`) is in
:mod:`rebalancer.cli.common`.

Every subcommand sets a ``handler(args) -> int`` default; :func:`main` calls it and maps
:class:`~rebalancer.core.errors.RebalancerError` to its exit code.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Final, NoReturn

import yaml

from rebalancer import __version__
from rebalancer.cli import oneshot, shutdown
from rebalancer.cli.common import (
    POLICY_ENV,
    Handler,
    LivePlanHandler,
    add_output_argument,
    add_policy_arguments,
    count_type,
    max_input_bytes,
    resolve_policy,
    table_style,
    write,
    write_plan,
)
from rebalancer.cli.errorline import say, say_traceback
from rebalancer.cli.exitcodes import exit_codes_text
from rebalancer.cli.importpolicy import add_import_command
from rebalancer.cli.live import add_live_commands
from rebalancer.cli.pushgateway import add_pushgateway_arguments, check_pushgateway_args
from rebalancer.cli.render import REPORT_FORMATS, render_explanation
from rebalancer.cli.version import add_version_command
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES, DEFAULT_MAX_SNAPSHOT_BYTES, STDIN
from rebalancer.cluster.read.policyfile import load_policy_file
from rebalancer.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CLUSTER,
    EXIT_EVICTIONS_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
    InputError,
    RebalancerError,
)
from rebalancer.core.policy import policy_to_dict

if TYPE_CHECKING:
    from rebalancer.cluster.read.snapshot import Loaded

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


_EPILOG: Final = f"""\
exit codes:
{exit_codes_text()}
environment:
  {POLICY_ENV}  policy file used when --policy is not given
"""


# --------------------------------------------------------------------------------------------
# Commands


def _cmd_plan(args: argparse.Namespace) -> int:
    policy = resolve_policy(args)
    check_pushgateway_args(args)
    if args.snapshot is None:
        live: LivePlanHandler | None = args.live_handler
        if live is None:
            raise InputError(
                "plan",
                ["--snapshot FILE is required: live-cluster support is not available"],
            )
        return live(args, policy)
    from rebalancer.core.planner import plan  # noqa: PLC0415  # on use: policy check needs no core

    snapshot, rejected = _load_snapshot(args)
    for r in rejected:
        problems = "; ".join(r.problems)
        say(
            f"rebalancer: warning: {r.kind} {r.namespace}/{r.name} cannot be read, namespace "
            f"{r.namespace} left out: {problems}"
        )
    with gc_paused():
        planned = plan(snapshot, policy, time.time())
    write_plan(planned, policy, args, snapshot)
    return EXIT_EVICTIONS_FAILED if rejected else EXIT_OK


def _cmd_explain(args: argparse.Namespace) -> int:
    from rebalancer.core.explain import explain  # noqa: PLC0415  # on use: policy check needs no core
    from rebalancer.core.planner import plan  # noqa: PLC0415  # same

    policy = resolve_policy(args)
    snapshot, _ = _load_snapshot(args)
    namespace, name = args.pod
    with gc_paused():
        expl = explain(snapshot, policy, namespace, name, plan(snapshot, policy, time.time()))
    write(render_explanation(expl, args.output, table_style(args)))
    return EXIT_OK


def _load_snapshot(args: argparse.Namespace) -> Loaded:
    """The ``--snapshot`` file and the objects left out (``--skip-invalid``); one without nodes
    is an error (a failed ``kubectl get`` piped in must not look like a balanced cluster)."""
    from rebalancer.cluster.read.snapshot import load_snapshot_skipping  # noqa: PLC0415  # on use

    source: str = args.snapshot
    oneshot.loading()
    loaded = load_snapshot_skipping(
        source,
        skip_invalid=getattr(args, "skip_invalid", False),
        max_bytes=max_input_bytes(args, DEFAULT_MAX_SNAPSHOT_BYTES),
    )
    oneshot.keep(loaded)
    if not loaded[0].nodes:
        shown = "standard input" if source == STDIN else source
        raise InputError(shown, ["no nodes in the snapshot"])
    return loaded


def _cmd_policy_check(args: argparse.Namespace) -> int:
    policy = load_policy_file(args.file, max_input_bytes(args, DEFAULT_MAX_POLICY_BYTES))
    effective = yaml.safe_dump(policy_to_dict(policy), sort_keys=False)
    shown = "standard input" if args.file == STDIN else args.file
    write(f"{shown}: ok\n# effective policy:\n{effective}")
    return EXIT_OK


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
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="with --snapshot: an object that cannot be read leaves its namespace out of the "
        "plan (warned about, exit 1) instead of failing it (exit 2). A live plan always does so",
    )
    add_policy_arguments(parser)
    add_output_argument(parser, REPORT_FORMATS)
    add_pushgateway_arguments(parser)
    parser.set_defaults(handler=_cmd_plan, live_handler=None)


def _add_explain(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show where a pod could go and why not elsewhere",
        description="Show what the plan does with a pod (evicts it: wave and target; skips "
        "it: why), its spread constraints counted as the plan counts them, the nodes "
        "kube-scheduler would allow for its replacement, and the filter that rejects every "
        "other node.",
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
        description="Validate FILE (- reads standard input). Prints 'FILE: ok' and the "
        "effective policy (every key, defaults filled in), or every problem found (exit 2).",
    )
    check.add_argument("file", metavar="FILE")
    check.set_defaults(handler=_cmd_policy_check)
    add_import_command(commands)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalancer",
        description="Repairs Kubernetes topology spread with the fewest evictions, "
        "only through the Eviction API.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rebalancer {__version__}")
    _add_global_arguments(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_plan(subparsers)
    _add_explain(subparsers)
    _add_policy(subparsers)
    add_live_commands(subparsers)
    add_version_command(subparsers)
    for sub in _all_subparsers(parser):
        _add_global_arguments(sub)
    return parser


MAX_INPUT_BYTES: Final = 64 * 1024**3
"""The largest --max-input-bytes: an input is held in memory whole."""


def _add_global_arguments(parser: argparse.ArgumentParser) -> None:
    """``--debug`` and ``--max-input-bytes``, accepted before or after the command.

    Their default is SUPPRESS at every level, so a value given at one level is never reset
    by another; readers use ``getattr`` with a fallback.
    """
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the traceback of an unexpected error (exit 4)",
    )
    parser.add_argument(
        "--max-input-bytes",
        metavar="N",
        type=count_type(MAX_INPUT_BYTES, "of bytes "),
        default=argparse.SUPPRESS,
        help=f"largest snapshot or policy read, in bytes (default: {DEFAULT_MAX_SNAPSHOT_BYTES} "
        f"for a snapshot, {DEFAULT_MAX_POLICY_BYTES} for a policy)",
    )


def _all_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every subcommand parser under ``parser`` (``policy check`` too)."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:  # argparse keeps no public list of subparsers
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found.append(sub)
                found.extend(_all_subparsers(sub))
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code instead of exiting.

    A SIGTERM or SIGINT before a run's eviction loop takes signals over ends the command at
    once with a log line and exit 0 (:mod:`rebalancer.cli.shutdown`).
    """
    undo = shutdown.install()
    try:
        return _main(argv)
    except shutdown.Terminated as exc:
        shutdown.report(exc)
        return EXIT_OK
    finally:
        undo()


def run() -> NoReturn:
    """The console script (and ``python -m rebalancer``): :func:`main` on ``sys.argv``, in a
    process that ends with the command (:mod:`rebalancer.cli.oneshot`)."""
    oneshot.start()
    oneshot.finish(main())


def _main(argv: list[str] | None) -> int:
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
        say(exc)
        return exc.exit_code
    except RebalancerError as exc:
        kind = "cluster error" if exc.exit_code == EXIT_CLUSTER else "error"
        say(f"rebalancer: {kind}: {exc}")
        return exc.exit_code
    except Exception as exc:  # a bug: say so in one line, exit 4
        if getattr(args, "debug", False):
            say_traceback()
        say(f"rebalancer: unexpected error: {_one_line(exc)}")
        return EXIT_INTERNAL


def _one_line(exc: BaseException) -> str:
    """``TypeName: first line of the message`` (cut short), and how to see more."""
    try:
        message = str(exc)
    except Exception:  # a message that cannot be printed is no message
        message = ""
    first = message.strip().split("\n", 1)[0][:200]
    name = type(exc).__name__
    hint = "(--debug prints the traceback)"
    return f"{name}: {first} {hint}" if first else f"{name} {hint}"
