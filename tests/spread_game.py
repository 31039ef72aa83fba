"""The adversarial limit of one hard spread constraint, by game search (written from
docs/spec.md §2-§3 alone; no planner code).

The game is played on the pods per domain of one view. Some pods may be pinned (they count but
are never evicted). Each turn the planner evicts any set of the movable pods (one wave); then
the scheduler places their replacements one at a time, each in ANY domain the filter allows at
that moment: ``count(d) + 1 - globalMin <= maxSkew`` (SPEC §2.4, one node per domain, room for
every pod), with every eviction of the wave already done. Replacements are movable. The game
ends when the view is within maxSkew. The adversarial limit is the fewest evictions the planner
can guarantee against every such scheduler: the minimax value over count vectors, found by
iterative deepening on the evictions left (:func:`adversarial_limit`).

Placing the replacements only after every eviction of the wave gives the scheduler the most
freedom: a domain a later eviction will leave is fuller before it, and the executor evicts one
pod of a workload at a time, each once the previous replacement is placed. It costs the planner
nothing: on small shapes the limit equals the limit when every wave holds one eviction (the
planner sees each landing before the next eviction; tests/test_adversarial_limit.py compares).

Worked example, maxSkew 2, counts [6, 7, 1]: evict one pod from the 7 and one from a 6; with
[5, 6, 1] left the filter admits only the 1 (1 + 1 - 1 <= 2), then the 2: [5, 6, 3]. Evict one
from the 6: [5, 5, 3] admits only the 3 (4 - 3 + 1 = 2, 5 + 1 - 3 = 3 > 2): [5, 5, 4]. Three
evictions, and no planner does with fewer (the cooperative minimum is 3), so the limit is 3.

:func:`can_force_balance` answers whether any finite number of evictions guarantees balance
(with pinned pods the scheduler may undo a move forever), by a fixpoint over every count vector.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

Counts = tuple[int, ...]


def global_min(counts: Counts, min_domains: int = 1) -> int:
    """The smallest count; 0 with fewer domains than minDomains."""
    return 0 if len(counts) < min_domains else min(counts)


def balanced(counts: Counts, max_skew: int, min_domains: int = 1) -> bool:
    """Whether no domain is more than maxSkew above the global minimum."""
    return max(counts) - global_min(counts, min_domains) <= max_skew


def landings(
    counts: Counts, removed: Counts, max_skew: int, min_domains: int = 1
) -> frozenset[Counts]:
    """Every count vector the scheduler can reach placing ``sum(removed)`` replacements one at a
    time in legal domains, after the pods ``removed`` (per domain) have left ``counts``."""
    frontier = {tuple(c - r for c, r in zip(counts, removed, strict=True))}
    for _ in range(sum(removed)):
        step: set[Counts] = set()
        for state in frontier:
            low = global_min(state, min_domains)
            for d, c in enumerate(state):
                if c + 1 - low <= max_skew:
                    step.add((*state[:d], c + 1, *state[d + 1 :]))
        frontier = step
    return frozenset(frontier)


def _waves(movable: Counts, most: int, pinned: Counts | None = None) -> Iterator[Counts]:
    """Every wave of 1 to ``most`` evictions: pods taken per domain, at most its movable pods.

    With ``pinned``, domains alike (same movable and pinned pods, next to each other) are
    interchangeable, so only waves taking no more from the later of two such domains are given.
    """

    def walk(d: int, left: int, taken: tuple[int, ...]) -> Iterator[Counts]:
        if d == len(movable):
            if left < most:
                yield taken
            return
        top = min(movable[d], left)
        if pinned is not None and d and (movable[d], pinned[d]) == (movable[d - 1], pinned[d - 1]):
            top = min(top, taken[-1])
        for k in range(top + 1):
            yield from walk(d + 1, left - k, (*taken, k))

    yield from walk(0, most, ())


def _canonical(movable: Counts, pinned: Counts) -> tuple[Counts, Counts]:
    """Domains are interchangeable: sort them (movable and pinned together)."""
    pairs = sorted(zip(movable, pinned, strict=True), reverse=True)
    return tuple(m for m, _ in pairs), tuple(p for _, p in pairs)


class _Game:
    """What is known about each state: the most evictions known not to guarantee balance and
    the fewest known to (whether ``n`` evictions suffice is monotone in ``n``)."""

    def __init__(self, max_skew: int, min_domains: int, prune: bool, largest_wave: int) -> None:
        self.max_skew = max_skew
        self.min_domains = min_domains
        self.prune = prune
        self.largest_wave = largest_wave
        self.losing: dict[tuple[Counts, Counts], int] = {}
        self.winning: dict[tuple[Counts, Counts], int] = {}

    def wins(self, movable: Counts, pinned: Counts, evictions: int) -> bool:
        """Whether the planner can guarantee balance from here with at most ``evictions``."""
        key = (movable, pinned)
        if evictions >= self.winning.get(key, evictions + 1):
            return True
        if evictions <= self.losing.get(key, -1):
            return False
        total = tuple(m + p for m, p in zip(movable, pinned, strict=True))
        s, md = self.max_skew, self.min_domains
        if self.prune and moves_bound(total, s, md) > evictions:
            self.losing[key] = max(evictions, self.losing.get(key, evictions))
            return False
        won = balanced(total, s, md) or any(
            all(
                self.wins(
                    *_canonical(tuple(e - p for e, p in zip(end, pinned, strict=True)), pinned),
                    evictions - sum(removed),
                )
                for end in landings(total, removed, s, md)
            )
            for removed in _waves(movable, min(evictions, self.largest_wave), pinned)
        )
        if won:
            self.winning[key] = min(evictions, self.winning.get(key, evictions))
        else:
            self.losing[key] = max(evictions, self.losing.get(key, evictions))
        return won


def moves_bound(counts: Counts, max_skew: int, min_domains: int = 1) -> int:
    """No sequence of moves (one pod out of a domain, one in elsewhere) balances ``counts`` in
    fewer: a balanced end state with minimum ``low`` has every domain in ``[low, low +
    maxSkew]`` and the same total, so it needs ``D*low <= N <= D*(low + maxSkew)``; the pods
    above ``low + maxSkew`` must each leave, the pods missing below ``low`` must each arrive.
    With fewer domains than minDomains the minimum counts as 0 (``low`` is 0); when no end
    state is balanced, more than there are pods."""
    n, d = sum(counts), len(counts)
    if d < min_domains:
        return sum(c - max_skew for c in counts if c > max_skew) if n <= d * max_skew else n + 1
    bounds = [
        max(
            sum(c - low - max_skew for c in counts if c > low + max_skew),
            sum(low - c for c in counts if c < low),
        )
        for low in range(n // d + 1)
        if n <= d * (low + max_skew)
    ]
    return min(bounds)


_GAMES: dict[tuple[int, int, bool, int], _Game] = {}


def adversarial_limit(
    movable: Counts,
    max_skew: int,
    pinned: Counts | None = None,
    most: int = 40,
    *,
    min_domains: int = 1,
    prune: bool = True,
    largest_wave: int = 1 << 30,
) -> int | None:
    """The fewest evictions that guarantee balance whatever legal domain each replacement lands
    in; None when ``most`` do not suffice. ``prune``: skip states whose :func:`moves_bound`
    exceeds the evictions left (the same answer, faster; tests compare both ways).
    ``largest_wave``: the planner may evict at most this many pods per wave (1: it sees where
    each replacement went before choosing the next eviction)."""
    pins = pinned if pinned is not None else (0,) * len(movable)
    key = _canonical(tuple(movable), tuple(pins))
    rules = (max_skew, min_domains, prune, largest_wave)
    game = _GAMES.setdefault(rules, _Game(*rules))
    for evictions in range(most + 1):
        if game.wins(*key, evictions):
            return evictions
    return None


def can_force_balance(movable: Counts, max_skew: int, pinned: Counts) -> bool:
    """Whether some finite number of evictions guarantees balance (the scheduler may otherwise
    undo the planner's moves forever): the least fixpoint of "balanced, or some wave whose every
    landing is a state already won", over all vectors of as many movable pods."""
    total_movable = sum(movable)
    states = [
        s
        for s in itertools.product(range(total_movable + 1), repeat=len(movable))
        if sum(s) == total_movable
    ]
    won = {
        s
        for s in states
        if balanced(tuple(m + p for m, p in zip(s, pinned, strict=True)), max_skew)
    }
    grew = True
    while grew:
        grew = False
        for s in states:
            if s in won:
                continue
            total = tuple(m + p for m, p in zip(s, pinned, strict=True))
            for removed in _waves(s, total_movable):
                ends = landings(total, removed, max_skew)
                if all(
                    tuple(e - p for e, p in zip(end, pinned, strict=True)) in won for end in ends
                ):
                    won.add(s)
                    grew = True
                    break
    return tuple(movable) in won
