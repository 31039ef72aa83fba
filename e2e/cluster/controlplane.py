"""A real Kubernetes control plane as local processes on 127.0.0.1, for e2e tests.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are the real
binaries (built by ``e2e/cluster/build.sh`` from Go modules); kwok plays the
kubelets of fake nodes. Everything listens on 127.0.0.1 on free ports, so two
runs never clash, and lives in one temporary run directory (certificates,
kubeconfigs, etcd data, audit log, one log file per component).

Only the standard library is used (plus the ``openssl`` and ``flock`` CLIs).

    from e2e.cluster.controlplane import ControlPlane, build
    with ControlPlane(build()) as cp:
        cp.kubectl("get", "nodes")
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
BUILD_SH = HERE / "build.sh"
KWOK_STAGES = HERE / "kwok" / "stages.yaml"

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"  # allocation only: no traffic goes to service IPs
FIRST_SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.0/16"  # kwok writes these into pod status; nothing connects to them
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"
DEFAULT_ZONES = ("zone-a", "zone-b", "zone-c")

T = TypeVar("T")


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or queried."""


class KubectlError(subprocess.CalledProcessError):
    """kubectl exited non-zero; ``str()`` includes its stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstderr: {(self.stderr or '').strip()}"


# --------------------------------------------------------------------------- build


def run_build_script(
    script: Path, marker: str, *, quiet: bool = False, timeout: float = 3 * 3600
) -> Path:
    """Run a cached build script (a no-op when its cache is warm) and return the directory it
    names on its last ``MARKER=<dir>`` line; its output is shown on failure (always unless
    ``quiet``)."""
    proc = subprocess.run(
        ["bash", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    if not quiet or proc.returncode != 0:
        sys.stderr.write(proc.stdout)
    if proc.returncode != 0:
        raise ControlPlaneError(f"{script.name} failed (exit {proc.returncode}); output above")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(f"{marker}="):
            return Path(line.split("=", 1)[1])
    raise ControlPlaneError(f"{script.name} printed no {marker}= line")


def build(*, quiet: bool = False, timeout: float = 3 * 3600) -> Path:
    """Run build.sh (a no-op when the cache is warm) and return the bin dir (of the Kubernetes
    minor ``REBALANCER_E2E_K8S`` names, 1.35 by default)."""
    return run_build_script(BUILD_SH, "BIN_DIR", quiet=quiet, timeout=timeout)


def k8s_minor_of(bin_dir: Path) -> tuple[int, int]:
    """The Kubernetes (major, minor) build.sh built into ``bin_dir`` (from its VERSIONS file)."""
    for line in (bin_dir.parent / "VERSIONS").read_text(encoding="utf-8").splitlines():
        if line.startswith("k8s=v"):
            major, minor = line.removeprefix("k8s=v").split(".")[:2]
            return int(major), int(minor)
    raise ControlPlaneError(f"no k8s= line in {bin_dir.parent / 'VERSIONS'}")


def version_flags(
    component: str, minor: tuple[int, int], *, eviction_requests: bool | None = None
) -> list[str]:
    """Flags that differ by Kubernetes version. Every flag the control plane passes exists
    from 1.32 to 1.38; from 1.37 the workload API (GenericWorkload, beta, off by default) is
    turned on, so that pods can belong to a PodGroup (spec.schedulingGroup).

    ``eviction_requests`` (default: ``REBALANCER_E2E_EVICTION_REQUESTS=1``) also turns on the
    EvictionRequest API from 1.37 (KEP-4563: gate ``EvictionRequestAPI``, alpha, off by
    default, on kube-apiserver and kube-controller-manager, and the ``lifecycle.k8s.io/v1alpha1``
    group); off, the server serves none of it, as a release does by default."""
    if minor < (1, 37):
        return []
    if eviction_requests is None:
        eviction_requests = os.environ.get("REBALANCER_E2E_EVICTION_REQUESTS", "") not in ("", "0")
    gates = ["GenericWorkload=true"]
    groups = ["scheduling.k8s.io/v1beta1=true"]
    if eviction_requests and component in ("kube-apiserver", "kube-controller-manager"):
        gates.append("EvictionRequestAPI=true")
        groups.append("lifecycle.k8s.io/v1alpha1=true")
    flags = ["--feature-gates=" + ",".join(gates)]
    if component == "kube-apiserver":
        flags.append("--runtime-config=" + ",".join(groups))
    return flags


# --------------------------------------------------------------------------- helpers


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (held open together, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.25,
    on_poll: Callable[[], None] | None = None,
) -> T:
    """Poll ``probe`` until it returns a truthy value; bounded by ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        if on_poll is not None:
            on_poll()
        try:
            result = probe()
            if result:
                return result
        except Exception as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _pdeathsig() -> None:  # pragma: no cover - runs in the child before exec
    """Make the child die with its parent (Linux prctl PR_SET_PDEATHSIG)."""
    # Best effort: teardown kills the process group anyway.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def kubeconfig_dict(
    *,
    server: str,
    ca_file: Path,
    user: str,
    auth: dict[str, str],
    context: str = "rebalancer-e2e",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "rebalancer-e2e",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_file)},
            }
        ],
        "users": [{"name": user, "user": auth}],
        "contexts": [{"name": context, "context": {"cluster": "rebalancer-e2e", "user": user}}],
        "current-context": context,
    }


