"""What a run holds back, decided before the search (pure): SPEC §3.12.

A hold is a rule the planner goes around, never a cut of its result. Two kinds:

* **Victim holds** name pods the search may not evict in this plan: the workload cooldown and
  the thrash guard (from the loop's :class:`LoopMemory`) and the workloads with pods not placed
  yet (from the snapshot and the clock alone). They join the rules of evictability: the search
  takes another pod where one repairs the view as well, and the lower bound counts held pods
  as floors, so "proven minimal" means minimal among the plans that respect the holds.
* **Landing holds** name replacements the search may not send somewhere: onto a node that has
  drifted from its NodePool (Karpenter replaces it: SPEC §5.9), or onto a node a NodePool has
  yet to add while the workload's need for one is younger than ``--wait-for-nodes-after``
  (SPEC §5.10). The simulation makes the move, and the search drops it and tries the next
  victim, as it drops a move whose replacement would stay Pending.

What no other pod can do is left unrepaired, with the hold as its reason (``cooldown``,
``thrash-guard``, ``pods-unplaced``, ``node-drifting``, ``launch-deferred``).

``plan`` and a one-shot ``run`` have no memory: the holds they apply are those the snapshot
and the clock decide (pods not placed yet, drifted landings). A loop keeps its memory and
passes it in with every plan; it decides nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from rebalancer.core.capacity import CAPACITY_NOT_ADDED, CapacityRules, Refused
from rebalancer.core.limits import owner_map, workload_of
from rebalancer.core.model import Snapshot
from rebalancer.core.pending import unplaced
from rebalancer.core.plan import SkipCode, SkipReason, workload_key

COOLDOWN: Final = SkipCode.COOLDOWN
THRASH_GUARD: Final = SkipCode.THRASH_GUARD
UNPLACED: Final = SkipCode.UNPLACED
NODE_DRIFTING: Final = SkipCode.NODE_DRIFTING
LAUNCH_DEFERRED: Final = SkipCode.LAUNCH_DEFERRED

THRASH_GUARD_SECONDS: Final = 3600.0
"""How long a replacement a runner saw land is not evicted again, for any view (the default)."""

LANDING_HOLDS: Final = frozenset({NODE_DRIFTING, LAUNCH_DEFERRED, CAPACITY_NOT_ADDED})
"""The skip codes of landing holds: the planner records them as it records ``no-fit``."""


@dataclass(frozen=True, slots=True)
class HoldRules:
    """Which holds apply, and their lengths in seconds (0: off). The defaults hold nothing:
    the planning core alone plans the snapshot as it is; ``plan`` and ``run`` pass their
    flags (:func:`rebalancer.cli.common.hold_rules`)."""

    unplaced_grace_seconds: float = 0.0
    """Pods not bound, Pending, younger than this hold their workload (``pods-unplaced``)."""
    drifting: bool = False
    """A replacement may not land in a domain with a node that has drifted (``node-drifting``)."""
    workload_cooldown_seconds: float = 0.0
    """A workload whose replacements landed this recently is not repaired (``cooldown``)."""
    thrash_guard_seconds: float = 0.0
    """A replacement seen land this recently is not evicted again (``thrash-guard``)."""
    wait_for_nodes_after_seconds: float = 0.0
    """A replacement waits for a new node only once its workload needed one this long
    (``launch-deferred``)."""
    capacity: CapacityRules = field(default_factory=CapacityRules)
    """Whether a replacement that waits for a new node is reserved first, and the back-off
    after a reservation that brought no node (``capacity-not-added``; :mod:`.capacity`)."""

    def names(self, memory: LoopMemory | None) -> tuple[str, ...]:
        """The holds in force, as skip codes: those the snapshot decides always, those of the
        loop's memory only when there is one (of a memory read from the Lease holder's record
        alone, as a live ``plan`` has it, only the reservations' back-off)."""
        found = []
        if self.unplaced_grace_seconds > 0:
            found.append(UNPLACED.value)
        if self.drifting:
            found.append(NODE_DRIFTING.value)
        if memory is not None:
            if memory.from_record:
                if self.capacity.reserve and self.capacity.backoff_seconds > 0:
                    found.append(CAPACITY_NOT_ADDED.value)
                return tuple(found)
            if self.workload_cooldown_seconds > 0:
                found.append(COOLDOWN.value)
            if self.thrash_guard_seconds > 0:
                found.append(THRASH_GUARD.value)
            if self.wait_for_nodes_after_seconds > 0:
                found.append(LAUNCH_DEFERRED.value)
            if self.capacity.reserve and self.capacity.backoff_seconds > 0:
                found.append(CAPACITY_NOT_ADDED.value)
        return tuple(found)

    def memory_only(self) -> tuple[str, ...]:
        """The holds a loop's memory would add to these (what ``plan`` says it cannot apply)."""
        return tuple(n for n in self.names(LoopMemory()) if n not in self.names(None))


