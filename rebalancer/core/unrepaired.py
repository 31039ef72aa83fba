"""The views a plan leaves above their maxSkew, and what holds each of them there (pure).

A view stays violated after the plan when its over-full domains (``count - globalMin >
maxSkew`` in the simulated end state) keep pods that the plan could not or would not move. Each
such pod is counted under the first reason that holds it: the rule that forbids its eviction
(``has-pvc``, ``pdb``, ``priority-threshold``, ``node-not-ready``, ``too-young``, ...), a policy
limit reached (``limit``), a replacement that would stay Pending (``no-fit``), or, when nothing
forbids it, that no eviction of it helped this view without making another worse (``no-gain``).
A view with fewer eligible domains than its ``minDomains`` has a global minimum of 0, so its
domains hold at most ``domains * maxSkew`` pods within maxSkew; the pods beyond that are counted
under ``min-domains`` whatever else holds them.

Worked example, zones [2, 1, 0] with maxSkew 1, every pod mounting a PersistentVolumeClaim
(``evictPodsWithPVC: false``): the plan evicts nothing, the view ends at skew 2, zone a (2 > 0 +
1) holds 2 pods, both ``has-pvc``; one eviction would repair it (SPEC §3.2's formula on [2, 1, 0]).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.minimal import min_moves
from rebalancer.core.plan import Hold, SkipCode, SkipReason
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import View

_NO_GAIN = SkipReason(
    SkipCode.NO_GAIN,
    "evicting it brings no view closer to maxSkew without making another view worse",
)
_REPLACED = SkipReason(
    SkipCode.REPLACED, "a replacement this plan places; the next run plans again"
)


def needed(view: View) -> int:
    """The fewest evictions that bring ``view`` within maxSkew from where it stood before the
    plan, if no pod were held (SPEC §3.2's formula; views sharing pods may need more)."""
    c = view.spec.constraint
    return min_moves(
        list(view.counts.values()),
        c.max_skew,
        c.min_domains,
        c.hard,
        empty=len(view.domains) - len(view.counts),
    )


def holds(
    state: SimState, v: ViewId, why: Callable[[PodId], SkipReason | None], moved: set[int]
) -> tuple[Hold, ...]:
    """What keeps view v above its maxSkew in ``state`` (the plan's end state).

    ``why(i)`` is the reason pod i was not moved (None: nothing forbade it); ``moved`` holds
    the pods the plan evicts (a replacement standing in an over-full domain counts as
    ``replaced``).
    """
    view = state.views[v]
    c = view.spec.constraint
    counts = state.counts[v]
    top = state.gmin(v) + c.max_skew
    pods = state.analysis.pods
    found: list[tuple[str, str, SkipReason]] = []
    for domain in sorted(d for d, n in counts.items() if n > top):
        for i in state.members(v, domain):
            reason = _REPLACED if i in moved else (why(i) or _NO_GAIN)
            found.append((pods[i].namespace, pods[i].name, reason))
    found.sort(key=lambda item: (item[0], item[1]))
    tally: Counter[SkipCode] = Counter()
    detail: dict[SkipCode, str] = {}
    for _, _, reason in found:
        tally[reason.code] += 1
        detail.setdefault(reason.code, reason.detail)
    out = []
    domains = len(view.domains)
    total = sum(counts.values())
    if c.hard and domains < c.min_domains and total > domains * c.max_skew:
        room = domains * c.max_skew
        out.append(
            Hold(
                SkipCode.MIN_DOMAINS,
                total - room,
                f"{domains} eligible domains, fewer than minDomains {c.min_domains}: the global "
                f"minimum stays 0, so they hold {room} pods within maxSkew {c.max_skew}",
            )
        )
    ranked = sorted(tally.items(), key=lambda item: (-item[1], item[0]))
    out += [Hold(code, count, detail[code]) for code, count in ranked]
    return tuple(out)


def left_above(
    state: SimState,
    views: Iterable[ViewId],
    why: Callable[[PodId], SkipReason | None],
    moved: set[int],
) -> tuple[tuple[ViewId, tuple[Hold, ...]], ...]:
    """Every view of ``views`` still above its maxSkew in ``state``, the plan's end state,
    worst first (the most above its maxSkew, then in the order given), with what holds it
    (:func:`holds`)."""
    left = [v for v in views if state.excess(v) > 0]
    left.sort(key=lambda v: -state.excess(v))  # stable: ties keep the order given
    return tuple((v, holds(state, v, why, moved)) for v in left)
