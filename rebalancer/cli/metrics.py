"""Prometheus metrics: served by ``run --interval --metrics-bind-address``, or pushed to a
Pushgateway at the end of a one-shot ``run`` or ``plan`` (``--pushgateway URL``, for CronJobs).

A private registry (not the process-global one), so tests can build as many as they like.

============================================  ===================================================
``rebalancer_evictions_total{result}``        evictions by outcome (evicted, blocked-by-pdb, ...)
``rebalancer_planned_moves``                  evictions in the last run's first plan
``rebalancer_skew_before{...}``               skew of each violated view at the start of a run
``rebalancer_skew_after{...}``                the same views at the end of the run
``rebalancer_unrepaired_skew{namespace,``     evicting runs only: by how much the views of a
``workload}``                                 workload the plan could bring within maxSkew were
                                              still above it at the end of the run (only > 0)
``rebalancer_run_duration_seconds``           histogram of run durations
``rebalancer_runs_total{result}``             runs by result: ok, evictions-failed, error
============================================  ===================================================

The view labels hold the selector without its ``pod-template-hash`` and
``controller-revision-hash`` parts, so a rollout does not start new series; the alert's metric,
``rebalancer_unrepaired_skew``, is labelled by workload (``Deployment/web``) instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.exposition import push_to_gateway

from rebalancer.cluster.act.outcome import Outcome
from rebalancer.cluster.act.runner import RunReport, ViewSkew

if TYPE_CHECKING:
    from rebalancer.core.plan import Plan, ViewReport

VIEW_LABELS: Final = ("namespace", "topology_key", "selector", "max_skew", "when_unsatisfiable")
UNREPAIRED_LABELS: Final = ("namespace", "workload")
_HASH_PART: Final = re.compile(
    r"(?:^|,)(?:pod-template-hash|controller-revision-hash)(?: in \([^)]*\)|=[^,]*)"
)
DURATION_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


def parse_bind_address(text: str) -> tuple[str, int]:
    """``host:port``, ``:port`` (all interfaces) or ``[v6]:port`` -> (host, port)."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be HOST:PORT like 127.0.0.1:8080, got {text!r}")
    host = host.removeprefix("[").removesuffix("]")
    return host or "0.0.0.0", int(port)  # ":8080" means every interface, as in Go


def stable_selector(selector: str) -> str:
    """The selector without the revision hashes a rollout changes (``pod-template-hash``)."""
    return _HASH_PART.sub("", selector).lstrip(",") or "<all>"


def _view_key(view: ViewReport | ViewSkew) -> tuple[str, str, str, int, str]:
    return (
        view.namespace,
        view.topology_key,
        view.selector,
        view.max_skew,
        view.when_unsatisfiable,
    )


def repairable_views(plan: Plan) -> dict[tuple[str, str, str, int, str], str]:
    """The violated views the plan brings within maxSkew, each with its workload: the
    ``Kind/name`` of the pods the plan evicts from it (sorted and joined when several), else
    its selector without revision hashes."""
    after: dict[tuple[str, str, str, int, str], int] = {}
    for view in plan.after:
        key = _view_key(view)
        after[key] = max(after.get(key, 0), view.skew)
    evicted: dict[str, str] = {e.key: e.workload for e in plan.evictions if e.workload}
    out: dict[tuple[str, str, str, int, str], str] = {}
    for view in plan.violations:
        key = _view_key(view)
        if after.get(key, view.skew) > view.max_skew:
            continue  # the policy cannot repair it: no alert, however long it stays
        workloads = sorted({evicted[pod] for pod in view.pods if pod in evicted})
        out[key] = ",".join(workloads) or stable_selector(view.selector)
    return out


def unrepaired(plan: Plan, skews: Iterable[ViewSkew]) -> dict[tuple[str, str], int]:
    """(namespace, workload) -> the largest excess over maxSkew at the end of the run of the
    workload's views that ``plan`` could repair; only those still above maxSkew."""
    workloads = repairable_views(plan)
    out: dict[tuple[str, str], int] = {}
    for view in skews:
        workload = workloads.get(_view_key(view))
        if workload is None or view.after is None or view.after <= view.max_skew:
            continue
        key = (view.namespace, workload)
        out[key] = max(out.get(key, 0), view.after - view.max_skew)
    return out


class Metrics:
    """The rebalancer's metrics in their own registry.

    ``evicting``: the runs evict (neither dry run): only then is ``rebalancer_unrepaired_skew``
    set, as only then could a run have repaired anything.
    """

    def __init__(self, *, evicting: bool = False) -> None:
        self.evicting = evicting
        self.registry = CollectorRegistry()
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
        self.unrepaired = Gauge(
            "rebalancer_unrepaired_skew",
            "Evicting runs: the largest excess over maxSkew, at the end of the last run, of the "
            "workload's views that its plan could bring within maxSkew.",
            UNREPAIRED_LABELS,
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
        self._skews(report.skews)
        self.unrepaired.clear()
        if self.evicting and not report.server_dry_run:
            for (namespace, workload), excess in unrepaired(
                report.first_plan, report.skews
            ).items():
                self.unrepaired.labels(namespace=namespace, workload=workload).set(excess)

    def record_plan(self, plan: Plan, duration_seconds: float) -> None:
        """Account for a plan made without running it (``plan``, ``run --dry-run``)."""
        self.planned.set(len(plan.evictions))
        self.duration.observe(duration_seconds)
        self.runs.labels(result="ok").inc()
        self._skews(ViewSkew(*_view_key(v), v.skew, None) for v in plan.violations)

    def _skews(self, skews: Iterable[ViewSkew]) -> None:
        """The view gauges: largest skew per label set (views differing by a hash merge)."""
        before: dict[tuple[str, ...], int] = {}
        after: dict[tuple[str, ...], int] = {}
        for view in skews:
            labels: tuple[str, ...] = (
                view.namespace,
                view.topology_key,
                stable_selector(view.selector),
                str(view.max_skew),
                view.when_unsatisfiable,
            )
            before[labels] = max(before.get(labels, 0), view.before)
            if view.after is not None:
                after[labels] = max(after.get(labels, 0), view.after)
        for gauge, values in ((self.skew_before, before), (self.skew_after, after)):
            gauge.clear()
            for labels, value in values.items():
                gauge.labels(*labels).set(value)

    def record_error(self) -> None:
        """Account for a run that ended with an error."""
        self.runs.labels(result="error").inc()

    def push(self, url: str, job: str) -> None:
        """Replace this job's metrics on the Pushgateway at ``url`` with these (HTTP PUT)."""
        push_to_gateway(url, job=job, registry=self.registry, grouping_key={}, timeout=10)
