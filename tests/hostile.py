"""A hostile API server for tests: a local HTTP server (127.0.0.1 only) that misbehaves on
purpose, so that the real command line and reader can be driven against it.

Each scenario is a function ``(request) -> None`` that answers one request however it likes:
trickling, paging forever, answering garbage or endless bodies, echoing the request's headers,
putting control characters in a Status message. Every loop in here is bounded (pages, bytes,
seconds) and watches the server's stop event, and :func:`hostile_server` stops the server and
its threads when the test ends, whatever the client did.

    with hostile_server(paginate_forever(page_size=1000)) as server:
        code = main(["plan", "--kubeconfig", str(server.kubeconfig(tmp_path))])
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import yaml

PLANTED_TOKEN: Final = "planted-token-4f1c9e-must-never-be-printed"
"""The bearer token in every kubeconfig of the kit: no output may ever show it."""
MAX_PAGES: Final = 100_000
"""No scenario serves more pages than this, whatever the client asks."""
MAX_BYTES: Final = 64 * 1024**2
"""No scenario sends more body bytes than this in one answer."""


@dataclass
class Request:
    """One request as the scenario sees it, and the means to answer it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    handler: http.server.BaseHTTPRequestHandler
    stop: threading.Event
    at: float = field(default_factory=time.monotonic)
    """When it arrived (``time.monotonic``: the same clock in every process of the machine)."""
    body: bytes = b""

    def send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        """A whole answer at once."""
        self.head(status, content_type, len(body))
        self.write(body)

    def head(self, status: int, content_type: str, length: int | None = None) -> None:
        """The status line and headers; no length: the body ends when the connection does."""
        self.handler.send_response(status)
        self.handler.send_header("Content-Type", content_type)
        if length is not None:
            self.handler.send_header("Content-Length", str(length))
        self.handler.send_header("Connection", "close")
        self.handler.end_headers()

    def write(self, data: bytes) -> bool:
        """Send ``data``; False once the client has gone (or the server is stopping)."""
        if self.stop.is_set():
            return False
        try:
            self.handler.wfile.write(data)
            self.handler.wfile.flush()
        except OSError:
            return False
        return True

    @property
    def resource(self) -> str:
        """The resource a LIST names: the last segment of its path."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]


Scenario = Callable[[Request], None]


@dataclass
class Server:
    """A running hostile server: its port, and every request it was sent."""

    port: int
    requests: list[Request] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, directory: Path) -> Path:
        """A kubeconfig for this server, with :data:`PLANTED_TOKEN` as the bearer token."""
        path = directory / f"hostile-{self.port}.yaml"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "hostile", "cluster": {"server": self.url}}],
            "users": [{"name": "hostile", "user": {"token": PLANTED_TOKEN}}],
            "contexts": [{"name": "hostile", "context": {"cluster": "hostile", "user": "hostile"}}],
            "current-context": "hostile",
        }
        path.write_text(json.dumps(config))
        return path

    def lists(self, resource: str) -> int:
        """How many LIST requests of ``resource`` arrived."""
        return sum(1 for r in self.requests if r.method == "GET" and r.resource == resource)


@contextlib.contextmanager
def hostile_server(scenario: Scenario) -> Iterator[Server]:
    """Serve ``scenario`` on 127.0.0.1 (a free port) until the block ends; then stop the server,
    tell every scenario still answering to stop, and wait for the serving thread."""
    stop = threading.Event()
    state: dict[str, Server] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # the base's name
            pass  # quiet: the tests look at what the client printed

        def _answer(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            arrived = time.monotonic()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 1 << 20)) if length else b""
            headers = dict(self.headers.items())
            request = Request(self.command, url.path, query, headers, self, stop, arrived, body)
            state["server"].requests.append(request)
            with contextlib.suppress(OSError):
                scenario(request)
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = _answer  # the names http.server calls

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state["server"] = Server(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield state["server"]
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


# --- answers -------------------------------------------------------------------------------

_KINDS: Final = {
    "nodes": "Node",
    "pods": "Pod",
    "poddisruptionbudgets": "PodDisruptionBudget",
    "priorityclasses": "PriorityClass",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "persistentvolumes": "PersistentVolume",
    "services": "Service",
    "replicasets": "ReplicaSet",
    "statefulsets": "StatefulSet",
    "deployments": "Deployment",
    "replicationcontrollers": "ReplicationController",
    "namespaces": "Namespace",
}


def list_body(resource: str, items: list[dict[str, Any]], token: str = "") -> bytes:
    """A LIST answer as the API server writes it (JSON)."""
    kind = _KINDS.get(resource, "Node")
    metadata: dict[str, str] = {"resourceVersion": "1"}
    if token:
        metadata["continue"] = token
    body = {"kind": f"{kind}List", "apiVersion": "v1", "metadata": metadata, "items": items}
    return json.dumps(body).encode()


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"topology.kubernetes.io/zone": "a", "kubernetes.io/hostname": name},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def status_body(code: int, message: str) -> bytes:
    """A metav1.Status answer with ``message``."""
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    return json.dumps({**status, "message": message, "reason": "Forbidden"}).encode()


def empty_lists(request: Request) -> None:
    """A well-behaved, empty cluster: every LIST is one empty page."""
    request.send(200, list_body(request.resource, []))


def paginate_forever(page_size: int) -> Scenario:
    """Every LIST of nodes answers ``page_size`` new nodes and a continue token, forever (up
    to :data:`MAX_PAGES`); other resources are empty."""
    served = [0]
    lock = threading.Lock()

    def answer(request: Request) -> None:
        if request.resource != "nodes":
            empty_lists(request)
            return
        with lock:
            served[0] += 1
            page = served[0]
        token = f"page-{page}" if page < MAX_PAGES else ""
        items = [node(f"n{page}-{i}") for i in range(page_size)]
        request.send(200, list_body("nodes", items, token))

    return answer


def trickle(interval: float = 0.02) -> Scenario:
    """Headers at once, then a body one byte every ``interval`` seconds that never ends (until
    :data:`MAX_BYTES`, the client goes, or the server stops)."""

    def answer(request: Request) -> None:
        request.head(200, "application/json")
        body = b'{"kind":"NodeList","items":[' + b" " * MAX_BYTES
        for sent, byte in enumerate(body):
            if request.stop.wait(interval) or sent >= MAX_BYTES:
                return
            if not request.write(bytes([byte])):
                return

    return answer


def endless_body(chunk: bytes = b" " * 65536) -> Scenario:
    """A 200 whose body never ends, sent as fast as the client reads (up to :data:`MAX_BYTES`)."""

    def answer(request: Request) -> None:
        request.head(200, "application/json")
        sent = 0
        while sent < MAX_BYTES and request.write(chunk):
            sent += len(chunk)

    return answer


def garbage(body: bytes, content_type: str = "application/json") -> Scenario:
    """Every request answered 200 with ``body`` (not JSON, JSON nested too deep, ...)."""

    def answer(request: Request) -> None:
        request.send(200, body, content_type)

    return answer


def echo_headers(status: int = 403) -> Scenario:
    """Every request refused with a Status whose message repeats the request's headers, the
    Authorization header (and so the bearer token) among them."""

    def answer(request: Request) -> None:
        echoed = "; ".join(f"{k}: {v}" for k, v in request.headers.items())
        request.send(status, status_body(status, f"denied, you sent {echoed}"))

    return answer


def control_characters(status: int = 403) -> Scenario:
    """Every request refused with a Status message full of terminal escapes: a title change
    (OSC ... BEL), a colour, a carriage return and a backspace."""
    message = "denied \x1b]0;PWNED\x07 \x1b[31mred\x1b[0m\rovertyped\x08 \x9b2J"

    def answer(request: Request) -> None:
        request.send(status, status_body(status, message))

    return answer


# --- a cluster to run against ----------------------------------------------------------------

HANG_SECONDS: Final = 120.0
"""The longest a scenario keeps a request waiting (the test has failed long before)."""


def hang(request: Request) -> None:
    """Never answer: the request stays in flight until the client goes or the server stops."""
    request.stop.wait(HANG_SECONDS)


def stall(request: Request) -> None:
    """Headers and the start of a list at once, then nothing more: a read stalled mid-body."""
    request.head(200, "application/json")
    if request.write(b'{"kind":"List","apiVersion":"v1","metadata":{},"items":['):
        request.stop.wait(HANG_SECONDS)


def internal_error(request: Request) -> None:
    """A 500 with a Status, as an API server whose etcd is failing answers."""
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500}
    body = {**status, "message": "etcdserver: request timed out", "reason": "InternalError"}
    request.send(500, json.dumps(body).encode())


_PLURALS: Final = {kind: plural for plural, kind in _KINDS.items()}


def _route(path: str) -> tuple[str | None, str, str | None, str | None]:
    """(namespace, resource, name, subresource) of an API path; resource "" when not one."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        rest = parts[2:]
    elif parts[0] == "apis":
        rest = parts[3:]
    else:
        return None, "", None, None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    padded = [*rest, None, None, None]
    return namespace, padded[0] or "", padded[1], padded[2]


