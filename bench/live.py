"""The live path: one ``rebalancer plan`` pass against the bare paginated LIST (the I/O floor).

    python -m bench.live [--size medium|large] [--seed 1] [--repeat 2] [--floor-gc]
                         [--out bench/results/live.json]
    python -m bench.live --size large --serve SECONDS     # start + load, keep it up, no figures
    python -m bench.live --kubeconfig FILE [--repeat N]   # measure a cluster already loaded

Starts the e2e control plane on 127.0.0.1 (no kwok nodes of its own) and loads it with the
objects of a ``bench.gen`` snapshot (default: medium, 1,000 nodes / 30,000 pods; large:
5,000 / 150,000; cached under ``bench/out/``), see :mod:`bench.load`. Then, alternately,
``--repeat`` times each:

* the floor: ``python -m bench.live --floor KUBECONFIG`` in a subprocess: every page of every
  resource rebalancer reads, with the same client (``Kube.list_page`` in
  :mod:`rebalancer.cluster.api.kubeclient`,
  same page size, one request after the other) and parsed with ``orjson.loads``, nothing else,
  the cyclic GC paused as the reader pauses it; with ``--floor-gc`` also once with the GC on
  (how this benchmark measured the floor before);
* ``rebalancer plan --kubeconfig KUBECONFIG -o json`` in a subprocess (pods in one protobuf
  LIST read as a stream); with ``--decoders`` also the same pass reading other ways, side by
  side: ``paged`` (pod pages as protobuf, ``--paged-lists``), ``typed`` (all pages JSON,
  msgspec's typed decoder), ``general`` (all JSON, orjson + the converter);
  each with its wall, client CPU (the child's user + system), peak RSS and kube-apiserver CPU;
* the pods' LIST alone: the one unpaginated protobuf LIST of all pods that a plan pass sends
  (``Kube.list_stream``), read to its end in this process and thrown away; only
  kube-apiserver's CPU matters here: what serving that one request costs it, which no pass
  that reads every pod avoids;
* unless ``--no-descheduler``: one ``descheduler --dry-run --descheduling-interval 0`` pass with
  only RemovePodsViolatingTopologySpreadConstraint (see :mod:`bench.compare`), wall + peak RSS.

All are timed as whole subprocesses (wall, and peak RSS from ``/usr/bin/time``, see
:func:`bench.plan.run_child`); the floor also reports its in-process LIST time. The ratio
printed is rebalancer's wall over the floor's wall (best of each). Figures are printed, never
asserted. The machine is shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import urllib3

from bench.plan import RESULTS, machine, rebalancer_bin, run_child, snapshot_path, use_json_lists

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"


def apiserver_pid(kubeconfig: str) -> int | None:
    """The local kube-apiserver serving ``kubeconfig`` (found by its --secure-port)."""
    import yaml  # noqa: PLC0415

    doc = yaml.safe_load(Path(kubeconfig).read_text())
    server = doc["clusters"][0]["cluster"]["server"]
    port = server.rsplit(":", 1)[-1].strip("/")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and argv[0].endswith(b"kube-apiserver")
            and f"--secure-port={port}".encode() in argv
        ):
            return int(entry.name)
    return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` so far (/proc/PID/stat); 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """The current resident set size of ``pid`` (/proc/PID/status VmRSS)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


QUIET_WINDOW = 0.5  # seconds over which kube-apiserver's CPU is sampled to call it quiet
QUIET_CPU = 0.05  # CPU-s per window below which it is quiet (idle here: about 0.006)
QUIET_LIMIT = 20.0  # seconds waited at most for quiet, before and after a pass


def settle(pid: int | None, limit: float = QUIET_LIMIT) -> float:
    """Wait until kube-apiserver is quiet (less than :data:`QUIET_CPU` CPU-s in a window of
    :data:`QUIET_WINDOW`), at most ``limit`` seconds; its CPU seconds then."""
    last = cpu_seconds(pid)
    if pid is None:
        return last
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(QUIET_WINDOW)
        now = cpu_seconds(pid)
        if now - last < QUIET_CPU:
            return now
        last = now
    return last


