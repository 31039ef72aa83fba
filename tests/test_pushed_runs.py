"""What a CronJob's runs leave on a Pushgateway: each run is a process of its own whose push
replaces the last run's group, so what survives is what the alerts may read.

The gateway is a loopback HTTP server written here with the Pushgateway's semantics, as far
as rebalancer uses them: PUT replaces a group (job plus grouping labels), POST replaces the
metric families it carries, DELETE drops the group, and GET /metrics shows every group's
samples with the group's labels added and a ``push_time_seconds`` per group. When the real
Pushgateway is installed (scripts/install-pushgateway.sh, Debian's package), the same runs are
pushed to it too and must read back the same.
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rebalancer.cli.metrics import Metrics, run_result
from rebalancer.cluster.act.outcome import EvictionResult, Outcome, RunEnd
from rebalancer.cluster.act.runner import RunReport, ViewSkew, Wave
from rebalancer.core.model import Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import zones_cluster

# -- a minimal Pushgateway ---------------------------------------------------------------------


def _group_key(path: str) -> tuple[tuple[str, str], ...] | None:
    """/metrics/job/J[/L/V...] -> ((job, J), (L, V), ...); None for any other path."""
    parts = path.strip("/").split("/")
    if len(parts) < 3 or parts[0] != "metrics" or parts[1] != "job" or len(parts) % 2 == 0:
        return None
    pairs = [("job", parts[2])] + [(parts[i], parts[i + 1]) for i in range(3, len(parts), 2)]
    return tuple(pairs)


class FakeGateway:
    """groups: grouping key -> (family name -> (HELP/TYPE lines, sample lines)), push times."""

    def __init__(self) -> None:
        self.groups: dict[tuple[tuple[str, str], ...], dict[str, tuple[list[str], list[str]]]] = {}
        self.pushed_at: dict[tuple[tuple[str, str], ...], float] = {}
        self.lock = threading.Lock()

    def receive(self, method: str, key: tuple[tuple[str, str], ...], body: str) -> None:
        families: dict[str, tuple[list[str], list[str]]] = {}
        for family in text_string_to_metric_families(body):
            head = [
                f"# HELP {family.name} {family.documentation}",
                f"# TYPE {family.name} {family.type}",
            ]
            samples = []
            for sample in family.samples:
                labels = {**dict(key), **sample.labels}
                text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                samples.append(f"{sample.name}{{{text}}} {sample.value!r}")
            if samples:  # as the real one: a family without samples is no family
                families[family.name] = (head, samples)
        with self.lock:
            if method == "DELETE":
                self.groups.pop(key, None)
                self.pushed_at.pop(key, None)
                return
            if method == "PUT" or key not in self.groups:
                self.groups[key] = {}
            self.groups[key].update(families)
            self.pushed_at[key] = time.time()

    def exposition(self) -> str:
        lines: list[str] = []
        with self.lock:
            for key, families in self.groups.items():
                for head, samples in families.values():
                    lines += head + samples
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(dict(key).items()))
                lines.append("# TYPE push_time_seconds gauge")
                lines.append(f"push_time_seconds{{{labels}}} {self.pushed_at[key]!r}")
        return "\n".join(lines) + "\n"


@pytest.fixture
def fake_gateway() -> Iterator[str]:
    gateway = FakeGateway()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _push(self) -> None:
            key = _group_key(self.path)
            if key is None:
                self.send_error(404)
                return
            length = int(self.headers.get("Content-Length") or 0)
            gateway.receive(self.command, key, self.rfile.read(length).decode())
            self.send_response(200 if self.command != "DELETE" else 202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_PUT = do_POST = do_DELETE = _push

        def do_GET(self) -> None:
            body = gateway.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _real_gateway_binary() -> str | None:
    """Debian's prometheus-pushgateway, or a pushgateway on PATH."""
    if os.access("/usr/bin/prometheus-pushgateway", os.X_OK):
        return "/usr/bin/prometheus-pushgateway"
    return shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")


