"""An exhaustive oracle for small clusters, written from docs/spec.md §2-§3 alone (no planner code).

A cluster here is a handful of nodes (each with a zone), one workload whose pods all declare
the same hard constraints (zone and/or hostname), each pod with a priority and whether it may
be evicted. Room is ample. The oracle answers by brute force:

* :func:`joint_minimum`: breadth-first over every sequence of "evict one pod, place its
  replacement on any node the filter allows at that moment" (SPEC §3.9's discipline), the fewest
  evictions after which every constraint is within maxSkew; None when no sequence gets there.
* :func:`lexicographic_minimum`: with soft constraints too (SPEC §3.6, "hard first, then soft"),
  the fewest evictions H after which every hard constraint is within maxSkew, then, from any
  state H evictions reach that way, the fewest further evictions after which every soft one
  is too, each further step keeping every hard constraint within maxSkew.
* :func:`best_victims`: among every set of pods of that size that some sequence evicts with
  SPEC §3.3's simulated placement (each replacement in the least populated legal domain), the
  best by SPEC §3.4's order: fewest victims that could come back to their domain (minimised
  over the orders evicting that set), then the victims' priorities sorted from highest to
  lowest, compared lexicographically.

The filter (SPEC §2.4): placing a pod in domain d is allowed by a hard constraint iff
``count(d) + 1 - globalMin <= maxSkew``, where the global minimum is the smallest count over
every domain of the key (0 with fewer domains than minDomains). A constraint is violated
when some domain holding pods is more than maxSkew above the global minimum.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

Counts = tuple[int, ...]  # pods per node


@dataclass(frozen=True, slots=True)
class OracleConstraint:
    """A spread constraint: ``zone`` or ``hostname``, maxSkew, minDomains, and whether it is
    soft (``ScheduleAnyway``: it filters nothing, and minDomains does not apply)."""

    key: str
    max_skew: int
    min_domains: int = 1
    soft: bool = False


@dataclass(frozen=True, slots=True)
class OraclePod:
    """One pod of the workload: the node it runs on (an index), its priority, evictable."""

    node: int
    priority: int
    evictable: bool = True


@dataclass(frozen=True, slots=True)
class OracleCluster:
    """Nodes (their zones, by index), the workload's pods and its constraints."""

    zones: tuple[int, ...]  # node -> zone
    pods: tuple[OraclePod, ...]
    constraints: tuple[OracleConstraint, ...]

    def domain(self, c: OracleConstraint, node: int) -> int:
        """The node's domain for a constraint: its zone, or itself for hostname."""
        return self.zones[node] if c.key == "zone" else node

    def domain_count(self, c: OracleConstraint) -> int:
        """How many domains the constraint's key has."""
        return len(set(self.zones)) if c.key == "zone" else len(self.zones)

    def start(self) -> Counts:
        """Pods per node before any eviction."""
        counts = [0] * len(self.zones)
        for p in self.pods:
            counts[p.node] += 1
        return tuple(counts)


def per_domain(cluster: OracleCluster, c: OracleConstraint, counts: Counts) -> list[int]:
    """Pods per domain of the constraint (every domain, empty ones included)."""
    out = [0] * cluster.domain_count(c)
    for node, n in enumerate(counts):
        out[cluster.domain(c, node)] += n
    return out


def global_minimum(cluster: OracleCluster, c: OracleConstraint, counts: Counts) -> int:
    """SPEC §2.4's global minimum (minDomains for hard constraints only)."""
    domains = per_domain(cluster, c, counts)
    return 0 if not c.soft and len(domains) < c.min_domains else min(domains)


def allowed(cluster: OracleCluster, counts: Counts, node: int) -> bool:
    """Whether every hard constraint's filter lets a replacement land on ``node`` now."""
    for c in cluster.constraints:
        if c.soft:
            continue
        domains = per_domain(cluster, c, counts)
        gmin = global_minimum(cluster, c, counts)
        if domains[cluster.domain(c, node)] + 1 - gmin > c.max_skew:
            return False
    return True


def excess(cluster: OracleCluster, c: OracleConstraint, counts: Counts) -> int:
    """How far the constraint is beyond maxSkew (0 when within)."""
    domains = per_domain(cluster, c, counts)
    gmin = global_minimum(cluster, c, counts)
    top = max((n for n in domains if n > 0), default=gmin)
    return max(0, top - gmin - c.max_skew)