def cluster_api(
    objects: Sequence[dict[str, Any]],
    *,
    evict: Scenario = internal_error,
    hold: Callable[[Request], Scenario | None] = lambda request: None,
) -> Scenario:
    """An API server holding ``objects`` (the items of a snapshot): LISTs and GETs of them,
    WATCHes that stay open and quiet, every access review allowed, a Lease kept, Events
    accepted, and each eviction answered by ``evict``. ``hold(request)`` may take any request
    over first (a scenario, or None)."""
    index: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        plural = _PLURALS.get(str(obj.get("kind")), "")
        index[plural, meta.get("namespace"), str(meta.get("name"))] = obj
    leases: dict[tuple[str | None, str], dict[str, Any]] = {}
    lock = threading.Lock()

    def answer(request: Request) -> None:
        taken = hold(request)
        if taken is not None:
            taken(request)
            return
        namespace, resource, name, sub = _route(request.path)
        if request.query.get("watch") == "true":  # a watch with nothing to tell
            request.head(200, "application/json")
            request.stop.wait(HANG_SECONDS)
        elif request.path == "/version":
            version = {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}
            request.send(200, json.dumps(version).encode())
        elif resource == "selfsubjectaccessreviews":
            request.send(201, json.dumps({"status": {"allowed": True}}).encode())
        elif sub == "eviction" and request.method == "POST":
            evict(request)
        elif resource == "events":
            request.send(201, request.body or b"{}")
        elif resource == "leases":
            _lease(request, leases, lock, namespace, name)
        elif request.method == "GET" and name is not None and resource in _KINDS:
            found = index.get((resource, namespace, name))
            if found is None:
                request.send(404, status_body(404, f"{resource} {name} not found"))
            else:
                request.send(200, json.dumps(found).encode())
        elif request.method == "GET" and resource in _KINDS:
            items = [
                obj
                for (plural, ns, _), obj in index.items()
                if plural == resource and (namespace is None or ns == namespace)
            ]
            request.send(200, list_body(resource, items))
        else:
            request.send(404, status_body(404, "not served here"))

    return answer


