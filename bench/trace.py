"""The churn trace that ``bench.churn`` replays: workloads and timed events, seeded.

A trace is data only (no cluster, no clock): the same seed gives the same trace, so every
contestant replays exactly the same events from the same start. Times are trace seconds; the
replay divides them by its speed-up.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SCALE = "scale"
ROLLOUT = "rollout"
DRAIN = "drain"
UNCORDON = "uncordon"
ZONE_DOWN = "zone-down"
ZONE_UP = "zone-up"
DRIFT = "drift"


@dataclass(frozen=True, slots=True)
class Workload:
    """A Deployment with one hard zone constraint (and optionally a soft hostname one)."""

    name: str
    replicas: int
    max_skew: int
    low: int
    high: int
    pdb_max_unavailable: int | None = None
    soft_hostname: bool = False
    cpu: str = "10m"


@dataclass(frozen=True, slots=True)
class Event:
    at: float
    kind: str
    target: str
    value: int = 0

    def describe(self) -> str:
        return f"{self.at:6.0f}s {self.kind} {self.target}" + (
            f" {self.value}" if self.kind == SCALE else ""
        )


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    zones: int
    nodes_per_zone: int
    workloads: tuple[Workload, ...]
    events: tuple[Event, ...]
    duration: float
    pool_cpu: tuple[int, ...] = ()
    """Karpenter's trace: no nodes of its own (``nodes_per_zone`` 0), one NodePool per zone with
    these CPU limits; empty for a trace on fixed nodes."""

    def workload(self, name: str) -> Workload:
        return next(w for w in self.workloads if w.name == name)


#: The issue's measured sequence: one Deployment, scaled every 20 s.
SHORT_SEQUENCE = (15, 6, 12, 5, 11, 14, 7, 10, 4, 9)


def short_trace() -> Trace:
    """One Deployment (hard zone maxSkew 1, PDB maxUnavailable 1), 3 zones x 2 nodes, scaled
    9 -> 15 -> 6 -> 12 -> 5 -> 11 -> 14 -> 7 -> 10 -> 4 -> 9 every 20 s."""
    web = Workload("web", 9, 1, 4, 15, pdb_max_unavailable=1)
    events = tuple(Event(20.0 * (i + 1), SCALE, web.name, n) for i, n in enumerate(SHORT_SEQUENCE))
    return Trace("short", 3, 2, (web,), events, 20.0 * (len(SHORT_SEQUENCE) + 1))


def _scales(rng: random.Random, workloads: tuple[Workload, ...], duration: float) -> list[Event]:
    events: list[Event] = []
    for w in workloads:
        t = rng.uniform(10, 30)
        n = w.replicas
        while t < duration - 20:
            # HPA-like: a step up or down by 20-60 % of the current size, within bounds
            step = max(1, round(n * rng.uniform(0.2, 0.6)))
            up = n + step <= w.high and (n - step < w.low or rng.random() < 0.5)
            n = n + step if up else max(w.low, n - step)
            events.append(Event(round(t, 1), SCALE, w.name, n))
            t += rng.uniform(20, 60)
    return events


def full_trace(seed: int = 1, duration: float = 900.0) -> Trace:
    """Three Deployments scaled HPA-like every 20-60 s, one rollout, one node drained and
    uncordoned, one zone NotReady for a few minutes; PDBs on two of the workloads."""
    rng = random.Random(seed)
    workloads = (
        Workload("web", 9, 1, 4, 15, pdb_max_unavailable=1),
        Workload("api", 6, 1, 3, 12, pdb_max_unavailable=2, soft_hostname=True),
        Workload("worker", 8, 2, 3, 14),
    )
    events = _scales(rng, workloads, duration)
    drained = f"z{rng.randrange(3)}-n{rng.randrange(2)}"
    down_zone = f"z{rng.randrange(3)}"
    events += [
        Event(round(duration * 0.3, 1), ROLLOUT, "api"),
        Event(round(duration * 0.45, 1), DRAIN, drained),
        Event(round(duration * 0.6, 1), UNCORDON, drained),
        Event(round(duration * 0.68, 1), ZONE_DOWN, down_zone),
        Event(round(duration * 0.68 + 180, 1), ZONE_UP, down_zone),
    ]
    events.sort(key=lambda e: (e.at, e.kind, e.target))
    return Trace(f"full-seed{seed}", 3, 2, workloads, tuple(events), duration)


#: Karpenter's trace: CPU limits of the NodePools of zones 0, 1 and 2 (zone 2's binds at peaks).
KARPENTER_POOL_CPU = (32, 32, 6)


def karpenter_trace(seed: int = 1, duration: float = 900.0) -> Trace:
    """The full trace's three Deployments (the same seeded scaling) on nodes Karpenter
    provides: pods of half a CPU, so that scale-ups launch nodes and scale-downs leave nodes
    for consolidation to remove; one NodePool per zone, zone 2's limited to
    :data:`KARPENTER_POOL_CPU` (it fills at the peaks); one pool's template changed at 45 %
    of the trace (drift: Karpenter replaces each of its nodes)."""
    rng = random.Random(seed)
    workloads = (
        Workload("web", 9, 1, 4, 15, pdb_max_unavailable=1, cpu="500m"),
        Workload("api", 6, 1, 3, 12, pdb_max_unavailable=2, soft_hostname=True, cpu="500m"),
        Workload("worker", 8, 2, 3, 14, cpu="500m"),
    )
    events = _scales(rng, workloads, duration)
    events.append(Event(round(duration * 0.45, 1), DRIFT, f"z{rng.randrange(2)}"))
    events.sort(key=lambda e: (e.at, e.kind, e.target))
    return Trace(
        f"karpenter-seed{seed}", 3, 0, workloads, tuple(events), duration, KARPENTER_POOL_CPU
    )
