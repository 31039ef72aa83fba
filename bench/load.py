"""Create the objects of a ``bench.gen`` snapshot in the e2e control plane (127.0.0.1).

    from bench.load import load_cluster
    load_cluster(control_plane, "bench/out/snapshot-medium-seed1.json", parallel=16)

Used by :mod:`bench.live`. The objects are created as they are, pods already bound
(``spec.nodeName``), so nothing is scheduled. To keep the cluster still while it is measured,
the control plane's kube-controller-manager (a process this benchmark started) is stopped once
the namespaces have their default ServiceAccount: otherwise the garbage collector would delete
pods whose owners (Deployments, DaemonSets) are not in the snapshot, the ReplicaSet/StatefulSet
controllers would reconcile, and node-lifecycle would taint and evict pods on the generated
nodes, which have no kubelet (they carry no kwok annotation, so kwok leaves them alone). Pods
therefore stay ``Pending`` but bound, which rebalancer counts like running pods. Admission gives
every new Node the ``node.kubernetes.io/not-ready:NoSchedule`` taint, which node-lifecycle lifts
once the Node reports Ready (the generated Nodes do); with it stopped, each Node's taints are
set back to the snapshot's by a merge PATCH. Left there, no replacement would fit on any node
and every plan would evict nothing. kube-scheduler
and kwok are stopped before anything is created: the pods are bound and the nodes are not
kwok's, so they have nothing to do, but both would cache every pod (GBs at 150,000 pods, on a
shared machine). Loading stops with an error when the machine's available memory falls below
:data:`MIN_AVAILABLE`.

Server-assigned and admission-computed fields are dropped: uid, resourceVersion,
creationTimestamp, status except on Nodes (so PDBs have no status: no disruption controller
runs), ``spec.priority``/``preemptionPolicy`` (the Priority admission sets them from the
class), Service cluster IPs. ReplicaSets and StatefulSets get a minimal pod template.
ClusterIP Services are created headless (``clusterIP: None``): allocating 10,000 cluster IPs
took the API server about 25 ms each, and rebalancer reads nothing of a Service but its
selector.

Objects are POSTed straight to the API server (``fieldValidation=Ignore``, like ``kubectl
create --validate=false``) by ``parallel`` threads, each on its own kept-alive TLS connection
with the control plane's admin client certificate: one request per object, as kubectl sends,
without a kubectl process per chunk or kubectl's client-side work. A 429 or 5xx answer, or a
dropped connection, is retried a bounded number of times; a 409 on a retry (the first attempt
got through) counts as created.
"""

from __future__ import annotations

import gc
import http.client
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from rebalancer.cluster.api.resources import RESOURCES

CHUNK = 200  # objects a worker takes at a time
ATTEMPTS = 6  # per object, for 429 / 5xx / connection errors
PHASES = (
    ("PriorityClass",),
    ("Node",),
    ("PodDisruptionBudget", "Service", "ReplicaSet", "StatefulSet"),
    ("Pod",),
)
PATHS = {r.kind: r for r in RESOURCES}
MIN_AVAILABLE = 2 << 30  # bytes of MemAvailable below which loading gives up
IDLE_COMPONENTS = ("kube-scheduler", "kwok")  # nothing for them to do here, see the docstring


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
            spec.pop("clusterIPs", None)
            if spec.get("type", "ClusterIP") == "ClusterIP":
                spec["clusterIP"] = "None"  # headless: no IP to allocate (see the docstring)
            else:
                spec.pop("clusterIP", None)
    return obj


class Poster:
    """POSTs objects to one API server over per-thread kept-alive TLS connections."""

    def __init__(self, server: str, ca_file: Path, cert: tuple[Path, Path]) -> None:
        url = urlsplit(server)
        if url.hostname != "127.0.0.1":
            raise ValueError(f"bench.load only loads a local control plane, not {server}")
        self.host, self.port = url.hostname, url.port or 443
        self.ctx = ssl.create_default_context(cafile=str(ca_file))
        self.ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        self.local = threading.local()
        self.connections: list[http.client.HTTPSConnection] = []
        self.lock = threading.Lock()

    def _conn(self, fresh: bool = False) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self.local, "conn", None)
        if conn is not None and fresh:
            conn.close()
            conn = None
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=120)
            self.local.conn = conn
            with self.lock:
                self.connections.append(conn)
        return conn

    def create(self, payload: Payload) -> str:
        """POST one object; "" when created, else an error message."""
        return self.send("POST", payload, "application/json")

    def patch(self, payload: Payload) -> str:
        """Merge-PATCH one object; "" when done, else an error message."""
        return self.send("PATCH", payload, "application/merge-patch+json")

    def send(self, method: str, payload: Payload, content_type: str) -> str:
        path, body, label = payload
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        error = ""
        for attempt in range(ATTEMPTS):
            try:
                conn = self._conn(fresh=attempt > 0)
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                error = f"{type(exc).__name__}: {exc}"
                time.sleep(0.2 * (attempt + 1))
                continue
            if resp.status < 300 or (resp.status == 409 and attempt > 0):
                return ""
            error = f"HTTP {resp.status}: {data[:300]!r}"
            if resp.status != 429 and resp.status < 500:
                break
            time.sleep(float(resp.getheader("Retry-After") or 0.2 * (attempt + 1)))
        return f"{label}: {error}"

    def count(self, path: str, limit: int = 5000) -> int:
        """How many objects a paginated LIST of ``path`` returns (metadata only: cheap)."""
        headers = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
        total, token = 0, ""
        for _ in range(100_000):  # bounded: a page per iteration
            query = f"?limit={limit}" + (f"&continue={token}" if token else "")
            conn = self._conn()
            conn.request("GET", path + query, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"LIST {path}: HTTP {resp.status}: {data[:300]!r}")
            page = orjson.loads(data)
            total += len(page.get("items") or ())
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                break
        return total

    def close(self) -> None:
        with self.lock:
            for conn in self.connections:
                conn.close()
            self.connections.clear()