GoMetrics = tuple[float, float]
"""kube-apiserver's Go runtime so far: CPU seconds of garbage collection, heap bytes allocated."""


def go_metrics(kubeconfig: str) -> Callable[[], GoMetrics | None]:
    """A reader of kube-apiserver's ``go_cpu_classes_gc_total_cpu_seconds_total`` and
    ``go_gc_heap_allocs_bytes_total`` (its ``/metrics``; None when either is missing)."""
    from kubernetes import config  # noqa: PLC0415

    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    url = f"{api.configuration.host}/metrics"
    names = ("go_cpu_classes_gc_total_cpu_seconds_total", "go_gc_heap_allocs_bytes_total")

    def read() -> GoMetrics | None:
        try:  # a figure left out, not a failed benchmark
            text = api.rest_client.pool_manager.request("GET", url, timeout=30).data.decode()
        except (OSError, urllib3.exceptions.HTTPError, UnicodeDecodeError):
            return None
        found = {}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in names:
                try:
                    found[name] = float(value)
                except ValueError:
                    return None
        return (found[names[0]], found[names[1]]) if len(found) == 2 else None

    return read


class ApiserverCpu:
    """kube-apiserver's CPU seconds spent on a ``with`` block (``.seconds``): from a quiet
    kube-apiserver before it to a quiet one after it (:func:`settle`), so that a pass is
    charged the work it leaves behind (its garbage collection, mostly), not the work of the
    pass before it. Go's collector still runs a full cycle (marking the whole watch cache,
    1.3-2.2 CPU-s at 30,000 pods, 6-14 at 150,000) only in some passes, whichever reaches the
    heap's goal: single passes differ by that much, so the summaries give the mean over the
    rounds, and ``metrics`` (:func:`go_metrics`, read outside the counted CPU) gives what the
    collector spent and the bytes allocated, to charge it by allocation
    (:func:`attributed_cpu`)."""

    def __init__(self, pid: int | None, metrics: Callable[[], GoMetrics | None] | None = None):
        self.pid = pid
        self.metrics = metrics
        self.seconds = 0.0
        self.go: GoMetrics | None = None  # (GC CPU seconds, heap bytes allocated) of the block

    def __enter__(self) -> ApiserverCpu:
        settle(self.pid)
        self._go = self.metrics() if self.metrics else None
        self._start = cpu_seconds(self.pid)  # after the scrape: its CPU is not the pass's
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = settle(self.pid) - self._start
        go = self.metrics() if self.metrics else None
        if go is not None and self._go is not None:
            self.go = (go[0] - self._go[0], go[1] - self._go[1])

    def record(self, run: dict[str, Any]) -> None:
        """Add the figures to a pass's result."""
        run["apiserver_cpu_s"] = self.seconds
        if self.go is not None:
            run["apiserver_gc_cpu_s"], run["apiserver_alloc_bytes"] = self.go


def attributed_cpu(runs: list[dict[str, Any]], gc_per_byte: float | None) -> float | None:
    """The mean kube-apiserver CPU seconds per pass with the garbage collection charged by
    bytes allocated: each pass's CPU outside GC, plus its heap allocation times the GC CPU
    per byte allocated over every measured pass (the collector's work is paid by whoever
    allocates; its full cycles land on one pass or another by luck)."""
    if gc_per_byte is None:
        return None
    values = [
        float(r["apiserver_cpu_s"])
        - float(r["apiserver_gc_cpu_s"])
        + float(r["apiserver_alloc_bytes"]) * gc_per_byte
        for r in runs
        if "apiserver_alloc_bytes" in r
    ]
    return sum(values) / len(values) if values else None


NO_GC_CPU = 0.01  # CPU-s of garbage collection below which no cycle ran during a pass


