"""Planning a group of views that share pods to their joint minimum (SPEC §3.5).

:func:`plan_group` checks that the group is one the exact search models faithfully, builds the
:class:`~rebalancer.core.joint.JointProblem`, picks the best victims over every minimal end
state (:mod:`rebalancer.core.victims`); the planner then makes the winning sequence in its
simulation, checking every placement against the real filters. A group the search does not
model (pods of several templates, views over different nodes, other considered views counting
the pods, too large) or does not solve within its budget is left to the planner's move-by-move
search; the planner then reports the largest distance over the group's views as the bound.

Victims: every end state at the minimum is a choice of how many pods each node gives; each
node gives its best pods (:class:`~rebalancer.core.victims.VictimKey`) and the end states are
compared by :func:`~rebalancer.core.victims.plan_key`, then by evenness (each view's counts
sorted from highest, compared lexicographically), never by a node or domain name. Every victim
of such a group declares all the group's views; whether one could return depends on the order
the search found, so that criterion is not compared here.

The model is faithful when: every view the pods declare as a hard constraint (the group's
violated views among them; the search keeps all of them within maxSkew) counts the same pods
on the same nodes; the pods declare the same constraints, so their filter is these views; no
other considered view counts them; and they share one template (static filters and requests),
so that a node's room is a number of pods. Nodes holding none of the pods are interchangeable
when they agree on every domain except one-node ones (hostname), on the filters and on room:
the search models as many of each kind as pods could move (some minimal plan leaves the others
empty, and an empty node's domain counts 0 in the model as in the cluster).
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.joint import (
    MAX_ELIGIBLE,
    MAX_NODES,
    MAX_PODS,
    MAX_VISITS,
    JointProblem,
    JointView,
    Step,
    domain_counts,
    search_then_soft,
)
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import Analysis
from rebalancer.core.victims import PlanKey, VictimKey, plan_key

UNLIMITED = 1 << 30


@dataclass(slots=True)
class SearchBudget:
    """The exact search's budget over one plan, and how its groups were planned (plan())."""

    hard_visits: int = MAX_VISITS  # states left for the exact search of hard views
    soft_visits: int = MAX_VISITS  # and for its soft views, when the policy opts them in
    stats: dict[str, float] = field(default_factory=lambda: defaultdict(float))


@dataclass(frozen=True, slots=True)
class GroupPlanning:
    """What planning a group reads of the planning pass, and the budget it spends. Made for
    each group: it refers to the pass, which keeps no reference to it (no cycle to collect)."""

    analysis: Analysis
    state: SimState  # the planner's simulation, as it stands when the group is planned
    node_fit: bool  # the policy's nodeFit: replacements need room
    evictable: Callable[[PodId], bool]  # pod -> whether it may be evicted now
    victim_key: Callable[[PodId, ViewId, bool], VictimKey]  # the planner's victim order
    budget: SearchBudget


def _problem(
    ctx: GroupPlanning, group: list[ViewId], with_soft: bool = False
) -> tuple[JointProblem, list[str], list[ViewId]] | None:
    """The search problem, its nodes (by index) and the views it models; None when the group
    is not one the search models faithfully (see the module docstring).

    Without ``with_soft`` considered soft views are left out as if the policy left them out
    (the hard views' plan is the one they get with soft views off); with it, every considered
    soft view counting the pods is modelled as a soft view of the problem, and there must be
    one."""
    state = ctx.state
    views = ctx.analysis.views
    members = views[group[0]].members
    if not members or len(members) > MAX_PODS:
        return None
    first = members[0]
    own = state.own_views.get(first, [])
    modelled = [w for w in own if views[w].spec.hard]
    soft = _soft_views(ctx, first) if with_soft else []
    if with_soft and not soft:
        return None
    if not set(group) <= set(modelled) | set(soft):
        return None
    node_domain = views[(modelled + soft)[0]].node_domain
    if len(node_domain) > MAX_ELIGIBLE:
        return None
    for w in modelled + soft:
        if views[w].members != members or views[w].node_domain.keys() != node_domain.keys():
            return None
    pods = ctx.analysis.pods
    statics = state.shared.static_nodes(first)
    requests = pods[first].requests
    wanted = set(modelled + soft)
    for i in members:
        if state.own_views.get(i) != own or pods[i].requests != requests:
            return None
        if state.shared.static_nodes(i) != statics:
            return None
        if any(
            w in state.rank_views and w not in wanted and (with_soft or views[w].spec.hard)
            for w in state.selector_views(i)
        ):
            return None
    occupied = {state.placement[i] for i in members}
    if len(occupied) > MAX_NODES:
        return None
    movable_total = sum(1 for i in members if ctx.evictable(i))
    rooms = {n: state.room(pods[first], n) if ctx.node_fit else UNLIMITED for n in node_domain}
    # Nodes holding none of the pods are interchangeable when they agree on every domain
    # except one-node domains (hostname), on the filters and on room (up to what could move):
    # keep as many of each kind as pods could move; the others stay empty in some minimal
    # plan, and their domains count 0 anyway.
    per_node = {w for w in modelled + soft if len(views[w].domains) == len(views[w].node_domain)}
    allowed = set(statics)
    kinds: dict[tuple[object, ...], list[str]] = {}
    for n in sorted(node_domain):
        if n in occupied or n not in allowed or rooms[n] == 0:
            continue
        kind = (
            tuple(views[w].node_domain[n] for w in modelled + soft if w not in per_node),
            min(rooms[n], movable_total),
        )
        kinds.setdefault(kind, []).append(n)
    twins_of: dict[str, str] = {}
    for same in kinds.values():
        for n in same[:movable_total]:
            twins_of[n] = same[0]
    nodes = sorted(occupied | twins_of.keys())
    if len(nodes) > MAX_NODES:
        return None
    index = {n: k for k, n in enumerate(nodes)}
    joint_views = []
    for w in modelled + soft:
        view = views[w]
        c = view.spec.constraint
        domain_index = {d: k for k, d in enumerate(view.domains)}
        joint_views.append(
            JointView(
                domain_of=tuple(domain_index[view.node_domain[n]] for n in nodes),
                domains=len(view.domains),
                max_skew=c.max_skew,
                forced_zero=c.hard and len(view.domains) < c.min_domains,
            )
        )
    start = [0] * len(nodes)
    movable = [0] * len(nodes)
    for i in members:
        k = index[state.placement[i]]
        start[k] += 1
        if ctx.evictable(i):
            movable[k] += 1
    cap = [start[k] + rooms[n] for k, n in enumerate(nodes)]
    problem = JointProblem(
        views=tuple(joint_views[: len(modelled)]),
        start=tuple(start),
        movable=tuple(movable),
        cap=tuple(cap),
        accepts=tuple(n in allowed for n in nodes),
        twins=tuple(index[twins_of[n]] if n in twins_of else -1 for n in nodes),
        soft=tuple(joint_views[len(modelled) :]),
    )
    return problem, nodes, modelled + soft


