"""A planned move: one eviction and where the simulated scheduler put its replacement."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.core.ids import PodId, ViewId


@dataclass(frozen=True, slots=True)
class Move:
    """One eviction and where the simulated scheduler put its replacement."""

    pod: PodId
    view: ViewId  # the view this eviction repairs
    source: str  # node
    target: str | None  # None only with nodeFit: false and no room anywhere
    source_count: int  # view's pods in the source domain, before the move
    global_min: int  # view's global minimum, before the move
    pool: str = ""  # what a replacement short of room waits for: ``NodePool p in zone-b``
    reserve_in: tuple[tuple[str, str], ...] = ()  # with pool: the pool's and zone's labels
