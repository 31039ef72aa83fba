"""``rebalancer version``: what this build is, and with a cluster, what the server runs.

The build's identity (:func:`build_info`) is the package version, the commit it was built
from and the Python that runs it. The commit comes from ``rebalancer/BUILD_COMMIT``, which the
image build writes from its ``REBALANCER_COMMIT`` argument (the file is not in the
repository); a source checkout asks git; otherwise it is ``unknown``. The same three values
label the ``rebalancer_build_info`` metric, so a dashboard and ``rebalancer version`` agree.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from rebalancer import __version__
from rebalancer.cli.common import write
from rebalancer.core.errors import EXIT_OK

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

COMMIT_FILE: Final = "BUILD_COMMIT"
UNKNOWN: Final = "unknown"
VERSION_FORMATS: Final = ("table", "json", "yaml")


@dataclass(frozen=True, slots=True)
class BuildInfo:
    """What this build of rebalancer is."""

    version: str
    commit: str
    python: str


@cache
def build_info() -> BuildInfo:
    """This build's version, commit and Python version (read once per process)."""
    return BuildInfo(version=__version__, commit=_commit(), python=platform.python_version())


def _commit() -> str:
    try:
        text = resources.files("rebalancer").joinpath(COMMIT_FILE).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        text = ""
    commit = text.strip()
    if _is_commit(commit):
        return commit
    return _git_commit(Path(__file__).resolve().parents[2]) or UNKNOWN


def _git_commit(top: Path) -> str | None:
    """The checked-out commit of a source checkout at ``top``, or None."""
    if not (top / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(top), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and _is_commit(commit) else None


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def add_version_command(subparsers: Subparsers) -> None:
    """Add ``version``: the client's build, and the server's version unless ``--client``."""
    from rebalancer.cli.live import _add_cluster_arguments  # noqa: PLC0415  # on use

    parser = subparsers.add_parser(
        "version",
        help="print the client's version and commit, and the server's version",
        description="Print this build of rebalancer (version, commit, Python) and, unless "
        "--client, the Kubernetes version of the cluster it would talk to (a GET of /version; "
        "exit 3 when the cluster cannot be reached).",
    )
    parser.add_argument(
        "--client", action="store_true", help="the client's version only; no cluster contact"
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=VERSION_FORMATS,
        default="table",
        help="output format (default: table)",
    )
    _add_cluster_arguments(parser)
    parser.set_defaults(handler=_cmd_version)


def _cmd_version(args: argparse.Namespace) -> int:
    client = build_info()
    server = None if args.client else _server_version(args)
    write(render_version(client, server, args.output))
    return EXIT_OK


def _server_version(args: argparse.Namespace) -> dict[str, Any]:
    """The server's ``/version`` answer; a cluster error (exit 3) when it cannot be had."""
    from rebalancer.cli.live import _checked_timeouts, _connect  # noqa: PLC0415  # on use
    from rebalancer.cluster.api.errors import ClusterError  # noqa: PLC0415  # on use

    kube = _connect(args, _checked_timeouts(args))
    response = kube.request("GET", "/version", accept="application/json")
    if response.status != 200:
        raise ClusterError(f"GET /version answered {response.status}")
    try:
        answer = json.loads(response.body)
    except ValueError as exc:
        raise ClusterError(f"GET /version answered what is not JSON: {exc}") from exc
    if not isinstance(answer, dict) or not isinstance(answer.get("gitVersion"), str):
        raise ClusterError("GET /version answered no gitVersion")
    return {k: v for k, v in answer.items() if isinstance(v, str)}


def render_version(client: BuildInfo, server: dict[str, Any] | None, output: str) -> str:
    """The version report: kubectl's ``Client Version:`` / ``Server Version:`` lines, or the
    same as JSON/YAML (``clientVersion``, and ``serverVersion`` when asked)."""
    data: dict[str, Any] = {"clientVersion": asdict(client)}
    if server is not None:
        data["serverVersion"] = server
    if output == "json":
        return json.dumps(data, indent=2) + "\n"
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False)
    lines = [f"Client Version: {client.version} (commit {client.commit}, Python {client.python})"]
    if server is not None:
        lines.append(f"Server Version: {server['gitVersion']}")
    return "\n".join(lines) + "\n"
