"""Real kubelet nodes next to the e2e control plane: containerd + kubelet per node.

Each node has its own containerd (root, state, sockets), kubelet (root dir, cert,
config), node IP (an extra address on lo: loopback itself is refused as a node IP),
CNI bridge and pod subnet, and cgroup root under every cgroup v1 controller. One
kube-proxy serves them all (the nodes share the host's network namespace, so one set
of Service rules is all there is), which lets pods reach kube-apiserver through the
``kubernetes`` Service: kube-apiserver then listens on an extra address on lo too.

Only one real-node cluster runs on a host at a time (a host-wide lock), because the
Service rules and the node addresses are host-wide. Teardown removes everything the
nodes added to the host: processes, mounts, iptables chains, bridges, lo addresses,
cgroups; :func:`host_state` snapshots those for a test to compare.

Facts behind the settings: shared/REAL-NODES.md (the sandbox lacks CAP_SYS_RESOURCE,
hence ``restrict_oom_score_adj``; cgroup v1 only, hence ``failCgroupV1: false``).

    with RealNodeCluster(build(), build_nodes(), real_nodes=3) as c:
        c.kubectl("get", "nodes")
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from e2e.image.pack import PAUSE_IMAGE, write_test_images

from .controlplane import (
    DEFAULT_ZONES,
    LOOPBACK,
    POD_CIDR,
    Component,
    ControlPlane,
    ControlPlaneError,
    _b64,
    free_ports,
    kubeconfig_dict,
    run_build_script,
    wait_for,
    write_json,
)

HERE = Path(__file__).resolve().parent
BUILD_NODES_SH = HERE / "build-nodes.sh"
BUILD_IMAGE_SH = HERE.parent / "image" / "build-rebalancer-image.sh"

#: Extra addresses on lo: kube-apiserver on .1, node i on .11+i.
ADDR_PREFIX = "172.30.0."
API_ADDRESS = ADDR_PREFIX + "1"
ADDR_CIDR = ADDR_PREFIX + "0/24"
BRIDGE_PREFIX = "rbe"  # CNI bridges rbe0, rbe1, ...
CGROUP_PREFIX = "rbe-"  # node cgroup roots /rbe-<node>
CGROUP_BASE = Path("/sys/fs/cgroup")
CGROUP_V1 = (
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "blkio",
    "pids",
    "systemd",
    "unified",
)
HOST_LOCK = Path("/run/lock/rebalancer-e2e-realnodes.lock")
IPTABLES = ("iptables", "ip6tables")
IPTABLES_TABLES = ("filter", "nat", "mangle", "raw")
#: Chains the kubelet, kube-proxy and the CNI plugins create; removed at teardown.
CHAIN_RE = re.compile(r"^(KUBE-|CNI-)")
KUBELET_PORT = 10250
NODE_BINS = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "testimage")
RUNC = "/usr/sbin/runc"
CNI_BIN_DIR = "/usr/lib/cni"


# --------------------------------------------------------------------------- build


def build_nodes(*, quiet: bool = False, timeout: float = 3 * 3600) -> Path:
    """Run build-nodes.sh (a no-op when cached) and return the nodes' bin dir."""
    return run_build_script(BUILD_NODES_SH, "NODES_BIN_DIR", quiet=quiet, timeout=timeout)


