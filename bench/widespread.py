"""One large workload against a hard hostname spread: plan it offline at several sizes.

    python -m bench.widespread [--pods 1100,3000,10000] [--repeat 1]
                               [--out bench/results/widespread.json]

The cluster (:func:`workload`): ``N`` nodes and one ReplicaSet of ``N`` pods with a hard
hostname topology spread constraint (maxSkew 1), its pods bunched ten to a node on the first
tenth of the nodes, every other node empty. Every node must end with one pod: a minimal plan
evicts nine pods from each crowded node, ``N - N/10`` in all, one victim search over ``N``
domains and ``N - N/10`` removals.

For each size the snapshot is written once (``bench/out/widespread-N.json``), then
``rebalancer plan --snapshot FILE -o json`` runs in a subprocess: its exit code, the evictions
of its plan, wall time, CPU time (user + system) and peak RSS (``/usr/bin/time -f %M`` of that
child alone, as ``bench.plan`` measures). With ``--repeat N`` the run with the least CPU is
kept. Figures are printed and written, never asserted. The machine is
shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.plan import OUT_DIR, RESULTS, ROOT, machine, rebalancer_bin, run_child

HOST_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
NAMESPACE = "shop"
APP = "web"
RS_NAME = "web-5d8c7b9f4"
RS_UID = "7a3c0d1e-0000-4000-8000-000000000001"
PER_NODE = 10  # pods on each crowded node
BASE_TS = 1_760_000_000


def _ts(seconds: int) -> str:
    return dt.datetime.fromtimestamp(BASE_TS + seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def _node(i: int) -> dict[str, Any]:
    name = node_name(i)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "creationTimestamp": _ts(0),
            "labels": {HOST_KEY: name, ZONE_KEY: ZONES[i % len(ZONES)]},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(i: int, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{RS_NAME}-{i:05d}",
            "namespace": NAMESPACE,
            "uid": f"00000000-0000-4000-9000-{i:012d}",
            "creationTimestamp": _ts(3600 + i),
            "labels": {"app": APP, "pod-template-hash": "5d8c7b9f4"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": RS_NAME,
                    "uid": RS_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/web:1.0",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": HOST_KEY,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": APP}},
                }
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def workload(pods: int) -> dict[str, Any]:
    """The snapshot (``kind: List``) of ``pods`` nodes and one ReplicaSet of ``pods`` pods, ten
    on each of the first ``pods // 10`` nodes (``pods`` must be a multiple of 10)."""
    if pods <= 0 or pods % PER_NODE:
        raise ValueError(f"pods must be a positive multiple of {PER_NODE}, not {pods}")
    items: list[dict[str, Any]] = [_node(i) for i in range(pods)]
    items.append(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": RS_NAME, "namespace": NAMESPACE, "uid": RS_UID},
            "spec": {"replicas": pods, "selector": {"matchLabels": {"app": APP}}},
            "status": {"replicas": pods, "readyReplicas": pods},
        }
    )
    items += [_pod(i, node_name(i // PER_NODE)) for i in range(pods)]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def snapshot_file(pods: int) -> Path:
    """The snapshot of :func:`workload`, written once under ``bench/out/``."""
    path = OUT_DIR / f"widespread-{pods}.json"
    if not path.exists():
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(workload(pods)))
        tmp.rename(path)
    return path


def measure(pods: int, repeat: int) -> dict[str, Any]:
    """``rebalancer plan --snapshot FILE -o json`` on the workload: the fastest of ``repeat``
    runs (its wall time and peak RSS), its exit code and evictions."""
    path = snapshot_file(pods)
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            argv = [rebalancer_bin(), "plan", "--snapshot", str(path), "-o", "json"]
            cpu: dict[str, float] = {}
            wall, rss, rc = run_child(argv, stdout=out, stderr=err, cpu=cpu)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        evictions = None
        if rc == 0:
            evictions = len(orjson.loads(stdout)["evictions"])
        row = {
            "pods": pods,
            "nodes": pods,
            "expected_evictions": pods - pods // PER_NODE,
            "exit": rc,
            "evictions": evictions,
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu.get("cpu_s", 0.0), 3),
            "peak_rss_mib": round(rss / 2**20, 1),
            "stderr_tail": stderr.decode(errors="replace").strip().splitlines()[-1:],
        }
        if best is None or (rc == 0 and row["cpu_s"] < best["cpu_s"]):
            best = row
    assert best is not None
    return best


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| pods = nodes | crowded nodes | exit | evictions (expected) | wall s | CPU s "
        "| peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['pods']:,} | {r['pods'] // PER_NODE:,} | {r['exit']} | "
            f"{'-' if r['evictions'] is None else format(r['evictions'], ',')} "
            f"({r['expected_evictions']:,}) | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
            f"{r['peak_rss_mib']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", default="1100,3000,10000", help="sizes, multiples of 10")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest is kept")
    ap.add_argument("--out", default=str(RESULTS / "widespread.json"))
    args = ap.parse_args(argv)
    rows = []
    for pods in [int(p) for p in args.pods.split(",") if p]:
        t0 = time.perf_counter()
        row = measure(pods, args.repeat)
        rows.append(row)
        print(
            f"{pods} pods: exit {row['exit']}, {row['evictions']} evictions, "
            f"{row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, {row['peak_rss_mib']:.0f} MiB "
            f"(measured in {time.perf_counter() - t0:.1f} s)"
            + (f" {row['stderr_tail']}" if row["exit"] else ""),
            file=sys.stderr,
        )
    print(table(rows))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    ).stdout.strip()
    doc = {"machine": machine(), "python": platform.python_version(), "commit": commit}
    out.write_bytes(orjson.dumps({**doc, "rows": rows}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
