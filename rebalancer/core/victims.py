"""Victim order (SPEC §3.4): which pods a minimal plan evicts, compared as preemption compares.

One pod's place in the order is its :class:`VictimKey`. A whole plan is compared by
:func:`plan_key`: first the fewest victims whose replacement could come back to the domain it
left, then preemption's rule (the victims' priorities sorted from highest to lowest, compared
lexicographically: the lowest highest-victim priority wins, then the next), then the fewest
victims annotated ``descheduler.alpha.kubernetes.io/prefer-no-eviction`` (the descheduler
evicts them last among pods of equal priority), then the fewest
victims whose PodDisruptionBudget allows no disruption, then, for one view, the victims taken
from the most populated domains (:func:`victim_heights`), then the youngest victims (their ages
sorted from oldest to youngest, compared the same way), and last the victims' own identities
(namespace, name, uid), so that the choice is deterministic. No key holds a domain or node
name: renaming domains or nodes cannot change a victim.

Why the most populated domains before the youngest pods: a scheduler that does not score hard
spread may put a replacement in any legal domain. Zones [6, 7, 1] with maxSkew 2 need 3
evictions. Two from the 6 first leave [4, 7, 1], which the replacements fill to [4, 7, 3];
the next eviction, from the 7, may land in the 4: [5, 6, 3], so the worst scheduler makes it 4
evictions where 3 can be guaranteed. One from the 6 and two from the 7 never need more. Taking
victims top down keeps a run against any scheduler at that adversarial limit
(tests/test_adversarial_limit.py).

For one view, :func:`single_view_victims` finds the best victims over every plan of the minimal
size. A minimal plan for one view ends at counts ``f`` inside a band ``[L, L + maxSkew]``; the
domains above ``L + maxSkew`` must lose their excess, and when the domains below ``L`` need more
pods than that, the remaining victims may come from any domain above ``L``. Each domain gives
its best pods (by :class:`VictimKey`); every split of the victims over the domains is compared
by :func:`plan_key`, after replaying it to count the victims that could return
(:func:`fewest_returning`). Worked example, maxSkew 1, zones
``[{0, 0, 5000}, {100, 100, 100, 100}, {}]``: N=7, D=3, the only band is [2, 3] and 2 moves
are needed; the second zone must give one pod (100), and the second victim comes from the
first zone (0) or the second (100): {100, 0} beats {100, 100}. The tie-breaks never look at
a domain or node name; the last one is the victims' own namespace, name and uid.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import accumulate, islice
from math import isqrt
from typing import NamedTuple

from rebalancer.core.ids import PodId


class VictimKey(NamedTuple):
    """One pod's place in the victim order; smaller goes first."""

    can_return: bool  # its own hard constraints do not keep its replacement out of its domain
    priority: int
    prefer_no_eviction: bool  # annotated descheduler.alpha.kubernetes.io/prefer-no-eviction
    pdb_blocked: bool  # a PodDisruptionBudget selecting it allows no disruption now
    age: float  # minus creationTimestamp: the youngest pod has the smallest value
    namespace: str
    name: str
    uid: str


class PlanKey(NamedTuple):
    """A whole plan's place in the victim order (SPEC §3.4); smaller is preferred."""

    can_return: int
    priorities: tuple[int, ...]  # highest first
    prefer_no_eviction: int
    pdb_blocked: int
    heights: tuple[int, ...]  # minus each victim's domain count as it leaves, fullest first
    ages: tuple[float, ...]  # the victims' ages (minus creation time), oldest first
    identities: tuple[tuple[str, str, str], ...]


def plan_key(keys: Iterable[VictimKey], heights: tuple[int, ...] = ()) -> PlanKey:
    """The key of a plan evicting pods with these victim keys; ``heights``:
    :func:`victim_heights` of its victims' domains (empty when not compared)."""
    ks = list(keys)
    return PlanKey(
        can_return=sum(k.can_return for k in ks),
        priorities=tuple(sorted((k.priority for k in ks), reverse=True)),
        prefer_no_eviction=sum(k.prefer_no_eviction for k in ks),
        pdb_blocked=sum(k.pdb_blocked for k in ks),
        heights=heights,
        ages=tuple(sorted((k.age for k in ks), reverse=True)),
        identities=tuple(sorted((k.namespace, k.name, k.uid) for k in ks)),
    )


