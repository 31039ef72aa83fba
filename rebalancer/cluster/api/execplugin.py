"""A kubeconfig's exec credential plugin, run under a deadline and a leash.

kubectl runs the command a kubeconfig user names under ``exec`` and reads an ``ExecCredential``
from its stdout (a bearer token, or a client certificate and key). rebalancer runs it itself,
never through the API client, because the client's runner has no bound of any kind (a plugin
that hangs hangs the run, one that floods fills memory) and logs a failing plugin's stderr raw
on the root logger. Here:

- the plugin runs in a process group of its own (a new session), with no stdin and
  ``spec.interactive: false`` (a relative command with a slash in it is found beside the
  kubeconfig, as kubectl finds it); SIGTERM and SIGINT wait while it starts, so that a stop
  never falls between its start and rebalancer knowing its pid; when it does not finish
  within the deadline (the connect timeout, ``--connect-timeout``), or when rebalancer is
  stopped while it runs (SIGTERM or SIGINT raise through the wait), the whole group is killed
  and waited for: nothing it started is left behind;
- its stdout is read up to :data:`MAX_OUTPUT_BYTES` (an ExecCredential is a few KB, a client
  certificate included); more kills it;
- its stderr is kept up to :data:`MAX_STDERR_BYTES` (the rest is read and dropped), logged line
  by line as ``exec.stderr`` and quoted in the error of a plugin that fails, redacted
  (:mod:`.redact`); the writers of log and error lines escape its control characters;
- whatever goes wrong is one :class:`ExecPluginError` (exit 3) naming the command.

Nothing here imports the API client: :mod:`.kubeclient` hands over the kubeconfig's ``exec``
mapping and takes back an :class:`ExecCredential`.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from rebalancer.cluster import logs
from rebalancer.cluster.api import errors, redact

MAX_OUTPUT_BYTES: Final = 4 * 1024**2
"""The most an exec plugin may print on stdout."""
MAX_STDERR_BYTES: Final = 64 * 1024
"""The part of a plugin's stderr that is kept (logged, quoted); the rest is read and dropped."""
MAX_STDERR_LINES: Final = 20
"""The most stderr lines of one plugin run that are logged."""
MAX_REASON_CHARS: Final = 1000
"""The longest stderr quoted in the error of a failing plugin."""
API_VERSIONS: Final = frozenset(
    {
        "client.authentication.k8s.io/v1",
        "client.authentication.k8s.io/v1beta1",
        "client.authentication.k8s.io/v1alpha1",
    }
)
_READ: Final = 65536


class ExecPluginError(errors.ClusterError):
    """An exec credential plugin failed, hung, or printed no usable credential (exit 3)."""


@dataclass(frozen=True, slots=True)
class ExecCredential:
    """What a plugin gave: a token, or a client certificate and key (PEM), and until when
    (seconds since the epoch; None: no expiry given)."""

    token: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    expires: float | None = None


