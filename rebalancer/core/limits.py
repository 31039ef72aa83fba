"""The policy's eviction limits, counted over a run (pure).

``limits.total``, ``perNode``, ``perNamespace`` and ``perWorkload`` bound the evictions of a
run together with those of earlier runs within ``run --cooldown`` (the Lease's record):
:class:`RunLimits` starts from those and the run's own earlier waves (``evicted_before``) and
counts each one a plan adds. Invariant: each counter is the number of those evictions on its
node, in its namespace, of its workload (``(namespace, Kind/name)``; the pods of a namespace
with no controller count as one workload); a plan never takes an eviction
:meth:`~RunLimits.allows` refuses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rebalancer.core.model import Pod, Snapshot
from rebalancer.core.plan import Eviction, SkipCode, SkipReason
from rebalancer.core.policy import Policy


def owner_map(snapshot: Snapshot) -> dict[tuple[str, str, str], str]:
    """(kind, namespace, name) of each controller that has an owner -> ``Kind/name`` of that
    owner (a ReplicaSet's Deployment), for :func:`workload_of`."""
    return {
        (c.kind, c.namespace, c.name): f"{c.owner.kind}/{c.owner.name}"
        for c in snapshot.controllers
        if c.owner is not None
    }


def workload_of(pod: Pod, owners: dict[tuple[str, str, str], str]) -> str:
    """``Kind/name`` of the pod's workload; a ReplicaSet is lifted to its Deployment."""
    if pod.owner is None:
        return ""
    lifted = owners.get((pod.owner.kind, pod.namespace, pod.owner.name))
    return lifted or f"{pod.owner.kind}/{pod.owner.name}"


class RunLimits:
    """The policy's limits, counting evictions already made earlier in the run."""

    def __init__(self, policy: Policy, before: Sequence[Eviction]) -> None:
        self.limits = policy.limits
        self.total = len(before)
        self.node: Counter[str] = Counter(e.node for e in before)
        self.namespace: Counter[str] = Counter(e.namespace for e in before)
        self.workload: Counter[tuple[str, str]] = Counter((e.namespace, e.workload) for e in before)

    def allows(self, node: str, namespace: str, workload: str) -> SkipReason | None:
        """None when the limits allow one more eviction; else the limit reached (``limit``)."""
        lim = self.limits
        if lim.total is not None and self.total >= lim.total:
            return SkipReason(SkipCode.LIMIT, f"limits.total ({lim.total}) reached")
        if lim.per_node is not None and self.node[node] >= lim.per_node:
            return SkipReason(SkipCode.LIMIT, f"limits.perNode ({lim.per_node}) reached on {node}")
        if lim.per_namespace is not None and self.namespace[namespace] >= lim.per_namespace:
            detail = f"limits.perNamespace ({lim.per_namespace}) reached in {namespace}"
            return SkipReason(SkipCode.LIMIT, detail)
        if lim.per_workload is not None and self.workload[namespace, workload] >= lim.per_workload:
            detail = f"limits.perWorkload ({lim.per_workload}) reached for {workload}"
            return SkipReason(SkipCode.LIMIT, detail)
        return None

    def spend(self, node: str, namespace: str, workload: str) -> None:
        """Count one more eviction of a pod of ``workload`` in ``namespace`` on ``node``."""
        self.total += 1
        self.node[node] += 1
        self.namespace[namespace] += 1
        self.workload[namespace, workload] += 1
