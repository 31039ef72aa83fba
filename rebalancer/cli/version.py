"""``rebalancer version``: what this build is, and with a cluster, what the server runs.

The build's identity is :func:`rebalancer.cli.buildinfo.build_info`: the package version, the
commit it was built from and the Python that runs it; the same three values label the
``rebalancer_build_info`` metric.

As ``kubectl version``: the client's version comes first on stdout whatever happens to the
server's. The table prints the ``Client Version:`` line before the cluster is asked; ``-o json``
and ``-o yaml`` print one document, with ``serverVersion`` only when it was read. When it cannot
be read (no kubeconfig, an unreachable server, refused credentials) the reason is the command's
error line on stderr and its exit code (2 for a kubeconfig that is missing or bad, 3 for the
cluster). Logging is configured before the cluster is asked, so a log line goes to stderr.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Final

import yaml

from rebalancer.cli.buildinfo import BuildInfo, build_info
from rebalancer.cli.common import write
from rebalancer.cli.options import add_cluster_arguments, checked_connection
from rebalancer.cluster.read.live import Connection, connect
from rebalancer.core.api import EXIT_OK, RebalancerError

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

VERSION_FORMATS: Final = ("table", "json", "yaml")


def add_version_command(subparsers: Subparsers) -> None:
    """Add ``version``: the client's build, and the server's version unless ``--client``."""
    parser = subparsers.add_parser(
        "version",
        help="print the client's version and commit, and the server's version",
        description="Print this build of rebalancer (version, commit, Python) and, unless "
        "--client, the Kubernetes version of the cluster it would talk to (a GET of /version). "
        "The client's version is printed first, whatever happens next; when the server's "
        "cannot be read, the reason goes to stderr with exit 2 (no kubeconfig, or a bad one) "
        "or 3 (the cluster).",
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
    add_cluster_arguments(parser)
    parser.set_defaults(handler=_cmd_version)


def _cmd_version(args: argparse.Namespace) -> int:
    client = build_info()
    if args.client:
        write(render_version(client, None, args.output))
        return EXIT_OK
    from rebalancer.cli.logconfig import configure  # noqa: PLC0415  # structlog on use

    configure()
    if args.output == "table":  # the client's line first, whatever the server does
        write(render_version(client, None, "table"))
        write(render_server_line(_server_version(checked_connection(args))))
        return EXIT_OK
    try:
        server = _server_version(checked_connection(args))
    except RebalancerError:
        write(render_version(client, None, args.output))  # one document, the client's
        raise  # the reason, on stderr, and its exit code
    write(render_version(client, server, args.output))
    return EXIT_OK


def _server_version(connection: Connection) -> dict[str, Any]:
    """The server's ``/version`` answer; a cluster error (exit 3) when it cannot be had."""
    from rebalancer.cluster.api.errors import ClusterError  # noqa: PLC0415  # on use

    kube = connect(connection)
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
    text = f"Client Version: {client.version} (commit {client.commit}, Python {client.python})\n"
    return text if server is None else text + render_server_line(server)


def render_server_line(server: dict[str, Any]) -> str:
    """The table's ``Server Version:`` line."""
    return f"Server Version: {server['gitVersion']}\n"