@pytest.fixture
def real_gateway() -> Iterator[str]:
    binary = _real_gateway_binary()
    if binary is None:
        pytest.skip("no Pushgateway installed (scripts/install-pushgateway.sh installs Debian's)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- runs ----------------------------------------------------------------------------------------

NODES, PODS = zones_cluster([4, 0, 0])
PLAN = plan(Snapshot(tuple(NODES), tuple(PODS)), Policy(), 0.0)
VIEW = PLAN.violations[0]


def report(end: RunEnd, outcomes: tuple[Outcome, ...], *, skew: bool) -> RunReport:
    """A run of PLAN whose evictions ended as ``outcomes`` (in plan order)."""
    results = tuple(
        EvictionResult(e, o, str(o)) for e, o in zip(PLAN.evictions, outcomes, strict=False)
    )
    skews = (
        (
            ViewSkew(
                VIEW.namespace,
                VIEW.topology_key,
                VIEW.selector,
                VIEW.max_skew,
                VIEW.when_unsatisfiable,
                VIEW.skew,
                VIEW.skew,
            ),
        )
        if skew
        else ()
    )
    waves = (Wave(1, PLAN, results),) if results else ()
    return RunReport("r", PLAN, waves, None, end, skews, 2.5)


BLOCKED_2 = report(
    RunEnd.NOTHING_EVICTED, (Outcome.BLOCKED_BY_PDB, Outcome.BLOCKED_BY_PDB), skew=True
)
FAILED = report(RunEnd.NOTHING_EVICTED, (Outcome.FAILED,), skew=False)
LEASE_HELD = report(RunEnd.LEASE_HELD, (), skew=False)
EVICTED = report(RunEnd.BALANCED, (Outcome.EVICTED, Outcome.EVICTED), skew=False)


def test_results_of_runs() -> None:
    """Hand-made table: PDB refusals only -> ok (exit 0); a failure -> evictions-failed; the
    Lease held -> lease-held, though the run exits 0."""
    assert len(PLAN.evictions) >= 2
    assert (BLOCKED_2.exit_code, run_result(BLOCKED_2)) == (0, "ok")
    assert (FAILED.exit_code, run_result(FAILED)) == (1, "evictions-failed")
    assert (LEASE_HELD.exit_code, run_result(LEASE_HELD)) == (0, "lease-held")
    assert (EVICTED.exit_code, run_result(EVICTED)) == (0, "ok")


def read(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> labels (job, grouping labels and the sample's own, sorted) -> value."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("job") == "rebalancer":
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "instance"))
                out.setdefault(s.name, {})[labels] = s.value
    return out


def one_run(url: str, run: RunReport, now: float) -> None:
    """A CronJob's run: a fresh process (fresh metrics) that pushes at its end."""
    metrics = Metrics(evicting=True, clock=lambda: now)
    metrics.record(run)
    metrics.push(url, "rebalancer")


JOB = (("job", "rebalancer"),)
SUCCESS = (("job", "rebalancer"), ("rebalancer_push", "last-success"))


def _check_four_runs(url: str) -> None:
    # Run 1 at t=1000: ok with 2 evictions refused by a PDB, the view left above maxSkew.
    one_run(url, BLOCKED_2, 1000.0)
    got = read(url)
    assert got["rebalancer_last_run_timestamp_seconds"] == {JOB: 1000.0}
    assert got["rebalancer_last_success_timestamp_seconds"] == {JOB: 1000.0, SUCCESS: 1000.0}
    assert got["rebalancer_last_run_result"][(("job", "rebalancer"), ("result", "ok"))] == 1
    evictions = got["rebalancer_last_run_evictions"]
    assert evictions[(("job", "rebalancer"), ("result", "blocked-by-pdb"))] == 2
    assert evictions[(("job", "rebalancer"), ("result", "evicted"))] == 0
    assert len(got["rebalancer_skew_before"]) == 1
    assert set(got["push_time_seconds"]) == {JOB, SUCCESS}

    # Run 2 at t=1900: an eviction failed. The last success is still run 1's, from its group.
    one_run(url, FAILED, 1900.0)
    got = read(url)
    assert got["rebalancer_last_run_timestamp_seconds"] == {JOB: 1900.0}
    assert got["rebalancer_last_success_timestamp_seconds"] == {SUCCESS: 1000.0}
    result = got["rebalancer_last_run_result"]
    assert result[(("job", "rebalancer"), ("result", "evictions-failed"))] == 1
    assert result[(("job", "rebalancer"), ("result", "ok"))] == 0
    evictions = got["rebalancer_last_run_evictions"]
    assert evictions[(("job", "rebalancer"), ("result", "blocked-by-pdb"))] == 0
    assert evictions[(("job", "rebalancer"), ("result", "failed"))] == 1
    assert "rebalancer_skew_before" not in got  # run 1's view went with its push
    # The counter a rule would have used never gets past 1: each process starts it again.
    runs = got["rebalancer_runs_total"]
    assert runs[(("job", "rebalancer"), ("result", "ok"))] == 0
    assert runs[(("job", "rebalancer"), ("result", "evictions-failed"))] == 1

    # Run 3 at t=2800: the Lease was held: not a success either.
    one_run(url, LEASE_HELD, 2800.0)
    got = read(url)
    assert got["rebalancer_last_run_result"][(("job", "rebalancer"), ("result", "lease-held"))] == 1
    assert got["rebalancer_last_success_timestamp_seconds"] == {SUCCESS: 1000.0}

    # Run 4 at t=3700: ok again.
    one_run(url, EVICTED, 3700.0)
    got = read(url)
    assert got["rebalancer_last_success_timestamp_seconds"] == {JOB: 3700.0, SUCCESS: 3700.0}
    assert got["rebalancer_last_run_evictions"][(("job", "rebalancer"), ("result", "evicted"))] == 2


def test_four_cronjob_runs_on_the_loopback_gateway(fake_gateway: str) -> None:
    """ok with PDB refusals, failed, lease-held, ok: after each push the gateway holds that run's
    gauges, and the last success time of the last run that succeeded."""
    _check_four_runs(fake_gateway)


def test_four_cronjob_runs_on_a_real_pushgateway(real_gateway: str) -> None:
    """The same four runs, read back from the real Pushgateway."""
    _check_four_runs(real_gateway)


def test_the_fake_gateway_replaces_a_group_on_put_and_families_on_post(fake_gateway: str) -> None:
    """The loopback gateway's own semantics, which the checks above rely on."""

    def send(method: str, path: str, body: str) -> None:
        request = urllib.request.Request(f"{fake_gateway}{path}", data=body.encode(), method=method)
        with urllib.request.urlopen(request, timeout=10):
            pass

    send("PUT", "/metrics/job/rebalancer", "a 1\nb 2\n")
    send("POST", "/metrics/job/rebalancer", "b 3\n")
    got = read(fake_gateway)
    assert (got["a"], got["b"]) == ({JOB: 1.0}, {JOB: 3.0})
    send("PUT", "/metrics/job/rebalancer", "b 4\n")
    got = read(fake_gateway)
    assert "a" not in got and got["b"] == {JOB: 4.0}
    send("DELETE", "/metrics/job/rebalancer", "")
    assert "b" not in read(fake_gateway)
