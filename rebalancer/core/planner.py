"""The planner: the fewest evictions that let the scheduler restore every considered spread.

``plan(snapshot, policy, now)`` is pure. It finds the violated views (SPEC §2), then evicts one
pod at a time from the most populated domain of the worst view, letting the scheduler
simulation place its replacement, and keeps a move only if it lowers that view's distance to
balance (:func:`rebalancer.core.minimal.min_moves`) without making any other considered view worse.

Worked example, one zone constraint with maxSkew 1 and counts a=4, b=2, c=0, d=0:

* distance: N=6 pods over D=4 zones; the only band that can hold them is [1, 2]. Zone a is
  2 above it, zones c and d are 1 below it each, so at least max(2, 1+1) = 2 moves.
* move 1: evict from a (4 -> 3); the replacement goes to the least populated zone, c: [3,2,1,0].
* move 2: evict from a (3 -> 2); the replacement goes to d: [2,2,1,1], skew 1. Done: 2
  evictions, equal to the lower bound, so the plan is proven minimal.

A greedy descheduler that moves "everything above the average" would evict 3 here.

Among candidates of equal use, victims follow preemption order (SPEC §3): first pods whose own
hard constraints forbid their replacement from returning to their current domain, then the
lowest priority, then pods whose PodDisruptionBudget still allows a disruption, then the
youngest. The moves are then grouped into waves (:mod:`rebalancer.core.waves`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence

from rebalancer.core.evictability import EvictionContext, skip_reason
from rebalancer.core.gcpause import gc_paused
from rebalancer.core.minimal import min_moves
from rebalancer.core.model import Pod, Snapshot
from rebalancer.core.moves import Move
from rebalancer.core.plan import Eviction, Plan, Skip, SkipReason, ViewReport
from rebalancer.core.policy import Policy
from rebalancer.core.selectors import selector_string
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import (
    Analysis,
    View,
    analyze,
    considered,
    global_min,
    skew_of,
)
from rebalancer.core.waves import assign_waves


class Budget:
    """The policy's limits, counting evictions already made earlier in the run."""

    def __init__(self, policy: Policy, before: Sequence[Eviction]) -> None:
        self.limits = policy.limits
        self.total = len(before)
        self.node: Counter[str] = Counter(e.node for e in before)
        self.namespace: Counter[str] = Counter(e.namespace for e in before)
        self.workload: Counter[str] = Counter(f"{e.namespace}/{e.workload}" for e in before)

    def allows(self, node: str, namespace: str, workload: str) -> str | None:
        lim = self.limits
        if lim.total is not None and self.total >= lim.total:
            return f"limits.total ({lim.total}) reached"
        if lim.per_node is not None and self.node[node] >= lim.per_node:
            return f"limits.perNode ({lim.per_node}) reached on {node}"
        if lim.per_namespace is not None and self.namespace[namespace] >= lim.per_namespace:
            return f"limits.perNamespace ({lim.per_namespace}) reached in {namespace}"
        wl = f"{namespace}/{workload}"
        if lim.per_workload is not None and self.workload[wl] >= lim.per_workload:
            return f"limits.perWorkload ({lim.per_workload}) reached for {workload}"
        return None

    def spend(self, node: str, namespace: str, workload: str) -> None:
        self.total += 1
        self.node[node] += 1
        self.namespace[namespace] += 1
        self.workload[f"{namespace}/{workload}"] += 1


def workload_of(pod: Pod, owners: dict[tuple[str, str, str], str]) -> str:
    """``Kind/name`` of the pod's workload; a ReplicaSet is lifted to its Deployment."""
    if pod.owner is None:
        return ""
    lifted = owners.get((pod.owner.kind, pod.namespace, pod.owner.name))
    return lifted or f"{pod.owner.kind}/{pod.owner.name}"