def within(cluster: OracleCluster, counts: Counts) -> bool:
    """Every constraint within its maxSkew."""
    return all(excess(cluster, c, counts) == 0 for c in cluster.constraints)


def within_kind(cluster: OracleCluster, counts: Counts, *, soft: bool) -> bool:
    """Every hard (``soft`` False) or every soft constraint within its maxSkew."""
    return all(excess(cluster, c, counts) == 0 for c in cluster.constraints if c.soft == soft)


def movable(cluster: OracleCluster) -> Counts:
    """Evictable pods per node."""
    out = [0] * len(cluster.zones)
    for p in cluster.pods:
        if p.evictable:
            out[p.node] += 1
    return tuple(out)


def joint_minimum(cluster: OracleCluster) -> int | None:
    """The fewest evictions reaching balance, one eviction and placement at a time."""
    start = (cluster.start(), movable(cluster))
    seen = {start}
    queue = deque([(start, 0)])
    while queue:
        (counts, left), depth = queue.popleft()
        if within(cluster, counts):
            return depth
        for src in range(len(counts)):
            if left[src] == 0:
                continue
            after = list(counts)
            after[src] -= 1
            rest = list(left)
            rest[src] -= 1
            for dst in range(len(counts)):
                if allowed(cluster, tuple(after), dst):
                    moved = list(after)
                    moved[dst] += 1
                    state = (tuple(moved), tuple(rest))
                    if state not in seen:
                        seen.add(state)
                        queue.append((state, depth + 1))
    return None


State = tuple[Counts, Counts]  # (pods per node, evictable pods left per node)


def _successors(cluster: OracleCluster, state: State) -> list[State]:
    """Every state one eviction away: any evictable pod leaves, its replacement lands on any
    node the hard filters allow once it has left."""
    counts, left = state
    out = []
    for src in range(len(counts)):
        if left[src] == 0:
            continue
        after = list(counts)
        after[src] -= 1
        rest = list(left)
        rest[src] -= 1
        for dst in range(len(counts)):
            if allowed(cluster, tuple(after), dst):
                moved = list(after)
                moved[dst] += 1
                out.append((tuple(moved), tuple(rest)))
    return out


def lexicographic_minimum(cluster: OracleCluster) -> tuple[int, int | None] | None:
    """(H, F): H the fewest evictions bringing every hard constraint within maxSkew, F the
    fewest further ones bringing every soft one within too, starting from any state H
    evictions reach with the hard constraints within, each further state keeping them within.
    None when the hard constraints cannot be brought within; F None when the soft cannot."""
    layer: set[State] = {(cluster.start(), movable(cluster))}
    depth = 0
    while True:
        done = {s for s in layer if within_kind(cluster, s[0], soft=False)}
        if done:
            break
        layer = {nxt for s in layer for nxt in _successors(cluster, s)}
        depth += 1
        if not layer:
            return None
    hard = depth
    seen = set(done)
    layer = done
    further = 0
    while layer:
        if any(within_kind(cluster, s[0], soft=True) for s in layer):
            return hard, further
        layer = {
            nxt
            for s in layer
            for nxt in _successors(cluster, s)
            if nxt not in seen and within_kind(cluster, nxt[0], soft=False)
        }
        seen |= layer
        further += 1
    return hard, None


def _least_populated_legal(cluster: OracleCluster, counts: Counts) -> list[int]:
    """The nodes SPEC §3.3's simulation may put a replacement on: legal nodes whose domain (of
    the first constraint) holds the fewest pods; any of them when several tie."""
    legal = [n for n in range(len(counts)) if allowed(cluster, counts, n)]
    if not legal:
        return []
    c = cluster.constraints[0]
    domains = per_domain(cluster, c, counts)
    low = min(domains[cluster.domain(c, n)] for n in legal)
    return [n for n in legal if domains[cluster.domain(c, n)] == low]


