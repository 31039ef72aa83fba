"""Reading input files safely: a size cap, standard input, and YAML whose aliases are bounded.

A snapshot or policy is read whole, so its size is capped (``--max-input-bytes``): ``/dev/zero``
or a runaway pipe ends with a clear error instead of filling memory. YAML aliases share the node
they name, so a few hundred bytes can stand for billions of nodes ("billion laughs"); anything
that walks the decoded value (a problem message, a cache key) would expand them. Each document
is therefore measured before it is constructed: its size with every alias expanded must stay
within a small multiple of the nodes actually written, and an alias may not refer to a node
that contains it.
"""

from __future__ import annotations

import itertools
import operator
import os
import re
import stat
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, Final, TypeVar

import yaml

from rebalancer.core.api import InputError

__all__ = [
    "DEFAULT_MAX_POLICY_BYTES",
    "DEFAULT_MAX_SNAPSHOT_BYTES",
    "MAX_KUBECONFIG_BYTES",
    "MAX_YAML_BYTES",
    "STDIN",
    "binary_problem",
    "check_expansion",
    "check_kubeconfig",
    "open_input",
    "read_bytes",
    "read_pipe",
    "yaml_documents",
    "yaml_problem",
]

_T = TypeVar("_T")

STDIN: Final = "-"
DEFAULT_MAX_SNAPSHOT_BYTES: Final = 1024**3
"""A kubectl JSON dump of 150,000 pods is about 0.5 GB."""
DEFAULT_MAX_POLICY_BYTES: Final = 1024**2
_CHUNK: Final = 1 << 20
MAX_YAML_BYTES: Final = 16 * 1024**2
"""YAML larger than this is refused, whatever ``--max-input-bytes`` says: parsing YAML builds a
node tree of the whole document before its values, 40 to 90 times its size in memory (a 42.7
MB ``kind: List`` took 1.71 GB, 20 MB of ``- a`` lines 1.77 GB), against about twice its size
for JSON. At this size the worst case is about 1.5 GB."""
EXPANSION_FLOOR: Final = 100_000
"""Aliases may always expand a document to this many nodes..."""
EXPANSION_RATIO: Final = 10
"""...or to this many times the nodes written, whichever is more."""


def _too_big(source: str, limit: int, flag: str | None) -> InputError:
    hint = f"; raise the limit with {flag} if this is right" if flag else ""
    return InputError(source, [f"larger than {limit} bytes{hint}"])


_UTF16_BOMS: Final = (b"\xff\xfe", b"\xfe\xff")


def binary_problem(chunk: bytes, offset: int = 0) -> str | None:
    """A problem when ``chunk`` (read at ``offset`` of the input) holds a NUL byte: neither
    JSON nor YAML may contain one, so the input is binary (``/dev/zero``, an image, a core
    file) and is refused without reading on. UTF-16 text (a byte-order mark first, as
    PowerShell writes redirected output) is let through: the parsers decode it."""
    at = chunk.find(b"\0")
    if at < 0 or (offset == 0 and chunk[:2] in _UTF16_BOMS):
        return None
    return f"not text: a NUL byte at offset {offset + at} (binary data is neither JSON nor YAML)"


def _read_capped(
    stream: IO[bytes], source: str, limit: int, flag: str | None = "--max-input-bytes"
) -> bytes:
    """At most ``limit`` bytes of ``stream``: reading stops at the first chunk past the cap,
    or at the first that is plainly not text, so neither is ever held whole."""
    chunks: list[bytes] = []
    total = 0
    utf16 = False
    while True:
        chunk = stream.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        if total == 0:
            utf16 = chunk[:2] in _UTF16_BOMS
        problem = None if utf16 else binary_problem(chunk, total)
        if problem is not None:
            raise InputError(source, [problem])
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _too_big(source, limit, flag)


