"""Prometheus metrics for ``run --interval``: off unless ``--metrics-bind-address`` is given.

A private registry (not the process-global one), so tests can build as many as they like.

==========================================  =====================================================
``rebalancer_evictions_total{result}``      evictions by outcome (evicted, blocked-by-pdb, ...)
``rebalancer_planned_moves``                evictions in the last run's first plan
``rebalancer_skew_before{...}``             skew of each violated view at the start of a run
``rebalancer_skew_after{...}``              the same views at the end of the run
``rebalancer_run_duration_seconds``         histogram of run durations
``rebalancer_runs_total{result}``           runs by result: ok, evictions-failed, error
==========================================  =====================================================
"""

from __future__ import annotations

from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from rebalancer.cluster.outcome import Outcome
from rebalancer.cluster.runner import RunReport

VIEW_LABELS: Final = ("namespace", "topology_key", "selector", "max_skew", "when_unsatisfiable")
DURATION_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


def parse_bind_address(text: str) -> tuple[str, int]:
    """``host:port``, ``:port`` (all interfaces) or ``[v6]:port`` -> (host, port)."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be HOST:PORT like 127.0.0.1:8080, got {text!r}")
    host = host.removeprefix("[").removesuffix("]")
    return host or "0.0.0.0", int(port)  # ":8080" means every interface, as in Go


class Metrics:
    """The rebalancer's metrics in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.evictions = Counter(
            "rebalancer_evictions", "Evictions by result.", ["result"], registry=r
        )
        self.runs = Counter("rebalancer_runs", "Runs by result.", ["result"], registry=r)
        self.invalid = Counter(
            "rebalancer_invalid_objects",
            "Objects a read could not convert; each left its namespace out of that run.",
            registry=r,
        )
        self.planned = Gauge(
            "rebalancer_planned_moves", "Evictions in the last run's first plan.", registry=r
        )
        self.skew_before = Gauge(
            "rebalancer_skew_before",
            "Skew of each violated spread view at the start of the last run.",
            VIEW_LABELS,
            registry=r,
        )
        self.skew_after = Gauge(
            "rebalancer_skew_after",
            "Skew of the same views at the end of the last run.",
            VIEW_LABELS,
            registry=r,
        )
        self.duration = Histogram(
            "rebalancer_run_duration_seconds",
            "Duration of a run.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        for outcome in Outcome:
            self.evictions.labels(result=str(outcome))  # export zeros from the start
        for result in ("ok", "evictions-failed", "error"):
            self.runs.labels(result=result)

    def serve(self, address: str) -> Any:
        """Listen on ``address`` (HOST:PORT) in a daemon thread; returns the server."""
        host, port = parse_bind_address(address)
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server

    def record(self, report: RunReport) -> None:
        """Account for one finished run."""
        for result in report.results:
            self.evictions.labels(result=str(result.outcome)).inc()
        self.planned.set(report.planned)
        self.invalid.inc(report.invalid_objects)
        self.duration.observe(report.duration_seconds)
        self.runs.labels(result="ok" if report.exit_code == 0 else "evictions-failed").inc()
        self.skew_before.clear()
        self.skew_after.clear()
        for view in report.skews:
            labels = {
                "namespace": view.namespace,
                "topology_key": view.topology_key,
                "selector": view.selector,
                "max_skew": str(view.max_skew),
                "when_unsatisfiable": view.when_unsatisfiable,
            }
            self.skew_before.labels(**labels).set(view.before)
            if view.after is not None:
                self.skew_after.labels(**labels).set(view.after)

    def record_error(self) -> None:
        """Account for a run that ended with an error."""
        self.runs.labels(result="error").inc()
