"""Exec credential plugins on a leash, and kubeconfigs the client would choke on.

The real command line runs as a subprocess against a loopback server (tests/hostile.py), with
real plugin scripts written to tmp: one that fails with a secret and terminal escapes on
stderr, one that hangs (and starts a child, to see that its whole process group goes), one
that floods its stdout. Each ends in exit 3 with one line naming the plugin, nothing secret or
raw on stderr, every other stderr line a JSON log line, and no process left behind.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import io
import json
import logging
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rebalancer.cli import logconfig
from rebalancer.cluster.api import execplugin, redact
from rebalancer.cluster.api.kubeclient import connect
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_OK
from tests import hostile
from tests.fakes import RecordingServer
from tests.hostile import Request, hostile_server

ROOT = Path(__file__).resolve().parent.parent
SECRET = "SEKRET-abcdef-123456"
V1 = "client.authentication.k8s.io/v1"
PLAN = (sys.executable, "-m", "rebalancer", "plan")


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    redact.forget_all()
    yield
    redact.forget_all()


def authorised_only(request: Request) -> None:
    """An API server that refuses anonymous requests (403, as RBAC would) and serves a cluster
    of one node and nothing else to any request that carries credentials."""
    if "authorization" not in {k.lower() for k in request.headers}:
        message = 'nodes is forbidden: User "system:anonymous" cannot list resource "nodes"'
        request.send(403, hostile.status_body(403, message))
    else:
        items = [hostile.node("node-1")] if request.resource == "nodes" else []
        request.send(200, hostile.list_body(request.resource, items))


def authorization(request: Request) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == "authorization"), None)


def write_kubeconfig(
    directory: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None
) -> Path:
    path = directory / "kubeconfig.json"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "robot", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "robot"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(config))
    return path


def plugin(directory: Path, name: str, script: str) -> dict[str, Any]:
    """A kubeconfig user whose exec plugin is ``script``, written to ``directory/name``."""
    path = directory / name
    path.write_text(script)
    path.chmod(0o755)
    return {"exec": {"apiVersion": V1, "command": str(path)}}


def credential(token: str, expires: str | None = None) -> str:
    status: dict[str, str] = {"token": token}
    if expires:
        status["expirationTimestamp"] = expires
    return json.dumps({"apiVersion": V1, "kind": "ExecCredential", "status": status})


def cli(kubeconfig: Path, *flags: str, timeout: float = 60) -> tuple[int, str, float]:
    """``rebalancer plan`` as a process: its exit code, stderr and seconds."""
    start = time.monotonic()
    result = subprocess.run(
        [*PLAN, "--kubeconfig", str(kubeconfig), *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    return result.returncode, result.stderr, time.monotonic() - start


def error_line(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("rebalancer: ")]
    return line


def log_lines(stderr: str) -> list[dict[str, Any]]:
    """Every stderr line but the command's own error line, each of which must be JSON."""
    return [
        json.loads(line)
        for line in stderr.splitlines()
        if line.strip() and not line.startswith("rebalancer: ")
    ]


def assert_clean(stderr: str) -> None:
    """Nothing secret, nothing raw, no line from a handler of the client's own."""
    assert SECRET not in stderr
    assert not any(c in stderr for c in "\x1b\x07\x9b")
    assert "ERROR:root" not in stderr and "Warning" not in stderr
    log_lines(stderr)  # every other line is a JSON log line


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def pids_of(path: Path, wait: float = 10.0) -> list[int]:
    end = time.monotonic() + wait
    while time.monotonic() < end:
        if path.exists() and path.read_text().endswith("\n"):
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"the plugin never wrote {path}")


def gone(pids: list[int], wait: float = 5.0) -> bool:
    end = time.monotonic() + wait
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    for pid in left:  # do not leave them to the next test
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return not left


# -- plugins that fail, hang, flood -------------------------------------------------------------


