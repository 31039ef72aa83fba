"""Victim order (SPEC §3): which pods a minimal plan evicts, compared as preemption compares.

One pod's place in the order is its :class:`VictimKey`. A whole plan is compared by
:func:`plan_key`: first the fewest victims whose replacement could come back to the domain it
left, then preemption's rule (the victims' priorities sorted from highest to lowest, compared
lexicographically: the lowest highest-victim priority wins, then the next), then the fewest
victims whose PodDisruptionBudget allows no disruption, then the youngest victims (their ages
sorted from oldest to youngest, compared the same way), and last the victims' own identities
(namespace, name, uid), so that the choice is deterministic. No key holds a domain or node
name: renaming domains or nodes cannot change a victim.

For one view, :func:`single_view_victims` finds the best victims over every plan of the minimal
size. A minimal plan for one view ends at counts ``f`` inside a band ``[L, L + maxSkew]``; the
domains above ``L + maxSkew`` must lose their excess, and when the domains below ``L`` need more
pods than that, the remaining victims may come from any domain above ``L``. Each domain gives
its best pods (by :class:`VictimKey`); every split of the victims over the domains is compared
by :func:`plan_key`, after replaying it to count the victims that could return
(:func:`returning_slots`). Worked example, maxSkew 1, zones
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
    pdb_blocked: bool  # a PodDisruptionBudget selecting it allows no disruption now
    age: float  # minus creationTimestamp: the youngest pod has the smallest value
    namespace: str
    name: str
    uid: str


class PlanKey(NamedTuple):
    """A whole plan's place in the victim order (SPEC §3); smaller is preferred."""

    can_return: int
    priorities: tuple[int, ...]  # highest first
    pdb_blocked: int
    ages: tuple[float, ...]  # the victims' ages (minus creation time), oldest first
    identities: tuple[tuple[str, str, str], ...]


def plan_key(keys: Iterable[VictimKey]) -> PlanKey:
    """The key of a plan evicting pods with these victim keys."""
    ks = list(keys)
    return PlanKey(
        can_return=sum(k.can_return for k in ks),
        priorities=tuple(sorted((k.priority for k in ks), reverse=True)),
        pdb_blocked=sum(k.pdb_blocked for k in ks),
        ages=tuple(sorted((k.age for k in ks), reverse=True)),
        identities=tuple(sorted((k.namespace, k.name, k.uid) for k in ks)),
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
            if not walk(d + 1, left - take):
                return False
        current[d] = 0
        return True

    return out if walk(0, extra) else None


def returning_slots(
    sizes: Sequence[int],
    removals: Sequence[int],
    next_keys: Sequence[Sequence[VictimKey]],
    max_skew: int,
    band_forced_zero: bool,
) -> list[int]:
    """How many of each domain's victims could come back to it when evicted, replaying the
    plan as the planner executes it (SPEC §3's simulation, counts only).

    ``sizes``: every domain's count, empty domains included; ``removals``: the victims each
    domain gives; ``next_keys[d]``: domain d's victims in eviction order. One victim at a time
    leaves the fullest domain still giving one (ties: the better next victim); a victim could
    come back when its domain, without it, is within maxSkew of the global minimum (so its
    own constraint lets its replacement return). Its replacement then lands in the least
    populated of the domains that give no victim.
    """
    counts = list(sizes)
    left = list(removals)
    taken = [0] * len(counts)
    receivers = [d for d, r in enumerate(removals) if r == 0]
    back = [0] * len(counts)
    for _ in range(sum(removals)):
        d = min(
            (d for d in range(len(counts)) if left[d] > 0),
            key=lambda d: (-counts[d], next_keys[d][taken[d]]),
        )
        counts[d] -= 1
        left[d] -= 1
        taken[d] += 1
        gmin = 0 if band_forced_zero else min(counts)
        if counts[d] + 1 - gmin <= max_skew:
            back[d] += 1
        if receivers:
            counts[min(receivers, key=counts.__getitem__)] += 1
    return back


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

    Each split of the victims over the domains is replayed (:func:`returning_slots`) to count
    the victims that could come back; a domain's victims that declare no hard constraint on
    the view take its returning slots first. When a band has more than :data:`MAX_SPLITS`
    splits, only the split of the best optional victims taken one at a time is compared.
    """
    d = len(domains) + empty
    if d == 0 or moves == 0:
        return None
    n = sum(dom.size for dom in domains)
    sizes = [dom.size for dom in domains] + [0] * empty
    keys = [[k for k, _ in dom.evictable] for dom in domains] + [[] for _ in range(empty)]
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
    if not candidates:
        return None
    best: tuple[PlanKey, list[int]] | None = None
    for removals in candidates if len(candidates) > 1 else ():
        back = returning_slots(sizes, removals, keys, max_skew, band_forced_zero)
        chosen: list[VictimKey] = []
        returning = 0
        for k, dom in enumerate(domains):
            mine = [key for key, _ in dom.evictable[: removals[k]]]
            chosen.extend(mine)
            returning += max(back[k], sum(key.can_return for key in mine))
        key = plan_key(chosen)._replace(can_return=returning)
        if best is None or key < best[0]:
            best = (key, removals)
    removals = candidates[0] if best is None else best[1]
    return [i for k, dom in enumerate(domains) for _, i in dom.evictable[: removals[k]]]
