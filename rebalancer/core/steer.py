"""Steered scale-downs (SPEC §7): the ``pod-deletion-cost`` each ReplicaSet pod should carry.

When a ReplicaSet has more pods than it wants, its controller ranks them (kube-controller-manager,
``ActivePodsWithRanks``) and removes the first ones. The rules, in order:

1. pods not bound to a node; 2. Pending, then Unknown, then Running; 3. not Ready;
4. lower ``controller.kubernetes.io/pod-deletion-cost`` (an int32; absent counts 0);
5. more of the workload's active pods on the same node ("doubled up");
6. Ready for a shorter time; 7. more container restarts; 8. younger (6 and 8 on a log2 scale
   of the age, then by uid).

Rules 1-3 outrank the cost: a pod that is not bound, Running and Ready goes first whatever its
cost. So only bound, Running, Ready pods are ordered here, and the others count as gone first.

The order peels one pod at a time from the domain that most exceeds its views' minimum, all the
workload's hard views together. Each step, among the pods left, first the removal that leaves
the views least above their maxSkew (each view's ``skew - maxSkew`` after it, largest first,
compared lexicographically: this matters where minDomains holds the minimum at 0 or two views
pull apart), then the pod whose excess ``count(d) - globalMin - maxSkew`` in the views that count
it, largest first, is largest; the counts then drop by one and the next pod is chosen on the new
counts. Pods that come first get lower costs, so whatever number of pods the next scale-down
removes, it takes them from the fullest domains first. tests/test_steer.py checks against brute
force that for every scale-down size k the first k pods leave every view within maxSkew
whenever some k pods can.

Example (zone maxSkew 1 and hostname maxSkew 1; nodes a1, a2 in zone A, b1, b2 in zone B;
pods a1:2 a2:2 b1:3 b2:0): b1 first (hostname excess 2), then a pod of a1 (zone A 4 vs B 2:
zone excess 1, host 1), then a2, then b1 again: the first four leave a1:1 a2:1 b1:1 b2:0 and
zones 2/1, within both maxSkews; no three pods can.

Ties (two pods equally good to remove first in every view) are broken by the controller's own
order, rules 5 and 8: more of the workload's pods on the pod's node first, then the youngest,
then the lower uid: where the spread does not care, the scale-down removes what the controller
would have removed anyway. Never by node, pod or zone names. (Rules 6 and 7 read the Ready
condition's time and restart counts, which the model does not keep.)

Costs change only where the order needs it: the costs rebalancer already wrote are kept on the
longest run of pods whose costs still increase along the order, with room in between for the
others (``_fill``); only the rest are written, the earliest positions first, at most
:data:`MAX_PER_WORKLOAD` per workload and :data:`MAX_PER_PASS` in all. A cost is rebalancer's
when the pod's ``rebalancer/deletion-cost`` mark equals it; a workload where some pod carries a
cost someone else set, or where someone else removed the cost rebalancer set (the mark is left
without its cost), is left alone: another writer (Karpenter's deletion-cost management,
OpenKruise's WorkloadSpread, a person) manages those costs, and writing over it would be a fight.
The skip names the first such pod; the cluster side looks up which managers own its cost
(:func:`rebalancer.core.karpenter.marks.field_writers` of its ``managedFields``) and names
them. With the option off, every cost of rebalancer's is removed.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rebalancer.core.constants import INT32_MAX, INT32_MIN, TERMINAL_PHASES
from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.model import Pod, Snapshot
from rebalancer.core.policy import Policy
from rebalancer.core.spread import Analysis, considered

MAX_PER_WORKLOAD: Final = 50
"""Cost writes for one workload in one pass; the rest wait for the next pass."""
MAX_PER_PASS: Final = 200
"""Cost writes in one pass, over all workloads."""
_LOW: Final = -(2**62)  # the excess of a view that does not count the pod


class SteerReason(enum.StrEnum):
    """Why a workload's costs are left as they are."""

    FOREIGN_COST = "foreign-cost"  # some pod's deletion cost was written by another writer


@dataclass(frozen=True, slots=True)
class ViewCounts:
    """One hard view as the peel sees it."""

    counts: Mapping[str, int]  # every eligible domain -> its matching pods, the workload's too
    max_skew: int
    min_domains: int = 1


@dataclass(frozen=True, slots=True)
class Member:
    """One pod to order."""

    domains: tuple[str | None, ...]  # per view: the pod's domain; None: the view does not count it
    tie: tuple[float | str, ...]  # the controller's own order: lower is removed first


