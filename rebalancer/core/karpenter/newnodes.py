"""Nodes that do not exist yet: what the scheduler simulation asks Karpenter (pure).

Where NodePools are known, a replacement that fits no node the spread allows waits for a node
a pool can add in that node's domain (SPEC §5.10). The simulation
(:class:`rebalancer.core.simulate.SimState`) asks one object, :class:`NewNodes`, and nothing
else of Karpenter's capacity:

* :meth:`NewNodes.pool_for`: which pool (the first by name) can add a node for a pod beside a
  node, in the node's zone (anywhere, when the node has no zone label);
* :meth:`NewNodes.reserve` and :meth:`NewNodes.release`: a replacement planned onto such a
  node, or taken back; the nodes the plan implies spend the pools' limits
  (:class:`~rebalancer.core.karpenter.nodepools.PoolPlan`);
* :meth:`NewNodes.note`: why no pool can, for a no-fit reason;
* :meth:`NewNodes.waits_for` and :meth:`NewNodes.where`: what a waiting replacement waits for,
  in words, and the pool and domain of the node planned for it (what a reservation pins,
  :func:`rebalancer.core.capacity.pin_of`).

What the pools say of a pod shape in a domain is worked out once per snapshot (:class:`Pools`,
shared by every simulated state); what one plan has planned is its state's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rebalancer.core.karpenter.nodepools import PoolJudge, PoolPlan, pool_node_sizes
from rebalancer.core.model import HOSTNAME_KEY, ZONE_KEY, Node, Pod, Snapshot


class Pools:
    """The NodePools of one snapshot, judged once for every simulated state of it."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.judge = PoolJudge(snapshot.node_pools)
        self.sizes = pool_node_sizes(snapshot.nodes)
        self.cache: dict[tuple[str, str, str | None], str] = {}  # (ns, pod, zone) -> pool

    def new_nodes(self, nodes: Mapping[str, Node]) -> NewNodes:
        """What one simulated state (over ``nodes``) asks, with nothing planned yet."""
        return NewNodes(self, nodes)


class NewNodes:
    """The nodes the pools can add, as one simulated state sees them (see the module)."""

    def __init__(self, pools: Pools, nodes: Mapping[str, Node]) -> None:
        self.pools = pools
        self.nodes = nodes
        self.plan = PoolPlan(pools.judge, pools.sizes)
        """The nodes the waiting replacements of this plan imply, and the limits they spend.
        Kept by :meth:`reserve` and :meth:`release`, so every path that takes a move back
        gives its planned node back too."""

    def pool_for(self, pod: Pod, node: str) -> str:
        """The first NodePool (by name) that can add a node for ``pod`` in ``node``'s zone
        (with no zone label: anywhere), so a replacement short of room there waits for it;
        "" for none (SPEC §5.10)."""
        plan = self.plan
        if plan.active:  # limits spent: judged afresh (cached by plan)
            return plan.verdict(pod, *self._where(node)).pool
        zone = self.nodes[node].labels.get(ZONE_KEY)
        key = (pod.namespace, pod.name, zone)
        cache = self.pools.cache
        found = cache.get(key)
        if found is None:
            found = self.pools.judge.verdict(pod, *self._where(node)).pool
            cache[key] = found
        return found

    def waits_for(self, pod: Pod, node: str) -> str:
        """What ``pod``'s replacement, short of room on ``node``, waits for:
        ``NodePool p in zone-b``."""
        zone = self.nodes[node].labels.get(ZONE_KEY)
        return f"NodePool {self.pool_for(pod, node)}" + (f" in {zone}" if zone else "")

    def reserve(self, i: int, pod: Pod, node: str) -> None:
        """Pod ``i``'s replacement waits beside ``node``, which has no room for it: plan it
        onto a node a pool adds in that domain."""
        self.plan.reserve(i, pod, self._where(node), self.nodes[node].allocatable)

    def release(self, i: int, pod: Pod) -> None:
        """Pod ``i``'s replacement is taken back (or moved again): it waits for no planned
        node any more."""
        self.plan.release(i, pod)

    def note(self, pod: Pod, where: tuple[str, Sequence[str]]) -> str:
        """What a no-fit reason adds: for the domains the replacement's spread allows
        (``where``: its topology key and those domains), which pool can add a node there,
        else why none can (:meth:`~rebalancer.core.karpenter.nodepools.PoolJudge.note`)."""
        return self.pools.judge.note(pod, where, self.plan)

    def where(self, i: int) -> tuple[str, str | None] | None:
        """The pool and the zone (None: anywhere) of the node planned for pod ``i``'s
        replacement; None when it waits for no new node."""
        found = self.plan.where(i)
        if found is None:
            return None
        pool, key, domain = found
        return pool, domain if key == ZONE_KEY else None

    def _where(self, node: str) -> tuple[str, str]:
        """The domain a pool adds a node in for a replacement short of room on ``node``: its
        zone, or (no zone label) anywhere, as the hostname key."""
        zone = self.nodes[node].labels.get(ZONE_KEY)
        return (ZONE_KEY, zone) if zone is not None else (HOSTNAME_KEY, node)