def victim_heights(sizes: Sequence[int], removals: Sequence[int]) -> tuple[int, ...]:
    """The heights of a plan's victims, compared so that the plan taking its victims from the
    most populated domains wins: domain d, holding ``sizes[d]`` pods and giving
    ``removals[d]``, gives them at heights ``sizes[d]``, ``sizes[d] - 1``, ...; the heights of
    all victims, highest first, negated (smaller is preferred). Example, zones [6, 7, 1]:
    taking one pod from the 6 and two from the 7 gives (-7, -6, -6), which beats two from the
    6 and one from the 7, (-7, -6, -5)."""
    return tuple(
        sorted(
            -h
            for size, n in zip(sizes, removals, strict=True)
            for h in range(size - n + 1, size + 1)
        )
    )


class DomainPods(NamedTuple):
    """One domain of a view: its count and its evictable pods, best victim first."""

    size: int  # the pods the view counts there
    evictable: Sequence[tuple[VictimKey, PodId]]  # sorted by key


# At most this many ways to spread one band's optional victims over the domains are compared
# one by one; beyond it, the best optional victims are taken one at a time (see below).
MAX_SPLITS = 256


def _levels(n: int, d: int, max_skew: int, band_forced_zero: bool) -> list[int]:
    """The band floors ``L`` with ``D*L <= N <= D*(L + maxSkew)`` (as in min_moves)."""
    if band_forced_zero:
        return [0]
    low = max(0, -(-(n - d * max_skew) // d))
    return list(range(low, n // d + 1)) or [n // d]


def _splits(caps: Sequence[int], extra: int, limit: int) -> list[list[int]] | None:
    """Every way to take ``extra`` more victims with at most ``caps[d]`` from domain d; None
    when there are more than ``limit``. Depth first, most from the first domain first, with
    an explicit stack (one frame per domain: it may hold thousands)."""
    out: list[list[int]] = []
    suffix = [0] * (len(caps) + 1)
    for d in range(len(caps) - 1, -1, -1):
        suffix[d] = suffix[d + 1] + caps[d]
    current = [0] * len(caps)
    frames: list[list[int]] = []  # [domain, victims still to take from it on, next take]

    def enter(d: int, left: int) -> bool:
        """Start on domain d with ``left`` victims to place; False past the limit."""
        if left == 0:
            out.append(list(current))
            return len(out) <= limit
        if d < len(caps) and suffix[d] >= left:
            frames.append([d, left, min(caps[d], left)])
        return True

    ok = enter(0, extra)
    while ok and frames:
        frame = frames[-1]
        d, left, take = frame
        if take < 0:
            current[d] = 0
            frames.pop()
            continue
        frame[2] = take - 1
        current[d] = take
        ok = enter(d + 1, left - take)
    return out if ok else None


class _TooMany(Exception):
    """More orders to compare than the work limit allows."""


MAX_WORK = 200_000  # states of the order search per split times domains; beyond it, and
# when a view has a single minimal split, the fullest domain goes first


def fewest_returning(
    sizes: Sequence[int],
    removals: Sequence[int],
    structural: Sequence[Sequence[bool]],
    max_skew: int,
    band_forced_zero: bool,
) -> tuple[int, list[int]] | None:
    """The fewest victims that could come back to their domain, over the orders in which a
    split can be evicted, and one order (the domain of each eviction) reaching it.

    ``sizes``: every domain's count, empty domains included; ``removals``: the victims each
    domain gives; ``structural[d][j]``: domain d's j-th victim (in victim order) declares no
    hard constraint on the view, so it could return anyway. A victim could come back when its
    domain, without it, is within maxSkew of the global minimum (its own constraint lets its
    replacement return). Each replacement lands in the least populated domain that gives no
    victim and takes it (SPEC §3.3's simulation); ties are tried both ways. None when no order
    ends within maxSkew. Past :data:`MAX_WORK`, the fullest domain goes first.
    """
    try:
        limit = MAX_WORK // max(1, len(sizes))
        search = _OrderSearch(sizes, removals, structural, max_skew, band_forced_zero, limit=limit)
        found = search.run()
        return None if found is None else (found[0], _flat(found[1]))
    except _TooMany:
        return _fullest_first(sizes, removals, structural, max_skew, band_forced_zero)


def _receiving(counts: Sequence[int], free: Sequence[int], gmin: int, max_skew: int) -> int | None:
    """Where a replacement may go once its victim is out of ``counts``: the count of the least
    populated domains among ``free`` (those that give no victim), when they take it
    (``count + 1 - globalMin <= maxSkew``), else None. The least populated take it when any
    does, so the receiving domains are exactly the free domains at that count."""
    if not free:
        return None
    low = min(map(counts.__getitem__, free))
    return low if low + 1 - gmin <= max_skew else None


def _balanced(counts: Sequence[int], max_skew: int, forced_zero: bool) -> bool:
    gmin = 0 if forced_zero else min(counts)
    return all(c == 0 or c - gmin <= max_skew for c in counts)


_Order = tuple[int, "_Order"] | None  # domains of an order, first first, as nested pairs


class _Frame:
    """One state of the order search on its explicit stack, and where its loops stand."""

    __slots__ = ("best", "cost", "d", "i", "key", "least", "low", "order", "t", "tpos")

    def __init__(self, key: tuple[int, ...], least: int, order: list[int]) -> None:
        self.key = key
        self.least = least  # no order from here does better
        self.order = order  # the domains still giving victims, fullest first
        self.best: tuple[int, _Order] | None = None
        self.i = 0  # next domain of ``order`` to try
        self.d = -1  # the domain tried now (its victim taken out of the counts), or -1
        self.cost = 0  # whether that victim could return
        self.low: int | None = None  # count of the receiving domains, None when there are none
        self.tpos = 0  # next receiving domain to try, an index into the free domains
        self.t = -1  # the receiving domain holding the replacement while a child runs, or -1


def _flat(order: _Order) -> list[int]:
    """The domains of an order as a list, first first."""
    flat: list[int] = []
    while order is not None:
        flat.append(order[0])
        order = order[1]
    return flat


class _OrderSearch:
    """Depth first over the orders in which a split's victims can be evicted, memoised by
    state (the counts and the victims each domain still gives). From each state the domains
    are tried fullest first, and the replacement's receiving domains (the least populated
    domains that give no victim and take it, :func:`_receiving`) in index order; a
    state's search stops once an order reaches its floor (the victims left that could return
    whatever the order). :class:`_TooMany` is raised when a new state is entered with
    ``limit`` states done.

    Each eviction is one step deeper, and a plan may hold thousands: the search runs on an
    explicit stack of :class:`_Frame`, over one array of counts and one of victims left,
    changed in place and restored on the way back. A state's memo key is the interned blocks
    of both arrays: exact, and its memory grows with the blocks that differ between states,
    not with the domains times the depth."""

    def __init__(
        self,
        sizes: Sequence[int],
        removals: Sequence[int],
        structural: Sequence[Sequence[bool]],
        max_skew: int,
        forced_zero: bool,
        *,
        limit: int,
    ) -> None:
        self.removals = removals
        self.structural = structural
        self.max_skew = max_skew
        self.forced_zero = forced_zero
        self.limit = limit
        self.counts = list(sizes)
        self.left = list(removals)
        self.remaining = sum(removals)
        self.active = [d for d, r in enumerate(removals) if r]
        self.free = [t for t, r in enumerate(removals) if r == 0]
        # Victims from domain d's j-th on (j < removals[d]) that could return whatever the
        # order: tail[d] - head[d][j], the whole of structural[d] from j on.
        self.tail = {d: sum(structural[d]) for d in self.active}
        self.head = {}
        for d in self.active:
            sums = list(accumulate(structural[d][: removals[d]], initial=0))
            self.head[d] = sums + [self.tail[d]] * (removals[d] + 1 - len(sums))
        self.memo: dict[tuple[int, ...], tuple[int, _Order] | None] = {}
        self.blocks: dict[tuple[int, ...], int] = {}
        self.width = max(64, isqrt(len(sizes)))
        self.frames: list[_Frame] = []

    def key(self) -> tuple[int, ...]:
        """The state now in the arrays, as the ids of its interned blocks."""
        ids = []
        for values in (self.counts, self.left):
            for start in range(0, len(values), self.width):
                block = tuple(values[start : start + self.width])
                found = self.blocks.get(block)
                if found is None:
                    found = self.blocks[block] = len(self.blocks)
                ids.append(found)
        return tuple(ids)

    def enter(self) -> tuple[int, _Order] | None:
        """The result of the state now in the arrays when known at once, else None with its
        frame pushed (check ``self.frames``)."""
        if self.remaining == 0:
            balanced = _balanced(self.counts, self.max_skew, self.forced_zero)
            return (0, None) if balanced else None
        k = self.key()
        if k in self.memo:
            return self.memo[k]
        if len(self.memo) >= self.limit:
            raise _TooMany
        left, counts, head = self.left, self.counts, self.head
        least = sum(
            self.tail[d] - head[d][self.removals[d] - left[d]] for d in self.active if left[d]
        )
        order = sorted((d for d in self.active if left[d]), key=lambda d: (-counts[d], d))
        self.frames.append(_Frame(k, least, order))
        return None

    def next_target(self, frame: _Frame) -> int:
        """The index in ``free`` of the frame's next receiving domain, or -1."""
        if frame.low is None or frame.tpos >= len(self.free):
            return -1
        rest = list(map(self.counts.__getitem__, islice(self.free, frame.tpos, None)))
        try:
            return rest.index(frame.low) + frame.tpos
        except ValueError:
            return -1

    def evict(self, frame: _Frame, d: int) -> None:
        """Take the frame's next victim from domain d; find where its replacement may go."""
        counts = self.counts
        j = self.removals[d] - self.left[d]  # this is domain d's j-th victim
        counts[d] -= 1
        self.left[d] -= 1
        self.remaining -= 1
        gmin = 0 if self.forced_zero else min(counts)
        back = counts[d] + 1 - gmin <= self.max_skew
        frame.low = _receiving(counts, self.free, gmin, self.max_skew)
        frame.cost = int(back or self.structural[d][j])
        frame.d = d
        frame.tpos = 0

    def undo(self, frame: _Frame) -> None:
        """Put the frame's victim back."""
        self.counts[frame.d] += 1
        self.left[frame.d] += 1
        self.remaining += 1
        frame.d = -1

    def run(self) -> tuple[int, _Order] | None:
        result = self.enter()
        frames = self.frames
        while frames:
            frame = frames[-1]
            if frame.t >= 0:  # back from the state with the replacement in domain frame.t
                self.counts[frame.t] -= 1
                frame.t = -1
                best = frame.best
                if result is not None and (best is None or result[0] + frame.cost < best[0]):
                    frame.best = (result[0] + frame.cost, (frame.d, result[1]))
                    if frame.best[0] == frame.least:
                        frame.tpos = len(self.free)  # no order does better
            if frame.d >= 0:
                k = self.next_target(frame)
                if k >= 0:
                    frame.tpos = k + 1
                    frame.t = self.free[k]
                    self.counts[frame.t] += 1
                    result = self.enter()
                    continue
                self.undo(frame)
            done = frame.best is not None and frame.best[0] == frame.least
            if frame.i < len(frame.order) and not done:
                frame.i += 1
                self.evict(frame, frame.order[frame.i - 1])
                continue
            frames.pop()
            self.memo[frame.key] = result = frame.best
        return result


def _fullest_first(
    sizes: Sequence[int],
    removals: Sequence[int],
    structural: Sequence[Sequence[bool]],
    max_skew: int,
    forced_zero: bool,
) -> tuple[int, list[int]] | None:
    """Each victim from the domain then holding the most pods (the lowest index among equals),
    its replacement in the first least populated domain that takes it: the fewest victims
    that could return in that order, and the order; None when it does not end balanced or a
    replacement has nowhere to go."""
    counts = list(sizes)
    left = list(removals)
    active = [d for d, r in enumerate(removals) if r]
    free = [t for t, r in enumerate(removals) if r == 0]
    order: list[int] = []
    total = 0
    for _ in range(sum(removals)):
        d = max((d for d in active if left[d]), key=lambda d: (counts[d], -d))
        counts[d] -= 1
        gmin = 0 if forced_zero else min(counts)
        back = counts[d] + 1 - gmin <= max_skew
        low = _receiving(counts, free, gmin, max_skew)
        if low is None:
            return None
        total += int(back or structural[d][removals[d] - left[d]])
        counts[free[list(map(counts.__getitem__, free)).index(low)]] += 1
        left[d] -= 1
        order.append(d)
    return (total, order) if _balanced(counts, max_skew, forced_zero) else None


def _splits_of_minimal_plans(
    domains: Sequence[DomainPods],
    empty: int,
    max_skew: int,
    band_forced_zero: bool,
    moves: int,
) -> list[list[int]]:
    """The victims each domain gives, for every band and split of a plan of ``moves``."""
    d = len(domains) + empty
    n = sum(dom.size for dom in domains)
    candidates: list[list[int]] = []  # victims per domain, for each (band, split)
    for level in _levels(n, d, max_skew, band_forced_zero):
        top = level + max_skew
        must = [0] * d
        caps = [0] * d
        below = empty * level
        ok = True
        for k, dom in enumerate(domains):
            if dom.size < level:
                below += level - dom.size
                continue
            must[k] = max(0, dom.size - top)
            if must[k] > len(dom.evictable):
                ok = False
                break
            caps[k] = min(dom.size - level, len(dom.evictable)) - must[k]
        if not ok or max(sum(must), below) != moves:
            continue
        extra = moves - sum(must)
        if extra > sum(caps):
            continue
        splits = _splits(caps, extra, MAX_SPLITS)
        if splits is None:
            # Too many splits: the best optional victims one at a time. Within a domain the
            # pods are sorted, so this takes a prefix of each domain, a valid split.
            optional = sorted(
                (key, k)
                for k, dom in enumerate(domains)
                for key, _ in dom.evictable[must[k] : must[k] + caps[k]]
            )[:extra]
            split = [0] * d
            for _, k in optional:
                split[k] += 1
            splits = [split]
        candidates.extend([m + x for m, x in zip(must, split, strict=True)] for split in splits)
    return candidates


def single_view_victims(
    domains: Sequence[DomainPods],
    empty: int,
    max_skew: int,
    band_forced_zero: bool,
    moves: int,
) -> list[PodId] | None:
    """The best victims over every plan of ``moves`` evictions that balances the view.

    ``domains``: the view's domains holding pods (their order does not matter; the keys'
    ``can_return`` says whether the pod's own hard constraints include this view at all);
    ``empty``: how many further domains hold none; ``band_forced_zero``: the global minimum
    is 0 whatever happens (fewer domains than minDomains); ``moves``: the minimum (SPEC §3.2's
    formula, with the unevictable pods as floors). None when no band of that size can be
    reached with the evictable pods (the planner then searches move by move).

    Each split of the victims over the domains is compared after finding the order that
    leaves the fewest victims able to come back (:func:`fewest_returning`). When a band has
    more than :data:`MAX_SPLITS` splits, only the split of the best optional victims taken
    one at a time is compared. The victims are returned fullest domain first (each from the
    domain that then holds the most pods, the replacements placed as SPEC §3.3's simulation
    places them) when that order ends balanced, else in the order found; the planner evicts
    them so. Example, maxSkew 2, zones [6, 7, 1] with the 7's pods at priority 100: the split
    is one from the 7 and two from the 6, evicted 7, 6, 6 (not 6, 6, 7, which the worst
    scheduler makes cost one more eviction).
    """
    d = len(domains) + empty
    if d == 0 or moves == 0:
        return None
    sizes = [dom.size for dom in domains] + [0] * empty
    candidates = _splits_of_minimal_plans(domains, empty, max_skew, band_forced_zero, moves)
    if not candidates:
        return None
    structural = [[key.can_return for key, _ in dom.evictable] for dom in domains]
    structural += [[] for _ in range(empty)]
    # Compared by the rest of the key first: the first split whose victims can all be evicted
    # so that none could return is the best, and the order search stops there.
    keyed = []
    for removals in candidates:
        chosen = [key for k, dom in enumerate(domains) for key, _ in dom.evictable[: removals[k]]]
        keyed.append((plan_key(chosen, victim_heights(sizes, removals)), removals))
    keyed.sort()
    best: tuple[PlanKey, list[int], list[int]] | None = None  # key, removals, order
    for key, removals in keyed:
        if len(keyed) == 1:  # nothing to compare: an order good enough for the waves
            found = _fullest_first(sizes, removals, structural, max_skew, band_forced_zero)
            found = found or (0, [k for k, r in enumerate(removals) for _ in range(r)])
        else:
            found = fewest_returning(sizes, removals, structural, max_skew, band_forced_zero)
        if found is None:
            continue
        full = key._replace(can_return=found[0])
        if best is None or full < best[0]:
            best = (full, removals, found[1])
        if best[0].can_return == 0:
            break
    if best is None:
        return None
    if len(keyed) > 1:
        # Evicted fullest domain first: the first wave then starts at the top, which keeps a
        # run against any scheduler at the adversarial limit (tests/test_adversarial_limit.py)
        # where the order found above may start lower (priorities chose the split).
        top = _fullest_first(sizes, best[1], structural, max_skew, band_forced_zero)
        if top is not None:
            best = (best[0], best[1], top[1])
    taken = [0] * d
    out: list[PodId] = []
    for k in best[2]:
        out.append(domains[k].evictable[taken[k]][1])
        taken[k] += 1
    return out