def _lease(
    request: Request,
    leases: dict[tuple[str | None, str], dict[str, Any]],
    lock: threading.Lock,
    namespace: str | None,
    name: str | None,
) -> None:
    """A Lease as the API server keeps it: 404 until created, then what was last written."""
    with lock:
        if request.method == "GET":
            found = leases.get((namespace, name or ""))
            if found is None:
                request.send(404, status_body(404, "lease not found"))
                return
            request.send(200, json.dumps(found).encode())
            return
        lease = json.loads(request.body or b"{}")
        meta = lease.setdefault("metadata", {})
        meta["resourceVersion"] = str(len(leases) + int(time.monotonic() * 1000))
        leases[namespace, str(meta.get("name") or name)] = lease
        request.send(201 if request.method == "POST" else 200, json.dumps(lease).encode())


# --- hostile snapshots ------------------------------------------------------------------------

HOSTILE_ZONES: Final = ("zone-a", "zone-b", "zone-c")
"""The zones of :func:`packed_pools_snapshot`: zone-a holds the workload, the others are full."""


def packed_pools_snapshot(
    nodes_per_zone: int,
    pools: int,
    *,
    web_per_node: int = 4,
    hostname_first: bool = False,
    untainted: int = 0,
) -> dict[str, Any]:
    """A full cluster whose NodePools cannot take a replacement, as a snapshot file (``kind:
    List``): issue D2's input, that made a no-fit reason name every pool for every domain.

    Three zones of ``nodes_per_zone`` nodes (4 CPUs each). Every node of zone-a holds
    ``web_per_node`` pods of Deployment ``web`` (1 CPU each; 4 fill the node), every node of
    zone-b and zone-c four pods of 1 CPU that nothing constrains: the cluster is full. ``web``
    spreads over zones (maxSkew 1, DoNotSchedule), so its pods must leave zone-a for zones where
    no node has room. ``pools`` NodePools each carry a taint ``dedicated=pool-K:NoSchedule`` that
    ``web`` does not tolerate, but the last ``untainted`` of them, which are at their cpu limit
    instead: none can add a node. With ``hostname_first``, ``web`` also spreads over nodes
    (ScheduleAnyway, before the zone constraint), so the domains its replacement is ranked by
    first are the nodes, not the zones.
    """
    items: list[dict[str, Any]] = []
    web_constraints = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    if hostname_first:
        web_constraints.insert(
            0,
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
            },
        )
    for zone in HOSTILE_ZONES:
        for k in range(nodes_per_zone):
            name = f"{zone}-{k:05d}"
            items.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {
                            "kubernetes.io/hostname": name,
                            "topology.kubernetes.io/zone": zone,
                        },
                    },
                    "status": {
                        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                }
            )
            web = zone == HOSTILE_ZONES[0]
            for j in range(web_per_node if web else 4):
                pod_name = f"{'web' if web else 'fill'}-{name}-{j}"
                items.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": pod_name,
                            "namespace": "shop" if web else "fill",
                            "uid": f"uid-{pod_name}",
                            "creationTimestamp": "2025-01-01T00:00:00Z",
                            "labels": {"app": "web" if web else "fill"},
                            "ownerReferences": [
                                {
                                    "apiVersion": "apps/v1",
                                    "kind": "ReplicaSet",
                                    "name": "web-rs" if web else "fill-rs",
                                    "uid": "uid-web-rs" if web else "uid-fill-rs",
                                    "controller": True,
                                }
                            ],
                        },
                        "spec": {
                            "nodeName": name,
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                            **({"topologySpreadConstraints": web_constraints} if web else {}),
                        },
                        "status": {
                            "phase": "Running",
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    }
                )
    for k in range(pools):
        tainted = k < pools - untainted
        template_spec: dict[str, Any] = {
            "requirements": [
                {
                    "key": "topology.kubernetes.io/zone",
                    "operator": "In",
                    "values": list(HOSTILE_ZONES),
                }
            ]
        }
        if tainted:
            template_spec["taints"] = [
                {"key": "dedicated", "value": f"pool-{k:05d}", "effect": "NoSchedule"}
            ]
        items.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": f"pool-{k:05d}"},
                "spec": {
                    "template": {"spec": template_spec},
                    "limits": {"cpu": "1000" if tainted else "8"},
                },
                "status": {
                    "resources": {"cpu": "8", "nodes": "2"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


# --- hostile inputs: files a tenant or a policy's author can write ------------------------------


def _zone_node(name: str, zone: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone},
        },
        "status": {
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _web_pod(
    name: str, node_name: str, *, namespace: str = "shop", constrained: bool = True
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
    }
    if constrained:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"app": "web"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "web-rs", "uid": "uid-rs", "controller": True}
            ],
        },
        "spec": spec,
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def skewed_cluster(pods: int = 4, *, constrained: bool = True) -> list[dict[str, Any]]:
    """Two zones, every pod of ``shop/web`` in zone a (``pods`` of them, at least 2): a plan
    evicts some of them when they carry their zone constraint (``constrained``)."""
    objects = [_zone_node("n1", "a"), _zone_node("n2", "b")]
    objects += [_web_pod(f"w{i}", "n1", constrained=constrained) for i in range(pods)]
    return objects


