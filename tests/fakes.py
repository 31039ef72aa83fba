"""Test fakes shared by the test modules: a clock, the executor's recording API, a recording HTTP
server for Kube, the paginated lister, a small cluster for the runner, a scripted planner, the API
server's answers they replay, TCP servers that trickle or never answer, and where the tests
find kubectl.

Every fake records what it was asked; none fakes the code under test.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import http.server
import itertools
import os
import shutil
import socket
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.lease import LeaseApi
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.cluster.act.steering import PatchFn
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.resources import RESOURCES_BY_NAME
from rebalancer.cluster.api.transport import Endpoint
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.model import ZONE_KEY, Snapshot
from rebalancer.core.plan import Eviction, Plan, ViewReport
from rebalancer.core.policy import Policy
from tests.builders import NS, api_node, api_pod, web_pod, zone_node

NOW = 1_750_000_000.0
"""The wall clock the runner tests give a run."""

PDB_429 = {
    "kind": "Status",
    "code": 429,
    "reason": "TooManyRequests",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "details": {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 3 healthy pods and has 3 currently",
            }
        ]
    },
}
MULTI_PDB_500 = {
    "kind": "Status",
    "code": 500,
    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
    "does not support.",
}


@dataclass
class FakeClock:
    """Monotonic time that only moves when someone sleeps (or a fake call takes time)."""

    now: float = 0.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


Answer = tuple[int, dict[str, Any]] | Exception


class FakeApi:
    """A recording fake of the executor's transport; any DELETE-like call fails the test.

    ``answers`` scripts the eviction answers per pod (the last one repeats); by default 201.
    After a real (not dry-run) 2xx the pod disappears and, if ``replace_after`` polls is not
    None, a Ready replacement of the same owner shows up after that many pod LISTs.

    Owners: each controller of the given pods is a ReplicaSet wanting as many pods as it has
    there (``spec.replicas``), served by :meth:`get_owner`; :meth:`scale` and
    :meth:`remove_owner` change that as a person or an HPA would, ``owner_error`` makes every
    owner GET raise it, and ``on_list(n)`` runs at each pod LIST, ``n`` counting the LISTs
    since the last eviction request (1 for the first), to change the cluster mid-wave.
    """

    def __init__(
        self,
        pods: list[dict[str, Any]],
        *,
        nodes: list[dict[str, Any]] | None = None,
        answers: Mapping[str, list[Answer]] | None = None,
        replace_after: int | None = 0,
        clock: FakeClock | None = None,
        post_seconds: float = 0.0,
    ) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        default_nodes = [api_node("n1"), api_node("n2")]
        self.nodes = {n["metadata"]["name"]: n for n in (default_nodes if nodes is None else nodes)}
        self.answers = {k: list(v) for k, v in (answers or {}).items()}
        self.replace_after = replace_after
        self.clock = clock
        self.post_seconds = post_seconds
        self.calls: list[tuple[str, ...]] = []
        self.bodies: list[Mapping[str, Any]] = []
        self._waiting: list[tuple[dict[str, Any], int]] = []  # replacement, polls left
        self._ids = itertools.count(1)
        self.owners: dict[str, dict[str, Any]] = {}  # by name
        for pod in pods:
            ref = pod["metadata"]["ownerReferences"][0]
            owner = self.owners.setdefault(ref["name"], replica_set(ref["name"], ref["uid"], 0))
            owner["spec"]["replicas"] += 1
        self.owner_error: Exception | None = None
        self.on_list: Callable[[int], None] = lambda n: None
        self._lists_since_post = 0

    def __getattr__(self, name: str) -> Any:
        if "delete" in name.lower():
            pytest.fail(f"the executor called {name}: pods must never be deleted")
        raise AttributeError(name)

    def post_eviction(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        self.calls.append(("POST", name))
        self.bodies.append(body)
        self._lists_since_post = 0
        assert body["apiVersion"] == "policy/v1"
        assert body["kind"] == "Eviction"
        assert body["metadata"] == {"name": name, "namespace": namespace}
        uid = body["deleteOptions"]["preconditions"]["uid"]
        assert uid, "every eviction carries the uid precondition"
        grace = body["deleteOptions"].get("gracePeriodSeconds")
        assert grace is None or grace >= 1, "never grace 0"
        if self.clock is not None:
            self.clock.now += self.post_seconds
        script = self.answers.get(name, [])
        answer: Answer = script.pop(0) if len(script) > 1 else (script[0] if script else (201, {}))
        if isinstance(answer, Exception):
            raise answer
        status, payload = answer
        dry = body["deleteOptions"].get("dryRun") == ["All"]
        if status in (200, 201) and not dry:
            old = self.pods.pop(name)
            if self.replace_after is not None:
                new = api_pod(
                    f"{name}-r{next(self._ids)}",
                    node="n2",
                    owner_uid=old["metadata"]["ownerReferences"][0]["uid"],
                    # The API server may add labels at binding (topology labels since 1.33):
                    # a replacement's labels are not the evicted pod's.
                    labels={**old["metadata"]["labels"], ZONE_KEY: "zone-b"},
                )
                self._waiting.append((new, self.replace_after))
        return status, payload

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("GET pod", name))
        return self.pods.get(name)

    def get_node(self, name: str) -> dict[str, Any] | None:
        self.calls.append(("GET node", name))
        return self.nodes.get(name)

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        self.calls.append(("LIST pods", label_selector))
        self._lists_since_post += 1
        self.on_list(self._lists_since_post)
        still: list[tuple[dict[str, Any], int]] = []
        for pod, polls in self._waiting:
            if polls <= 0:
                self.pods[pod["metadata"]["name"]] = pod
            else:
                still.append((pod, polls - 1))
        self._waiting = still
        wanted = dict(p.split("=", 1) for p in label_selector.split(",") if p)
        return [
            p
            for p in self.pods.values()
            if all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        ]

    def get_owner(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("GET owner", f"{kind}/{name}"))
        assert namespace == NS
        assert kind in ("ReplicaSet", "StatefulSet"), f"no GET of a {kind} is expected"
        if self.owner_error is not None:
            raise self.owner_error
        owner = self.owners.get(name)
        return copy.deepcopy(owner) if owner is not None and owner["kind"] == kind else None

    def scale(self, name: str, replicas: int) -> None:
        """Set the owner's spec.replicas, and remove what the ReplicaSet controller would: its
        replacements not created yet first (the ones it ranks first), then not-Ready pods,
        then Ready ones, until it has ``replicas``."""
        owner = self.owners[name]
        owner["spec"]["replicas"] = replicas
        uid = owner["metadata"]["uid"]

        def of_owner(pod: dict[str, Any]) -> bool:
            return bool(pod["metadata"]["ownerReferences"][0]["uid"] == uid)

        def ready(pod: dict[str, Any]) -> bool:
            return any(c["status"] == "True" for c in pod["status"]["conditions"])

        coming = [w for w in self._waiting if of_owner(w[0])]
        ranked = sorted((p for p in self.pods.values() if of_owner(p)), key=ready)
        excess = max(len(coming) + len(ranked) - replicas, 0)
        dropped = {id(w) for w in coming[:excess]}
        self._waiting = [w for w in self._waiting if id(w) not in dropped]
        for pod in ranked[: max(excess - len(coming), 0)]:
            del self.pods[pod["metadata"]["name"]]

    def remove_owner(self, name: str) -> None:
        """The owner is deleted (its pods stay, orphaned, as with --cascade=orphan)."""
        del self.owners[name]
        self._waiting = []

    def posts(self) -> list[str]:
        return [c[1] for c in self.calls if c[0] == "POST"]


def replica_set(name: str, uid: str, replicas: int) -> dict[str, Any]:
    """An apps/v1 ReplicaSet in namespace ``shop``, as a GET answers it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": {"replicas": replicas},
    }