def test_a_failing_plugin_is_exit_3_naming_it_with_its_stderr_redacted_and_escaped(
    tmp_path: Path,
) -> None:
    """The plugin's stderr holds a token and an OSC title sequence: the error line quotes it
    redacted and escaped, the exec.stderr log line too; no RBAC message, no ERROR:root."""
    script = f"#!/bin/sh\necho 'plugin failed: token={SECRET} \033]0;PWN\007' >&2\nexit 1\n"
    user = plugin(tmp_path, "fail.sh", script)
    with hostile_server(authorised_only) as server:
        code, err, _ = cli(write_kubeconfig(tmp_path, server.url, user))
        asked = len(server.requests)
    assert code == EXIT_CLUSTER, err
    assert_clean(err)
    line = error_line(err)
    assert line == (
        f"rebalancer: cluster error: exec credential plugin failed: {tmp_path}/fail.sh: "
        "exit 1: plugin failed: token=<redacted> \\u001b]0;PWN\\u0007"
    )
    assert "RBAC" not in err
    assert asked == 0  # nothing went to the server without credentials
    (logged,) = [e for e in log_lines(err) if e["event"] == "exec.stderr"]
    assert logged["level"] == "warning"
    assert logged["line"] == "plugin failed: token=<redacted> \x1b]0;PWN\x07"  # JSON-escaped


def test_a_hanging_plugin_is_killed_with_its_child_at_the_connect_timeout(tmp_path: Path) -> None:
    """The plugin starts a child and both sleep: at --connect-timeout the group is killed,
    exit 3 naming the plugin and the timeout, neither process left."""
    pidfile = tmp_path / "pids"
    script = f"#!/bin/sh\nsleep 300 &\necho $$ $! > {pidfile}\nsleep 300\n"
    user = plugin(tmp_path, "hang.sh", script)
    with hostile_server(authorised_only) as server:
        code, err, seconds = cli(
            write_kubeconfig(tmp_path, server.url, user), "--connect-timeout", "2s"
        )
    assert code == EXIT_CLUSTER, err
    assert_clean(err)
    assert error_line(err) == (
        f"rebalancer: cluster error: exec credential plugin failed: {tmp_path}/hang.sh: did not "
        "finish within 2s (--connect-timeout); killed with every process it started"
    )
    assert gone(pids_of(pidfile), wait=1.0)
    assert seconds < 30  # not the 300 s the plugin asked for