class Planner:
    """One planning pass. Holds the simulation state; ``run`` returns the moves."""

    def __init__(
        self, snapshot: Snapshot, policy: Policy, now: float, before: Sequence[Eviction]
    ) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.analysis: Analysis = analyze(snapshot, policy)
        self.ctx = EvictionContext.build(snapshot, policy, now)
        self.considered = [
            v for v, view in enumerate(self.analysis.views) if considered(view, policy)
        ]
        self.violated = [v for v in self.considered if self.analysis.views[v].violated]
        self.state = SimState(snapshot, self.analysis, self.considered)
        self.budget = Budget(policy, before)
        self.owners = {
            (c.kind, c.namespace, c.name): f"{c.owner.kind}/{c.owner.name}"
            for c in snapshot.controllers
            if c.owner is not None
        }
        # PodDisruptionBudgets: a per-wave budget; this counts down over the whole plan and only
        # orders victims (pods whose PDB has budget left first). Waves enforce the budget.
        self.pdb_left = list(self.ctx.budgets.allowed)
        self._pdbs: dict[int, tuple[int, ...]] = {}
        self._skips: dict[int, SkipReason | None] = {}
        self._rank: dict[int, tuple[int, tuple[float, str, str]]] = {}  # see preference
        self.no_fit: dict[int, SkipReason] = {}
        self.limit_notes: set[str] = set()
        self.evicted: set[int] = set()
        self._pinned: dict[int, Counter[str]] = {}
        self._moved_into: dict[int, list[int]] = {}  # view -> moved pods it counts

    # -- candidates ----------------------------------------------------------------------
    def pdbs(self, i: int) -> tuple[int, ...]:
        """The PodDisruptionBudget (index; none or one) whose budget evicting pod i spends."""
        found = self._pdbs.get(i)
        if found is None:
            found = self._pdbs[i] = self.ctx.budgets.judge(self.analysis.pods[i])[1]
        return found

    def skip(self, i: int) -> SkipReason | None:
        """The rule that forbids evicting pod i at all, or None when it may be evicted."""
        if i in self._skips:
            return self._skips[i]
        reason = self._skips[i] = skip_reason(self.analysis.pods[i], self.ctx)
        return reason

    def evictable(self, i: int) -> bool:
        return i not in self.evicted and self.skip(i) is None

    def returns_blocked(self, v: int, domain: str) -> bool:
        """Whether view v, as a pod's own hard constraint, forbids the replacement of a pod
        leaving ``domain`` to come back there."""
        view = self.analysis.views[v]
        spec = view.spec
        if not spec.hard:
            return False
        after = self.state.counts[v].get(domain, 0) - 1
        if len(view.domains) < spec.constraint.min_domains:
            gmin_after = 0
        else:
            gmin_after = min(self.state.gmin(v), after)
        return after + 1 - gmin_after > spec.max_skew

    def preference(self, i: int, v: int, blocked: bool) -> tuple[object, ...]:
        """Victim order (SPEC §3): pods that cannot return, lowest priority, PDB allowing a
        disruption, youngest; then by name. ``blocked``: :meth:`returns_blocked` for view v
        and the pod's domain (it applies when v is one of the pod's own views)."""
        rank = self._rank.get(i)
        if rank is None:
            pod = self.analysis.pods[i]
            rank = (self.ctx.priority(pod), (-pod.created, pod.namespace, pod.name))
            self._rank[i] = rank
        cannot_return = blocked and v in self.state.own_views.get(i, ())
        pdb_blocked = any(self.pdb_left[k] <= 0 for k in self.pdbs(i))
        return (not cannot_return, rank[0], pdb_blocked, rank[1])

    # -- moves ---------------------------------------------------------------------------
    def distance_at_start(self, v: int) -> int:
        """The view's distance to balance before any move; unevictable pods are floors."""
        view = self.analysis.views[v]
        c = view.spec.constraint
        floors: Counter[str] = Counter()
        pods = self.analysis.pods
        for i in view.members:
            if i not in self.evicted and not self.evictable(i):
                floors[view.node_domain[pods[i].node_name or ""]] += 1
        return min_moves(
            list(view.counts.values()),
            c.max_skew,
            c.min_domains,
            c.hard,
            max(floors.values(), default=0),
            empty=len(view.domains) - len(view.counts),
        )

    def pinned(self, v: int) -> Counter[str]:
        """Pods of view v per domain that cannot move: not evictable, or already moved."""
        found = self._pinned.get(v)
        if found is None:
            view = self.analysis.views[v]
            pods = self.analysis.pods
            found = Counter(
                view.node_domain[pods[i].node_name or ""]
                for i in view.members
                if i not in self.evicted and not self.evictable(i)
            )
            for i in self._moved_into.get(v, ()):
                node = self.state.placement.get(i)
                domain = self.state.domain(v, node) if node is not None else None
                if domain is not None:
                    found[domain] += 1
            self._pinned[v] = found
        return found

    def distance(self, v: int) -> int:
        view = self.analysis.views[v]
        c = view.spec.constraint
        counts = self.state.counts[v]
        pinned = self.pinned(v)
        return min_moves(
            list(counts.values()),
            c.max_skew,
            c.min_domains,
            c.hard,
            max(pinned.values(), default=0),
            empty=len(view.domains) - len(counts),
        )

    def _pin(self, i: int, node: str, delta: int) -> None:
        """Count pod i as unmovable on ``node`` in every view that has pinned counts."""
        for w in self.state.selector_views(i):
            found = self._pinned.get(w)
            domain = self.state.domain(w, node)
            if found is not None and domain is not None:
                found[domain] += delta

    def try_move(self, i: int, v: int) -> Move | str:
        """Evict pod i in the simulation; keep it if it helps view v and harms no other."""
        state = self.state
        touched = [w for w in state.selector_views(i) if w in state.rank_views]
        before: dict[int, tuple[int, int]] = {}
        for w in touched:
            excess = state.excess(w)
            # Distances are compared for v and for the views already violated only.
            before[w] = (excess, self.distance(w) if w == v or excess > 0 else 0)
        gmin = state.gmin(v)
        source = state.remove(i)
        source_count = state.counts[v].get(self.analysis.views[v].node_domain[source], 0) + 1
        placement = state.place(i, check_fit=self.policy.node_fit)
        if placement.node == source:
            state.add(i, source)
            return "its replacement would land back on the same node"
        if placement.node is None:
            state.add(i, source)
            return f"replacement would stay Pending: {placement.reason}"
        state.add(i, placement.node)
        self._pin(i, placement.node, 1)
        ok = (state.excess(v), self.distance(v)) < before[v]
        for w in touched:
            if not ok:
                break
            excess, dist = before[w]
            if w != v and (state.excess(w) > excess or (excess > 0 and self.distance(w) > dist)):
                ok = False
        if not ok:
            self._pin(i, placement.node, -1)
            state.remove(i)
            state.add(i, source)
            return "moving it would not improve the spread"
        return Move(i, v, source, placement.node, source_count, gmin)

    def _note_no_fit(self, i: int, why: str) -> None:
        if why.startswith("replacement would stay Pending"):
            self.no_fit.setdefault(i, SkipReason("no-fit", why))

    def best_move(self, v: int) -> Move | None:
        state = self.state
        counts = state.counts[v]
        gmin = state.gmin(v)
        for domain in sorted(counts, key=lambda d: (-counts[d], d)):
            if counts[domain] <= gmin + 1:
                break
            members = [i for i in state.members(v, domain) if self.evictable(i)]
            blocked = self.returns_blocked(v, domain)
            members.sort(key=lambda i: self.preference(i, v, blocked))
            failed: dict[object, str] = {}
            for i in members:
                pod = self.analysis.pods[i]
                workload = workload_of(pod, self.owners)
                node = state.placement[i]
                limited = self.budget.allows(node, pod.namespace, workload)
                if limited is not None:
                    self.limit_notes.add(limited)
                    continue
                # Pods of one template on one node fail alike (the node they leave matters:
                # it changes their own views' counts).
                template = (
                    pod.namespace,
                    workload,
                    tuple(sorted(pod.labels.items())),
                    pod.pvc_names,
                    pod.requests.get("cpu"),
                    pod.requests.get("memory"),
                )
                known = failed.get((template, node))
                if known is not None:
                    self._note_no_fit(i, known)
                    continue
                result = self.try_move(i, v)
                if isinstance(result, Move):
                    self.budget.spend(node, pod.namespace, workload)
                    self.evicted.add(i)
                    for w in state.selector_views(i):
                        self._moved_into.setdefault(w, []).append(i)
                    for k in self.pdbs(i):
                        self.pdb_left[k] -= 1
                    return result
                failed[(template, node)] = result
                self._note_no_fit(i, result)
        return None

    def run(self) -> list[Move]:
        """Move one pod at a time, always in the worst violated view, until none improves.

        Views wait in a heap keyed by excess; an entry is stale once its view's counts have
        changed. A view where no move helps is set aside until its counts change.
        """
        moves: list[Move] = []
        state = self.state
        heap = [(-state.excess(v), v, state.version[v]) for v in self.violated]
        heapq.heapify(heap)
        while heap:
            neg, v, version = heapq.heappop(heap)
            if version != state.version[v]:
                continue  # stale; a fresh entry was pushed when the view changed
            move = self.best_move(v)
            if move is None:
                continue  # stuck until its counts change
            moves.append(move)
            for w in state.selector_views(move.pod):
                if w in state.rank_views and state.excess(w) > 0:
                    heapq.heappush(heap, (-state.excess(w), w, state.version[w]))
            if state.version[v] == version:  # the move did not touch v's counts
                heapq.heappush(heap, (neg, v, version))
        return moves


