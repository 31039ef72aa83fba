"""Grouping a plan's moves into waves that are safe against any legal scheduler choice (pure).

The real scheduler does not score hard spread constraints, so a replacement may land in any
legal domain, not the least populated one. A wave therefore holds only evictions that stay
safe whatever legal domain EACH of its replacements lands in, counted together: no replacement
of the wave can land in any domain the wave takes pods from (in the view the moves repair),
whatever legal domains all the wave's replacements pick, one after the other. The next wave is
re-planned from the live state once the replacements have landed (SPEC §3.9).

The check is a bound: after the wave's ``k`` evictions, the other ``k - 1`` replacements can
raise a view's global minimum at most to the water level ``m`` that ``k - 1`` pods reach when
poured into the emptiest domains. If every domain the wave takes pods from, with all the
wave's pods gone, still has ``count + 1 - m > maxSkew``, each replacement's own constraint
keeps it out of all of them. Checking each move against its own domain only is not enough:
zones [6, 7, 1] with maxSkew 2, a wave of two pods from the 6 and one from the 7 leaves
[4, 6, 1]; the replacements lift the minimum to 3 and the third may go to the 4 (4 + 1 - 3 =
2), undoing an eviction. So the third eviction waits for the next wave.
Example, maxSkew 3 and counts [3, 9, 0, 9]: the plan evicts 3 pods from one 9 and 2 from the
other, leaving [3, 6, 0, 7]; the 4 other replacements can lift the minimum to at most 3 (the
empty zone takes 3, then one more pod cannot lift two zones), and 6 + 1 - 3 = 4 > 3, so all
five evictions fit one wave.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rebalancer.core.ids import PodId, ViewId
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
        pdbs_of: Callable[[PodId], Sequence[int]],
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
        self.guarded: set[int] = set()  # views the wave's moves repair: their sources stay shut
        self.lowest: dict[int, int] = {}  # view -> fewest pods left in a domain the wave empties

    def _shut(self, v: ViewId, pod: PodId, source: str) -> bool:
        """Whether, with ``pod`` (on node ``source``) joining the wave, every domain the wave
        takes view v's pods from stays closed to every replacement of the wave that v counts,
        whatever legal domains they land in. Every such replacement must declare v itself."""
        if v not in self.base.own_views.get(pod, ()):
            return False
        view = self.views[v]
        spec = view.spec
        if not spec.hard:
            return False
        base = self.base.counts[v]
        removed = self.removed
        counts = {d: c - removed.get((v, d), 0) for d, c in base.items()}
        lowest = self.lowest.get(v)
        leaving = self.base.domain(v, source)
        if leaving is not None:
            counts[leaving] -= 1
            lowest = counts[leaving] if lowest is None else min(lowest, counts[leaving])
        if lowest is None:
            return True  # the wave takes none of v's pods: nothing to shut
        others = self.wave_views.get(v, 0)
        if len(view.domains) < spec.constraint.min_domains:
            ceiling = 0
        else:
            empty = len(view.domains) - len(base)
            ceiling = water_level(list(counts.values()), others, empty)
        return lowest + 1 - ceiling > spec.max_skew

    def safe(self, m: Move) -> bool:
        """Whether m can join the current wave: its own view's sources stay shut with it, and so
        do those of every view the wave already repairs that counts m's pod."""
        if not self._shut(m.view, m.pod, m.source):
            return False
        for w in self.base.selector_views(m.pod):
            if w != m.view and w in self.guarded and not self._shut(w, m.pod, m.source):
                return False
        return True

    def pdb_room(self, m: Move) -> bool:
        """At most ``disruptionsAllowed`` evictions spending one PDB in a wave (SPEC §3.10); the
        planner never plans a pod whose PDB allows none."""
        used, allowed = self.pdb_used, self.pdb_allowed
        return all(used.get(k, 0) < allowed[k] for k in self.pdbs_of(m.pod))

    def join(self, m: Move) -> None:
        self.current.append(m)
        self.guarded.add(m.view)
        for v in self.base.selector_views(m.pod):
            self.wave_views[v] = self.wave_views.get(v, 0) + 1
            d = self.base.domain(v, m.source)
            if d is not None:
                gone = self.removed[(v, d)] = self.removed.get((v, d), 0) + 1
                left = self.base.counts[v][d] - gone
                self.lowest[v] = min(self.lowest.get(v, left), left)
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
        self.guarded.clear()
        self.lowest.clear()


def assign_waves(
    base: SimState,
    views: Sequence[View],
    pdbs_of: Callable[[PodId], Sequence[int]],
    pdb_allowed: Sequence[int],
    moves: Sequence[Move],
) -> list[int]:
    """The wave number (from 1) of each move, in plan order.

    ``base`` is the simulated state before the plan, ``views`` the analysis's views,
    ``pdbs_of(pod)`` the PodDisruptionBudgets whose budget evicting a pod spends and
    ``pdb_allowed`` their budget per wave (:func:`rebalancer.core.budgets.budget`).

    A move that is not safe even alone (its replacement could return to its domain; raising a
    pinned view's global minimum usually is one) goes alone in its wave: it cannot make the
    spread worse, but the next wave must be re-planned from where the scheduler really put it.
    """
    builder = WaveBuilder(base, views, pdbs_of, pdb_allowed)
    wave = 1
    out: list[int] = []
    alone = False  # the current wave holds one move that is not safe even alone
    for m in moves:
        if builder.current and (alone or not (builder.pdb_room(m) and builder.safe(m))):
            builder.close()
            wave += 1
        if not builder.current:
            alone = not builder.safe(m)
        builder.join(m)
        out.append(wave)
    return out
