"""Capacity before the eviction (pure): which way a replacement that waits for a new node goes,
and the back-off after a reservation that brought no node (SPEC §5.10).

A planned replacement that fits no existing node, where a NodePool can add one, *waits for a
node*. It goes one of two ways, decided here and shown in the plan (:attr:`Eviction.capacity`):

* ``reserve``: the run first asks for the capacity in the target domain (a CapacityBuffer
  pinned to the pool and the zone, :attr:`Eviction.reserve_in`), waits for a Ready node there,
  then evicts; no node in time, no eviction.
* ``await``: the pod is evicted and its replacement waits, Pending, for the node the pool adds
  (where no buffer API is served or allowed, or the policy says ``reserveCapacity: never``).

A reservation that brought no node is remembered (the loop's :class:`~rebalancer.core.holds.
LoopMemory`, and for later runs the Lease holder's record) and holds the workload's landings in
that pool and zone for the back-off: a landing hold (``capacity-not-added``), so the planner
tries another victim or target, and what none can repair stays unrepaired with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from rebalancer.core.karpenter.marks import NODEPOOL_LABEL
from rebalancer.core.model import ZONE_KEY
from rebalancer.core.plan import SkipCode, SkipReason

RESERVE: Final = "reserve"
AWAIT: Final = "await"
CAPACITY_WAYS: Final = (RESERVE, AWAIT)

CAPACITY_NOT_ADDED: Final = SkipCode.CAPACITY_NOT_ADDED

DEFAULT_BACKOFF_SECONDS: Final = 600.0
"""How long a workload's landings wait after a reservation in a pool and zone brought no node."""

Pin = tuple[tuple[str, str], ...]
"""Node labels a reservation is pinned to, sorted: the pool's and the zone's."""


@dataclass(frozen=True, slots=True)
class CapacityRules:
    """Whether waiting replacements are reserved first, and why (for people). The shell
    decides ``reserve`` from the policy's ``reserveCapacity`` and whether the server serves the
    buffer API and RBAC allows it; the planner only reads it."""

    reserve: bool = False
    why: str = "no CapacityBuffer API known"
    backoff_seconds: float = DEFAULT_BACKOFF_SECONDS

    @property
    def way(self) -> str:
        return RESERVE if self.reserve else AWAIT


@dataclass(frozen=True, slots=True)
class Refused:
    """A reservation that brought no node: since when, and why (for people)."""

    since: float
    why: str  # "NodePool pb added no node within 10m: over its cpu limit"


def pin_of(pool: str, zone: str | None) -> Pin:
    """The labels a reservation for a node of ``pool`` in ``zone`` (None: anywhere) pins."""
    labels = {NODEPOOL_LABEL: pool}
    if zone is not None:
        labels[ZONE_KEY] = zone
    return tuple(sorted(labels.items()))


def refusal_key(workload: str, pin: Pin) -> str:
    """The key a refused reservation is remembered under: the workload (as
    :func:`~rebalancer.core.plan.workload_key` marks it) and the pinned labels."""
    return workload + "|" + ",".join(f"{k}={v}" for k, v in pin)


def backoff(
    rules: CapacityRules,
    refused: Mapping[str, Refused],
    now: float,
    workload: str,
    pin: Pin,
) -> SkipReason | None:
    """Why ``workload``'s replacement may not wait for a node pinned to ``pin`` now: a
    reservation there brought no node less than the back-off ago. None otherwise, and always
    when replacements are not reserved (evicted and awaited, nothing was asked for)."""
    if not rules.reserve or not refused:
        return None
    found = refused.get(refusal_key(workload, pin))
    if found is None or now - found.since >= rules.backoff_seconds:
        return None
    left = rules.backoff_seconds - (now - found.since)
    return SkipReason(
        CAPACITY_NOT_ADDED,
        f"{found.why} ({now - found.since:.0f}s ago; tried again in {left:.0f}s)",
    )