def global_minimum(counts: Mapping[str, int], min_domains: int) -> int:
    """kube-scheduler's global minimum over every eligible domain (0 below minDomains)."""
    if not counts or len(counts) < min_domains:
        return 0
    return min(counts.values())


def peel(views: Sequence[ViewCounts], members: Sequence[Member]) -> list[int]:
    """The members' indices in the order a scale-down should remove them (module docstring).

    Members on the same domains in every view are interchangeable but for their tie key, so
    they are grouped and each group is taken in tie order: a pass costs groups x views, not
    pods x views.
    """
    counts = [dict(v.counts) for v in views]
    groups: dict[tuple[str | None, ...], list[int]] = defaultdict(list)
    for i, member in enumerate(members):
        groups[member.domains].append(i)
    queues = {key: sorted(found, key=lambda i: members[i].tie) for key, found in groups.items()}
    heads = dict.fromkeys(queues, 0)
    order: list[int] = []
    width = len(views)
    while len(order) < len(members):
        minimum = [global_minimum(c, v.min_domains) for c, v in zip(counts, views, strict=True)]
        extremes = [_extremes(c, v) for c, v in zip(counts, views, strict=True)]
        best: tuple[tuple[int, ...], tuple[int, ...], tuple[float | str, ...]] | None = None
        best_key: tuple[str | None, ...] | None = None
        for key, queue in queues.items():
            head = heads[key]
            if head == len(queue):
                continue
            excess = sorted(
                (
                    counts[v][d] - minimum[v] - views[v].max_skew if d is not None else _LOW
                    for v, d in enumerate(key)
                ),
                reverse=True,
            )
            rank = (
                tuple(
                    sorted(
                        (
                            e.violation_after(d, counts[v][d] if d is not None else 0)
                            for v, (e, d) in enumerate(zip(extremes, key, strict=True))
                        ),
                        reverse=True,
                    )
                ),
                tuple(-e for e in excess) + (0,) * (width - len(excess)),
                members[queue[head]].tie,
            )
            if best is None or rank < best:
                best, best_key = rank, key
        assert best_key is not None  # some member is left
        pod = queues[best_key][heads[best_key]]
        heads[best_key] += 1
        order.append(pod)
        for v, d in enumerate(best_key):
            if d is not None:
                counts[v][d] -= 1
    return order


@dataclass(frozen=True, slots=True)
class _Extremes:
    """One view's counts summed up for a step: what one pod less anywhere would do to them."""

    top: int  # the largest count (0 when no domain holds a pod)
    tops: int  # domains at ``top``
    low: int  # the global minimum
    pinned: bool  # below minDomains: the minimum is 0 whatever is removed
    max_skew: int

    def violation_after(self, domain: str | None, count: int) -> int:
        """``skew - maxSkew`` (0 if within) with one pod less in ``domain`` (holding ``count``)."""
        top, low = self.top, self.low
        if domain is not None:
            if count == top and self.tops == 1:
                top -= 1
            if count == low and not self.pinned:
                low -= 1
        skew = top - low if top > 0 else 0
        return max(0, skew - self.max_skew)


def _extremes(counts: dict[str, int], view: ViewCounts) -> _Extremes:
    top = max(counts.values(), default=0)
    tops = sum(1 for c in counts.values() if c == top)
    pinned = not counts or len(counts) < view.min_domains
    low = 0 if pinned else min(counts.values())
    return _Extremes(top, tops, low, pinned, view.max_skew)