Payload = tuple[str, bytes, str]
"""What one POST needs: the URL path, the JSON body, and a label for errors."""


def payload(obj: dict[str, Any]) -> Payload:
    """The POST of one (cleaned) object."""
    meta = obj["metadata"]
    path = PATHS[obj["kind"]].path(meta.get("namespace")) + "?fieldValidation=Ignore"
    return path, orjson.dumps(obj), f"{obj['kind']} {meta.get('namespace', '')}/{meta['name']}"


def mem_available() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def create_all(
    poster: Poster, payloads: Sequence[Payload], parallel: int, *, patch: bool = False
) -> None:
    """Create (or, with ``patch``, merge-patch) every object, ``parallel`` requests in flight;
    raise with the first failures."""
    send = poster.patch if patch else poster.create

    def create(start: int) -> list[str]:
        available = mem_available()
        if available is not None and available < MIN_AVAILABLE:
            return [f"stopped: only {available >> 20} MiB of memory available"]
        return [e for e in map(send, payloads[start : start + CHUNK]) if e]

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        failures = [e for errs in pool.map(create, range(0, len(payloads), CHUNK)) for e in errs]
    if failures:
        verb = "patched" if patch else "created"
        raise RuntimeError(f"{len(failures)} object(s) not {verb}, first: {failures[:3]}")


def taints_patch(node: dict[str, Any]) -> Payload:
    """The merge PATCH that gives a created Node back the snapshot's taints (and no others)."""
    name = node["metadata"]["name"]
    body = {"spec": {"taints": (node.get("spec") or {}).get("taints") or None}}
    return f"{PATHS['Node'].path(None)}/{name}", orjson.dumps(body), f"Node {name} taints"


def _prepare(
    snapshot: str | Path,
) -> tuple[list[str], list[list[Payload]], list[Payload], dict[str, int]]:
    """Namespaces, per phase the serialized POSTs, and the Nodes' taint PATCHes; the parsed
    snapshot is dropped after."""
    items = orjson.loads(Path(snapshot).read_bytes())["items"]
    namespaces = sorted(
        {i["metadata"]["namespace"] for i in items if i["metadata"].get("namespace")}
    )
    taints = [taints_patch(i) for i in items if i.get("kind") == "Node"]
    counts: dict[str, int] = {}
    phases: list[list[Payload]] = []
    for phase in PHASES:
        batch = []
        for kind in phase:
            objs = [payload(clean(i)) for i in items if i.get("kind") == kind]
            counts[kind] = len(objs)
            batch += objs
        phases.append(batch)
    return namespaces, phases, taints, counts


def load_cluster(cp: Any, snapshot: str | Path, *, parallel: int = 16) -> dict[str, Any]:
    """Create the snapshot's objects in ``cp`` (an e2e ControlPlane); return counts and times."""
    t_start = time.perf_counter()
    # Only bytes are kept from here on: the parsed snapshot (GBs at 150,000 pods) is freed.
    namespaces, phases, taints, counts = _prepare(snapshot)
    gc.collect()
    for comp in getattr(cp, "components", ()):
        if comp.name in IDLE_COMPONENTS:
            cp._kill(comp)  # our own child processes (see the module docstring)
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
    poster = Poster(cp.server, cp.pki.ca_crt, cp.client_certs["admin"])
    try:
        for phase, batch in zip(PHASES, phases, strict=True):
            name = "+".join(phase)
            t0 = time.perf_counter()
            create_all(poster, batch, parallel)
            timings[name] = round(time.perf_counter() - t0, 1)
            print(
                f"  created {len(batch)} {'/'.join(phase)} in {timings[name]}s",
                file=sys.stderr,
                flush=True,
            )
            batch.clear()
            if phase == ("Node",):
                # Admission (TaintNodesByCondition) gives every new Node the not-ready
                # taint, which node-lifecycle would lift once the Node reports Ready; it is
                # stopped, so the snapshot's own taints are put back by hand.
                t0 = time.perf_counter()
                create_all(poster, taints, parallel, patch=True)
                timings["Node taints"] = round(time.perf_counter() - t0, 1)
        listed = poster.count("/api/v1/pods")
    finally:
        poster.close()
    return {
        "nodes": counts.get("Node", 0),
        "pods": counts.get("Pod", 0),
        "pods_listed": listed,
        "counts": counts,
        "create_s": timings,
        "parallel": parallel,
        "total_s": round(time.perf_counter() - t_start, 1),
    }
