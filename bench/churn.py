"""A cluster that moves: one seeded churn trace replayed for each contestant (kwok nodes).

    bash bench/descheduler/build.sh          # once, for the descheduler contestant
    python -m bench.churn [--short] [--seed 1] [--duration 900] [--speedup 3]
        [--contestants nothing,descheduler,rebalancer,steer] [--interval 5s]
        [--out bench/results/churn.json] [--plot docs/churn-skew.png]

The trace (``bench/trace.py``): Deployments scaled HPA-like, one rollout, one node drained
and uncordoned, one zone's nodes NotReady for three minutes and back, PDBs on some
workloads. Each contestant gets its own namespace and its own nodes (3 zones x 2, selected by a
nodeSelector), starts from the scheduler's own placement of the initial replicas, and then the
same events at the same (sped-up) times:

* ``nothing``: no tool;
* ``descheduler``: v0.36.0, ``--descheduling-interval`` = the interval, topology-spread plugin
  only (``bench.compare``'s policy);
* ``rebalancer``: ``rebalancer run -n NS --interval`` (and ``--verify-state-every 1`` when the
  command has it);
* ``steer``: the same with a policy setting ``steerScaleDown: true``; skipped, saying so, when
  ``rebalancer policy check`` rejects that key.

Each tool talks to kube-apiserver as its own ServiceAccount (cluster-admin), so the audit
log tells its requests apart: evictions, 429 answers and pod DELETEs are counted from it. A
sampler LISTs the namespace's pods every second: skew-seconds (per sample, over every hard
zone view, how far the skew is above maxSkew, times the sample interval), the tool's RSS, and
when each pod became Ready. Thrash: a pod evicted whose replacement is evicted again within
10 minutes. Most unavailable: per workload, the most of its evicted pods whose replacement was
not yet Ready at one time, against its PDB's maxUnavailable. kube-apiserver CPU: its CPU
seconds over the replay. Figures are printed, never asserted (e2e/test_churn.py asserts the
invariants of the short trace).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.compare import build_descheduler, descheduler_policy
from bench.live import apiserver_pid, cpu_seconds, rss_bytes
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
    short_trace,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "churn"
ZONE = "topology.kubernetes.io/zone"
CONTESTANT_LABEL = "bench.rebalancer/churn"
CONTESTANTS = ("nothing", "descheduler", "rebalancer", "steer")
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
    most_unavailable: dict[str, int] = field(default_factory=dict)
    pdb: dict[str, int] = field(default_factory=dict)
    apiserver_cpu_s: float = 0.0
    seconds: float = 0.0
    rss_mib: list[tuple[float, float]] = field(default_factory=list)
    skew: list[tuple[float, int]] = field(default_factory=list)
    exit_code: int | None = None
    verify_differences: int | None = None

    @property
    def beyond_pdb(self) -> bool:
        return any(self.most_unavailable.get(w, 0) > n for w, n in self.pdb.items())


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
        tag = f"{contestant[:5]}-{os.getpid() % 10000}"
        self.tag = tag
        self.ns = f"churn-{tag}"
        self.nodes = {
            f"{tag}-z{z}-n{n}": f"{tag}-z{z}"
            for z in range(trace.zones)
            for n in range(trace.nodes_per_zone)
        }
        self.samples: list[tuple[float, int]] = []
        self.first_seen: dict[str, tuple[str, float]] = {}  # pod -> (workload, wall time)
        self.ready_at: dict[str, float] = {}
        self.ready_counts: list[tuple[float, Counter[str]]] = []  # wall time, app -> Ready
        self.changed: list[tuple[float, str]] = []  # wall time, workload scaled or rolled out
        self.rss: list[tuple[float, float]] = []
        self.pid: int | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

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
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        }

    def setup(self) -> None:
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
        if kind in (SCALE, ROLLOUT):
            self.changed.append((time.time(), target))
        if kind == SCALE:
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
    def sample_loop(self, t0: float) -> None:
        from rebalancer.cluster.api.kubeclient import connect  # noqa: PLC0415

        kube = connect(str(self.cp.kubeconfig))
        by_name = {w.name: w for w in self.trace.workloads}
        zones = sorted(set(self.nodes.values()))
        next_at = time.time()
        while not self._stop.is_set():
            now = time.time()
            try:
                pods = kube.list_pods(self.ns)
            except Exception:  # a slow moment: skip this sample
                pods = None
            if pods is not None:
                counts: dict[str, Counter[str]] = {w: Counter() for w in by_name}
                ready_now: Counter[str] = Counter()
                for p in pods:
                    meta, spec, status = p["metadata"], p["spec"], p.get("status") or {}
                    app = (meta.get("labels") or {}).get("app", "")
                    if app not in by_name:
                        continue
                    name = meta["name"]
                    self.first_seen.setdefault(name, (app, now))
                    ready = any(
                        c.get("type") == "Ready" and c.get("status") == "True"
                        for c in status.get("conditions") or ()
                    )
                    if ready and name not in self.ready_at:
                        self.ready_at[name] = now
                    if ready and not meta.get("deletionTimestamp"):
                        ready_now[app] += 1
                    node = spec.get("nodeName")
                    if node in self.nodes and not meta.get("deletionTimestamp"):
                        counts[app][self.nodes[node]] += 1
                excess = 0
                for app, c in counts.items():
                    skew = max(c[z] for z in zones) - min(c[z] for z in zones)
                    excess += max(0, skew - by_name[app].max_skew)
                self.samples.append((now - t0, excess))
                self.ready_counts.append((now, ready_now))
            rss = rss_bytes(self.pid) if self.pid is not None else 0
            if rss:
                self.rss.append((now - t0, rss / 2**20))
            next_at += SAMPLE_SECONDS
            self._stop.wait(max(0.0, next_at - time.time()))
        kube.close()


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
    argv = [
        sys.executable, "-m", "rebalancer", "run", "-n", ns, "--interval", interval,
        "--kubeconfig", str(kubeconfig), "-o", "json",
    ]  # fmt: skip
    if has_flag("--verify-state-every"):
        argv += ["--verify-state-every", "1"]
    if contestant == "steer":
        argv += ["--policy", str(steer_policy(stem))]
    return argv


def steer_policy(stem: Path) -> Path:
    path = stem.with_suffix(".steer.yaml")
    path.write_text(
        "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\nsteerScaleDown: true\n"
    )
    return path


# ---------------------------------------------------------------------------------------------
# Reading the audit log


def tool_requests(cp: Any, user: str, since: float) -> list[dict[str, Any]]:
    out = []
    for ev in cp.audit_events():
        who = (ev.get("user") or {}).get("username")
        if who != user or ev.get("stage") != "ResponseComplete":
            continue
        if _rfc3339(ev["requestReceivedTimestamp"]) < since:
            continue
        out.append(ev)
    return out


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


def thrash(matched: Sequence[tuple[float, str, str, str | None]]) -> int:
    evicted_at = {pod: at for at, pod, _, _ in matched}
    return sum(
        1
        for at, _, _, repl in matched
        if repl is not None and repl in evicted_at and evicted_at[repl] - at <= THRASH_WINDOW
    )


def most_unavailable(
    evictions: Sequence[tuple[float, str]],
    first_seen: dict[str, tuple[str, float]],
    ready_counts: Sequence[tuple[float, Counter[str]]],
    changed: Sequence[tuple[float, str]],
) -> dict[str, int]:
    """Per workload, the most of its evictions open at once. An eviction is open from its
    time until the workload has as many Ready pods again as at the last sample before it, or
    until the trace scales or rolls the workload out (then its replacement may be moot). No
    replacement matching is needed; a scale-up's Ready pods can close one early."""
    edges: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for at, pod in evictions:
        app = first_seen.get(pod, ("", 0.0))[0]
        before = [c[app] for t, c in ready_counts if t < at]
        if not before:
            continue
        after = (t for t, c in ready_counts if t > at and c[app] >= before[-1])
        end = min(
            next(after, math.inf),
            next((t for t, w in changed if t > at and w == app), math.inf),
        )
        edges[app] += [(at, 1), (end, -1)]
    out = {}
    for app, es in edges.items():
        level = top = 0
        for _, d in sorted(es, key=lambda e: (e[0], e[1])):
            level += d
            top = max(top, level)
        out[app] = top
    return out


