"""What a planning pass found, frozen once its search ends (pure).

The search works on a wide, mutable state (the simulation, the victim ranking, the limits, the
plans made up front). When it ends, the pass hands the record (:mod:`rebalancer.core.record`)
two frozen values and nothing else:

* :class:`PassInputs`: what the pass read once and never changed (the analysis, the eviction
  context, the pods' workloads, which way a replacement waiting for a node goes);
* :class:`Outcome`: what the search found (the moves kept and their waves, the end state's
  counts of the views the record reports, the views left above maxSkew and what holds them,
  the pods a rule or the fit kept in place, the limits reached, the lower bound).

So the record writes the plan from values, and no later change of the pass's state can reach
it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rebalancer.core.evictability import EvictionContext
from rebalancer.core.ids import Domain, PodId, ViewId
from rebalancer.core.moves import Move
from rebalancer.core.plan import Hold, SkipReason
from rebalancer.core.spread import Analysis


@dataclass(frozen=True, slots=True)
class PassInputs:
    """What a planning pass read once and never changed, as its record reads it."""

    analysis: Analysis  # the snapshot's pods, nodes and views
    ctx: EvictionContext  # the policy, priorities and PodDisruptionBudgets
    owners: dict[tuple[str, str, str], str]  # a pod's owner -> its workload (limits.owner_map)
    capacity: str  # which way a replacement that waits for a new node goes (CapacityRules.way)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one planning pass found, built once when its search ends."""

    moves: tuple[Move, ...]  # the moves kept, in the order made
    waves: tuple[int, ...]  # each move's wave (rebalancer.core.waves)
    violated: tuple[ViewId, ...]  # the considered views above maxSkew before the plan
    end: Mapping[ViewId, Mapping[Domain, int]]  # counts at the end: violated views, views left
    left: tuple[tuple[ViewId, tuple[Hold, ...]], ...]  # above maxSkew at the end, worst first
    skipped: tuple[tuple[PodId, SkipReason], ...]  # pods of violated views a rule or the fit held
    notes: tuple[str, ...]  # the policy limits reached, sorted
    lower_bound: int  # no plan reaching the skews this plan reaches evicts fewer pods