def _fill(current: Sequence[int | None]) -> list[int]:
    """Costs strictly increasing along the order, keeping as many of ``current`` as possible.

    ``current[j]``: the cost of rebalancer's the pod at position j carries (None: none). Costs
    at kept positions a < b leave room for the pods between them when
    ``current[b] - current[a] >= b - a``, i.e. ``current[j] - j`` does not decrease: the kept
    positions are a longest non-decreasing run of ``current[j] - j``; the others take
    consecutive values after the kept cost before them (before the first kept one: counting
    down from it). With nothing kept, the costs are ``-n .. -1``: pods created since (cost 0)
    go after these.
    """
    n = len(current)
    positions = [j for j, c in enumerate(current) if c is not None]
    # Longest non-decreasing subsequence of current[j] - j, by patience sorting.
    tails: list[int] = []  # tails[k]: position ending the best run of length k + 1
    parent: dict[int, int] = {}
    for j in positions:
        value = current[j] - j  # type: ignore[operator]  # positions hold ints
        lo, hi = 0, len(tails)
        while lo < hi:
            mid = (lo + hi) // 2
            if current[tails[mid]] - tails[mid] <= value:  # type: ignore[operator]
                lo = mid + 1
            else:
                hi = mid
        if lo > 0:
            parent[j] = tails[lo - 1]
        if lo == len(tails):
            tails.append(j)
        else:
            tails[lo] = j
    kept: list[int] = []
    if tails:
        j = tails[-1]
        kept.append(j)
        while j in parent:
            j = parent[j]
            kept.append(j)
        kept.reverse()
    if not kept:
        return [j - n for j in range(n)]
    kept_at = frozenset(kept)
    first = kept[0]
    base = current[first]
    assert base is not None  # kept positions hold costs
    out = [base - (first - j) for j in range(first + 1)]
    for j in range(first + 1, n):
        have = current[j]
        out.append(have if j in kept_at and have is not None else out[-1] + 1)
    if out[0] < INT32_MIN or out[-1] > INT32_MAX:
        return [j - n for j in range(n)]
    return out


@dataclass(frozen=True, slots=True)
class CostChange:
    """One pod's deletion cost to write (``cost``) or to remove (``cost`` None)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    workload: str  # "namespace/replicaset"
    position: int  # in the workload's order (0 is removed first); -1 for a removal
    old: str | None  # the cost the pod carries now
    cost: int | None


@dataclass(frozen=True, slots=True)
class SteerSkip:
    workload: str
    reason: SteerReason
    pods: int
    pod: str = ""  # FOREIGN_COST: the first pod (namespace/name) whose cost is another writer's
    writers: tuple[str, ...] = ()  # the managers seen owning that pod's cost (filled live)

    def __str__(self) -> str:
        seen = f", written by {', '.join(self.writers)}" if self.writers else ""
        shown = f" ({self.pod}{seen})" if self.pod else ""
        return f"{self.reason}{shown}"


@dataclass(frozen=True, slots=True)
class Steering:
    """What steering would write in this pass, and what it leaves alone."""

    enabled: bool
    changes: tuple[CostChange, ...] = ()
    skipped: tuple[SteerSkip, ...] = ()
    deferred: int = 0  # changes held back by MAX_PER_WORKLOAD / MAX_PER_PASS
    workloads: int = 0  # workloads ordered


def ours(pod: Pod) -> bool:
    """The pod's deletion cost is the one rebalancer wrote (its mark says the same)."""
    return pod.deletion_cost is not None and pod.deletion_cost == pod.cost_mark


def foreign(pod: Pod) -> bool:
    """Another writer set the pod's deletion cost, or removed the one rebalancer set (the mark
    is left without its cost: rebalancer writes and removes both at once)."""
    if pod.deletion_cost is None:
        return pod.cost_mark is not None
    return pod.deletion_cost != pod.cost_mark


def _own_cost(pod: Pod) -> int | None:
    if not ours(pod):
        return None
    try:
        value = int(pod.deletion_cost)  # type: ignore[arg-type]  # ours(): not None
    except ValueError:
        return None
    return value if INT32_MIN <= value <= INT32_MAX else None


def _removal(pod: Pod) -> CostChange:
    return CostChange(
        pod.namespace,
        pod.name,
        pod.uid,
        pod.resource_version,
        f"{pod.namespace}/{pod.owner.name if pod.owner else ''}",
        -1,
        pod.deletion_cost,
        None,
    )