def test_a_plugin_that_exits_but_leaves_a_child_holding_its_output_is_killed_too(
    tmp_path: Path,
) -> None:
    """The plugin exits 0 at once; its child keeps stdout open and never writes: no EOF, so
    the group is killed at the timeout."""
    pidfile = tmp_path / "pids"
    script = f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nexit 0\n"
    user = plugin(tmp_path, "orphan.sh", script)
    with hostile_server(authorised_only) as server:
        code, err, _ = cli(write_kubeconfig(tmp_path, server.url, user), "--connect-timeout", "2s")
    assert code == EXIT_CLUSTER, err
    assert "did not finish within 2s (--connect-timeout)" in error_line(err)
    assert gone(pids_of(pidfile), wait=1.0)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_plugin_runs_kills_its_group(tmp_path: Path, signum: int) -> None:
    """SIGTERM or SIGINT while the plugin hangs (a timeout far away): rebalancer ends at once
    and takes the plugin and its child with it."""
    pidfile = tmp_path / "pids"
    script = f"#!/bin/sh\nsleep 300 &\necho $$ $! > {pidfile}\nsleep 300\n"
    user = plugin(tmp_path, "hang.sh", script)
    with hostile_server(authorised_only) as server:
        path = write_kubeconfig(tmp_path, server.url, user)
        process = subprocess.Popen(
            [*PLAN, "--kubeconfig", str(path), "--connect-timeout", "120s"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        try:
            pids = pids_of(pidfile, wait=30)
            process.send_signal(signum)
            _, err = process.communicate(timeout=10)
        finally:
            process.kill()
            process.wait()
    assert gone(pids, wait=1.0)
    assert process.returncode in (EXIT_OK, 128 + signum), err  # a stop, not a failure
    assert_clean(err)


def test_a_flooding_plugin_is_killed_past_the_output_bound(tmp_path: Path) -> None:
    """300 MiB on stdout: killed past 4 MiB (it never gets to write its last byte), exit 3."""
    done = tmp_path / "done"
    script = (
        f"#!{sys.executable}\nimport sys\nblock = b'x' * (1 << 20)\n"
        "for _ in range(300):\n    sys.stdout.buffer.write(block)\n"
        f"open({str(done)!r}, 'w').close()\n"
    )
    user = plugin(tmp_path, "flood.py", script)
    with hostile_server(authorised_only) as server:
        code, err, _ = cli(write_kubeconfig(tmp_path, server.url, user), "--connect-timeout", "60s")
    assert code == EXIT_CLUSTER, err
    assert_clean(err)
    assert error_line(err) == (
        f"rebalancer: cluster error: exec credential plugin failed: {tmp_path}/flood.py: its "
        f"output exceeds {execplugin.MAX_OUTPUT_BYTES} bytes; killed with every process it "
        "started"
    )
    assert not done.exists()


@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        ("not json", "its output is not an ExecCredential (not JSON)"),
        ("[1]", "its output is not an ExecCredential (not a JSON object)"),
        (
            '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential"}',
            "its output is not an ExecCredential of client.authentication.k8s.io/v1 "
            "(kind 'ExecCredential', apiVersion 'client.authentication.k8s.io/v1beta1')",
        ),
        (
            json.dumps({"apiVersion": V1, "kind": "ExecCredential", "status": {}}),
            "its ExecCredential holds neither status.token nor a client certificate",
        ),
        (
            json.dumps(
                {
                    "apiVersion": V1,
                    "kind": "ExecCredential",
                    "status": {"token": "t0ken-1234567", "expirationTimestamp": "soon"},
                }
            ),
            "status.expirationTimestamp is not an RFC 3339 time",
        ),
    ],
)
def test_output_that_is_no_credential_is_exit_3_saying_why(
    tmp_path: Path, stdout: str, reason: str
) -> None:
    user = plugin(tmp_path, "odd.sh", f"#!/bin/sh\ncat <<'EOF'\n{stdout}\nEOF\n")
    code, err, _ = cli(write_kubeconfig(tmp_path, "http://127.0.0.1:9", user))
    assert code == EXIT_CLUSTER, err
    assert error_line(err) == (
        f"rebalancer: cluster error: exec credential plugin failed: {tmp_path}/odd.sh: {reason}"
    )


def test_a_plugin_that_cannot_start_is_exit_3_naming_it_with_its_install_hint(
    tmp_path: Path,
) -> None:
    command = str(tmp_path / "missing-plugin")
    hint = "install it with\n  brew install missing-plugin"
    user = {"exec": {"apiVersion": V1, "command": command, "installHint": hint}}
    code, err, _ = cli(write_kubeconfig(tmp_path, "http://127.0.0.1:9", user))
    assert code == EXIT_CLUSTER, err
    assert error_line(err) == (
        f"rebalancer: cluster error: exec credential plugin failed: {command}: "
        "cannot start it: No such file or directory "
        "(install it with brew install missing-plugin)"
    )


