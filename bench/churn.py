"""A cluster that moves: one seeded churn trace replayed for each contestant (kwok nodes).

    bash bench/descheduler/build.sh          # once, for the descheduler contestant
    python -m bench.churn [--short | --karpenter] [--seed 1] [--duration 900] [--speedup 3]
        [--contestants nothing,descheduler,rebalancer,steer] [--variant NAME=FLAGS] [--interval 5s]
        [--steer-variant NAME=FLAGS] [--cron NAME=PERIOD[:steer]]
        [--repeat N] [--parallel] [--idle-window SECONDS]
        [--out bench/results/churn.json] [--plot docs/churn-skew.png]
    python -m bench.churn --report bench/results/churn.json [--plot docs/churn-skew.png]

The trace (``bench/trace.py``): Deployments scaled HPA-like, one rollout, one node drained
and uncordoned, one zone's nodes NotReady for three minutes and back, PDBs on some
workloads. Each contestant gets its own namespace and its own nodes (3 zones x 2, selected by a
nodeSelector), starts from the scheduler's own placement of the initial replicas, and then the
same events at the same (sped-up) times, one contestant after the other or, with
``--parallel``, all at once on one control plane (the same machine load for each);
``--repeat`` replays it again, and the report gives every run and the median and range:

* ``nothing``: no tool;
* ``descheduler``: v0.36.0, ``--descheduling-interval`` = the interval, topology-spread plugin
  only (``bench.compare``'s policy);
* ``rebalancer``: ``rebalancer run -n NS --interval`` (and ``--verify-state-every 1`` when the
  command has it);
* ``steer``: the same with a policy setting ``steerScaleDown: true``; skipped, saying so, when
  ``rebalancer policy check`` rejects that key.
* ``--variant NAME=FLAGS``, ``--steer-variant NAME=FLAGS``: ``rebalancer`` or ``steer`` with
  FLAGS added (``steer60='--interval 60s'``: the last ``--interval`` wins);
* ``--cron NAME=PERIOD[:steer]``: as a CronJob runs it, a one-shot ``rebalancer run`` (no
  ``--interval``) every PERIOD trace seconds from the trace's start (divided by the speed-up, as
  the events: every 300 trace seconds at speed-up 3 is every 100 real seconds), a run due while
  the last one still runs skipped (``concurrencyPolicy: Forbid``); every run's output appended
  to the contestant's files, its start and exit code recorded; no idle measurement (between
  runs nothing of it runs).

``--karpenter``: the same scaling on nodes Karpenter provides (``bench/karpenter_churn.py``).

Each tool talks to kube-apiserver as its own ServiceAccount (cluster-admin), so the audit
log tells its requests apart: evictions, 429 answers and pod DELETEs are counted from it. A
sampler LISTs the namespace's pods every second: skew-seconds (per sample, over every hard
zone view, how far the skew is above maxSkew, times the sample interval), the tool's RSS, and
when each pod became Ready. Thrash: a pod the tool evicted whose replacement the tool evicted
again within 10 minutes.

Most unavailable, per workload: an evicted pod counts as unavailable from its eviction until
its replacement is Ready (``eviction_windows``). The figure judged against the PDB's
maxUnavailable counts only the tool's evictions; the figure "any cause" adds the trace's own
disruptions: the drain's evictions and the pods Ready once and not now (a NotReady zone).

kube-apiserver CPU: over the replay (one contestant alone only), and per idle interval: with
the trace over and the tools stopped, a window with no tool is the baseline, then each tool is
started again alone with its production flags and, after two intervals, measured for a window;
its CPU above the baseline, per interval, is its figure. Figures are
printed, never asserted (e2e/test_churn.py asserts the invariants of the short trace).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.compare import build_descheduler, descheduler_policy
from bench.live import apiserver_pid, cpu_seconds, rss_bytes, settle
from bench.plan import RESULTS, machine
from bench.trace import (
    DRAIN,
    ROLLOUT,
    SCALE,
    UNCORDON,
    ZONE_DOWN,
    ZONE_UP,
    Trace,
    Workload,
    full_trace,
    karpenter_trace,
    short_trace,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "churn"
ZONE = "topology.kubernetes.io/zone"
CONTESTANT_LABEL = "bench.rebalancer/churn"
CONTESTANTS = ("nothing", "descheduler", "rebalancer", "steer")
VARIANTS: dict[str, list[str]] = {}
"""``--variant NAME=FLAGS``: more evict-mode contestants, ``rebalancer run`` with these flags
added (to measure a setting side by side with the default; never the default's figures)."""
STEER_VARIANTS: dict[str, list[str]] = {}
"""``--steer-variant NAME=FLAGS``: more steering contestants, ``steer``'s command with these
flags added (later flags win: ``--interval 60s`` replaces the bench's interval)."""


@dataclass(frozen=True, slots=True)
class Cron:
    """``--cron NAME=PERIOD[:steer]``: a CronJob-like contestant, a one-shot ``rebalancer run``
    (no ``--interval``) started every ``period`` trace seconds, skipped while the previous run
    is still going (``concurrencyPolicy: Forbid``)."""

    period: float  # trace seconds
    steer: bool


CRONS: dict[str, Cron] = {}
NAME = re.compile(r"[a-z](?:[a-z0-9-]{0,10}[a-z0-9])?")
"""A contestant's own name: a short DNS label (its ServiceAccount ``churn-NAME``, the first five
characters in its nodes' and namespace's names)."""
THRASH_WINDOW = 600.0
REPLACEMENT_SECONDS = 5.0
SAMPLE_SECONDS = 1.0
TAIL_SECONDS = 10.0
STOP_GRACE = 30.0


@dataclass(slots=True)
class Result:
    contestant: str
    skipped: str = ""
    skew_seconds: float = 0.0
    evictions: int = 0
    thrash: int = 0
    http_429: int = 0
    loops_429: int = 0
    deletes: int = 0
    most_unavailable: dict[str, int] = field(default_factory=dict)  # by the tool's evictions
    most_unavailable_overall: dict[str, int] = field(default_factory=dict)  # any cause
    trace_evictions: int = 0  # the trace's own (the drain's)
    # per workload, (from, to, pod) of each of the tool's evictions, seconds since about the start
    tool_windows: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)
    pdb: dict[str, int] = field(default_factory=dict)
    apiserver_cpu_s: float | None = None  # over the replay; None: shared with other contestants
    idle_cpu_ms: float | None = None  # kube-apiserver CPU-ms per idle interval, baseline off
    idle_baseline_ms: float | None = None  # the same with no tool running
    seconds: float = 0.0
    rss_mib: list[tuple[float, float]] = field(default_factory=list)
    skew: list[tuple[float, int]] = field(default_factory=list)
    exit_code: int | None = None
    verify_differences: int | None = None
    # the sampler's scale-downs (two pods or more gone between samples, none new): how many,
    # how many took only pods of the workload's most crowded nodes (the ReplicaSet's
    # "doubled-up" rank), how many moved a view from within maxSkew to beyond it
    scale_downs: dict[str, int] = field(default_factory=dict)
    pending_pod_seconds: float = 0.0  # per sample, the namespace's pods not yet on a node
    # Karpenter's trace only (bench/karpenter_churn.py); None elsewhere
    karpenter: dict[str, float] | None = None
    cost_patches: int = 0  # PATCHes of pods the API server granted the tool: deletion costs
    # a cron contestant's runs: when each started (real seconds since the trace's start) and
    # its exit code (the last one's perhaps SIGTERM's, at the end of the trace)
    runs: list[float] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    skipped_runs: list[float] = field(default_factory=list)  # due while the last one still ran

    @property
    def beyond_pdb(self) -> bool:
        return any(self.most_unavailable.get(w, 0) > n for w, n in self.pdb.items())


_REPLAYS = itertools.count(1)
TOOL_NAMESPACE = "rebalancer"  # where the tools' ServiceAccounts live (and run's Lease)


