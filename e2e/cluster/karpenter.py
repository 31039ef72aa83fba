"""Karpenter beside the e2e control plane: its kwok provider as a local process.

``e2e/cluster/build-karpenter.sh`` builds the controller of ``sigs.k8s.io/karpenter/kwok``
(cached) and copies the CRDs it serves. :class:`Karpenter` installs those CRDs, a
``KWOKNodeClass``, one NodePool per zone of the control plane, and runs the controller against
the control plane's API server. The nodes it launches are plain Node objects annotated
``kwok.x-k8s.io/node: fake``, which the control plane's own kwok keeps Ready.

The NodePools (``e2e-<zone>``) launch nodes only in their zone, from the instance types of
``karpenter-instance-types.json`` (on-demand, in every zone), with consolidation
``WhenEmptyOrUnderutilized``. Their nodes carry the label and the NoSchedule taint
:data:`POOL_LABEL` = ``"true"``: only pods that tolerate it go there, so the other scenarios of a
session never land on a node Karpenter may take away. Stopping deletes the NodePools, waits for
Karpenter to remove its nodes, then stops the process.

    from e2e.cluster.karpenter import Karpenter, karpenter_dir
    with Karpenter(karpenter_dir(), cluster) as k:
        k.wait_nodes(1)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from e2e.cluster.controlplane import (
    DEFAULT_ZONES,
    LOOPBACK,
    Cluster,
    ControlPlaneError,
    _pdeathsig,
    free_ports,
    run_build_script,
    wait_for,
)

HERE = Path(__file__).resolve().parent
BUILD_KARPENTER_SH = HERE / "build-karpenter.sh"
INSTANCE_TYPES = HERE / "karpenter-instance-types.json"
BINARY = "karpenter-kwok"
POOL_LABEL = "rebalancer-e2e/karpenter"
"""Label and NoSchedule taint key of every node the e2e NodePools launch (value ``"true"``)."""
NODEPOOL_LABEL = "karpenter.sh/nodepool"
DISRUPTED_TAINT = "karpenter.sh/disrupted"
ZONE_LABEL = "topology.kubernetes.io/zone"
COLD_BUILD = "about 8 minutes cold on 2 cores"


def karpenter_dir(*, build: bool = False, timeout: float = 3600) -> Path | None:
    """build-karpenter.sh's output directory when the controller is built (building it first
    if ``build``), else None."""
    if build:
        return run_build_script(BUILD_KARPENTER_SH, "KARPENTER_DIR", quiet=True, timeout=timeout)
    out = subprocess.run(
        ["bash", str(BUILD_KARPENTER_SH), "--dir"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    found = Path(out)
    return found if os.access(found / "bin" / BINARY, os.X_OK) else None


def node_pool(
    zone: str,
    *,
    cpu_limit: str = "16",
    consolidate_after: str = "30s",
    name: str | None = None,
    labels: dict[str, str] | None = None,
    tainted: bool = True,
) -> dict[str, Any]:
    """The NodePool ``e2e-<zone>`` (or ``name``): nodes in ``zone`` only, labelled ``labels``
    (default :data:`POOL_LABEL`) and, if ``tainted``, tainted :data:`POOL_LABEL`, at most
    ``cpu_limit`` CPUs in all."""
    taints = [{"key": POOL_LABEL, "value": "true", "effect": "NoSchedule"}] if tainted else []
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name or f"e2e-{zone}"},
        "spec": {
            "template": {
                "metadata": {"labels": labels if labels is not None else {POOL_LABEL: "true"}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": ZONE_LABEL, "operator": "In", "values": [zone]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "taints": taints,
                    "expireAfter": "Never",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
            },
            "limits": {"cpu": cpu_limit},
        },
    }


class Karpenter:
    """Karpenter's kwok provider running against ``cluster`` (our own control plane)."""

    def __init__(
        self,
        directory: Path,
        cluster: Cluster,
        *,
        zones: Sequence[str] = DEFAULT_ZONES,
        cpu_limit: str = "16",
        consolidate_after: str = "30s",
        start_timeout: float = 120,
        kubeconfig: Path | None = None,
    ) -> None:
        """``zones``: one NodePool per zone (none: the caller makes its own); ``kubeconfig``:
        the controller's credentials (default the cluster's admin)."""
        self.directory = directory
        self.cluster = cluster
        self.kubeconfig = kubeconfig or cluster.kubeconfig
        self.zones = tuple(zones)
        self.cpu_limit = cpu_limit
        self.consolidate_after = consolidate_after
        self.start_timeout = start_timeout
        self.log = cluster.run_dir / "logs" / "karpenter.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, int] = {}
        self.startup_seconds = 0.0

    def __enter__(self) -> Karpenter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> Karpenter:
        t0 = time.monotonic()
        binary = self.directory / "bin" / BINARY
        if not os.access(binary, os.X_OK):
            raise ControlPlaneError(f"missing {binary}: run {BUILD_KARPENTER_SH}")
        c = self.cluster
        for path in sorted((self.directory / "crds").glob("*.yaml")):
            # Server-side: the CRDs are too large for kubectl's last-applied annotation.
            c.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        for crd in (
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "kwoknodeclasses.karpenter.kwok.sh",
        ):
            c.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
        c.apply(
            {
                "apiVersion": "karpenter.kwok.sh/v1alpha1",
                "kind": "KWOKNodeClass",
                "metadata": {"name": "default"},
            }
        )
        if self.zones:
            c.apply(
                [
                    node_pool(z, cpu_limit=self.cpu_limit, consolidate_after=self.consolidate_after)
                    for z in self.zones
                ]
            )
        self.ports = dict(zip(("metrics", "health"), free_ports(2), strict=True))
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                [str(binary)],
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=c.run_dir,
                start_new_session=True,
                preexec_fn=_pdeathsig,  # noqa: PLW1509 - prctl only, spawned from one thread
                env={
                    **os.environ,
                    "GOMAXPROCS": os.environ.get("GOMAXPROCS", "2"),
                    "KUBECONFIG": str(self.kubeconfig),
                    "DISABLE_LEADER_ELECTION": "true",
                    "METRICS_PORT": str(self.ports["metrics"]),
                    "HEALTH_PROBE_PORT": str(self.ports["health"]),
                    "INSTANCE_TYPES_FILE_PATH": str(INSTANCE_TYPES),
                    "LOG_LEVEL": "debug",
                    # Launch promptly after a pod goes Pending (defaults: 1 s idle, 10 s max).
                    "BATCH_IDLE_DURATION": "1s",
                    "BATCH_MAX_DURATION": "3s",
                },
            )
        self._wait("karpenter /readyz", self._ready)
        self._wait(
            "NodePools Ready",
            lambda: all(self._pool_ready(p) for p in self.pools()),
        )
        self.startup_seconds = round(time.monotonic() - t0, 2)
        return self

    def stop(self, *, timeout: float = 120) -> None:
        """Delete the NodePools (Karpenter removes their nodes), then stop the controller."""
        proc = self.proc
        if proc is None:
            return
        c = self.cluster
        try:
            if proc.poll() is None:
                c.kubectl("delete", "nodepools", "--all", "--wait=false", check=False)
                wait_for(
                    "Karpenter's nodes gone",
                    lambda: not self.nodes(),
                    timeout=timeout,
                    interval=1.0,
                )
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            self.proc = None

    def _wait(self, what: str, probe: Any, timeout: float | None = None) -> Any:
        return wait_for(
            what,
            probe,
            timeout=timeout or self.start_timeout,
            interval=0.5,
            on_poll=self.check_alive,
        )

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise ControlPlaneError(f"karpenter exited; last log lines:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _ready(self) -> bool:
        with urllib.request.urlopen(
            f"http://{LOOPBACK}:{self.ports['health']}/readyz", timeout=5
        ) as r:
            return bool(r.status == 200)

    # ---- what Karpenter made ------------------------------------------------------------
    def pools(self) -> list[dict[str, Any]]:
        return list(self.cluster.get_json("nodepools")["items"])

    @staticmethod
    def _pool_ready(pool: dict[str, Any]) -> bool:
        conditions = pool.get("status", {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def nodes(self) -> list[dict[str, Any]]:
        """The nodes Karpenter launched (they carry ``karpenter.sh/nodepool``)."""
        return list(self.cluster.get_json("nodes", "-l", NODEPOOL_LABEL)["items"])

    def node_claims(self) -> list[dict[str, Any]]:
        return list(self.cluster.get_json("nodeclaims")["items"])

    def wait_nodes(self, count: int, *, timeout: float = 180) -> list[dict[str, Any]]:
        """Wait until at least ``count`` of Karpenter's nodes are Ready; returns them all."""

        def ready() -> list[dict[str, Any]] | None:
            found = [n for n in self.nodes() if _node_ready(n)]
            return found if len(found) >= count else None

        result: list[dict[str, Any]] = self._wait(f"{count} Karpenter nodes Ready", ready, timeout)
        return result

    def diagnostics(self) -> str:
        try:
            claims = json.dumps(
                [
                    {
                        "name": c["metadata"]["name"],
                        "conditions": c.get("status", {}).get("conditions"),
                    }
                    for c in self.node_claims()
                ],
                indent=1,
            )
        except Exception as exc:
            claims = f"(nodeclaims unreadable: {exc})"
        return f"NodeClaims: {claims}\nkarpenter log:\n{self.log_tail(80)}\n"


def _node_ready(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def has_taint(node: dict[str, Any], key: str) -> bool:
    return any(t.get("key") == key for t in node.get("spec", {}).get("taints") or [])
