"""Which pods replace those a node's drain moved (pure): loop mode's thrash guard goes around
them as around rebalancer's own replacements (SPEC §3.12). And which evictions would send a
replacement onto a node Karpenter's drift is about to drain (:func:`drifted_landings`).

Karpenter's disruption (consolidation, drift, expiry) taints a node ``karpenter.sh/disrupted``,
evicts its pods and deletes the node. Their controllers create replacements at once, which the
scheduler places wherever there is room; while the drained domain waits for its new node they
crowd the others. The planner prefers the youngest pod of a crowded domain (§3.4), and the
youngest are those replacements: evicting one moves a pod that has just moved, a second
disruption for it and a fight with the drain. Any older pod of the same domain repairs as well.

A drain is seen from two reads of one runner, the one before and this one: a controller owns a
pod that is on a disrupted node now, or a pod that the read before saw on a node that is now
disrupted or gone. Its pods this read sees for the first time (by uid: a StatefulSet's
replacement keeps its name) are the drain's replacements.

Worked example: the read before saw web-1 and web-2 (ReplicaSet web-7f) on node n3; now n3
carries the disrupted taint or is gone, web-1 and web-2 are gone, and web-8 and web-9 of the
same ReplicaSet are new: ``drained`` gives ``{"shop/ReplicaSet/web-7f": "n3"}`` and
``arrived`` gives web-8 and web-9. A new pod of another ReplicaSet is no drain's replacement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rebalancer.core.karpenter import drifted, node_disrupted
from rebalancer.core.model import Pod, Snapshot
from rebalancer.core.plan import Eviction
from rebalancer.core.simulate import static_reason


@dataclass(frozen=True, slots=True)
class Seen:
    """What one read leaves for the next: each pod's uid -> (its node, its controller as
    ``namespace/Kind/name``; "" when it has none), and the names of the nodes."""

    pods: Mapping[str, tuple[str | None, str]]
    nodes: frozenset[str]

    @classmethod
    def of(cls, snapshot: Snapshot) -> Seen:
        return cls(
            {p.uid: (p.node_name, controller_of(p)) for p in snapshot.pods},
            frozenset(n.name for n in snapshot.nodes),
        )


def drained(before: Seen | None, snapshot: Snapshot) -> dict[str, str]:
    """Controller (``namespace/Kind/name``) -> the node drained of one of its pods (the first
    by name): a pod on a node with the disrupted taint now, or one ``before`` saw on a node
    that is now disrupted or gone (it left since)."""
    disrupted = {n.name for n in snapshot.nodes if node_disrupted(n)}
    found: dict[str, str] = {}

    def note(owner: str, node: str) -> None:
        if owner and (owner not in found or node < found[owner]):
            found[owner] = node

    for pod in snapshot.pods:
        if pod.node_name in disrupted:
            note(controller_of(pod), pod.node_name)
    if before is not None:
        now = {n.name for n in snapshot.nodes}
        left = {name for name in before.nodes if name not in now or name in disrupted}
        present = {p.uid for p in snapshot.pods}
        for uid, (node, owner) in before.pods.items():
            if node in left and uid not in present:
                note(owner, node)
    return found


def arrived(before: Seen | None, snapshot: Snapshot) -> list[Pod]:
    """The pods ``before`` did not see (none when there was no read before)."""
    if before is None:
        return []
    return [p for p in snapshot.pods if p.uid not in before.pods]


def controller_of(pod: Pod) -> str:
    """``namespace/Kind/name`` of the pod's controller; "" when it has none."""
    o = pod.owner
    return f"{pod.namespace}/{o.kind}/{o.name}" if o is not None else ""


def drifted_landings(snapshot: Snapshot, evictions: Iterable[Eviction]) -> dict[str, str]:
    """Eviction key -> why its replacement may land on a node Karpenter is about to replace:
    a node of the replacement's target domain that has drifted from its NodePool
    (:func:`rebalancer.core.karpenter.drifted`) and that the pod may run on (cordon, taints,
    selectors and affinity; the scheduler may pick any such node of the domain, whatever the
    plan's simulation chose). An eviction that waits for a new node, or whose domain holds
    no drifted node, is not listed. Such a replacement is drained again once Karpenter gets
    to the node: a fight with the drift that repairing after it avoids."""
    moved = drifted(snapshot.nodes, snapshot.node_pools)
    if not moved:
        return {}
    pods = {p.uid: p for p in snapshot.pods}
    nodes = [n for n in snapshot.nodes if n.name in moved]
    found: dict[str, str] = {}
    for e in evictions:
        pod = pods.get(e.uid)
        if pod is None or e.target_domain is None or e.waits_for:
            continue
        for node in sorted(nodes, key=lambda n: n.name):
            if node.labels.get(e.topology_key) != e.target_domain:
                continue
            if static_reason(pod, node, ()) is None:
                found[e.key] = (
                    f"its replacement may land on node {node.name} in {e.target_domain}, "
                    f"which has drifted from NodePool {moved[node.name]}: Karpenter replaces "
                    "it, and the replacement would move again"
                )
                break
    return found
