"""Credentials are trimmed as kubectl trims them and never printed: error lines, logs, --debug."""

from __future__ import annotations

import io
import json
import socket
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

from rebalancer.cli import errorline, logconfig
from rebalancer.cli.main import main
from rebalancer.cluster.api import errors, redact
from rebalancer.cluster.api.kubeclient import connect
from rebalancer.core.errors import EXIT_CLUSTER
from tests.fakes import RecordingServer, server

TOKEN = "SECRET-TOKEN-4242abcd"
EXEC_TOKEN = "SECRET-EXEC-9999zz"
PASSWORD = "SECRET-PASS-7777"


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    redact.forget_all()
    yield
    redact.forget_all()


def kubeconfig(tmp_path: Path, server_url: str, user: str) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f'clusters: [{{name: c, cluster: {{server: "{server_url}"}}}}]\n'
        f"users: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    return path


def token_file(tmp_path: Path, content: str) -> str:
    path = tmp_path / "token"
    path.write_text(content)
    return f"{{tokenFile: {path}}}"


def exec_plugin(tmp_path: Path, token_json: str) -> str:
    """An exec credential plugin printing ``token_json`` (a JSON string literal) as its token."""
    path = tmp_path / "plugin.py"
    body = (
        '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", '
        f'"status": {{"token": {token_json}}}}}'
    )
    path.write_text(f"#!{sys.executable}\nprint({body!r})\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return f"{{exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: {path}}}}}"


def sent_authorization(tmp_path: Path, user: str, requests: int = 1) -> list[str | None]:
    """The Authorization header a server on 127.0.0.1 received, request by request, from a
    kubeconfig with ``user``."""
    api = RecordingServer(200, b"{}")
    kube = connect(str(kubeconfig(tmp_path, api.endpoint.server, user)))
    try:
        for _ in range(requests):
            kube.request("GET", "/version")
    finally:
        kube.close()
    return [h.get("Authorization") for h in api.headers]


def header(tmp_path: Path, user: str) -> str | None:
    return sent_authorization(tmp_path, user)[0]


# -- trimming, as kubectl does ----------------------------------------------------------------


@pytest.mark.parametrize("content", [f"{TOKEN}\n", f"{TOKEN}\r\n", f"  {TOKEN}\n\n", TOKEN])
def test_a_token_file_is_trimmed(tmp_path: Path, content: str) -> None:
    """A tokenFile ending in a newline (what echo writes) sends the token alone."""
    assert header(tmp_path, token_file(tmp_path, content)) == f"Bearer {TOKEN}"


def test_an_exec_token_is_trimmed_now_and_after_each_refresh(tmp_path: Path) -> None:
    """An exec plugin's token ending in a newline is trimmed, also when the client refreshes."""
    user = exec_plugin(tmp_path, f'"{EXEC_TOKEN}\\n"')
    # each request runs the client's refresh hook, which re-sets the token
    assert sent_authorization(tmp_path, user, 3) == [f"Bearer {EXEC_TOKEN}"] * 3


@pytest.mark.parametrize("inner", ["A B", "A\nB", "A\x1bB"])
def test_a_token_no_header_can_carry_is_refused_without_printing_it(
    tmp_path: Path, inner: str
) -> None:
    """Whitespace or control characters inside a token: a cluster error that does not show it."""
    secret = f"SECRET-{inner}-123456"
    path = kubeconfig(tmp_path, "http://127.0.0.1:9", token_file(tmp_path, secret))
    with pytest.raises(errors.ClusterError) as caught:
        connect(str(path))
    assert "SECRET" not in str(caught.value)


# -- the CLI against a local server ------------------------------------------------------------


class Recorder:
    """Answers every request 403 with a Status message holding terminal escapes; records the
    Authorization header each request carried."""

    def __init__(self) -> None:
        self.auth: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, conn: socket.socket, stop: threading.Event) -> None:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        for line in data.split(b"\r\n"):
            if line.lower().startswith(b"authorization:"):
                with self.lock:
                    self.auth.append(line.split(b":", 1)[1].strip().decode())
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": "denied \x1b]0;PWNED\x07",
                "reason": "Forbidden",
                "code": 403,
            }
        ).encode()
        conn.sendall(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )


@pytest.mark.parametrize(
    "user",
    [
        pytest.param(lambda d: token_file(d, f"{TOKEN}\n"), id="tokenFile"),
        pytest.param(lambda d: exec_plugin(d, f'"{TOKEN}\\n"'), id="exec"),
    ],
)
def test_plan_with_a_newline_ended_token_reaches_the_server_and_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], user: Callable[[Path], str]
) -> None:
    """The trimmed token is sent; the 403's escapes are shown escaped; exit 3, not 4."""
    recorder = Recorder()
    with server(recorder) as port:
        path = kubeconfig(tmp_path, f"http://127.0.0.1:{port}", user(tmp_path))
        code = main(["plan", "--kubeconfig", str(path)])
    out, err = capsys.readouterr()
    assert code == EXIT_CLUSTER, err
    assert recorder.auth and set(recorder.auth) == {f"Bearer {TOKEN}"}
    assert "SECRET" not in out + err
    assert "\x1b" not in err and "\x07" not in err
    assert "denied \\u001b]0;PWNED\\u0007" in err


