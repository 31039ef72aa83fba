"""PodDisruptionBudgets as the Eviction API applies them, and what a plan may spend (pure).

kube-apiserver's eviction subresource (``pkg/registry/core/pod/storage/eviction.go``) decides,
for a pod it is asked to evict:

1. A pod whose phase is Pending, Succeeded or Failed, or that is terminating, is evicted
   without looking at any PodDisruptionBudget.
2. A pod selected by more than one PDB is refused (HTTP 500): ``multiple-pdbs`` here.
3. A pod selected by none is evicted.
4. A pod that is not Ready is evicted without spending the budget when its PDB says
   ``unhealthyPodEvictionPolicy: AlwaysAllow``, or, under ``IfHealthyBudget`` (the default),
   while ``currentHealthy >= desiredHealthy > 0`` (the workload is at its desired health).
5. Otherwise the eviction spends one of ``status.disruptionsAllowed``: refused with HTTP 429
   when the PDB's ``status.observedGeneration`` lags ``metadata.generation`` or when nothing
   is left.

So a pod in case 5 whose PDB has nothing left now is skipped (``pdb``), and the plan works
with the others. A node Karpenter is draining (``karpenter.sh/disrupted``) claims the budget
first: each Ready pod of it that is not leaving yet, under one PDB, is an eviction Karpenter
makes next (it retries a refused one until the budget comes back), so the plan counts that
PDB's budget as spent by it. Without the claim the two race for each disruption the budget
gives back, and the loser's eviction is refused (429), or the node's removal waits.

The budget is per wave (SPEC §3.10): within one wave at most ``disruptionsAllowed`` evictions spend
a PDB; once the wave's replacements are Ready the disruption controller gives the budget back
and the next wave may spend it again.

Worked example: a Deployment of 4 pods under a PDB with ``maxUnavailable: 1`` (desiredHealthy
3, currentHealthy 4, disruptionsAllowed 1) whose plan evicts 2 Ready pods: wave 1 evicts one,
wave 2 the other. A third pod that is not Ready goes in wave 1 too, budget-free (4 >= 3 > 0).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from rebalancer.core.model import ALWAYS_ALLOW, NOT_SHARED, Pod, PodDisruptionBudget
from rebalancer.core.plan import SkipCode, SkipReason
from rebalancer.core.selectors import SelectorIndex

PDB_FREE_PHASES = frozenset({"Pending", "Succeeded", "Failed"})
"""Pods in these phases are evicted without any PodDisruptionBudget check."""


def budget(pdb: PodDisruptionBudget) -> int:
    """Evictions the PDB allows in one wave: ``disruptionsAllowed``, none while its status
    lags its generation (the API server answers 429 until the controller catches up)."""
    if pdb.observed_generation < pdb.generation:
        return 0
    return max(0, pdb.disruptions_allowed)


def healthy_enough(pdb: PodDisruptionBudget) -> bool:
    """``IfHealthyBudget``: the workload is at its desired health, so a not-Ready pod may go."""
    return pdb.current_healthy >= pdb.desired_healthy > 0


class DisruptionBudgets:
    """The PDBs of one snapshot: which cover a pod, and which one its eviction spends."""

    def __init__(
        self,
        pdbs: Sequence[PodDisruptionBudget],
        pods: Iterable[Pod] = (),
        draining: Collection[str] = (),
    ) -> None:
        """``pods`` on the ``draining`` nodes claim their PDB's budget (module docstring)."""
        self.pdbs = tuple(pdbs)
        self._index = SelectorIndex((p.namespace, p.selector) for p in self.pdbs)
        self._covering: dict[tuple[str, int], list[int]] = {}
        self.claims: dict[int, tuple[int, str]] = {}  # PDB -> (pods claiming, first node)
        if draining:
            for pod in pods:
                node = pod.node_name
                if node is None or node not in draining or not self._spends(pod):
                    continue
                covering = self.covering(pod)
                if len(covering) == 1:
                    n, first = self.claims.get(covering[0], (0, node))
                    self.claims[covering[0]] = (n + 1, min(first, node))
        self.allowed = tuple(
            max(0, budget(p) - self.claims.get(k, (0, ""))[0]) for k, p in enumerate(self.pdbs)
        )

    @staticmethod
    def _spends(pod: Pod) -> bool:
        """A pod whose eviction would spend a budget: Ready, not leaving, not finished."""
        return pod.ready and not pod.leaving and pod.phase not in PDB_FREE_PHASES

    def covering(self, pod: Pod) -> list[int]:
        """Positions of the PDBs whose selector matches the pod (in its namespace)."""
        if pod.label_set == NOT_SHARED:  # built by hand: nothing to share
            return self._index.matching(pod.namespace, pod.labels)
        # Pods with equal labels share a label_set number: match once per label set.
        key = (pod.namespace, pod.label_set)
        found = self._covering.get(key)
        if found is None:
            found = self._covering[key] = self._index.matching(pod.namespace, pod.labels)
        return found

    def judge(self, pod: Pod) -> tuple[SkipReason | None, tuple[int, ...]]:
        """Why the Eviction API would refuse the pod now, or None; and the PDB (as a 0- or
        1-tuple of positions) whose budget its eviction spends."""
        if pod.phase in PDB_FREE_PHASES or pod.terminating:
            return None, ()
        covering = self.covering(pod)
        if not covering:
            return None, ()
        if len(covering) > 1:
            names = ", ".join(self.pdbs[k].name for k in covering)
            return SkipReason(
                SkipCode.MULTIPLE_PDBS,
                f"selected by several PodDisruptionBudgets ({names}); the Eviction API "
                "refuses such pods",
            ), ()
        k = covering[0]
        pdb = self.pdbs[k]
        if not pod.ready and (
            pdb.unhealthy_pod_eviction_policy == ALWAYS_ALLOW or healthy_enough(pdb)
        ):
            return None, ()
        if pdb.observed_generation < pdb.generation:
            return SkipReason(
                SkipCode.PDB,
                f"PodDisruptionBudget {pdb.name} is not yet processed (observedGeneration "
                f"{pdb.observed_generation} < generation {pdb.generation}): no budget now",
            ), ()
        if pdb.disruptions_allowed > 0 and self.allowed[k] <= 0:
            n, node = self.claims[k]
            pods = "1 Ready pod" if n == 1 else f"{n} Ready pods"
            return SkipReason(
                SkipCode.PDB,
                f"PodDisruptionBudget {pdb.name} allows {pdb.disruptions_allowed} now, claimed "
                f"by {pods} on node {node}, which Karpenter is draining: its evictions come "
                "first",
            ), ()
        if self.allowed[k] <= 0:
            return SkipReason(
                SkipCode.PDB,
                f"PodDisruptionBudget {pdb.name} allows no disruption now (disruptionsAllowed "
                f"{pdb.disruptions_allowed}; currentHealthy {pdb.current_healthy}, "
                f"desiredHealthy {pdb.desired_healthy})",
            ), ()
        return None, (k,)

    def note(self, pod: Pod) -> str:
        """What the pod's eviction does to its PDB, for the eviction's reason ("" if nothing)."""
        reason, spends = self.judge(pod)
        if reason is not None:
            return ""
        if spends:
            pdb = self.pdbs[spends[0]]
            return f"PodDisruptionBudget {pdb.name} allows {self.allowed[spends[0]]} per wave"
        covering = self.covering(pod)
        if len(covering) == 1 and not pod.ready and pod.phase not in PDB_FREE_PHASES:
            pdb = self.pdbs[covering[0]]
            rule = (
                "AlwaysAllow"
                if pdb.unhealthy_pod_eviction_policy == ALWAYS_ALLOW
                else "IfHealthyBudget, workload at its desired health"
            )
            return f"not Ready: PodDisruptionBudget {pdb.name} lets it go unspent ({rule})"
        return ""
