"""The run loop: the shell between the pure planner and the executor (SPEC §3.9 waves).

One run: read the cluster, plan, execute wave 1 only, wait for the replacements, read again,
re-plan with the evictions done so far (``evicted_before``: the policy limits count them, and
the earlier runs' within the cooldown), and so on, until the plan is empty, nothing could be
evicted, re-planning finds the same spread, the wave budget is spent, or a stop was requested
(SIGTERM); the summary's ``end`` (:class:`~rebalancer.cluster.act.outcome.RunEnd`) says
which. ``--interval`` starts a run every interval (start to start), sleeping in between; the
sleep ends at once on SIGTERM.

A stop (the ``stop`` event, or the process-wide
:func:`~rebalancer.cluster.api.deadline.stop_requests` of a signal) sends nothing more: the
executor abandons the eviction in flight and sends no other, a read or a plan under way is
dropped (:func:`~rebalancer.cluster.api.deadline.interruptible`), no Event is created, and the
Lease is not given back (that would be a request: it expires after its duration; the next run
reads the evictions recorded in it). The run's report says what was sent before the stop.

Everything with side effects comes in through a :class:`Source` (the reads), a
:class:`ClusterApi` (every request) and the injected clocks, so the loop is tested against a
fake cluster that is both.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from rebalancer.cluster import logs
from rebalancer.cluster.act.defaults import DEFAULT_MAX_WAVES
from rebalancer.cluster.act.events import event_body
from rebalancer.cluster.act.executor import (
    EvictionIntent,
    Executor,
    ExecutorSettings,
    Transport,
    poll_waits,
)
from rebalancer.cluster.act.lease import EvictionRecord, Holder, Lease, LeaseApi, LeaseSettings
from rebalancer.cluster.act.outcome import FAILURES, EvictionResult, Outcome, RunEnd
from rebalancer.cluster.act.reserve import (
    Reservations,
    Waiting,
    recorded_refusals,
    remove_orphans,
)
from rebalancer.cluster.act.reserverecord import CapacityRecord, Ledger, parse
from rebalancer.cluster.act.steering import CostOutcome, CostResult, name_writers, write_costs
from rebalancer.cluster.api import deadline, errors
from rebalancer.cluster.gcpause import gc_paused
from rebalancer.core.api import (
    EXIT_CLUSTER,
    EXIT_EVICTIONS_FAILED,
    EXIT_OK,
    RESERVE,
    THRASH_GUARD_SECONDS,
    CapacityRules,
    DrainLedger,
    Eviction,
    Guard,
    HoldRules,
    LabelSelector,
    LoopMemory,
    NamespaceScope,
    Plan,
    Policy,
    RebalancerError,
    Refused,
    Snapshot,
    ViewKey,
    budget,
    pdb_from_api,
    remembered_launches,
    selector_string,
    window_state,
)

PlanFn = Callable[..., Plan]
"""``plan(snapshot, policy, now, *, evicted_before=(), rules=None, memory=None) -> Plan``
(rebalancer.core.planner.plan): the holds (``rules``) are decided in it, from the snapshot, the
clock and the loop's memory (:mod:`rebalancer.core.holds`)."""

OUTSIDE_WINDOW: Final = RunEnd.OUTSIDE_WINDOW
"""``end`` of a run started outside the policy's maintenance windows: nothing was read."""
WINDOW_CLOSED: Final = RunEnd.WINDOW_CLOSED
"""``end`` of a run whose maintenance window closed before its next wave."""
PDB_POLL_SECONDS: Final = 0.5
"""How often to look at a spent PodDisruptionBudget between waves."""
REACT_POLL_SECONDS: Final = 0.25
"""How often a sleeping loop looks at the watch's last placement change."""
DRAIN_TAIL_SECONDS: Final = 30.0
"""How long a drained pod's replacement may come before or after the runner sees the pod
leave, and still count as its replacement
(:class:`rebalancer.core.karpenter.drains.DrainLedger`)."""


class Source(Protocol):
    """Where a run's snapshots come from (:class:`~rebalancer.cluster.read.live.LiveSource`, or
    a test's fake): ``read()``; what the last read ``rejected`` (namespaces left out); when a
    pod was last bound, deleted or started terminating, if the source watches (else None)."""

    @property
    def rejected(self) -> Sequence[object]: ...
    def read(self) -> Snapshot: ...
    def last_placement(self) -> float | None: ...


