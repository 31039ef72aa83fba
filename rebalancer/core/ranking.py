"""Which pods a planning pass may evict, and in what order (SPEC §3.4).

:class:`VictimRanking` answers three questions about a pod of the snapshot: may it be evicted
at all (:meth:`~VictimRanking.skip`: the rule that forbids it, or None), which
PodDisruptionBudget its eviction spends (:meth:`~VictimRanking.pdbs`), and where it stands in
the victim order for a view (:meth:`~VictimRanking.key`, a
:class:`~rebalancer.core.victims.VictimKey`). The pass tells it which pods its moves take
(:meth:`~VictimRanking.take`).

Invariants:

* A pod's skip reason, PodDisruptionBudget, priority, age and identity do not change during
  the pass. Each is worked out once, the first time it is asked for, and kept.
* ``taken`` holds only pods whose skip reason is None, each once: a pod is evictable while
  it is neither skipped nor taken.
* ``pdb_left[k]`` is PodDisruptionBudget k's ``disruptionsAllowed`` less the taken pods whose
  eviction spends it. It only goes down and may go below zero: here it only orders victims
  (pods whose PDB has budget left first); the waves enforce the budget
  (:mod:`rebalancer.core.waves`).
* So a pod's key for a view changes only when its PDB's ``pdb_left`` reaches zero, or with
  ``blocked``, which the caller works out from the simulation's counts.
"""

from __future__ import annotations

from collections.abc import Mapping

from rebalancer.core.evictability import EvictionContext, skip_reason
from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.plan import SkipReason
from rebalancer.core.spread import Analysis
from rebalancer.core.victims import VictimKey

_UNKNOWN = object()  # a pod whose skip reason is not known yet


class VictimRanking:
    """Evictability and victim order of the pods of one planning pass (see the module)."""

    def __init__(
        self, analysis: Analysis, ctx: EvictionContext, held: Mapping[str, SkipReason]
    ) -> None:
        """``held``: pod key -> why a hold keeps it in place in this plan (SPEC §3.12); such a
        pod is skipped for that reason, unless a rule forbids its eviction at all."""
        self.pods = analysis.pods
        self.own_views = analysis.own_views
        self.ctx = ctx
        self.held = held
        self.pdb_left = list(ctx.budgets.allowed)
        self.taken: set[PodId] = set()
        self._skips: dict[PodId, SkipReason | None] = {}
        self._pdbs: dict[PodId, tuple[int, ...]] = {}
        # pod -> (priority, -created, namespace, name, uid): its victim key but for the view
        self._rank: dict[PodId, tuple[int, float, str, str, str]] = {}

    def skip(self, i: PodId) -> SkipReason | None:
        """The rule that forbids evicting pod i at all, or None when it may be evicted."""
        reason = self._skips.get(i, _UNKNOWN)
        if reason is _UNKNOWN:
            pod = self.pods[i]
            # a rule that forbids the eviction at all comes before a hold (SPEC §3.12)
            reason = self._skips[i] = skip_reason(pod, self.ctx) or self.held.get(pod.key)
        return reason  # type: ignore[return-value]  # _UNKNOWN was replaced

    def evictable(self, i: PodId) -> bool:
        """Whether pod i may still be evicted: no rule forbids it and no move took it."""
        return i not in self.taken and self.skip(i) is None

    def pdbs(self, i: PodId) -> tuple[int, ...]:
        """The PodDisruptionBudget (index; none or one) whose budget evicting pod i spends."""
        found = self._pdbs.get(i)
        if found is None:
            found = self._pdbs[i] = self.ctx.budgets.judge(self.pods[i])[1]
        return found

    def key(self, i: PodId, v: ViewId, blocked: bool) -> VictimKey:
        """Pod i's place in the victim order for view v (SPEC §3.4): pods that cannot return
        first, then the lowest priority, no prefer-no-eviction annotation, a PodDisruptionBudget
        allowing a disruption, the youngest, and the pod's own identity. ``blocked``: whether
        view v, as a hard constraint, keeps a replacement out of the pod's domain (it applies
        when v is one of the pod's own views)."""
        rank = self._rank.get(i)
        if rank is None:
            pod = self.pods[i]
            rank = (self.ctx.priority(pod), -pod.created, pod.namespace, pod.name, pod.uid)
            self._rank[i] = rank
        priority, age, namespace, name, uid = rank
        pdbs = self.pdbs(i)  # none or one
        return VictimKey(
            not (blocked and v in self.own_views.get(i, ())),  # can_return
            priority,
            self.pods[i].prefer_no_eviction,
            bool(pdbs) and self.pdb_left[pdbs[0]] <= 0,  # pdb_blocked
            age,
            namespace,
            name,
            uid,
        )

    def take(self, i: PodId) -> None:
        """A move evicts pod i (it must be evictable): it leaves the candidates and spends its
        PodDisruptionBudget."""
        self.taken.add(i)
        for k in self.pdbs(i):
            self.pdb_left[k] -= 1
