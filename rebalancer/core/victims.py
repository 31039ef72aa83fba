"""Victim order (SPEC §3): which pods a minimal plan evicts, compared as preemption compares.

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
from typing import NamedTuple, NewType

PodId = NewType("PodId", int)  # index into the snapshot's pods (Analysis.pods)
ViewId = NewType("ViewId", int)  # index into the analysis's views (Analysis.views)


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
    """A whole plan's place in the victim order (SPEC §3); smaller is preferred."""

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
    when there are more than ``limit``."""
    out: list[list[int]] = []
    suffix = [0] * (len(caps) + 1)
    for d in range(len(caps) - 1, -1, -1):
        suffix[d] = suffix[d + 1] + caps[d]
    current = [0] * len(caps)

    def walk(d: int, left: int) -> bool:
        if left == 0:
            out.append(list(current))
            return len(out) <= limit
        if d == len(caps) or suffix[d] < left:
            return True
        for take in range(min(caps[d], left), -1, -1):
            current[d] = take
            if not walk(d + 1, left - take):  # noqa: F821  # bound until the del below
                return False
        current[d] = 0
        return True

    complete = walk(0, extra)
    del walk  # it refers to itself: a cycle that only the collector would free (it is off)
    return out if complete else None


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
    victim and takes it (SPEC §3's simulation); ties are tried both ways. None when no order
    ends within maxSkew. Past :data:`MAX_WORK`, the fullest domain goes first.
    """
    try:
        limit = MAX_WORK // max(1, len(sizes))
        return _order_search(sizes, removals, structural, max_skew, band_forced_zero, limit=limit)
    except _TooMany:
        return _fullest_first(sizes, removals, structural, max_skew, band_forced_zero)


def _step(
    counts: list[int], d: int, removals: Sequence[int], max_skew: int, forced_zero: bool
) -> tuple[bool, list[int]]:
    """Evict from domain d: whether the victim could return, and the receiving domains its
    replacement may go to (the least populated that take it)."""
    counts[d] -= 1
    gmin = 0 if forced_zero else min(counts)
    back = counts[d] + 1 - gmin <= max_skew
    legal = [t for t, c in enumerate(counts) if removals[t] == 0 and c + 1 - gmin <= max_skew]
    if not legal:
        return back, []
    low = min(counts[t] for t in legal)
    return back, [t for t in legal if counts[t] == low]


def _balanced(counts: Sequence[int], max_skew: int, forced_zero: bool) -> bool:
    gmin = 0 if forced_zero else min(counts)
    return all(c == 0 or c - gmin <= max_skew for c in counts)


def _order_search(
    sizes: Sequence[int],
    removals: Sequence[int],
    structural: Sequence[Sequence[bool]],
    max_skew: int,
    forced_zero: bool,
    *,
    limit: int,
) -> tuple[int, list[int]] | None:
    memo: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, list[int]] | None] = {}

    def floor(left: Sequence[int]) -> int:
        """Victims left that could return whatever the order (no own hard constraint)."""
        return sum(sum(structural[d][removals[d] - n :]) for d, n in enumerate(left) if n)

    def go(counts: tuple[int, ...], left: tuple[int, ...]) -> tuple[int, list[int]] | None:
        if not any(left):
            return (0, []) if _balanced(counts, max_skew, forced_zero) else None
        key = (counts, left)
        if key in memo:
            return memo[key]
        if len(memo) >= limit:
            raise _TooMany
        best: tuple[int, list[int]] | None = None
        least = floor(left)
        # Fullest domain first: among equally good orders, the first found is the natural one.
        for d in sorted(range(len(left)), key=lambda d: (-counts[d], d)):
            n = left[d]
            if n == 0:
                continue
            if best is not None and best[0] == least:
                break  # no order does better
            after = list(counts)
            back, targets = _step(after, d, removals, max_skew, forced_zero)
            j = removals[d] - n  # this is domain d's j-th victim
            cost = int(back or structural[d][j])
            rest = list(left)
            rest[d] -= 1
            for t in targets:
                moved = list(after)
                moved[t] += 1
                found = go(tuple(moved), tuple(rest))  # noqa: F821  # bound until the del below
                if found is not None and (best is None or found[0] + cost < best[0]):
                    best = (found[0] + cost, [d, *found[1]])
                    if best[0] == least:
                        break
        memo[key] = best
        return best

    try:
        return go(tuple(sizes), tuple(removals))
    finally:
        del go  # as in _splits: it refers to itself


def _fullest_first(
    sizes: Sequence[int],
    removals: Sequence[int],
    structural: Sequence[Sequence[bool]],
    max_skew: int,
    forced_zero: bool,
) -> tuple[int, list[int]] | None:
    counts = list(sizes)
    left = list(removals)
    order: list[int] = []
    total = 0
    while any(left):
        d = max((d for d, n in enumerate(left) if n), key=lambda d: (counts[d], -d))
        back, targets = _step(counts, d, removals, max_skew, forced_zero)
        if not targets:
            return None
        total += int(back or structural[d][removals[d] - left[d]])
        counts[targets[0]] += 1
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
    is 0 whatever happens (fewer domains than minDomains); ``moves``: the minimum (SPEC §3's
    formula, with the unevictable pods as floors). None when no band of that size can be
    reached with the evictable pods (the planner then searches move by move).

    Each split of the victims over the domains is compared after finding the order that
    leaves the fewest victims able to come back (:func:`fewest_returning`). When a band has
    more than :data:`MAX_SPLITS` splits, only the split of the best optional victims taken
    one at a time is compared. The victims are returned fullest domain first (each from the
    domain that then holds the most pods, the replacements placed as SPEC §3's simulation
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
