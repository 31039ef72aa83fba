"""What the cluster side logs: event names, the logger, the run id.

Every line of one run carries its ``run_id``. Event names are the constants below; values are
key/value fields, never formatted into the event name. Where the lines go and how they look is
set once by the command line (:mod:`rebalancer.cli.logconfig`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

RUN_START: Final = "run.start"
"""A run starts: mode, run_id."""
CONFIG: Final = "run.config"
"""The effective configuration: the policy (canonical form) and the run settings."""
PREFLIGHT: Final = "run.preflight"
"""The RBAC pre-flight checks passed."""
READ: Final = "cluster.read"
"""A read of the cluster: objects per resource, pages, seconds."""
READ_ROUTE: Final = "read.route"
"""How a read takes the cluster in (route: protobuf-stream, protobuf-pages, json-typed, json),
and why; again with the reason when a route declines, or a read starts again (410)."""
READ_ABSENT: Final = "read.absent"
"""A kind read where served (Karpenter's NodePools) is not: not served (404) or not allowed
(403); read as none, logged once per source with the resource and the reason."""
PLANNED: Final = "wave.planned"
"""A (re-)plan: evictions in all waves, in the first wave, violations, and ``held_by``: pods per
reason holding views above maxSkew."""
WAVE_DONE: Final = "wave.done"
"""A wave executed: outcomes."""
PDB_NOT_RESTORED: Final = "wave.pdb_not_restored"
"""A PodDisruptionBudget the wave spent did not allow as much again in time; re-planning."""
EVENT_FAILED: Final = "event.failed"
"""A Kubernetes Event could not be created (best effort, the run goes on)."""
RUN_SUMMARY: Final = "run.summary"
"""The one canonical line per run: planned, evicted, blocked_by_pdb, failed, skipped, skews."""
COSTS_WRITTEN: Final = "steer.costs"
"""Steered scale-downs: the pod-deletion-cost writes of a pass, by outcome."""
COST_FAILED: Final = "steer.cost_failed"
"""One deletion-cost write was refused (403) or failed."""
COSTS_FOREIGN: Final = "steer.foreign_writer"
"""A workload's deletion costs are left alone: the managers seen owning one pod's cost."""
RUN_ERROR: Final = "run.error"
"""A run ended with an error (interval mode logs it and tries again next interval)."""
SHUTDOWN: Final = "shutdown.requested"
"""SIGTERM/SIGINT: nothing more is sent (the request in flight is abandoned); the run reports."""
SLEEP: Final = "interval.sleep"
"""Interval mode waits for the next run."""
WOKEN: Final = "interval.woken"
"""Loop mode: the watch saw pods bound, deleted or terminating; the next run comes early."""
REQUEST_SLOW: Final = "request.slow"
"""A request has waited several seconds for its answer (logged again as the wait doubles)."""
EXEC_STDERR: Final = "exec.stderr"
"""A line an exec credential plugin printed on stderr (redacted): plugin, line."""
TLS_INSECURE: Final = "tls.insecure"
"""The kubeconfig turns off the server certificate check (insecure-skip-tls-verify): server."""
LIBRARY_LOG: Final = "library.log"
"""A record a library logged through the standard ``logging`` module: logger, message."""
REQUEST_RETRY: Final = "request.retry"
"""A GET answered 429 or 5xx is sent again after a pause (bounded, honouring Retry-After)."""
LEASE_ACQUIRED: Final = "lease.acquired"
"""This run holds the Lease: it may evict."""
LEASE_HELD: Final = "lease.held"
"""Another rebalancer holds the Lease: this run evicts nothing."""
LEASE_UNTRUSTED: Final = "lease.untrusted"
"""The Lease names a holder but cannot be believed (renewTime or acquireTime ahead of this
machine's clock by more than the skew allowed, leaseDurationSeconds out of range): it is taken
over as if expired; the reason and the holder are logged."""
LEASE_RELEASED: Final = "lease.released"
"""The run ended and gave the Lease back (with its eviction record)."""
LEASE_RENEW_FAILED: Final = "lease.renew_failed"
"""A renewal failed; the run goes on while the Lease has not expired."""
LEASE_LOST: Final = "lease.lost"
"""The Lease was taken over or expired: no further eviction in this run."""
EARLIER_EVICTIONS: Final = "lease.earlier_evictions"
"""Evictions recorded by earlier runs within the cooldown: they count against the limits."""
INVALID_OBJECT: Final = "cluster.invalid_object"
"""An object rebalancer cannot convert: its namespace is left out of this run."""
METRICS: Final = "metrics.serving"
"""The Prometheus endpoint is listening."""
OUTSIDE_WINDOW: Final = "run.outside_window"
"""The policy's schedule has no window open now: the run evicts nothing; next_opens_at."""
WINDOW_CLOSED: Final = "run.window_closed"
"""The maintenance window closed during a run: no new wave starts."""
DRAIN_SEEN: Final = "drain.seen"
"""Loop mode saw a node's drain take pods of a controller (``controller``, ``node``): its new
pods within the next minute are guarded as the drain's replacements (SPEC §3.12)."""
STATE_VERIFIED: Final = "state.verified"
"""``--verify-state-every``: the watch-fed state equals the cluster. ``exact``: the resources
compared with a LIST at exactly the resourceVersion their store reflects, and that version;
``fallback``: the others, and why (410 Gone, refused), compared with a fresh LIST, retried;
``attempts``: the most looks a fallback took."""
STATE_DIFFERS: Final = "state.differs"
"""``--verify-state-every``: the watch-fed state differs (``exact``, ``fallback``, ``attempts``
as in ``state.verified``): ``differences`` names them, ``gap`` the resources that differ at an
exact version (a real gap in the watch), ``unsettled`` those that still differ after the
fallback's retries (lag or a gap)."""


def new_run_id() -> str:
    """A short random id that ties together every line of one run."""
    return uuid.uuid4().hex[:12]


def bind_run_id(run_id: str) -> None:
    """Bind ``run_id`` to every line logged from now on (until the next bind)."""
    import structlog  # noqa: PLC0415  # on use: an offline command never logs

    structlog.contextvars.unbind_contextvars("run_id")
    structlog.contextvars.bind_contextvars(run_id=run_id)


_configure: list[Callable[[], None]] = []


def configure_on_first_use(configure: Callable[[], None]) -> None:
    """Have :func:`get_logger` call ``configure`` when logging is not configured yet (the
    command line passes its own), so no line is ever written where structlog's defaults would
    write it (stdout)."""
    _configure[:] = [configure]


def get_logger(name: str = "rebalancer") -> Any:
    """A structlog logger, logging configured first if it is not yet
    (:func:`configure_on_first_use`); ``Any`` because structlog's proxy is typed loosely."""
    import structlog  # noqa: PLC0415  # on use: an offline command never logs

    if _configure and not structlog.is_configured():
        _configure[0]()
    return structlog.get_logger(name)


def log_config(policy: object, settings: Mapping[str, Any]) -> None:
    """Log the effective configuration once at start: the canonical policy and the settings."""
    from rebalancer.core.api import Policy, policy_to_dict  # noqa: PLC0415  # keep logs standalone

    shown = policy_to_dict(policy) if isinstance(policy, Policy) else repr(policy)
    get_logger().info(CONFIG, policy=shown, **dict(settings))
