"""``rebalancer version`` and ``rebalancer_build_info``: one build identity, said the same way."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import tomllib
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import pytest
import structlog
import yaml
from prometheus_client import generate_latest

from rebalancer.cli import buildinfo
from rebalancer.cli.kubectl_plugin import main as kubectl_main
from rebalancer.cli.main import main
from rebalancer.cli.metrics import Metrics
from rebalancer.cluster import logs
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_OK
from tests.hostile import Request, hostile_server, status_body

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def _git_head() -> str | None:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.fixture(autouse=True)
def _fresh_build_info() -> Iterator[None]:
    buildinfo.build_info.cache_clear()
    yield
    buildinfo.build_info.cache_clear()


def test_client_version_json_is_the_package_and_the_checkout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`version --client -o json` gives pyproject's version, git's HEAD and this Python."""
    assert main(["version", "--client", "-o", "json"]) == EXIT_OK
    client = json.loads(capsys.readouterr().out)["clientVersion"]
    assert client["version"] == _pyproject_version()
    assert client["python"] == platform.python_version()
    head = _git_head()
    assert client["commit"] == (head if head is not None else "unknown")


def test_build_commit_file_wins_over_git(capsys: pytest.CaptureFixture[str]) -> None:
    """An image's BUILD_COMMIT (written by the image build) is the commit reported."""
    planted = "0123456789abcdef0123456789abcdef01234567"
    path = Path(str(resources.files("rebalancer").joinpath(buildinfo.COMMIT_FILE)))
    assert not path.exists(), "a BUILD_COMMIT is left in the source tree"
    path.write_text(planted + "\n", encoding="ascii")
    try:
        assert main(["version", "--client"]) == EXIT_OK
    finally:
        path.unlink()
    out = capsys.readouterr().out
    assert out == (
        f"Client Version: {_pyproject_version()} (commit {planted}, "
        f"Python {platform.python_version()})\n"
    )


def test_a_build_commit_that_is_no_commit_is_not_believed() -> None:
    """A BUILD_COMMIT holding anything but a hex commit id falls back to git or unknown."""
    path = Path(str(resources.files("rebalancer").joinpath(buildinfo.COMMIT_FILE)))
    path.write_text("\x1b]0;PWN\x07\n", encoding="ascii")
    try:
        commit = buildinfo.build_info().commit
    finally:
        path.unlink()
    assert commit == (_git_head() or "unknown")


def test_build_info_metric_matches_version(capsys: pytest.CaptureFixture[str]) -> None:
    """rebalancer_build_info carries the labels `version -o yaml` prints, with the value 1."""
    assert main(["version", "--client", "-o", "yaml"]) == EXIT_OK
    client = yaml.safe_load(capsys.readouterr().out)["clientVersion"]
    exposition = generate_latest(Metrics().registry).decode()
    lines = [line for line in exposition.splitlines() if line.startswith("rebalancer_build_info{")]
    assert len(lines) == 1
    labels = dict(re.findall(r'(\w+)="([^"]*)"', lines[0]))
    assert labels == {
        "version": client["version"],
        "commit": client["commit"],
        "python": client["python"],
    }
    assert lines[0].endswith(" 1.0")


def _version_answer(request: Request) -> None:
    if request.path == "/version":
        body = {"major": "1", "minor": "35", "gitVersion": "v1.35.8", "platform": "linux/amd64"}
        request.send(200, json.dumps(body).encode())
    else:
        request.send(404, status_body(404, "not here"))


def test_server_version_is_read_from_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --client, the server's /version answer is printed after the client's line."""
    with hostile_server(_version_answer) as server:
        code = main(["version", "--kubeconfig", str(server.kubeconfig(tmp_path))])
        paths = [r.path for r in server.requests]
    assert code == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"Client Version: {_pyproject_version()} (commit ")
    assert lines[1] == "Server Version: v1.35.8"
    assert paths == ["/version"]


def test_server_version_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-o json has serverVersion as the server sent it (string fields only)."""
    with hostile_server(_version_answer) as server:
        code = main(["version", "-o", "json", "--kubeconfig", str(server.kubeconfig(tmp_path))])
    assert code == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["serverVersion"]["gitVersion"] == "v1.35.8"
    assert data["serverVersion"]["minor"] == "35"


def test_client_only_sends_nothing(tmp_path: Path) -> None:
    """--client never contacts the cluster, even when a kubeconfig names one."""
    with hostile_server(_version_answer) as server:
        code = main(["version", "--client", "--kubeconfig", str(server.kubeconfig(tmp_path))])
        sent = list(server.requests)
    assert code == EXIT_OK
    assert sent == []


