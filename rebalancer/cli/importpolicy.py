"""``rebalancer policy import``: a descheduler policy in, a rebalancer policy out.

The policy goes to stdout as YAML (ready for ``rebalancer policy check`` and ``--policy``);
each setting that does not carry over, or carries over with another meaning, is one line on
stderr. The mapping itself is pure: :mod:`rebalancer.core.fromdescheduler`.
"""

from __future__ import annotations

import argparse

import yaml

from rebalancer.cli.common import max_input_bytes, write
from rebalancer.cli.errorline import say
from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES
from rebalancer.cluster.read.policyfile import read_policy_document
from rebalancer.core.errors import EXIT_OK
from rebalancer.core.fromdescheduler import API_VERSION, KIND, TOPOLOGY_PLUGIN, from_descheduler

__all__ = ["add_import_command"]


def _cmd_policy_import(args: argparse.Namespace) -> int:
    document, source = read_policy_document(
        args.file, max_input_bytes(args, DEFAULT_MAX_POLICY_BYTES)
    )
    imported = from_descheduler(document, source, args.profile)
    header = f"# Imported by rebalancer policy import from {source}, profile {imported.profile}.\n"
    write(header + yaml.safe_dump(imported.document, sort_keys=False))
    for note in imported.notes:
        say(note)  # a note quotes the file: escaped as every stderr line is
    return EXIT_OK


def add_import_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import`` to the ``policy`` subcommands."""
    parser = commands.add_parser(
        "import",
        help=f"convert a descheduler {KIND} to a rebalancer policy",
        description=f"Convert FILE (- reads standard input), a {API_VERSION} {KIND}, to a "
        "rebalancer policy printed on stdout. It takes the profile that enables "
        f"{TOPOLOGY_PLUGIN}: that plugin's args, the profile's DefaultEvictor args and the "
        "top level. Each setting that does not carry over, or whose meaning differs, is one "
        "line on stderr. Bad input, or no profile to import, exits 2.",
    )
    parser.add_argument("file", metavar="FILE")
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help=f"the profile to import when several enable {TOPOLOGY_PLUGIN}",
    )
    parser.set_defaults(handler=_cmd_policy_import)
