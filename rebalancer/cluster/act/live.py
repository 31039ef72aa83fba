"""A ``run`` against the live cluster, wired whole (:func:`run_live`): connect, ask for every
permission the run needs before reading anything (:mod:`rebalancer.cluster.api.preflight`;
exit 3 naming the verb and resource), open the :class:`~rebalancer.cluster.read.live.
LiveSource`, build the :class:`~rebalancer.cluster.act.runner.Runner`, run it once or every
interval. What only the command line does (signals, metrics) it asks of its :class:`RunHooks`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from rebalancer.cluster.act import reserve
from rebalancer.cluster.act.evictionrequest import resolve
from rebalancer.cluster.act.lease import LeaseSettings
from rebalancer.cluster.act.runner import Runner, RunReport, RunSettings
from rebalancer.cluster.api.preflight import preflight, run_checks
from rebalancer.cluster.read.live import Connection, LiveSource, connect
from rebalancer.core.api import Policy, RebalancerError


@dataclass(frozen=True, slots=True)
class LiveRun:
    """A run as its flags ask, validated."""

    connection: Connection
    namespace: str | None
    settings: RunSettings
    interval: float | None = None
    """Start a run every this many seconds until stopped; None: once."""
    watch: bool = False
    """Keep the state current with WATCH between runs (with ``interval``, not ``--relist``)."""
    react_after: float = 0.0
    """Bring the next run forward this long after pods were placed (with the watch); 0: off."""
    verify_every: int = 0
    """Check the watch-fed state every this many runs (``--verify-state-every``); 0: never."""

    @property
    def evicting(self) -> bool:
        """Neither dry run: evictions are sent."""
        return not (self.settings.plan_only or self.settings.executor.server_dry_run)


class RunHooks(Protocol):
    """What the command line does around the runs: once connected and checked, it takes the
    signals over (they set ``stop``; the undo is returned); in interval mode it starts
    ``serving`` metrics before the first run; it sees each run's ``report`` (in interval mode,
    those inside the window) or ``error`` (raised again after a single run)."""

    def take_signals(self, stop: threading.Event) -> Callable[[], None]: ...
    def serving(self) -> None: ...
    def report(self, report: RunReport) -> None: ...
    def error(self, exc: RebalancerError) -> None: ...


def run_live(run: LiveRun, policy: Policy, hooks: RunHooks) -> RunReport | None:
    """Run once (the report), or every ``run.interval`` until stopped (None)."""
    kube = connect(run.connection)
    source = LiveSource(
        kube, run.connection, run.namespace, watch=run.watch, verify_every=run.verify_every
    )
    try:
        if not run.settings.plan_only:
            lease = run.settings.lease or LeaseSettings()  # asked about when the run evicts
            steering = run.evicting and policy.steer_scale_down
            checks = run_checks(evicting=run.evicting, watching=run.watch, steering=steering)
            preflight(
                kube, run.namespace, checks, lease_namespace=lease.namespace, lease_name=lease.name
            )
        stop = threading.Event()
        undo = hooks.take_signals(stop)
        try:
            server = source.server_info()  # read once: in every run's summary line
            api, why = resolve(
                kube, policy.eviction_api, run.namespace, version=server.get("version")
            )
            server["evictionApi"] = {"policy": policy.eviction_api, "used": api, "why": why}
            capacity = reserve.resolve(
                kube,
                policy.reserve_capacity,
                run.namespace,
                ask_rbac=not run.settings.plan_only,  # a plan sends GETs only
            )
            server["capacity"] = reserve.info(policy.reserve_capacity, capacity)
            settings = replace(
                run.settings,
                executor=replace(run.settings.executor, eviction_api=api),
                capacity=replace(capacity, backoff_seconds=run.settings.capacity.backoff_seconds),
            )
            runner = Runner(source, kube, policy, settings, server=server, stop=stop)
            if run.interval is not None:
                hooks.serving()
                runner.run_forever(
                    run.interval, hooks.report, hooks.error, react_after=run.react_after
                )
                return None
            try:
                report = runner.run_once()
            except RebalancerError as exc:
                hooks.error(exc)
                raise
            hooks.report(report)
            return report
        finally:
            undo()
    finally:
        source.close()