def user_of(contestant: str) -> str:
    return f"system:serviceaccount:{TOOL_NAMESPACE}:churn-{contestant}"


def tool_kubeconfig(cp: Any, contestant: str) -> Path:
    """A kubeconfig of the contestant's own ServiceAccount (bound to cluster-admin), so that
    the audit log tells its requests apart by user."""
    sa = f"churn-{contestant}"
    cp.kubectl("create", "serviceaccount", sa, "-n", TOOL_NAMESPACE, check=False)
    cp.kubectl(
        "create", "clusterrolebinding", sa, "--clusterrole=cluster-admin",
        f"--serviceaccount={TOOL_NAMESPACE}:{sa}", check=False,
    )  # fmt: skip
    path: Path = cp.token_kubeconfig(TOOL_NAMESPACE, sa)
    return path


def _rfc3339(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


# ---------------------------------------------------------------------------------------------
# The cluster side


class Replay:
    """One contestant's nodes, namespace, workloads, tool process and sampler."""

    def __init__(self, cp: Any, trace: Trace, contestant: str, *, speedup: float) -> None:
        self.cp = cp
        self.trace = trace
        self.contestant = contestant
        self.speedup = speedup
        tag = f"{contestant[:5]}-{os.getpid() % 10000}-{next(_REPLAYS)}"  # one per replay
        self.tag = tag
        self.ns = f"churn-{tag}"
        self.nodes = {
            f"{tag}-z{z}-n{n}": f"{tag}-z{z}"
            for z in range(trace.zones)
            for n in range(trace.nodes_per_zone)
        }
        self.zones = sorted(set(self.nodes.values()))
        self.samples: list[tuple[float, int]] = []
        self.pending: list[tuple[float, int]] = []  # per sample: pods not yet bound to a node
        # per sample: seconds since t0, workload -> (pod, node) of its bound, non-terminating pods
        self.layouts: list[tuple[float, dict[str, list[tuple[str, str]]]]] = []
        self.first_seen: dict[str, tuple[str, float]] = {}  # pod -> (workload, wall time)
        self.ready_at: dict[str, float] = {}  # pod -> when it first became Ready
        self.last_seen: dict[str, float] = {}  # pod -> the last sample that listed it
        self.lost: list[tuple[float, Counter[str]]] = []  # wall time, app -> Ready pods lost
        self.desired = {w.name: w.replicas for w in trace.workloads}
        self.moot: list[tuple[float, str]] = []  # wall time, workload scaled down or rolled out
        self.rss: list[tuple[float, float]] = []
        self.pid: int | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.ended: float | None = None  # when the trace and its tail were over

    def node(self, short: str) -> str:
        return f"{self.tag}-{short}"

    # -- setup -------------------------------------------------------------------------------
    def pod_spec(self, w: Workload) -> dict[str, Any]:
        constraints: list[dict[str, Any]] = [
            {
                "maxSkew": w.max_skew,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": w.name}},
            }
        ]
        if w.soft_hostname:
            constraints.append(
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": w.name}},
                }
            )
        return {
            "nodeSelector": {CONTESTANT_LABEL: self.tag},
            "terminationGracePeriodSeconds": 1,
            "topologySpreadConstraints": constraints,
            "containers": [
                {
                    "name": "app",
                    "image": "bench/app:1",
                    "resources": {"requests": {"cpu": w.cpu, "memory": "16Mi"}},
                }
            ],
        }

    def setup(self) -> None:
        self.setup_nodes()
        self.setup_workloads()

    def setup_nodes(self) -> None:
        cp = self.cp
        manifests = []
        for name, zone in self.nodes.items():
            node = cp.node_manifest(name, zone, {CONTESTANT_LABEL: self.tag})
            manifests.append(node)
        cp.apply(manifests)
        cp.wait_for(
            f"{self.tag} nodes Ready",
            lambda: all(cp.node_ready(n) for n in self.nodes) or None,
            timeout=120,
        )

    def setup_workloads(self) -> None:
        cp = self.cp
        cp.kubectl("create", "namespace", self.ns)
        cp.wait_for(
            f"default ServiceAccount in {self.ns}",
            lambda: (
                cp.kubectl("get", "sa", "default", "-n", self.ns, check=False).returncode == 0
                or None
            ),
            timeout=60,
        )
        objs: list[dict[str, Any]] = []
        for w in self.trace.workloads:
            labels = {"app": w.name}
            objs.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": w.name, "namespace": self.ns, "labels": labels},
                    "spec": {
                        "replicas": w.replicas,
                        "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels}, "spec": self.pod_spec(w)},
                    },
                }
            )
            if w.pdb_max_unavailable is not None:
                objs.append(
                    {
                        "apiVersion": "policy/v1",
                        "kind": "PodDisruptionBudget",
                        "metadata": {"name": w.name, "namespace": self.ns},
                        "spec": {
                            "maxUnavailable": w.pdb_max_unavailable,
                            "selector": {"matchLabels": labels},
                        },
                    }
                )
        cp.apply(objs)
        for w in self.trace.workloads:
            cp.wait_pods_running(self.ns, f"app={w.name}", w.replicas, timeout=180)

    def cleanup(self) -> None:
        self.cp.kubectl("delete", "namespace", self.ns, "--wait=false", check=False)
        self.cp.kubectl(
            "delete", "nodes", "-l", f"{CONTESTANT_LABEL}={self.tag}", "--wait=false", check=False
        )

    # -- the events ----------------------------------------------------------------------------
    def apply_event(self, kind: str, target: str, value: int) -> None:
        cp, ns = self.cp, self.ns
        if kind == ROLLOUT or (kind == SCALE and value < self.desired[target]):
            self.moot.append((time.time(), target))
        if kind == SCALE:
            self.desired[target] = value
            cp.kubectl("scale", "deployment", target, "-n", ns, f"--replicas={value}", check=False)
        elif kind == ROLLOUT:
            patch = {"spec": {"template": {"metadata": {"annotations": {"churn/rev": "2"}}}}}
            cp.kubectl("patch", "deployment", target, "-n", ns, "-p", json.dumps(patch))
        elif kind == DRAIN:
            # evictions as the admin user (not the tool's), bounded: a PDB may hold it back
            cp.kubectl(
                "drain", self.node(target), "--ignore-daemonsets", "--timeout=60s",
                check=False, timeout=90,
            )  # fmt: skip
        elif kind == UNCORDON:
            cp.kubectl("uncordon", self.node(target), check=False)
        elif kind in (ZONE_DOWN, ZONE_UP):
            zone = f"{self.tag}-{target}"
            for name, z in self.nodes.items():
                if z == zone:
                    cp.set_node_ready(name, kind == ZONE_UP, timeout=90)

    def replay_events(self, t0: float) -> None:
        workers: list[threading.Thread] = []
        for ev in self.trace.events:
            wait = t0 + ev.at / self.speedup - time.time()
            if wait > 0 and self._stop.wait(wait):
                break
            th = threading.Thread(
                target=self.apply_event, args=(ev.kind, ev.target, ev.value), daemon=True
            )
            th.start()
            workers.append(th)
        for th in workers:
            th.join(timeout=120)

    # -- sampling ------------------------------------------------------------------------------
    def saw_ready(self, name: str, at: float) -> None:
        """``name`` was Ready by ``at``: keep the earliest such time (an upper bound on when it
        became Ready)."""
        with self._lock:
            if at < self.ready_at.get(name, math.inf):
                self.ready_at[name] = at

    def watch_ready(self) -> None:
        """A WATCH of the namespace's pods: the moment an event shows a pod Ready bounds its
        Ready time to milliseconds (the sampler's second would not tell an eviction made just
        after a replacement became Ready from one made just before)."""
        from rebalancer.cluster.api.kubeclient import connect  # noqa: PLC0415

        kube = connect(str(self.cp.kubeconfig))
        version = "0"
        while not self._stop.is_set():
            try:
                for line in kube.watch_lines("pods", self.ns, version, 30):
                    now = time.time()
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    version = meta.get("resourceVersion") or version
                    if event.get("type") not in ("ADDED", "MODIFIED"):
                        continue
                    ready = next(
                        (
                            c
                            for c in (obj.get("status") or {}).get("conditions") or ()
                            if c.get("type") == "Ready" and c.get("status") == "True"
                        ),
                        None,
                    )
                    if ready is not None and meta.get("name"):
                        self.saw_ready(meta["name"], ready_time(ready, now))
                    if self._stop.is_set():
                        break
            except Exception:  # an expired version or a broken stream: watch again from now
                version = "0"
                self._stop.wait(0.2)
        kube.close()

    def sample_loop(self, t0: float) -> None:
        from rebalancer.cluster.api.kubeclient import connect  # noqa: PLC0415

        kube = connect(str(self.cp.kubeconfig))
        by_name = {w.name: w for w in self.trace.workloads}
        next_at = time.time()
        while not self._stop.is_set():
            now = time.time()
            try:
                self.observe(kube, now - t0)
                pods = kube.list_pods(self.ns)
            except Exception:  # a slow moment: skip this sample
                pods = None
            if pods is not None:
                placed: dict[str, list[tuple[str, str]]] = {w: [] for w in by_name}
                lost: Counter[str] = Counter()
                unbound = 0
                for p in pods:
                    meta, spec, status = p["metadata"], p["spec"], p.get("status") or {}
                    app = (meta.get("labels") or {}).get("app", "")
                    if app not in by_name:
                        continue
                    name = meta["name"]
                    self.first_seen.setdefault(name, (app, now))
                    self.last_seen[name] = now
                    ready = next(
                        (
                            c
                            for c in status.get("conditions") or ()
                            if c.get("type") == "Ready" and c.get("status") == "True"
                        ),
                        None,
                    )
                    if ready is not None:
                        self.saw_ready(name, ready_time(ready, now))
                    elif (
                        ready is None
                        and name in self.ready_at
                        and not meta.get("deletionTimestamp")
                    ):
                        lost[app] += 1  # Ready once, not now, not going: a NotReady node
                    node = spec.get("nodeName")
                    if node in self.nodes and not meta.get("deletionTimestamp"):
                        placed[app].append((name, node))
                    elif not node and not meta.get("deletionTimestamp"):
                        unbound += 1
                excess = sum(
                    max(0, zone_skew(on, self.nodes, self.zones) - by_name[app].max_skew)
                    for app, on in placed.items()
                )
                self.samples.append((now - t0, excess))
                self.pending.append((now - t0, unbound))
                self.layouts.append((now - t0, placed))
                self.lost.append((now, lost))
            rss = rss_bytes(self.pid) if self.pid is not None else 0
            if rss:
                self.rss.append((now - t0, rss / 2**20))
            next_at += SAMPLE_SECONDS
            self._stop.wait(max(0.0, next_at - time.time()))
        kube.close()

    def observe(self, kube: Any, at: float) -> None:
        """Each sample, before the pods are listed (``at``: seconds since the trace's start):
        nothing here; Karpenter's replay reads its nodes."""

    def score_more(
        self,
        result: Result,
        events: Sequence[dict[str, Any]],
        matched: Sequence[tuple[float, str, str, str | None]],
        mine: set[str],
    ) -> None:
        """More figures from the audit log's ``events`` (the replay's window) and the matched
        evictions: none here; Karpenter's replay adds its own."""


