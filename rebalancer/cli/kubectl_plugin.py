"""``kubectl rebalance``: the rebalancer as a kubectl plugin (the ``kubectl-rebalance`` command).

kubectl runs ``kubectl-rebalance`` from PATH with every word after ``rebalance``. This module
takes kubectl's own connection flags out of them, wherever they stand, and runs the rebalancer
command of the same name in this process::

    kubectl rebalance [--kubeconfig FILE] [--context NAME] [-n NS | -A] COMMAND [OPTIONS]

    plan      the rebalancer's ``plan`` on the live cluster (-n: that namespace only)
    run       ``run`` (-n: that namespace only)
    snapshot  ``snapshot`` (-n: namespaced objects of that namespace only)
    explain   ``explain`` for ``POD`` (in -n, else the context's namespace) or ``NS/POD``; without
              ``--snapshot FILE`` on the live cluster, read as ``plan`` reads it
    version   ``version``: the client's version, then the server's (-n is not used)

The context's namespace is read from the kubeconfig as the main path reads it
(:func:`rebalancer.cluster.inputs.read_kubeconfig`: capped, bounded, regular files only); a
kubeconfig it cannot read is exit 2 naming the file, as the command would say.

Without -n, plan, run and snapshot cover every namespace the policy allows (kubectl's context
namespace does not narrow them: rebalancing is cluster-wide). Other options go to the command
unchanged; exit codes are the rebalancer's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rebalancer.cli.errorline import say
from rebalancer.cli.exitcodes import exit_codes_text
from rebalancer.cli.main import main as rebalancer_main
from rebalancer.cluster.inputs import read_kubeconfig
from rebalancer.core.api import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, InputError

COMMANDS: Final = ("plan", "explain", "run", "snapshot", "version")
EXPLAIN_VALUE_OPTIONS: Final = frozenset({"--snapshot", "--policy", "--pod", "-o", "--output"})
"""explain's options that take a value (so that value is not taken for the POD argument)."""

USAGE: Final = f"""\
usage: kubectl rebalance [--kubeconfig FILE] [--context NAME] [-n NAMESPACE | -A] COMMAND ...

Repairs topology spread with the fewest evictions, only through the Eviction API.

commands:
  plan       print the violations and the plan that repairs them (writes nothing)
  run        plan, then evict wave by wave (add --dry-run to only plan)
  snapshot   write what rebalancer reads from the cluster
  explain    POD | NAMESPACE/POD: where the pod could go and why not elsewhere
  version    the client's version, then the server's

kubectl flags (anywhere on the line):
  --kubeconfig FILE     kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME        kubeconfig context
  -n, --namespace NS    plan/run/snapshot: only this namespace; explain: the pod's namespace
  -A, --all-namespaces  every namespace the policy allows (the default of plan/run/snapshot)

`kubectl rebalance COMMAND --help` shows the options of a command.

exit codes (the rebalancer's):
{exit_codes_text()}"""


class UsageError(Exception):
    """A command line the plugin cannot map onto a rebalancer command."""


