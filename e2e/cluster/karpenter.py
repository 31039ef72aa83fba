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

Karpenter runs with its ``CapacityBuffer`` feature gate on (``FEATURE_GATES``): a
``CapacityBuffer`` (``autoscaling.x-k8s.io/v1beta1``, :func:`capacity_buffer`) whose
``PodTemplate`` (:func:`pod_template`) fits no node makes it launch one. ``startup_delay``
(seconds, default 0) holds each node the pools launch NotReady for that long after it is
created: the pools' template annotation :data:`STARTUP_DELAY_ANNOTATION`, which kwok's
``node-initialize`` stage (``kwok/stages.yaml``) reads. :func:`unlaunchable_node_pool` is a pool
that looks able to launch (Ready, zone and taints as usual) but never can.

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
INITIALIZED_LABEL = "karpenter.sh/initialized"
"""Set to ``"true"`` by Karpenter once its node is Ready and its startup taints are gone."""
STARTUP_DELAY_ANNOTATION = "rebalancer-e2e/startup-delay-seconds"
"""Node annotation (from the pool's template) kwok's node-initialize stage reads: the node turns
Ready that many seconds after its creationTimestamp, not at once."""
FEATURE_GATES = "CapacityBuffer=true"
"""Karpenter's ``FEATURE_GATES``: the CapacityBuffer API (alpha in v1.15, off by default)."""
BUFFER_API = "autoscaling.x-k8s.io/v1beta1"
UNLAUNCHABLE_CAPACITY_TYPE = "spot"
"""No instance type of ``karpenter-instance-types.json`` has a spot offering: a pool that
requires it launches nothing, while nothing in its spec says so."""
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
    startup_delay: float = 0,
    capacity_type: str = "on-demand",
) -> dict[str, Any]:
    """The NodePool ``e2e-<zone>`` (or ``name``): nodes in ``zone`` only, labelled ``labels``
    (default :data:`POOL_LABEL`) and, if ``tainted``, tainted :data:`POOL_LABEL`, at most
    ``cpu_limit`` CPUs in all, of ``capacity_type``; each node NotReady for ``startup_delay``
    seconds after it is created (0: Ready at once)."""
    taints = [{"key": POOL_LABEL, "value": "true", "effect": "NoSchedule"}] if tainted else []
    metadata: dict[str, Any] = {"labels": labels if labels is not None else {POOL_LABEL: "true"}}
    if startup_delay > 0:
        metadata["annotations"] = {STARTUP_DELAY_ANNOTATION: f"{startup_delay:g}"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name or f"e2e-{zone}"},
        "spec": {
            "template": {
                "metadata": metadata,
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
                            "values": [capacity_type],
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


def unlaunchable_node_pool(zone: str, **kw: Any) -> dict[str, Any]:
    """:func:`node_pool` (same arguments) that never launches a node: it requires capacity type
    :data:`UNLAUNCHABLE_CAPACITY_TYPE`, which no instance type offers. Karpenter keeps it
    Ready (readiness is about its spec and node class) and logs, for each pod it cannot place,
    that no instance type satisfies the requirements; a planner reading only the pool (zone,
    taints, labels, limits, Ready) sees a pool that can add a node in ``zone``."""
    return node_pool(zone, capacity_type=UNLAUNCHABLE_CAPACITY_TYPE, **kw)


def pod_template(
    name: str,
    node_selector: dict[str, str],
    *,
    cpu: str = "500m",
    tolerations: Sequence[dict[str, Any]] = (),
    namespace: str | None = None,
) -> dict[str, Any]:
    """A PodTemplate for a :func:`capacity_buffer`: one pod of ``cpu`` pinned by
    ``node_selector`` (e.g. the pool's and zone's labels), tolerating ``tolerations``."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": meta,
        "template": {
            "metadata": {"labels": {"rebalancer-e2e/buffer": name}},
            "spec": {
                "nodeSelector": dict(node_selector),
                "tolerations": list(tolerations),
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu}},
                    }
                ],
            },
        },
    }


def capacity_buffer(
    name: str, template: str, *, replicas: int = 1, namespace: str | None = None
) -> dict[str, Any]:
    """A CapacityBuffer keeping room for ``replicas`` pods of the PodTemplate ``template`` (same
    namespace)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": BUFFER_API,
        "kind": "CapacityBuffer",
        "metadata": meta,
        "spec": {"podTemplateRef": {"name": template}, "replicas": replicas},
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
        startup_delay: float = 0,
        feature_gates: str = FEATURE_GATES,
    ) -> None:
        """``zones``: one NodePool per zone (none: the caller makes its own); ``kubeconfig``:
        the controller's credentials (default the cluster's admin); ``startup_delay``: the
        seconds each node of those pools stays NotReady after it is created (0: none; pools the
        caller makes say their own, see :func:`node_pool`); ``feature_gates``: Karpenter's
        ``FEATURE_GATES``."""
        self.directory = directory
        self.cluster = cluster
        self.kubeconfig = kubeconfig or cluster.kubeconfig
        self.zones = tuple(zones)
        self.cpu_limit = cpu_limit
        self.consolidate_after = consolidate_after
        self.startup_delay = startup_delay
        self.feature_gates = feature_gates
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
            "capacitybuffers.autoscaling.x-k8s.io",
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
                    node_pool(
                        z,
                        cpu_limit=self.cpu_limit,
                        consolidate_after=self.consolidate_after,
                        startup_delay=self.startup_delay,
                    )
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
                    "FEATURE_GATES": self.feature_gates,
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

    def buffers(self, namespace: str) -> list[dict[str, Any]]:
        return list(self.cluster.get_json("capacitybuffers", "-n", namespace)["items"])

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
