"""Fault injection against the real control plane (issue 11 §6; opt-in: --e2e).

Each test builds a Deployment stuck at [9, 0, 0] over three zones of its own node pool (as in
test_live.py: the plan evicts 6 pods, one at a time, each waiting for its replacement), starts
the real ``rebalancer run`` as a subprocess, attacks it or the API server in the middle of the
evictions, and judges the outcome by the exit code, rebalancer's own JSON logs, and the audit
log: every eviction the API server accepted (201) is there with the uid it was sent for, so "no
pod evicted twice" is a count per uid, and the Lease writes (audited at Request level in the
``rebalancer`` namespace) name the holder that recorded each eviction.

Each test prints one row of the table the issue asks for: attack, outcome, exit codes, time
taken, audit-log check (run with ``-s`` to see them).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster, ControlPlane, write_json
from e2e.test_live import (
    APP,
    ROOT,
    Imbalance,
    audit_mark,
    evictions,
    explain,
    imbalance,  # noqa: F401  # the fixture
    need_own_control_plane,
    rebalancer,
    rebalancer_requests,
    write_policy,
)

pytestmark = pytest.mark.e2e

REPLICAS = 9
PLANNED = 6  # [9, 0, 0] -> [3, 3, 3]
FLAGS = ("--max-waves", "20", "--wave-timeout", "90s", "-o", "json")
LEASE_NAMESPACE = "rebalancer"
RECORD = "rebalancer/evictions"


# -- running rebalancer in the background ------------------------------------------------------


@dataclass
class Background:
    """A ``rebalancer`` subprocess whose JSON log lines (stderr) are collected as they come."""

    proc: subprocess.Popen[str]
    started: float
    lines: list[dict[str, Any]] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    stdout: str = ""

    def __post_init__(self) -> None:
        # stderr and stdout each have their own reader (communicate() would take lines away).
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out: list[str] = []
        self._out_reader = threading.Thread(target=self._read_out, daemon=True)
        self._out_reader.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self._out.append(self.proc.stdout.read())

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.raw.append(line)
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    self.lines.append(json.loads(line))

    def wait_event(self, probe: Callable[[dict[str, Any]], bool], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(probe(e) for e in list(self.lines)):
                return
            if self.proc.poll() is not None:
                self._reader.join(5)
                if any(probe(e) for e in list(self.lines)):
                    return
                pytest.fail(f"rebalancer exited {self.proc.returncode} first:\n{self.stderr}")
            time.sleep(0.05)
        pytest.fail(f"timed out waiting for a log line:\n{self.stderr[-3000:]}")

    def wait_evicted(self, count: int = 1) -> None:
        self.wait_event(lambda _e: self.evicted() >= count)

    def evicted(self) -> int:
        return sum(
            1
            for e in list(self.lines)
            if e.get("event") == "eviction.result" and e.get("outcome") == "evicted"
        )

    def finish(self, timeout: float = 300) -> tuple[int, float]:
        """Wait for the exit; (exit code, seconds since start)."""
        self.proc.wait(timeout=timeout)
        self._reader.join(10)
        self._out_reader.join(10)
        self.stdout = "".join(self._out)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return self.proc.returncode, time.monotonic() - self.started

    @property
    def stderr(self) -> str:
        return "".join(self.raw)

    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.lines if e.get("event") == name]


def start(cluster: Cluster, *args: str, kubeconfig: Path | None = None) -> Background:
    kc = kubeconfig or cluster.kubeconfig
    if kubeconfig is None:
        cluster.assert_own_cluster(kc)
    env = {k: v for k, v in os.environ.items() if k != "REBALANCER_POLICY"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rebalancer", *args, "--kubeconfig", str(kc)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    return Background(proc, time.monotonic())


# -- the audit log -----------------------------------------------------------------------------


def accepted_evictions(cluster: Cluster, mark: int, ns: str) -> Counter[str]:
    """uid -> evictions of it the API server accepted (201), sent by rebalancer."""
    time.sleep(2)  # the audit backend writes in batches
    out: Counter[str] = Counter()
    for ev in evictions(rebalancer_requests(cluster, mark, ns)):
        if ev["responseStatus"]["code"] in (200, 201):
            options = (ev.get("requestObject") or {}).get("deleteOptions") or {}
            out[options["preconditions"]["uid"]] += 1
    return out


def lease_writes(cluster: Cluster, mark: int) -> list[dict[str, Any]]:
    """rebalancer's create/update of its Lease since ``mark`` (with their request bodies)."""
    return [
        ev
        for ev in rebalancer_requests(cluster, mark)
        if ev.get("objectRef", {}).get("resource") == "leases"
        and ev.get("objectRef", {}).get("namespace") == LEASE_NAMESPACE
        and ev["verb"] in ("create", "update")
        and ev["responseStatus"]["code"] in (200, 201)
    ]


