"""The ``rebalancer`` command line: argparse, environment fallbacks, exit codes.

This is the shell around the pure core: it reads files, owns the clock (``time.time()`` is
passed to the planner here) and turns errors into exit codes. It never computes a plan itself.

The offline commands (``plan --snapshot``, ``explain --snapshot``, ``policy check``) are here;
the live-cluster ones are added by :func:`rebalancer.cli.live.add_live_commands`, and ``plan``
and ``explain`` without ``--snapshot`` are :mod:`rebalancer.cli.live`'s. What both share
(policy and output arguments, :func:`~rebalancer.cli.common.write`) is in
:mod:`rebalancer.cli.common`.

Every subcommand sets a ``handler(args) -> int`` default; :func:`main` calls it and maps
:class:`~rebalancer.core.errors.RebalancerError` to its exit code.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Final, NoReturn

import yaml

from rebalancer import __version__
from rebalancer.cli import oneshot, shutdown
from rebalancer.cli.common import (
    DEFAULT_UNPLACED_GRACE_SECONDS,
    POLICY_ENV,
    Handler,
    add_hold_arguments,
    add_log_arguments,
    add_output_argument,
    add_policy_arguments,
    add_run_shape_arguments,
    count_type,
    max_input_bytes,
    plan_and_write,
    plan_holds,
    resolve_policy,
    write,
)
from rebalancer.cli.errorline import say, say_traceback
from rebalancer.cli.exitcodes import exit_codes_text
from rebalancer.cli.importpolicy import add_import_command
from rebalancer.cli.live import add_live_commands, plan_live, read_live
from rebalancer.cli.options import explain_options, plan_options
from rebalancer.cli.pushgateway import add_pushgateway_arguments
from rebalancer.cli.render import REPORT_FORMATS, render_explanation
from rebalancer.cli.version import add_version_command
from rebalancer.cluster import logs
from rebalancer.cluster.api.deadline import Stopped
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES, DEFAULT_MAX_SNAPSHOT_BYTES, STDIN
from rebalancer.cluster.read.policyfile import load_policy_file
from rebalancer.core.api import (
    EXIT_BAD_INPUT,
    EXIT_CLUSTER,
    EXIT_INTERNAL,
    EXIT_OK,
    MAX_PROBLEMS_SHOWN,
    InputError,
    RebalancerError,
    policy_to_dict,
)

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
    options = plan_options(args)
    if options.connection is not None:
        return plan_live(options, policy)
    limit = max_input_bytes(args, DEFAULT_MAX_SNAPSHOT_BYTES)
    snapshot, rejected = _load_snapshot(args.snapshot, args.skip_invalid, limit)
    for r in rejected[:MAX_PROBLEMS_SHOWN]:
        problems = "; ".join(r.problems[:MAX_PROBLEMS_SHOWN])
        say(
            f"rebalancer: warning: {r.kind} {r.namespace}/{r.name} cannot be read, namespace "
            f"{r.namespace} left out: {problems}"
        )
    if len(rejected) > MAX_PROBLEMS_SHOWN:  # a line each would print many times the file
        namespaces = len({r.namespace for r in rejected})
        say(
            f"rebalancer: warning: {len(rejected) - MAX_PROBLEMS_SHOWN} more objects cannot be "
            f"read, not listed ({len(rejected)} in all, in {namespaces} namespace(s) left out)"
        )
    return plan_and_write(snapshot, rejected, policy, options)


def _cmd_explain(args: argparse.Namespace) -> int:
    from rebalancer.core.api import (  # noqa: PLC0415  # on use: policy check needs no core
        explain,
        plan,  # same
        pod_index,
    )

    namespace, name = pod_of(args)
    policy = resolve_policy(args)
    options = explain_options(args)
    if options.connection is not None:
        # the whole cluster, as plan reads it (the pods in one streamed LIST, --paged-lists or not)
        snapshot = read_live(replace(options.connection, paged=False), None)[0]
    else:
        limit = max_input_bytes(args, DEFAULT_MAX_SNAPSHOT_BYTES)
        snapshot = _load_snapshot(args.snapshot, False, limit)[0]
    pod_index(snapshot, namespace, name)  # an unknown pod: said before the plan is made
    with gc_paused():
        planned = plan(
            snapshot, policy, time.time(), rules=plan_holds(DEFAULT_UNPLACED_GRACE_SECONDS)
        )
        expl = explain(snapshot, policy, namespace, name, planned)
    write(render_explanation(expl, options.output.format, options.output.style()))
    return EXIT_OK


def _load_snapshot(source: str, skip_invalid: bool, max_bytes: int) -> Loaded:
    """The ``--snapshot`` file and the objects left out (``--skip-invalid``); one without nodes
    is an error (a failed ``kubectl get`` piped in must not look like a balanced cluster)."""
    from rebalancer.cluster.read.snapshot import load_snapshot_skipping  # noqa: PLC0415  # on use

    oneshot.loading()
    loaded = load_snapshot_skipping(source, skip_invalid=skip_invalid, max_bytes=max_bytes)
    oneshot.keep()
    if not loaded[0].nodes:
        shown = "standard input" if source == STDIN else source
        raise InputError(shown, ["no nodes in the snapshot"])
    return loaded


def _cmd_policy_check(args: argparse.Namespace) -> int:
    """``FILE: ok`` on stderr; the effective policy on stdout with ``-o yaml`` (so that it can
    be written to a file and checked again)."""
    limit = max_input_bytes(args, DEFAULT_MAX_POLICY_BYTES)
    try:
        policy = load_policy_file(args.file, limit)
    except InputError:
        if args.file != STDIN and _is_descheduler_policy(args.file, limit):
            raise InputError(
                args.file,
                [
                    "this is a descheduler policy: convert it with "
                    f"`rebalancer policy import {args.file}`"
                ],
            ) from None
        raise
    shown = "standard input" if args.file == STDIN else args.file
    say(f"{shown}: ok")
    if args.output == "yaml":
        write(yaml.safe_dump(policy_to_dict(policy), sort_keys=False))
    return EXIT_OK


def _is_descheduler_policy(path: str, limit: int) -> bool:
    """Whether ``path`` holds a DeschedulerPolicy (its kind, or a descheduler/ apiVersion)."""
    from rebalancer.cluster.read.policyfile import read_policy_document  # noqa: PLC0415

    try:
        document, _ = read_policy_document(path, limit)
    except InputError:
        return False
    if not isinstance(document, dict):
        return False
    api = str(document.get("apiVersion", ""))
    return document.get("kind") == "DeschedulerPolicy" or api.startswith("descheduler/")


def _pod_ref(text: str) -> tuple[str, str]:
    namespace, slash, name = text.partition("/")
    if not (slash and namespace and name) or "/" in name:
        raise argparse.ArgumentTypeError(f"must be NAMESPACE/NAME, got {text!r}")
    return namespace, name


def pod_of(args: argparse.Namespace) -> tuple[str, str]:
    """The pod ``explain`` is about: ``NAMESPACE/POD``, ``-n NAMESPACE POD`` or ``--pod
    NAMESPACE/NAME``; exactly one of them."""
    given: str | None = args.target
    ref: tuple[str, str] | None = args.pod
    namespace: str | None = args.namespace
    if (given is None) == (ref is None):
        raise InputError("explain", ["give the pod once: NAMESPACE/POD, -n NAMESPACE POD or --pod"])
    if ref is not None:
        if namespace and namespace != ref[0]:
            raise InputError("--pod", [f"{ref[0]}/{ref[1]} is not in -n {namespace}"])
        return ref
    assert given is not None
    if "/" in given:
        found = _pod_ref(given) if given.count("/") == 1 and given[0] != "/" else None
        if found is None or not found[1]:
            raise InputError("POD", [f"must be NAME or NAMESPACE/NAME, got {given!r}"])
        if namespace and namespace != found[0]:
            raise InputError("POD", [f"{given} is not in -n {namespace}"])
        return found
    if not namespace:
        raise InputError(
            "POD", [f"{given!r} needs its namespace: -n NAMESPACE {given}, or NAMESPACE/{given}"]
        )
    return namespace, given


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
    add_run_shape_arguments(parser)
    add_hold_arguments(parser)
    add_pushgateway_arguments(parser)
    parser.set_defaults(handler=_cmd_plan)


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
    parser.add_argument(
        "target",
        nargs="?",
        metavar="POD",
        help="the pod: NAMESPACE/NAME, or NAME with -n NAMESPACE",
    )
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        help="explain offline from this snapshot (default: the live cluster, read as plan "
        "reads it)",
    )
    parser.add_argument(
        "--pod", metavar="NAMESPACE/NAME", type=_pod_ref, help="the pod (the older spelling)"
    )
    parser.add_argument("-n", "--namespace", metavar="NAMESPACE", help="the pod's namespace")
    add_policy_arguments(parser, namespace=False)
    add_output_argument(parser)
    parser.set_defaults(handler=_cmd_explain)


def _add_policy(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("policy", help="work with policy files")
    commands = parser.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="validate a policy file; -o yaml prints the effective policy",
        description="Validate FILE (- reads standard input). Prints 'FILE: ok' on stderr, or "
        "every problem found (exit 2); with -o yaml, the effective policy (every key, defaults "
        "filled in) on stdout.",
    )
    check.add_argument("file", metavar="FILE")
    check.add_argument(
        "-o",
        "--output",
        choices=("none", "yaml"),
        default="none",
        help="yaml: print the effective policy on stdout (default: none, only the verdict on "
        "stderr)",
    )
    check.set_defaults(handler=_cmd_policy_check)
    add_import_command(commands)


def _cmd_completion(args: argparse.Namespace) -> int:
    from rebalancer.cli.completion import script  # noqa: PLC0415  # on use

    write(script(build_parser(), args.shell))
    return EXIT_OK


def _add_completion(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print the completion script for SHELL, generated from the command line "
        "itself. bash: source <(rebalancer completion bash); zsh: source <(rebalancer "
        "completion zsh); fish: rebalancer completion fish | source.",
    )
    parser.add_argument("shell", metavar="SHELL", choices=("bash", "zsh", "fish"))
    parser.set_defaults(handler=_cmd_completion)


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
    _add_completion(subparsers)
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
    add_log_arguments(parser)
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
    once with one line on stderr and exit 130 (SIGINT) or 143 (SIGTERM); ``run``, which has
    evicted nothing then, logs it and exits 0 (:mod:`rebalancer.cli.shutdown`).
    """
    undo = shutdown.install()
    command: list[str] = []
    try:
        return _main(argv, command)
    except shutdown.Terminated as exc:
        return shutdown.stopped(exc.signum, run=command == ["run"])
    finally:
        undo()


def run() -> NoReturn:
    """The console script (and ``python -m rebalancer``): :func:`main` on ``sys.argv``, in a
    process that ends with the command (:mod:`rebalancer.cli.oneshot`)."""
    oneshot.start()
    sys.exit(main())


def _main(argv: list[str] | None, command: list[str]) -> int:
    """:func:`main` without the signal handlers; the command's name goes into ``command``."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or EXIT_OK
        return EXIT_BAD_INPUT
    command.append(args.command)
    logs.configure_on_first_use(_configure_logging)  # whatever logs, logs to stderr
    handler: Handler = args.handler
    try:
        return handler(args)
    except Stopped:  # a stop that ended the command outside a run's eviction loop
        return shutdown.stopped(shutdown.received(), run=args.command == "run")
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


def _configure_logging() -> None:
    """:func:`rebalancer.cli.logconfig.configure`, loaded when something first logs."""
    from rebalancer.cli.logconfig import configure  # noqa: PLC0415  # structlog on use

    configure()


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
