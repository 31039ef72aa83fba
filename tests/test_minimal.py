"""SPEC §3.2's formula (rebalancer.core.minimal.min_moves) against exhaustive search.

The oracle knows nothing of bands or levels: it searches the graph whose nodes are count
vectors and whose edges are single moves (one pod from one domain to another), from every
balanced vector outwards (a move reversed is a move), and reads off each vector's distance.
Every vector of up to 4 domains and 8 pods is checked, for maxSkew 1-3, hard and soft, and
every minDomains that matters.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from functools import cache

import pytest

from rebalancer.core.minimal import min_moves

MAX_DOMAINS = 4
MAX_PODS = 8


def _vectors(pods: int, domains: int) -> Iterator[tuple[int, ...]]:
    """Every way to put ``pods`` pods into ``domains`` ordered domains."""
    if domains == 1:
        yield (pods,)
        return
    for first in range(pods + 1):
        for rest in _vectors(pods - first, domains - 1):
            yield (first, *rest)


def _balanced(counts: Sequence[int], max_skew: int, hard_min_is_zero: bool) -> bool:
    """Within maxSkew as kube-scheduler measures it: max count minus the global minimum (0
    when a hard constraint has fewer domains than minDomains)."""
    low = 0 if hard_min_is_zero else min(counts)
    return max(counts) - low <= max_skew


def _moves(counts: tuple[int, ...], floors: Sequence[int]) -> Iterator[tuple[int, ...]]:
    for src, dst in itertools.permutations(range(len(counts)), 2):
        if counts[src] > floors[src]:
            moved = list(counts)
            moved[src] -= 1
            moved[dst] += 1
            yield tuple(moved)


@cache
def _distances(
    pods: int, domains: int, max_skew: int, hard_min_is_zero: bool, floors: tuple[int, ...]
) -> dict[tuple[int, ...], int]:
    """Fewest moves from each vector to a balanced one (absent: unreachable), by BFS from
    the balanced vectors. With floors, a domain never goes below its floor; moves are
    reversible only between vectors that respect the floors, so the search runs forwards
    from every vector instead."""
    states = [
        v for v in _vectors(pods, domains) if all(c >= f for c, f in zip(v, floors, strict=True))
    ]
    if not any(floors):
        dist = {v: 0 for v in states if _balanced(v, max_skew, hard_min_is_zero)}
        queue = deque(dist)
        while queue:
            here = queue.popleft()
            for there in _moves(here, floors):
                if there not in dist:
                    dist[there] = dist[here] + 1
                    queue.append(there)
        return dist
    found: dict[tuple[int, ...], int] = {}
    for start in states:
        seen = {start: 0}
        queue = deque([start])
        while queue:
            here = queue.popleft()
            if _balanced(here, max_skew, hard_min_is_zero):
                found[start] = seen[here]
                break
            for there in _moves(here, floors):
                if there not in seen:
                    seen[there] = seen[here] + 1
                    queue.append(there)
    return found


@pytest.mark.parametrize("max_skew", [1, 2, 3])
@pytest.mark.parametrize("domains", range(1, MAX_DOMAINS + 1))
def test_min_moves_equals_exhaustive_search(domains: int, max_skew: int) -> None:
    """For every count vector, min_moves is the true fewest number of moves, hard and soft,
    for every minDomains (below, at and above the number of domains); when no vector is
    balanced (more pods than maxSkew fills with too few domains) it is still positive."""
    checked = 0
    for pods in range(MAX_PODS + 1):
        for min_domains in range(1, MAX_DOMAINS + 2):
            for hard in (True, False):
                zero_min = hard and domains < min_domains
                dist = _distances(pods, domains, max_skew, zero_min, (0,) * domains)
                for counts in _vectors(pods, domains):
                    got = min_moves(counts, max_skew, min_domains, hard)
                    if counts not in dist:  # no vector is balanced (too few domains)
                        assert got > 0, counts
                        continue
                    assert got == dist[counts], (counts, max_skew, min_domains, hard)
                    checked += 1
    assert checked > 50  # the loops really ran


@pytest.mark.parametrize("empty", [1, 2])
def test_empty_domains_left_out_count_as_zeros(empty: int) -> None:
    """``empty=k`` means k more domains holding no pod: the same answer as writing them out."""
    for domains in range(1, MAX_DOMAINS + 1 - empty):
        for pods in range(MAX_PODS + 1):
            for counts in _vectors(pods, domains):
                for max_skew in (1, 2):
                    dist = _distances(
                        pods, domains + empty, max_skew, False, (0,) * (domains + empty)
                    )
                    padded = (*counts, *(0,) * empty)
                    assert min_moves(counts, max_skew, empty=empty) == dist[padded]


def test_top_floor_matches_search_with_pods_that_cannot_move() -> None:
    """With some pods pinned (floors per domain), min_moves given the highest floor is the
    fewest moves whenever balance is reachable at all."""
    for domains in (2, 3):
        for floors in itertools.product(range(3), repeat=domains):
            for pods in range(sum(floors), 8):
                for max_skew in (1, 2):
                    dist = _distances(pods, domains, max_skew, False, floors)
                    for counts, moves in dist.items():
                        got = min_moves(counts, max_skew, top_floor=max(floors))
                        assert got == moves, (counts, floors, max_skew)