class ClusterApi(Transport, LeaseApi, Protocol):
    """Every request a run sends: the executor's (evictions and the reads before each), the
    Lease's, Events, PodDisruptionBudget GETs (None: gone) and deletion-cost patches (SPEC §7).
    :class:`~rebalancer.cluster.api.kubeclient.Kube` has them, and so has the tests' fake."""

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None: ...
    def get_pdb(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def patch_pod_cost(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How one run behaves."""

    plan_only: bool = False
    """Dry run: read and plan, never execute (``run --dry-run``); writes nothing at all."""
    max_waves: int = DEFAULT_MAX_WAVES
    """Waves per run at most; a plan still non-empty after them waits for the next run."""
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    """Retries, timeouts, and ``server_dry_run``."""
    instance: str = field(default_factory=socket.gethostname)
    """``reportingInstance`` of the Events (the pod name, in a cluster); with the run id, the
    Lease's holderIdentity."""
    pdb_settle_seconds: float = 30.0
    """After a wave that spent PodDisruptionBudgets, how long to wait for the disruption
    controller to give the budget back (replacements Ready) before re-planning; the next plan
    would otherwise skip those pods (``pdb``). 0: no wait, and no GET of the budgets."""
    lease: LeaseSettings | None = None
    """The Lease a run that evicts must hold; None: none (tests of a single process only)."""
    workload_cooldown_seconds: float = 0.0
    """After a workload's replacements landed (Ready), later runs evict none of its pods for
    this long (the runner's memory; ``cooldown`` skips in the plan). 0: off."""
    thrash_guard_seconds: float = THRASH_GUARD_SECONDS  # core.holds: plan says it too
    """A replacement this runner saw land, or one it saw replace a pod a node's drain moved
    (:mod:`rebalancer.core.karpenter.drains`), is not evicted again for this long, for any view: the
    planner goes around it (another pod of its domain is as good a victim), and what it still
    holds shows as ``thrash-guard`` skips in the plan. 0: off."""
    unplaced_grace_seconds: float = 120.0
    """A workload with pods not yet placed (not bound, Pending, younger than this) is not
    repaired in this run: the scheduler places them first, into the domains with the fewest
    matching pods, and a repair planned on the counts without them would be undone (SPEC
    §3.12). Held evictions show as ``pods-unplaced`` skips. 0: off."""
    wait_for_nodes_after_seconds: float = 0.0
    """An eviction whose replacement waits for a node a NodePool adds (SPEC §5.10) is made only
    once this runner has planned such a repair of its workload, run after run, for this long: a
    scale-up may repair the spread for free meanwhile, and a node launched for a passing skew is
    one consolidation removes again. Held evictions show as ``launch-deferred`` skips. 0: off."""
    capacity: CapacityRules = field(default_factory=CapacityRules)
    """Whether a replacement that waits for a new node gets it first (a CapacityBuffer, SPEC
    §5.10), as the run resolved the policy's ``reserveCapacity``, and the back-off after a
    reservation that brought no node (``capacity-not-added`` skips)."""

    @property
    def holds(self) -> HoldRules:
        """The holds every plan of this runner applies (SPEC §3.12): the planner decides them."""
        return HoldRules(
            unplaced_grace_seconds=self.unplaced_grace_seconds,
            drifting=True,
            workload_cooldown_seconds=self.workload_cooldown_seconds,
            thrash_guard_seconds=self.thrash_guard_seconds,
            wait_for_nodes_after_seconds=self.wait_for_nodes_after_seconds,
            capacity=self.capacity,
        )


@dataclass(frozen=True, slots=True)
class ViewSkew:
    """One view violated at the start of the run, with its skew before and after."""

    namespace: str
    topology_key: str
    selector: str
    max_skew: int
    when_unsatisfiable: str
    before: int
    after: int | None  # None when the run could not observe the end state

    @property
    def key(self) -> ViewKey:
        return ViewKey(
            self.namespace, self.topology_key, self.selector, self.max_skew, self.when_unsatisfiable
        )


@dataclass(frozen=True, slots=True)
class Wave:
    """One executed wave: the plan it came from and what happened to each eviction."""

    number: int
    plan: Plan
    results: tuple[EvictionResult, ...]


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything one run did."""

    run_id: str
    first_plan: Plan
    waves: tuple[Wave, ...]
    final_plan: Plan | None  # planned from a read after the last wave; None if not re-read
    end: RunEnd
    skews: tuple[ViewSkew, ...]
    duration_seconds: float
    server_dry_run: bool = False
    lease_holder: Holder | None = None  # who held the Lease, when end is LEASE_HELD
    earlier_evictions: int = 0  # evictions of earlier runs within the cooldown (limits)
    invalid_objects: int = 0  # objects the first read could not convert: namespaces left out
    costs: tuple[CostResult, ...] = ()  # steered scale-downs: the deletion-cost writes

    @property
    def results(self) -> tuple[EvictionResult, ...]:
        return tuple(r for w in self.waves for r in w.results)

    def count(self, *outcomes: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome in outcomes)

    @property
    def planned(self) -> int:
        return len(self.first_plan.evictions)

    @property
    def evicted(self) -> int:
        return self.count(Outcome.EVICTED)

    @property
    def blocked_by_pdb(self) -> int:
        return self.count(Outcome.BLOCKED_BY_PDB)

    @property
    def failed(self) -> int:
        return self.count(Outcome.FAILED)

    @property
    def skipped(self) -> int:
        return self.count(Outcome.SKIPPED, Outcome.GONE, Outcome.CONFLICT)

    @property
    def skew_before(self) -> int:
        return max((s.before for s in self.skews), default=0)

    @property
    def skew_after(self) -> int | None:
        if any(s.after is None for s in self.skews):
            return None
        return max((s.after or 0 for s in self.skews), default=0)

    @property
    def exit_code(self) -> int:
        """3 when the Lease was lost mid-run; 1 when an eviction failed (a PodDisruptionBudget's
        refusal is not a failure), or an object could not be read (its namespace was left
        out); else 0."""
        if self.end is RunEnd.LEASE_LOST:
            return EXIT_CLUSTER
        if self.invalid_objects or any(r.outcome in FAILURES for r in self.results):
            return EXIT_EVICTIONS_FAILED
        return EXIT_OK

    def summary(self) -> dict[str, Any]:
        """The fields of the canonical summary line."""
        return {
            "planned": self.planned,
            "evicted": self.evicted,
            "would_evict": self.count(Outcome.WOULD_EVICT),
            "blocked_by_pdb": self.blocked_by_pdb,
            "failed": self.failed,
            "withdrawn": self.count(Outcome.WITHDRAWN),  # EvictionRequests, at a wave's timeout
            "skipped": self.skipped,
            "waves": len(self.waves),
            "end": str(self.end),
            "violations_before": len(self.first_plan.violations),
            "violations_after": (
                len(self.final_plan.violations) if self.final_plan is not None else None
            ),
            "skew_before": self.skew_before,
            "skew_after": self.skew_after,
            "duration_seconds": round(self.duration_seconds, 3),
            "earlier_evictions": self.earlier_evictions,
            "invalid_objects": self.invalid_objects,
            "lease_held_by": self.lease_holder.identity if self.lease_holder else None,
            "costs_written": sum(1 for c in self.costs if c.outcome is CostOutcome.WRITTEN),
            "costs_not_written": sum(1 for c in self.costs if c.outcome is not CostOutcome.WRITTEN),
        }


def plan_skews(plan: Plan) -> dict[ViewKey, int]:
    """The skew of every view of the snapshot ``plan`` was made from (the plan carries them,
    :attr:`~rebalancer.core.plan.Plan.skews`), and at least those of the views it found
    violated."""
    skews = dict(plan.skews)
    for view in plan.violations:
        skews[view.key] = max(skews.get(view.key, 0), view.skew)
    return skews


def _skews(first: Plan, after: Mapping[ViewKey, int] | None) -> tuple[ViewSkew, ...]:
    return tuple(
        ViewSkew(
            v.namespace,
            v.topology_key,
            v.selector,
            v.max_skew,
            v.when_unsatisfiable,
            v.skew,
            None if after is None else after.get(v.key, 0),
        )
        for v in first.violations
    )


EMPTY_PLAN: Final = Plan((), (), (), (), 0)
"""The plan of a run that did not plan (another rebalancer held the Lease)."""

_PROGRESS: Final = frozenset({Outcome.EVICTED, Outcome.CONFLICT, Outcome.GONE})
"""Outcomes after which a re-plan may find more to do."""


@dataclass(slots=True)
class _Loop:
    """The state of one run's wave loop."""

    snapshot: Snapshot
    plan: Plan
    waves: list[Wave] = field(default_factory=list)
    final: Plan | None = None
    end: RunEnd = RunEnd.STOPPED
    earlier: tuple[Eviction, ...] = ()  # earlier runs' evictions within the cooldown


def _api_selector(selector: LabelSelector | None) -> str:
    """A controller's selector in API syntax; "" (list everything) when it selects nothing."""
    text = selector_string(selector)
    return "" if text in ("<none>", "<all>") else text


class Runner:
    """Runs the read -> plan -> execute-wave loop: snapshots from ``source``, requests through
    ``api``; ``server`` (its version and feature gates) is in every run's summary line."""

    def __init__(
        self,
        source: Source,
        api: ClusterApi,
        policy: Policy,
        settings: RunSettings | None = None,
        *,
        server: Mapping[str, Any] | None = None,
        plan_fn: PlanFn | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] | None = None,
        memory: LoopMemory | None = None,
    ) -> None:
        """``sleep`` (the waits between looks, retries and waves): by default a wait on
        ``stop``, which a stop ends. ``memory``: what the loop starts out remembering (a
        runner that takes over another's; none by default)."""
        self.source = source
        self.api = api
        self.server = server
        self.policy = policy
        self.settings = settings or RunSettings()
        if plan_fn is None:
            from rebalancer.core.api import plan  # noqa: PLC0415  # the core, as a run starts

            plan_fn = plan
        self._plan = plan_fn
        self.stop = stop or threading.Event()
        self._clock = clock
        self._wall = wall_clock
        self._sleep = sleep or self._wait
        self._log = logs.get_logger("rebalancer.runner")
        self._window_closes: datetime | None = None
        self._lease: Lease | None = None
        self._run_id = ""
        self._records: tuple[EvictionRecord, ...] = ()
        # The loop's memory (SPEC §3.12): kept from what happened, read by the planner.
        start = memory or LoopMemory()
        self._landed = dict(start.cooling)  # workload -> when its last replacement landed
        self._guard = dict(start.guarded)  # rebalancer's own replacement -> its guard
        self._cooling: dict[str, float] = {}  # workloads cooling down during this run
        self._launch_since = dict(start.launch_since)  # workload -> first needed a new node
        self._refused = dict(start.refused)  # reservations that brought no node (back-off)
        self._ledger = Ledger(None, CapacityRecord())  # the Lease's record of reservations
        self._drains = DrainLedger(DRAIN_TAIL_SECONDS)  # which new pods replace drained ones
        self._drain_guard: dict[str, Guard] = {}  # a drain's replacement -> its guard

    # -- one run ---------------------------------------------------------------------------

    def run_once(self, run_id: str | None = None) -> RunReport:
        """One run: waves until balanced, stuck, out of waves, or stopped.

        A run that may evict takes the Lease first; when another rebalancer holds it, the run
        ends at once (``lease-held``) without reading anything. The Lease is given back at the
        end, whatever happened.
        """
        run_id = run_id or logs.new_run_id()
        self._run_id = run_id
        logs.bind_run_id(run_id)
        window = window_state(self.policy.schedule, datetime.fromtimestamp(self._wall(), UTC))
        if not window.inside and not self.settings.plan_only:
            self._log.info(logs.OUTSIDE_WINDOW, next_opens_at=window.next_opens_at)
            return RunReport(run_id, EMPTY_PLAN, (), None, OUTSIDE_WINDOW, (), 0.0)
        self._window_closes = window.closes_at
        started = self._clock()
        self._log.info(
            logs.RUN_START,
            dry_run=self.settings.plan_only,
            server_dry_run=self.settings.executor.server_dry_run,
            max_waves=self.settings.max_waves,
        )
        lease = self._new_lease(run_id)
        try:
            if lease is not None:
                holder = lease.acquire()
                if holder is not None:
                    return self._lease_held(run_id, lease, holder, started)
                lease.start_renewing()
            self._lease = lease
            return self._run(run_id, started)
        except deadline.Stopped:  # before the first wave (the waves stop on their own)
            return self._sent_nothing(run_id, started, RunEnd.STOPPED)
        finally:
            self._lease = None
            if lease is not None:
                if deadline.stopping():
                    lease.stop_renewing()  # nothing more is sent: it expires on its own
                else:
                    lease.release()

    def _wait(self, seconds: float) -> None:
        """The default ``sleep``: a stop ends it."""
        if seconds > 0:
            self.stop.wait(seconds)

    def _sent_nothing(
        self, run_id: str, started: float, end: RunEnd, holder: Holder | None = None
    ) -> RunReport:
        """The report of a run that sent nothing: stopped before its first wave, or the Lease
        held by another rebalancer (``holder``)."""
        report = RunReport(
            run_id=run_id,
            first_plan=EMPTY_PLAN,
            waves=(),
            final_plan=None,
            end=end,
            skews=(),
            duration_seconds=self._clock() - started,
            server_dry_run=self.settings.executor.server_dry_run,
            lease_holder=holder,
        )
        self._log.info(logs.RUN_SUMMARY, **report.summary(), **self._server())
        return report

    def _new_lease(self, run_id: str) -> Lease | None:
        s = self.settings
        if s.lease is None or s.plan_only or s.executor.server_dry_run:
            return None
        return Lease(self.api, s.lease, f"{s.instance}/{run_id}", wall_clock=self._wall)

    def _lease_held(self, run_id: str, lease: Lease, holder: Holder, started: float) -> RunReport:
        self._log.warning(
            logs.LEASE_HELD,
            lease=lease.where,
            holder=holder.identity,
            since=holder.acquired,
            renewed=holder.renewed,
            expires_in_seconds=round(holder.expires_in, 1),
        )
        return self._sent_nothing(run_id, started, RunEnd.LEASE_HELD, holder)

    def _server(self) -> dict[str, Any]:
        return {} if self.server is None else {"server": dict(self.server)}

    def _stopping(self) -> bool:
        lease = self._lease
        return (
            self.stop.is_set() or deadline.stopping() or (lease is not None and lease.lost.is_set())
        )

    def _stop_end(self) -> RunEnd:
        lease = self._lease
        return RunEnd.LEASE_LOST if lease is not None and lease.lost.is_set() else RunEnd.STOPPED

    def _earlier(self, snapshot: Snapshot) -> tuple[EvictionRecord, ...]:
        """The Lease's record of earlier runs in the policy's namespaces, less the evictions
        that never happened."""
        lease = self._lease
        if lease is None or not lease.earlier:
            return ()
        alive = {p.uid for p in snapshot.pods if not p.terminating}
        scope = NamespaceScope.of(self.policy, snapshot)
        kept: list[EvictionRecord] = []
        for record in lease.earlier:
            if record.namespace not in scope:
                continue  # another policy's (or -n's) evictions: not this run's limits
            if record.uid in alive:
                lease.not_evicted(record.uid)  # its run died before sending it, or was refused
            else:
                kept.append(record)
        self._log.info(
            logs.EARLIER_EVICTIONS,
            recorded=len(lease.earlier),
            counted=len(kept),
            cooldown_seconds=lease.settings.cooldown_seconds,
        )
        return tuple(kept)

    def _run(self, run_id: str, started: float) -> RunReport:
        self._start_guards()
        snapshot = self._read()
        invalid = len(self.source.rejected)
        earlier = self._earlier(snapshot)
        self._start_capacity(snapshot)
        before = tuple(r.as_eviction() for r in earlier)
        first = self._plan_for(snapshot, before)
        loop = _Loop(snapshot, first, earlier=before)
        self._records = earlier
        self._waves(loop)
        after: Mapping[ViewKey, int] | None = None
        last = loop.waves[-1].results if loop.waves else ()
        if loop.final is not None or not any(r.outcome is Outcome.EVICTED for r in last):
            # nothing evicted since the last read: its plan has measured every view
            after = plan_skews(loop.plan)
        report = RunReport(
            run_id=run_id,
            first_plan=first,
            waves=tuple(loop.waves),
            final_plan=loop.final,
            end=loop.end,
            skews=_skews(first, after) if first.violations else (),
            duration_seconds=self._clock() - started,
            server_dry_run=self.settings.executor.server_dry_run,
            earlier_evictions=len(earlier),
            invalid_objects=invalid,
            costs=self._steer(loop.plan),
        )
        self._log.info(logs.RUN_SUMMARY, **report.summary(), **self._server())
        return report

    def _waves(self, loop: _Loop) -> None:
        """Execute wave 1 of each plan and re-plan, until there is a reason to end."""
        evicted: list[Eviction] = []
        while True:
            plan = loop.plan
            wave = tuple(e for e in plan.evictions if e.wave == 1)
            if not wave:
                loop.final = plan
                loop.end = RunEnd.NOTHING_TO_EVICT if plan.violations else RunEnd.BALANCED
                return
            if self.settings.plan_only:
                loop.end = RunEnd.DRY_RUN
                return
            if len(loop.waves) >= self.settings.max_waves:
                loop.final = plan
                loop.end = RunEnd.MAX_WAVES
                return
            if self._stopping():
                loop.end = self._stop_end()
                return
            closes = self._window_closes
            if closes is not None and datetime.fromtimestamp(self._wall(), UTC) >= closes:
                self._log.info(logs.WINDOW_CLOSED, closed_at=closes)
                loop.final = plan
                loop.end = WINDOW_CLOSED
                return
            refusals = dict(self._refused)
            results = self._execute(wave, loop.snapshot)
            loop.waves.append(Wave(len(loop.waves) + 1, plan, results))
            self._log.info(
                logs.WAVE_DONE,
                wave=len(loop.waves),
                **{str(o): sum(1 for r in results if r.outcome is o) for o in Outcome},
            )
            evicted.extend(r.eviction for r in results if r.outcome is Outcome.EVICTED)
            self._remember(results)
            if self.settings.executor.server_dry_run:
                loop.end = RunEnd.SERVER_DRY_RUN
                return
            if self._stopping():
                loop.end = self._stop_end()
                return
            # A reservation that brought no node holds its landing from now on (the back-off):
            # the next plan tries another victim or target, or says why none.
            refused = self._refused != refusals
            progress = any(r.outcome in _PROGRESS for r in results)
            if not progress and not refused:
                loop.end = RunEnd.NOTHING_EVICTED
                return
            self._await_budgets(loop.snapshot, results)
            try:
                snapshot = self._read()
                loop.plan = self._plan_for(snapshot, loop.earlier + tuple(evicted))
                loop.snapshot = snapshot  # with its plan: the two always go together
            except deadline.Stopped:
                loop.end = self._stop_end()
                return
            if progress and _spread_of(loop.plan) == _spread_of(plan):
                # The replacements landed back where they were, or swapped two domains'
                # counts: the same spread (the scheduler does not score
                # hard constraints): re-planning would evict the same way again.
                loop.final = loop.plan
                loop.end = RunEnd.NO_PROGRESS
                return

    def _steer(self, plan: Plan) -> tuple[CostResult, ...]:
        """Steered scale-downs (SPEC §7), in addition to the evictions: write the deletion
        costs the latest plan calls for (or remove ours when the option is off). Never in a
        dry run, nor once the run is stopping or has lost its Lease."""
        s = self.settings
        if s.plan_only or s.executor.server_dry_run or self._stopping():
            return ()
        if plan.steering is None:
            return ()
        steering = name_writers(self.api.get_pod, plan.steering)
        return write_costs(self.api.patch_pod_cost, steering)

    def _await_budgets(self, snapshot: Snapshot, results: Sequence[EvictionResult]) -> None:
        """Wait until every PDB the wave spent allows again what it allowed before the wave,
        or has every pod it expects healthy (a workload scaled down since the read: its budget
        is smaller for good, and waiting for the old one would hold the run to the bound).

        The executor has already waited for the replacements to be Ready; the disruption
        controller then writes the PDB's status a moment later. Bounded by
        ``pdb_settle_seconds``: a budget that does not come back (another pod became
        unhealthy) only makes the next plan skip those pods.
        """
        spent = {
            (r.eviction.namespace, r.eviction.pdb)
            for r in results
            if r.outcome is Outcome.EVICTED and r.eviction.pdb
        }
        if not spent or self.settings.pdb_settle_seconds <= 0:
            return
        wanted = {(p.namespace, p.name): budget(p) for p in snapshot.pdbs}
        waiting = {key: wanted[key] for key in sorted(spent) if key in wanted}
        deadline = self._clock() + self.settings.pdb_settle_seconds
        while waiting:
            for key, allowed in list(waiting.items()):
                if _budget_back(self.api.get_pdb, *key, allowed):
                    del waiting[key]
            now = self._clock()
            if not waiting or now >= deadline or self.stop.is_set():
                break
            self._sleep(min(PDB_POLL_SECONDS, deadline - now))
        for namespace, name in waiting:
            self._log.warning(
                logs.PDB_NOT_RESTORED, pdb=f"{namespace}/{name}", allowed=wanted[(namespace, name)]
            )

    def _read(self) -> Snapshot:
        """Read the cluster; a stop drops the read at once (:class:`.deadline.Stopped`)."""
        started = self._clock()
        with deadline.interruptible():
            snapshot = self.source.read()
        self._log.info(
            logs.READ,
            nodes=len(snapshot.nodes),
            pods=len(snapshot.pods),
            seconds=round(self._clock() - started, 3),
        )
        return snapshot

    def _plan_for(self, snapshot: Snapshot, evicted_before: Sequence[Eviction]) -> Plan:
        """Plan ``snapshot`` with the loop's memory; every hold is the planner's (SPEC §3.12).
        The memory then learns which workloads' repairs needed a new node."""
        now = self._wall()
        self._note_drains(snapshot, now)
        memory = self._memory()
        with deadline.interruptible(), gc_paused():  # a stop drops the plan under way
            plan = self._plan(
                snapshot,
                self.policy,
                now,
                evicted_before=tuple(evicted_before),
                rules=self.settings.holds,
                memory=memory,
            )
        self._launch_since = remembered_launches(memory, plan.launch_wanted, now)
        self._log.info(
            logs.PLANNED,
            evictions=len(plan.evictions),
            first_wave=sum(1 for e in plan.evictions if e.wave == 1),
            violations=len(plan.violations),
            evicted_before=len(evicted_before),
            held_by=_held_by(plan),
        )
        return plan

    # -- the loop's memory (SPEC §3.12): kept here, read by the planner ------------------------

    def _memory(self) -> LoopMemory:
        return LoopMemory(
            cooling=dict(self._cooling),
            guarded={**self._drain_guard, **self._guard},
            launch_since=dict(self._launch_since),
            refused=dict(self._refused),
        )

    # -- capacity reserved before the eviction (SPEC §5.10) ----------------------------------

    def _start_capacity(self, snapshot: Snapshot) -> None:
        """Read the Lease's record of reservations: the refusals still within the back-off
        join the memory, and what earlier runs left (the record's, and, where this run may
        reserve, any labelled rebalancer's of another run) is removed before planning."""
        lease = self._lease
        rules = self.settings.capacity
        record = parse(lease.annotations) if lease is not None else CapacityRecord()
        where = self.settings.lease
        if lease is None and where is not None and rules.reserve:  # a dry run reads it (GET)
            record.refused = recorded_refusals(self.api, where.namespace, where.name)
        self._ledger = Ledger(lease, record)
        now = self._wall()
        kept = self._ledger.prune(now, rules.backoff_seconds)
        self._refused = {
            k: r
            for k, r in {**self._refused, **kept}.items()
            if now - r.since < rules.backoff_seconds
        }
        if lease is None or not (rules.reserve or self._ledger.earlier):
            return
        scope = NamespaceScope.of(self.policy, snapshot)
        include = self.policy.namespaces_include
        remove_orphans(
            self.api,  # type: ignore[arg-type]  # Kube serves both protocols
            self._ledger,
            self._run_id,
            namespace=include[0] if len(include) == 1 else None,
            in_scope=lambda ns: scope.why_not(ns) is None,
            listing=rules.reserve,
        )

    def _refusal(self, key: str, refused: Refused) -> None:
        """A reservation brought no node: remembered here and in the Lease's record."""
        self._refused[key] = refused
        self._ledger.refused(key, refused)

    def _reservations(self, wave: Sequence[Eviction]) -> Reservations | None:
        """The reservations of a wave with evictions the plan reserves capacity for."""
        if not any(e.capacity == RESERVE for e in wave):
            return None
        s = self.settings.executor
        reservations = Reservations(
            self.api,  # type: ignore[arg-type]  # Kube serves both protocols
            self._ledger,
            self._run_id,
            wall_clock=self._wall,
            remember=self._refusal,
            dry_run=s.server_dry_run,
        )
        waiting = Waiting(
            self._clock() + s.wave_timeout_seconds,
            s.wave_timeout_seconds,
            self._clock,
            self._sleep,
            self._stopping,
            lambda: poll_waits(s),
        )
        reservations.open(wave, waiting)
        return reservations

    def _start_guards(self) -> None:
        """Forget what has expired; the workloads whose replacements landed within the
        cooldown before this run are held for the whole run (its own waves go on)."""
        now = self._wall()
        cooldown = self.settings.workload_cooldown_seconds
        self._landed = {w: t for w, t in self._landed.items() if now - t < cooldown}
        self._cooling = dict(self._landed)
        limit = self.settings.thrash_guard_seconds
        self._guard = {p: g for p, g in self._guard.items() if now - g.since < limit}

    def _remember(self, results: Sequence[EvictionResult]) -> None:
        """Each landed replacement: its workload's cooldown starts, and it is guarded."""
        now = self._wall()
        for r in results:
            if r.outcome is not Outcome.EVICTED or not r.replacement:
                continue
            e = r.eviction
            if self.settings.workload_cooldown_seconds > 0:
                self._landed[e.workload_key] = now
            if self.settings.thrash_guard_seconds > 0:
                self._guard[r.replacement] = Guard(now, f"replaced {e.key}, for {e.topology_key}")

    def _note_drains(self, snapshot: Snapshot, now: float) -> None:
        """Guard the replacements of the pods a node's drain took, one for one
        (:class:`rebalancer.core.karpenter.drains.DrainLedger`). Off with the thrash guard."""
        limit = self.settings.thrash_guard_seconds
        if limit <= 0:
            return
        replacements, fresh = self._drains.update(snapshot, now, mine=self._guard.keys())
        for owner, node in fresh.items():
            self._log.info(logs.DRAIN_SEEN, controller=owner, node=node)
        for key, node in replacements.items():
            self._drain_guard.setdefault(
                key, Guard(now, f"replaced a pod the drain of node {node} moved")
            )
        if self._drain_guard:
            present = {p.key for p in snapshot.pods}
            self._drain_guard = {
                k: g for k, g in self._drain_guard.items() if k in present and now - g.since < limit
            }

    def _execute(self, wave: Sequence[Eviction], snapshot: Snapshot) -> tuple[EvictionResult, ...]:
        labels = {p.uid: p.labels for p in snapshot.pods}
        selectors = {
            (c.kind, c.namespace, c.name): _api_selector(c.selector) for c in snapshot.controllers
        }
        reservations = self._reservations(wave)

        def on_result(result: EvictionResult) -> None:
            if reservations is not None:
                reservations.settled(result)
            self._on_result(result)

        executor = Executor(
            self.api,
            self.settings.executor,
            clock=self._clock,
            sleep=self._sleep,
            should_stop=self._stopping,
            on_result=on_result,
            expected_labels=labels,
            owner_selectors=selectors,
            before_evict=self._record if self._lease is not None else None,
            earlier=self._records,
            gate=reservations.gate if reservations is not None else None,
            on_replaced=reservations.settled if reservations is not None else None,
        )
        try:
            return executor.execute_wave(wave)
        finally:
            if reservations is not None:
                reservations.close()

    def _record(self, intent: EvictionIntent) -> None:
        """Write the eviction into the Lease before it is sent (raises when that fails)."""
        lease = self._lease
        if lease is None:
            return
        e = intent.eviction
        lease.record(
            EvictionRecord(
                namespace=e.namespace,
                name=e.name,
                uid=e.uid,
                node=e.node,
                workload=e.workload,
                owner_kind=intent.owner_kind,
                owner_name=intent.owner_name,
                owner_uid=intent.owner_uid,
                ready_before=intent.ready_before,
                at=self._wall(),
                run=self._run_id,
            )
        )

    def _on_result(self, result: EvictionResult) -> None:
        lease = self._lease
        if lease is not None and result.outcome is not Outcome.EVICTED:
            lease.not_evicted(result.eviction.uid)
        if self.settings.executor.server_dry_run or deadline.stopping():
            return  # stopping: nothing more is sent, Events included
        now = datetime.fromtimestamp(self._wall(), UTC)
        body = event_body(result, now=now, instance=self.settings.instance)
        if body is None:
            return
        try:
            self.api.create_event(result.eviction.namespace, body)
        except errors.ClusterError as exc:  # events are best effort
            self._log.warning(logs.EVENT_FAILED, pod=result.eviction.key, error=str(exc))

    # -- interval mode ---------------------------------------------------------------------

    def run_forever(
        self,
        interval_seconds: float,
        on_report: Callable[[RunReport], None] | None = None,
        on_error: Callable[[RebalancerError], None] | None = None,
        *,
        react_after: float = 0.0,
    ) -> int:
        """Start a run every ``interval_seconds`` until stopped; errors of one run are logged,
        not fatal. The interval runs from start to start, as the descheduler's
        ``--descheduling-interval`` and a CronJob's schedule do: a run that took part of it
        (waves waiting for replacements) leaves the rest as the sleep, and one that took longer
        is followed by the next at once.

        With ``react_after`` > 0 (and a source that watches, :meth:`Source.last_placement`): a pod
        bound, deleted or terminating since the run started brings the next run forward, to
        ``react_after`` after the last such change (so that a scale-down in progress is seen
        whole), but no sooner than ``react_after`` or a tenth of the interval after the run
        started, whichever is longer (the interval bounds what reacting costs).

        Returns 0 after a clean stop.
        """
        while not self._stopping():
            started = self._clock()
            try:
                report = self.run_once()
            except RebalancerError as exc:
                self._log.error(logs.RUN_ERROR, error=str(exc), exit_code=exc.exit_code)
                if on_error is not None:
                    on_error(exc)
            else:
                if on_report is not None and report.end != OUTSIDE_WINDOW:
                    on_report(report)
            if self._stopping():
                break
            pause = max(0.0, interval_seconds - (self._clock() - started))
            self._log.info(logs.SLEEP, seconds=round(pause, 3), interval_seconds=interval_seconds)
            if self._pause(started, interval_seconds, react_after):
                break
        return EXIT_OK

    def _pause(self, started: float, interval: float, react_after: float) -> bool:
        """Sleep until the next run is due; True when stopped meanwhile."""
        deadline = started + interval
        if react_after <= 0:
            return self.stop.wait(max(0.0, deadline - self._clock()))
        earliest = started + max(react_after, interval / 10)
        while True:
            now = self._clock()
            if now >= deadline:
                return False
            last = self.source.last_placement()
            wake = deadline
            if last is not None and last >= started:
                wake = min(deadline, max(last + react_after, earliest))
                if now >= wake:
                    self._log.info(logs.WOKEN, since_last_change_seconds=round(now - last, 3))
                    return False
            if self.stop.wait(max(0.0, min(wake, now + REACT_POLL_SECONDS) - now)):
                return True


def _budget_back(
    get: Callable[[str, str], Mapping[str, Any] | None], ns: str, name: str, allowed: int
) -> bool:
    """Whether the PDB, as the API server has it now, gave back what the wave spent: it allows
    ``allowed`` again, or its status (current with its generation) has every pod it expects
    healthy and none disrupted. A PDB that is gone no longer limits anything, nor does one
    RBAC will not let us read (no point waiting; the next plan reads it); one that cannot be
    read now has not (the wait is bounded)."""
    try:
        obj = get(ns, name)
        if obj is None:
            return True
        if budget(pdb_from_api(obj)) >= allowed:
            return True
    except errors.Forbidden:
        return True
    except RebalancerError:
        return False
    return _fully_healthy(obj)


def _fully_healthy(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    status = obj.get("status")
    if not isinstance(meta, Mapping) or not isinstance(status, Mapping):
        return False
    expected = status.get("expectedPods")
    healthy = status.get("currentHealthy")
    if not isinstance(expected, int) or not isinstance(healthy, int) or expected <= 0:
        return False
    return (
        int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
        and healthy >= expected
        and not status.get("disruptedPods")
    )


def _held_by(plan: Plan) -> dict[str, int]:
    """Pods per reason (skip code) that hold the plan's views above maxSkew (its
    ``unrepaired``, as the planner left them): what a log reader needs when a run with
    violations evicts nothing. The run-time holds log each eviction they take out
    (``guard.held``)."""
    found: dict[str, int] = {}
    for u in plan.unrepaired:
        for h in u.reasons:
            found[h.code.value] = found.get(h.code.value, 0) + h.pods
    return found


def _spread_of(plan: Plan) -> tuple[tuple[str, str, str, tuple[int, ...]], ...]:
    """The violated views' domain counts, as a multiset (the same counts in other domains are
    no progress: an unhelpful scheduler may swap two domains' counts wave after wave), without
    the names of the pods that declare them."""
    return tuple(
        (v.namespace, v.topology_key, v.selector, tuple(sorted(n for _, n in v.domains)))
        for v in plan.violations
    )
