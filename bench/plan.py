"""Offline planning benchmark: ``rebalancer plan --snapshot FILE -o json`` per cluster size.

    python -m bench.plan [--sizes small,medium,large] [--seed 1] [--repeat 1]
                         [--out bench/results/plan.json]

For each size, a seeded cluster is generated once with ``bench.gen`` (cached under
``bench/out/``) in two forms, and each form is measured:

* ``kubectl``: the objects whole, as ``kubectl get ... -o json`` holds them (one document);
* ``snapshot``: what ``rebalancer snapshot`` writes for that cluster: every object trimmed by
  ``rebalancer.cluster.read.slim.slim`` and written by
  ``rebalancer.cluster.read.snapshot.dump_objects(..., "json")`` (one object per line), the two
  functions the command itself uses after its LIST.

Each is measured:

* end to end: ``rebalancer plan --snapshot FILE -o json`` in a subprocess, wall time and peak
  RSS (``/usr/bin/time -f %M`` of that child alone, see :func:`run_child`);
* phases, in a fresh subprocess (``python -m bench.plan --phases FILE``): reading the file,
  ``orjson.loads`` on its bytes alone (the parse floor: a plain call, and again with the cyclic
  garbage collector off, which is how rebalancer parses),
  ``rebalancer.cluster.read.snapshot.load_snapshot`` (read + parse + convert),
  ``rebalancer.core.spread.analyze`` and ``rebalancer.core.planner.plan`` (which runs
  ``analyze`` again itself: ``planning`` is ``plan - analysis``). The plan's statistics say how
  the groups of views sharing pods were planned (exact search or fallback) and what the exact
  search cost.

Figures are printed and written, never asserted. The machine is shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "bench" / "out"
RESULTS = ROOT / "bench" / "results"


def machine() -> dict[str, Any]:
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "mem_gib": round(mem_kb / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "note": "shared machine (other jobs run e2e tests concurrently): timings are noisy",
    }


def trimmed_path(size: str, seed: int) -> Path:
    """The cached ``rebalancer snapshot`` form of a size's cluster, written when missing."""
    from rebalancer.cluster.read.slim import slim  # noqa: PLC0415
    from rebalancer.cluster.read.snapshot import dump_objects, load_objects  # noqa: PLC0415

    path = OUT_DIR / f"rebalancer-snapshot-{size}-seed{seed}.json"
    if not path.exists():
        source = snapshot_path(size, seed)
        tmp = path.with_suffix(".tmp.json")
        tmp.write_bytes(dump_objects([slim(o) for o in load_objects(source)], "json"))
        tmp.rename(path)
    return path