def recording_holders(cluster: Cluster, mark: int, uids: set[str]) -> dict[str, str]:
    """uid -> the Lease holder whose accepted write first recorded that eviction."""
    out: dict[str, str] = {}
    for ev in lease_writes(cluster, mark):
        body = ev.get("requestObject") or {}
        holder = (body.get("spec") or {}).get("holderIdentity") or ""
        raw = ((body.get("metadata") or {}).get("annotations") or {}).get(RECORD, "[]")
        for item in json.loads(raw):
            uid = item.get("uid")
            if uid in uids and uid not in out and holder:
                out[uid] = holder
    return out


def row(attack: str, outcome: str, codes: str, seconds: float, audit: str) -> None:
    print(f"\n| {attack} | {outcome} | {codes} | {seconds:.0f} s | {audit} |")


def no_double(accepted: Counter[str]) -> str:
    twice = {uid: n for uid, n in accepted.items() if n > 1}
    assert twice == {}, f"pods evicted twice: {twice}"
    return f"{sum(accepted.values())} evictions (201), {len(accepted)} distinct uids, none twice"


def balanced(cluster: Cluster, ns: str) -> list[int]:
    from e2e.test_live import zone_counts  # noqa: PLC0415

    cluster.wait_pods_running(ns, f"app={APP}", REPLICAS, timeout=120)
    return sorted(zone_counts(cluster, ns).values())


def run_until_done(
    cluster: Cluster, ns: str, *extra: str, tries: int = 8
) -> tuple[list[int], dict[str, Any]]:
    """Run again until a run is not turned away by a Lease left by a dead run; the exit codes
    and the last run's summary."""
    codes = []
    for _ in range(tries):
        ran = rebalancer(cluster, "run", "-n", ns, *FLAGS, *extra)
        codes.append(ran.returncode)
        assert ran.returncode in (0, 1), explain(ran)
        summary: dict[str, Any] = json.loads(ran.stdout)["summary"]
        if summary["end"] != "lease-held":
            return codes, summary
        time.sleep(3)
    pytest.fail(f"the Lease was never freed: exit codes {codes}")


@pytest.fixture
def control(cluster: Cluster) -> ControlPlane:
    return need_own_control_plane(cluster)


@pytest.fixture
def skewed(imbalance: Callable[..., Imbalance]) -> Imbalance:  # noqa: F811
    return imbalance(replicas=REPLICAS, grace=3)


# -- 1. kube-apiserver frozen for 20 s mid-wave --------------------------------------------------


def test_apiserver_frozen_20s_mid_wave_resumes_with_a_warning(
    cluster: Cluster, control: ControlPlane, skewed: Imbalance
) -> None:
    """SIGSTOP 20 s after the first eviction: the run waits (warning logged), then resumes or
    exits 3 within its deadline; no pod evicted twice."""
    ns = skewed.ns
    mark = audit_mark(cluster)
    bg = start(cluster, "run", "-n", ns, *FLAGS, "--request-timeout", "45s")
    bg.wait_evicted(1)
    control.signal_apiserver(signal.SIGSTOP)
    try:
        time.sleep(20)
    finally:
        control.signal_apiserver(signal.SIGCONT)
    code, seconds = bg.finish()
    assert code in (0, 1, 3), bg.stderr
    assert "Traceback" not in bg.stderr
    slow = bg.events("request.slow")
    assert slow, "no warning while the API server was frozen"
    assert max(e["waited_seconds"] for e in slow) >= 5
    end = bg.report()["summary"]["end"] if code != 3 else "exit 3"
    accepted = accepted_evictions(cluster, mark, ns)
    audit = no_double(accepted)
    if code in (0, 1):
        assert sum(accepted.values()) == PLANNED
        assert balanced(cluster, ns) == [3, 3, 3]
    row("kube-apiserver SIGSTOP 20 s mid-wave", f"resumed, end {end}, {len(slow)} "
        "request.slow warnings", str(code), seconds, audit)  # fmt: skip


