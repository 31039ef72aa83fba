"""Workloads with pods not placed yet (pure): a run holds their repairs back (SPEC §3.12).

A pod that is not bound, not terminating and still in phase Pending is one the scheduler (or a
node an autoscaler is launching) has yet to place. The scheduler places it by the same filter
and scoring as any replacement (§2.4): into the domains with the fewest matching pods. While
it waits, the counts of its views are short by it, and a repair planned on those counts
evicts for a skew that its placement will mend, then finds the short domain crowded: a
repair undone, or a fight with whoever disrupted its predecessor (Karpenter's drift or
consolidation drains nodes this way). Only pods younger than the grace count: one that waits
longer may never be placed, and must not hold a repair back for good.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rebalancer.core.limits import owner_map, workload_of
from rebalancer.core.model import Snapshot
from rebalancer.core.plan import workload_key


@dataclass(frozen=True, slots=True)
class Unplaced:
    """The pods of one workload waiting to be placed: how many, and the oldest one's age."""

    count: int
    oldest_seconds: float


def unplaced(snapshot: Snapshot, now: float, grace: float) -> Mapping[str, Unplaced]:
    """Per workload (``namespace/Kind/name`` as :func:`~rebalancer.core.plan.workload_key`
    marks it), its pods not bound, not terminating, in phase Pending and created less than
    ``grace`` seconds before ``now``. Empty when ``grace`` is 0 or less."""
    if grace <= 0:
        return {}
    owners = owner_map(snapshot)
    found: dict[str, Unplaced] = {}
    for pod in snapshot.pods:
        if pod.node_name or pod.terminating or pod.phase != "Pending":
            continue
        age = max(0.0, now - pod.created)
        if age >= grace:
            continue
        key = workload_key(pod.namespace, workload_of(pod, owners), pod.name)
        seen = found.get(key)
        found[key] = (
            Unplaced(1, age)
            if seen is None
            else Unplaced(seen.count + 1, max(seen.oldest_seconds, age))
        )
    return found