def build_rebalancer_image(*, timeout: float = 1800) -> tuple[str, Path]:
    """Build (or find cached) the rebalancer image from the Dockerfile: (reference, tarball)."""
    proc = subprocess.run(
        ["bash", str(BUILD_IMAGE_SH)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout)
        raise ControlPlaneError(f"build-rebalancer-image.sh failed (exit {proc.returncode})")
    found = dict(
        line.split("=", 1)
        for line in proc.stdout.splitlines()
        if line.startswith(("IMAGE_REF=", "IMAGE_TAR="))
    )
    return found["IMAGE_REF"], Path(found["IMAGE_TAR"])


def host_support() -> str | None:
    """None if this host can run real nodes, else the reason it cannot."""
    if os.geteuid() != 0:
        return "real nodes need root (containerd, kubelet, mounts, iptables)"
    if sys.platform != "linux":
        return "real nodes need Linux"
    missing = [c for c in CGROUP_V1[:8] if not (CGROUP_BASE / c / "cgroup.procs").exists()]
    if missing:
        return f"cgroup v1 controllers not mounted under {CGROUP_BASE}: {', '.join(missing)}"
    return None


# --------------------------------------------------------------------------- host state


def _run(*argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise ControlPlaneError(f"{shlex.join(argv)} failed: {proc.stderr.strip()}")
    return proc


def _lo_addresses() -> set[str]:
    out = _run("ip", "-o", "-4", "addr", "show", "dev", "lo").stdout
    return {m.group(1) for m in re.finditer(r"inet (\S+)", out)}


def _links() -> set[str]:
    out = _run("ip", "-o", "link", "show").stdout
    return {m.group(1).split("@")[0] for m in re.finditer(r"^\d+: ([^:]+):", out, re.M)}


def _chains() -> set[str]:
    """``tool/table/chain`` for every user-defined iptables chain (IPv4 and IPv6).

    Built-in chains (those with a policy) are left out: the first use of a table on an
    nftables-backed iptables creates them, and they hold no rule once the nodes are gone.
    """
    chains = set()
    for tool in IPTABLES:
        if shutil.which(f"{tool}-save") is None:
            continue
        for table in IPTABLES_TABLES:
            out = _run(f"{tool}-save", "-t", table, check=False).stdout
            chains |= {f"{tool}/{table}/{m}" for m in re.findall(r"^:(\S+) - ", out, re.M)}
    return chains


def _mounts() -> set[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return {line.split()[4] for line in fh}


def _cgroups() -> set[str]:
    out = set()
    for ctrl in CGROUP_V1:
        base = CGROUP_BASE / ctrl
        if base.is_dir():
            out |= {f"{ctrl}/{p.name}" for p in base.iterdir() if p.is_dir()}
    return out


def _processes(markers: Sequence[str]) -> set[str]:
    """``pid cmdline`` of processes whose command line or executable mentions a marker."""
    out = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        try:
            exe = os.readlink(d / "exe")
        except OSError:
            exe = ""
        if any(m in cmd or m in exe for m in markers):
            out.add(f"{d.name} {cmd.strip()}")
    return out


def host_state(markers: Sequence[str] = ()) -> dict[str, set[str]]:
    """What real nodes add to a host, to compare before and after a fixture."""
    state = {
        "lo_addresses": _lo_addresses(),
        "links": _links(),
        "iptables_chains": _chains(),
        "mounts": _mounts(),
        "cgroups": _cgroups(),
    }
    if markers:
        state["processes"] = _processes(markers)
    return state


def _remove_new_chains(before: set[str]) -> list[str]:
    """Delete chains matching CHAIN_RE that are not in ``before``, and jumps to them."""
    removed = []
    for tool in IPTABLES:
        if shutil.which(f"{tool}-save") is None:
            continue
        for table in IPTABLES_TABLES:
            dump = _run(f"{tool}-save", "-t", table, check=False).stdout
            new = {
                c
                for c in re.findall(r"^:(\S+)", dump, re.M)
                if CHAIN_RE.match(c) and f"{tool}/{table}/{c}" not in before
            }
            if not new:
                continue
            for line in dump.splitlines():
                if not line.startswith("-A "):
                    continue
                parts = shlex.split(line)
                chain = parts[1]
                target = parts[parts.index("-j") + 1] if "-j" in parts else ""
                if chain not in new and target in new:
                    _run(tool, "-w", "-t", table, "-D", *parts[1:], check=False)
            for chain in sorted(new):
                _run(tool, "-w", "-t", table, "-F", chain, check=False)
            for chain in sorted(new):
                _run(tool, "-w", "-t", table, "-X", chain, check=False)
                removed.append(f"{tool}/{table}/{chain}")
    return removed


def _rmdir_tree(path: Path) -> bool:
    """rmdir a cgroup directory bottom-up (cgroup files cannot be unlinked)."""
    if not path.is_dir():
        return True
    for child in path.iterdir():
        if child.is_dir():
            _rmdir_tree(child)
    for _ in range(20):
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.1)
    return False


def _umount_under(prefixes: Sequence[str]) -> list[str]:
    """Lazily unmount every mount point under one of ``prefixes``, deepest first."""
    done = []
    points = sorted(
        (m for m in _mounts() if any(m == p or m.startswith(p + "/") for p in prefixes)),
        key=lambda m: m.count("/"),
        reverse=True,
    )
    for m in points:
        if _run("umount", "-l", m, check=False).returncode == 0:
            done.append(m)
    return done


#: Command-line marks of a real-node process (kubelet, containerd, its shims, kube-proxy):
#: every one names a file under a run dir's nodes/ or the kube-proxy kubeconfig.
_STALE_PROCESS_RE = re.compile(r"/rebalancer-e2e-[^/ ]+/(nodes/|kube-proxy\.kubeconfig)")


CNI_CACHE = Path("/var/lib/cni/results")


def _our_cni_cache() -> dict[Path, str]:
    """CNI result cache files of our pods (network ``rbe-*`` or cgroup ``/rbe-*``) -> netns."""
    out: dict[Path, str] = {}
    if not CNI_CACHE.is_dir():
        return out
    for f in CNI_CACHE.iterdir():
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        cgroup = str((doc.get("capabilityArgs") or {}).get("cgroupPath", ""))
        if str(doc.get("networkName", "")).startswith("rbe-") or cgroup.startswith(
            f"/{CGROUP_PREFIX}"
        ):
            out[f] = str(doc.get("netns", ""))
    return out


def _remove_netns(paths: set[str]) -> list[str]:
    """Unmount and remove network namespaces (their veth pairs go with them)."""
    done = []
    for ns in sorted(p for p in paths if p):
        real = os.path.realpath(ns)
        if not real.startswith("/run/netns/"):
            continue
        _run("umount", "-l", real, check=False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(real)
            done.append(real)
    return done


def _cgroup_pids(root: Path) -> set[int]:
    pids: set[int] = set()
    if root.is_dir():
        for procs in root.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids |= {int(x) for x in procs.read_text().split()}
    return pids


def cleanup_stale() -> list[str]:
    """Remove what a crashed earlier run left (call with the host lock held, so no live
    real-node cluster exists on this host).

    Only our own names are touched: processes whose command line names a run dir's nodes/
    (kubelets, containerds, shims) or our kube-proxy kubeconfig, every process in a ``/rbe-*``
    cgroup (containers), mounts under a run dir's nodes/, ADDR_CIDR addresses on lo, ``rbe*``
    links, ``/rbe-*`` cgroups; and, only when one of those was found, KUBE-/CNI- chains.
    """
    done: list[str] = []
    victims = {
        int(p.split()[0])
        for p in _processes(["rebalancer-e2e-"])
        if _STALE_PROCESS_RE.search(p) and int(p.split()[0]) != os.getpid()
    }
    for ctrl in ("pids", "memory", "cpu"):
        for cg in (CGROUP_BASE / ctrl).glob(f"{CGROUP_PREFIX}*"):
            victims |= _cgroup_pids(cg)
    for pid in sorted(victims):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if victims:
        done.append(f"killed processes {sorted(victims)}")
        time.sleep(0.5)
    cache = _our_cni_cache()
    netns = _remove_netns(set(cache.values()))
    if netns:
        done.append(f"network namespaces {netns}")
    for f in cache:
        with contextlib.suppress(OSError):
            f.unlink()
    stale_mounts = [m for m in _mounts() if re.search(r"/rebalancer-e2e-[^/]+/nodes/", m)]
    for m in sorted(stale_mounts, key=lambda m: m.count("/"), reverse=True):
        _run("umount", "-l", m, check=False)
        done.append(f"mount {m}")
    for addr in _lo_addresses():
        if addr.startswith(ADDR_PREFIX):
            _run("ip", "addr", "del", addr, "dev", "lo", check=False)
            done.append(f"lo address {addr}")
    for link in _links():
        if re.fullmatch(rf"{BRIDGE_PREFIX}\d+", link):
            _run("ip", "link", "del", link, check=False)
            done.append(f"link {link}")
    for ctrl in CGROUP_V1:
        base = CGROUP_BASE / ctrl
        if base.is_dir():
            for p in base.glob(f"{CGROUP_PREFIX}*"):
                if _rmdir_tree(p):
                    done.append(f"cgroup {ctrl}/{p.name}")
    if done:
        removed = _remove_new_chains(set())
        if removed:
            done.append(f"iptables chains {removed}")
    return done


# --------------------------------------------------------------------------- nodes


DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
"""Host-wide: every kubelet listens here, whatever its root dir."""


def _socket_identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


def _new_listener(path: Path, before: tuple[int, int] | None) -> bool:
    """Whether a socket other than ``before`` is at ``path`` and accepts connections."""
    now = _socket_identity(path)
    if now is None or now == before:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


@dataclass
class RealNode:
    name: str
    zone: str
    index: int
    ip: str
    dir: Path
    subnet: str
    bridge: str
    cgroup_root: str
    healthz_port: int = 0
    containerd: Component | None = None
    kubelet: Component | None = None

    @property
    def containerd_sock(self) -> Path:
        return self.dir / "containerd.sock"

    @property
    def pod_logs_dir(self) -> Path:
        return self.dir / "pod-logs"


class RealNodeCluster(ControlPlane):
    """The e2e control plane plus ``real_nodes`` kubelets with containerd (and kwok nodes).

    kube-apiserver listens on API_ADDRESS (on lo) so that pods reach it through the
    ``kubernetes`` Service; the kwok nodes (``node_count``, default none) stay available.
    """

    def __init__(
        self,
        bin_dir: Path | str,
        nodes_bin_dir: Path | str,
        *,
        real_nodes: int = 3,
        node_count: int = 0,
        zones: Sequence[str] = DEFAULT_ZONES,
        max_pods: int = 60,
        lock_timeout: float = 1800,
        **kw: Any,
    ) -> None:
        super().__init__(bin_dir, node_count=node_count, zones=zones, api_address=API_ADDRESS, **kw)
        self.nodes_bin_dir = Path(nodes_bin_dir)
        self.real_node_count = real_nodes
        self.max_pods = max_pods
        self.lock_timeout = lock_timeout
        self.real_nodes: list[RealNode] = []
        self.kube_proxy: Component | None = None
        self._lock_fh: Any = None
        self._host_before: dict[str, set[str]] = {}
        self._ip_forward: str | None = None
        self.teardown_report: list[str] = []

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> RealNodeCluster:
        for b in NODE_BINS:
            if not os.access(self.nodes_bin_dir / b, os.X_OK):
                raise ControlPlaneError(
                    f"missing binary {self.nodes_bin_dir / b}: run e2e/cluster/build-nodes.sh"
                )
        reason = host_support()
        if reason:
            raise ControlPlaneError(f"this host cannot run real nodes: {reason}")
        self._take_host_lock()
        try:
            stale = cleanup_stale()
            if stale:
                sys.stderr.write(f"rebalancer-e2e: removed stale real-node state: {stale}\n")
            self._host_before = host_state()
            self._ip_forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
            _run("ip", "addr", "add", f"{API_ADDRESS}/32", "dev", "lo")
            super().start()  # on failure it calls self.stop()
        except BaseException:
            self.stop()
            raise
        t0 = time.monotonic()
        try:
            self._start_real_nodes()
        except BaseException:
            self.keep = True
            sys.stderr.write(self.diagnostics())
            self.stop()
            raise
        self.startup_phases["real-nodes"] = round(time.monotonic() - t0, 2)
        self.startup_seconds = round(self.startup_seconds + time.monotonic() - t0, 2)
        return self

    def stop(self) -> None:
        if self._stopped:
            return
        try:
            self._stop_real_nodes()
        finally:
            try:
                self._host_cleanup_after()  # unmounts under run_dir before it is removed
            finally:
                super().stop()
                self._release_host_lock()
                if self.teardown_report:
                    sys.stderr.write(
                        "rebalancer-e2e: real-node teardown: "
                        + "; ".join(self.teardown_report)
                        + "\n"
                    )

    def _take_host_lock(self) -> None:
        HOST_LOCK.parent.mkdir(parents=True, exist_ok=True)
        fh = open(HOST_LOCK, "a+")  # noqa: SIM115 - held until stop()
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    fh.close()
                    raise ControlPlaneError(
                        f"another real-node cluster holds {HOST_LOCK} (waited {self.lock_timeout}s)"
                    ) from None
                time.sleep(1)
        self._lock_fh = fh

    def _release_host_lock(self) -> None:
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    # ---- start ---------------------------------------------------------------------------
    def _start_real_nodes(self) -> None:
        nodes_root = self.run_dir / "nodes"
        nodes_root.mkdir(exist_ok=True)
        self.registry_hosts_dir.mkdir(exist_ok=True)
        images = write_test_images(self.nodes_bin_dir / "testimage", self.run_dir / "images")
        ports = free_ports(self.real_node_count + 2)
        for i in range(self.real_node_count):
            zone = self.zones[i % len(self.zones)]
            name = f"real-{zone}-{i // len(self.zones)}"
            node = RealNode(
                name=name,
                zone=zone,
                index=i,
                ip=f"{ADDR_PREFIX}{11 + i}",
                dir=nodes_root / name,
                subnet=f"10.244.{101 + i}.0/24",
                bridge=f"{BRIDGE_PREFIX}{i}",
                cgroup_root=f"{CGROUP_PREFIX}{name}",
                healthz_port=ports[i],
            )
            self.real_nodes.append(node)
            self._prepare_node(node)
            self._start_containerd(node)
        for node in self.real_nodes:
            self._wait(
                f"containerd of {node.name}",
                partial(self._containerd_up, node),
            )
            self._ctr(node, "images", "import", str(images))
        for node in self.real_nodes:
            # Every kubelet empties the host-wide device-plugin directory, then listens on
            # its socket: started together, one may find another's socket there and exit
            # ("bind: address already in use"). One at a time, each listening first.
            before = _socket_identity(DEVICE_PLUGIN_SOCKET)
            self._start_kubelet(node)
            self._wait(
                f"device-plugin socket of {node.name}",
                partial(_new_listener, DEVICE_PLUGIN_SOCKET, before),
            )
        self._start_kube_proxy(ports[-2], ports[-1])
        names = [n.name for n in self.real_nodes]
        self._wait(
            "real nodes Ready",
            lambda: all(self.node_ready(n) for n in names),
            timeout=120,
        )
        self._wait(
            "Service kubernetes rules",
            lambda: "KUBE-SVC-" in _run("iptables-save", "-t", "nat", check=False).stdout,
            timeout=60,
        )
        self.nodes = [*self.nodes, *names]

    def _prepare_node(self, node: RealNode) -> None:
        d = node.dir
        for sub in ("containerd/root", "containerd/state", "cni", "cni-ipam", "kubelet", "certs"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        node.pod_logs_dir.mkdir(exist_ok=True)
        _run("ip", "addr", "add", f"{node.ip}/32", "dev", "lo")
        for ctrl in CGROUP_V1:
            base = CGROUP_BASE / ctrl
            if not base.is_dir():
                continue
            cg = base / node.cgroup_root
            cg.mkdir(exist_ok=True)
            if ctrl == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (cg / f).write_text((base / f).read_text())
        # CNI: one bridge and subnet per node; no masquerading (nothing leaves the host).
        write_json(
            d / "cni" / "10-rbe.conflist",
            {
                "cniVersion": "0.4.0",
                "name": f"rbe-{node.name}",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": node.bridge,
                        "isGateway": True,
                        "ipMasq": False,
                        "hairpinMode": True,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": node.subnet}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                            "dataDir": str(d / "cni-ipam"),
                        },
                    }
                ],
            },
            mode=0o644,
        )
        (d / "containerd.toml").write_text(self._containerd_config(node))
        # Kubelet credentials: client cert for the Node authorizer, serving cert for the API.
        pki = self.pki
        crt, key = pki.issue(f"kubelet-{node.name}", f"/O=system:nodes/CN=system:node:{node.name}")
        write_json(
            d / "kubelet.kubeconfig",
            kubeconfig_dict(
                server=self.server,
                ca_file=pki.ca_crt,
                user=f"system:node:{node.name}",
                auth={"client-certificate-data": _b64(crt), "client-key-data": _b64(key)},
            ),
        )
        node_serving = pki.issue(
            f"kubelet-serving-{node.name}",
            f"/O=system:nodes/CN=system:node:{node.name}",
            server_sans=[f"IP:{node.ip}", f"DNS:{node.name}"],
        )
        write_json(d / "kubelet-config.json", self._kubelet_config(node, *node_serving))

    def _containerd_config(self, node: RealNode) -> str:
        d = node.dir
        q = json.dumps  # TOML basic strings accept JSON string syntax for plain paths
        return f"""version = 3
root = {q(str(d / "containerd/root"))}
state = {q(str(d / "containerd/state"))}
# NRI's socket is host-wide: one containerd per node would fight over it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = {q(str(node.containerd_sock))}

[ttrpc]
  address = {q(str(node.containerd_sock) + ".ttrpc")}

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".registry]
    # One hosts.toml per registry (trust_registry), read at each pull.
    config_path = {q(str(self.registry_hosts_dir))}
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {q(PAUSE_IMAGE)}

[plugins."io.containerd.cri.v1.runtime"]
  # The sandbox has no CAP_SYS_RESOURCE: runc cannot raise oom_score_adj.
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = {q(RUNC)}
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [{q(CNI_BIN_DIR)}]
    conf_dir = {q(str(d / "cni"))}
"""

    def _kubelet_config(self, node: RealNode, tls_crt: Path, tls_key: Path) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{node.cgroup_root}",
            "containerRuntimeEndpoint": f"unix://{node.containerd_sock}",
            "address": node.ip,
            "port": KUBELET_PORT,
            "readOnlyPort": 0,
            "healthzBindAddress": LOOPBACK,
            "healthzPort": node.healthz_port,
            "tlsCertFile": str(tls_crt),
            "tlsPrivateKeyFile": str(tls_key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.pki.ca_crt)},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "podLogsDir": str(node.pod_logs_dir),
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
            "failSwapOn": False,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "maxPods": self.max_pods,
            "resolvConf": "",
            "kubeAPIQPS": 50,
            "kubeAPIBurst": 100,
            "serializeImagePulls": False,
            "nodeStatusReportFrequency": "1m",
            "syncFrequency": "10s",
        }

    def _env(self) -> dict[str, str]:
        # containerd finds its own runc shim on PATH first.
        return {"PATH": f"{self.nodes_bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def _start_containerd(self, node: RealNode) -> None:
        node.containerd = self._spawn(
            f"containerd-{node.name}",
            [
                str(self.nodes_bin_dir / "containerd"),
                f"--config={node.dir / 'containerd.toml'}",
                "--log-level=warn",
            ],
            env=self._env(),
        )

    def _start_kubelet(self, node: RealNode) -> None:
        d = node.dir
        node.kubelet = self._spawn(
            f"kubelet-{node.name}",
            [
                str(self.nodes_bin_dir / "kubelet"),
                f"--config={d / 'kubelet-config.json'}",
                f"--kubeconfig={d / 'kubelet.kubeconfig'}",
                f"--root-dir={d / 'kubelet'}",
                f"--cert-dir={d / 'certs'}",
                f"--hostname-override={node.name}",
                f"--node-ip={node.ip}",
                f"--node-labels=topology.kubernetes.io/zone={node.zone},type=real",
                f"--v={self.verbosity}",
            ],
            env=self._env(),
        )

    def _start_kube_proxy(self, metrics_port: int, healthz_port: int) -> None:
        crt, key = self.pki.issue("kube-proxy", "/CN=system:kube-proxy")
        kc = write_json(
            self.run_dir / "kube-proxy.kubeconfig",
            kubeconfig_dict(
                server=self.server,
                ca_file=self.pki.ca_crt,
                user="system:kube-proxy",
                auth={"client-certificate-data": _b64(crt), "client-key-data": _b64(key)},
            ),
        )
        self.kube_proxy = self._spawn(
            "kube-proxy",
            [
                str(self.nodes_bin_dir / "kube-proxy"),
                *self._kube_proxy_flags(kc),
                f"--hostname-override={self.real_nodes[0].name}",
                f"--metrics-bind-address={LOOPBACK}:{metrics_port}",
                f"--healthz-bind-address={LOOPBACK}:{healthz_port}",
                f"--v={self.verbosity}",
            ],
        )

    def _kube_proxy_flags(self, kubeconfig: Path) -> list[str]:
        return [
            f"--kubeconfig={kubeconfig}",
            f"--cluster-cidr={POD_CIDR}",
            "--proxy-mode=iptables",
            # Leave the host's sysctls alone.
            "--conntrack-max-per-core=0",
            "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0",
            "--iptables-localhost-nodeports=false",
            "--nodeport-addresses=primary",
        ]

    def _containerd_up(self, node: RealNode) -> bool:
        return self._ctr(node, "version", check=False).returncode == 0

    def _ctr(
        self, node: RealNode, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return _run(
            str(self.nodes_bin_dir / "ctr"),
            "-a",
            str(node.containerd_sock),
            "-n",
            "k8s.io",
            *args,
            check=check,
            timeout=120,
        )

    # ---- access --------------------------------------------------------------------------
    @property
    def registry_hosts_dir(self) -> Path:
        """containerd's registry host configuration of every real node (``config_path``)."""
        return self.run_dir / "registry-hosts"

    def trust_registry(self, host: str) -> Path:
        """Let every real node's containerd pull from ``host`` (``127.0.0.1:PORT``) over plain
        HTTP: its hosts.toml, which containerd reads at each pull (no restart)."""
        d = self.registry_hosts_dir / host
        d.mkdir(parents=True, exist_ok=True)
        server = json.dumps(f"http://{host}")
        (d / "hosts.toml").write_text(
            f'server = {server}\n\n[host.{server}]\n  capabilities = ["pull", "resolve"]\n'
        )
        return d / "hosts.toml"

    def image_digests(self, node: RealNode) -> dict[str, str]:
        """The images in a node's containerd (``ctr images ls``): reference -> digest."""
        lines = self._ctr(node, "images", "ls").stdout.splitlines()[1:]
        return {f[0]: f[2] for f in (line.split() for line in lines) if len(f) > 2}

    def load_image(self, tar: Path) -> None:
        """Import a docker-archive tarball into every real node's containerd."""
        for node in self.real_nodes:
            self._ctr(node, "images", "import", str(tar))

    def real_node(self, name: str) -> RealNode:
        for n in self.real_nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def pod_log(self, namespace: str, pod: str, container: str) -> str:
        """A container's log read from its node's pod-logs dir (all restarts, in order)."""
        texts = []
        for node in self.real_nodes:
            for d in node.pod_logs_dir.glob(f"{namespace}_{pod}_*/{container}"):
                for f in sorted(d.glob("*.log")):
                    texts.append(f.read_text(errors="replace"))
        return "".join(texts)

    # ---- stop ----------------------------------------------------------------------------
    def _stop_real_nodes(self) -> None:
        report = self.teardown_report
        names = [n.name for n in self.real_nodes]
        kubelets_alive = [n for n in self.real_nodes if n.kubelet and n.kubelet.alive()]
        if names and kubelets_alive and self._api_alive():
            # The kubelets stop the containers: no shim or mount is left behind.
            for name in names:
                self.kubectl(
                    "delete",
                    "pods",
                    "-A",
                    f"--field-selector=spec.nodeName={name}",
                    "--grace-period=1",
                    "--wait=false",
                    check=False,
                )

            def gone() -> bool:
                left = self.get_json("pods", "-A", timeout=30)["items"]
                return not [p for p in left if p["spec"].get("nodeName") in names]

            try:
                wait_for("pods on real nodes gone", gone, timeout=90, interval=0.5)
            except Exception as exc:
                report.append(f"pods not gone before kubelets stopped: {exc}")
        if self.kube_proxy is not None:
            self._kill(self.kube_proxy)
            kc = self.run_dir / "kube-proxy.kubeconfig"
            proc = _run(
                str(self.nodes_bin_dir / "kube-proxy"),
                *self._kube_proxy_flags(kc),
                "--cleanup",
                check=False,
            )
            if proc.returncode != 0:
                report.append(f"kube-proxy --cleanup: {proc.stderr.strip()[-300:]}")
        for node in self.real_nodes:
            if node.kubelet is not None:
                self._kill(node.kubelet)
        for node in self.real_nodes:
            if node.containerd is not None and node.containerd.alive():
                self._remove_containers(node)
                self._kill(node.containerd)
        # Shims outlive containerd by design; ours mention our run dir in their arguments.
        self._kill_leftovers()

    def _api_alive(self) -> bool:
        try:
            return self.kubectl("get", "--raw", "/readyz", check=False, timeout=15).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def _remove_containers(self, node: RealNode) -> None:
        tasks = self._ctr(node, "tasks", "ls", "-q", check=False).stdout.split()
        for t in tasks:
            self._ctr(node, "tasks", "kill", "-s", "SIGKILL", t, check=False)
        for t in tasks:
            for _ in range(20):
                if self._ctr(node, "tasks", "rm", "-f", t, check=False).returncode == 0:
                    break
                time.sleep(0.2)
        for c in self._ctr(node, "containers", "ls", "-q", check=False).stdout.split():
            self._ctr(node, "containers", "rm", c, check=False)
        if tasks:
            self.teardown_report.append(f"{node.name}: removed {len(tasks)} leftover tasks")

    def _kill_leftovers(self) -> None:
        markers = [str(self.run_dir)]
        for _ in range(3):
            procs = _processes(markers)
            # Not us, and not the control plane (stopped next, the gentle way).
            me = {str(os.getpid()), str(os.getppid())}
            me |= {str(c.proc.pid) for c in self.components if c.proc is not None and c.alive()}
            pids = [int(p.split()[0]) for p in procs if p.split()[0] not in me]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.teardown_report.append(
                "killed leftover processes: " + ", ".join(p[:160] for p in sorted(procs))
            )
            time.sleep(0.5)

    def _host_cleanup_after(self) -> None:
        report = self.teardown_report
        before = self._host_before
        umounted = _umount_under([str(self.run_dir)])
        if umounted:
            report.append(f"unmounted {umounted}")
        # Network namespaces of pods the kubelets did not tear down: ours by the CNI cache,
        # or new since the start under /run/netns.
        cache = _our_cni_cache()
        new_netns = {
            m
            for m in _mounts()
            if m.startswith("/run/netns/") and m not in before.get("mounts", set())
        }
        netns = _remove_netns(set(cache.values()) | new_netns)
        if netns:
            report.append(f"removed network namespaces {netns}")
        for f in cache:
            with contextlib.suppress(OSError):
                f.unlink()
        if before:
            removed = _remove_new_chains(before.get("iptables_chains", set()))
            if removed:
                report.append(f"removed iptables chains {removed}")
        for node in self.real_nodes:
            _run("ip", "link", "del", node.bridge, check=False)
            _run("ip", "addr", "del", f"{node.ip}/32", "dev", "lo", check=False)
            for ctrl in CGROUP_V1:
                cg = CGROUP_BASE / ctrl / node.cgroup_root
                if not _rmdir_tree(cg):
                    report.append(f"cgroup {cg} could not be removed")
            for link in (
                Path("/var/log/containers").glob("*.log")
                if Path("/var/log/containers").is_dir()
                else []
            ):
                with contextlib.suppress(OSError):
                    if str(self.run_dir) in os.readlink(link):
                        link.unlink()
        if API_ADDRESS in {a.split("/")[0] for a in _lo_addresses()}:
            _run("ip", "addr", "del", f"{API_ADDRESS}/32", "dev", "lo", check=False)
        if self._ip_forward is not None:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(self._ip_forward + "\n")
