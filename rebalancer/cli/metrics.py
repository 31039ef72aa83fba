"""Prometheus metrics: served by ``run --interval --metrics-bind-address``, or pushed to a
Pushgateway at the end of a one-shot ``run`` or ``plan`` (``--pushgateway URL``, for CronJobs).

A private registry (not the process-global one), so tests can build as many as they like.

=============================================  ==================================================
``rebalancer_evictions_total{result}``         evictions by outcome (evicted, blocked-by-pdb, ...)
``rebalancer_runs_total{result}``              runs by result: ok, evictions-failed, lease-held,
                                               error
``rebalancer_run_duration_seconds``            histogram of run durations
``rebalancer_last_run_timestamp_seconds``      when the last run ended (Unix time)
``rebalancer_last_run_result{result}``         1 for the last run's result, 0 for the others
``rebalancer_last_success_timestamp_seconds``  when the last run with result ok ended; absent
                                               until one did
``rebalancer_last_run_evictions{result}``      the last run's evictions by outcome
``rebalancer_last_run_duration_seconds``       the last run's duration
``rebalancer_last_run_invalid_objects``        objects the last run could not read
``rebalancer_planned_moves``                   evictions in the last run's first plan
``rebalancer_skew_before{...}``                skew of each violated view at the start of a run
``rebalancer_skew_after{...}``                 the same views at the end of the run
``rebalancer_unrepaired_skew{namespace,``      evicting runs only: by how much the views of a
``workload}``                                  workload the plan could bring within maxSkew were
                                               still above it at the end of the run (only > 0)
=============================================  ==================================================

The counters and the histogram add up the runs of one process: right for ``run --interval``,
whose process lives on. A CronJob's run is a process of its own, and its push replaces the last
one's on the Pushgateway, so its counters never get past one run: what the alerts and the
dashboard read of a CronJob are the gauges, each of which means the same whichever push is the
last. ``rebalancer_last_success_timestamp_seconds`` is kept apart, in a group of its own on the
Pushgateway (grouping label ``rebalancer_push="last-success"``) that only successful runs
replace, so a failed run's push does not erase when the last success was.

The view labels hold the selector without its ``pod-template-hash`` and
``controller-revision-hash`` parts, so a rollout does not start new series; the alert's metric,
``rebalancer_unrepaired_skew``, is labelled by workload (``Deployment/web``) instead.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.exposition import push_to_gateway

from rebalancer.cli.buildinfo import build_info
from rebalancer.cluster.act.outcome import Outcome, RunEnd
from rebalancer.cluster.act.runner import RunReport, ViewSkew
from rebalancer.core.api import EVICTION_REQUEST_API

if TYPE_CHECKING:
    from rebalancer.core.api import Plan, ViewKey

VIEW_LABELS: Final = ("namespace", "topology_key", "selector", "max_skew", "when_unsatisfiable")
UNREPAIRED_LABELS: Final = ("namespace", "workload")
_HASH_PART: Final = re.compile(
    r"(?:^|,)(?:pod-template-hash|controller-revision-hash)(?: in \([^)]*\)|=[^,]*)"
)
DURATION_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
OK: Final = "ok"
RESULTS: Final = (OK, "evictions-failed", "lease-held", "error")
"""The ``result`` label of the runs: every value is exported from the start."""
LAST_SUCCESS: Final = "rebalancer_last_success_timestamp_seconds"
LAST_SUCCESS_HELP: Final = "When the last run with result ok ended (Unix time)."
SUCCESS_GROUP: Final = {"rebalancer_push": "last-success"}
"""The Pushgateway grouping key, beside ``job``, of the last success time: its own group, which
only a successful run replaces."""


def run_result(report: RunReport) -> str:
    """The ``result`` label of a finished run: lease-held (another rebalancer held the Lease:
    nothing done), ok (exit 0), else evictions-failed."""
    if report.end is RunEnd.LEASE_HELD:
        return "lease-held"
    return OK if report.exit_code == 0 else "evictions-failed"


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


def repairable_views(plan: Plan) -> dict[ViewKey, str]:
    """The violated views the plan brings within maxSkew, each with its workload: the
    ``Kind/name`` of the pods the plan evicts from it (sorted and joined when several), else
    its selector without revision hashes."""
    after: dict[ViewKey, int] = {}
    for view in plan.after:
        after[view.key] = max(after.get(view.key, 0), view.skew)
    evicted: dict[str, str] = {e.key: e.workload for e in plan.evictions if e.workload}
    out: dict[ViewKey, str] = {}
    for view in plan.violations:
        if after.get(view.key, view.skew) > view.max_skew:
            continue  # the policy cannot repair it: no alert, however long it stays
        workloads = sorted({evicted[pod] for pod in view.pods if pod in evicted})
        out[view.key] = ",".join(workloads) or stable_selector(view.selector)
    return out


def unrepaired(plan: Plan, skews: Iterable[ViewSkew]) -> dict[tuple[str, str], int]:
    """(namespace, workload) -> the largest excess over maxSkew at the end of the run of the
    workload's views that ``plan`` could repair; only those still above maxSkew."""
    workloads = repairable_views(plan)
    out: dict[tuple[str, str], int] = {}
    for view in skews:
        workload = workloads.get(view.key)
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

    def __init__(self, *, evicting: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.evicting = evicting
        self.clock = clock
        self.last_result: str | None = None
        self.registry = CollectorRegistry()
        r = self.registry
        self.evictions = Counter(
            "rebalancer_evictions", "Evictions by result.", ["result"], registry=r
        )
        self.requests = Counter(
            "rebalancer_eviction_requests",
            "Evictions sent as EvictionRequests, by result and the responder's or condition's "
            "reason (Timeout: withdrawn at the wave's timeout).",
            ["result", "reason"],
            registry=r,
        )
        self.runs = Counter("rebalancer_runs", "Runs by result.", ["result"], registry=r)
        self.invalid = Counter(
            "rebalancer_invalid_objects",
            "Objects a read could not convert; each left its namespace out of that run.",
            registry=r,
        )
        self.last_run = Gauge(
            "rebalancer_last_run_timestamp_seconds",
            "When the last run ended (Unix time).",
            registry=r,
        )
        self.last_run_result = Gauge(
            "rebalancer_last_run_result",
            "1 for the result of the last run, 0 for the others.",
            ["result"],
            registry=r,
        )
        self.last_success = Gauge(LAST_SUCCESS, LAST_SUCCESS_HELP, registry=r)
        self.last_evictions = Gauge(
            "rebalancer_last_run_evictions",
            "The last run's evictions by result.",
            ["result"],
            registry=r,
        )
        self.last_duration = Gauge(
            "rebalancer_last_run_duration_seconds", "Duration of the last run.", registry=r
        )
        self.last_invalid = Gauge(
            "rebalancer_last_run_invalid_objects",
            "Objects the last run could not convert; each left its namespace out of that run.",
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
        self.build = Gauge(
            "rebalancer_build_info",
            "Always 1; its labels say which build runs (as `rebalancer version` does).",
            ["version", "commit", "python"],
            registry=r,
        )
        info = build_info()
        self.build.labels(version=info.version, commit=info.commit, python=info.python).set(1)
        for outcome in Outcome:
            self.evictions.labels(result=str(outcome))  # export zeros from the start
        for result in RESULTS:
            self.runs.labels(result=result)
        # the success time is unset (absent) until a run succeeds: the Gauge needs a value
        self.registry.unregister(self.last_success)
        self._last_success: float | None = None

    def serve(self, address: str) -> Any:
        """Listen on ``address`` (HOST:PORT) in a daemon thread; returns the server."""
        host, port = parse_bind_address(address)
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server

    def record(self, report: RunReport) -> None:
        """Account for one finished run."""
        counts = dict.fromkeys(map(str, Outcome), 0)
        for result in report.results:
            self.evictions.labels(result=str(result.outcome)).inc()
            if result.api == EVICTION_REQUEST_API:
                self.requests.labels(result=str(result.outcome), reason=result.reason).inc()
            counts[str(result.outcome)] += 1
        self.planned.set(report.planned)
        self.invalid.inc(report.invalid_objects)
        self.duration.observe(report.duration_seconds)
        self._finished(run_result(report), report.duration_seconds, counts)
        self.last_invalid.set(report.invalid_objects)
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
        self._finished(OK, duration_seconds, dict.fromkeys(map(str, Outcome), 0))
        self.last_invalid.set(0)
        self._skews(ViewSkew(*v.key, v.skew, None) for v in plan.violations)

    def _finished(self, result: str, duration_seconds: float, evictions: dict[str, int]) -> None:
        """The run counter and the gauges of the last run."""
        now = self.clock()
        self.runs.labels(result=result).inc()
        self.last_result = result
        self.last_run.set(now)
        for value in dict.fromkeys((*RESULTS, result)):
            self.last_run_result.labels(result=value).set(1 if value == result else 0)
        self.last_duration.set(duration_seconds)
        self.last_evictions.clear()
        for outcome, count in evictions.items():
            self.last_evictions.labels(result=outcome).set(count)
        if result == OK:
            if self._last_success is None:
                self.registry.register(self.last_success)
            self._last_success = now
            self.last_success.set(now)

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
        """Account for a run that ended with an error (what it evicted is not known)."""
        self._finished("error", 0.0, {})
        self.last_invalid.set(0)

    def push(self, url: str, job: str) -> None:
        """Replace this job's metrics on the Pushgateway at ``url`` with these (HTTP PUT); after
        a successful run, replace the last success time's group too."""
        push_to_gateway(url, job=job, registry=self.registry, grouping_key={}, timeout=10)
        if self.last_result == OK and self._last_success is not None:
            success = CollectorRegistry()
            Gauge(LAST_SUCCESS, LAST_SUCCESS_HELP, registry=success).set(self._last_success)
            push_to_gateway(url, job=job, registry=success, grouping_key=SUCCESS_GROUP, timeout=10)
