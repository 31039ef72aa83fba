"""Which pods replace those a node's drain moved (pure): loop mode's thrash guard goes around
them as around rebalancer's own replacements (SPEC §3.12). And where a replacement would land
on a node Karpenter's drift is about to drain (:class:`DriftedLandings`, a landing hold).

Karpenter's disruption (consolidation, drift, expiry) taints a node ``karpenter.sh/disrupted``,
evicts its pods and deletes the node. Their controllers create replacements at once, which the
scheduler places wherever there is room; while the drained domain waits for its new node they
crowd the others. The planner prefers the youngest pod of a crowded domain (§3.4), and the
youngest are those replacements: evicting one moves a pod that has just moved, a second
disruption for it and a fight with the drain. Any older pod of the same domain repairs as well.

A drain is seen from two reads of one runner, the one before and this one: a pod terminating on
a disrupted node now, or one that the read before saw on a node that is now disrupted or gone,
and gone since. Its controller owes a replacement for each; the controller's pods a read sees
for the first time (by uid: a StatefulSet's replacement keeps its name) pay
(:class:`DrainLedger`).

Worked example: the read before saw web-1 and web-2 (ReplicaSet web-7f) on node n3; now n3
carries the disrupted taint or is gone, web-1 and web-2 are gone, and web-8 and web-9 of the
same ReplicaSet are new, and web-10 too (a scale-up, the youngest): ``drained`` gives
``{"shop/ReplicaSet/web-7f": {uid of web-1: "n3", uid of web-2: "n3"}}``, and the ledger pays
the two with web-8 and web-9, the oldest new pods. web-10, and a new pod of another
ReplicaSet, are no drain's replacements.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import partial

from rebalancer.core.karpenter.marks import drifted, node_disrupted
from rebalancer.core.model import Node, Pod, Snapshot


@dataclass(frozen=True, slots=True)
class Seen:
    """What one read leaves for the next: each pod's uid -> (its node, its controller as
    ``namespace/Kind/name``), for the pods with a controller (only they are replaced), and the
    names of the nodes."""

    pods: Mapping[str, tuple[str | None, str]]
    nodes: frozenset[str]

    @classmethod
    def of(cls, snapshot: Snapshot) -> Seen:
        return cls(
            {p.uid: (p.node_name, controller_of(p)) for p in snapshot.pods if p.owner},
            frozenset(n.name for n in snapshot.nodes),
        )


def drained(before: Seen | None, snapshot: Snapshot) -> dict[str, dict[str, str]]:
    """Controller (``namespace/Kind/name``) -> the uids of its pods a drain took, each with
    its node: a pod terminating on a node with the disrupted taint now, or one ``before`` saw
    on a node that is now disrupted or gone, and gone since. Its controller replaces each."""
    disrupted = {n.name for n in snapshot.nodes if node_disrupted(n)}
    found: dict[str, dict[str, str]] = {}
    for pod in snapshot.pods:
        owner = controller_of(pod)
        if owner and pod.terminating and pod.node_name in disrupted:
            found.setdefault(owner, {})[pod.uid] = pod.node_name
    if before is not None:
        now = {n.name for n in snapshot.nodes}
        left = {name for name in before.nodes if name not in now or name in disrupted}
        present = {p.uid for p in snapshot.pods}
        for uid, (node, owner) in before.pods.items():
            if owner and node in left and uid not in present:
                found.setdefault(owner, {})[uid] = node
    return found


class DrainLedger:
    """Which new pods replace the pods drains took, one for one, read after read.

    Each read: the pods a drain took (:func:`drained`, each counted once by uid) add to what
    their controller owes; the controller's pods that read sees first (:func:`arrived`) pay it
    and are the drain's replacements: those that came with the debt or after it first, oldest
    first (a scale-up after the drain is younger than its replacements); then those that came
    before it, latest first (the watch may deliver a replacement before its pod's termination,
    and a scale-up before the drain came earlier). An arrival older than ``tail`` seconds, and
    a debt unpaid for as long, is forgotten. A scale-up adds pods beyond what is owed: those
    are not replacements; nor are the pods the caller names ``mine`` (its own evictions'
    replacements).
    """

    def __init__(self, tail: float) -> None:
        self.tail = tail
        self._seen: Seen | None = None
        self._counted: dict[str, float] = {}  # uid of a drained pod -> when counted
        # controller -> pods owed, a drained node, when the debt began, when it last grew
        self._owed: dict[str, tuple[int, str, float, float]] = {}
        self._waiting: dict[str, list[tuple[float, str, float]]] = {}  # controller -> arrivals

    def update(
        self, snapshot: Snapshot, now: float, mine: Collection[str] = ()
    ) -> tuple[dict[str, str], dict[str, str]]:
        """This read's ``(replacements, controllers)``: pod key -> the drained node it
        replaces a pod of; and each controller a drain took pods of for the first time within
        ``tail`` -> that node. ``mine``: keys of pods known to replace the caller's own
        evictions, which pay no drain."""
        before, self._seen = self._seen, Seen.of(snapshot)
        fresh: dict[str, str] = {}
        for owner, uids in drained(before, snapshot).items():
            new = [u for u in uids if u not in self._counted]
            if not new:
                continue
            for u in new:
                self._counted[u] = now
            count, _, since, _ = self._owed.get(owner, (0, "", now, now))
            node = min(uids[u] for u in new)
            if owner not in self._owed:
                fresh[owner] = node
            self._owed[owner] = (count + len(new), node, since, now)
        for pod in arrived(before, snapshot):
            owner = controller_of(pod)
            if owner and pod.key not in mine:
                self._waiting.setdefault(owner, []).append((pod.created, pod.key, now))
        self._counted = {u: t for u, t in self._counted.items() if now - t <= self.tail}
        self._waiting = {
            o: kept
            for o, pods in self._waiting.items()
            if (kept := [w for w in pods if now - w[2] <= self.tail])
        }
        replacements: dict[str, str] = {}
        for owner, (count, node, since, last) in list(self._owed.items()):
            pods = sorted(self._waiting.get(owner, []), key=partial(_payment_order, since))
            paid, rest = pods[:count], pods[count:]
            for _, key, _ in paid:
                replacements[key] = node
            if rest:
                self._waiting[owner] = rest
            else:
                self._waiting.pop(owner, None)
            left = count - len(paid)
            if left > 0 and now - last <= self.tail:
                self._owed[owner] = (left, node, since, last)
            else:
                del self._owed[owner]
        return replacements, fresh


def _payment_order(since: float, w: tuple[float, str, float]) -> tuple[bool, float, str]:
    """Who pays a debt begun at ``since`` first, of the arrivals ``(created, key, seen)``: those
    seen with it or after it, oldest first; then those seen before it, latest first."""
    created, key, seen = w
    return (True, -created, key) if seen < since else (False, created, key)


def arrived(before: Seen | None, snapshot: Snapshot) -> list[Pod]:
    """The pods with a controller that ``before`` did not see (none when there was no read
    before)."""
    if before is None:
        return []
    return [p for p in snapshot.pods if p.owner and p.uid not in before.pods]


def controller_of(pod: Pod) -> str:
    """``namespace/Kind/name`` of the pod's controller; "" when it has none. Interned: a
    :class:`Seen` of 150,000 pods holds one string per controller, not one per pod."""
    o = pod.owner
    return sys.intern(f"{pod.namespace}/{o.kind}/{o.name}") if o is not None else ""


class DriftedLandings:
    """Where a replacement may land on a node Karpenter is about to replace: the nodes that
    have drifted from their NodePool (:func:`rebalancer.core.karpenter.marks.drifted`), by name. The
    planner asks it of each move (a landing hold, :mod:`rebalancer.core.holds`), with the
    scheduler filters of its simulation (``may_run``: whether the filters that depend on no
    other pod let a pod run on a node, :func:`rebalancer.core.simulate.static_reason`)."""

    def __init__(self, snapshot: Snapshot, may_run: Callable[[Pod, Node], bool]) -> None:
        self.may_run = may_run
        self.moved = drifted(snapshot.nodes, snapshot.node_pools)
        self.nodes = sorted(
            (n for n in snapshot.nodes if n.name in self.moved), key=lambda n: n.name
        )

    def __bool__(self) -> bool:
        return bool(self.nodes)

    def reason(self, pod: Pod, topology_key: str, domain: str) -> str | None:
        """Why ``pod``'s replacement, sent to ``domain`` of ``topology_key``, may land on a
        drifted node: the first such node of the domain (by name) that the pod may run on
        (cordon, taints, selectors and affinity; the scheduler may pick any such node of the
        domain, whatever the simulation chose). None when there is none."""
        for node in self.nodes:
            if node.labels.get(topology_key) != domain:
                continue
            if self.may_run(pod, node):
                return (
                    f"its replacement may land on node {node.name} in {domain}, "
                    f"which has drifted from NodePool {self.moved[node.name]}: Karpenter "
                    "replaces it, and the replacement would move again"
                )
        return None