@dataclass(frozen=True, slots=True)
class ExecPlugin:
    """One kubeconfig user's ``exec`` entry, checked; :meth:`run` runs it once."""

    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    api_version: str
    base_dir: str | None
    cluster: Mapping[str, Any] | None
    user: str
    install_hint: str = ""

    @classmethod
    def from_config(
        cls,
        entry: Mapping[str, Any],
        *,
        user: str,
        base_dir: str | None,
        cluster: Mapping[str, Any] | None = None,
    ) -> ExecPlugin:
        """The plugin of the kubeconfig user named ``user``; ``base_dir`` is the directory of
        the file that holds it (a relative command with a slash in it is found from there, as
        kubectl finds it). Raises :class:`ExecPluginError` naming the field that is wrong."""
        where = f"users[{user}].user.exec"
        if not isinstance(entry, Mapping):
            raise ExecPluginError(f"kubeconfig {where}: a mapping expected")
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise ExecPluginError(f"kubeconfig {where}.command: a command expected")
        api_version = entry.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise ExecPluginError(
                f"kubeconfig {where}.apiVersion: {api_version!r} is not one of "
                f"{', '.join(sorted(API_VERSIONS))}"
            )
        args = entry.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ExecPluginError(f"kubeconfig {where}.args: a list of strings expected")
        env = []
        for item in entry.get("env") or []:
            if (
                not isinstance(item, Mapping)
                or not isinstance(item.get("name"), str)
                or not isinstance(item.get("value"), str)
            ):
                raise ExecPluginError(f"kubeconfig {where}.env: name and value strings expected")
            env.append((item["name"], item["value"]))
        if entry.get("interactiveMode") == "Always":
            raise ExecPluginError(
                f"exec credential plugin failed: {command}: it needs a terminal "
                f"({where}.interactiveMode: Always), and rebalancer never has one"
            )
        provide = entry.get("provideClusterInfo") is True
        hint = entry.get("installHint")
        return cls(
            command=command,
            args=tuple(args),
            env=tuple(env),
            api_version=api_version,
            base_dir=base_dir or None,
            cluster=_cluster_info(cluster) if provide and cluster is not None else None,
            user=user,
            install_hint=hint if isinstance(hint, str) else "",
        )

    def exec_info(self) -> str:
        """``$KUBERNETES_EXEC_INFO``: what kubectl tells a plugin (never interactive)."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        return json.dumps(info)

    def run(self, timeout: float, *, max_output: int = MAX_OUTPUT_BYTES) -> ExecCredential:
        """Run the plugin once; its credential, or :class:`ExecPluginError`."""
        env = {**os.environ, **dict(self.env), "KUBERNETES_EXEC_INFO": self.exec_info()}
        # SIGTERM and SIGINT wait while the plugin starts: the signal handler raises, and
        # raised between the spawn and the pid being kept, it would leave the plugin running.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            try:
                child = _Child.spawn([self.command, *self.args], env, self.base_dir, previous)
            except OSError as exc:
                hint = " ".join(self.install_hint.split())[:MAX_REASON_CHARS]
                said = f" ({hint})" if hint else ""
                raise self._failed(f"cannot start it: {exc.strerror or exc}{said}") from exc
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a stop raises from here
                out, err = child.collect(timeout, max_output)
            except _Cut as cut:
                self._log_stderr(_stderr_text(cut.stderr), failed=True)
                raise self._failed(cut.reason) from None
            finally:
                if child.returncode is None:  # stopped while it ran (SIGTERM, SIGINT)
                    child.kill_group()
                child.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        stderr = _stderr_text(err)
        code = child.returncode
        self._log_stderr(stderr, failed=code != 0)
        if code != 0:
            child.kill_group()  # whatever a failed plugin left in its group goes with it
            said = f": {_quoted(stderr)}" if stderr.strip() else " and printed nothing on stderr"
            raise self._failed(f"exit {_exit_name(code or 0)}{said}")
        return self._credential(out)

    def _failed(self, reason: str) -> ExecPluginError:
        return ExecPluginError(f"exec credential plugin failed: {self.command}: {reason}")

    def _log_stderr(self, stderr: str, *, failed: bool) -> None:
        lines = [line for line in stderr.splitlines() if line.strip()]
        if not lines:
            return
        log = logs.get_logger("rebalancer.kube")
        emit = log.warning if failed else log.info
        for line in lines[:MAX_STDERR_LINES]:
            emit(logs.EXEC_STDERR, plugin=self.command, line=redact.redact(line))
        if len(lines) > MAX_STDERR_LINES:
            emit(logs.EXEC_STDERR, plugin=self.command, more_lines=len(lines) - MAX_STDERR_LINES)

    def _credential(self, out: bytes) -> ExecCredential:
        try:
            answer = json.loads(out)
        except ValueError:
            raise self._failed("its output is not an ExecCredential (not JSON)") from None
        if not isinstance(answer, dict):
            raise self._failed("its output is not an ExecCredential (not a JSON object)")
        if answer.get("kind") != "ExecCredential" or answer.get("apiVersion") != self.api_version:
            raise self._failed(
                f"its output is not an ExecCredential of {self.api_version} "
                f"(kind {str(answer.get('kind'))[:60]!r}, "
                f"apiVersion {str(answer.get('apiVersion'))[:80]!r})"
            )
        status = answer.get("status")
        if not isinstance(status, dict):
            raise self._failed("its ExecCredential has no status")
        expires = _expiry(status.get("expirationTimestamp"))
        if status.get("expirationTimestamp") is not None and expires is None:
            raise self._failed("status.expirationTimestamp is not an RFC 3339 time")
        token = status.get("token")
        if isinstance(token, str) and token.strip():
            redact.remember(token)
            return ExecCredential(token=token, expires=expires)
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if isinstance(cert, str) and isinstance(key, str) and cert and key:
            redact.remember(key)
            return ExecCredential(client_certificate=cert, client_key=key, expires=expires)
        if cert or key:
            raise self._failed(
                "status.clientCertificateData and status.clientKeyData must come together"
            )
        raise self._failed("its ExecCredential holds neither status.token nor a client certificate")


_CLUSTER_KEYS: Final = (
    "server",
    "tls-server-name",
    "insecure-skip-tls-verify",
    "certificate-authority-data",
    "proxy-url",
    "disable-compression",
)
_EXEC_EXTENSION: Final = "client.authentication.k8s.io/exec"


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """``spec.cluster`` for a plugin that asks for it (``provideClusterInfo``): the cluster's
    fields as kubectl passes them, and ``config`` from the cluster's extension named
    ``client.authentication.k8s.io/exec``."""
    info = {key: cluster[key] for key in _CLUSTER_KEYS if key in cluster}
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == _EXEC_EXTENSION:
            info["config"] = extension.get("extension")
            break
    return info


_STOP_SIGNALS: Final = frozenset({signal.SIGTERM, signal.SIGINT})


class _Cut(Exception):
    """The plugin was killed (its process group): why, and what it had printed on stderr."""

    def __init__(self, reason: str, stderr: list[bytes]) -> None:
        super().__init__(reason)
        self.reason = f"{reason}; killed with every process it started"
        self.stderr = b"".join(stderr)


@dataclass
class _Child:
    """A running plugin: its pid (also its process group's id), the read ends of its stdout
    and stderr, and its exit status once reaped (negative: the signal that ended it)."""

    pid: int
    stdout: int
    stderr: int
    returncode: int | None = None

    @classmethod
    def spawn(
        cls, argv: list[str], env: Mapping[str, str], base_dir: str | None, sigmask: Any
    ) -> _Child:
        """Start ``argv`` in a new session (its own process group) with stdin from /dev/null,
        stdout and stderr piped, and ``sigmask`` as its signal mask (the parent's, unblocked).
        A relative command with a slash is taken from ``base_dir`` (the kubeconfig's directory);
        the plugin runs in rebalancer's directory, as under kubectl."""
        command = argv[0]
        if base_dir and os.sep in command and not os.path.isabs(command):
            command = os.path.join(base_dir, command)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            pid = os.posix_spawnp(
                command,
                [command, *argv[1:]],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0),
                    (os.POSIX_SPAWN_DUP2, out_write, 1),
                    (os.POSIX_SPAWN_DUP2, err_write, 2),
                ],
                setsid=True,
                setsigmask=sigmask,
            )
        except BaseException:
            os.close(out_read)
            os.close(err_read)
            raise
        finally:
            for fd in (out_write, err_write, null):
                os.close(fd)
        return cls(pid, out_read, err_read)

    def reap(self, *, block: bool) -> bool:
        """Whether the plugin has exited (its status kept); ``block``: wait for it."""
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode is not None

    def kill_group(self) -> None:
        """SIGKILL the plugin's process group (itself and all it started but did not move to a
        group of their own), and reap the plugin."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.reap(block=True)

    def close(self) -> None:
        for fd in (self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                os.close(fd)

    def collect(self, timeout: float, max_output: int) -> tuple[bytes, bytes]:
        """stdout and stderr once both have ended and the plugin has exited. Raises
        :class:`_Cut` (the group killed) when ``timeout`` seconds pass first or stdout grows
        past ``max_output``."""
        deadline = time.monotonic() + timeout
        late = f"did not finish within {timeout:g}s (--connect-timeout)"
        out: list[bytes] = []
        err: list[bytes] = []
        sizes = {"out": 0, "err": 0}
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout, selectors.EVENT_READ, "out")
            selector.register(self.stderr, selectors.EVENT_READ, "err")
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill_group()
                    raise _Cut(late, err)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, _READ)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    sizes[key.data] += len(chunk)
                    if key.data == "out":
                        if sizes["out"] > max_output:
                            self.kill_group()
                            raise _Cut(f"its output exceeds {max_output} bytes", err)
                        out.append(chunk)
                    elif sizes["err"] - len(chunk) < MAX_STDERR_BYTES:
                        err.append(chunk)
        while not self.reap(block=False):  # both pipes closed: it has exited, or is about to
            if time.monotonic() >= deadline:
                self.kill_group()
                raise _Cut(late, err)
            time.sleep(0.01)
        return b"".join(out), b"".join(err)


def _stderr_text(data: bytes) -> str:
    return data[:MAX_STDERR_BYTES].decode("utf-8", errors="replace")


def _quoted(stderr: str) -> str:
    """The plugin's stderr as one line, cut to :data:`MAX_REASON_CHARS`, each of its lines
    redacted before they are joined (a value runs to the end of its own line, not the next's)."""
    text = " ".join(redact.redact(line.strip()) for line in stderr.splitlines() if line.strip())
    if len(text) > MAX_REASON_CHARS:
        text = text[:MAX_REASON_CHARS] + "..."
    return text


def _exit_name(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"by signal {signal.Signals(-code).name}"
        return f"by signal {-code}"
    return str(code)


def _expiry(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
