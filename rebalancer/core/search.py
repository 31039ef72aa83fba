"""The move-by-move search of a planning pass (pure).

Views wait in a heap, the worst first (the most above its maxSkew); each turn the worst view
gets one move (:func:`best_move`): the next step of its group's exact joint plan, or the next
of the victims chosen up front for it (:mod:`rebalancer.core.upfront`), or else the search
evicts one pod at a time from the most populated domain of the view, lets the scheduler
simulation place its replacement, and keeps the move only if it lowers that view's distance to
balance (:func:`rebalancer.core.minimal.min_moves`) without making any other considered view
worse (:meth:`rebalancer.core.planpass.PlanningPass.try_move`). An entry is stale once its
view's counts have changed; a view where no move helps is set aside until its counts change.
Moves of all groups are made one at a time, in one simulation.

The search runs twice (:func:`rebalancer.core.planner.run`): first over the hard views, the
soft views its moves touch set aside (:func:`search`'s ``later``), then, with soft views opted
in, over the soft views (the soft pass, :mod:`rebalancer.core.softpass`), where a hard view a
soft move changes is tried again first (SPEC §3.6).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from rebalancer.core.ids import Domain, PodId, ViewId
from rebalancer.core.limits import workload_of
from rebalancer.core.moves import Move
from rebalancer.core.plan import SkipReason
from rebalancer.core.planpass import PlanningPass

Entry = tuple[bool, int, ViewId, int]
"""A view waiting in the heap: (soft, -excess, the view, its counts' version then)."""


def entries(p: PlanningPass, views: Iterable[ViewId]) -> list[Entry]:
    """The heap entries of ``views`` as they stand (hard views before soft, worst first)."""
    state = p.state
    all_views = p.analysis.views
    return [(not all_views[v].spec.hard, -state.excess(v), v, state.version[v]) for v in views]


def search(p: PlanningPass, heap: list[Entry], later: list[Entry] | None = None) -> list[Move]:
    """Move one pod at a time, always in the worst view of ``heap``, until none improves.

    A move's entries for the views it changed that are still above their maxSkew join the
    heap, but with ``later`` given, a soft view's entry goes there instead (the soft pass
    searches it). The order of the heap, hard before soft, then the most above its maxSkew,
    decides; so searching the hard views with ``later``, then the soft ones and ``later``,
    makes the moves one heap over all of them makes.
    """
    moves: list[Move] = []
    state = p.state
    views = p.analysis.views
    heapq.heapify(heap)
    while heap:
        soft, neg, v, version = heapq.heappop(heap)
        if version != state.version[v]:
            continue  # stale; a fresh entry was pushed when the view changed
        move = best_move(p, v)
        if move is None:
            continue  # stuck until its counts change
        moves.append(move)
        for w in state.selector_views(move.pod):
            if w in state.rank_views and state.excess(w) > 0:
                entry = (not views[w].spec.hard, -state.excess(w), w, state.version[w])
                if later is not None and entry[0]:
                    later.append(entry)
                else:
                    heapq.heappush(heap, entry)
        if state.version[v] == version:  # the move did not touch v's counts
            heapq.heappush(heap, (soft, neg, v, version))
    return moves


def _returns_blocked(p: PlanningPass, v: ViewId, domain: Domain) -> bool:
    """Whether view v, as a pod's own hard constraint, forbids the replacement of a pod
    leaving ``domain`` to come back there."""
    view = p.analysis.views[v]
    spec = view.spec
    if not spec.hard:
        return False
    after = p.state.counts[v].get(domain, 0) - 1
    if len(view.domains) < spec.constraint.min_domains:
        gmin_after = 0
    else:
        gmin_after = min(p.state.gmin(v), after)
    return after + 1 - gmin_after > spec.max_skew


def _planned_move(p: PlanningPass, v: ViewId) -> Move | None:
    """The next of the victims chosen up front for view v, in the order chosen with
    them; None, and the plan dropped, as soon as one does not help."""
    victims = p.planned.get(v)
    while victims:
        i = victims.pop(0)
        if not p.ranking.evictable(i) or p.limited(i):
            continue
        result = p.try_move(i, v)
        if isinstance(result, Move):
            return p.accept(result)
        p.note_no_fit(i, result)
        break
    p.planned[v] = []
    return None


def _domains_in_order(
    p: PlanningPass, v: ViewId, floor: int
) -> Iterator[tuple[Domain, list[PodId]]]:
    """View v's domains holding more than ``floor`` pods, fullest first, with their
    evictable pods in victim order; among domains of equal count, the one with the better
    first victim first (never by name)."""
    state = p.state
    key, evictable = p.ranking.key, p.ranking.evictable
    counts = state.counts[v]
    by_count: dict[int, list[Domain]] = {}
    for domain, count in counts.items():
        by_count.setdefault(count, []).append(domain)
    for count in sorted(by_count, reverse=True):
        if count <= floor:
            return
        level = []
        for domain in by_count[count]:
            blocked = _returns_blocked(p, v, domain)
            keyed = sorted(
                (key(i, v, blocked), i) for i in state.members(v, domain) if evictable(i)
            )
            level.append((keyed[0][0] if keyed else None, domain, [i for _, i in keyed]))
        level.sort(key=lambda entry: (entry[0] is None, entry[0] or ()))
        for _, domain, members in level:
            yield domain, members


def _joint_move(p: PlanningPass, v: ViewId) -> Move | None:
    """The next step of the exact joint plan of v's group; None, and the plan dropped
    (the group left to the move-by-move search, unproven), if a step cannot be made."""
    found = p.joint.get(v)
    if found is None or not found[1].steps:
        return None
    first, joint = found
    soft_step = len(joint.steps) <= joint.soft_steps
    i, target = joint.steps.popleft()
    group = [w for w, (f, _) in p.joint.items() if f == first]
    # a soft step (the last ones of a replan with soft views) is credited to a soft view
    views = p.analysis.views
    group = [w for w in group if views[w].spec.hard != soft_step] or group
    move = None
    if p.ranking.evictable(i) and not p.limited(i):
        move = p.place_at(i, group, target)
    if move is None:
        joint.steps.clear()
        p.proven.pop(first, None)
        return None
    if not joint.steps:
        p.proven[first] = joint.minimum
    return p.accept(move)


def best_move(p: PlanningPass, v: ViewId) -> Move | None:
    """The next move for view v: the next step of its group's exact joint plan, else the
    next of the victims chosen up front for it, else the first pod, from its fullest domain
    down, whose move helps v and makes no other view worse; None when no move helps."""
    joint = _joint_move(p, v)
    if joint is not None:
        return joint
    planned = _planned_move(p, v)
    if planned is not None:
        return planned
    state = p.state
    for _domain, members in _domains_in_order(p, v, state.gmin(v) + 1):
        failed: dict[object, SkipReason] = {}
        for i in members:
            pod = p.analysis.pods[i]
            workload = workload_of(pod, p.owners)
            node = state.placement[i]
            if p.limited(i):
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
                p.note_no_fit(i, known)
                continue
            result = p.try_move(i, v)
            if isinstance(result, Move):
                return p.accept(result)
            failed[(template, node)] = result
            p.note_no_fit(i, result)
    return None
