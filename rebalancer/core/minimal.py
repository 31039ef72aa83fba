"""SPEC §3.2's arithmetic of balance: the fewest moves that bring one view within maxSkew, and the
highest global minimum a number of added pods can reach. Pure functions of counts."""

from __future__ import annotations

from collections.abc import Sequence


def min_moves(
    counts: Sequence[int],
    max_skew: int,
    min_domains: int = 1,
    hard: bool = True,
    top_floor: int = 0,
    *,
    empty: int = 0,
) -> int:
    """The fewest moves that bring one view within ``max_skew`` (SPEC §3.2), capacity permitting.

    A move takes one pod out of a domain and adds it to another. For a target band
    ``[L, L + max_skew]`` the pods above the band must leave and the domains below it must be
    filled, so the moves are ``max(above, below)``; the band must hold all N pods
    (``D*L <= N <= D*(L+s)``). With fewer domains than ``minDomains`` the global minimum is 0,
    so ``L`` is 0. Worked example, maxSkew 3, counts [3, 9, 0, 9]: N=21, D=4, L in {3, 4, 5};
    L=4 gives above = (9-7)+(9-7) = 4 and below = (4-3)+(4-0) = 5, so 5 moves, the minimum.
    Each real move lowers this value by at most one, so it is also a lower bound.

    ``top_floor`` is the most pods any one domain holds that cannot move (not evictable): a
    band whose top is below it is out of reach. When no band is in reach, the floors are
    ignored, and the value still falls by one for every move towards balance.

    ``empty`` is the number of further domains, left out of ``counts``, that hold no pod.
    """
    d = len(counts) + empty
    if d == 0:
        return 0
    n = sum(counts)
    s = max_skew
    if hard and d < min_domains:
        candidates = [0]
    else:
        low = max(0, -(-(n - d * s) // d))  # ceil((N - D*s) / D)
        candidates = list(range(low, n // d + 1)) or [n // d]
    best: int | None = None
    for use_floors in (True, False) if top_floor else (False,):
        for level in candidates:
            top = level + s
            if use_floors and top_floor > top:
                continue
            above, below = 0, empty * level
            for c in counts:
                if c > top:
                    above += c - top
                elif c < level:
                    below += level - c
            moves = max(above, below)
            best = moves if best is None else min(best, moves)
        if best is not None:
            break
    return best or 0


def water_level(counts: Sequence[int], extra: int, empty: int = 0) -> int:
    """The highest minimum that ``extra`` pods added to ``counts`` can reach.

    ``empty`` is the number of further domains, left out of ``counts``, that hold no pod.
    """
    if empty > extra:
        return 0  # some empty domain stays empty
    ordered = [0] * empty + sorted(counts)
    if not ordered:
        return 0
    level, left = ordered[0], extra
    for filled in range(1, len(ordered) + 1):
        # the ``filled`` emptiest domains stand at ``level``
        if filled == len(ordered) or (ordered[filled] - level) * filled > left:
            return level + left // filled
        left -= (ordered[filled] - level) * filled
        level = ordered[filled]
    return level