def no_gc_cpu(runs: list[dict[str, Any]]) -> tuple[float, int] | None:
    """The mean kube-apiserver CPU seconds of the passes in which no garbage-collection cycle
    ran (the work of serving the pass itself), and how many such passes there were; None when
    there were none, or no runtime figures.

    Not each pass's CPU minus its GC CPU: in a pass with a cycle, the collector's figure
    also takes in work that is counted as the pass's own in a pass without one (a pass of
    0.73 CPU-s without a cycle reads 1.81 with one, of which 1.28 are GC)."""
    values = [
        float(r["apiserver_cpu_s"])
        for r in runs
        if "apiserver_gc_cpu_s" in r and float(r["apiserver_gc_cpu_s"]) < NO_GC_CPU
    ]
    return (sum(values) / len(values), len(values)) if values else None


def mean_cpu(runs: list[dict[str, Any]]) -> float | None:
    """The mean kube-apiserver CPU seconds per pass over ``runs`` (see :class:`ApiserverCpu`)."""
    values = [float(r["apiserver_cpu_s"]) for r in runs if "apiserver_cpu_s" in r]
    return sum(values) / len(values) if values else None


def loop_passes(kubeconfig: str, passes: int, pid: int | None, relist: bool) -> dict[str, Any]:
    """``rebalancer run --dry-run --interval 1s`` for ``passes`` runs: each run's duration
    (read + plan, from its run.summary line), the process's RSS when it ends, and
    kube-apiserver's CPU seconds per run (the first, then the mean of the others, which for
    the watch include the idle interval)."""
    argv = [rebalancer_bin(), "run", "--dry-run", "--interval", "1s", "--kubeconfig", kubeconfig]
    if relist:
        argv.append("--relist")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    runs: list[dict[str, Any]] = []
    last_cpu = cpu_seconds(pid)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(event, dict) or event.get("event") != "run.summary":
                continue
            now_cpu = cpu_seconds(pid)
            runs.append(
                {
                    "duration_s": event.get("duration_seconds"),
                    "rss_bytes": rss_bytes(proc.pid),
                    "apiserver_cpu_s": now_cpu - last_cpu,
                    "planned": event.get("planned"),
                }
            )
            last_cpu = now_cpu
            if len(runs) >= passes:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    later = runs[1:]
    return {
        "mode": "relist" if relist else "watch",
        "passes": len(runs),
        "first_s": runs[0]["duration_s"] if runs else None,
        "later_best_s": min((r["duration_s"] for r in later), default=None),
        "later_median_s": sorted(r["duration_s"] for r in later)[len(later) // 2]
        if later
        else None,
        "apiserver_cpu_first_s": runs[0]["apiserver_cpu_s"] if runs else None,
        "apiserver_cpu_later_mean_s": mean_cpu(later),
        # The first later runs may carry the garbage collection of the first run's LIST.
        "apiserver_cpu_later_median_s": sorted(r["apiserver_cpu_s"] for r in later)[len(later) // 2]
        if later
        else None,
        "rss_first_bytes": runs[0]["rss_bytes"] if runs else None,
        "rss_last_bytes": runs[-1]["rss_bytes"] if runs else None,
        "runs": runs,
    }


def floor(kubeconfig: str, *, gc_on: bool = False) -> dict[str, Any]:
    """Every page of every resource rebalancer reads, orjson-parsed, nothing else.

    The cyclic GC is paused, as the reader pauses it (``gc_on`` leaves it on: orjson's dicts
    then trigger collections that about double the parse time).
    """
    from rebalancer.cluster.api.kubeclient import connect  # noqa: PLC0415
    from rebalancer.cluster.api.resources import RESOURCES  # noqa: PLC0415
    from rebalancer.cluster.read.reader import DEFAULT_PAGE_SIZE  # noqa: PLC0415

    kube = connect(kubeconfig)
    if not gc_on:
        gc.disable()
    t0 = time.perf_counter()
    pages = objects = size = 0
    parse = 0.0
    counts: dict[str, int] = {}
    try:
        for res in RESOURCES:
            token: str | None = None
            while True:
                raw = kube.list_page(res.name, None, DEFAULT_PAGE_SIZE, token)
                t1 = time.perf_counter()
                page = orjson.loads(raw)
                parse += time.perf_counter() - t1
                pages += 1
                size += len(raw)
                n = len(page.get("items") or ())
                objects += n
                counts[res.name] = counts.get(res.name, 0) + n
                token = (page.get("metadata") or {}).get("continue") or None
                del page, raw
                if token is None:
                    break
    finally:
        kube.close()
    return {
        "gc": gc_on,
        "page_size": DEFAULT_PAGE_SIZE,
        "list_s": time.perf_counter() - t0,
        "parse_s": parse,
        "pages": pages,
        "objects": objects,
        "counts": counts,
        "mb": round(size / 1e6, 1),
        # inflated when forked from a big parent: see bench.plan.run_child
        "self_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def pods_list(kubeconfig: str) -> dict[str, Any]:
    """The pods' one unpaginated protobuf LIST as the plan pass sends it, read to its end and
    thrown away (nothing parsed): kube-apiserver's cost of the one read of every pod."""
    from rebalancer.cluster.api.kubeclient import connect  # noqa: PLC0415
    from rebalancer.cluster.read.encoding import protobuf_stream  # noqa: PLC0415

    kube = connect(kubeconfig)
    t0 = time.perf_counter()
    size = 0
    try:
        for chunk in protobuf_stream(kube)("pods", None):
            size += len(chunk)
    finally:
        kube.close()
    return {"wall_s": time.perf_counter() - t0, "mb": round(size / 1e6, 1)}


def descheduler_pass(binary: Path, kubeconfig: str) -> dict[str, Any]:
    """One --dry-run pass of the descheduler's topology-spread plugin over all namespaces."""
    from bench.compare import descheduler_policy  # noqa: PLC0415

    policy = OUT / "live-descheduler-policy.json"
    policy.write_bytes(orjson.dumps(descheduler_policy(None)))
    argv = [
        str(binary),
        "--kubeconfig",
        kubeconfig,
        "--policy-config-file",
        str(policy),
        "--descheduling-interval",
        "0",
        "--dry-run",
        "--bind-address",
        "127.0.0.1",
        "--secure-port",
        "0",
        "--v",
        "2",
    ]
    with (OUT / "live-descheduler.log").open("wb") as fh:
        wall, rss, rc = run_child(argv, fh, subprocess.STDOUT)
    return {"wall_s": wall, "peak_rss_bytes": rss, "exit": rc}


def floor_child(kubeconfig: str, *, gc_on: bool = False) -> dict[str, Any]:
    """:func:`floor` in a fresh subprocess: wall and peak RSS of the whole process."""
    argv = [sys.executable, "-m", "bench.live", "--floor", kubeconfig]
    if gc_on:
        argv.append("--floor-gc")
    proc_out = OUT / "live-floor.json"
    with proc_out.open("wb") as fh:
        wall, rss, rc = run_child(argv, fh)
    inner = orjson.loads(proc_out.read_bytes()) if rc == 0 else {"error": rc}
    return {"wall_s": wall, "peak_rss_bytes": rss, **inner}


DECODERS = ("proto", "paged", "typed", "general")
"""How a plan pass reads: pods in one protobuf LIST read as a stream (the default), or pod
pages as protobuf (``--paged-lists``: as before the stream), or all JSON with msgspec's typed
decoder (as before protobuf), or all JSON with orjson + the converter (as before that)."""


def plan_child(kubeconfig: str, decoder: str = "proto") -> dict[str, Any]:
    """One ``rebalancer plan -o json`` pass against the live cluster, in a subprocess, reading
    as ``decoder`` says (:data:`DECODERS`)."""
    command = {
        "proto": [rebalancer_bin()],
        "paged": [rebalancer_bin()],
        "typed": [sys.executable, "-m", "bench.live", "--json-plan"],
        "general": [sys.executable, "-m", "bench.plan", "--general-plan"],
    }[decoder]
    extra = ["--paged-lists"] if decoder == "paged" else []
    cpu: dict[str, float] = {}
    with (OUT / "live-plan.json").open("wb") as fh:
        wall, rss, rc = run_child(
            [*command, "plan", "--kubeconfig", kubeconfig, "-o", "json", *extra], fh, cpu=cpu
        )
    summary = None
    if rc == 0:
        summary = orjson.loads((OUT / "live-plan.json").read_bytes()).get("summary")
    return {
        "decoder": decoder,
        "wall_s": wall,
        "client_cpu_s": cpu.get("cpu_s"),
        "peak_rss_bytes": rss,
        "exit": rc,
        "summary": summary,
    }


def json_plan(argv: list[str]) -> int:
    """``rebalancer ARGV`` asking for JSON only (``--json-plan``: the ``typed`` decoder)."""
    use_json_lists()
    from rebalancer.cli.main import main as cli_main  # noqa: PLC0415

    return cli_main(argv)


def measure(
    kubeconfig: str,
    repeat: int,
    descheduler: Path | None = None,
    *,
    floor_gc: bool = False,
    loop: int = 0,
    general: bool = False,
    decoders: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``repeat`` rounds of floor, (floor with the GC on,) plan, (descheduler); best of each.
    Each is measured with kube-apiserver's CPU seconds. ``loop``: then that many loop-mode
    runs with the watch, and as many with --relist (:func:`loop_passes`). ``general``: each
    round also a plan with the typed decoder turned off. ``decoders``: each round also a plan
    reading each of those ways (:data:`DECODERS`; "proto" is the plan pass itself)."""
    others = [d for d in decoders if d != "proto"]
    by_decoder: dict[str, list[dict[str, Any]]] = {d: [] for d in others}
    floors: list[dict[str, Any]] = []
    floors_gc: list[dict[str, Any]] = []
    plans: list[dict[str, Any]] = []
    lists: list[dict[str, Any]] = []
    generals: list[dict[str, Any]] = []
    desched: list[dict[str, Any]] = []
    pid = apiserver_pid(kubeconfig)
    metrics = go_metrics(kubeconfig)
    for i in range(repeat):
        with ApiserverCpu(pid, metrics) as cpu:
            floors.append(floor_child(kubeconfig))
        cpu.record(floors[-1])
        if floor_gc:
            floors_gc.append(floor_child(kubeconfig, gc_on=True))
        with ApiserverCpu(pid, metrics) as cpu:
            plans.append(plan_child(kubeconfig))
        cpu.record(plans[-1])
        with ApiserverCpu(pid, metrics) as cpu:
            lists.append(pods_list(kubeconfig))
        cpu.record(lists[-1])
        if general:
            with ApiserverCpu(pid, metrics) as cpu:
                generals.append(plan_child(kubeconfig, "general"))
            cpu.record(generals[-1])
        for decoder in others:
            with ApiserverCpu(pid, metrics) as cpu:
                by_decoder[decoder].append(plan_child(kubeconfig, decoder))
            cpu.record(by_decoder[decoder][-1])
        if descheduler is not None:
            with ApiserverCpu(pid, metrics) as cpu:
                desched.append(descheduler_pass(descheduler, kubeconfig))
            cpu.record(desched[-1])
        print(
            f"  round {i + 1}: floor {floors[-1]['wall_s']:.2f}s "
            f"(LIST+parse {floors[-1].get('list_s', 0):.2f}s)"
            + (f", floor with GC {floors_gc[-1]['wall_s']:.2f}s" if floors_gc else "")
            + f", plan {plans[-1]['wall_s']:.2f}s exit {plans[-1]['exit']}"
            + f", pods' LIST alone {lists[-1]['wall_s']:.2f}s"
            + (f", plan (general decoder) {generals[-1]['wall_s']:.2f}s" if generals else "")
            + "".join(f", plan ({d}) {runs[-1]['wall_s']:.2f}s" for d, runs in by_decoder.items())
            + (f", descheduler {desched[-1]['wall_s']:.2f}s" if desched else ""),
            file=sys.stderr,
            flush=True,
        )

    def best(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
        return min(runs, key=lambda r: float(r["wall_s"])) if runs else None

    best_floor, best_plan = best(floors), best(plans)
    assert best_floor is not None and best_plan is not None
    passes = {"floor": floors, "plan": plans, "pods LIST": lists, "descheduler": desched} | {
        f"plan ({d})": runs for d, runs in by_decoder.items()
    }
    cpu_means = {k: mean_cpu(runs) for k, runs in passes.items()}
    cpu_no_gc = {k: no_gc_cpu(runs) for k, runs in passes.items()}
    measured = [r for runs in passes.values() for r in runs if "apiserver_alloc_bytes" in r]
    allocated = sum(float(r["apiserver_alloc_bytes"]) for r in measured)
    gc_per_byte = (
        sum(float(r["apiserver_gc_cpu_s"]) for r in measured) / allocated if allocated else None
    )
    cpu_attributed = {k: attributed_cpu(runs, gc_per_byte) for k, runs in passes.items()}
    loops = []
    for relist in (False, True) if loop else ():
        print(f"  loop mode ({'relist' if relist else 'watch'}), {loop} runs", file=sys.stderr)
        loops.append(loop_passes(kubeconfig, loop, pid, relist))
    return {
        "loops": loops,
        "apiserver_pid_found": pid is not None,
        "apiserver_cpu_mean_s": cpu_means,
        "apiserver_cpu_no_gc_s": cpu_no_gc,
        "apiserver_gc_cpu_per_gib": gc_per_byte * 2**30 if gc_per_byte is not None else None,
        "apiserver_cpu_attributed_s": cpu_attributed,
        "floor": best_floor,
        "floor_gc": best(floors_gc),
        "plan": best_plan,
        "plan_general": best(generals),
        "plan_general_all": generals,
        "plan_decoders": {"proto": best_plan} | {d: best(runs) for d, runs in by_decoder.items()},
        "plan_decoders_all": by_decoder,
        "descheduler": best(desched),
        "descheduler_all": desched,
        "floor_all": floors,
        "floor_gc_all": floors_gc,
        "plan_all": plans,
        "pods_list_all": lists,
        "ratio": best_plan["wall_s"] / best_floor["wall_s"],
    }


def serve(
    size: str,
    *,
    seed: int,
    parallel: int,
    hold: float | None,
    repeat: int,
    descheduler: Path | None,
    floor_gc: bool = False,
    loop: int = 0,
    general: bool = False,
    decoders: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Start a control plane and load it; measure it, or with ``hold`` keep it up that long."""
    from bench.load import load_cluster  # noqa: PLC0415
    from e2e.cluster.controlplane import ControlPlane, build  # noqa: PLC0415

    snap = snapshot_path(size, seed)
    cp = ControlPlane(build(quiet=True), node_count=0)
    cp.start()
    print(f"control plane up in {cp.startup_seconds}s; run dir {cp.run_dir}", file=sys.stderr)
    try:
        cp.assert_own_cluster(cp.kubeconfig)
        load = load_cluster(cp, snap, parallel=parallel)
        print(f"loaded: {load}", file=sys.stderr, flush=True)
        if hold is not None:
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            print(f"serving: --kubeconfig {cp.kubeconfig} for {hold:.0f}s", file=sys.stderr)
            stop.wait(hold)
            return None
        return load, measure(
            str(cp.kubeconfig),
            max(1, repeat),
            descheduler,
            floor_gc=floor_gc,
            loop=loop,
            general=general,
            decoders=decoders,
        )
    finally:
        cp.stop()


def report_lines(size: str, load: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """The printed figures."""
    f, p = result["floor"], result["plan"]
    lines = [
        f"{'size':<7} {'nodes':>6} {'pods':>7} {'LIST MB':>7} {'pages':>5} "
        f"{'floor wall':>10} {'(LIST+parse)':>12} {'floor RSS':>9} "
        f"{'plan wall':>9} {'plan RSS':>8} {'ratio':>6}",
    ]
    lines.append("-" * len(lines[0]))
    lines.append(
        f"{size:<7} {load['nodes']:>6} {load['pods']:>7} {f.get('mb', 0):>7} "
        f"{f.get('pages', 0):>5} {f['wall_s']:>9.2f}s {f.get('list_s', 0):>11.2f}s "
        f"{f['peak_rss_bytes'] / 2**20:>6.0f}MiB {p['wall_s']:>8.2f}s "
        f"{p['peak_rss_bytes'] / 2**20:>5.0f}MiB {result['ratio']:>5.2f}x"
    )
    fg = result.get("floor_gc")
    if fg:
        lines.append(
            f"floor with the GC on: {fg['wall_s']:.2f}s (LIST+parse {fg.get('list_s', 0):.2f}s, "
            f"parse {fg.get('parse_s', 0):.2f}s); plan / that: {p['wall_s'] / fg['wall_s']:.2f}x"
        )
    decoded = result.get("plan_decoders") or {}
    if len(decoded) > 1:
        lines.append(
            "plan pass by decoder (best wall of the rounds): wall, client CPU, peak RSS, "
            "kube-apiserver CPU"
        )
        for name, run in decoded.items():
            if run is None:
                continue
            lines.append(
                f"  {name:<8} {run['wall_s']:>6.2f}s {run.get('client_cpu_s') or 0:>6.2f}s "
                f"{run['peak_rss_bytes'] / 2**20:>6.0f}MiB {run.get('apiserver_cpu_s', 0):>6.2f}s"
                f"  exit {run['exit']}"
            )
    pg = result.get("plan_general")
    if pg:
        lines.append(
            f"plan with the general decoder: {pg['wall_s']:.2f}s, peak RSS "
            f"{pg['peak_rss_bytes'] / 2**20:.0f}MiB, kube-apiserver CPU "
            f"{pg.get('apiserver_cpu_s', 0):.2f}s"
        )
    means = {k: v for k, v in (result.get("apiserver_cpu_mean_s") or {}).items() if v is not None}
    lines.append(
        "kube-apiserver CPU per pass, mean over the rounds: "
        + ", ".join(f"{k} {v:.2f}s" for k, v in means.items())
        + ("" if result.get("apiserver_pid_found") else " (kube-apiserver not found: 0)")
    )
    attributed = {
        k: v for k, v in (result.get("apiserver_cpu_attributed_s") or {}).items() if v is not None
    }
    if attributed:
        lines.append(
            "kube-apiserver CPU per pass with GC charged by bytes allocated "
            f"({result['apiserver_gc_cpu_per_gib']:.2f} CPU-s per GiB): "
            + ", ".join(f"{k} {v:.2f}s" for k, v in attributed.items())
        )
    quiet = {k: v for k, v in (result.get("apiserver_cpu_no_gc_s") or {}).items() if v}
    if quiet:
        lines.append(
            "kube-apiserver CPU per pass in which no GC cycle ran, mean (passes): "
            + ", ".join(f"{k} {v[0]:.2f}s ({v[1]})" for k, v in quiet.items())
        )
        share = lower_bound_share({k: v[0] for k, v in quiet.items()})
        if share is not None:
            lines.append(
                f"  the pods' LIST alone is {share:.2f}x the descheduler's pass there "
                "(the target is a whole pass <= 0.5x)"
            )
    d = result.get("descheduler")
    if d:
        lines.append(
            f"descheduler v0.36.0 --dry-run pass (topology spread only): {d['wall_s']:.2f}s, "
            f"peak RSS {d['peak_rss_bytes'] / 2**20:.0f}MiB, exit {d['exit']}, "
            f"kube-apiserver CPU {d.get('apiserver_cpu_s', 0):.2f}s"
        )
    for lp in result.get("loops") or ():
        if not lp["passes"]:
            lines.append(f"loop mode ({lp['mode']}): no run finished")
            continue
        rss = [r["rss_bytes"] / 2**20 for r in lp["runs"]]
        lines.append(
            f"loop mode ({lp['mode']}), {lp['passes']} runs: first {lp['first_s']:.2f}s, later "
            f"best {lp['later_best_s'] or 0:.2f}s median {lp['later_median_s'] or 0:.2f}s; "
            f"kube-apiserver CPU first {lp['apiserver_cpu_first_s']:.2f}s, later "
            f"mean {lp['apiserver_cpu_later_mean_s'] or 0:.3f}s median "
            f"{lp.get('apiserver_cpu_later_median_s') or 0:.3f}s per run (interval included); "
            f"RSS per run {', '.join(f'{x:.0f}' for x in rss)} MiB"
        )
    return lines


def lower_bound_share(cpu: dict[str, float]) -> float | None:
    """kube-apiserver CPU of the pods' LIST alone over the descheduler's pass (each without
    garbage collection): a lower bound of any pass that reads every pod, against the
    descheduler."""
    alone, desched = cpu.get("pods LIST"), cpu.get("descheduler")
    return alone / desched if alone is not None and desched else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="medium", help="bench.gen preset (default medium)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=16, help="concurrent creators while loading")
    ap.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="measure a cluster already loaded (e.g. by --serve) instead of starting one",
    )
    ap.add_argument(
        "--serve",
        type=float,
        metavar="SECONDS",
        help="start and load, print the kubeconfig, keep the control plane up SECONDS (or "
        "until SIGINT/SIGTERM), measure nothing",
    )
    ap.add_argument("--out", default=str(RESULTS / "live.json"))
    ap.add_argument(
        "--no-descheduler",
        action="store_true",
        help="skip the descheduler --dry-run pass (default: run it, built by bench/descheduler)",
    )
    ap.add_argument(
        "--floor-gc",
        action="store_true",
        help="also measure the floor with the GC on (as bench.live measured it before)",
    )
    ap.add_argument(
        "--loop",
        type=int,
        default=0,
        metavar="N",
        help="also N loop-mode runs (run --dry-run --interval 1s) with the watch, and N with "
        "--relist: time per run, RSS per run, kube-apiserver CPU per run",
    )
    ap.add_argument(
        "--general",
        action="store_true",
        help="each round also a plan with the typed decoder off (orjson + the converter)",
    )
    ap.add_argument(
        "--decoders",
        default="proto",
        help="comma-separated: each round a plan pass reading each way, side by side: proto "
        "(pods in one protobuf LIST read as a stream, the default path), paged (pod pages as "
        "protobuf, --paged-lists), typed (all JSON, msgspec), general (all JSON, orjson + the "
        "converter); e.g. proto,paged,typed",
    )
    ap.add_argument("--floor", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    ap.add_argument("--json-plan", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.json_plan is not None:
        return json_plan(args.json_plan)
    decoders = tuple(d.strip() for d in args.decoders.split(",") if d.strip())
    unknown = [d for d in decoders if d not in DECODERS]
    if unknown:
        ap.error(f"--decoders: unknown {', '.join(unknown)} (known: {', '.join(DECODERS)})")
    if args.floor:
        sys.stdout.buffer.write(orjson.dumps(floor(args.floor, gc_on=args.floor_gc)))
        return 0
    descheduler = None
    if not args.no_descheduler and args.serve is None:
        from bench.compare import build_descheduler  # noqa: PLC0415

        descheduler = build_descheduler()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.kubeconfig:
        result = measure(
            args.kubeconfig,
            max(1, args.repeat),
            descheduler,
            floor_gc=args.floor_gc,
            loop=args.loop,
            general=args.general,
            decoders=decoders,
        )
        counts = result["floor"].get("counts") or {}
        load = {"nodes": counts.get("nodes", 0), "pods": counts.get("pods", 0), "existing": True}
    else:
        loaded = serve(
            args.size,
            seed=args.seed,
            parallel=args.parallel,
            hold=args.serve,
            repeat=args.repeat,
            descheduler=descheduler,
            floor_gc=args.floor_gc,
            loop=args.loop,
            general=args.general,
            decoders=decoders,
        )
        if loaded is None:
            return 0
        load, result = loaded
    lines = report_lines(args.size, load, result)
    print("\n".join(lines))
    print(f"machine: {os.cpu_count()} cores, {machine()['mem_gib']} GiB, shared: timings are noisy")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(
        orjson.dumps(
            {"machine": machine(), "size": args.size, "load": load, **result},
            option=orjson.OPT_INDENT_2,
        )
        + b"\n"
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
