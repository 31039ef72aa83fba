"""``rebalancer policy import``: a descheduler policy in, a rebalancer policy out.

FILE (``-`` reads standard input) is a ``DeschedulerPolicy``, a ConfigMap holding one (as
``kubectl get cm NAME -o yaml`` prints it), or the descheduler chart's values
(``deschedulerPolicy:``). The policy goes to stdout as YAML (ready for ``rebalancer policy
check`` and ``--policy``), or as this project's chart values with ``--output helm-values``
(``helm install ... -f FILE``; from the descheduler chart's values, with every other value this
chart has). Each setting that does not carry over, or carries over with
another meaning, is a comment beside the key it concerns (``# SCOPE:`` when it changes which
pods may be evicted, ``# note:`` otherwise) and one line on stderr. The mapping itself is
pure: :mod:`rebalancer.core.fromdescheduler`.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn

import yaml

from rebalancer.cli.common import max_input_bytes, write
from rebalancer.cli.errorline import say
from rebalancer.cli.printable import printable
from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES
from rebalancer.cluster.read.policyfile import policy_document_from_text, read_policy_document
from rebalancer.core.api import (
    API_VERSION,
    EXIT_OK,
    HEADER_KEYS,
    KIND,
    TOPOLOGY_PLUGIN,
    WIDER,
    ChartValues,
    Imported,
    InputError,
    Note,
    chart_values,
    from_descheduler,
    from_descheduler_all,
    unwrap,
)

__all__ = ["add_import_command", "inert", "render", "write_all"]

POLICY: str = "policy"
HELM_VALUES: str = "helm-values"
_WIDTH = 100
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def inert(text: str) -> str:
    """``text`` as a comment line may hold it: every line break YAML knows (``\\n``, ``\\r``,
    U+0085, U+2028, U+2029), every other control character and every format character
    (bidirectional overrides, zero-width spaces) written as its escape, as
    :func:`~rebalancer.cli.printable.printable` writes them. A profile, ConfigMap or key name
    then cannot end the comment and start a key of the policy, nor reorder what is shown."""
    return printable(text)


def _wrapped(text: str, indent: str, *, wrap: bool = True) -> list[str]:
    """``text`` as comment lines, made :func:`inert` first, then wrapped (only at spaces)."""
    safe = inert(text)
    if not wrap:
        return [f"{indent}# {safe}"]
    return textwrap.wrap(
        safe,
        width=_WIDTH - len(indent),
        initial_indent=f"{indent}# ",
        subsequent_indent=f"{indent}#   ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _comment(note: Note, indent: str) -> list[str]:
    """The note as YAML comment lines, wrapped."""
    if note.scope is not None:
        head = f"SCOPE: {'wider' if note.scope == WIDER else 'narrower'}, "
    else:
        head = "note: "
    return _wrapped(f"{head}{note.path}: {note.message}", indent)


SHARED_IN_FILE: Final = 8
"""With ``--all-profiles``, the notes about the rest of the policy written in full in each
file; beyond these, one line counts the others (each is on stderr once): a policy of many
profiles and many ignored keys writes files whose size grows with their own profile only."""


def render(
    imported: Imported,
    header: Sequence[str],
    output: str = POLICY,
    *,
    shared: Sequence[Note] = (),
    chart: ChartValues | None = None,
) -> str:
    """The imported policy as YAML with each note a comment beside the key it concerns (notes
    about the policy as a whole after the header, ``shared`` ones first). ``helm-values``:
    under ``policy:``, without apiVersion and kind (the chart writes them), after the
    descheduler chart's values ``chart`` carries (its notes first: stderr says them first).

    Every value is written by the YAML emitter and every comment is :func:`inert`; the text
    is read back and must hold exactly ``imported.document``, so nothing in a name can add a
    key the import did not decide."""
    helm = output == HELM_VALUES
    document = {
        key: value for key, value in imported.document.items() if not (helm and key in HEADER_KEYS)
    }
    indent = "  " if helm else ""
    lines = _wrapped(header[0], "", wrap=False) if header else []  # the source's path: one line
    lines += [wrapped for line in header[1:] for wrapped in _wrapped(line, "")]
    for note in shared[:SHARED_IN_FILE]:
        lines.extend(_comment(note, ""))
    if len(shared) > SHARED_IN_FILE:
        lines.extend(
            _wrapped(
                f"note: {len(shared) - SHARED_IN_FILE} more notes about the rest of the policy "
                "(keys the descheduler ignores, profiles not carried) are on the import's "
                "stderr",
                "",
            )
        )
    chart = chart if helm else None
    carried: dict[str, Any] = chart.values if chart is not None else {}
    chart_beside: dict[str, list[Note]] = {}
    for note in chart.notes if chart is not None else ():
        if note.field is not None and note.field in carried:
            chart_beside.setdefault(note.field, []).append(note)
        else:
            lines.extend(_comment(note, ""))
    beside: dict[str, list[Note]] = {}
    for note in imported.notes:
        if note.field is not None and note.field in document:
            beside.setdefault(note.field, []).append(note)
        else:
            lines.extend(_comment(note, ""))
    for key, value in carried.items():
        for note in chart_beside.get(key, ()):
            lines.extend(_comment(note, ""))
        dumped = yaml.safe_dump({key: value}, sort_keys=False, width=_WIDTH)
        lines.extend(dumped.splitlines())
    if helm:
        lines.append("policy:")
    for key, value in document.items():
        for note in beside.get(key, ()):
            lines.extend(_comment(note, indent))
        dumped = yaml.safe_dump({key: value}, sort_keys=False, width=_WIDTH)
        lines.extend(indent + line for line in dumped.splitlines())
    text = "\n".join(lines) + "\n"
    expected = {**carried, "policy": document} if helm else document
    if yaml.load(text, Loader=_LOADER) != expected:  # a guard: inert() is what keeps it true
        raise AssertionError("the imported policy does not read back as the import built it")
    return text


def _read(args: argparse.Namespace) -> tuple[object, str, str, ChartValues | None]:
    """The DeschedulerPolicy document, the name of the file, and what held the policy."""
    document, source = read_policy_document(
        args.file, max_input_bytes(args, DEFAULT_MAX_POLICY_BYTES)
    )
    holder = unwrap(document, source)
    if holder.text is not None:
        where = f"{source} ({holder.held_by})"
        return policy_document_from_text(holder.text, where), where, holder.held_by, None
    chart = chart_values(holder.chart) if holder.chart is not None else None
    return holder.document, source, holder.held_by, chart


def _header(
    source: str, held_by: str, profile: str, place: tuple[int, int] | None, helm: bool
) -> list[str]:
    """The header comment's lines (made :func:`inert` when written); ``place``: this policy's
    number and how many ``--all-profiles`` writes."""
    lines = [f"Imported by rebalancer policy import from {source}, profile {profile}."]
    if held_by.startswith("the descheduler chart"):
        lines.append(
            "The chart's other values are carried where this chart has them, each left behind "
            "is a note."
            if helm
            else "Only the policy is imported: --output helm-values carries the chart's other "
            "values too (kind, schedule, resources, ...)."
        )
    if place is not None:
        lines.append(
            f"Policy {place[0]} of {place[1]}: one per profile that enables {TOPOLOGY_PLUGIN}, "
            "written together by --all-profiles; run one rebalancer per policy."
        )
    return lines


def _stderr(notes: Sequence[Note], prefix: str = "") -> None:
    for note in notes:  # a note quotes the file: every line break in it escaped
        say(f"{prefix}{note.tag}: {inert(str(note))}")


def _file_name(profile: str, output: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", profile).lstrip(".") or "profile"
    return f"{safe}-values.yaml" if output == HELM_VALUES else f"{safe}.yaml"


def _cmd_policy_import(args: argparse.Namespace) -> int:
    document, source, held_by, chart = _read(args)
    helm = args.output == HELM_VALUES
    if not helm:
        chart = None
    if args.all_profiles is None:
        if args.budget_per_policy:
            raise InputError("--budget-per-policy", ["goes with --all-profiles"])
        imported = from_descheduler(
            document, source, args.profile, accept_wider=args.accept_wider_scope
        )
        header = _header(source, held_by, imported.profile, None, helm)
        write(render(imported, header, args.output, chart=chart))
        _stderr(chart.notes if chart is not None else ())
        _stderr(imported.notes)
        return EXIT_OK
    if args.profile is not None:
        raise InputError("--all-profiles", ["imports every profile: leave --profile out"])
    found = from_descheduler_all(
        document,
        source,
        accept_wider=args.accept_wider_scope,
        budget_per_policy=args.budget_per_policy,
    )  # every one first: nothing is written unless all import
    folder = Path(args.all_profiles)
    count = len(found.imports)
    files: dict[Path, str] = {}
    for number, imported in enumerate(found.imports, 1):
        path = folder / _file_name(imported.profile, args.output)
        if path in files:
            raise InputError(
                "--all-profiles", [f"two profiles map to one file name: {inert(str(path))}"]
            )
        header = _header(source, held_by, imported.profile, (number, count), helm)
        files[path] = render(imported, header, args.output, shared=found.shared, chart=chart)
    write_all(folder, files)
    _stderr(chart.notes if chart is not None else ())  # the same in every file: said once
    _stderr(found.shared)
    for imported, path in zip(found.imports, files, strict=True):
        _stderr(imported.notes, f"{inert(str(path))}: ")
    for path in files:
        write(f"{inert(str(path))}\n")
    return EXIT_OK


def write_all(folder: Path, files: Mapping[Path, str]) -> None:
    """Write every file into ``folder`` (made when missing), or none: each is written to a
    temporary file beside it first, and only when all are written are they renamed over
    their targets. A target that cannot be written is an :class:`InputError` naming it
    (exit 2), and whatever this call made (temporary files, the folder) is removed."""
    try:
        made = _missing(folder)
        if folder.exists() and not folder.is_dir():
            _refuse(folder, "exists and is not a folder")
    except OSError as exc:  # a name too long, a loop of links
        _refuse(folder, f"cannot be made a folder: {_why(exc)}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _undo([], made)
        _refuse(folder, f"cannot be made a folder: {_why(exc)}")
    for path in files:
        blocked = _blocked(path)
        if blocked is not None:
            _undo([], made)
            _refuse(path, blocked)
    temporary: list[tuple[Path, Path]] = []
    for number, (path, text) in enumerate(files.items()):
        tmp = folder / f".rebalancer-import-{os.getpid()}-{number}.tmp"
        try:
            descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            temporary.append((tmp, path))
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            _undo([t for t, _ in temporary], made)
            _refuse(path, f"cannot be written: {_why(exc)}")
    for done, (tmp, path) in enumerate(temporary):
        try:
            os.replace(tmp, path)
        except OSError as exc:
            _undo([t for t, _ in temporary[done:]], [])
            raise InputError(
                "--all-profiles",
                [
                    f"{inert(str(path))}: cannot be replaced: {_why(exc)}; {done} of "
                    f"{len(temporary)} files were replaced before it"
                ],
            ) from exc


def _blocked(path: Path) -> str | None:
    """Why ``path`` cannot be a file written here, or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be written: {_why(exc)}"
    return None if stat.S_ISREG(mode) else "exists and is not a file"


