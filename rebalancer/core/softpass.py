"""The soft pass: soft views, when the policy opts them in, come second (SPEC §3.6) (pure).

The hard views' groups are formed and planned exactly as with soft views off
(:mod:`rebalancer.core.upfront`), and a soft view never blocks a hard view's move
(:meth:`rebalancer.core.planpass.PlanningPass.try_move`). This pass comes second, in both
phases of the planning:

* up front (:func:`plan_soft`), a group whose pods soft views count is replanned exactly with
  them (:func:`rebalancer.core.joint.search_then_soft`): the hard views' minimum first, then
  the fewest further evictions for the soft views, keeping the hard views within maxSkew; the
  replan is kept only when its hard part is as large as the plan without soft views. The soft
  views left over are planned in groups of their own.
* in the search, a second pass once no hard view can move (:func:`rebalancer.core.planner.run`
  runs :func:`rebalancer.core.search.search` again): the soft views, a move for them never
  making a hard view worse, and a hard view a soft move changes tried again first.
"""

from __future__ import annotations

from rebalancer.core.groups import violated_groups
from rebalancer.core.ids import ViewId
from rebalancer.core.jointplan import plan_group as plan_joint
from rebalancer.core.planpass import PlanningPass
from rebalancer.core.upfront import Planned, plan_group


def plan_soft(p: PlanningPass, planned: Planned) -> None:
    """Replan the hard views' groups ``planned`` up front with the soft views that count their
    pods, then plan the soft views left over; :attr:`PlanningPass.groups` then holds the
    violated views in groups that share no pod."""
    views = p.analysis.views
    joined: set[ViewId] = set()  # soft views planned with a hard group
    for group, size in planned:
        if size is not None:
            joined.update(_with_soft(p, group, size))
    left = [v for v in p.violated if not views[v].spec.hard and v not in joined]
    soft_groups = violated_groups(p.state, left)
    for group in soft_groups:
        if not _with_soft(p, group, 0):
            plan_group(p, group)
    p.groups = _disjoint(p, p.groups + soft_groups)


def _with_soft(p: PlanningPass, group: list[ViewId], hard_size: int) -> list[ViewId]:
    """Hard first, then soft (SPEC §3.6): replan a group exactly with the soft views that
    count its pods, keeping it only when its hard views need exactly ``hard_size``
    evictions, the number planned with soft views off (0 for a group of soft views);
    the soft views then join the group. Returns them (none when not kept)."""
    views = p.analysis.views
    joint = plan_joint(p.grouping(), group, with_soft=True)
    if joint is None or joint.minimum - joint.soft_steps != hard_size:
        return []
    p.planned.pop(group[0], None)
    for member in [w for w, (first, _) in p.joint.items() if first == group[0]]:
        del p.joint[member]
    for member in joint.views:
        p.joint[member] = (group[0], joint)
    soft = [w for w in joint.views if not views[w].spec.hard]
    group.extend(w for w in soft if w in p.violated and w not in group)
    return soft


def _disjoint(p: PlanningPass, planned: list[list[ViewId]]) -> list[list[ViewId]]:
    """The violated views in groups that share no pod (the lower bound sums over them,
    :func:`~rebalancer.core.outcome.lower_bound`), from the groups planned hard first,
    then soft: a group planned whole keeps its order (its first view keys its proven
    minimum); views planned apart that share pods are one group again."""
    whole = {frozenset(group): group for group in planned}
    return [whole.get(frozenset(group), group) for group in violated_groups(p.state, p.violated)]