# -- 2. kube-apiserver killed and restarted mid-run ---------------------------------------------


def test_apiserver_killed_and_restarted_mid_run_then_the_next_run_completes(
    cluster: Cluster, control: ControlPlane, skewed: Imbalance
) -> None:
    """kill -9 kube-apiserver after the first eviction, restart it on the same etcd: the run ends
    cleanly (no traceback); later runs complete the plan; no pod evicted twice."""
    ns = skewed.ns
    mark = audit_mark(cluster)
    bg = start(cluster, "run", "-n", ns, *FLAGS, "--lease-duration", "10s")
    bg.wait_evicted(1)
    control.kill_apiserver()
    time.sleep(3)
    control.restart_apiserver()
    code, seconds = bg.finish()
    assert code in (0, 1, 3), bg.stderr
    assert "Traceback" not in bg.stderr
    codes, _ = run_until_done(cluster, ns, "--lease-duration", "10s")
    assert balanced(cluster, ns) == [3, 3, 3]
    accepted = accepted_evictions(cluster, mark, ns)
    audit = no_double(accepted)
    assert sum(accepted.values()) == PLANNED
    first = (
        f"first run: end {bg.report()['summary']['end']}, {bg.evicted()} evicted"
        if code != 3
        else "first run: exit 3 (API server unreachable)"
    )
    row("kube-apiserver kill -9 + restart mid-run", f"{first}; next run balanced",
        f"{code} then {codes}", seconds, audit)  # fmt: skip


# -- 3. a proxy injecting 500/503 and 429 with Retry-After ---------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    at: float
    status: int
    injected: bool


Match = Callable[[str, str], bool]