class RecordingServer:
    """A real HTTP server on 127.0.0.1 that answers every request with ``status`` and
    ``body`` and records what arrived: ``sent`` holds (method, path with its query, the body
    parsed as JSON or None), ``headers`` each request's headers. It serves until the object is
    garbage collected; :attr:`endpoint` is what :class:`Kube` connects to."""

    def __init__(
        self, status: int = 201, body: bytes = b"{}", content_type: str = "application/json"
    ) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.headers: list[dict[str, str]] = []
        sent, headers = self.sent, self.headers  # the handler holds these, never ``self``

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # the base's name
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else b""
                sent.append((self.command, self.path, orjson.loads(data) if data else None))
                headers.append(dict(self.headers.items()))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # the names it calls

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        thread.start()
        self.endpoint = Endpoint(f"http://127.0.0.1:{httpd.server_address[1]}")
        weakref.finalize(self, _stop_server, httpd, thread)


def _stop_server(httpd: http.server.ThreadingHTTPServer, thread: threading.Thread) -> None:
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


class FakeLister:
    """Serves LIST pages like the API server, records every call, can expire a token once."""

    def __init__(
        self, items: Mapping[str, list[dict[str, Any]]], *, expire_once: str | None = None
    ) -> None:
        self.items = items
        self.calls: list[tuple[str, str | None, int, str | None]] = []
        self.expire_once = expire_once

    def __call__(
        self, resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        self.calls.append((resource, namespace, limit, token))
        if token is not None and token == self.expire_once:
            self.expire_once = None
            raise errors.Gone(410, "the provided continue parameter is too old", verb="list")
        selected = [
            copy.deepcopy(i)
            for i in self.items.get(resource, [])
            if namespace is None or i["metadata"].get("namespace") == namespace
        ]
        start = int(token.rpartition("-")[2]) if token else 0
        page = selected[start : start + limit]
        more = start + limit < len(selected)
        metadata: dict[str, Any] = {"resourceVersion": "42"}
        if more:
            metadata["continue"] = f"{resource}-{start + limit}"
        api_version = RESOURCES_BY_NAME[resource].api_version
        kind = RESOURCES_BY_NAME[resource].kind + "List"
        return orjson.dumps(
            {"apiVersion": api_version, "kind": kind, "metadata": metadata, "items": page}
        )


class FakeCluster:
    """A tiny cluster: evictions remove the pod; a 'scheduler' places a Ready replacement.
    It is both the runner's :class:`Source` and its :class:`ClusterApi`.

    The scheduler puts the replacement in the zone with the fewest web pods (ties: node name).
    ``answers`` scripts eviction statuses per pod name (default 201); ``on_post`` runs after
    each eviction request, e.g. to send SIGTERM mid-wave. It has no PodDisruptionBudget; the
    Lease calls go to ``leases`` and deletion-cost patches to ``patch``, when a test sets them.
    Each ReplicaSet wants as many pods as it has. :meth:`of` builds one from any API objects.
    """

    def __init__(self, zones: dict[str, int], *, answers: dict[str, tuple[int, Any]] | None = None):
        self.nodes = {f"node-{z}": zone_node(f"node-{z}", z) for z in zones}
        self.pods: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        for zone, count in zones.items():
            for _ in range(count):
                self._add(f"node-{zone}")
        self.answers = answers or {}
        self.reads = 0
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.on_post: Callable[[], None] = lambda: None
        self.stubborn = False  # True: every replacement lands back on the evicted pod's node
        self.others: list[dict[str, Any]] = []  # Namespaces, NodePools: read with the rest
        self.copies = False  # True: a replacement is a copy of the evicted pod (see of())
        self.rejected: tuple[object, ...] = ()  # what the reads left out
        self.leases: LeaseApi | None = None
        self.patch: PatchFn | None = None

    @classmethod
    def of(cls, objects: Sequence[dict[str, Any]]) -> FakeCluster:
        """A cluster of ``objects`` (nodes, pods, and others read with them) whose
        replacements land back on the evicted pod's node, each a copy of the pod named
        ``<name>-r<n>``."""
        cluster = cls({})
        for o in copy.deepcopy(list(objects)):
            name = o["metadata"]["name"]
            if o["kind"] == "Node":
                cluster.nodes[name] = o
            elif o["kind"] == "Pod":
                cluster.pods[name] = o
            else:
                cluster.others.append(o)
        cluster.stubborn = cluster.copies = True
        return cluster

    def _add(self, node: str) -> str:
        n = next(self._ids)
        name = f"web-{n}"
        self.pods[name] = web_pod(name, node, f"uid-{n}")
        return name

    def zone_counts(self) -> dict[str, int]:
        counts = {n["metadata"]["labels"][ZONE_KEY]: 0 for n in self.nodes.values()}
        for p in self.pods.values():
            counts[self.nodes[p["spec"]["nodeName"]]["metadata"]["labels"][ZONE_KEY]] += 1
        return counts

    # Source
    def read(self) -> Snapshot:
        self.reads += 1
        return snapshot_from_objects([*self.others, *self.nodes.values(), *self.pods.values()])

    def last_placement(self) -> float | None:
        return None

    # Transport
    def __getattr__(self, name: str) -> Any:
        if "delete" in name.lower():
            pytest.fail(f"the runner called {name}: pods must never be deleted")
        raise AttributeError(name)

    def post_eviction(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        self.posts.append((name, dict(body)))
        assert body["deleteOptions"]["preconditions"]["uid"] == self.pods[name]["metadata"]["uid"]
        status, answer = self.answers.get(name, (201, {}))
        if status == 201 and "dryRun" not in body["deleteOptions"]:
            old = self.pods.pop(name)
            node = old["spec"]["nodeName"]
            if not self.stubborn:
                counts = self.zone_counts()
                node = f"node-{min(sorted(counts), key=lambda z: counts[z])}"
            if self.copies:
                new = copy.deepcopy(old)
                n = next(self._ids)
                new["metadata"].update(name=f"{name}-r{n}", uid=f"uid-{name}-r{n}")
                self.pods[new["metadata"]["name"]] = new
            else:
                self._add(node)
        self.on_post()
        return status, answer

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get(name)

    def get_node(self, name: str) -> dict[str, Any] | None:
        return self.nodes.get(name)

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        wanted = dict(p.split("=", 1) for p in label_selector.split(",") if p)
        return [
            p
            for p in self.pods.values()
            if all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        ]

    def get_owner(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        """A ReplicaSet of the pods, wanting as many pods as it has (each eviction makes its
        replacement at once: the size never changes here)."""
        refs = [(p["metadata"].get("ownerReferences") or [{}])[0] for p in self.pods.values()]
        mine = [ref for ref in refs if ref.get("name") == name]
        if kind != "ReplicaSet" or not mine:
            return None
        return replica_set(name, mine[0]["uid"], len(mine))

    # the rest of ClusterApi
    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        self.events.append(dict(body))

    def get_pdb(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def patch_pod_cost(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        if self.patch is None:
            pytest.fail(f"the runner patched {namespace}/{name} unasked")
        return self.patch(namespace, name, body)

    def _leases(self) -> LeaseApi:
        if self.leases is None:
            pytest.fail("the runner used a Lease it was not given")
        return self.leases

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._leases().get_lease(namespace, name)

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._leases().create_lease(namespace, body)

    def update_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._leases().update_lease(namespace, name, body)


class Wall:
    """The wall clock of a runner test: :data:`NOW` until the test moves ``now``."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def fake_runner(
    fake: FakeCluster, wall: Callable[[], float], plan_fn: Any = None, **settings: Any
) -> Runner:
    """A Runner over ``fake`` (its source and its API) on a :class:`FakeClock`, with ``wall``
    as its wall clock, instance "test", one PDB retry and ``settings`` for the rest of its
    :class:`RunSettings`; ``plan_fn`` replaces the planner when given."""
    clock = FakeClock()
    extra = {} if plan_fn is None else {"plan_fn": plan_fn}
    return Runner(
        fake,
        fake,
        Policy(),
        RunSettings(executor=ExecutorSettings(pdb_retries=1), instance="test", **settings),
        clock=clock,
        wall_clock=wall,
        sleep=clock.sleep,
        **extra,
    )


def scripted_eviction(pod: dict[str, Any], wave: int) -> Eviction:
    meta = pod["metadata"]
    return Eviction(
        namespace=NS,
        name=meta["name"],
        uid=meta["uid"],
        node=pod["spec"]["nodeName"],
        priority=0,
        reason="scripted",
        wave=wave,
        workload="ReplicaSet/web-rs",
        domain="a",
        topology_key=ZONE_KEY,
        target_node="node-c",
        grace_period_seconds=None,
    )


VIEW = ViewReport(
    namespace=NS,
    topology_key=ZONE_KEY,
    max_skew=1,
    when_unsatisfiable="DoNotSchedule",
    selector="app=web",
    min_domains=1,
    domains=(("a", 3),),
    global_min=0,
    skew=3,
)


class ScriptedPlanner:
    """Plans by script: evicts the first pod in zone a in two waves; records evicted_before."""

    def __init__(self, fake: FakeCluster, sizes: Sequence[int]) -> None:
        self.fake = fake
        self.sizes = list(sizes)
        self.calls: list[tuple[str, ...]] = []

    def __call__(
        self,
        snapshot: Snapshot,
        policy: Policy,
        now: float,
        *,
        evicted_before: Sequence[Eviction] = (),
        rules: object = None,  # the holds: a script does not go around them
        memory: object = None,
    ) -> Plan:
        self.calls.append(tuple(e.name for e in evicted_before))
        size = self.sizes.pop(0) if self.sizes else 0
        in_a = [p for p in self.fake.pods.values() if p["spec"]["nodeName"] == "node-a"]
        evictions = tuple(scripted_eviction(p, wave=1 + i) for i, p in enumerate(in_a[:size]))
        # The view's counts follow the fake cluster, as a real plan's do.
        spread = Counter(p["spec"]["nodeName"] for p in self.fake.pods.values())
        view = dataclasses.replace(VIEW, domains=tuple(sorted(spread.items())))
        return Plan(evictions, (), (view,) if size else (), (), size)


def find_kubectl() -> str | None:
    """kubectl from PATH, else the one the e2e build cached (under ``REBALANCER_E2E_CACHE``, as
    the build scripts); None when there is none."""
    found = shutil.which("kubectl")
    if found:
        return found
    default = Path.home() / ".cache" / "rebalancer-e2e"
    cache = Path(os.environ.get("REBALANCER_E2E_CACHE") or default)
    for candidate in sorted(cache.glob("*/bin/kubectl")):
        return str(candidate)
    return None


# --- local test servers (127.0.0.1) ---------------------------------------------------------

HANG_GUARD = 30.0
"""Far above every deadline below: reaching it means the request hung."""

Behaviour = Callable[[socket.socket, threading.Event], None]


@contextmanager
def server(behaviour: Behaviour) -> Iterator[int]:
    """A TCP server on 127.0.0.1 running ``behaviour(conn, stop)`` for each connection."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(conn)
            threading.Thread(target=guarded, args=(conn,), daemon=True).start()

    def guarded(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the socket closed under it at the end of a test
            behaviour(conn, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for conn in conns:
            conn.close()


def trickle(conn: socket.socket, stop: threading.Event) -> None:
    """Send a never-ending response one byte every 50 ms."""
    data = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"a" * 10_000
    for byte in data:
        if stop.wait(0.05):
            return
        try:
            conn.sendall(bytes([byte]))
        except OSError:
            return


def silence(conn: socket.socket, stop: threading.Event) -> None:
    """Accept, read the request, never answer."""
    conn.settimeout(0.1)
    while not stop.is_set():
        try:
            if not conn.recv(65536):
                return
        except TimeoutError:
            continue
        except OSError:
            return


class FakeDiscovery:
    """One API group version's discovery answer (``GET path``) and SelfSubjectAccessReviews,
    each question recorded in ``asked`` as (verb, resource, group, namespace); ``allows``
    answers them."""

    def __init__(
        self,
        path: str,
        status: int,
        resources: list[str],
        allows: Callable[[str, str], bool],
    ) -> None:
        self.path, self.status, self.resources, self.allows = path, status, resources, allows
        self.asked: list[tuple[str, str, str, str | None]] = []

    def request(self, method: str, path: str) -> Any:
        assert (method, path) == ("GET", self.path)
        body = {"resources": [{"name": r} for r in self.resources]}
        return type("R", (), {"status": self.status, "json": lambda _self: body})()

    def can_i(
        self, verb: str, resource: str, *, group: str = "", namespace: str | None = None
    ) -> tuple[bool, str]:
        self.asked.append((verb, resource, group, namespace))
        return self.allows(verb, resource), ""