def trim(planner: Planner, moves: list[Move]) -> list[Move]:
    """Drop trailing moves that end no better than an earlier prefix (unreachable targets),
    and take them back in the planner's state, which ``run`` left after all the moves.

    The objective is the worst excess over the violated views, then their summed excess.
    """
    state = planner.state
    if not any(state.excess(v) for v in planner.violated):
        return moves  # every violated view ends balanced: no prefix does better
    replay = state.fresh()
    excess = {v: replay.excess(v) for v in planner.violated}
    levels: Counter[int] = Counter(excess.values())
    total = sum(excess.values())
    objectives = [(max(levels), total)]
    for m in moves:
        replay.remove(m.pod)
        if m.target is not None:
            replay.add(m.pod, m.target)
        for w in replay.selector_views(m.pod):
            if w in excess:
                new = replay.excess(w)
                levels[excess[w]] -= 1
                levels[new] += 1
                total += new - excess[w]
                excess[w] = new
        objectives.append((max(k for k, n in levels.items() if n > 0), total))
    kept = moves[: objectives.index(objectives[-1])]
    for m in reversed(moves[len(kept) :]):
        if m.target is not None:
            state.remove(m.pod)
        state.add(m.pod, m.source)
    return kept


def lower_bound(planner: Planner, final: SimState) -> int:
    """No plan that brings these views within maxSkew evicts fewer pods.

    An eviction changes only the views whose selector matches the pod, so violated views
    that never share a pod form independent groups: the bound is the sum over groups of the
    largest distance to balance (:func:`rebalancer.core.minimal.min_moves`) within each group.
    Groups the plan cannot bring within maxSkew (pinned pods, no room) have no such bound
    and add nothing, so the plan is then not reported as proven minimal.
    """
    violated = set(planner.violated)
    parent = {v: v for v in violated}

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    state = planner.state
    linked_once: set[int] = set()  # pods of one template share their selector_views answer
    for v in planner.violated:
        for i in planner.analysis.views[v].members:
            views_of_pod = state.selector_views(i)
            if id(views_of_pod) in linked_once:
                continue
            linked_once.add(id(views_of_pod))
            linked = [w for w in views_of_pod if w in violated]
            for w in linked[1:]:
                parent[find(w)] = find(linked[0])
    best: dict[int, int] = {}
    unresolved: set[int] = set()
    for v in planner.violated:
        root = find(v)
        best[root] = max(best.get(root, 0), planner.distance_at_start(v))
        if final.excess(v) > 0:
            unresolved.add(root)
    return sum(b for root, b in best.items() if root not in unresolved)


