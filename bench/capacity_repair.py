"""Capacity before the eviction, measured: ``python -m bench.capacity_repair``.

    python -m bench.capacity_repair [--rounds 3] [--modes never,auto] [--delay 60]
        [--cap 300] [--pending-cap 180] [--wave-timeout 150s] [--no-unlaunchable]
        [--out bench/results/capacity-repair.json]

On the e2e control plane with Karpenter's kwok provider (``e2e/cluster/karpenter.py``, nodes it
launches held NotReady ``--delay`` seconds after they are created, as a booting node is), one
workload whose repair needs a node that does not exist yet:

* three plain nodes, one per zone (2 CPUs each, labelled and tainted like the pools' nodes, not
  Karpenter's: nothing consolidates them); the nodes of zone-b and zone-c are full (a filler
  pod of 1.9 CPU in another namespace, and one replica of 0.1 CPU each);
* the Deployment ``web``: 5 replicas of 0.1 CPU, a hard zone spread (maxSkew 1), tolerating the
  pools' taint, laid out zone-a:3 zone-b:1 zone-c:1 (skew 2). The pods are bound with
  ``spec.nodeName`` and adopted by a ReplicaSet whose template is the Deployment's, which the
  Deployment then adopts as its own: the skew is the same every round, and an evicted pod is
  replaced from the Deployment's template and placed by kube-scheduler;
* one NodePool per zone (``e2e-<zone>``): the repair (one pod from zone-a to zone-b or zone-c)
  waits for a node the pool adds there.

Per mode, ``python -m rebalancer run`` once per round, with ``reserveCapacity: never`` (evict
first: the replacement waits, Pending, for the node) or ``auto`` (reserve first: a
CapacityBuffer, a Ready node, then the eviction). The run reads the whole cluster, its policy
narrowed to the round's namespace (with ``-n`` it would not see the fillers, in a namespace of
their own, and take their nodes for free room). From the run's start the pods are sampled every
0.5 s until all 5 replicas are Ready and the zones are within maxSkew (or ``--cap`` seconds):

* replica-seconds below: the sum over the samples of (5 - Ready replicas) times the time to the
  next sample (a terminating pod is not Ready); the median of the rounds per mode;
* the repair's seconds (run start to repaired), and the run's evictions (its JSON summary, and
  the audit log's eviction requests in the namespace).

Then a pool that cannot launch (:func:`e2e.cluster.karpenter.unlaunchable_node_pool`; it looks
Ready and in its zone to a planner) replaces the pools of zone-b and zone-c, and each mode runs
once more: evictions sent, and how long the replacement stays Pending (unbound), from the
eviction until it is bound or ``--pending-cap`` seconds (printed ``>= 180 s``).

Figures are printed and written to ``--out``; nothing is asserted. The machine is shared:
timings are noisy. The reserve-first mode needs a ``run`` that creates CapacityBuffers; each
row says which way the plan sent each waiting replacement (``capacity``) and whether a buffer
was seen, so a run that could not reserve shows as such.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.plan import RESULTS, machine

ROOT = Path(__file__).resolve().parent.parent
ZONES = ("zone-a", "zone-b", "zone-c")
ZONE = "topology.kubernetes.io/zone"
APP = "web"
REPLICAS = 5
LAYOUT = ("zone-a", "zone-a", "zone-a", "zone-b", "zone-c")
"""The zone of each replica at the start: skew 2 (3 - 1) for a maxSkew of 1."""
POD_CPU = "100m"
NODE_CPU = "2"
FILL_CPU = "1900m"
FILL_NS = "cap-fill"
SEED_HASH = "seed"
SAMPLE_SECONDS = 0.5
DEFAULT_DELAY = 60.0
DEFAULT_CAP = 300.0
DEFAULT_PENDING_CAP = 180.0
DEFAULT_WAVE_TIMEOUT = "150s"
MODES = ("never", "auto")
NODES_GONE_TIMEOUT = 300.0
BUFFERS = "/apis/autoscaling.x-k8s.io/v1beta1/capacitybuffers"


# ---------------------------------------------------------------------------------------------
# Figures (pure)


def below_seconds(samples: Sequence[tuple[float, int]], replicas: int) -> float:
    """Replica-seconds below ``replicas``: each sample ``(t, ready)`` holds until the next one
    (the last one holds for nothing)."""
    total = 0.0
    for (t, ready), (t_next, _) in itertools.pairwise(samples):
        total += max(0, replicas - ready) * (t_next - t)
    return total


def within_skew(counts: Counter[str], zones: Sequence[str], max_skew: int = 1) -> bool:
    """Every zone of ``zones`` (a zone with no pod counts 0) within ``max_skew`` of the others."""
    values = [counts.get(z, 0) for z in zones]
    return max(values) - min(values) <= max_skew


def pending_text(seconds: float | None, cap: float, still_pending: bool) -> str:
    if seconds is None:
        return "-"
    return f">= {cap:.0f} s" if still_pending else f"{seconds:.1f} s"


def median_or_none(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return round(statistics.median(found), 1) if found else None


# ---------------------------------------------------------------------------------------------
# Objects


def _toleration() -> dict[str, Any]:
    from e2e.cluster.karpenter import POOL_LABEL  # noqa: PLC0415

    return {"key": POOL_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def pod_spec() -> dict[str, Any]:
    from e2e.cluster.karpenter import POOL_LABEL  # noqa: PLC0415

    return {
        "nodeSelector": {POOL_LABEL: "true"},
        "tolerations": [_toleration()],
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": POD_CPU}},
            }
        ],
        "terminationGracePeriodSeconds": 2,
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": APP}},
            }
        ],
    }


def node_name(zone: str) -> str:
    return f"cap-{zone}"


def plain_node(cp: Any, zone: str) -> dict[str, Any]:
    """A 2-CPU node in ``zone`` that looks like a pool's (label and taint), not Karpenter's."""
    from e2e.cluster.karpenter import POOL_LABEL  # noqa: PLC0415

    node: dict[str, Any] = cp.node_manifest(node_name(zone), zone, {POOL_LABEL: "true"})
    node["spec"]["taints"] = [{"key": POOL_LABEL, "value": "true", "effect": "NoSchedule"}]
    size = {"cpu": NODE_CPU, "memory": "8Gi", "pods": "32"}
    node["status"]["allocatable"] = dict(size)
    node["status"]["capacity"] = dict(size)
    return node


def bound_pod(name: str, node: str, spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {**spec, "nodeName": node},
    }


def filler(zone: str) -> dict[str, Any]:
    spec = {
        "tolerations": [{"operator": "Exists"}],
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": FILL_CPU}},
            }
        ],
    }
    return bound_pod(f"fill-{zone}", node_name(zone), spec, {"app": "fill"})


def workload(ns: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The five bound pods, the ReplicaSet that adopts them, the Deployment that adopts it."""
    seeded = {"app": APP, "pod-template-hash": SEED_HASH}
    pods = [
        bound_pod(f"{APP}-{i}-{zone}", node_name(zone), pod_spec(), seeded)
        for i, zone in enumerate(LAYOUT)
    ]
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"{APP}-{SEED_HASH}", "labels": dict(seeded)},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": dict(seeded)},
            "template": {"metadata": {"labels": dict(seeded)}, "spec": pod_spec()},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": APP}},
            "template": {"metadata": {"labels": {"app": APP}}, "spec": pod_spec()},
        },
    }
    return pods, rs, deployment


