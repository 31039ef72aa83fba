"""Each view's distance to balance, with the pods that cannot move as floors (pure).

A view's distance (:func:`rebalancer.core.minimal.min_moves`) is the fewest evictions that
bring its counts within maxSkew. Pods that cannot move raise it: no domain can go below the
pods pinned there. A pod of a view is pinned when a rule forbids its eviction (it has a skip
reason, :meth:`~rebalancer.core.ranking.VictimRanking.skip`) or when the plan already moved it
(its replacement stays where it landed: a pod is moved at most once).

:class:`PinnedDistances` keeps, for the pass:

* ``_at_start[v]``: view v's distance before any move (its starting counts, its unevictable
  pods as floors), fixed for the pass.
* ``_pinned[v]``, per domain, the pods of view v that cannot move now. Built on first use from
  the view's unevictable pods (where they run from the start) and ``_moved_into[v]`` (where
  their replacements are now); from then on :meth:`~PinnedDistances.pin` and
  :meth:`~PinnedDistances.unpin` keep it equal to that, and to the pod of a move being tried,
  in every view whose selector matches the pod.
* ``_moved_into[v]``: the pods of the moves kept so far that view v's selector matches, in
  the order of the moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from rebalancer.core.ids import Domain, PodId, ViewId
from rebalancer.core.minimal import min_moves
from rebalancer.core.plan import SkipReason
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import Analysis


class PinnedDistances:
    """The distance to balance of each view of one pass, at its start and as moves are made
    (see the module for what is pinned and when)."""

    def __init__(
        self,
        analysis: Analysis,
        state: SimState,
        skip: Callable[[PodId], SkipReason | None],
    ) -> None:
        """``state``: the pass's simulation; ``skip``: the rule that forbids evicting a pod."""
        self.analysis = analysis
        self.state = state
        self.skip = skip
        self._at_start: dict[ViewId, int] = {}
        self._pinned: dict[ViewId, Counter[Domain]] = {}
        self._moved_into: dict[ViewId, list[PodId]] = {}

    def _floors(self, v: ViewId) -> Counter[Domain]:
        """View v's pods that no rule lets move, per domain."""
        view = self.analysis.views[v]
        pods = self.analysis.pods
        return Counter(
            view.node_domain[pods[i].node_name or ""]
            for i in view.members
            if self.skip(i) is not None
        )

    def _distance(self, v: ViewId, counts: dict[Domain, int], skew: int, floors: int) -> int:
        view = self.analysis.views[v]
        c = view.spec.constraint
        empty = len(view.domains) - len(counts)
        return min_moves(list(counts.values()), skew, c.min_domains, c.hard, floors, empty=empty)

    def from_start(self, v: ViewId, skew: int) -> int:
        """View v's distance from its start to ``max(maxSkew, skew)``: a lower bound on the
        evictions that bring it there."""
        view = self.analysis.views[v]
        skew = max(view.spec.max_skew, skew)
        return self._distance(v, view.counts, skew, max(self._floors(v).values(), default=0))

    def at_start(self, v: ViewId) -> int:
        """View v's distance to balance before any move."""
        found = self._at_start.get(v)
        if found is None:
            found = self._at_start[v] = self.from_start(v, 0)
        return found

    def pinned(self, v: ViewId) -> Counter[Domain]:
        """Pods of view v per domain that cannot move now."""
        found = self._pinned.get(v)
        if found is None:
            found = self._floors(v)
            state = self.state
            for i in self._moved_into.get(v, ()):
                node = state.placement.get(i)
                domain = state.domain(v, node) if node is not None else None
                if domain is not None:
                    found[domain] += 1
            self._pinned[v] = found
        return found

    def now(self, v: ViewId) -> int:
        """View v's distance to balance from its counts now."""
        skew = self.analysis.views[v].spec.max_skew
        return self._distance(
            v, self.state.counts[v], skew, max(self.pinned(v).values(), default=0)
        )

    def pin(self, i: PodId, node: str) -> None:
        """Pod i's replacement is on ``node``, and stays: count it as pinned there."""
        self._count(i, node, 1)

    def unpin(self, i: PodId, node: str) -> None:
        """Take back :meth:`pin` (a move tried and not kept)."""
        self._count(i, node, -1)

    def _count(self, i: PodId, node: str, delta: int) -> None:
        state = self.state
        for w in state.selector_views(i):
            found = self._pinned.get(w)
            domain = state.domain(w, node)
            if found is not None and domain is not None:
                found[domain] += delta

    def moved(self, i: PodId) -> None:
        """A move of pod i is kept: views built later count it where it is then."""
        for w in self.state.selector_views(i):
            self._moved_into.setdefault(w, []).append(i)
