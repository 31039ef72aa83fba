"""Grouping a plan's moves into waves that are safe against any legal scheduler choice (pure).

The real scheduler does not score hard spread constraints, so a replacement may land in any
legal domain, not the least populated one. A wave therefore holds only evictions whose
replacement cannot return to the domain it left, whatever legal node the scheduler picks for
it and for the other replacements of the same wave; the next wave is re-planned from the live
state once the replacements have landed (SPEC §3).

The check is a bound: after the wave's evictions, the other ``k`` replacements can raise a
view's global minimum at most to the water level ``m`` that ``k`` pods reach when poured into
the emptiest domains. If the source domain, with this pod gone, still has
``count + 1 - m > maxSkew``, the replacement's own constraint keeps it out of that domain.
Example, maxSkew 3 and counts [3, 9, 0, 9]: the plan evicts 3 pods from one 9 and 2 from
the other, leaving [3, 6, 0, 7]; the 4 other replacements can lift the minimum to at most 3
(the empty zone takes 3, then one more pod cannot lift two zones), and 6 + 1 - 3 = 4 > 3, so
all five evictions fit one wave.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rebalancer.core.minimal import water_level
from rebalancer.core.moves import Move
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import View


class WaveBuilder:
    """Builds waves one move at a time over ``base``, the simulated state before the plan."""

    def __init__(
        self,
        base: SimState,
        views: Sequence[View],
        pdbs_of: Callable[[int], Sequence[int]],
        pdb_allowed: Sequence[int],
    ) -> None:
        self.base = base
        self.views = views
        self.pdbs_of = pdbs_of
        self.pdb_allowed = pdb_allowed
        self.current: list[Move] = []
        self.removed: dict[tuple[int, str], int] = {}  # (view, domain) -> wave members leaving
        self.pdb_used: dict[int, int] = {}  # PDB -> wave members it covers
        self.wave_views: dict[int, int] = {}  # view -> wave members it counts

    def cannot_return(self, m: Move) -> bool:
        """Whether m's replacement is kept out of its source domain by its own constraint."""
        if m.view not in self.base.own_views.get(m.pod, ()):
            return False
        view = self.views[m.view]
        spec = view.spec
        if not spec.hard:
            return False
        source = view.node_domain[m.source]
        base = self.base.counts[m.view]
        removed = self.removed
        counts = {d: c - removed.get((m.view, d), 0) for d, c in base.items()}
        counts[source] -= 1
        others = self.wave_views.get(m.view, 0)
        if len(view.domains) < spec.constraint.min_domains:
            ceiling = 0
        else:
            empty = len(view.domains) - len(base)
            ceiling = water_level(list(counts.values()), others, empty)
        return counts[source] + 1 - ceiling > spec.max_skew

    def pdb_room(self, m: Move) -> bool:
        """At most ``disruptionsAllowed`` evictions spending one PDB in a wave (SPEC §3); the
        planner never plans a pod whose PDB allows none."""
        used, allowed = self.pdb_used, self.pdb_allowed
        return all(used.get(k, 0) < allowed[k] for k in self.pdbs_of(m.pod))

    def join(self, m: Move) -> None:
        self.current.append(m)
        for v in self.base.selector_views(m.pod):
            self.wave_views[v] = self.wave_views.get(v, 0) + 1
            d = self.base.domain(v, m.source)
            if d is not None:
                self.removed[(v, d)] = self.removed.get((v, d), 0) + 1
        for k in self.pdbs_of(m.pod):
            self.pdb_used[k] = self.pdb_used.get(k, 0) + 1

    def close(self) -> None:
        for m in self.current:
            self.base.remove(m.pod)
        for m in self.current:
            if m.target is not None:
                self.base.add(m.pod, m.target)
        self.current = []
        self.removed.clear()
        self.pdb_used.clear()
        self.wave_views.clear()


def assign_waves(
    base: SimState,
    views: Sequence[View],
    pdbs_of: Callable[[int], Sequence[int]],
    pdb_allowed: Sequence[int],
    moves: Sequence[Move],
) -> list[int]:
    """The wave number (from 1) of each move, in plan order.

    ``base`` is the simulated state before the plan, ``views`` the analysis's views,
    ``pdbs_of(pod)`` the PodDisruptionBudgets whose budget evicting a pod spends and
    ``pdb_allowed`` their budget per wave (:func:`rebalancer.core.budgets.budget`).

    A move whose replacement could return to its domain (raising a pinned view's global
    minimum usually is one) goes alone in its wave: it cannot make the spread worse, but the
    next wave must be re-planned from where the scheduler really put it.
    """
    builder = WaveBuilder(base, views, pdbs_of, pdb_allowed)
    wave = 1
    out: list[int] = []
    alone = False
    for m in moves:
        safe = builder.cannot_return(m)
        if builder.current and (alone or not (safe and builder.pdb_room(m))):
            builder.close()
            wave += 1
        alone = not safe
        builder.join(m)
        out.append(wave)
    return out