# ---------------------------------------------------------------------------------------------
# The contestants


def steer_supported(policy: Path) -> tuple[bool, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "rebalancer", "policy", "check", str(policy)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    text = (proc.stderr or proc.stdout).strip().splitlines()
    return proc.returncode == 0, text[-1] if text else f"exit {proc.returncode}"


def has_flag(flag: str) -> bool:
    proc = subprocess.run(
        [sys.executable, "-m", "rebalancer", "run", "--help"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    return flag in proc.stdout


def named_spec(flag: str, spec: str, taken: Sequence[str]) -> tuple[str, str]:
    """``NAME=REST`` of ``--variant``, ``--steer-variant`` or ``--cron``: (NAME, REST); a
    ValueError naming the flag and the value when NAME is no short DNS label or taken."""
    name, sep, rest = spec.partition("=")
    if not sep or not NAME.fullmatch(name):
        raise ValueError(
            f"{flag}: {spec!r}: want NAME={'PERIOD[:steer]' if flag == '--cron' else 'FLAGS'}, "
            "NAME a short DNS label (a-z, 0-9, '-', at most 12 characters, a letter first)"
        )
    if name in taken:
        raise ValueError(f"{flag}: {spec!r}: the name {name!r} is taken")
    return name, rest


def cron_of(spec: str, taken: Sequence[str]) -> tuple[str, Cron]:
    """``--cron NAME=PERIOD[:steer]``: PERIOD in trace seconds (``300``, ``300s``, ``5m``),
    ``:steer`` for the steering policy (else evict mode's defaults)."""
    name, rest = named_spec("--cron", spec, taken)
    period, sep, mode = rest.partition(":")
    if sep and mode != "steer":
        raise ValueError(f"--cron: {spec!r}: {mode!r} after the period: only 'steer' is known")
    try:
        seconds = seconds_of(period)
    except ValueError:
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"--cron: {spec!r}: PERIOD {period!r}: want trace seconds above 0")
    return name, Cron(seconds, bool(sep))


def cron_due(period: float, speedup: float, duration: float) -> list[float]:
    """When a cron contestant's runs are due, in real seconds from the trace's start: trace
    times 0, ``period``, 2 ``period``, ... before the trace's ``duration``, divided by
    ``speedup`` (as the trace's events)."""
    return [k * period / speedup for k in range(math.ceil(duration / period))]


def cron_loop(
    due: Sequence[float],
    wait_until: Callable[[float], bool],
    running: Callable[[], bool],
    start: Callable[[float], None],
) -> list[float]:
    """Start a run at each of ``due`` (``wait_until(t)`` waits for it, True: stop now) unless
    the previous one is still ``running()`` (``concurrencyPolicy: Forbid``: that one is
    skipped, not queued); ``start(t)`` starts one. Returns the skipped due times."""
    skipped = []
    for at in due:
        if wait_until(at):
            break
        if running():
            skipped.append(at)
        else:
            start(at)
    return skipped


def steers(contestant: str) -> bool:
    """Whether the contestant runs with the steering policy (``steerScaleDown: true``)."""
    cron = CRONS.get(contestant)
    return contestant == "steer" or contestant in STEER_VARIANTS or bool(cron and cron.steer)


def tool_argv(
    contestant: str, replay: Replay, kubeconfig: Path, interval: str, descheduler: Path | None
) -> list[str] | None:
    ns = replay.ns
    stem = OUT / f"{replay.tag}"
    if contestant == "nothing":
        return None
    if contestant == "descheduler":
        assert descheduler is not None
        policy = stem.with_suffix(".descheduler.json")
        policy.write_text(json.dumps(descheduler_policy(ns)))
        return [
            str(descheduler), "--kubeconfig", str(kubeconfig),
            "--policy-config-file", str(policy), "--descheduling-interval", interval,
            "--bind-address", "127.0.0.1", "--secure-port", "0", "--v", "2",
        ]  # fmt: skip
    # a cron contestant's run is one-shot: no --interval (nor the loop's state check)
    loop = contestant not in CRONS
    argv = [
        sys.executable, "-m", "rebalancer", "run", "-n", ns,
        *(["--interval", interval] if loop else []),
        "--kubeconfig", str(kubeconfig), "-o", "json",
    ]  # fmt: skip
    # its own Lease: rebalancer contestants running together must not wait for each other
    argv += ["--lease-name", f"churn-{replay.tag}"]
    if loop and has_flag("--verify-state-every"):
        argv += ["--verify-state-every", "1"]
    if steers(contestant):
        argv += ["--policy", str(steer_policy(stem))]
    return argv + VARIANTS.get(contestant, []) + STEER_VARIANTS.get(contestant, [])


def steer_policy(stem: Path) -> Path:
    path = stem.with_suffix(".steer.yaml")
    path.write_text(
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\nsteerScaleDown: true\n"
    )
    return path


# ---------------------------------------------------------------------------------------------
# Reading the audit log


def audited(cp: Any, since: float, until: float) -> list[dict[str, Any]]:
    """The audit log's completed requests received from ``since`` to ``until``."""
    return [
        ev
        for ev in cp.audit_events()
        if ev.get("stage") == "ResponseComplete"
        and since <= _rfc3339(ev["requestReceivedTimestamp"]) <= until
    ]


def tool_requests(events: Sequence[dict[str, Any]], user: str) -> list[dict[str, Any]]:
    return [ev for ev in events if (ev.get("user") or {}).get("username") == user]


def in_namespace(events: Sequence[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    return [ev for ev in events if (ev.get("objectRef") or {}).get("namespace") == ns]


def evictions_of(requests: Sequence[dict[str, Any]]) -> list[tuple[float, str]]:
    """(time, pod name) of every eviction the API server granted."""
    out = []
    for ev in requests:
        ref = ev.get("objectRef") or {}
        code = (ev.get("responseStatus") or {}).get("code")
        if (
            ev.get("verb") == "create"
            and ref.get("resource") == "pods"
            and ref.get("subresource") == "eviction"
            and code in (200, 201)
        ):
            out.append((_rfc3339(ev["requestReceivedTimestamp"]), ref.get("name", "")))
    return sorted(out)


def loops_429(requests: Sequence[dict[str, Any]], run: int = 3) -> int:
    """Objects answered 429 at least ``run`` times in a row."""
    streak: Counter[str] = Counter()
    loops = set()
    for ev in requests:
        ref = ev.get("objectRef") or {}
        key = f"{ref.get('namespace')}/{ref.get('name')}/{ref.get('subresource')}"
        if (ev.get("responseStatus") or {}).get("code") == 429:
            streak[key] += 1
            if streak[key] >= run:
                loops.add(key)
        else:
            streak[key] = 0
    return len(loops)


def replacements(
    evictions: Sequence[tuple[float, str]],
    first_seen: dict[str, tuple[str, float]],
) -> list[tuple[float, str, str, str | None]]:
    """(time, pod, workload, replacement): the replacement of an eviction is the workload's
    first pod first seen after it, within :data:`REPLACEMENT_SECONDS`, not already another
    eviction's (none: a scale-down made it moot; a scale-up's new pod seen in the same second
    can still be taken for one: an approximation)."""
    created: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for pod, (app, at) in first_seen.items():
        created[app].append((at, pod))
    for v in created.values():
        v.sort()
    taken: set[str] = set()
    out = []
    for at, pod in evictions:
        app = first_seen.get(pod, ("", 0.0))[0]
        repl = next(
            (
                p
                for t, p in created.get(app, ())
                if at <= t <= at + REPLACEMENT_SECONDS and p not in taken
            ),
            None,
        )
        if repl is not None:
            taken.add(repl)
        out.append((at, pod, app, repl))
    return out


def thrash(
    matched: Sequence[tuple[float, str, str, str | None]], mine: set[str] | None = None
) -> int:
    """Evictions of ``mine`` (default: all) whose replacement ``mine`` evicted again within
    :data:`THRASH_WINDOW`."""
    evicted_at = {pod: at for at, pod, _, _ in matched if mine is None or pod in mine}
    return sum(
        1
        for at, pod, _, repl in matched
        if pod in evicted_at
        and repl is not None
        and repl in evicted_at
        and evicted_at[repl] - at <= THRASH_WINDOW
    )


def zone_skew(
    pods: Sequence[tuple[str, str]], zone_of: Mapping[str, str], zones: Sequence[str]
) -> int:
    """Most minus fewest of ``pods`` ((pod, node) pairs) in any of ``zones``; a zone with
    none counts 0."""
    c = Counter(zone_of[node] for _, node in pods)
    return max(c[z] for z in zones) - min(c[z] for z in zones)


def scale_downs(
    layouts: Sequence[tuple[float, Mapping[str, Sequence[tuple[str, str]]]]],
    zone_of: Mapping[str, str],
    max_skew: Mapping[str, int],
) -> dict[str, int]:
    """What the ReplicaSet controller's scale-downs did to the spread, from the sampler's
    layouts: between two samples, two pods or more of a workload gone and none new. ``seen``:
    how many; ``most_crowded``: how many took only pods that were on the workload's most
    crowded nodes (most of its pods on one node: the ReplicaSet removes those first);
    ``made_skew``: how many left the workload's zone view beyond ``max_skew`` when it was
    within before. A zone with no pod counts as 0; only the zones of ``zone_of`` count."""
    zones = sorted(set(zone_of.values()))
    out = {"seen": 0, "most_crowded": 0, "made_skew": 0}
    for (_, before), (_, after) in itertools.pairwise(layouts):
        for app, was in before.items():
            now = after.get(app, ())
            names = {pod for pod, _ in now}
            gone = [(pod, node) for pod, node in was if pod not in names]
            if len(gone) < 2 or len(names - {pod for pod, _ in was}) > 0:
                continue
            out["seen"] += 1
            per_node = Counter(node for _, node in was)
            top = max(per_node.values())
            out["most_crowded"] += all(per_node[node] == top for _, node in gone)
            limit = max_skew[app]
            out["made_skew"] += (
                zone_skew(was, zone_of, zones) <= limit < zone_skew(now, zone_of, zones)
            )
    return out


def ready_time(condition: dict[str, Any], seen: float) -> float:
    """When a pod became Ready: its Ready condition's lastTransitionTime (whole seconds, so up
    to a second early) plus one second, but no later than the sample that saw it Ready. An
    upper bound: a pod is never taken for Ready before it was."""
    stamp = condition.get("lastTransitionTime")
    if not stamp:
        return seen
    try:
        return min(seen, _rfc3339(str(stamp)) + 1.0)
    except ValueError:
        return seen


def eviction_windows(
    matched: Sequence[tuple[float, str, str, str | None]],
    ready_at: dict[str, float],
    last_seen: dict[str, float],
    moot: Sequence[tuple[float, str]],
    end: float,
) -> dict[str, list[tuple[float, float, str]]]:
    """Per workload, (from, to, pod) of each eviction: the evicted pod counts as unavailable
    from its eviction until its replacement is Ready. A replacement that never became Ready
    closes the window when it was last seen (deleted before Ready); no replacement at all (a
    scale-down had already made it moot, or none was matched) closes it at the workload's next
    scale-down or rollout after the eviction (which makes a replacement moot), else at
    ``end``."""
    out: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for at, pod, app, repl in matched:
        later_moot = next((t for t, w in sorted(moot) if t > at and w == app), end)
        if repl is not None and repl in ready_at:
            until = ready_at[repl]
        elif repl is not None and repl in last_seen:
            until = min(last_seen[repl], later_moot)
        else:
            until = later_moot
        out[app].append((at, max(at, min(until, end)), pod))
    return dict(out)


def most_at_once(windows: Sequence[tuple[float, float, str]]) -> int:
    """The most windows [from, to) open at one time (one closing as another opens: not both)."""
    edges = sorted(
        [(start, 1) for start, stop, _ in windows if stop > start]
        + [(stop, -1) for start, stop, _ in windows if stop > start]
    )
    level = top = 0
    for _, step in edges:  # at one time, -1 sorts before +1
        level += step
        top = max(top, level)
    return top


def most_unavailable(
    windows: dict[str, list[tuple[float, float, str]]], mine: set[str]
) -> dict[str, int]:
    """Per workload, the most of its pods unavailable at once because of the evictions of
    ``mine`` (the tool's evicted pods): what the tool's PDB compliance is judged by."""
    out = {}
    for app, ws in windows.items():
        top = most_at_once([w for w in ws if w[2] in mine])
        if top:
            out[app] = top
    return out


def most_unavailable_overall(
    windows: dict[str, list[tuple[float, float, str]]],
    lost: Sequence[tuple[float, Counter[str]]],
) -> dict[str, int]:
    """Per workload, the most of its pods unavailable at once for any reason: every eviction's
    window (the tool's and the trace's drain) plus, from each sample until the next, the pods
    that were Ready once and are not now without going away (on a NotReady node). Pods of a
    scale-up not yet Ready are not counted: no replica was taken away."""
    samples = sorted(lost, key=lambda s: s[0])
    times = [t for t, _ in samples]
    out: dict[str, int] = {}
    apps = set(windows) | {a for _, c in samples for a in c}
    for app in apps:
        ws = [w for w in windows.get(app, ()) if w[1] > w[0]]
        points = sorted({w[0] for w in ws} | set(times))
        top = 0
        for t in points:
            k = bisect.bisect_right(times, t) - 1
            level = sum(1 for start, stop, _ in ws if start <= t < stop)
            level += samples[k][1][app] if k >= 0 else 0
            top = max(top, level)
        if top:
            out[app] = top
    return out


# ---------------------------------------------------------------------------------------------
# One contestant


class Contest:
    """One contestant's replay and tool process, in phases: ``prepare`` (nodes, workloads,
    kubeconfig), ``start`` (the tool, the sampler, the events), ``wait``, ``stop`` and
    ``finish`` (the figures; the namespace and nodes deleted)."""

    def __init__(
        self,
        cp: Any,
        trace: Trace,
        contestant: str,
        *,
        speedup: float,
        interval: str,
        descheduler: Path | None,
        replay: type[Replay] | None = None,
    ) -> None:
        self.cp = cp
        self.result = Result(contestant)
        self.replay = (replay or Replay)(cp, trace, contestant, speedup=speedup)
        self.interval = interval
        self.descheduler = descheduler
        self.argv: list[str] | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.stem = OUT / self.replay.tag
        self.since = 0.0
        self.t0 = 0.0
        self.stopped: float | None = None
        self._files: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._cron_procs: list[subprocess.Popen[bytes]] = []

    def prepare(self) -> bool:
        """False (and the result says why) when the contestant cannot run here."""
        OUT.mkdir(parents=True, exist_ok=True)
        c = self.result.contestant
        if steers(c):
            ok, why = steer_supported(steer_policy(self.stem))
            if not ok:
                self.result.skipped = f"steerScaleDown not supported by this rebalancer: {why}"
                print(f"  {c}: SKIPPED ({self.result.skipped})", file=sys.stderr, flush=True)
                return False
        self.replay.setup()
        kubeconfig = tool_kubeconfig(self.cp, c)
        self.argv = tool_argv(c, self.replay, kubeconfig, self.interval, self.descheduler)
        return True

    def launch(self) -> None:
        """The tool's process (before the trace starts; a cron contestant's first run is
        started with the trace)."""
        self.since = time.time()
        if self.argv is not None:
            out = self.stem.with_suffix(".out").open("wb")
            err = self.stem.with_suffix(".err").open("wb")
            self._files = [out, err]
            if self.result.contestant not in CRONS:
                self.proc = subprocess.Popen(self.argv, stdout=out, stderr=err, cwd=ROOT)
                self.replay.pid = self.proc.pid

    def start(self, t0: float) -> None:
        """The sampler and the trace's events (and a cron contestant's runs), timed from
        ``t0``."""
        self.t0 = t0
        threading.Thread(target=self.replay.watch_ready, daemon=True).start()
        targets: list[Any] = [self.replay.sample_loop, self.replay.replay_events]
        if self.argv is not None and self.result.contestant in CRONS:
            targets.append(self.cron)
        for target in targets:
            th = threading.Thread(target=target, args=(t0,), daemon=True)
            th.start()
            self._threads.append(th)

    def cron(self, t0: float) -> None:
        """A cron contestant's runs (:func:`cron_due`, :func:`cron_loop`): each one-shot run's
        output appended to the contestant's files; the sampler's RSS is the run in progress."""
        assert self.argv is not None
        argv, trace, stop = self.argv, self.replay.trace, self.replay._stop
        procs: list[subprocess.Popen[bytes]] = []
        self._cron_procs = procs

        def wait_until(at: float) -> bool:
            return stop.wait(max(0.0, t0 + at - time.time()))

        def running() -> bool:
            return bool(procs) and procs[-1].poll() is None

        def start(at: float) -> None:
            out, err = self._files
            err.write(f"# cron run {len(procs) + 1}, due at +{at:.1f} s\n".encode())
            err.flush()
            procs.append(subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT))
            self.proc = procs[-1]
            self.replay.pid = procs[-1].pid
            self.result.runs.append(round(time.time() - t0, 1))

        period = CRONS[self.result.contestant].period
        due = cron_due(period, self.replay.speedup, trace.duration)
        self.result.skipped_runs = [
            round(at, 1) for at in cron_loop(due, wait_until, running, start)
        ]

    def end_at(self) -> float:
        return self.t0 + self.replay.trace.duration / self.replay.speedup + TAIL_SECONDS

    def end_replay(self) -> None:
        """The trace is over: stop sampling (the tool keeps running)."""
        self.replay.ended = time.time()
        self.replay._stop.set()
        for th in self._threads:
            th.join(timeout=120)
        self.result.seconds = round(time.time() - self.t0, 1)

    def stop(self) -> None:
        self.replay._stop.set()  # (already, unless a failure cut the replay short)
        if self.stopped is None:
            self.stopped = time.time()
        proc = self.proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                self.result.exit_code = proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                self.result.exit_code = proc.wait()
        # a cron contestant's runs: each ended (the last one perhaps by the SIGTERM above)
        self.result.exit_codes = [p.wait() for p in self._cron_procs]
        for fh in self._files:
            fh.close()

    def finish(self) -> Result:
        # until the tool stopped: the idle measurement's fresh processes are not scored
        score(self.cp, self.result, self.replay, self.since, self.stopped or time.time())
        self.result.verify_differences = verify_differences(self.stem.with_suffix(".err"))
        self.replay.cleanup()
        print(f"  {self.result.contestant}: {summary_line(self.result)}", file=sys.stderr)
        return self.result


def seconds_of(interval: str) -> float:
    """``5s``, ``2m``, ``500ms`` or a bare number of seconds."""
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if interval.endswith(suffix) and interval[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(interval[: -len(suffix)]) * factor
    return float(interval)


def idle_argv(argv: Sequence[str]) -> list[str]:
    """The tool's command line as in production: without the bench's state check."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--verify-state-every":
            skip = True
        else:
            out.append(arg)
    return out


def measure_idle(
    apiserver: int | None, contests: Sequence[Contest], window: float, interval: float
) -> None:
    """kube-apiserver CPU per idle interval, the trace over, the tools stopped and the cluster
    quiet: first a window with no tool (the baseline), then each tool alone, started afresh
    with its production flags (no ``--verify-state-every``), given two intervals to make its
    first LISTs and watches, then a window. ``idle_cpu_ms`` is the tool's window minus the
    baseline's, per interval (none for ``nothing``, nor for a cron contestant: between its
    runs no process of it runs, and a run's cost is its one read, not a loop's interval)."""
    per = max(1.0, window / interval)
    settle(apiserver)
    cpu0 = cpu_seconds(apiserver)
    time.sleep(window)
    baseline = (cpu_seconds(apiserver) - cpu0) / per * 1000
    for c in contests:
        c.result.idle_baseline_ms = round(baseline, 1)
        if c.argv is None or c.result.contestant in CRONS:
            continue
        with c.stem.with_suffix(".idle.err").open("wb") as err:
            proc = subprocess.Popen(
                idle_argv(c.argv), stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT
            )
            try:
                time.sleep(2 * interval + 3.0)
                cpu0 = cpu_seconds(apiserver)
                time.sleep(window)
                spent = cpu_seconds(apiserver) - cpu0
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        c.result.idle_cpu_ms = round(spent / per * 1000 - baseline, 1)


def run_contestant(
    cp: Any,
    trace: Trace,
    contestant: str,
    *,
    speedup: float,
    interval: str,
    descheduler: Path | None = None,
    idle_window: float = 0.0,
    replay: type[Replay] | None = None,
) -> Result:
    """One contestant alone on the control plane."""
    (result,) = run_together(
        cp,
        trace,
        [contestant],
        speedup=speedup,
        interval=interval,
        descheduler=descheduler,
        idle_window=idle_window,
        replay=replay,
    )
    return result


def run_together(
    cp: Any,
    trace: Trace,
    contestants: Sequence[str],
    *,
    speedup: float,
    interval: str,
    descheduler: Path | None = None,
    idle_window: float = 0.0,
    replay: type[Replay] | None = None,
) -> list[Result]:
    """The contestants at the same time, each on its own nodes and namespace, the trace
    started for all at the same moment (kube-apiserver CPU over the replay is then shared:
    recorded only for one contestant alone; the idle CPU is measured per tool). ``replay``:
    the kind of replay (default :class:`Replay`, on fixed kwok nodes)."""
    contests = [
        Contest(
            cp,
            trace,
            c,
            speedup=speedup,
            interval=interval,
            descheduler=descheduler,
            replay=replay,
        )
        for c in contestants
    ]
    ready = [c for c in contests if c.prepare()]
    apiserver = apiserver_pid(str(cp.kubeconfig))
    cpu0 = cpu_seconds(apiserver)
    try:
        for c in ready:
            c.launch()
        t0 = time.time()
        for c in ready:
            c.start(t0)
        end = max((c.end_at() for c in ready), default=time.time())
        while time.time() < end:
            time.sleep(min(1.0, end - time.time()))
        for c in ready:
            c.end_replay()
        replay_cpu = round(cpu_seconds(apiserver) - cpu0, 2)
        if len(ready) == 1:
            ready[0].result.apiserver_cpu_s = replay_cpu
        for c in ready:
            c.stop()
        if idle_window > 0:
            measure_idle(apiserver, ready, idle_window, seconds_of(interval))
    finally:
        for c in ready:
            c.stop()
    if idle_window <= 0:
        time.sleep(2.0)  # the audit log's batch backend
    for c in ready:
        c.finish()
    return [c.result for c in contests]


def score(cp: Any, result: Result, replay: Replay, since: float, until: float) -> None:
    """The audit log's and the sampler's figures of one contestant, into ``result``."""
    events = audited(cp, since, until)
    requests = tool_requests(events, user_of(result.contestant))
    evictions = evictions_of(requests)
    mine = {pod for _, pod in evictions}
    # Every eviction in the namespace (the tool's and the trace's drain), matched to
    # replacements together so that no new pod is taken for two evictions' replacement.
    everyone = evictions_of(in_namespace(events, replay.ns))
    matched = replacements(everyone, replay.first_seen)
    result.evictions = len(evictions)
    result.trace_evictions = len(everyone) - len(evictions)
    result.thrash = thrash(matched, mine)
    result.http_429 = sum(
        1 for ev in requests if (ev.get("responseStatus") or {}).get("code") == 429
    )
    result.loops_429 = loops_429(requests)
    result.deletes = sum(
        1
        for ev in requests
        if ev.get("verb") == "delete" and (ev.get("objectRef") or {}).get("resource") == "pods"
    )
    result.cost_patches = cost_patches(requests)
    windows = eviction_windows(
        matched, replay.ready_at, replay.last_seen, replay.moot, replay.ended or time.time()
    )
    result.most_unavailable = most_unavailable(windows, mine)
    start = (
        replay.ended - replay.trace.duration / replay.speedup - TAIL_SECONDS
        if replay.ended
        else 0.0
    )
    result.tool_windows = {
        app: [(round(a - start, 3), round(b - start, 3), pod) for a, b, pod in ws if pod in mine]
        for app, ws in windows.items()
    }
    result.most_unavailable_overall = most_unavailable_overall(windows, replay.lost)
    result.pdb = {
        w.name: w.pdb_max_unavailable
        for w in replay.trace.workloads
        if w.pdb_max_unavailable is not None
    }
    result.skew = replay.samples
    result.scale_downs = scale_downs(
        replay.layouts, replay.nodes, {w.name: w.max_skew for w in replay.trace.workloads}
    )
    result.skew_seconds = round(sum(e for _, e in replay.samples) * SAMPLE_SECONDS, 1)
    result.pending_pod_seconds = round(sum(n for _, n in replay.pending) * SAMPLE_SECONDS, 1)
    replay.score_more(result, events, matched, mine)
    result.rss_mib = [(round(t, 1), round(m, 1)) for t, m in replay.rss]


def cost_patches(requests: Sequence[dict[str, Any]]) -> int:
    """PATCHes of a pod (not a subresource) the API server granted: the deletion costs
    written (rebalancer patches nothing else of a pod)."""
    return sum(
        1
        for ev in requests
        if ev.get("verb") == "patch"
        and (ev.get("objectRef") or {}).get("resource") == "pods"
        and not (ev.get("objectRef") or {}).get("subresource")
        and (ev.get("responseStatus") or {}).get("code") == 200
    )


def verify_differences(log: Path) -> int | None:
    """How many state checks of rebalancer's log found a difference (None: no check ran)."""
    checks = diffs = 0
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if '"state.verified"' in line or '"state.differs"' in line:
            checks += 1
            diffs += '"state.differs"' in line
    return diffs if checks else None


# ---------------------------------------------------------------------------------------------
# Output


def unavailable_text(r: Result, workloads: Sequence[str]) -> str:
    """Per workload ``tool/PDB (any cause)``: the tool's most at once against its PDB's
    maxUnavailable (``-``: no PDB), and the most at once for any cause."""
    return ", ".join(
        f"{w} {r.most_unavailable.get(w, 0)}/{r.pdb.get(w, '-')} "
        f"({r.most_unavailable_overall.get(w, 0)})"
        for w in workloads
    )


def rss_text(r: Result) -> str:
    rss = [m for _, m in r.rss_mib]
    return f"{rss[0]:.0f}/{max(rss):.0f}/{rss[-1]:.0f}" if rss else "-"


def summary_line(r: Result) -> str:
    if r.skipped:
        return f"skipped: {r.skipped}"
    workloads = sorted(set(r.pdb) | set(r.most_unavailable) | set(r.most_unavailable_overall))
    idle = "-" if r.idle_cpu_ms is None else f"{r.idle_cpu_ms:.0f}"
    replay = "-" if r.apiserver_cpu_s is None else f"{r.apiserver_cpu_s:.1f}"
    return (
        f"skew-s {r.skew_seconds:.0f}, evictions {r.evictions} (trace's own {r.trace_evictions}),"
        f" thrash {r.thrash}, 429 {r.http_429}, DELETE {r.deletes}, cost PATCH {r.cost_patches},"
        f" unavailable tool/PDB (any"
        f" cause) {unavailable_text(r, workloads) or '-'}, apiserver CPU-s over the replay "
        f"{replay}, per idle interval {idle} ms, RSS first/max/last {rss_text(r)} MiB"
        f"{scale_downs_text(r)}{cron_text(r)}"
    )


def scale_downs_text(r: Result) -> str:
    sd = r.scale_downs
    if not sd:
        return ""
    return (
        f"; scale-downs {sd['seen']} ({sd['most_crowded']} only from the most crowded nodes, "
        f"{sd['made_skew']} made skew)"
    )


def cron_text(r: Result) -> str:
    """A cron contestant's runs: how many started, were skipped, and their exit codes."""
    if not r.runs and not r.skipped_runs:
        return ""
    codes = ", ".join(f"{code} x{n}" for code, n in sorted(Counter(r.exit_codes).items()))
    return (
        f"; cron runs {len(r.runs)} started at +{', +'.join(f'{t:g}' for t in r.runs)} s, "
        f"{len(r.skipped_runs)} skipped (due while the last one ran), exit codes {codes or '-'}"
    )


def scale_downs_summary(runs: Sequence[Sequence[Result]]) -> str:
    """Per contestant, median [min-max] over the runs of the sampler's scale-downs (see
    :func:`scale_downs`); empty when no result has them."""
    by: dict[str, list[dict[str, int]]] = defaultdict(list)
    for rows in runs:
        for r in rows:
            if not r.skipped and r.scale_downs:
                by[r.contestant].append(r.scale_downs)
    if not by:
        return ""
    head = (
        f"{'scale-downs':<12} {'seen':>10} {'only from most crowded nodes':>30} {'made skew':>12}"
    )
    lines = [head, "-" * len(head)]
    for name, sds in by.items():
        seen = spread_of([sd["seen"] for sd in sds])
        crowded = spread_of([sd["most_crowded"] for sd in sds])
        made = spread_of([sd["made_skew"] for sd in sds])
        lines.append(f"{name:<12} {seen:>10} {crowded:>30} {made:>12}")
    return "\n".join(lines)


def table(rows: Sequence[Result], run: int | None = None) -> str:
    """One line per contestant (and run)."""
    workloads = sorted({w for r in rows for w in (*r.pdb, *r.most_unavailable_overall)})
    head = (
        f"{'contestant':<12} {'run':>3} {'skew-s':>7} {'evict':>5} {'thrash':>6} {'429':>4} "
        f"{'DELETE':>6} {'PATCH':>5} {'idle ms':>7} {'(none)':>6} {'RSS MiB':>11}  unavailable "
        "tool/PDB (any "
        "cause)"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.skipped:
            lines.append(f"{r.contestant:<12} skipped: {r.skipped}")
            continue
        idle = "-" if r.idle_cpu_ms is None else f"{r.idle_cpu_ms:.1f}"
        base = "-" if r.idle_baseline_ms is None else f"{r.idle_baseline_ms:.1f}"
        lines.append(
            f"{r.contestant:<12} {run if run is not None else '':>3} {r.skew_seconds:>7.0f} "
            f"{r.evictions:>5} {r.thrash:>6} {r.http_429:>4} {r.deletes:>6} {r.cost_patches:>5} "
            f"{idle:>7} {base:>6} "
            f"{rss_text(r):>11}  {unavailable_text(r, workloads)}"
        )
    return "\n".join(lines)


def spread_of(values: Sequence[float]) -> str:
    """``median [min-max]`` (one value: itself)."""
    if not values:
        return "-"
    med = statistics.median(values)

    def fmt(v: float) -> str:
        return f"{v:.0f}" if abs(v) >= 10 or float(v).is_integer() else f"{v:.1f}"

    if len(values) == 1 or min(values) == max(values):
        return fmt(med)
    return f"{fmt(med)} [{fmt(min(values))}-{fmt(max(values))}]"


def summary(runs: Sequence[Sequence[Result]]) -> str:
    """Per contestant over the runs: median [min-max] of each figure."""
    by: dict[str, list[Result]] = defaultdict(list)
    for rows in runs:
        for r in rows:
            if not r.skipped:
                by[r.contestant].append(r)
    workloads = sorted({w for rs in by.values() for r in rs for w in r.pdb})
    head = (
        f"{'contestant':<12} {'runs':>4} {'skew-s':>14} {'evictions':>12} {'thrash':>7} "
        f"{'429':>5} {'DELETE':>6} {'PATCH':>10} {'idle CPU-ms':>12} {'(none)':>12} "
        f"{'RSS first':>10} {'RSS last':>10}  "
        + "  ".join(f"{w} tool/PDB (any)" for w in workloads)
    )
    lines = [head, "-" * len(head)]
    for c, rs in by.items():
        unavailable = "  ".join(
            f"{spread_of([r.most_unavailable.get(w, 0) for r in rs])}/{rs[0].pdb.get(w, '-')} "
            f"({spread_of([r.most_unavailable_overall.get(w, 0) for r in rs])})"
            for w in workloads
        )
        idle = [r.idle_cpu_ms for r in rs if r.idle_cpu_ms is not None]
        base = [r.idle_baseline_ms for r in rs if r.idle_baseline_ms is not None]
        lines.append(
            f"{c:<12} {len(rs):>4} {spread_of([r.skew_seconds for r in rs]):>14} "
            f"{spread_of([r.evictions for r in rs]):>12} {spread_of([r.thrash for r in rs]):>7} "
            f"{spread_of([r.http_429 for r in rs]):>5} {spread_of([r.deletes for r in rs]):>6} "
            f"{spread_of([r.cost_patches for r in rs]):>10} "
            f"{spread_of(idle):>12} {spread_of(base):>12} "
            f"{spread_of([r.rss_mib[0][1] for r in rs if r.rss_mib]):>10} "
            f"{spread_of([r.rss_mib[-1][1] for r in rs if r.rss_mib]):>10}  {unavailable}"
        )
    return "\n".join(lines)


def plot(runs: Sequence[Sequence[Result]], path: Path, title: str) -> bool:
    """Skew above maxSkew over time, one panel per run and one line per contestant (needs the
    ``bench`` extra)."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib missing (pip install -e '.[bench]'): no plot", file=sys.stderr)
        return False
    n = max(1, len(runs))
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.2 + 2.6 * n), dpi=100, sharex=True, squeeze=False)
    for i, rows in enumerate(runs):
        ax = axes[i][0]
        for r in rows:
            if r.skipped or not r.skew:
                continue
            ax.step(
                [t for t, _ in r.skew],
                [e for _, e in r.skew],
                where="post",
                label=f"{r.contestant} ({r.skew_seconds:.0f} skew-s, {r.evictions} evictions)",
            )
        ax.set_ylabel("skew above maxSkew")
        if n > 1:
            ax.set_title(f"run {i + 1}", fontsize=9, loc="left")
        ax.legend(loc="upper right", fontsize=7)
    axes[-1][0].set_xlabel("seconds since the trace started (sped up)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def run_all(
    cp: Any,
    trace: Trace,
    contestants: Sequence[str],
    *,
    speedup: float,
    interval: str,
    descheduler: Path | None = None,
    parallel: bool = False,
    idle_window: float = 0.0,
    replay: type[Replay] | None = None,
) -> list[Result]:
    """Every contestant on the same trace on the control plane ``cp``
    (``e2e.cluster.controlplane.ControlPlane``: node_manifest, audit log, tokens): one after
    the other, or with ``parallel`` all at once (each on its own nodes and namespace)."""
    cp.kubectl("create", "namespace", TOOL_NAMESPACE, check=False)  # and run's Lease
    options: dict[str, Any] = {
        "speedup": speedup,
        "interval": interval,
        "descheduler": descheduler,
        "idle_window": idle_window,
        "replay": replay,
    }
    if parallel:
        print(f"contestants {', '.join(contestants)} together ({trace.name}, speed-up "
              f"{speedup})", file=sys.stderr, flush=True)  # fmt: skip
        return run_together(cp, trace, contestants, **options)
    rows = []
    for c in contestants:
        print(f"contestant {c} ({trace.name}, speed-up {speedup})", file=sys.stderr, flush=True)
        rows.append(run_contestant(cp, trace, c, **options))
    return rows


def result_of(doc: dict[str, Any]) -> Result:
    r = Result(**{k: v for k, v in doc.items() if k in Result.__dataclass_fields__})
    r.rss_mib = [(t, m) for t, m in r.rss_mib]
    r.skew = [(t, e) for t, e in r.skew]
    return r


def report(doc: dict[str, Any], png: Path | None) -> None:
    """The tables (every run, then median and range) and the plot of a results document."""
    runs = [[result_of(r) for r in rows] for rows in doc["runs"]]
    mode = "together" if doc.get("parallel") else "one after the other"
    title = (
        f"churn trace {doc['trace']}, speed-up {doc['speedup']:g}, interval {doc['interval']}, "
        f"{len(runs)} run(s), contestants {mode}"
    )
    print(title)
    for i, rows in enumerate(runs, start=1):
        print(table(rows, i))
    if len(runs) > 1:
        print("\nmedian [min-max] over the runs")
        print(summary(runs))
    downs = scale_downs_summary(runs)
    if downs:
        print(downs)
    if doc.get("karpenter"):
        from bench.karpenter_churn import karpenter_summary, karpenter_table  # noqa: PLC0415

        print("\nbeside Karpenter")
        for i, rows in enumerate(runs, start=1):
            print(karpenter_table(rows, i))
        if len(runs) > 1:
            print("\nmedian [min-max] over the runs")
            print(karpenter_summary(runs))
    for i, rows in enumerate(runs, start=1):
        for r in rows:
            if cron_text(r):
                print(f"run {i}, {r.contestant}{cron_text(r)}")
    print(f"machine: {doc['machine']}, shared: timings are noisy")
    if png is not None and plot(runs, png, title):
        print(f"wrote {png}", file=sys.stderr)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="the e2e trace: one Deployment")
    ap.add_argument(
        "--karpenter",
        action="store_true",
        help="the trace on nodes Karpenter provides (bench/karpenter_churn.py)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=900.0, help="trace seconds (full trace)")
    ap.add_argument("--speedup", type=float, default=None, help="default 3 (full), 2 (short)")
    ap.add_argument("--interval", default="5s", help="the tools' interval (real seconds)")
    ap.add_argument("--contestants", default=",".join(CONTESTANTS))
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=FLAGS",
        help="one more evict-mode contestant NAME: 'rebalancer run' with FLAGS added "
        "(e.g. wc0='--workload-cooldown 0s'); list NAME in --contestants",
    )
    ap.add_argument(
        "--steer-variant",
        action="append",
        default=[],
        metavar="NAME=FLAGS",
        help="one more steering contestant NAME: steer's command with FLAGS added, later flags "
        "winning (e.g. steer60='--interval 60s'); list NAME in --contestants",
    )
    ap.add_argument(
        "--cron",
        action="append",
        default=[],
        metavar="NAME=PERIOD[:steer]",
        help="one more contestant NAME run as a CronJob: a one-shot 'rebalancer run' every "
        "PERIOD trace seconds (divided by the speed-up, as the events), from the trace's start, "
        "skipped while the last one runs; ':steer' with the steering policy "
        "(e.g. cron15=900:steer); list NAME in --contestants",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs of the same trace")
    ap.add_argument(
        "--parallel", action="store_true", help="the contestants at once (own nodes each)"
    )
    ap.add_argument(
        "--idle-window",
        type=float,
        default=None,
        help="seconds of idle apiserver CPU per tool after the trace (default 3 intervals)",
    )
    ap.add_argument("--report", default=None, help="print and plot a results file; run nothing")
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot", default=None)
    return ap


def trace_of(ap: argparse.ArgumentParser, args: argparse.Namespace) -> Trace:
    if args.short and args.karpenter:
        ap.error("--short and --karpenter: choose one trace")
    if args.karpenter:
        return karpenter_trace(args.seed, args.duration)
    return short_trace() if args.short else full_trace(args.seed, args.duration)


def start_beside(cp: Any, karpenter: bool) -> tuple[Any, type[Replay] | None]:
    """Karpenter started beside ``cp`` and the kind of replay on its nodes, or (None, None)."""
    if not karpenter:
        return None, None
    from bench.karpenter_churn import KarpenterReplay, start_karpenter  # noqa: PLC0415

    try:
        started = start_karpenter(cp)
    except BaseException:
        cp.stop()
        raise
    print(f"karpenter up in {started.startup_seconds}s", file=sys.stderr)
    return started, KarpenterReplay


def add_contestants(variants: Sequence[str], steering: Sequence[str], crons: Sequence[str]) -> None:
    """``--variant``, ``--steer-variant`` and ``--cron`` into :data:`VARIANTS`,
    :data:`STEER_VARIANTS` and :data:`CRONS`; a ValueError naming the flag and value first."""
    taken = list(CONTESTANTS)
    for flag, specs, into in (
        ("--variant", variants, VARIANTS),
        ("--steer-variant", steering, STEER_VARIANTS),
    ):
        for spec in specs:
            name, flags = named_spec(flag, spec, taken)
            into[name] = shlex.split(flags)
            taken.append(name)
    for spec in crons:
        name, cron = cron_of(spec, taken)
        CRONS[name] = cron
        taken.append(name)


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    stem = "churn-short" if args.short else "churn-karpenter" if args.karpenter else "churn"
    out = Path(args.out or RESULTS / f"{stem}.json")
    png = Path(args.plot or ROOT / "docs" / f"{stem}-skew.png")
    if args.report:
        report(json.loads(Path(args.report).read_text()), png)
        return 0
    trace = trace_of(ap, args)
    speedup = args.speedup or (2.0 if args.short else 3.0)
    contestants = [c.strip() for c in args.contestants.split(",") if c.strip()]
    try:
        add_contestants(args.variant, args.steer_variant, args.cron)
    except ValueError as exc:
        ap.error(str(exc))
    known = [*CONTESTANTS, *VARIANTS, *STEER_VARIANTS, *CRONS]
    unknown = sorted(set(contestants) - set(known))
    if unknown:
        ap.error(f"--contestants: unknown {unknown}; known: {', '.join(known)}")
    if args.repeat < 1:
        ap.error(f"--repeat: {args.repeat}: must be at least 1")
    # with Karpenter, its own requests would be in every idle window: none measured
    idle_window = (
        0.0
        if args.karpenter
        else 3 * seconds_of(args.interval)
        if args.idle_window is None
        else args.idle_window
    )
    descheduler = build_descheduler() if "descheduler" in contestants else None
    from e2e.cluster.controlplane import ControlPlane, build  # noqa: PLC0415

    doc: dict[str, Any] = {
        "machine": machine(),
        "trace": trace.name,
        "speedup": speedup,
        "interval": args.interval,
        "parallel": args.parallel,
        "idle_window": idle_window,
        "events": [ev.describe() for ev in trace.events],
        "karpenter": args.karpenter,
        "runs": [],
    }
    cp = ControlPlane(build(quiet=True), node_count=0)
    cp.start()
    print(f"control plane up in {cp.startup_seconds}s; run dir {cp.run_dir}", file=sys.stderr)
    karpenter, replay = start_beside(cp, args.karpenter)
    for ev in trace.events:
        print(f"  trace {ev.describe()}", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        cp.assert_own_cluster(cp.kubeconfig)
        for i in range(args.repeat):
            print(f"run {i + 1} of {args.repeat}", file=sys.stderr, flush=True)
            try:
                rows = run_all(
                    cp, trace, contestants, speedup=speedup, interval=args.interval,
                    descheduler=descheduler, parallel=args.parallel, idle_window=idle_window,
                    replay=replay,
                )  # fmt: skip
            except Exception as exc:  # one failed run: say so and go on with the next
                print(f"run {i + 1} FAILED: {exc!r}", file=sys.stderr, flush=True)
                doc.setdefault("failed", []).append(f"run {i + 1}: {exc!r}")
                continue
            doc["runs"].append([asdict(r) for r in rows])
            out.write_text(json.dumps(doc, indent=1) + "\n")  # each run saved as it ends
            print(table(rows, i + 1), file=sys.stderr, flush=True)
    finally:
        if karpenter is not None:
            karpenter.stop()
        cp.stop()
    print(f"wrote {out}", file=sys.stderr)
    report(doc, png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