def test_userinfo_in_the_server_url_is_not_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """server: http://admin:SECRET@host appears as http://<redacted>@host in the error line."""
    with server(lambda conn, stop: conn.close()) as port:
        url = f"http://admin:{PASSWORD}@127.0.0.1:{port}"
        path = kubeconfig(tmp_path, url, "{token: plain-token-value-123456}")
        code = main(["plan", "--kubeconfig", str(path)])
    _, err = capsys.readouterr()
    assert code == EXIT_CLUSTER, err
    assert "SECRET" not in err and "admin" not in err
    assert f"http://<redacted>@127.0.0.1:{port}" in err


# -- the one place lines are formatted ------------------------------------------------------------


@pytest.mark.parametrize("json_output", [True, False])
def test_log_lines_are_redacted_and_printable(json_output: bool) -> None:
    """request.slow's server URL, a bearer header and escapes: redacted and escaped, and a
    JSON line is still JSON that decodes to the original value."""
    buf = io.StringIO()
    logconfig.configure(json_output=json_output, stream=buf)
    try:
        structlog.get_logger("t").warning(
            "request.slow",
            server=f"http://admin:{PASSWORD}@127.0.0.1:1",
            header=f"Authorization: Bearer {TOKEN}",
            detail="denied \x1b]0;PWNED\x07 \x9b31m \x7f",
        )
    finally:
        logconfig.configure(json_output=True, stream=sys.stderr)
    text = buf.getvalue()
    assert "SECRET" not in text
    assert not any(c in text for c in "\x1b\x07\x9b\x7f")
    if json_output:
        line = json.loads(text)
        assert line["server"] == "http://<redacted>@127.0.0.1:1"
        # Escaped the JSON way: a JSON reader gets the value back as it was.
        assert line["detail"] == "denied \x1b]0;PWNED\x07 \x9b31m \x7f"
    else:
        assert "PWNED" in text and "Authorization: Bearer <redacted>" in text


def test_debug_traceback_is_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """--debug prints the traceback through the same scrub as the error line."""
    try:
        raise ValueError(f"Invalid header value b'Bearer {TOKEN}\\n'")
    except ValueError:
        errorline.say_traceback()
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError" in err
    assert "SECRET" not in err
    assert "Bearer <redacted>" in err


def test_remembered_credentials_are_redacted_whatever_surrounds_them(tmp_path: Path) -> None:
    """Once loaded, the token is redacted even where no pattern would see a credential."""
    header(tmp_path, token_file(tmp_path, "abcdefghijkl\n"))
    assert redact.redact("echo=abcdefghijkl;") == "echo=<redacted>;"


# Hand-written: each line as an error or a log would carry it, and what may be shown.
REDACTIONS = [
    ("Invalid header value b'Bearer SECRET-1\\n'", "Invalid header value b'Bearer <redacted>'"),
    (
        "cannot reach http://admin:SECRET@h:1 (GET /x)",
        "cannot reach http://<redacted>@h:1 (GET /x)",
    ),
    ("proxy https://u@p.example:3128", "proxy https://<redacted>@p.example:3128"),
    ("Authorization: Bearer a.b.c-SECRET", "Authorization: Bearer <redacted>"),
    ("authorization=SECRETVALUE", "authorization=<redacted>"),
    ("Basic YWRtaW46U0VDUkVU", "Basic <redacted>"),
    ('{"password": "SECRET"}', '{"password": "<redacted>"}'),
    ("client-key-data: LS0tSECRET", "client-key-data: <redacted>"),
    ('"token":"SECRET"', '"token":"<redacted>"'),
    ("x -----BEGIN EC PRIVATE KEY-----\nSECRET\n-----END EC PRIVATE KEY----- y", "x <redacted> y"),
    ("no bearer token in the kubeconfig", "no bearer token in the kubeconfig"),
    ("tokenFile: /var/run/token", "tokenFile: /var/run/token"),
    ("https://example.com/a@b", "https://example.com/a@b"),
]


@pytest.mark.parametrize(("text", "shown"), REDACTIONS)
def test_redaction_patterns(text: str, shown: str) -> None:
    """Credentials in their usual shapes are replaced; ordinary text is left alone."""
    assert redact.redact(text) == shown