def do_not_disrupt_cluster(value: str) -> list[dict[str, Any]]:
    """:func:`skewed_cluster` with its first pod annotated ``karpenter.sh/do-not-disrupt:
    VALUE`` (a run of digits then a letter made its check backtrack quadratically)."""
    objects = skewed_cluster()
    objects[2]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": value}
    return objects


def window_policy(cron: str, duration: str) -> str:
    """A policy with one maintenance window (``* * * * *`` for a long ``duration`` was
    evaluated one opening at a time)."""
    return f'schedule:\n  windows:\n    - cron: "{cron}"\n      duration: {duration}\n'


def default_constraints_policy(count: int) -> str:
    """A policy with ``count`` defaultConstraints, each on its own topology key."""
    lines = ["defaultConstraints:"]
    for i in range(count):
        lines.append(
            f"  - {{maxSkew: 1, topologyKey: example.com/k{i}, whenUnsatisfiable: ScheduleAnyway}}"
        )
    return "\n".join(lines) + "\n"


def service(name: str, selector: dict[str, str], namespace: str = "shop") -> dict[str, Any]:
    """A Service selecting pods by ``selector`` (what defaultConstraints are built from)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector},
    }


def namespaces(count: int) -> list[dict[str, Any]]:
    """``shop`` and ``count - 1`` other Namespace objects, each labelled ``team: t<i>``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "shop" if i == 0 else f"ns-{i}", "labels": {"team": f"t{i}"}},
        }
        for i in range(count)
    ]