@dataclass(frozen=True, slots=True)
class Guard:
    """A replacement the thrash guard holds: since when, and why (for people)."""

    since: float
    why: str  # "replaced ns/web-1 for zone" or "replaced a pod the drain of node n-c moved"


@dataclass(frozen=True, slots=True)
class LoopMemory:
    """What a loop remembers between plans; the runner keeps it from what happened (reads,
    results), the planner reads it. Keys are workloads as
    :func:`~rebalancer.core.plan.workload_key` marks them and pods as ``namespace/name``."""

    cooling: Mapping[str, float] = field(default_factory=dict)
    """workload -> when its last replacement landed (the workloads cooling during this run)."""
    guarded: Mapping[str, Guard] = field(default_factory=dict)
    """replacement pod -> its guard (rebalancer's own replacements and a drain's)."""
    launch_since: Mapping[str, float] = field(default_factory=dict)
    """workload -> when a plan of this loop first needed a new node for it."""
    refused: Mapping[str, Refused] = field(default_factory=dict)
    """:func:`~rebalancer.core.capacity.refusal_key` -> a reservation that brought no node
    (this loop's, and those the Lease holder's record keeps for later runs)."""
    from_record: bool = False
    """Only what the Lease holder's record keeps (``refused``), as a live ``plan`` reads it:
    no loop's memory, so its other holds are not in force."""


def victim_holds(
    snapshot: Snapshot, rules: HoldRules, memory: LoopMemory | None, now: float
) -> dict[str, SkipReason]:
    """Pod key -> why the search may not evict it in this plan: cooldown first, then the thrash
    guard, then pods of its workload not placed yet."""
    memory = memory or LoopMemory()
    cooldown = rules.workload_cooldown_seconds
    cooling = {w: t for w, t in memory.cooling.items() if cooldown > 0 and now - t < cooldown}
    limit = rules.thrash_guard_seconds
    guarded = {p: g for p, g in memory.guarded.items() if limit > 0 and now - g.since < limit}
    waiting = unplaced(snapshot, now, rules.unplaced_grace_seconds)
    if not (cooling or guarded or waiting):
        return {}
    owners = owner_map(snapshot)
    held: dict[str, SkipReason] = {}
    for pod in snapshot.pods:
        workload = workload_of(pod, owners)
        marked = workload_key(pod.namespace, workload, pod.name)
        landed = cooling.get(marked)
        if landed is not None:
            name = workload_key(pod.namespace, workload, pod.name, marked=False)
            held[pod.key] = SkipReason(
                COOLDOWN,
                f"{name}: replacements landed {now - landed:.0f}s ago, "
                f"{cooldown - (now - landed):.0f}s of cooldown left",
            )
            continue
        guard = guarded.get(pod.key)
        if guard is not None:
            held[pod.key] = SkipReason(THRASH_GUARD, f"{guard.why}, {now - guard.since:.0f}s ago")
            continue
        found = waiting.get(marked)
        if found is not None:
            pods = "1 pod" if found.count == 1 else f"{found.count} pods"
            held[pod.key] = SkipReason(
                UNPLACED,
                f"{pods} of {marked} not placed yet (the oldest {found.oldest_seconds:.0f}s): "
                "the scheduler places them first",
            )
    return held


def launch_deferral(
    rules: HoldRules, memory: LoopMemory | None, now: float, workload: str, waits_for: str
) -> SkipReason | None:
    """Why a replacement of ``workload`` may not wait for ``waits_for`` (a node a NodePool
    adds) yet, or None. The need's age counts from the first plan of the loop that had it."""
    after = rules.wait_for_nodes_after_seconds
    if after <= 0 or memory is None or memory.from_record:
        return None
    age = now - memory.launch_since.get(workload, now)
    if age >= after:
        return None
    return SkipReason(
        LAUNCH_DEFERRED,
        f"its replacement waits for {waits_for}; a repair needing a new node was first "
        f"planned {age:.0f}s ago, made after {after:.0f}s",
    )


def remembered_launches(
    memory: LoopMemory, wanted: tuple[str, ...], now: float
) -> dict[str, float]:
    """The loop's ``launch_since`` after a plan that needed new nodes for ``wanted``: kept for
    those, started now for the new ones, forgotten for the others."""
    return {w: memory.launch_since.get(w, now) for w in wanted}