def view_report(view: View, counts: dict[str, int], declared: tuple[str, ...]) -> ViewReport:
    """The view with ``counts``; ``declared``: the sorted keys of the pods declaring it."""
    spec = view.spec
    c = spec.constraint
    domains = len(view.domains)
    return ViewReport(
        namespace=spec.namespace,
        topology_key=c.topology_key,
        max_skew=c.max_skew,
        when_unsatisfiable=c.when_unsatisfiable,
        selector=selector_string(c.selector),
        min_domains=c.min_domains,
        domains=tuple(view.all_counts(counts).items()),
        global_min=global_min(counts, domains, c.min_domains, c.hard),
        skew=skew_of(counts, domains, c.min_domains, c.hard),
        pods=declared,
    )


def plan(
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    *,
    evicted_before: Sequence[Eviction] = (),
) -> Plan:
    """The minimal eviction plan for ``snapshot`` under ``policy`` at time ``now`` (pure).

    Planning creates no reference cycles, so the cyclic garbage collector is paused: with a
    large snapshot in memory each of its full passes would cost more than the planning.
    """
    with gc_paused():
        return _plan(snapshot, policy, now, evicted_before)


def _plan(snapshot: Snapshot, policy: Policy, now: float, before: Sequence[Eviction]) -> Plan:
    planner = Planner(snapshot, policy, now, before)
    analysis = planner.analysis
    pods = analysis.pods
    if not planner.violated:
        return Plan((), (), (), (), 0)
    moves = trim(planner, planner.run())
    waves = assign_waves(
        planner.state.fresh(),
        planner.analysis.views,
        planner.pdbs,
        planner.ctx.budgets.allowed,
        moves,
    )
    evictions = [_eviction(planner, m, wave) for m, wave in zip(moves, waves, strict=True)]
    final = planner.state
    views, violated = analysis.views, planner.violated
    declared = {v: tuple(sorted(pods[i].key for i in views[v].declarers)) for v in violated}
    violations = tuple(view_report(views[v], views[v].counts, declared[v]) for v in violated)
    after = tuple(view_report(views[v], final.counts[v], declared[v]) for v in violated)
    lower = lower_bound(planner, final)
    skipped = _skipped(planner, {m.pod for m in moves})
    notes = tuple(sorted(planner.limit_notes))
    return Plan(tuple(evictions), skipped, violations, after, lower, notes)