class FaultProxy:
    """A TLS proxy on 127.0.0.1 in front of kube-apiserver that injects errors by script.

    It presents the API server's own certificate (valid for 127.0.0.1) and forwards as the
    admin client. ``script`` maps a predicate on (method, path) to the answers to inject, in
    order, before letting such requests through.
    """

    def __init__(self, cp: ControlPlane, script: list[tuple[Match, list[tuple[int, str]]]]) -> None:
        self.cp = cp
        self.script = script
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        upstream = ssl.create_default_context(cafile=str(cp.pki.ca_crt))
        crt, key = cp.client_certs["admin"]
        upstream.load_cert_chain(str(crt), str(key))
        self.upstream = upstream
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                proxy.handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving.load_cert_chain(str(cp.apiserver_crt), str(cp.apiserver_key))
        self.server.socket = serving.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        injected: tuple[int, str] | None = None
        with self.lock:
            for matches, answers in self.script:
                if answers and matches(h.command, h.path):
                    injected = answers.pop(0)
                    break
        if injected is not None:
            status, retry_after = injected
            payload = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "message": "injected by the e2e fault proxy",
                                  "code": status}).encode()  # fmt: skip
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            if retry_after:
                h.send_header("Retry-After", retry_after)
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            self._note(h, status, injected=True)
            return
        host = self.cp.server.removeprefix("https://")
        conn = http.client.HTTPSConnection(host, context=self.upstream, timeout=60)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(h.command, h.path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        h.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        conn.close()
        self._note(h, answer.status, injected=False)

    def _note(self, h: BaseHTTPRequestHandler, status: int, *, injected: bool) -> None:
        with self.lock:
            self.seen.append(Seen(h.command, h.path, time.monotonic(), status, injected))

    def kubeconfig(self, path: Path) -> Path:
        raw = json.loads(self.cp.kubectl("config", "view", "--minify", "--raw", "-o",
                                         "json").stdout)  # fmt: skip
        raw["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        return write_json(path, raw)


def test_a_proxy_injecting_5xx_and_429_gets_bounded_retries_that_honour_retry_after(
    cluster: Cluster, control: ControlPlane, skewed: Imbalance, tmp_path: Path
) -> None:
    """503 and 500 on evictions and LISTs, 429 with Retry-After 2: bounded retries, the pause
    asked for, never a DELETE; the plan completes."""
    ns = skewed.ns

    def eviction(method: str, path: str) -> bool:
        return method == "POST" and path.endswith("/eviction")

    def list_pods(method: str, path: str) -> bool:
        return method == "GET" and f"/namespaces/{ns}/pods?" in path

    proxy = FaultProxy(control, [
        (eviction, [(503, ""), (500, ""), (429, "2")]),
        (list_pods, [(429, "1"), (503, "")]),
    ])  # fmt: skip
    try:
        mark = audit_mark(cluster)
        bg = start(cluster, "run", "-n", ns, *FLAGS, kubeconfig=proxy.kubeconfig(tmp_path / "kc"))
        code, seconds = bg.finish()
    finally:
        proxy.close()
    assert code == 0, bg.stderr
    assert bg.report()["summary"]["evicted"] == PLANNED
    seen = proxy.seen
    assert [s for s in seen if s.method == "DELETE"] == []
    injected = [s for s in seen if s.injected]
    assert len(injected) == 5
    for fault in injected:
        after = next(s for s in seen if s.at > fault.at and s.path == fault.path)
        if fault.status == 429:  # Retry-After honoured (2 s for evictions, 1 s for the LIST)
            wanted = 2 if fault.method == "POST" else 1
            assert after.at - fault.at >= wanted - 0.05, (fault, after)
    per_pod = Counter(s.path for s in seen if eviction(s.method, s.path))
    assert max(per_pod.values()) <= 4  # 3 injected + the one that went through
    accepted = accepted_evictions(cluster, mark, ns)
    audit = no_double(accepted) + "; no DELETE through the proxy"
    retries = len(bg.events("request.retry"))
    assert retries == 2  # the LIST's 429 and 503, each logged once
    row("proxy: 503, 500, 429 Retry-After 2 on evictions; 429 Retry-After 1, 503 on LIST",
        f"completed, {PLANNED} evicted, {retries} GET retries logged, max {max(per_pod.values())}"
        " POSTs per pod", str(code), seconds, audit)  # fmt: skip


# -- 4. two runs at once --------------------------------------------------------------------------


@pytest.mark.k8s_versions
def test_two_concurrent_runs_evict_one_plan_under_one_lease_holder(
    cluster: Cluster, control: ControlPlane, skewed: Imbalance
) -> None:
    """Two runs started together: the evictions add up to one plan, all recorded by one Lease
    holder; the other run evicted nothing."""
    ns = skewed.ns
    planned = json.loads(rebalancer(cluster, "plan", "-n", ns, "-o", "json").stdout)
    assert len(planned["evictions"]) == PLANNED
    mark = audit_mark(cluster)
    runs = [start(cluster, "run", "-n", ns, *FLAGS) for _ in range(2)]
    results = [bg.finish() for bg in runs]
    codes = [c for c, _ in results]
    assert codes == [0, 0], [bg.stderr[-2000:] for bg in runs]
    summaries = [bg.report()["summary"] for bg in runs]
    assert sorted(s["evicted"] for s in summaries) == [0, PLANNED], summaries
    accepted = accepted_evictions(cluster, mark, ns)
    audit = no_double(accepted)
    assert sum(accepted.values()) == PLANNED
    holders = recording_holders(cluster, mark, set(accepted))
    assert set(holders) == set(accepted)  # every accepted eviction was recorded first
    assert len(set(holders.values())) == 1, holders
    ends = sorted(s["end"] for s in summaries)
    holder = next(iter(holders.values()))
    row("two concurrent runs", f"ends {ends}", str(codes), max(t for _, t in results),
        audit + f"; one Lease holder recorded them all ({holder})")  # fmt: skip


# -- 5. kill -9 mid-wave, then run again ---------------------------------------------------------


def test_kill_9_mid_wave_then_rerun_counts_the_earlier_evictions(
    cluster: Cluster, control: ControlPlane, skewed: Imbalance, tmp_path: Path
) -> None:
    """limits.total 3: kill -9 after the first eviction; the Lease turns the next run away
    until it expires; then the rerun counts the recorded eviction(s) against the limit:
    3 evictions in all, none twice."""
    ns = skewed.ns
    policy = write_policy(tmp_path, "three", limits={"total": 3})
    flags = (*FLAGS, "--policy", str(policy), "--lease-duration", "8s")
    mark = audit_mark(cluster)
    bg = start(cluster, "run", "-n", ns, *flags)
    bg.wait_evicted(1)
    bg.proc.send_signal(signal.SIGKILL)
    code, seconds = bg.finish()
    assert code == -signal.SIGKILL
    turned_away = rebalancer(cluster, "run", "-n", ns, *flags)
    assert turned_away.returncode == 0, explain(turned_away)
    first_end = json.loads(turned_away.stdout)["summary"]["end"]
    started = time.monotonic()
    codes, summary = run_until_done(cluster, ns, "--policy", str(policy), "--lease-duration", "8s")
    seconds += time.monotonic() - started
    accepted = accepted_evictions(cluster, mark, ns)
    audit = no_double(accepted)
    assert sum(accepted.values()) == 3, accepted
    killed = bg.evicted()  # what the killed run had evicted (its log lines before the kill)
    assert summary["earlierEvictions"] >= killed >= 1, summary
    assert summary["evicted"] == 3 - summary["earlierEvictions"], summary
    exits = f"-9, {turned_away.returncode}, {codes}"
    outcome = f"rerun at once: {first_end}; after expiry the limit counted the killed run's"
    row("kill -9 mid-wave, rerun (limits.total 3)", outcome, exits, seconds, audit)


# -- 6. a Lease renewed one day ahead -------------------------------------------------------------


def test_a_lease_renewed_a_day_ahead_is_taken_over(
    cluster: Cluster, control: ControlPlane, namespace: str
) -> None:
    """Another holder's Lease with renewTime one day ahead of the clock (a clock far off, or an
    edit): it used to turn every run away for that day. The run takes it over with the
    resourceVersion it read (the audit log shows the update), logs lease.untrusted, runs and
    gives the Lease back."""
    name = f"ahead-{namespace}"
    day_ahead = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() + 86_400))
    cluster.apply({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": "clock-ahead/run0", "leaseDurationSeconds": 60,
                 "acquireTime": day_ahead, "renewTime": day_ahead, "leaseTransitions": 2},
    })  # fmt: skip
    try:
        created = json.loads(cluster.kubectl("get", "lease", name, "-n", LEASE_NAMESPACE,
                                             "-o", "json").stdout)  # fmt: skip
        mark = audit_mark(cluster)
        started = time.monotonic()
        ran = rebalancer(cluster, "run", "-n", namespace, "--lease-name", name, "-o", "json")
        seconds = time.monotonic() - started
        assert ran.returncode == 0, explain(ran)
        summary = json.loads(ran.stdout)["summary"]
        assert summary["end"] != "lease-held", summary
        lines = [json.loads(x) for x in ran.stderr.splitlines() if x.startswith("{")]
        (untrusted,) = [e for e in lines if e.get("event") == "lease.untrusted"]
        assert untrusted["holder"] == "clock-ahead/run0"
        said = rf"renewTime {day_ahead} is (\d+)s ahead of this machine's clock \(more than the 30s"
        ahead = re.match(said, untrusted["reason"])
        assert ahead is not None and 86_000 < int(ahead[1]) <= 86_400, untrusted
        time.sleep(2)  # the audit backend writes in batches
        writes = [
            ev for ev in rebalancer_requests(cluster, mark)
            if ev.get("objectRef", {}).get("resource") == "leases"
            and ev.get("objectRef", {}).get("name") == name and ev["verb"] == "update"
        ]  # fmt: skip
        assert [w["responseStatus"]["code"] for w in writes][:1] == [200], writes
        taking = writes[0]["requestObject"]
        assert taking["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert taking["spec"]["leaseTransitions"] == 3
        assert taking["spec"]["holderIdentity"] != "clock-ahead/run0"
        after = json.loads(cluster.kubectl("get", "lease", name, "-n", LEASE_NAMESPACE,
                                           "-o", "json").stdout)  # fmt: skip
        assert "holderIdentity" not in after["spec"]  # given back at the end
    finally:
        cluster.kubectl("delete", "lease", name, "-n", LEASE_NAMESPACE, check=False)
    row("Lease renewed one day ahead", f"taken over (lease.untrusted), end {summary['end']}",
        str(ran.returncode), seconds, f"{len(writes)} Lease updates, the first with the "
        "resourceVersion read")  # fmt: skip