def test_a_working_plugin_is_run_once_with_its_args_env_and_exec_info(tmp_path: Path) -> None:
    """The token reaches the server; the plugin saw its args, its env and a non-interactive
    KUBERNETES_EXEC_INFO, with no stdin; its stderr chatter is logged at info level."""
    seen = tmp_path / "seen.json"
    script = (
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': os.environ.get('GREETING'), "
        f"'info': json.loads(os.environ['KUBERNETES_EXEC_INFO']), "
        f"'stdin': sys.stdin.read()}}, open({str(seen)!r}, 'w'))\n"
        "print('fetching a token', file=sys.stderr)\n"
        f"print({credential('tok-abcdef-42')!r})\n"
    )
    user = plugin(tmp_path, "ok.py", script)
    user["exec"] |= {"args": ["--region", "eu"], "env": [{"name": "GREETING", "value": "hi"}]}
    with hostile_server(authorised_only) as server:
        code, err, _ = cli(write_kubeconfig(tmp_path, server.url, user))
        sent = {authorization(r) for r in server.requests}
    assert code == EXIT_OK, err
    assert sent == {"Bearer tok-abcdef-42"}
    ran = json.loads(seen.read_text())
    assert ran == {
        "argv": ["--region", "eu"],
        "env": "hi",
        "info": {"apiVersion": V1, "kind": "ExecCredential", "spec": {"interactive": False}},
        "stdin": "",
    }
    (chatter,) = [e for e in log_lines(err) if e["event"] == "exec.stderr"]
    assert chatter["level"] == "info" and chatter["line"] == "fetching a token"


