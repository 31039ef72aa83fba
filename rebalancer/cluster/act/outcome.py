"""What became of each planned eviction: plain data, shared by the executor, the runner, Events
and metrics (so none of them needs the executor's HTTP and retry machinery)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from rebalancer.core.api import Eviction, SkipReason


class Outcome(StrEnum):
    """What became of one planned eviction."""

    EVICTED = "evicted"
    WOULD_EVICT = "would-evict"  # --server-dry-run: the API server accepted it, nothing evicted
    GONE = "gone"  # the pod no longer exists (404, or gone when re-read)
    BLOCKED_BY_PDB = "blocked-by-pdb"
    CONFLICT = "conflict"  # 409: the pod changed; re-plan
    SKIPPED = "skipped"  # not sent: the plan's premise no longer holds, or stopping
    FAILED = "failed"
    WITHDRAWN = "withdrawn"  # an EvictionRequest still in progress at the wave's timeout,
    # withdrawn (deleted): its responders stop; the next run plans again


FAILURES: Final = frozenset({Outcome.FAILED})
"""Outcomes that make ``run`` exit 1. A refusal by a PodDisruptionBudget (blocked-by-pdb) is not
one: it is reported (summary, metrics, Event) and the next run tries again."""


@dataclass(frozen=True, slots=True)
class EvictionResult:
    """The outcome of one planned eviction. ``status`` is the last HTTP status, if one was sent."""

    eviction: Eviction
    outcome: Outcome
    detail: str
    status: int | None = None
    attempts: int = 0  # eviction requests sent
    replacement: str | None = None  # namespace/name of the Ready replacement, once seen
    skip: SkipReason | None = None  # why it was not sent, for SKIPPED (``detail`` says it too)
    api: str = "eviction"  # the API that sent it: "eviction" or "evictionRequest"
    reason: str = ""  # an EvictionRequest's: the responder's or condition's reason, when any


class RunEnd(StrEnum):
    """How a run ended (the ``end`` of its summary)."""

    BALANCED = "balanced"  # no violation left
    NOTHING_TO_EVICT = "nothing-to-evict"  # violations left, but no allowed eviction repairs them
    NOTHING_EVICTED = "nothing-evicted"  # a wave made no progress (all blocked, failed, skipped)
    NO_PROGRESS = "no-progress"  # re-planned, the same spread: the replacements landed back
    # where the evicted pods were, or two domains swapped their counts
    MAX_WAVES = "max-waves"  # the wave budget is spent; the next run goes on
    STOPPED = "stopped"  # SIGTERM
    SERVER_DRY_RUN = "server-dry-run"  # one wave sent with dryRun=All
    DRY_RUN = "dry-run"  # planned only
    LEASE_HELD = "lease-held"  # another rebalancer holds the Lease: nothing done
    LEASE_LOST = "lease-lost"  # the Lease was taken over or expired mid-run: evictions stopped
    OUTSIDE_WINDOW = "outside-window"  # started outside the policy's maintenance windows
    WINDOW_CLOSED = "window-closed"  # the maintenance window closed before the next wave
