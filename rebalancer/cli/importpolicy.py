"""``rebalancer policy import``: a descheduler policy in, a rebalancer policy out.

FILE (``-`` reads standard input) is a ``DeschedulerPolicy``, a ConfigMap holding one (as
``kubectl get cm NAME -o yaml`` prints it), or the descheduler chart's values
(``deschedulerPolicy:``). The policy goes to stdout as YAML (ready for ``rebalancer policy
check`` and ``--policy``), or as this project's chart values with ``--output helm-values``
(``helm install ... -f FILE``). Each setting that does not carry over, or carries over with
another meaning, is a comment beside the key it concerns (``# SCOPE:`` when it changes which
pods may be evicted, ``# note:`` otherwise) and one line on stderr. The mapping itself is
pure: :mod:`rebalancer.core.fromdescheduler`.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

import yaml

from rebalancer.cli.common import max_input_bytes, write
from rebalancer.cli.errorline import say
from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES
from rebalancer.cluster.read.policyfile import policy_document_from_text, read_policy_document
from rebalancer.core.errors import EXIT_OK, InputError
from rebalancer.core.fromdescheduler import (
    API_VERSION,
    KIND,
    TOPOLOGY_PLUGIN,
    WIDER,
    Imported,
    Note,
    enabling_profiles,
    from_descheduler,
    unwrap,
)
from rebalancer.core.policy import HEADER_KEYS

__all__ = ["add_import_command", "render"]

POLICY: str = "policy"
HELM_VALUES: str = "helm-values"
_WIDTH = 100


def _comment(note: Note, indent: str) -> list[str]:
    """The note as YAML comment lines, wrapped."""
    if note.scope is not None:
        head = f"SCOPE: {'wider' if note.scope == WIDER else 'narrower'}, "
    else:
        head = "note: "
    return textwrap.wrap(
        f"{head}{note.path}: {note.message}",
        width=_WIDTH - len(indent),
        initial_indent=f"{indent}# ",
        subsequent_indent=f"{indent}#   ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def render(imported: Imported, header: Sequence[str], output: str = POLICY) -> str:
    """The imported policy as YAML with each note a comment beside the key it concerns (notes
    about the policy as a whole after the header). ``helm-values``: under ``policy:``, without
    apiVersion and kind (the chart writes them)."""
    helm = output == HELM_VALUES
    document = {
        key: value for key, value in imported.document.items() if not (helm and key in HEADER_KEYS)
    }
    indent = "  " if helm else ""
    lines = [f"# {header[0]}"] if header else []  # the source's path stays on one line
    lines += [
        wrapped
        for line in header[1:]
        for wrapped in textwrap.wrap(
            line,
            width=_WIDTH,
            initial_indent="# ",
            subsequent_indent="#   ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    ]
    beside: dict[str, list[Note]] = {}
    for note in imported.notes:
        if note.field is not None and note.field in document:
            beside.setdefault(note.field, []).append(note)
        else:
            lines.extend(_comment(note, ""))
    if helm:
        lines.append("policy:")
    for key, value in document.items():
        for note in beside.get(key, ()):
            lines.extend(_comment(note, indent))
        dumped = yaml.safe_dump({key: value}, sort_keys=False, width=_WIDTH)
        lines.extend(indent + line for line in dumped.splitlines())
    return "\n".join(lines) + "\n"


def _read(args: argparse.Namespace) -> tuple[object, str, str]:
    """The DeschedulerPolicy document, the name of the file, and what held the policy."""
    document, source = read_policy_document(
        args.file, max_input_bytes(args, DEFAULT_MAX_POLICY_BYTES)
    )
    holder = unwrap(document, source)
    if holder.text is not None:
        where = f"{source} ({holder.held_by})"
        return policy_document_from_text(holder.text, where), where, holder.held_by
    return holder.document, source, holder.held_by


def _header(source: str, held_by: str, profile: str, others: Sequence[str]) -> list[str]:
    lines = [f"Imported by rebalancer policy import from {source}, profile {profile}."]
    if held_by.startswith("the descheduler chart"):
        lines.append(
            "Only the policy is imported: the chart's other values (schedule, cmdOptions, ...) "
            "map as docs/descheduler.md shows."
        )
    if others:
        lines.append(
            f"One policy per profile that enables {TOPOLOGY_PLUGIN}: "
            f"{', '.join(others)}; run one rebalancer per policy."
        )
    return lines


def _stderr(notes: Sequence[Note], prefix: str = "") -> None:
    for note in notes:
        say(f"{prefix}{note.tag}: {note}")  # a note quotes the file: escaped as stderr lines are


def _file_name(profile: str, output: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", profile).lstrip(".") or "profile"
    return f"{safe}-values.yaml" if output == HELM_VALUES else f"{safe}.yaml"


def _cmd_policy_import(args: argparse.Namespace) -> int:
    document, source, held_by = _read(args)
    if args.all_profiles is None:
        imported = from_descheduler(
            document, source, args.profile, accept_wider=args.accept_wider_scope
        )
        write(render(imported, _header(source, held_by, imported.profile, ()), args.output))
        _stderr(imported.notes)
        return EXIT_OK
    if args.profile is not None:
        raise InputError("--all-profiles", ["imports every profile: leave --profile out"])
    names = enabling_profiles(document)
    if not names:  # the import says why, naming the fields
        from_descheduler(document, source, accept_wider=args.accept_wider_scope)
    imports = [
        from_descheduler(document, source, name, accept_wider=args.accept_wider_scope)
        for name in names
    ]  # every one first: nothing is written unless all import
    folder = Path(args.all_profiles)
    folder.mkdir(parents=True, exist_ok=True)
    files = [folder / _file_name(name, args.output) for name in names]
    if len(set(files)) != len(files):
        raise InputError("--all-profiles", [f"two profiles map to one file name: {names}"])
    for imported, path in zip(imports, files, strict=True):
        header = _header(source, held_by, imported.profile, names)
        path.write_text(render(imported, header, args.output), encoding="utf-8")
        _stderr(imported.notes, f"{path}: ")
    for path in files:
        write(f"{path}\n")
    return EXIT_OK


def add_import_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import`` to the ``policy`` subcommands."""
    parser = commands.add_parser(
        "import",
        help=f"convert a descheduler {KIND} to a rebalancer policy",
        description=f"Convert FILE (- reads standard input) to a rebalancer policy printed on "
        f"stdout. FILE is a {API_VERSION} {KIND}, a ConfigMap holding one (data key "
        "policy.yaml, or its only key), or the descheduler chart's values (deschedulerPolicy). "
        f"It takes the profile that enables {TOPOLOGY_PLUGIN}: that plugin's args, the "
        "profile's DefaultEvictor args and the top level. Each setting that does not carry "
        "over, or whose meaning differs, is a comment beside its key ('# SCOPE:' when it "
        "changes which pods may be evicted, '# note:' otherwise) and a line on stderr. Bad "
        "input, several profiles without --profile, or a setting that would let more pods be "
        "evicted than the descheduler would consider (without --accept-wider-scope) exits 2.",
    )
    parser.add_argument("file", metavar="FILE")
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help=f"the profile to import when several enable {TOPOLOGY_PLUGIN} (the others are "
        "named in '# SCOPE:' comments)",
    )
    parser.add_argument(
        "--all-profiles",
        metavar="DIR",
        help=f"write one policy per profile that enables {TOPOLOGY_PLUGIN} into DIR "
        "(PROFILE.yaml, or PROFILE-values.yaml with --output helm-values); their paths are "
        "printed on stdout",
    )
    parser.add_argument(
        "--output",
        choices=(POLICY, HELM_VALUES),
        default=POLICY,
        help="policy: a rebalancer policy file (default); helm-values: values for this "
        "project's chart (the policy under policy:), for helm install -f",
    )
    parser.add_argument(
        "--accept-wider-scope",
        action="store_true",
        help="write the policy even when a setting lets pods be evicted that the descheduler "
        "would not consider (each is marked '# SCOPE: wider' beside its key)",
    )
    parser.set_defaults(handler=_cmd_policy_import)