def _returning_minimum(cluster: OracleCluster, removals: Counts) -> int | None:
    """Over every order of evicting exactly ``removals[n]`` pods from each node n, each
    replacement placed as SPEC §3.3's simulation does (ties tried every way), and ending in
    balance, the fewest evictions whose replacement could land back in its domain; None when
    no such sequence exists."""

    @functools.cache
    def go(counts: Counts, left: Counts) -> int | None:
        if sum(left) == 0:
            return 0 if within(cluster, counts) else None
        best: int | None = None
        for src in range(len(counts)):
            if left[src] == 0:
                continue
            after = list(counts)
            after[src] -= 1
            rest = list(left)
            rest[src] -= 1
            back = int(
                any(
                    allowed(cluster, tuple(after), n)
                    for n in range(len(counts))
                    if all(
                        cluster.domain(c, n) == cluster.domain(c, src) for c in cluster.constraints
                    )
                )
            )
            for dst in _least_populated_legal(cluster, tuple(after)):
                moved = list(after)
                moved[dst] += 1
                found = go(tuple(moved), tuple(rest))
                if found is not None and (best is None or found + back < best):
                    best = found + back
        return best

    return go(cluster.start(), removals)


def best_victims(cluster: OracleCluster, size: int) -> tuple[int, tuple[int, ...]] | None:
    """Among victim sets of ``size`` pods that a sequence reaching balance evicts, the best
    (fewest that could return, then priorities highest first, lexicographically): that count
    and the priorities. None when no set of that size works."""
    candidates = [k for k, p in enumerate(cluster.pods) if p.evictable]
    cache: dict[Counts, int | None] = {}
    best: tuple[int, tuple[int, ...]] | None = None
    for chosen in itertools.combinations(candidates, size):
        removals = [0] * len(cluster.zones)
        for k in chosen:
            removals[cluster.pods[k].node] += 1
        key = tuple(removals)
        if key not in cache:
            cache[key] = _returning_minimum(cluster, key)
        back = cache[key]
        if back is None:
            continue
        found = (back, tuple(sorted((cluster.pods[k].priority for k in chosen), reverse=True)))
        if best is None or found < best:
            best = found
    return best


def _removals_reach_balance(cluster: OracleCluster, removals: Counts) -> bool:
    """Whether some order of evicting exactly ``removals[n]`` pods from each node n, each
    replacement on any node the filter allows at its time, ends in balance."""

    @functools.cache
    def go(counts: Counts, left: Counts) -> bool:
        if sum(left) == 0:
            return within(cluster, counts)
        for src in range(len(counts)):
            if left[src] == 0:
                continue
            after = list(counts)
            after[src] -= 1
            rest = list(left)
            rest[src] -= 1
            for dst in range(len(counts)):
                if allowed(cluster, tuple(after), dst):
                    moved = list(after)
                    moved[dst] += 1
                    if go(tuple(moved), tuple(rest)):
                        return True
        return False

    return go(cluster.start(), removals)


def best_priorities(cluster: OracleCluster, size: int) -> tuple[int, ...] | None:
    """Among victim sets of ``size`` pods that some sequence with any legal placements turns
    into balance, the lexicographically smallest priorities sorted from highest to lowest;
    None when no set of that size works."""
    candidates = [k for k, p in enumerate(cluster.pods) if p.evictable]
    cache: dict[Counts, bool] = {}
    best: tuple[int, ...] | None = None
    for chosen in itertools.combinations(candidates, size):
        removals = [0] * len(cluster.zones)
        for k in chosen:
            removals[cluster.pods[k].node] += 1
        key = tuple(removals)
        if key not in cache:
            cache[key] = _removals_reach_balance(cluster, key)
        if not cache[key]:
            continue
        found = tuple(sorted((cluster.pods[k].priority for k in chosen), reverse=True))
        if best is None or found < best:
            best = found
    return best


def replay_is_legal(cluster: OracleCluster, steps: Sequence[tuple[int, int]]) -> bool:
    """Whether each (pod index, target node) step passes the filter when it happens."""
    counts = list(cluster.start())
    for pod, target in steps:
        counts[cluster.pods[pod].node] -= 1
        if not allowed(cluster, tuple(counts), target):
            return False
        counts[target] += 1
    return True


def end_counts(cluster: OracleCluster, steps: Sequence[tuple[int, int]]) -> Counts:
    """Pods per node after the steps."""
    counts = list(cluster.start())
    for pod, target in steps:
        counts[cluster.pods[pod].node] -= 1
        counts[target] += 1
    return tuple(counts)