def snapshot_path(size: str, seed: int) -> Path:
    """The cached snapshot for a size, generated with bench.gen when missing."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"snapshot-{size}-seed{seed}.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp.json")
        t0 = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.gen",
                "--size",
                size,
                "--seed",
                str(seed),
                "-o",
                str(tmp),
            ],
            check=True,
            cwd=ROOT,
        )
        tmp.rename(path)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return path


TIME_BIN = "/usr/bin/time"


def run_child(
    argv: list[str], stdout: Any, stderr: Any = None, cpu: dict[str, float] | None = None
) -> tuple[float, int, int]:
    """Run argv; return (wall seconds, peak RSS in bytes, exit code) of that child alone.
    ``cpu``, when given, receives ``cpu_s``: the child's user + system CPU seconds.

    The peak RSS comes from ``/usr/bin/time -f %M`` when it exists: Linux carries a process's
    RSS high-water mark across fork + exec, so ``wait4``'s ru_maxrss of a child forked from a
    big parent reports at least the parent's RSS. ``time`` is small, so its child's is clean.
    Without ``time``, ``wait4`` is used (an upper bound).
    """
    rss_file = None
    if os.access(TIME_BIN, os.X_OK):
        fd, rss_file = tempfile.mkstemp(prefix="bench-rss-")
        os.close(fd)
        argv = [TIME_BIN, "-q", "-f", "%M", "-o", rss_file, *argv]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if cpu is not None:
        cpu["cpu_s"] = usage.ru_utime + usage.ru_stime
    rss = usage.ru_maxrss * 1024
    if rss_file is not None:
        text = Path(rss_file).read_text().split()
        os.unlink(rss_file)
        if text and text[-1].isdigit():
            rss = int(text[-1]) * 1024
    return wall, rss, rc


def rebalancer_bin() -> str:
    exe = Path(sys.executable).parent / "rebalancer"
    return str(exe) if exe.exists() else "rebalancer"


DECODERS = ("typed", "general")


def use_general_path() -> None:
    """Turn the typed decoder off in this process: snapshot files and live LIST pages then
    take the general path (orjson + the converter), as before it existed. For side-by-side
    figures only."""
    from rebalancer.cluster.read import fastdecode  # noqa: PLC0415

    fastdecode.load_lines = lambda *args, **kwargs: None
    fastdecode.load_list = lambda *args, **kwargs: None
    fastdecode.page_items = lambda *args, **kwargs: None  # the reader's LIST pages
    use_json_lists()


def use_json_lists() -> None:
    """Ask for JSON only in this process: the live reader's pod pages then come as JSON, as
    before protobuf was asked for. For side-by-side figures only."""
    from rebalancer.cluster.read import reader  # noqa: PLC0415

    setattr(reader, "PROTOBUF_RESOURCES", frozenset())  # noqa: B010  # a Final, patched here


def general_plan(argv: list[str]) -> int:
    """``rebalancer ARGV`` with the typed decoder off (``--general-plan``)."""
    use_general_path()
    from rebalancer.cli.main import main as cli_main  # noqa: PLC0415

    return cli_main(argv)


def phases(path: str, decoder: str = "typed") -> dict[str, Any]:
    """Phase timings in this (fresh) process. Printed as JSON by ``--phases``."""
    if decoder == "general":
        use_general_path()
    from rebalancer.cluster.gcpause import gc_paused  # noqa: PLC0415
    from rebalancer.cluster.read.snapshot import load_snapshot  # noqa: PLC0415
    from rebalancer.core.planner import plan  # noqa: PLC0415
    from rebalancer.core.policy import Policy  # noqa: PLC0415
    from rebalancer.core.spread import analyze  # noqa: PLC0415

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    data = Path(path).read_bytes()
    out["read_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    doc = orjson.loads(data)
    out["orjson_loads_s"] = time.perf_counter() - t0
    del doc
    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    doc = orjson.loads(data)
    out["orjson_loads_nogc_s"] = time.perf_counter() - t0
    gc.enable()
    del doc, data
    gc.collect()
    t0 = time.perf_counter()
    snap = load_snapshot(path)
    out["load_s"] = time.perf_counter() - t0
    policy = Policy()
    t0 = time.perf_counter()
    with gc_paused():  # as the command pauses it
        analysis = analyze(snap, policy)
    out["analysis_s"] = time.perf_counter() - t0
    out["views"] = len(analysis.views)
    out["violated_views"] = sum(1 for v in analysis.views if v.violated)
    del analysis
    t0 = time.perf_counter()
    joint: dict[str, float] = {}
    with gc_paused():
        result = plan(snap, policy, time.time(), stats=joint)
    out["plan_s"] = time.perf_counter() - t0
    out["joint"] = joint
    out["planning_s"] = max(0.0, out["plan_s"] - out["analysis_s"])
    out["evictions"] = len(result.evictions)
    out["lower_bound"] = getattr(result, "lower_bound", None)
    out["pods"] = len(snap.pods)
    out["nodes"] = len(snap.nodes)
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


FORMS = ("kubectl", "snapshot")


def measure(size: str, form: str, seed: int, repeat: int, decoder: str) -> dict[str, Any]:
    path = snapshot_path(size, seed) if form == "kubectl" else trimmed_path(size, seed)
    row: dict[str, Any] = {"size": size, "form": form, "file": str(path.relative_to(ROOT))}
    row["decoder"] = decoder
    command = [rebalancer_bin()]
    if decoder == "general":
        command = [sys.executable, "-m", "bench.plan", "--general-plan"]
    row["file_mb"] = round(path.stat().st_size / 1e6, 1)
    walls, rsss = [], []
    out_file = OUT_DIR / f"plan-{size}-{form}.json"
    for _ in range(repeat):
        with out_file.open("wb") as fh:
            wall, rss, rc = run_child([*command, "plan", "--snapshot", str(path), "-o", "json"], fh)
        if rc != 0:
            row["error"] = f"rebalancer plan exited {rc}"
            return row
        walls.append(wall)
        rsss.append(rss)
    row["wall_s"] = min(walls)
    row["wall_all_s"] = walls
    row["peak_rss_bytes"] = max(rsss)
    try:
        summary = orjson.loads(out_file.read_bytes()).get("summary")
        row["plan_summary"] = summary
    except (OSError, orjson.JSONDecodeError, AttributeError):
        pass
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        proc = subprocess.run(
            [sys.executable, "-m", "bench.plan", "--phases", str(path), "--decoder", decoder],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        ph = orjson.loads(proc.stdout)
        if best is None or ph["load_s"] + ph["plan_s"] < best["load_s"] + best["plan_s"]:
            best = ph
    assert best is not None
    row["phases"] = best
    row["wall_over_orjson"] = row["wall_s"] / best["orjson_loads_s"]
    row["wall_over_orjson_nogc"] = row["wall_s"] / best["orjson_loads_nogc_s"]
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'size':<7} {'form':<9} {'decoder':<8} {'nodes':>6} {'pods':>7} {'MB':>6} {'orjson':>7} "
        f"{'(no gc)':>7} {'load':>7} {'analysis':>8} {'planning':>8} {'e2e wall':>8} "
        f"{'/orjson':>7} {'(no gc)':>7} {'peak RSS':>9} {'evictions':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['size']:<7} {r['form']:<9} {r['decoder']:<8} ERROR {r['error']}")
            continue
        p = r["phases"]
        lines.append(
            f"{r['size']:<7} {r['form']:<9} {r['decoder']:<8} {p['nodes']:>6} {p['pods']:>7} "
            f"{r['file_mb']:>6.1f} "
            f"{p['orjson_loads_s']:>6.2f}s {p['orjson_loads_nogc_s']:>6.2f}s {p['load_s']:>6.2f}s "
            f"{p['analysis_s']:>7.2f}s {p['planning_s']:>7.2f}s {r['wall_s']:>7.2f}s "
            f"{r['wall_over_orjson']:>6.2f}x {r['wall_over_orjson_nogc']:>6.2f}x "
            f"{r['peak_rss_bytes'] / 2**20:>6.0f}MiB {p['evictions']:>9}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--forms", default=",".join(FORMS), help="kubectl, snapshot or both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest is kept")
    ap.add_argument("--out", default=str(RESULTS / "plan.json"))
    ap.add_argument(
        "--decoders",
        default="typed",
        help="typed (msgspec, the default path), general (orjson + the converter) or both",
    )
    ap.add_argument("--phases", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--decoder", default="typed", choices=DECODERS, help=argparse.SUPPRESS)
    ap.add_argument("--general-plan", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.general_plan is not None:
        return general_plan(args.general_plan)
    if args.phases:
        sys.stdout.buffer.write(orjson.dumps(phases(args.phases, args.decoder)))
        return 0
    decoders = [d.strip() for d in args.decoders.split(",") if d.strip()]
    if sorted(set(decoders) - set(DECODERS)):
        ap.error(f"--decoders: use {' or '.join(DECODERS)}")
    rows = []
    forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    unknown = sorted(set(forms) - set(FORMS))
    if unknown:
        ap.error(f"--forms: unknown {', '.join(unknown)}; use {' or '.join(FORMS)}")
    for size in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        for form in forms:
            for decoder in decoders:
                print(f"measuring {size} {form} {decoder} ...", file=sys.stderr, flush=True)
                rows.append(measure(size, form, args.seed, max(1, args.repeat), decoder))
    print(table(rows))
    for r in rows:
        j = r.get("phases", {}).get("joint")
        if j is not None:
            print(
                f"{r['size']:<7} {r['form']:<9} views sharing pods: "
                f"{int(j.get('joint-exact', 0))} groups exact, "
                f"{int(j.get('joint-fallback', 0))} fallback, "
                f"{int(j.get('joint-unsolved', 0))} unreachable; exact search "
                f"{int(j.get('joint-visits', 0))} states visited, "
                f"{j.get('joint-seconds', 0.0):.3f} s"
            )
    print(f"machine: {os.cpu_count()} cores, {machine()['mem_gib']} GiB, shared: timings are noisy")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(
        orjson.dumps({"machine": machine(), "results": rows}, option=orjson.OPT_INDENT_2) + b"\n"
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