def steer(snapshot: Snapshot, policy: Policy, analysis: Analysis) -> Steering:
    """The cost writes of one pass (``analysis``: the snapshot's, under ``policy``)."""
    pods = snapshot.pods
    if not policy.steer_scale_down:
        removals = tuple(_removal(p) for p in pods if ours(p) and not _gone(p))
        return Steering(False, removals[:MAX_PER_PASS], (), max(0, len(removals) - MAX_PER_PASS))
    workloads: dict[tuple[str, str], list[PodId]] = defaultdict(list)
    for i, pod in enumerate(pods):
        owner = pod.owner
        if owner is not None and owner.kind == "ReplicaSet" and not _gone(pod) and not pod.mirror:
            workloads[(pod.namespace, owner.name)].append(PodId(i))
    related = _related(snapshot)
    on_node: dict[tuple[str, str, str], int] = defaultdict(int)
    for pod in pods:
        owner = pod.owner
        if owner is not None and owner.kind == "ReplicaSet" and pod.node_name and not _gone(pod):
            group = related.get((pod.namespace, owner.name), owner.name)
            on_node[(pod.namespace, group, pod.node_name)] += 1
    hard = [v.spec.hard and considered(v, policy, analysis.scope) for v in analysis.views]
    counted: dict[int, frozenset[int]] = {}  # view -> the pods it counts (built on first use)
    steered: set[int] = set()
    changes: list[CostChange] = []
    skipped: list[SteerSkip] = []
    deferred = 0
    count = 0
    for (namespace, rs), members in sorted(workloads.items()):
        views = sorted({v for i in members for v in analysis.own_views.get(i, ()) if hard[v]})
        if not views:
            continue
        name = f"{namespace}/{rs}"
        steered.update(members)
        first_foreign = next((pods[i] for i in members if foreign(pods[i])), None)
        if first_foreign is not None:
            skipped.append(
                SteerSkip(name, SteerReason.FOREIGN_COST, len(members), first_foreign.key)
            )
            continue
        group = related.get((namespace, rs), rs)
        order = _order(analysis, views, members, on_node, group, cache=counted)
        count += 1
        current = [_own_cost(pods[i]) for i in order]
        target = _fill(current)
        wanted = [
            CostChange(
                pods[i].namespace,
                pods[i].name,
                pods[i].uid,
                pods[i].resource_version,
                name,
                j,
                pods[i].deletion_cost,
                target[j],
            )
            for j, i in enumerate(order)
            if current[j] != target[j]
        ]
        room = max(0, min(MAX_PER_WORKLOAD, MAX_PER_PASS - len(changes)))
        changes.extend(wanted[:room])
        deferred += len(wanted) - len(wanted[:room])
    stale = [_removal(p) for i, p in enumerate(pods) if ours(p) and i not in steered]
    room = max(0, MAX_PER_PASS - len(changes))
    changes.extend(stale[:room])
    deferred += len(stale) - len(stale[:room])
    return Steering(True, tuple(changes), tuple(skipped), deferred, count)


def _gone(pod: Pod) -> bool:
    """Not among the ReplicaSet's active pods: finished or terminating."""
    return pod.terminating or pod.phase in TERMINAL_PHASES


def _related(snapshot: Snapshot) -> dict[tuple[str, str], str]:
    """ReplicaSet -> the Deployment owning it: the controller counts doubled-up pods over all
    of a Deployment's ReplicaSets."""
    return {
        (c.namespace, c.name): f"deployment/{c.owner.name}"
        for c in snapshot.controllers
        if c.kind == "ReplicaSet" and c.owner is not None and c.owner.kind == "Deployment"
    }


def _order(
    analysis: Analysis,
    views: list[ViewId],
    members: list[PodId],
    on_node: Mapping[tuple[str, str, str], int],
    group: str,
    *,
    cache: dict[int, frozenset[int]],
) -> list[int]:
    """The workload's bound, Running, Ready pods in peel order (pod indices)."""
    pods = analysis.pods
    first = [i for i in members if not _active_ready(pods[i])]
    rest = [i for i in members if _active_ready(pods[i])]
    for v in views:
        if v not in cache:
            cache[v] = frozenset(analysis.views[v].members)
    counted = [cache[v] for v in views]
    view_counts: list[ViewCounts] = []
    for k, v in enumerate(views):
        view = analysis.views[v]
        counts = view.all_counts(view.counts)
        for i in first:  # the controller removes these before any ordered pod
            if i in counted[k]:
                counts[view.node_domain[analysis.placement[i]]] -= 1
        c = view.spec.constraint
        view_counts.append(ViewCounts(counts, c.max_skew, c.min_domains))
    ordered = [
        Member(
            tuple(
                analysis.views[v].node_domain[analysis.placement[i]] if i in counted[k] else None
                for k, v in enumerate(views)
            ),
            (
                -on_node[(pods[i].namespace, group, pods[i].node_name or "")],
                -pods[i].created,
                pods[i].uid,
            ),
        )
        for i in rest
    ]
    return [rest[j] for j in peel(view_counts, ordered)]


def _active_ready(pod: Pod) -> bool:
    """What the controller's rules 1-3 keep for the cost to decide: bound, Running, Ready."""
    return bool(pod.node_name) and pod.phase == "Running" and pod.ready