def test_unreachable_server_is_a_cluster_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server refusing /version: exit 3, the error on stderr, and on stdout the client's
    version alone (printed first, as kubectl prints it)."""

    def refuse(request: Request) -> None:
        request.send(403, status_body(403, "forbidden: cannot get /version"))

    with hostile_server(refuse) as server:
        code = main(
            [
                "version",
                "--request-timeout",
                "2s",
                "--kubeconfig",
                str(server.kubeconfig(tmp_path)),
            ]
        )
    assert code == EXIT_CLUSTER
    captured = capsys.readouterr()
    assert captured.out.startswith("Client Version: ")
    assert len(captured.out.splitlines()) == 1
    assert "cluster error" in captured.err


@pytest.fixture
def _structlog_defaults_after() -> Iterator[None]:
    """A command configures logging onto the captured stderr, closed when the test ends."""
    yield
    structlog.reset_defaults()


def _flaky_version() -> Callable[[Request], None]:
    """/version answered 500 once (a request.retry log line), then as a server answers it."""
    seen: list[str] = []

    def answer(request: Request) -> None:
        seen.append(request.path)
        if request.path == "/version" and seen.count("/version") == 1:
            request.send(500, status_body(500, "try again"))
        else:
            _version_answer(request)

    return answer


@pytest.mark.usefixtures("_structlog_defaults_after")
@pytest.mark.parametrize("output", ["json", "yaml", "table"])
def test_log_lines_go_to_stderr_and_stdout_is_one_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    """A server that answers /version after one retry: the retry's log line is on stderr, and
    stdout is exactly the version document (before: the log line was on stdout, so -o json
    was not JSON)."""
    with hostile_server(_flaky_version()) as server:
        kubeconfig = str(server.kubeconfig(tmp_path))
        code = main(["version", "-o", output, "--log-format", "json", "--kubeconfig", kubeconfig])
    captured = capsys.readouterr()
    assert code == EXIT_OK, captured.err
    retries = [json.loads(line) for line in captured.err.splitlines()]
    assert [line["event"] for line in retries] == ["request.retry"]
    if output == "json":
        data = json.loads(captured.out)
    elif output == "yaml":
        data = yaml.safe_load(captured.out)
    else:
        client, server_line = captured.out.splitlines()
        assert client.startswith("Client Version: ")
        assert server_line == "Server Version: v1.35.8"
        return
    assert list(data) == ["clientVersion", "serverVersion"]
    assert data["serverVersion"]["gitVersion"] == "v1.35.8"


@pytest.mark.usefixtures("_structlog_defaults_after")
@pytest.mark.parametrize("output", ["json", "yaml", "table"])
def test_without_a_kubeconfig_the_client_version_and_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    output: str,
) -> None:
    """No kubeconfig anywhere: the client's version on stdout (one document), the reason on
    stderr naming the file looked for, exit 2 (before: nothing on stdout)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code = main(["version", "-o", output])
    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert f"kubeconfig {tmp_path}/.kube/config" in captured.err
    assert "no configuration found" in captured.err
    if output == "json":
        assert list(json.loads(captured.out)) == ["clientVersion"]
    elif output == "yaml":
        assert list(yaml.safe_load(captured.out)) == ["clientVersion"]
    else:
        (line,) = captured.out.splitlines()
        assert line.startswith(f"Client Version: {_pyproject_version()} (commit ")


@pytest.mark.usefixtures("_structlog_defaults_after")
def test_kubectl_rebalance_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kubectl rebalance version` is rebalancer's, kubectl's flags taken (-n too, unused)."""
    with hostile_server(_version_answer) as server:
        kubeconfig = str(server.kubeconfig(tmp_path))
        code = kubectl_main(["-n", "shop", "version", "-o", "json", "--kubeconfig", kubeconfig])
    assert code == EXIT_OK
    assert json.loads(capsys.readouterr().out)["serverVersion"]["gitVersion"] == "v1.35.8"
    assert kubectl_main(["version", "--client"]) == EXIT_OK
    assert capsys.readouterr().out.startswith("Client Version: ")


@pytest.mark.usefixtures("_structlog_defaults_after")
def test_whatever_logs_after_a_command_starts_logs_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A command that did not configure logging itself (here `version --client`) has it
    configured on the first log line: the line goes to stderr, as JSON, never to stdout."""
    assert main(["version", "--client"]) == EXIT_OK
    capsys.readouterr()
    structlog.reset_defaults()  # as if nothing had configured it
    logs.get_logger("t").warning("library.log", message="late")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err)["message"] == "late"