def _refuse(path: Path, why: str) -> NoReturn:
    raise InputError("--all-profiles", [f"{inert(str(path))}: {why}; nothing was written"])


def _missing(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing.append(path)
    return missing


def _undo(temporary: Sequence[Path], made: Sequence[Path]) -> None:
    for tmp in temporary:
        tmp.unlink(missing_ok=True)
    for path in made:  # deepest first: each is empty once the one below is gone
        try:
            path.rmdir()
        except OSError:
            break


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


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
        "(PROFILE.yaml, or PROFILE-values.yaml with --output helm-values), all or none (a "
        "target that cannot be written exits 2 naming it); their paths are printed on stdout. "
        "The maxNoOfPodsToEvict* limits, which the descheduler counts across its profiles, "
        "are divided between the policies (see --budget-per-policy)",
    )
    parser.add_argument(
        "--output",
        choices=(POLICY, HELM_VALUES),
        default=POLICY,
        help="policy: a rebalancer policy file (default); helm-values: values for this "
        "project's chart (the policy under policy:), for helm install -f",
    )
    parser.add_argument(
        "--budget-per-policy",
        action="store_true",
        help="with --all-profiles: give each policy the whole of each maxNoOfPodsToEvict* "
        "limit (the descheduler counts them across all its profiles; by default each limit "
        "is divided between the policies, and one too small to give each at least 1 exits 2)",
    )
    parser.add_argument(
        "--accept-wider-scope",
        action="store_true",
        help="write the policy even when a setting lets pods be evicted that the descheduler "
        "would not consider (each is marked '# SCOPE: wider' beside its key)",
    )
    parser.set_defaults(handler=_cmd_policy_import)
