"""Views in groups that share pods: what the planner plans as one (pure).

Evicting a pod changes the counts of the views whose selector matches it, and of no other
view. So two views that count no pod in common never interact: each group of views linked
by shared pods is planned on its own (:mod:`rebalancer.core.jointplan` plans a group
exactly), and a lower bound over the groups is a sum
(:func:`rebalancer.core.outcome.lower_bound`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rebalancer.core.ids import ViewId
from rebalancer.core.simulate import SimState


def violated_groups(state: SimState, chosen: Sequence[ViewId]) -> list[list[ViewId]]:
    """The views ``chosen`` in groups that share pods (each group in the order of ``chosen``,
    the groups in the order of their first view). An eviction changes only the views whose
    selector matches the pod, so views of different groups are planned independently."""
    violated = set(chosen)
    parent = {v: v for v in violated}

    def find(v: ViewId) -> ViewId:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    linked_once: set[int] = set()  # pods of one template share their selector_views answer
    for v in chosen:
        for i in state.views[v].members:
            views_of_pod = state.selector_views(i)
            if id(views_of_pod) in linked_once:
                continue
            linked_once.add(id(views_of_pod))
            linked = [w for w in views_of_pod if w in violated]
            for w in linked[1:]:
                parent[find(w)] = find(linked[0])
    groups: dict[ViewId, list[ViewId]] = {}
    for v in chosen:
        groups.setdefault(find(v), []).append(v)
    return list(groups.values())