# ---------------------------------------------------------------------------------------------
# Sampling


def _ready(obj: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


@dataclass
class Samples:
    """What the sampler saw, in seconds from the run's start."""

    ready: list[tuple[float, int]] = field(default_factory=list)
    last: float = 0.0  # the last sample
    repaired_at: float | None = None
    evicted_at: float | None = None  # the first pod seen terminating
    replacements: dict[str, dict[str, float | None]] = field(default_factory=dict)
    new_nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    buffers: set[str] = field(default_factory=set)
    buffer_conditions: dict[str, list[str]] = field(default_factory=dict)


class Sampler:
    """Samples the namespace's pods (and Karpenter's nodes, and CapacityBuffers) every
    :data:`SAMPLE_SECONDS` on its own thread until ``stop(samples, t)`` says so."""

    def __init__(self, cp: Any, ns: str, t0: float, originals: set[str]) -> None:
        from rebalancer.cluster.api.kubeclient import connect  # noqa: PLC0415

        self.cp = cp
        self.ns = ns
        self.t0 = t0
        self.originals = originals
        self.kube = connect(str(cp.kubeconfig))
        self.zone_of: dict[str, str] = {}
        self.samples = Samples()
        self.done = threading.Event()

    def zone(self, node: str) -> str:
        if node not in self.zone_of:
            body = self.kube.request("GET", f"/api/v1/nodes/{node}").json()
            self.zone_of[node] = ((body.get("metadata") or {}).get("labels") or {}).get(ZONE, "")
        return self.zone_of[node]

    def once(self) -> None:
        s = self.samples
        t = time.time() - self.t0
        pods = self.kube.list_pods(self.ns, f"app={APP}")
        ready = 0
        counts: Counter[str] = Counter()
        for p in pods:
            meta, spec = p["metadata"], p.get("spec") or {}
            name = meta["name"]
            if meta.get("deletionTimestamp"):
                if s.evicted_at is None:
                    s.evicted_at = t
                continue
            if name not in self.originals:
                r = s.replacements.setdefault(name, {"seen": t, "bound": None, "ready": None})
                if spec.get("nodeName") and r["bound"] is None:
                    r["bound"] = t
                if _ready(p) and r["ready"] is None:
                    r["ready"] = t
            if _ready(p):
                ready += 1
                if spec.get("nodeName"):
                    counts[self.zone(spec["nodeName"])] += 1
        s.ready.append((t, ready))
        s.last = t
        if s.repaired_at is None and ready == REPLICAS and within_skew(counts, ZONES):
            s.repaired_at = t
        self.nodes(t)
        self.buffers()

    def nodes(self, t: float) -> None:
        from e2e.cluster.karpenter import NODEPOOL_LABEL  # noqa: PLC0415

        body = self.kube.request(
            "GET", "/api/v1/nodes", query=[("labelSelector", NODEPOOL_LABEL)]
        ).json()
        for n in body.get("items") or ():
            meta = n["metadata"]
            seen = self.samples.new_nodes.setdefault(
                meta["name"],
                {
                    "seen": t,
                    "ready": None,
                    "zone": meta["labels"].get(ZONE),
                    "pool": meta["labels"].get(NODEPOOL_LABEL),
                },
            )
            if _ready(n) and seen["ready"] is None:
                seen["ready"] = t

    def buffers(self) -> None:
        response = self.kube.request("GET", BUFFERS)
        if response.status != 200:
            return
        for b in response.json().get("items") or ():
            key = f"{b['metadata']['namespace']}/{b['metadata']['name']}"
            self.samples.buffers.add(key)
            seen = self.samples.buffer_conditions.setdefault(key, [])
            for c in (b.get("status") or {}).get("conditions") or ():
                text = f"{c.get('type')}={c.get('status')} ({c.get('reason')})"
                if text not in seen:
                    seen.append(text)

    def run(self, stop: Callable[[Samples, float], bool], cap: float) -> Samples:
        next_at = time.time()
        while True:
            t = time.time() - self.t0
            try:
                self.once()
            except Exception as exc:  # a slow moment: the next sample
                print(f"  sample at {t:.1f}s failed: {exc!r}", file=sys.stderr)
            if t >= cap or stop(self.samples, t):
                break
            next_at += SAMPLE_SECONDS
            time.sleep(max(0.0, next_at - time.time()))
        self.kube.close()
        return self.samples


# ---------------------------------------------------------------------------------------------
# The bench


class CapacityBench:
    def __init__(
        self,
        cp: Any,
        karpenter: Any,
        *,
        cap: float,
        pending_cap: float,
        wave_timeout: str,
        out_dir: Path,
    ) -> None:
        self.cp = cp
        self.karpenter = karpenter
        self.cap = cap
        self.pending_cap = pending_cap
        self.wave_timeout = wave_timeout
        self.out_dir = out_dir
        self.seq = 0

    # -- setup --------------------------------------------------------------------------------
    def setup(self) -> None:
        cp = self.cp
        cp.kubectl("create", "namespace", "rebalancer", check=False)  # the run's Lease
        cp.apply([plain_node(cp, z) for z in ZONES])
        cp.wait_for(
            "the plain nodes Ready",
            lambda: all(cp.node_ready(node_name(z)) for z in ZONES),
            timeout=120,
        )
        self.namespace(FILL_NS)
        cp.apply([filler(z) for z in ("zone-b", "zone-c")], "-n", FILL_NS)
        cp.wait_pods_running(FILL_NS, "app=fill", 2, timeout=120)

    def namespace(self, ns: str) -> None:
        cp = self.cp
        cp.kubectl("create", "namespace", ns, check=False)
        cp.wait_for(
            f"default ServiceAccount in {ns}",
            lambda: cp.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0,
            timeout=60,
        )

    def make_workload(self, ns: str) -> set[str]:
        """The skewed Deployment in ``ns``; returns its pods' names."""
        cp = self.cp
        self.namespace(ns)
        pods, rs, deployment = workload(ns)
        cp.apply(pods, "-n", ns)
        cp.wait_pods_running(ns, f"app={APP}", REPLICAS, timeout=120)
        cp.apply(rs, "-n", ns)
        cp.wait_for(
            "the ReplicaSet adopts the pods",
            lambda: all(p["metadata"].get("ownerReferences") for p in cp.pods(ns, f"app={APP}")),
            timeout=60,
        )
        cp.apply(deployment, "-n", ns)

        def adopted() -> bool:
            sets = cp.get_json("replicasets", "-n", ns)["items"]
            d = cp.get_json("deployment", APP, "-n", ns)
            return (
                len(sets) == 1
                and bool(sets[0]["metadata"].get("ownerReferences"))
                and d.get("status", {}).get("readyReplicas") == REPLICAS
            )

        cp.wait_for("the Deployment adopts the ReplicaSet", adopted, timeout=60)
        return {p["metadata"]["name"] for p in pods}

    # -- one round ---------------------------------------------------------------------------
    def policy(self, mode: str, ns: str) -> Path:
        """``reserveCapacity: mode``, narrowed to ``ns``: the run reads the whole cluster (with
        ``-n`` it would not see the fillers, in their own namespace, and take their nodes for
        free room)."""
        path = self.out_dir / f"policy-{ns}.yaml"
        doc = {
            "apiVersion": "rebalancer/v1alpha1",
            "kind": "RebalancerPolicy",
            "nodeFit": True,
            "reserveCapacity": mode,
            "namespaces": {"include": [ns]},
        }
        path.write_text(yaml.safe_dump(doc))
        return path

    def run_once(
        self, mode: str, label: str, stop: Callable[[Samples, float], bool], cap: float
    ) -> tuple[dict[str, Any], Samples]:
        cp = self.cp
        self.seq += 1
        ns = f"cap-{label}-{self.seq}"
        originals = self.make_workload(ns)
        mark = len(cp.audit_events())
        out = self.out_dir / f"{ns}.json"
        err = self.out_dir / f"{ns}.log"
        argv = [
            sys.executable, "-m", "rebalancer", "run",
            "--policy", str(self.policy(mode, ns)), "--kubeconfig", str(cp.kubeconfig),
            "--wave-timeout", self.wave_timeout, "-o", "json",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.time()
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = subprocess.Popen(argv, stdout=fo, stderr=fe, cwd=ROOT, env=env)
            sampler = Sampler(cp, ns, t0, originals)

            def stop_or_exited(s: Samples, t: float) -> bool:
                return stop(s, t) or (proc.poll() is not None and s.evicted_at is None)

            samples = sampler.run(stop_or_exited, cap)
            try:
                code = proc.wait(timeout=_seconds(self.wave_timeout) + 120)
            except subprocess.TimeoutExpired:
                proc.terminate()
                code = proc.wait(timeout=30)
        report = _json(out)
        plan = report.get("plan") or {}
        audit = [
            e
            for e in cp.audit_events()[mark:]
            if (e.get("objectRef") or {}).get("subresource") == "eviction"
            and (e.get("objectRef") or {}).get("namespace") == ns
            and e.get("stage") == "ResponseComplete"
            and (e.get("responseStatus") or {}).get("code") == 201
        ]
        row: dict[str, Any] = {
            "mode": mode,
            "namespace": ns,
            "exit_code": code,
            "evicted": (report.get("summary") or {}).get("evicted"),
            "evictions_audit": len(audit),
            "capacity": [e.get("capacity") or "" for e in plan.get("evictions") or ()],
            "waits_for": [e.get("waitsFor") or "" for e in plan.get("evictions") or ()],
            "buffers_seen": sorted(samples.buffers),
            "buffer_conditions": samples.buffer_conditions,
            "below_replica_seconds": round(below_seconds(samples.ready, REPLICAS), 1),
            "repair_seconds": (
                round(samples.repaired_at, 1) if samples.repaired_at is not None else None
            ),
            "evicted_at": samples.evicted_at,
            "new_nodes": samples.new_nodes,
            "replacements": samples.replacements,
        }
        self.cleanup(ns, samples.buffers)
        return row, samples

    def repair_round(self, mode: str) -> dict[str, Any]:
        def repaired(s: Samples, _t: float) -> bool:
            return s.repaired_at is not None

        row, _ = self.run_once(mode, mode, repaired, self.cap)
        row["capped"] = row["repair_seconds"] is None
        return row

    def unlaunchable_round(self, mode: str) -> dict[str, Any]:
        cap = self.pending_cap

        def settled(s: Samples, t: float) -> bool:
            if s.evicted_at is None:
                return False
            if any(r["bound"] is not None for r in s.replacements.values()):
                return True
            return t - s.evicted_at >= cap

        total = cap + _seconds(self.wave_timeout) + 60
        row, samples = self.run_once(mode, f"nl-{mode}", settled, total)
        pending: float | None = None
        still = False
        if samples.replacements:
            first = min(samples.replacements.values(), key=lambda r: r["seen"] or 0.0)
            seen, bound = first["seen"] or 0.0, first["bound"]
            still = bound is None
            pending = round((bound if bound is not None else samples.last) - seen, 1)
        row["pending_seconds"] = pending
        row["still_pending"] = still
        row["pending"] = pending_text(pending, cap, still)
        return row

    # -- between rounds -------------------------------------------------------------------------
    def cleanup(self, ns: str, buffers: set[str]) -> None:
        """The namespace and its pods gone, and every CapacityBuffer seen (a run deletes its
        own; one it left would bring the node back), then every node Karpenter launched (its
        NodeClaims deleted), so the next round starts from the same nodes."""
        cp = self.cp
        for key in sorted(buffers):
            where, _, name = key.partition("/")
            cp.kubectl(
                "delete", "capacitybuffer", name, "-n", where, "--ignore-not-found", check=False
            )
        cp.kubectl("delete", "namespace", ns, "--timeout=120s", check=False)
        cp.kubectl("delete", "nodeclaims", "--all", "--wait=false", check=False)
        cp.wait_for(
            "Karpenter's nodes gone",
            lambda: not self.karpenter.nodes(),
            timeout=NODES_GONE_TIMEOUT,
            interval=2.0,
        )

    def unlaunchable_pools(self) -> None:
        """The pools of zone-b and zone-c replaced by pools that cannot launch."""
        from e2e.cluster.karpenter import unlaunchable_node_pool  # noqa: PLC0415

        cp = self.cp
        for zone in ("zone-b", "zone-c"):
            cp.kubectl("delete", "nodepool", f"e2e-{zone}", "--timeout=60s", check=False)
        cp.apply([unlaunchable_node_pool(z, name=f"nolaunch-{z}") for z in ("zone-b", "zone-c")])
        cp.wait_for(
            "the unlaunchable pools Ready",
            lambda: all(
                self.karpenter._pool_ready(cp.get_json("nodepool", f"nolaunch-{z}"))
                for z in ("zone-b", "zone-c")
            ),
            timeout=120,
        )


def _seconds(duration: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(duration[:-1]) * units[duration[-1]] if duration[-1] in units else float(duration)


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------------------------
# Output


def table(repairs: Sequence[dict[str, Any]], unlaunchable: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| mode | rounds | replica-seconds below (each) | median | repair seconds (each) | "
        "evictions (each) | capacity | buffers seen |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode in dict.fromkeys(r["mode"] for r in repairs):
        rows = [r for r in repairs if r["mode"] == mode]
        below = [r["below_replica_seconds"] for r in rows]
        repair = [
            f">= {r['repair_seconds'] or 0:.0f}" if r["capped"] else f"{r['repair_seconds']:.1f}"
            for r in rows
        ]
        ways = sorted({w for r in rows for w in r["capacity"]}) or ["-"]
        lines.append(
            f"| {mode} | {len(rows)} | {', '.join(f'{b:.1f}' for b in below)} | "
            f"{median_or_none(below)} | {', '.join(repair)} | "
            f"{', '.join(str(r['evicted']) for r in rows)} | {'/'.join(ways)} | "
            f"{sum(len(r['buffers_seen']) for r in rows)} |"
        )
    if unlaunchable:
        lines += [
            "",
            "A pool that cannot launch (zone-b, zone-c):",
            "",
            "| mode | evictions sent (run, audit) | replacement Pending | capacity "
            "| buffers seen |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in unlaunchable:
            way = "/".join(sorted(set(r["capacity"]))) or "-"
            lines.append(
                f"| {r['mode']} | {r['evicted']}, {r['evictions_audit']} | {r['pending']} | "
                f"{way} | {len(r['buffers_seen'])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--delay", type=float, default=DEFAULT_DELAY, help="node start-up seconds")
    ap.add_argument("--cap", type=float, default=DEFAULT_CAP)
    ap.add_argument("--pending-cap", type=float, default=DEFAULT_PENDING_CAP)
    ap.add_argument("--wave-timeout", default=DEFAULT_WAVE_TIMEOUT)
    ap.add_argument("--no-unlaunchable", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "capacity-repair.json"))
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            ap.error(f"--modes: {m!r} is not one of {', '.join(MODES)}")

    repairs, unlaunchable = measure(args, modes)
    print(table(repairs, unlaunchable))
    print(
        f"node start-up delay {args.delay:g} s; samples every {SAMPLE_SECONDS} s; "
        f"machine: {os.cpu_count()} cores, shared: timings are noisy"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": machine(),
        "delay": args.delay,
        "repairs": repairs,
        "unlaunchable": unlaunchable,
    }
    out.write_text(json.dumps(doc, indent=2, default=sorted) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


def measure(
    args: argparse.Namespace, modes: Sequence[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The control plane and Karpenter up, every round, everything down: the rows."""
    from e2e.cluster.controlplane import ControlPlane, build  # noqa: PLC0415
    from e2e.cluster.karpenter import Karpenter, karpenter_dir  # noqa: PLC0415

    out_dir = ROOT / "bench" / "out" / "capacity-repair"
    out_dir.mkdir(parents=True, exist_ok=True)
    directory = karpenter_dir(build=True)
    if directory is None:
        raise SystemExit("bench.capacity_repair: Karpenter's kwok provider did not build")
    cp = ControlPlane(build(quiet=True), node_count=0)
    cp.start()
    print(f"control plane up in {cp.startup_seconds}s; run dir {cp.run_dir}", file=sys.stderr)
    karpenter = Karpenter(directory, cp, startup_delay=args.delay)
    repairs: list[dict[str, Any]] = []
    unlaunchable: list[dict[str, Any]] = []
    try:
        cp.assert_own_cluster(cp.kubeconfig)
        karpenter.start()
        print(f"karpenter up in {karpenter.startup_seconds}s", file=sys.stderr)
        bench = CapacityBench(
            cp,
            karpenter,
            cap=args.cap,
            pending_cap=args.pending_cap,
            wave_timeout=args.wave_timeout,
            out_dir=out_dir,
        )
        bench.setup()
        for i in range(args.rounds):
            for mode in modes:
                row = bench.repair_round(mode)
                row["round"] = i + 1
                repairs.append(row)
                print(f"  {mode} round {i + 1}: {_brief(row)}", file=sys.stderr, flush=True)
        if not args.no_unlaunchable:
            bench.unlaunchable_pools()
            for mode in modes:
                row = bench.unlaunchable_round(mode)
                unlaunchable.append(row)
                print(f"  unlaunchable {mode}: {_brief(row)}", file=sys.stderr, flush=True)
    finally:
        print(karpenter.diagnostics()[-3000:], file=sys.stderr)
        karpenter.stop()
        cp.stop()
    return repairs, unlaunchable


def _brief(row: dict[str, Any]) -> str:
    keys = (
        "below_replica_seconds", "repair_seconds", "evicted", "evictions_audit", "capacity",
        "buffers_seen", "pending", "exit_code",
    )  # fmt: skip
    return ", ".join(f"{k}={row[k]}" for k in keys if k in row)


if __name__ == "__main__":
    sys.exit(main())