def _soft_views(ctx: GroupPlanning, first: PodId) -> list[ViewId]:
    """The considered soft views that count pod ``first``."""
    state = ctx.state
    views = ctx.analysis.views
    return [
        w for w in state.selector_views(first) if w in state.rank_views and not views[w].spec.hard
    ]


@dataclass(slots=True)
class JointPlan:
    """A group's minimal sequence: (pod to evict, node for its replacement) steps, which the
    planner makes one at a time, interleaved with other groups' moves."""

    steps: deque[tuple[PodId, str]]
    minimum: int  # proven once every step has been made
    views: list[ViewId]  # every view the search kept within maxSkew at the end
    soft_steps: int = 0  # the last steps, made for the soft views once the hard are within


def plan_group(
    ctx: GroupPlanning, group: list[ViewId], with_soft: bool = False
) -> JointPlan | None:
    """Plan ``group`` to its joint minimum, or None when the group is left to the
    move-by-move search.

    ``with_soft``: hard first, then soft (SPEC §3.6): the considered soft views counting the
    group's pods are planned too, after the hard views' minimum
    (:func:`~rebalancer.core.joint.search_then_soft`); None (nothing counted in the stats)
    when there are none, the search does not model them, the soft views cannot be brought
    within, or, for a group of soft views alone, the hard views are not within already."""
    built = _problem(ctx, group, with_soft)
    if built is None:
        if not with_soft:
            ctx.budget.stats["joint-fallback"] += 1
        return None
    problem, nodes, modelled = built
    started = time.perf_counter()
    # The soft views' searches have a budget of their own: the hard views' plans, and the
    # budget they spend, are the ones they get with soft views off.
    budget = ctx.budget.soft_visits if with_soft else ctx.budget.hard_visits
    result = search_then_soft(problem, budget)
    ctx.budget.stats["joint-seconds"] += time.perf_counter() - started
    ctx.budget.stats["joint-soft-visits" if with_soft else "joint-visits"] += result.visits
    if with_soft:
        ctx.budget.soft_visits = max(0, budget - result.visits)
    else:
        ctx.budget.hard_visits = max(0, budget - result.visits)
    hard_group = any(ctx.analysis.views[v].spec.hard for v in group)
    if result.minimum is None or (result.hard and not hard_group):
        if not with_soft:
            ctx.budget.stats["joint-unsolved" if result.complete else "joint-fallback"] += 1
        return None
    ctx.budget.stats["joint-soft-exact" if with_soft else "joint-exact"] += 1
    views = ctx.analysis.views
    by_node: list[list[tuple[VictimKey, PodId]]] = [[] for _ in nodes]
    index = {n: k for k, n in enumerate(nodes)}
    for i in views[group[0]].members:
        if ctx.evictable(i):
            by_node[index[ctx.state.placement[i]]].append((ctx.victim_key(i, group[0], True), i))
    for pods in by_node:
        pods.sort()
    # Ends with the same victims: the most even one (each view's counts sorted from highest,
    # compared lexicographically), so that node and domain names decide nothing.
    best: tuple[tuple[PlanKey, tuple[tuple[int, ...], ...]], list[Step]] | None = None
    for (end, left), path in result.ends.items():
        chosen = [
            key for k, pods in enumerate(by_node) for key, _ in pods[: problem.movable[k] - left[k]]
        ]
        evenness = tuple(
            tuple(sorted(domain_counts(view, end), reverse=True))
            for view in problem.views + problem.soft
        )
        key = (plan_key(chosen)._replace(can_return=0), evenness)
        if best is None or key < best[0]:
            best = (key, path)
    assert best is not None  # a minimum comes with its end states
    steps: list[tuple[PodId, str]] = []
    taken = [0] * len(nodes)
    for source, target in best[1]:
        steps.append((by_node[source][taken[source]][1], nodes[target]))
        taken[source] += 1
    soft_steps = result.minimum - (result.hard or 0)
    return JointPlan(
        steps=deque(steps), minimum=result.minimum, views=modelled, soft_steps=soft_steps
    )