def read_bytes(
    path: str | os.PathLike[str], limit: int, flag: str | None = "--max-input-bytes"
) -> bytes:
    """The bytes of ``path`` (``-`` is standard input), at most ``limit`` of them.

    Raises :class:`InputError` naming the file when it cannot be read, when standard input is
    closed, when it holds more than ``limit`` bytes (a regular file's size is checked before
    anything is read; ``flag`` is the option that raises the limit), or when it is plainly
    binary (:func:`binary_problem`).
    """
    source = os.fspath(path)
    if source == STDIN:
        stdin = sys.stdin
        if stdin is None or getattr(stdin, "closed", False):
            raise InputError("standard input", ["is closed; nothing to read"])
        try:
            return _read_capped(stdin.buffer, "standard input", limit, flag)
        except (OSError, ValueError) as exc:  # ValueError: closed under us
            raise InputError("standard input", [f"cannot read it: {exc}"]) from exc
    try:
        with open_input(source) as stream:
            info = os.fstat(stream.fileno())
            if stat.S_ISREG(info.st_mode):
                if info.st_size > limit:
                    raise _too_big(source, limit, flag)
                return _read_capped(stream, source, limit, flag)
            return read_pipe(stream, source, limit, flag)
    except OSError as exc:
        raise InputError(source, [f"cannot read the file: {exc.strerror or exc}"]) from exc


def _not_a_file(mode: int) -> str | None:
    """What a file of ``mode`` is when it is neither a regular file nor a pipe, else None."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    return "not a regular file"


def open_input(source: str) -> IO[bytes]:
    """``source`` opened for reading when it is a regular file or a pipe (``<(kubectl ...)``,
    a FIFO); raises :class:`InputError` for anything else (a directory, a device such as
    ``/dev/zero`` or a terminal, a socket) and :class:`OSError` when it cannot be opened.

    The open never waits: a FIFO is opened without blocking (opening one for reading
    otherwise waits for a writer for ever), then read as any pipe is, see :func:`read_pipe`.
    """
    fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        what = _not_a_file(mode)
        if what is not None:
            raise InputError(
                source,
                [f"is {what}, not a file; give a file, or - to read standard input"],
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_pipe(stream: IO[bytes], source: str, limit: int, flag: str | None) -> bytes:
    """Every byte of a pipe opened by :func:`open_input`, at most ``limit``. A FIFO that no
    writer has opened reads as empty at once: that is refused, not taken for an empty
    file (an empty policy is the default policy)."""
    data = _read_capped(stream, source, limit, flag)
    if not data:
        raise InputError(
            source, ["is a pipe and nothing was written to it (a FIFO with no writer?)"]
        )
    return data


def check_expansion(node: yaml.Node, where: str) -> str | None:
    """None when the document rooted at ``node`` has sane aliases, else the problem.

    Iterative (deep nesting is no RecursionError) and linear in the nodes written: each node's
    expanded size is computed once.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        ident = id(current)
        if children_done:
            on_path.discard(ident)
            size = 1 + sum(sizes[id(child)] for child in _children(current))
            sizes[ident] = size
            continue
        if ident in sizes:
            continue
        if ident in on_path:
            mark = current.start_mark
            return (
                f"{where}line {mark.line + 1}, column {mark.column + 1}: "
                "an alias refers to a node that contains it"
            )
        distinct += 1
        on_path.add(ident)
        stack.append((current, True))
        for child in _children(current):
            child_id = id(child)
            if child_id in on_path:
                mark = child.start_mark
                return (
                    f"{where}line {mark.line + 1}, column {mark.column + 1}: "
                    "an alias refers to a node that contains it"
                )
            if child_id not in sizes:
                stack.append((child, False))
    total = sizes[id(node)]
    allowed = max(EXPANSION_FLOOR, EXPANSION_RATIO * distinct)
    if total > allowed:
        return (
            f"{where}aliases expand {distinct} YAML nodes to {total}, more than {allowed} "
            f"({EXPANSION_RATIO} times the nodes written); write the repeated parts out"
        )
    return None


