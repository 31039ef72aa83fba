"""The victims a planning pass chooses up front, per group of violated views (SPEC §3.5)
(pure).

The violated views are split into groups that share pods
(:func:`rebalancer.core.groups.violated_groups`); groups never interact through counts.

* A group of views over the same small workload (zone and hostname constraints, say) is
  planned to its joint minimum by exact search (:mod:`rebalancer.core.jointplan`,
  :mod:`rebalancer.core.joint`), victims chosen over every minimal end state.
* A single view gets its victims chosen over every minimal plan, across all its domains
  (:mod:`rebalancer.core.victims`).

The search (:mod:`rebalancer.core.search`) makes these moves first; a group planned neither
way, or one whose chosen step does not work out in the simulation, is left to the move-by-move
search. The hard views' groups are planned here exactly as with soft views off; the soft pass
(:mod:`rebalancer.core.softpass`) replans them with soft views afterwards.
"""

from __future__ import annotations

from rebalancer.core.groups import violated_groups
from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.jointplan import plan_group as plan_joint
from rebalancer.core.planpass import PlanningPass
from rebalancer.core.victims import DomainPods, single_view_victims

Planned = list[tuple[list[ViewId], int | None]]
"""Each group of views planned up front, with the number of evictions planned for it (None:
left to the move-by-move search)."""


def plan_up_front(p: PlanningPass) -> Planned:
    """Plan the groups of the hard violated views (they are :attr:`PlanningPass.groups` now;
    soft views come in the soft pass)."""
    views = p.analysis.views
    p.groups = violated_groups(p.state, [v for v in p.violated if views[v].spec.hard])
    return [(group, plan_group(p, group)) for group in p.groups]


def plan_group(p: PlanningPass, group: list[ViewId]) -> int | None:
    """Plan a group up front: its exact joint plan, or the victims of its one view; the
    number of evictions planned, or None when the group is left to the move-by-move
    search."""
    if len(group) > 1 or _declares_more(p, group[0]):
        joint = plan_joint(p.grouping(), group)
        if joint is not None:
            for member in group:
                p.joint[member] = (group[0], joint)
            return joint.minimum
    if len(group) == 1:
        victims = plan_victims(p, group[0])
        if victims:
            p.planned[group[0]] = list(victims)
            return len(victims)
    return None


def plan_victims(p: PlanningPass, v: ViewId) -> list[PodId] | None:
    """The best victims over every minimal plan for view v alone (SPEC §3.4), chosen before
    any move; None when the formula's band cannot be reached with the evictable pods."""
    state = p.state
    key, evictable = p.ranking.key, p.ranking.evictable
    view = p.analysis.views[v]
    c = view.spec.constraint
    domains: list[DomainPods] = []
    for domain, count in state.counts[v].items():
        # Whether a victim could return is replayed per plan by single_view_victims;
        # the key only says whether the view is one of the pod's own hard constraints.
        pods = sorted((key(i, v, c.hard), i) for i in state.members(v, domain) if evictable(i))
        domains.append(DomainPods(count, pods))
    # A canonical order (fullest first, then by best victim): equal plans are then
    # found in the same order whatever the order of the input, and never by name.
    domains.sort(key=lambda dom: (-dom.size, not dom.evictable, dom.evictable[:1]))
    return single_view_victims(
        domains,
        empty=len(view.domains) - len(state.counts[v]),
        max_skew=c.max_skew,
        band_forced_zero=c.hard and len(view.domains) < c.min_domains,
        moves=p.distances.at_start(v),
    )


def _declares_more(p: PlanningPass, v: ViewId) -> bool:
    """Whether the pods view v counts declare other hard constraints besides it."""
    members = p.analysis.views[v].members
    if not members:
        return False
    views = p.analysis.views
    return any(w != v and views[w].spec.hard for w in p.state.own_views.get(members[0], ()))