def _eviction(planner: Planner, m: Move, wave: int) -> Eviction:
    """The eviction record, with its reason (the counts just before the move)."""
    analysis = planner.analysis
    pod = analysis.pods[m.pod]
    view = analysis.views[m.view]
    spec = view.spec
    domain = view.node_domain[m.source]
    target_domain = (
        analysis.nodes[m.target].labels.get(spec.topology_key, "?") if m.target else None
    )
    landing = (
        f"replacement expected in {target_domain} (node {m.target})"
        if m.target
        else "replacement waits for new capacity (nodeFit: false)"
    )
    priority = planner.ctx.priority(pod)
    reason = (
        f"{spec.topology_key}={domain} holds {m.source_count} pods matching "
        f"{selector_string(spec.constraint.selector)}, global min {m.global_min}, "
        f"skew {m.source_count - m.global_min} > maxSkew {spec.max_skew}; {landing}; "
        f"priority {priority}"
    )
    budget_note = planner.ctx.budgets.note(pod)
    if budget_note:
        reason += f"; {budget_note}"
    return Eviction(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        node=m.source,
        priority=priority,
        reason=reason,
        wave=wave,
        workload=workload_of(pod, planner.owners),
        domain=domain,
        topology_key=spec.topology_key,
        target_node=m.target,
        grace_period_seconds=planner.policy.grace_period_seconds,
        pdb="".join(planner.ctx.budgets.pdbs[k].name for k in planner.pdbs(m.pod)),
    )


def _skipped(planner: Planner, moved: set[int]) -> tuple[Skip, ...]:
    """Pods in violated views that were not evicted because a rule or the fit forbids it."""
    pods = planner.analysis.pods
    seen: set[int] = set()
    out: list[Skip] = []
    for v in planner.violated:
        for i in planner.analysis.views[v].members:
            if i in seen or i in moved:
                continue
            seen.add(i)
            reason = planner.skip(i) or planner.no_fit.get(i)
            if reason is not None:
                p = pods[i]
                out.append(Skip(p.namespace, p.name, p.uid, p.node_name, reason))
    out.sort(key=lambda s: (s.namespace, s.name))
    return tuple(out)