def test_a_relative_command_is_found_beside_the_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``command: ./bin/plugin.sh`` is the kubeconfig directory's bin/plugin.sh, wherever
    rebalancer runs (as kubectl finds it)."""
    (tmp_path / "bin").mkdir()
    plugin(tmp_path / "bin", "plugin.sh", f"#!/bin/sh\necho '{credential('tok-relative-1')}'\n")
    user = {"exec": {"apiVersion": V1, "command": "./bin/plugin.sh"}}
    api = RecordingServer(200, b"{}")
    path = write_kubeconfig(tmp_path, api.endpoint.server, user)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    kube = connect(str(path))
    try:
        kube.request("GET", "/version")
    finally:
        kube.close()
    assert api.headers[0]["Authorization"] == "Bearer tok-relative-1"


def test_a_plugin_that_asks_for_cluster_info_gets_the_fields_kubectl_passes(
    tmp_path: Path,
) -> None:
    seen = tmp_path / "seen.json"
    script = (
        f"#!{sys.executable}\nimport os, pathlib\n"
        f"pathlib.Path({str(seen)!r}).write_text(os.environ['KUBERNETES_EXEC_INFO'])\n"
        f"print({credential('tok-abcdef-42')!r})\n"
    )
    user = plugin(tmp_path, "info.py", script)
    user["exec"]["provideClusterInfo"] = True
    cluster = {
        "tls-server-name": "api.example",
        "certificate-authority": "/nowhere/ca.crt",  # a file: not passed, as kubectl
        "extensions": [
            {"name": "other", "extension": {"a": 1}},
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "x"}},
        ],
    }
    connect(str(write_kubeconfig(tmp_path, "http://127.0.0.1:9", user, cluster))).close()
    assert json.loads(seen.read_text())["spec"] == {
        "interactive": False,
        "cluster": {
            "server": "http://127.0.0.1:9",
            "tls-server-name": "api.example",
            "config": {"audience": "x"},
        },
    }


def test_an_expiring_token_is_renewed_by_running_the_plugin_again(tmp_path: Path) -> None:
    """A token that expires within the renewal margin is renewed before each use; one that
    expires in an hour is not."""
    counter = tmp_path / "count"
    counter.write_text("0")
    expires = tmp_path / "expires"

    script = (
        f"#!{sys.executable}\nimport json, pathlib\n"
        f"c = pathlib.Path({str(counter)!r}); n = int(c.read_text()) + 1; c.write_text(str(n))\n"
        f"when = pathlib.Path({str(expires)!r}).read_text()\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': {'token': f'tok-{n}-abcdef', "
        "'expirationTimestamp': when}}))\n"
    )
    user = plugin(tmp_path, "renew.py", script)
    api = RecordingServer(200, b"{}")
    path = write_kubeconfig(tmp_path, api.endpoint.server, user)

    def tokens(expiry: str) -> list[str]:
        counter.write_text("0")
        expires.write_text(expiry)
        api.headers.clear()
        kube = connect(str(path))
        try:
            for _ in range(3):
                kube.request("GET", "/version")
        finally:
            kube.close()
        return [h["Authorization"] for h in api.headers]

    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 5))
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    assert tokens(soon) == ["Bearer tok-2-abcdef", "Bearer tok-3-abcdef", "Bearer tok-4-abcdef"]
    assert tokens(later) == ["Bearer tok-1-abcdef"] * 3


# -- kubeconfigs the client would choke on ------------------------------------------------------


def test_a_kubeconfig_nested_500_deep_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        "    server: http://127.0.0.1:9\n    extensions: " + "[" * 500 + "]" * 500 + "\n"
        "users: [{name: u, user: {token: abcdefgh}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    code, err, _ = cli(path)
    assert code == EXIT_BAD_INPUT, err
    assert err.splitlines() == [
        f"{path}: 1 problem(s):",
        "  - is not a kubeconfig: nested more than 64 levels deep",
    ]


def test_a_kubeconfig_nested_within_the_bound_loads(tmp_path: Path) -> None:
    """60 levels of extension data (64 with the file's own): loaded, not refused."""
    nested: Any = "leaf"
    for _ in range(60):
        nested = [nested]
    path = write_kubeconfig(
        tmp_path, "http://127.0.0.1:9", {"token": "abcdefgh"}, {"extensions": nested}
    )
    connect(str(path)).close()


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@contextlib.contextmanager
def tls_server(cert: Path, key: Path) -> Iterator[str]:
    """An empty cluster over TLS on 127.0.0.1; yields its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # the base's name
            pass

        def do_GET(self) -> None:  # the name http.server calls
            resource = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            body = hostile.list_body(
                resource, [hostile.node("node-1")] if resource == "nodes" else []
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("field", ["client-key-data", "client-certificate-data"])
def test_client_key_or_certificate_data_that_is_not_pem_is_exit_3_naming_the_user(
    tmp_path: Path, field: str
) -> None:
    cert, key = make_certificate(tmp_path)
    user = {
        "client-certificate-data": b64(cert.read_text()),
        "client-key-data": b64(key.read_text()),
        field: b64("this is not PEM"),
    }
    path = write_kubeconfig(tmp_path, "https://127.0.0.1:9", user)
    code, err, _ = cli(path)
    assert code == EXIT_CLUSTER, err
    line = error_line(err)
    assert line.startswith(
        f"rebalancer: cluster error: cannot load cluster credentials from kubeconfig {path}: "
        "users[robot].user.client-certificate(-data) and client-key(-data) are not a PEM "
        "certificate and its key ("
    )
    assert "request.retry" not in err


def test_certificate_authority_data_that_is_not_pem_is_exit_3_naming_the_cluster(
    tmp_path: Path,
) -> None:
    ca = {"certificate-authority-data": b64("not a certificate")}
    path = write_kubeconfig(tmp_path, "https://127.0.0.1:9", {"token": "abcdefgh-123"}, ca)
    code, err, _ = cli(path)
    assert code == EXIT_CLUSTER, err
    assert error_line(err).startswith(
        f"rebalancer: cluster error: cannot load cluster credentials from kubeconfig {path}: "
        "clusters[c].cluster.certificate-authority(-data) is not a PEM certificate ("
    )


def test_insecure_skip_tls_verify_says_so_once_as_a_log_line(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    with tls_server(cert, key) as url:
        path = write_kubeconfig(
            tmp_path, url, {"token": "abcdefgh-123"}, {"insecure-skip-tls-verify": True}
        )
        code, err, _ = cli(path)
    assert code == EXIT_OK, err
    assert "InsecureRequestWarning" not in err
    lines = log_lines(err)  # every line JSON
    insecure = [e for e in lines if e["event"] == "tls.insecure"]
    assert len(insecure) == 1 and insecure[0]["server"] == url


def test_an_untrusted_certificate_fails_at_once_without_retries(tmp_path: Path) -> None:
    """A server whose certificate the kubeconfig does not trust: exit 3 saying TLS failed,
    no request.retry line (a certificate does not get better by asking again)."""
    cert, key = make_certificate(tmp_path)
    with tls_server(cert, key) as url:
        code, err, _ = cli(write_kubeconfig(tmp_path, url, {"token": "abcdefgh-123"}))
    assert code == EXIT_CLUSTER, err
    line = error_line(err)
    assert "TLS failed" in line and "CERTIFICATE_VERIFY_FAILED" in line
    assert line.endswith("(not retried)")
    assert "request.retry" not in err


def test_the_trusted_certificate_works(tmp_path: Path) -> None:
    """The same server with its certificate as the kubeconfig's CA: exit 0 (the check above
    fails for the certificate, not for the server)."""
    cert, key = make_certificate(tmp_path)
    with tls_server(cert, key) as url:
        ca = {"certificate-authority-data": b64(cert.read_text())}
        code, err, _ = cli(write_kubeconfig(tmp_path, url, {"token": "abcdefgh-123"}, ca))
    assert code == EXIT_OK, err


def redirect(request: Request) -> None:
    request.handler.send_response(302)
    request.handler.send_header("Location", request.path)
    request.handler.send_header("Content-Length", "0")
    request.handler.send_header("Connection", "close")
    request.handler.end_headers()


def test_a_redirect_fails_at_once_without_retries(tmp_path: Path) -> None:
    with hostile_server(redirect) as server:
        path = write_kubeconfig(tmp_path, server.url, {"token": "abcdefgh-123"})
        code, err, _ = cli(path)
        asked = len(server.requests)
    assert code == EXIT_CLUSTER, err
    assert error_line(err) == (
        f"rebalancer: cluster error: {server.url} answered GET /api/v1/nodes with a redirect, "
        "which rebalancer does not follow: check the server URL in the kubeconfig (not retried)"
    )
    assert "request.retry" not in err
    assert asked <= 2  # the LIST of nodes (and the pods' stream, read beside it), once each


def test_basic_auth_is_sent_as_kubectl_sends_it_and_never_printed(tmp_path: Path) -> None:
    password = f"pw-{SECRET}"
    user = {"username": "admin", "password": password}
    with hostile_server(authorised_only) as server:
        code, err, _ = cli(write_kubeconfig(tmp_path, server.url, user))
        sent = {authorization(r) for r in server.requests}
    assert code == EXIT_OK, err
    assert sent == {"Basic " + b64(f"admin:{password}")}
    assert SECRET not in err


# -- the client's own logging -------------------------------------------------------------------


def test_a_library_logging_on_the_root_logger_gets_a_scrubbed_json_line() -> None:
    """``logging.error`` on the root logger (what the client does) installs no handler of its
    own once logging is configured: the record is a library.log line, redacted and escaped."""
    buf = io.StringIO()
    root = logging.getLogger()
    before = list(root.handlers)
    logconfig.configure(json_output=True, stream=buf)
    try:
        logging.error("exec: process returned 1. token=%s \x1b]0;PWN\x07", SECRET)
        added = [h for h in root.handlers if h not in before]
    finally:
        for handler in added:
            root.removeHandler(handler)
        logging.captureWarnings(False)
        logconfig.configure(json_output=True, stream=sys.stderr)
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
    text = buf.getvalue()
    assert SECRET not in text and "\x1b" not in text and "ERROR:root" not in text
    (line,) = [json.loads(x) for x in text.splitlines()]
    assert line["event"] == "library.log" and line["logger"] == "root"
    assert line["level"] == "error"
    assert line["message"] == "exec: process returned 1. token=<redacted> \x1b]0;PWN\x07"
    assert len(added) == 1  # ours, and no basicConfig StreamHandler beside it
