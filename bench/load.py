"""Create the objects of a ``bench.gen`` snapshot in the e2e control plane (127.0.0.1).

    from bench.load import load_cluster
    load_cluster(control_plane, "bench/out/snapshot-medium-seed1.json", parallel=4)

Used by :mod:`bench.live`. The objects are created as they are, pods already bound
(``spec.nodeName``), so nothing is scheduled. To keep the cluster still while it is measured,
the control plane's kube-controller-manager (a process this benchmark started) is stopped once
the namespaces have their default ServiceAccount: otherwise the garbage collector would delete
pods whose owners (Deployments, DaemonSets) are not in the snapshot, the ReplicaSet/StatefulSet
controllers would reconcile, and node-lifecycle would taint and evict pods on the generated
nodes, which have no kubelet (they carry no kwok annotation, so kwok leaves them alone). Pods
therefore stay ``Pending`` but bound, which rebalancer counts like running pods.

Server-assigned and admission-computed fields are dropped: uid, resourceVersion,
creationTimestamp, status except on Nodes (so PDBs have no status: no disruption controller
runs), ``spec.priority``/``preemptionPolicy`` (the Priority admission sets them from the
class), Service cluster IPs. ReplicaSets and StatefulSets get a minimal pod template. Objects
go out in chunks through ``kubectl create --validate=false -f`` with ``parallel`` concurrent
kubectl processes (bounded).
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

CHUNK = 500
PHASES = (
    ("PriorityClass",),
    ("Node",),
    ("PodDisruptionBudget", "Service", "ReplicaSet", "StatefulSet"),
    ("Pod",),
)


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(k, None)
    kind = obj.get("kind")
    if kind != "Node":
        obj.pop("status", None)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        if kind == "Pod":
            spec.pop("priority", None)
            spec.pop("preemptionPolicy", None)
        elif kind in ("ReplicaSet", "StatefulSet") and "template" not in spec:
            # bench.gen writes no pod template; the API requires one (no controller runs).
            labels = dict((spec.get("selector") or {}).get("matchLabels") or {})
            spec["template"] = {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "bench/app:1"}]},
            }
        elif kind == "Service":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
    return obj


def _create_chunks(
    cp: Any, items: list[dict[str, Any]], tmp: Path, tag: str, parallel: int
) -> None:
    files = []
    for i in range(0, len(items), CHUNK):
        f = tmp / f"{tag}-{i // CHUNK:04d}.json"
        f.write_bytes(
            orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items[i : i + CHUNK]})
        )
        files.append(f)

    def create(f: Path) -> str:
        proc = cp.kubectl(
            "create", "--validate=false", "-f", str(f), "-o", "name", check=False, timeout=900
        )
        if proc.returncode != 0:
            return f"{f.name}: {proc.stderr.strip()[-500:]}"
        return ""

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        errors = [e for e in pool.map(create, files) if e]
    if errors:
        raise RuntimeError(f"kubectl create failed for {len(errors)} chunk(s): {errors[0]}")


def load_cluster(cp: Any, snapshot: str | Path, *, parallel: int = 4) -> dict[str, Any]:
    """Create the snapshot's objects in ``cp`` (an e2e ControlPlane); return counts and times."""
    t_start = time.perf_counter()
    items = orjson.loads(Path(snapshot).read_bytes())["items"]
    namespaces = sorted(
        {i["metadata"]["namespace"] for i in items if i["metadata"].get("namespace")}
    )
    cp.apply(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces]
    )
    for n in namespaces:
        cp.wait_for(
            f"default ServiceAccount in {n}",
            lambda n=n: (
                cp.kubectl("get", "sa", "default", "-n", n, check=False).returncode == 0 or None
            ),
            timeout=120,
        )
    for comp in getattr(cp, "components", ()):
        if comp.name == "kube-controller-manager":
            cp._kill(comp)  # our own child process (see the module docstring)
    timings: dict[str, float] = {}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="rebalancer-bench-load-") as tmp:
        for phase in PHASES:
            batch = [clean(i) for i in items if i.get("kind") in phase]
            for kind in phase:
                counts[kind] = sum(1 for i in batch if i["kind"] == kind)
            t0 = time.perf_counter()
            _create_chunks(cp, batch, Path(tmp), "-".join(phase).lower(), parallel)
            timings["+".join(phase)] = round(time.perf_counter() - t0, 1)
            print(
                f"  created {len(batch)} {'/'.join(phase)} in {timings['+'.join(phase)]}s",
                file=sys.stderr,
                flush=True,
            )
    listed = len(cp.get_json("pods", "-A", "--chunk-size=5000")["items"])
    return {
        "nodes": counts.get("Node", 0),
        "pods": counts.get("Pod", 0),
        "pods_listed": listed,
        "counts": counts,
        "create_s": timings,
        "total_s": round(time.perf_counter() - t_start, 1),
    }