def namespace_selector_policy(values: int) -> str:
    """A policy selecting namespaces whose ``team`` is one of ``values`` values (``t0`` last)."""
    listed = ", ".join(f"v{i}" for i in range(values - 1))
    return (
        "namespaceLabelSelector:\n  matchExpressions:\n"
        f"    - {{key: team, operator: In, values: [{listed}{', ' if listed else ''}t0]}}\n"
    )


def bracketed_policy(brackets: int) -> str:
    """A valid policy whose comment holds ``brackets`` ``[`` (refused as too deeply nested
    when every bracket was counted)."""
    head = "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"
    return f"{head}# {'[' * brackets}\nminPodAge: 1m\n"


def bracketed_snapshot(brackets: int) -> str:
    """:func:`skewed_cluster` as block YAML, with ``brackets`` ``[`` in a comment, in a quoted
    annotation and in a plain one: none of them a flow collection."""
    objects = skewed_cluster()
    objects[2]["metadata"]["annotations"] = {"quoted": "@Q", "plain": "@P"}
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects})
    text = text.replace("quoted: '@Q'", f"quoted: '{'[' * brackets}'", 1)
    text = text.replace("plain: '@P'", f"plain: a{'[' * brackets}", 1)
    return f"# {'[' * brackets}\n{text}"


# -- hostile local inputs: kubeconfigs and snapshot files ------------------------------------------


def deep_flow_kubeconfig(depth: int) -> str:
    """A kubeconfig whose ``contexts`` is ``depth`` flow lists, one inside the other."""
    return "contexts: " + "[" * depth + "]" * depth + "\n"


def bad_items(count: int) -> list[dict[str, Any]]:
    """One node and ``count`` pods, each missing its name (one problem each)."""
    node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}}
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"namespace": "ns"}, "spec": {}}
    return [node] + [pod] * count