@dataclass
class KubectlArgs:
    """kubectl's flags, the command and the words left for it."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    command: str | None = None
    rest: list[str] = field(default_factory=list)

    def connection(self) -> list[str]:
        out: list[str] = []
        if self.kubeconfig:
            out += ["--kubeconfig", self.kubeconfig]
        if self.context:
            out += ["--context", self.context]
        return out


_FLAGS: Final = {
    "--kubeconfig": "kubeconfig",
    "--context": "context",
    "-n": "namespace",
    "--namespace": "namespace",
}


def parse(argv: Sequence[str]) -> KubectlArgs:
    """Take kubectl's flags out of ``argv`` (any position, ``--flag value`` or ``--flag=value``,
    ``-nNS``); the first other word is the command. Everything after ``--`` is left alone."""
    out = KubectlArgs()
    words: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            words.extend(argv[i:])
            break
        name, eq, value = word.partition("=")
        if name in _FLAGS and (eq or i + 1 < len(argv)):
            if not eq:
                i += 1
                value = argv[i]
            if not value:
                raise UsageError(f"{name} needs a value")
            setattr(out, _FLAGS[name], value)
        elif name in _FLAGS:
            raise UsageError(f"{name} needs a value")
        elif word.startswith("-n") and not word.startswith("--") and len(word) > 2:
            out.namespace = word[2:]
        elif word in ("-A", "--all-namespaces"):
            out.all_namespaces = True
        else:
            words.append(word)
        i += 1
    if out.all_namespaces and out.namespace:
        raise UsageError("-n/--namespace and -A/--all-namespaces exclude each other")
    if words and words[0] in COMMANDS:
        out.command, out.rest = words[0], words[1:]
    elif words and not words[0].startswith("-"):
        raise UsageError(f"unknown command {words[0]!r}: use one of {', '.join(COMMANDS)}")
    else:
        out.rest = words
    return out


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context in use, as kubectl picks it; "default" if none.

    Reads the files of --kubeconfig or $KUBECONFIG (else ~/.kube/config) with the checks of
    the main path (:func:`rebalancer.cluster.inputs.read_kubeconfig`); a missing file names
    no context, a file too large, too deep, not YAML, not a regular file, or whose
    ``contexts`` is not a list is :class:`InputError` (exit 2) naming it.
    """
    if kubeconfig:
        paths = [kubeconfig]
    else:
        env = os.environ.get("KUBECONFIG", "")
        paths = [p for p in env.split(os.pathsep) if p] or [str(Path.home() / ".kube" / "config")]
    docs: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        doc = read_kubeconfig(os.path.expanduser(path))
        if doc is not None:
            docs.append((path, doc))
    current = (d.get("current-context") for _, d in docs if d.get("current-context"))
    name = context or next(current, None)
    for path, doc in docs:
        entries = doc.get("contexts") or []
        if not isinstance(entries, list):
            raise InputError(path, [f"contexts: a list expected, got {_shown(entries)}"])
        for entry in entries:
            if isinstance(entry, dict) and entry.get("name") == name:
                ctx = entry.get("context") or {}
                namespace = ctx.get("namespace") if isinstance(ctx, dict) else None
                return str(namespace) if namespace else "default"
    return "default"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _explain_argv(args: KubectlArgs) -> list[str]:
    """explain's arguments with the POD word turned into --pod NS/NAME."""
    rest: list[str] = []
    pod: str | None = None
    has_pod = False
    i = 0
    while i < len(args.rest):
        word = args.rest[i]
        name = word.partition("=")[0]
        has_pod = has_pod or name == "--pod"
        if name in EXPLAIN_VALUE_OPTIONS and "=" not in word and i + 1 < len(args.rest):
            rest += [word, args.rest[i + 1]]
            i += 2
            continue
        if word.startswith("-") or pod is not None:
            rest.append(word)
        else:
            pod = word
        i += 1
    if pod is not None and has_pod:
        raise UsageError(f"explain: give the pod once, as POD or --pod, not both ({pod!r})")
    if pod is not None:
        if "/" not in pod:
            namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
            pod = f"{namespace}/{pod}"
        rest = ["--pod", pod, *rest]
    elif not has_pod and not any(w in ("-h", "--help") for w in rest):
        raise UsageError("explain: which pod? kubectl rebalance explain POD (or NAMESPACE/POD)")
    return rest


def to_rebalancer(args: KubectlArgs) -> list[str]:
    """The rebalancer command line: explain's with its pod named; -n narrows the others."""
    assert args.command is not None
    if args.command == "explain":
        return ["explain", *_explain_argv(args), *args.connection()]
    if args.command == "version":  # kubectl version takes -n and does nothing with it
        return ["version", *args.rest, *args.connection()]
    out = [args.command, *args.rest, *args.connection()]
    if args.namespace:
        out += ["--namespace", args.namespace]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kubectl rebalance``; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse(words)
        if args.command is None:
            if args.rest[:1] in (["-h"], ["--help"]):
                sys.stdout.write(USAGE)
                return EXIT_OK
            if args.rest[:1] == ["--version"]:
                return rebalancer_main(["--version"])
            raise UsageError("a command is required")
        return rebalancer_main(to_rebalancer(args))
    except UsageError as exc:
        say(f"{USAGE}\nkubectl rebalance: error: {exc}")
        return EXIT_BAD_INPUT
    except InputError as exc:  # the kubeconfig read for the context's namespace
        say(exc)
        return exc.exit_code
    except Exception as exc:  # a bug: one line, exit 4, as rebalancer's own commands say it
        say(f"kubectl rebalance: unexpected error: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL


if __name__ == "__main__":  # python -m rebalancer.cli.kubectl_plugin: the krew package's shim
    sys.exit(main())