# ---------------------------------------------------------------------------------------------
# One contestant


def run_contestant(
    cp: Any,
    trace: Trace,
    contestant: str,
    *,
    speedup: float,
    interval: str,
    descheduler: Path | None = None,
) -> Result:
    OUT.mkdir(parents=True, exist_ok=True)
    result = Result(contestant)
    replay = Replay(cp, trace, contestant, speedup=speedup)
    if contestant == "steer":
        ok, why = steer_supported(steer_policy(OUT / replay.tag))
        if not ok:
            result.skipped = f"steerScaleDown not supported by this rebalancer: {why}"
            print(f"  steer: SKIPPED ({result.skipped})", file=sys.stderr, flush=True)
            return result
    replay.setup()
    kubeconfig = tool_kubeconfig(cp, contestant)
    argv = tool_argv(contestant, replay, kubeconfig, interval, descheduler)
    apiserver = apiserver_pid(str(cp.kubeconfig))
    proc: subprocess.Popen[bytes] | None = None
    since = time.time()
    cpu0 = cpu_seconds(apiserver)
    stem = OUT / replay.tag
    with stem.with_suffix(".out").open("wb") as out, stem.with_suffix(".err").open("wb") as err:
        if argv is not None:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT)
            replay.pid = proc.pid
        t0 = time.time()
        sampler = threading.Thread(target=replay.sample_loop, args=(t0,), daemon=True)
        sampler.start()
        try:
            replay.replay_events(t0)
            end = t0 + trace.duration / speedup + TAIL_SECONDS
            while time.time() < end:
                time.sleep(min(1.0, end - time.time()))
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                try:
                    result.exit_code = proc.wait(timeout=STOP_GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    result.exit_code = proc.wait()
            replay._stop.set()
            sampler.join(timeout=30)
    result.seconds = round(time.time() - t0, 1)
    result.apiserver_cpu_s = round(cpu_seconds(apiserver) - cpu0, 2)
    score(cp, result, replay, since)
    result.verify_differences = verify_differences(stem.with_suffix(".err"))
    replay.cleanup()
    print(f"  {contestant}: {summary_line(result)}", file=sys.stderr, flush=True)
    return result


def score(cp: Any, result: Result, replay: Replay, since: float) -> None:
    """The audit log's and the sampler's figures of one contestant, into ``result``."""
    requests = tool_requests(cp, user_of(result.contestant), since)
    evictions = evictions_of(requests)
    matched = replacements(evictions, replay.first_seen)
    result.evictions = len(evictions)
    result.thrash = thrash(matched)
    result.http_429 = sum(
        1 for ev in requests if (ev.get("responseStatus") or {}).get("code") == 429
    )
    result.loops_429 = loops_429(requests)
    result.deletes = sum(
        1
        for ev in requests
        if ev.get("verb") == "delete" and (ev.get("objectRef") or {}).get("resource") == "pods"
    )
    result.most_unavailable = most_unavailable(
        evictions, replay.first_seen, replay.ready_counts, replay.changed
    )
    result.pdb = {
        w.name: w.pdb_max_unavailable
        for w in replay.trace.workloads
        if w.pdb_max_unavailable is not None
    }
    result.skew = replay.samples
    result.skew_seconds = round(sum(e for _, e in replay.samples) * SAMPLE_SECONDS, 1)
    result.rss_mib = [(round(t, 1), round(m, 1)) for t, m in replay.rss]


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


def summary_line(r: Result) -> str:
    if r.skipped:
        return f"skipped: {r.skipped}"
    rss = [m for _, m in r.rss_mib]
    unavailable = ",".join(
        f"{w}:{r.most_unavailable.get(w, 0)}/{n}" for w, n in sorted(r.pdb.items())
    )
    return (
        f"skew-s {r.skew_seconds:.0f}, evictions {r.evictions}, thrash {r.thrash}, 429 "
        f"{r.http_429}, DELETE {r.deletes}, unavailable/PDB {unavailable or '-'}, apiserver "
        f"{r.apiserver_cpu_s:.1f} CPU-s, RSS "
        + (f"{rss[0]:.0f}->{max(rss):.0f}->{rss[-1]:.0f} MiB" if rss else "-")
    )


def table(rows: Sequence[Result]) -> str:
    head = (
        f"{'contestant':<12} {'skew-s':>7} {'evict':>5} {'thrash':>6} {'429':>4} {'DELETE':>6} "
        f"{'unavail/PDB':<16} {'apiserver CPU-s':>15} {'RSS first/max/last MiB':>23}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.skipped:
            lines.append(f"{r.contestant:<12} skipped: {r.skipped}")
            continue
        rss = [m for _, m in r.rss_mib]
        rss_text = f"{rss[0]:.0f}/{max(rss):.0f}/{rss[-1]:.0f}" if rss else "-"
        unavailable = ",".join(
            f"{w}:{r.most_unavailable.get(w, 0)}/{n}" for w, n in sorted(r.pdb.items())
        )
        lines.append(
            f"{r.contestant:<12} {r.skew_seconds:>7.0f} {r.evictions:>5} {r.thrash:>6} "
            f"{r.http_429:>4} {r.deletes:>6} {unavailable or '-':<16} "
            f"{r.apiserver_cpu_s:>15.1f} {rss_text:>23}"
        )
    return "\n".join(lines)


def plot(rows: Sequence[Result], path: Path, title: str) -> bool:
    """Skew above maxSkew over time, one line per contestant (needs the ``bench`` extra)."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib missing (pip install -e '.[bench]'): no plot", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
    for r in rows:
        if r.skipped or not r.skew:
            continue
        ax.step(
            [t for t, _ in r.skew],
            [e for _, e in r.skew],
            where="post",
            label=f"{r.contestant} ({r.skew_seconds:.0f} skew-s, {r.evictions} evictions)",
        )
    ax.set_xlabel("seconds since the trace started (sped up)")
    ax.set_ylabel("skew above maxSkew (sum over hard views)")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
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
) -> list[Result]:
    """Every contestant on the same trace, one after the other, on the control plane ``cp``
    (``e2e.cluster.controlplane.ControlPlane``: node_manifest, audit log, tokens)."""
    cp.kubectl("create", "namespace", TOOL_NAMESPACE, check=False)  # and run's Lease
    rows = []
    for c in contestants:
        print(f"contestant {c} ({trace.name}, speed-up {speedup})", file=sys.stderr, flush=True)
        rows.append(
            run_contestant(
                cp, trace, c, speedup=speedup, interval=interval, descheduler=descheduler
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="the e2e trace: one Deployment")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=900.0, help="trace seconds (full trace)")
    ap.add_argument("--speedup", type=float, default=None, help="default 3 (full), 2 (short)")
    ap.add_argument("--interval", default="5s", help="the tools' interval (real seconds)")
    ap.add_argument("--contestants", default=",".join(CONTESTANTS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args(argv)
    trace = short_trace() if args.short else full_trace(args.seed, args.duration)
    speedup = args.speedup or (2.0 if args.short else 3.0)
    contestants = [c.strip() for c in args.contestants.split(",") if c.strip()]
    unknown = sorted(set(contestants) - set(CONTESTANTS))
    if unknown:
        ap.error(f"--contestants: unknown {unknown}; known: {', '.join(CONTESTANTS)}")
    stem = "churn-short" if args.short else "churn"
    out = Path(args.out or RESULTS / f"{stem}.json")
    png = Path(args.plot or ROOT / "docs" / f"{stem}-skew.png")
    descheduler = build_descheduler() if "descheduler" in contestants else None
    from e2e.cluster.controlplane import ControlPlane, build  # noqa: PLC0415

    cp = ControlPlane(build(quiet=True), node_count=0)
    cp.start()
    print(f"control plane up in {cp.startup_seconds}s; run dir {cp.run_dir}", file=sys.stderr)
    for ev in trace.events:
        print(f"  trace {ev.describe()}", file=sys.stderr)
    try:
        cp.assert_own_cluster(cp.kubeconfig)
        rows = run_all(
            cp, trace, contestants, speedup=speedup, interval=args.interval, descheduler=descheduler
        )
    finally:
        cp.stop()
    title = f"churn trace {trace.name}, speed-up {speedup:g}, interval {args.interval}"
    print(title)
    print(table(rows))
    print(f"machine: {os.cpu_count()} cores, {machine()['mem_gib']} GiB, shared: timings are noisy")
    if plot(rows, png, title):
        print(f"wrote {png}", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": machine(),
                "trace": trace.name,
                "speedup": speedup,
                "interval": args.interval,
                "events": [ev.describe() for ev in trace.events],
                "results": [asdict(r) for r in rows],
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