def write_json(path: Path, obj: Any, mode: int = 0o600) -> Path:
    path.write_text(json.dumps(obj, indent=2) + "\n")
    path.chmod(mode)
    return path


# --------------------------------------------------------------------------- PKI


class _Pki:
    """A throw-away CA and the certificates the control plane needs (openssl CLI)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_key = self.dir / "ca.key"
        self.ca_crt = self.dir / "ca.crt"
        self.sa_key = self.dir / "sa.key"
        self.sa_pub = self.dir / "sa.pub"

    def _openssl(self, *args: str) -> None:
        proc = subprocess.run(
            ["openssl", *args], capture_output=True, text=True, timeout=60, check=False
        )
        if proc.returncode != 0:
            raise ControlPlaneError(f"openssl {' '.join(args)} failed: {proc.stderr.strip()}")

    def _key(self, path: Path) -> None:
        self._openssl(
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)
        )
        path.chmod(0o600)

    def create(self) -> None:
        self._key(self.ca_key)
        self._openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            str(self.ca_key),
            "-sha256",
            "-days",
            "2",
            "-subj",
            "/CN=rebalancer-e2e-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            "-out",
            str(self.ca_crt),
        )
        # Service-account tokens: RSA (the apiserver signs with RS256).
        self._openssl(
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            str(self.sa_key),
        )
        self.sa_key.chmod(0o600)
        self._openssl("pkey", "-in", str(self.sa_key), "-pubout", "-out", str(self.sa_pub))

    def issue(
        self, name: str, subject: str, *, server_sans: Sequence[str] = ()
    ) -> tuple[Path, Path]:
        """Issue a client (or, with SANs, a serving) certificate; return (crt, key)."""
        key, csr, crt = (self.dir / f"{name}.{ext}" for ext in ("key", "csr", "crt"))
        ext = self.dir / f"{name}.ext"
        self._key(key)
        self._openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
        lines = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
        ]
        if server_sans:
            lines += [
                "extendedKeyUsage=serverAuth,clientAuth",
                "subjectAltName=" + ",".join(server_sans),
            ]
        else:
            lines.append("extendedKeyUsage=clientAuth")
        ext.write_text("\n".join(lines) + "\n")
        self._openssl(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(self.ca_crt),
            "-CAkey",
            str(self.ca_key),
            "-CAcreateserial",
            "-sha256",
            "-days",
            "2",
            "-extfile",
            str(ext),
            "-out",
            str(crt),
        )
        csr.unlink()
        ext.unlink()
        return crt, key


# --------------------------------------------------------------------------- audit policy

#: Request level (request bodies) for what a descheduler does to pods, evictions and PDBs;
#: no reads/watches of system components, no leases/events/status churn; Metadata otherwise.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "None",
            "nonResourceURLs": [
                "/healthz*",
                "/readyz*",
                "/livez*",
                "/version",
                "/openapi*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/metrics",
            ],
        },
        {"level": "None", "verbs": ["watch"]},
        {"level": "None", "users": ["system:apiserver"]},  # bootstrap RBAC/APF churn
        # rebalancer's own Lease (one rebalancer evicting at a time), with its request bodies:
        # who held it, and which evictions each holder recorded.
        {
            "level": "Request",
            "verbs": ["create", "update", "patch", "delete"],
            "namespaces": ["rebalancer"],
            "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}],
        },
        {
            "level": "None",
            "resources": [
                {"group": "coordination.k8s.io", "resources": ["leases"]},
                {"group": "", "resources": ["events"]},
                {"group": "events.k8s.io", "resources": ["events"]},
                {"group": "", "resources": ["nodes/status", "pods/status"]},
            ],
        },
        # (users and userGroups in one rule are ANDed, hence two rules)
        {
            "level": "None",
            "verbs": ["get", "list"],
            "users": ["system:kube-controller-manager", "system:kube-scheduler", "kwok"],
        },
        {
            "level": "None",
            "verbs": ["get", "list"],
            "userGroups": ["system:serviceaccounts:kube-system", "system:nodes"],
        },
        {
            "level": "Request",
            "resources": [
                {"group": "", "resources": ["pods", "pods/eviction"]},
                {"group": "policy", "resources": ["poddisruptionbudgets"]},
            ],
        },
        {"level": "Metadata"},
    ],
}


# --------------------------------------------------------------------------- clusters

# kubectl -v=6 response lines: klog structured ("Response" verb="POST" url="..." status="201
# Created") or the older text form ("POST https://... 201 Created in 5 milliseconds").
_STATUS_RE = re.compile(r'verb="POST" url="[^"]*" status="(\d{3})|POST https?://\S+ (\d{3}) ')


@dataclass(frozen=True)
class EvictionResult:
    code: int  # HTTP status: 201 evicted, 429 blocked by a PDB, 404 no such pod, ...
    stdout: str
    stderr: str


@dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class Cluster:
    """Helpers shared by our own control plane and an existing cluster (e.g. kind)."""

    kubeconfig: Path
    server: str
    run_dir: Path
    kubectl_bin: str = "kubectl"
    audit_log: Path | None = None
    startup_seconds: float = 0.0
    startup_phases: dict[str, float] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    #: Only kubeconfigs whose server equals this are accepted by assert_own_cluster.
    allowed_server: str = ""

    # ---- kubectl -------------------------------------------------------------------
    def kubectl(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        timeout: float = 90,
        kubeconfig: Path | str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster; raise KubectlError if check."""
        kc = Path(kubeconfig) if kubeconfig else self.kubeconfig
        argv = [self.kubectl_bin, f"--kubeconfig={kc}", "--request-timeout=60s", *args]
        proc = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc

    def get_json(self, *args: str, **kw: Any) -> Any:
        """``kubectl get ARGS -o json`` parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json", **kw).stdout)

    def apply(self, obj: dict[str, Any] | list[dict[str, Any]], *extra: str) -> None:
        """Server-side-free ``kubectl apply -f -`` of one object or a list of objects."""
        doc = obj if isinstance(obj, dict) else {"apiVersion": "v1", "kind": "List", "items": obj}
        self.kubectl("apply", "-f", "-", *extra, input=json.dumps(doc))

    def create_raw(
        self, path: str, body: dict[str, Any], **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """POST ``body`` to an API path (``kubectl create --raw``); check=False by default."""
        kw.setdefault("check", False)
        return self.kubectl("create", "--raw", path, "-f", "-", input=json.dumps(body), **kw)

    def evict(
        self,
        namespace: str,
        pod: str,
        grace_period_seconds: int | None = None,
        *,
        kubeconfig: Path | str | None = None,
    ) -> EvictionResult:
        """POST a policy/v1 Eviction (``kubectl create --raw``); returns the HTTP status code."""
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        }
        if grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction"
        # -v=6 makes kubectl log the response status line on stderr.
        proc = self.kubectl(
            "-v=6",
            "create",
            "--raw",
            path,
            "-f",
            "-",
            input=json.dumps(body),
            check=False,
            kubeconfig=kubeconfig,
        )
        codes = [
            int(m.group(1) or m.group(2))
            for m in _STATUS_RE.finditer(proc.stderr)
            if "eviction" in m.group(0)
        ]
        if not codes:
            raise ControlPlaneError(
                f"no HTTP status for POST {path} in kubectl output:\n{proc.stderr[-2000:]}"
            )
        return EvictionResult(code=codes[-1], stdout=proc.stdout, stderr=proc.stderr)

    # ---- safety ----------------------------------------------------------------------
    def server_of(self, kubeconfig: Path | str) -> str:
        """The server URL of a kubeconfig's current context."""
        proc = self.kubectl(
            "config",
            "view",
            "--minify",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
            kubeconfig=kubeconfig,
        )
        return proc.stdout.strip()

    def assert_own_cluster(self, kubeconfig: Path | str | None = None) -> str:
        """Refuse any kubeconfig that does not point at this cluster; return its server."""
        server = self.server_of(kubeconfig or self.kubeconfig)
        if not self.allowed_server or server.rstrip("/") != self.allowed_server.rstrip("/"):
            raise ControlPlaneError(
                f"refusing kubeconfig {kubeconfig}: server {server!r} is not this test "
                f"cluster ({self.allowed_server!r})"
            )
        return server

    # ---- credentials -----------------------------------------------------------------
    def _ca_file(self) -> Path:
        ca = self.run_dir / "kubeconfig-ca.crt"
        if not ca.exists():
            data = self.kubectl(
                "config",
                "view",
                "--minify",
                "--raw",
                "-o",
                "jsonpath={.clusters[0].cluster.certificate-authority-data}",
            ).stdout
            if data.strip():
                ca.write_bytes(base64.b64decode(data.strip()))
            else:
                path = self.kubectl(
                    "config",
                    "view",
                    "--minify",
                    "--raw",
                    "-o",
                    "jsonpath={.clusters[0].cluster.certificate-authority}",
                ).stdout
                shutil.copyfile(path.strip(), ca)
        return ca

    def token_kubeconfig(
        self,
        namespace: str,
        service_account: str,
        *,
        duration: str = "2h",
        path: Path | None = None,
    ) -> Path:
        """A kubeconfig that authenticates as a ServiceAccount (``kubectl create token``)."""
        token = self.kubectl(
            "create", "token", service_account, "-n", namespace, f"--duration={duration}"
        ).stdout.strip()
        user = f"system:serviceaccount:{namespace}:{service_account}"
        path = path or self.run_dir / f"kubeconfig-sa-{namespace}-{service_account}"
        return write_json(
            path,
            kubeconfig_dict(
                server=self.server, ca_file=self._ca_file(), user=user, auth={"token": token}
            ),
        )

    def impersonation_kubeconfig(
        self, user: str, groups: Iterable[str] = (), *, path: Path | None = None
    ) -> Path:
        """A copy of the admin kubeconfig that impersonates ``user`` (and ``groups``)."""
        raw = json.loads(self.kubectl("config", "view", "--minify", "--raw", "-o", "json").stdout)
        auth = raw["users"][0]["user"]
        auth["as"] = user
        groups = list(groups)
        if groups:
            auth["as-groups"] = groups
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", user)
        path = path or self.run_dir / f"kubeconfig-as-{safe}"
        return write_json(path, raw)

    # ---- waiting ---------------------------------------------------------------------
    def wait_for(
        self,
        what: str,
        probe: Callable[[], T | None],
        *,
        timeout: float = 60,
        interval: float = 0.5,
    ) -> T:
        return wait_for(what, probe, timeout=timeout, interval=interval)

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["pods", "-n", namespace]
        if selector:
            args += ["-l", selector]
        items: list[dict[str, Any]] = self.get_json(*args)["items"]
        return items

    def wait_pods_running(
        self, namespace: str, selector: str, count: int, *, timeout: float = 120
    ) -> list[dict[str, Any]]:
        """Wait until exactly ``count`` non-terminating pods are Running and Ready."""

        def probe() -> list[dict[str, Any]] | None:
            pods = [
                p
                for p in self.pods(namespace, selector)
                if not p["metadata"].get("deletionTimestamp")
            ]
            ready = [
                p
                for p in pods
                if p["status"].get("phase") == "Running"
                and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in p["status"].get("conditions", [])
                )
            ]
            return ready if len(pods) == count and len(ready) == count else None

        return self.wait_for(
            f"{count} running pods {selector!r} in {namespace}", probe, timeout=timeout
        )

    def node_ready(self, name: str) -> bool:
        node = self.get_json("node", name)
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in node["status"].get("conditions", [])
        )

    # ---- capabilities that need our own control plane --------------------------------
    def audit_events(self) -> list[dict[str, Any]]:
        raise NotImplementedError("audit log is only available on the local control plane")

    def set_node_ready(self, name: str, ready: bool, *, timeout: float = 60) -> None:
        raise NotImplementedError("node heartbeats are only controllable with kwok")


