"""What every command shares: the policy and output arguments, policy resolution, output."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Final

from rebalancer.cli.render import FORMATS
from rebalancer.cluster.policyfile import load_policy_file
from rebalancer.core.policy import Policy, restrict_to_namespace

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


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``-o/--output table|json|yaml`` (default table)."""
    parser.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="table",
        help="output format (default: table; json and yaml are a stable contract)",
    )


def resolve_policy(args: argparse.Namespace) -> Policy:
    """The policy from ``--policy``/$REBALANCER_POLICY (or the defaults), narrowed by ``-n``."""
    path: str | None = getattr(args, "policy", None)
    policy = load_policy_file(path) if path else Policy()
    namespace: str | None = getattr(args, "namespace", None)
    return restrict_to_namespace(policy, namespace) if namespace else policy


def write(text: str) -> None:
    """Write command output to stdout (errors go to stderr, through :func:`main`)."""
    sys.stdout.write(text)
    sys.stdout.flush()