MAX_FLOW_DEPTH: Final = 1000
"""Flow collections (``[``, ``{``) nested deeper than this are refused before parsing: libyaml
takes quadratic time on them."""
_STACK_BYTES: Final = 512 * 1024**2
"""The C stack of the thread that parses YAML: libyaml's composer recurses once per nesting
level (block nesting such as ``- - - x`` is cheap to write), and the default stack overflows
near 50,000 levels. Only the pages a parse touches are ever committed."""
_ANCHOR: Final = re.compile(rb"(?:^|[\s\[{,])&[^\s\[\]{},]", re.MULTILINE)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def _flow_depth_problem(data: bytes, make_loader: Callable[[], Any]) -> str | None:
    """A problem when flow collections nest deeper than :data:`MAX_FLOW_DEPTH`.

    Brackets are counted first, as bytes: an over-estimate (those in comments and strings
    count too), enough for nearly every input. Past the limit, the loader's own scanner
    (``make_loader()``: the loader that parses next) tells real flow collections from brackets
    in comments and strings, and stops at the first one nested too deep, so it never runs
    deeper than the limit itself.
    """
    brackets = data.translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") + brackets.count(b"{") <= MAX_FLOW_DEPTH:
        return None
    rounds = 0
    while rounds < 16:  # drop empty pairs ("{}" of kubectl's YAML) a few levels deep
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        rounds += 1
        if len(shorter) == len(brackets):
            break
        brackets = shorter
    # Depth after k brackets: openers - closers = sum(2 if opener else 0) - k.
    weights = brackets.translate(bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00"))
    depth = max(map(operator.sub, itertools.accumulate(weights), itertools.count(1)), default=0)
    if depth + rounds <= MAX_FLOW_DEPTH or _scanned_flow_depth(make_loader) <= MAX_FLOW_DEPTH:
        return None
    return f"flow collections ([ or {{) nested more than {MAX_FLOW_DEPTH} deep"


def _scanned_flow_depth(make_loader: Callable[[], Any]) -> int:
    """How deep flow collections nest as the loader's scanner reads its text, counted up
    to one past :data:`MAX_FLOW_DEPTH`. A text the scanner refuses keeps the verdict of the
    byte count (too deep): the scanner holds tokens back while a key may follow, so where it
    stopped says nothing of how deep the text had nested (libyaml also refuses nesting past
    1,000 itself, before it hands over the first token)."""
    depth = deepest = 0
    try:
        loader = make_loader()
    except yaml.YAMLError:
        return MAX_FLOW_DEPTH + 1
    try:
        while (token := loader.get_token()) is not None:
            if isinstance(token, yaml.FlowSequenceStartToken | yaml.FlowMappingStartToken):
                depth += 1
                if depth > MAX_FLOW_DEPTH:
                    return depth
                deepest = max(deepest, depth)
            elif isinstance(token, yaml.FlowSequenceEndToken | yaml.FlowMappingEndToken):
                depth -= 1
    except yaml.YAMLError:
        return MAX_FLOW_DEPTH + 1
    finally:
        loader.dispose()
    return deepest


def yaml_problem(exc: BaseException) -> str:
    """A YAML parse failure as one line, with the line and column when known."""
    if isinstance(exc, RecursionError | MemoryError):
        return "invalid YAML: nested too deeply"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {problem}"


def _on_big_stack(work: Callable[[], _T]) -> _T:
    """``work()`` in a thread with a large C stack; its exception is raised here."""
    result: list[_T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    try:
        previous = threading.stack_size(_STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform that cannot size thread stacks
        return work()
    try:
        thread = threading.Thread(target=run, name="yaml-parse")
        thread.start()
    except RuntimeError:  # no thread to be had (limits): parse here, on the usual stack
        return work()
    finally:
        threading.stack_size(previous)
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def yaml_documents(
    data: bytes | str,
    source: str,
    make_loader: Callable[[bytes | str], Any],
    too_big_hint: str = "",
) -> tuple[list[Any], Any]:
    """Every document the loader ``make_loader(data)`` (a PyYAML loader) finds, each checked
    with :func:`check_expansion` before it is constructed, and the loader; raises
    :class:`InputError`.

    YAML above :data:`MAX_YAML_BYTES` is refused (``too_big_hint`` is added to the problem:
    what to do instead). Flow nesting is bounded before parsing and the parse runs on a large
    stack, so no input crashes the process, takes quadratic time or memory out of proportion.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_YAML_BYTES:
        problem = (
            f"YAML larger than {MAX_YAML_BYTES} bytes ({len(raw)}): parsing YAML costs up to "
            f"90 times its size in memory{too_big_hint}"
        )
        raise InputError(source, [problem])
    deep = _flow_depth_problem(raw, lambda: make_loader(data))
    if deep is not None:
        raise InputError(source, [deep])
    anchored = _ANCHOR.search(raw) is not None

    def parse() -> tuple[list[Any], Any]:
        documents: list[Any] = []
        loader = make_loader(data)  # the pure-Python reader checks characters here
        try:
            while loader.check_node():
                node = loader.get_node()
                if anchored:
                    where = f"document {len(documents) + 1}: "
                    problem = check_expansion(node, where)
                    if problem is not None:
                        raise InputError(source, [problem])
                documents.append(loader.construct_document(node))
        finally:
            loader.dispose()
        return documents, loader

    try:
        return _on_big_stack(parse)
    except (yaml.YAMLError, ValueError, RecursionError, MemoryError) as exc:
        # ValueError: an integer of more than 4300 digits, a bad timestamp, ...
        raise InputError(source, [yaml_problem(exc)]) from exc


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


MAX_KUBECONFIG_BYTES: Final = 16 * 1024**2
"""A kubeconfig larger than this is refused (embedded certificates make a few hundred KB)."""
_KUBECONFIG_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_KUBECONFIG_DEPTH: Final = 64
"""Deeper nesting is refused: the client's loader recurses per level (a kubeconfig is about 6
deep, its extensions a few more)."""


def _depth(value: object) -> int:
    """How deep lists and mappings nest in ``value`` (walked without recursion)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            if depth < MAX_KUBECONFIG_DEPTH:  # past it, the answer is known
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, depth + 1) for child in children)
    return deepest


def check_kubeconfig(paths: str, limit: int = MAX_KUBECONFIG_BYTES) -> None:
    """Raise :class:`InputError` naming the file when one of ``paths`` (separated as in
    ``$KUBECONFIG``; missing files are skipped, as the client skips them) is too large, is not
    YAML, or is not one mapping. The client library parses kubeconfigs with the pure-Python
    loader, unbounded: a deep or huge file would crash or fill memory there instead."""
    for part in paths.split(os.pathsep):
        path = os.path.expanduser(part)
        if not part or not os.path.exists(path):
            continue
        _kubeconfig_document(read_bytes(path, limit, flag=None), path)


def read_kubeconfig(path: str, limit: int = MAX_KUBECONFIG_BYTES) -> dict[str, Any] | None:
    """The kubeconfig at ``path`` as one mapping, checked as :func:`check_kubeconfig` checks
    it; None when there is no such file. Only a regular file is read: this is a look ahead
    (``kubectl rebalance`` reads the context's namespace before the command reads the file
    again), and a pipe read here would be empty for the command, a device endless, a FIFO
    could wait for ever. Raises :class:`InputError` naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(path, [f"cannot read the file: {exc.strerror or exc}"]) from exc
    try:  # opened without waiting: a FIFO never blocks
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = "a pipe" if stat.S_ISFIFO(info.st_mode) else _not_a_file(info.st_mode)
            problem = f"is {what}, not a regular file; a kubeconfig is read from a file"
            raise InputError(path, [problem])
        if info.st_size > limit:
            raise _too_big(path, limit, None)
        os.set_blocking(fd, True)
        stream = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with stream:
        try:
            data = _read_capped(stream, path, limit, None)
        except OSError as exc:
            raise InputError(path, [f"cannot read the file: {exc.strerror or exc}"]) from exc
    return _kubeconfig_document(data, path)


def _kubeconfig_document(data: bytes, path: str) -> dict[str, Any]:
    documents, _ = yaml_documents(data, path, _KUBECONFIG_LOADER)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        found = "nothing" if not documents or documents[0] is None else "not one mapping"
        raise InputError(path, [f"is not a kubeconfig: a YAML mapping expected, {found} found"])
    if _depth(documents[0]) > MAX_KUBECONFIG_DEPTH:
        problem = f"is not a kubeconfig: nested more than {MAX_KUBECONFIG_DEPTH} levels deep"
        raise InputError(path, [problem])
    return documents[0]