class ControlPlane(Cluster):
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on 127.0.0.1."""

    def __init__(
        self,
        bin_dir: Path | str,
        *,
        run_dir: Path | str | None = None,
        keep: bool = False,
        node_count: int = 6,
        zones: Sequence[str] = DEFAULT_ZONES,
        node_allocatable: dict[str, str] | None = None,
        verbosity: int | None = None,
        start_timeout: float = 180,
        api_address: str = LOOPBACK,
    ) -> None:
        self.bin_dir = Path(bin_dir)
        self.k8s_minor = k8s_minor_of(self.bin_dir)
        rd = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="rebalancer-e2e-"))
        rd.mkdir(parents=True, exist_ok=True)
        super().__init__(
            kubeconfig=rd / "kubeconfig",
            server="",
            run_dir=rd,
            kubectl_bin=str(self.bin_dir / "kubectl"),
            audit_log=rd / "audit" / "audit.log",
        )
        self.keep = keep or os.environ.get("REBALANCER_E2E_KEEP", "") not in ("", "0")
        self.node_count = node_count
        self.zones = tuple(zones)
        self.node_allocatable = node_allocatable or {"cpu": "4", "memory": "16Gi", "pods": "110"}
        self.verbosity = int(os.environ.get("REBALANCER_E2E_VERBOSITY", verbosity or 1))
        self.start_timeout = start_timeout
        #: kube-apiserver's bind and advertise address. 127.0.0.1 (the default) serves
        #: host processes only; pods on real nodes need an address they can be routed to
        #: (an extra address on lo, see realnodes.py), and then the Service ``kubernetes``
        #: gets real endpoints.
        self.api_address = api_address
        self.components: list[Component] = []
        self.ports: dict[str, int] = {}
        self._stopped = False

    # ---- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        for b in (
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kubectl",
            "kwok",
        ):
            if not os.access(self.bin_dir / b, os.X_OK):
                raise ControlPlaneError(
                    f"missing binary {self.bin_dir / b}: run e2e/cluster/build.sh"
                )
        t0 = time.monotonic()
        phase_t = t0

        def phase(name: str) -> None:
            nonlocal phase_t
            now = time.monotonic()
            self.startup_phases[name] = round(now - phase_t, 2)
            phase_t = now

        try:
            (self.run_dir / "logs").mkdir(exist_ok=True)
            (self.run_dir / "audit").mkdir(exist_ok=True)
            names = [
                "etcd-client",
                "etcd-peer",
                "apiserver",
                "controller-manager",
                "scheduler",
                "kwok",
            ]
            self.ports = dict(zip(names, free_ports(len(names)), strict=True))
            self.server = f"https://{self.api_address}:{self.ports['apiserver']}"
            self.allowed_server = self.server
            self._write_config()
            phase("pki+config")
            self._start_etcd()
            phase("etcd")
            self._start_apiserver()
            phase("kube-apiserver")
            self._start_controllers()
            self._wait_default_service_account()
            phase("controllers+default-sa")
            self.create_nodes()
            phase("nodes-ready")
        except BaseException:
            self.keep = True  # leave logs for diagnosis
            sys.stderr.write(self.diagnostics())
            self.stop()
            raise
        self.startup_seconds = round(time.monotonic() - t0, 2)
        return self

    def stop(self) -> None:
        """Kill every component (its whole process group); remove run_dir unless kept."""
        if self._stopped:
            return
        self._stopped = True
        for comp in reversed(self.components):
            self._kill(comp)
        if self.keep:
            sys.stderr.write(f"rebalancer-e2e: kept run dir {self.run_dir}\n")
        else:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    @staticmethod
    def _kill(comp: Component, grace: float = 10) -> None:
        proc = comp.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    # ---- faults -----------------------------------------------------------------------
    def component(self, name: str) -> Component:
        for comp in self.components:
            if comp.name == name:
                return comp
        raise ControlPlaneError(f"no component {name}")

    def signal_apiserver(self, sig: signal.Signals) -> None:
        """Send ``sig`` to kube-apiserver (SIGSTOP freezes it: connections stay open, silent)."""
        proc = self.component("kube-apiserver").proc
        assert proc is not None
        os.kill(proc.pid, sig)

    def kill_apiserver(self) -> None:
        """kill -9 kube-apiserver (etcd and everything else keep running)."""
        comp = self.component("kube-apiserver")
        proc = comp.proc
        assert proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def restart_apiserver(self, *, timeout: float | None = None) -> None:
        """Start kube-apiserver again with the same flags on the same etcd; wait for /readyz."""
        comp = self.component("kube-apiserver")
        if comp.alive():
            self.kill_apiserver()
        with open(comp.log, "ab") as fh:
            fh.write(b"+ restart\n")
            fh.flush()
            comp.proc = subprocess.Popen(
                comp.argv,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=self.run_dir,
                start_new_session=True,
                preexec_fn=_pdeathsig,  # noqa: PLW1509 - prctl only, spawned from one thread
                env={**os.environ, "GOMAXPROCS": os.environ.get("GOMAXPROCS", "2")},
            )
        self._wait_apiserver_ready(timeout)

    def check_alive(self) -> None:
        """Raise if any component has exited."""
        for comp in self.components:
            if not comp.alive():
                rc = comp.proc.returncode if comp.proc else None
                raise ControlPlaneError(
                    f"{comp.name} exited (rc={rc}); log {comp.log}:\n{comp.log_tail()}"
                )

    def diagnostics(self) -> str:
        out = [f"rebalancer-e2e run dir: {self.run_dir}"]
        for comp in self.components:
            state = (
                "running"
                if comp.alive()
                else f"exited rc={comp.proc.returncode if comp.proc else None}"
            )
            out.append(f"--- {comp.name} ({state}) {comp.log}\n{comp.log_tail(20)}")
        return "\n".join(out) + "\n"

    # ---- config ----------------------------------------------------------------------
    def _write_config(self) -> None:
        pki = self.pki = _Pki(self.run_dir / "pki")
        pki.create()
        sans = [
            f"IP:{LOOPBACK}",
            f"IP:{FIRST_SERVICE_IP}",
            *([f"IP:{self.api_address}"] if self.api_address != LOOPBACK else []),
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
        self.apiserver_crt, self.apiserver_key = pki.issue(
            "apiserver", "/CN=kube-apiserver", server_sans=sans
        )
        clients = {
            # name: (subject, kubeconfig file)
            "admin": ("/O=system:masters/CN=rebalancer-e2e-admin", self.kubeconfig),
            "controller-manager": (
                "/CN=system:kube-controller-manager",
                self.run_dir / "controller-manager.kubeconfig",
            ),
            "scheduler": ("/CN=system:kube-scheduler", self.run_dir / "scheduler.kubeconfig"),
            # kwok plays every kubelet and deletes pods: simplest as a cluster admin.
            "kwok": ("/O=system:masters/CN=kwok", self.run_dir / "kwok.kubeconfig"),
        }
        self.client_certs: dict[str, tuple[Path, Path]] = {}
        for name, (subject, kc) in clients.items():
            crt, key = pki.issue(name, subject)
            self.client_certs[name] = (crt, key)
            user = subject.rsplit("CN=", 1)[1]
            write_json(
                kc,
                kubeconfig_dict(
                    server=self.server,
                    ca_file=pki.ca_crt,
                    user=user,
                    auth={"client-certificate-data": _b64(crt), "client-key-data": _b64(key)},
                ),
            )
        # kube-apiserver's client certificate towards kubelets (no kubeconfig).
        self.client_certs["apiserver-kubelet"] = pki.issue(
            "apiserver-kubelet", "/O=system:masters/CN=kube-apiserver-kubelet-client"
        )
        self.audit_policy = write_json(self.run_dir / "audit-policy.json", AUDIT_POLICY)

    # ---- processes -------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Component:
        log = self.run_dir / "logs" / f"{name}.log"
        comp = Component(name=name, argv=argv, log=log)
        with open(log, "ab") as fh:
            fh.write(("+ " + " ".join(argv) + "\n").encode())
            fh.flush()
            comp.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=self.run_dir,
                start_new_session=True,
                preexec_fn=_pdeathsig,  # noqa: PLW1509 - prctl only, spawned from one thread
                env={
                    **os.environ,
                    "GOMAXPROCS": os.environ.get("GOMAXPROCS", "2"),
                    **(env or {}),
                },
            )
        self.components.append(comp)
        return comp

    def _wait(self, what: str, probe: Callable[[], Any], timeout: float | None = None) -> Any:
        return wait_for(
            what,
            probe,
            timeout=timeout or self.start_timeout,
            interval=0.2,
            on_poll=self.check_alive,
        )

    def _start_etcd(self) -> None:
        client = f"http://{LOOPBACK}:{self.ports['etcd-client']}"
        peer = f"http://{LOOPBACK}:{self.ports['etcd-peer']}"
        self.etcd_url = client
        self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=n0",
                f"--data-dir={self.run_dir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=n0={peer}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync",
                "--log-level=warn",
                "--quota-backend-bytes=2147483648",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client}/health", timeout=2) as r:
                return bool(json.load(r).get("health") == "true")

        self._wait("etcd /health", healthy)

    def _admin_ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_crt))
        crt, key = self.client_certs["admin"]
        ctx.load_cert_chain(str(crt), str(key))
        return ctx

    def _start_apiserver(self) -> None:
        pki = self.pki
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={self.api_address}",
                f"--advertise-address={self.api_address}",
                f"--secure-port={self.ports['apiserver']}",
                f"--cert-dir={self.run_dir / 'apiserver-certs'}",
                f"--tls-cert-file={self.apiserver_crt}",
                f"--tls-private-key-file={self.apiserver_key}",
                f"--client-ca-file={pki.ca_crt}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                # Endpoints reject loopback IPs; a non-loopback address gets real ones.
                *(["--endpoint-reconciler-type=none"] if self.api_address == LOOPBACK else []),
                # `kubectl logs`/exec on real kubelets: their InternalIP, our client cert.
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={self.client_certs['apiserver-kubelet'][0]}",
                f"--kubelet-client-key={self.client_certs['apiserver-kubelet'][1]}",
                "--allow-privileged=true",
                "--profiling=false",
                f"--audit-policy-file={self.audit_policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-maxsize=100",
                "--audit-log-maxbackup=1",
                *version_flags("kube-apiserver", self.k8s_minor),
                f"--v={self.verbosity}",
            ],
        )
        self._wait_apiserver_ready()

    def _wait_apiserver_ready(self, timeout: float | None = None) -> None:
        ctx = self._admin_ssl()

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{self.server}/readyz", context=ctx, timeout=5) as r:
                    return bool(r.status == 200)
            except urllib.error.HTTPError:
                return False

        self._wait("kube-apiserver /readyz", ready, timeout)

    def _start_controllers(self) -> None:
        pki = self.pki
        cm_kc = self.run_dir / "controller-manager.kubeconfig"
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={cm_kc}",
                f"--authentication-kubeconfig={cm_kc}",
                f"--authorization-kubeconfig={cm_kc}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={self.ports['controller-manager']}",
                f"--cert-dir={self.run_dir / 'controller-manager-certs'}",
                "--leader-elect=false",
                "--controllers=*",
                f"--root-ca-file={pki.ca_crt}",
                f"--service-account-private-key-file={pki.sa_key}",
                "--use-service-account-credentials=true",
                f"--cluster-signing-cert-file={pki.ca_crt}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--profiling=false",
                *version_flags("kube-controller-manager", self.k8s_minor),
                f"--v={self.verbosity}",
            ],
        )
        sc_kc = self.run_dir / "scheduler.kubeconfig"
        self._spawn(
            "kube-scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                f"--kubeconfig={sc_kc}",
                f"--authentication-kubeconfig={sc_kc}",
                f"--authorization-kubeconfig={sc_kc}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={self.ports['scheduler']}",
                f"--cert-dir={self.run_dir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--profiling=false",
                *version_flags("kube-scheduler", self.k8s_minor),
                f"--v={self.verbosity}",
            ],
        )
        self._spawn(
            "kwok",
            [
                str(self.bin_dir / "kwok"),
                f"--kubeconfig={self.run_dir / 'kwok.kubeconfig'}",
                f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
                f"--node-ip={LOOPBACK}",
                f"--cidr={POD_CIDR}",
                "--node-lease-duration-seconds=40",
                f"--server-address={LOOPBACK}:{self.ports['kwok']}",
                f"--v={'DEBUG' if self.verbosity >= 4 else 'INFO'}",
            ],
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        for name, port in (
            ("kube-controller-manager", self.ports["controller-manager"]),
            ("kube-scheduler", self.ports["scheduler"]),
        ):

            def healthy(port: int = port) -> bool:
                with urllib.request.urlopen(
                    f"https://{LOOPBACK}:{port}/healthz", context=insecure, timeout=5
                ) as r:
                    return bool(r.status == 200)

            self._wait(f"{name} /healthz", healthy)

        def kwok_healthy() -> bool:
            with urllib.request.urlopen(
                f"http://{LOOPBACK}:{self.ports['kwok']}/healthz", timeout=5
            ) as r:
                return bool(r.status == 200)

        self._wait("kwok /healthz", kwok_healthy)

    def _wait_default_service_account(self) -> None:
        def have_sa() -> bool:
            return (
                self.kubectl(
                    "get", "serviceaccount", "default", "-n", "default", check=False, timeout=20
                ).returncode
                == 0
            )

        self._wait("ServiceAccount default/default", have_sa)

    # ---- nodes -------------------------------------------------------------------------
    def node_manifest(
        self, name: str, zone: str, labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "type": "kwok",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "topology.kubernetes.io/zone": zone,
                    **(labels or {}),
                },
                "annotations": {
                    KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE,
                    "node.alpha.kubernetes.io/ttl": "0",
                },
            },
            "spec": {},
            "status": {
                "allocatable": dict(self.node_allocatable),
                "capacity": dict(self.node_allocatable),
            },
        }

    def create_nodes(self, count: int | None = None, *, timeout: float = 90) -> list[str]:
        """Create fake nodes round-robin over the zones (6 -> 2 per zone) and wait Ready."""
        count = self.node_count if count is None else count
        per_zone: dict[str, int] = {}
        manifests, names = [], []
        for i in range(count):
            zone = self.zones[i % len(self.zones)]
            idx = per_zone.get(zone, 0)
            per_zone[zone] = idx + 1
            name = f"kwok-{zone}-{idx}"
            names.append(name)
            manifests.append(self.node_manifest(name, zone))
        if manifests:
            self.apply(manifests)
            self._wait(
                "kwok nodes Ready", lambda: all(self.node_ready(n) for n in names), timeout=timeout
            )
        self.nodes = names
        return names

    def set_node_ready(self, name: str, ready: bool, *, timeout: float = 60) -> None:
        """Stop (ready=False) or resume kwok's heartbeat for a node.

        False: remove the kwok annotation (kwok stops managing the node and renewing its
        Lease) and patch the Ready condition to False at once, as a kubelet reporting
        NotReady would; the node-lifecycle controller then taints it
        node.kubernetes.io/not-ready. Pods on it stay as they are (no kubelet).
        True: put the annotation back; kwok re-initialises the node to Ready.
        """
        if ready:
            self.kubectl(
                "annotate",
                "node",
                name,
                "--overwrite",
                f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
            )
        else:
            self.kubectl("annotate", "node", name, f"{KWOK_NODE_ANNOTATION}-")
            now = _now_rfc3339()
            patch = {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "False",
                            "reason": "KwokHeartbeatStopped",
                            "message": "rebalancer e2e: kwok stopped managing this node",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ]
                }
            }
            self.kubectl(
                "patch",
                "node",
                name,
                "--subresource=status",
                "--type=strategic",
                "-p",
                json.dumps(patch),
            )
        want = ready
        self.wait_for(
            f"node {name} Ready={want}", lambda: self.node_ready(name) == want, timeout=timeout
        )

    # ---- audit -------------------------------------------------------------------------
    def audit_events(self) -> list[dict[str, Any]]:
        """All audit events so far (JSON lines), oldest first."""
        assert self.audit_log is not None
        events = []
        for path in (self.audit_log,):
            if not path.exists():
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                for raw in fh:
                    line = raw.strip()
                    if line:
                        with contextlib.suppress(json.JSONDecodeError):  # a line being written
                            events.append(json.loads(line))
        return events

    def iter_audit(self, **match: str) -> Iterator[dict[str, Any]]:
        """Audit events whose objectRef (or verb/stage/level) fields equal ``match``."""
        for ev in self.audit_events():
            ref = ev.get("objectRef", {})
            if all(
                (ev.get(k) if k in ("verb", "stage", "level") else ref.get(k)) == v
                for k, v in match.items()
            ):
                yield ev
