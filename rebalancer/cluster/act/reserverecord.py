"""What the Lease holder's record keeps of capacity reservations (SPEC §5.10): the ones a run
is about to make (written *before* they are created, so a run killed at any moment leaves their
names for the next one to remove), and the ones that brought no node, for the back-off of later
runs (a CronJob's next one-shot run too).

The Lease's annotation ``rebalancer/capacity`` holds one JSON object::

    {"made": [{"ns": "shop", "name": "rebalancer-reserve-0a1b2c3d4e", "run": "...", "at": 1.0}],
     "refused": {"shop/Deployment/web|karpenter.sh/nodepool=pb,...":
                 {"since": 1.0, "why": "NodePool pb added no node in zone-c within 10m"}}}

Unlike the eviction record, this one never stops a run: an entry or a whole annotation that
cannot be read is left out and logged (the orphans are found by their labels as well, and a
back-off forgotten only means one more reservation is tried).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from rebalancer.cluster import logs
from rebalancer.cluster.api import errors
from rebalancer.cluster.read.nesting import too_deep
from rebalancer.core.api import Refused

CAPACITY_ANNOTATION: Final = "rebalancer/capacity"
MAX_ENTRIES: Final = 200
"""The most entries of each kind kept (the newest); a few hundred bytes each."""
MAX_BYTES: Final = 128 * 1024


@dataclass(frozen=True, slots=True)
class Made:
    """A reservation (its PodTemplate and CapacityBuffer share the name) a run made, or was
    about to make."""

    namespace: str
    name: str
    run: str
    at: float


@dataclass(slots=True)
class CapacityRecord:
    """The record as held: what is made and not yet removed, and the refusals."""

    made: list[Made] = field(default_factory=list)
    refused: dict[str, Refused] = field(default_factory=dict)

    def dump(self) -> str:
        made = [
            {"ns": m.namespace, "name": m.name, "run": m.run, "at": round(m.at, 3)}
            for m in self.made[-MAX_ENTRIES:]
        ]
        newest = sorted(self.refused.items(), key=lambda kv: kv[1].since)[-MAX_ENTRIES:]
        refused = {k: {"since": round(r.since, 3), "why": r.why} for k, r in newest}
        return json.dumps({"made": made, "refused": refused}, separators=(",", ":"))


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def parse(annotations: Mapping[str, Any] | None) -> CapacityRecord:
    """The record in a Lease's annotations; what cannot be read is left out (and logged)."""
    raw = (annotations or {}).get(CAPACITY_ANNOTATION)
    record = CapacityRecord()
    if raw is None or raw == "":
        return record
    problem = None
    if not isinstance(raw, str) or len(raw.encode(errors="surrogatepass")) > MAX_BYTES:
        problem = "not a string, or too large"
    else:
        problem = too_deep(raw.encode(errors="surrogatepass"))
    data: Any = None
    if problem is None:
        try:
            data = json.loads(raw)
        except ValueError as exc:
            problem = f"not JSON ({exc})"
    if problem is None and not isinstance(data, dict):
        problem = "not a JSON object"
    if problem is not None:
        logs.get_logger("rebalancer.lease").warning(
            "lease.capacity_unreadable", annotation=CAPACITY_ANNOTATION, problem=problem
        )
        return record
    for item in data.get("made") or ():
        if not isinstance(item, dict):
            continue
        ns, name, run = (item.get(k) for k in ("ns", "name", "run"))
        at = _number(item.get("at"))
        if at is not None and isinstance(ns, str) and isinstance(name, str) and ns and name:
            record.made.append(Made(ns, name, run if isinstance(run, str) else "", at))
    refused = data.get("refused")
    for key, item in refused.items() if isinstance(refused, dict) else ():
        since = _number(item.get("since")) if isinstance(item, dict) else None
        why = item.get("why") if isinstance(item, dict) else None
        if since is not None and isinstance(why, str):
            record.refused[str(key)] = Refused(since, why)
    return record


class Keeper(Protocol):
    """Where the record is kept: the Lease (:meth:`~rebalancer.cluster.act.lease.Lease.keep`)."""

    def keep(self, key: str, value: str, *, write: bool) -> None: ...


class Ledger:
    """The record as one run keeps it in the Lease it holds (none: in memory only, as in a
    server dry run). ``made`` is written at once (raises when that fails: nothing is created
    without its record); a removal at the next write; a refusal at once, best effort."""

    def __init__(self, keeper: Keeper | None, record: CapacityRecord) -> None:
        self.keeper = keeper
        self.record = record
        self.earlier: tuple[Made, ...] = tuple(record.made)
        """What the record named when this run took the Lease (the previous holders')."""

    def _keep(self, *, write: bool) -> None:
        if self.keeper is not None:
            self.keeper.keep(CAPACITY_ANNOTATION, self.record.dump(), write=write)

    def made(self, entry: Made) -> None:
        """Record ``entry`` before it is created (raises a ClusterError when that fails)."""
        self.record.made.append(entry)
        try:
            self._keep(write=True)
        except BaseException:
            self.record.made.remove(entry)
            raise

    def removed(self, namespace: str, name: str) -> None:
        """The reservation is gone: forgotten at the next write of the Lease."""
        self.record.made = [
            m for m in self.record.made if (m.namespace, m.name) != (namespace, name)
        ]
        self._keep(write=False)

    def refused(self, key: str, refused: Refused) -> None:
        """A reservation brought no node: kept for later runs' back-off (written now)."""
        self.record.refused[key] = refused
        try:
            self._keep(write=True)
        except errors.ClusterError as exc:  # the run goes on; this run's memory has it
            logs.get_logger("rebalancer.lease").warning(
                "lease.capacity_not_recorded", key=key, error=str(exc)
            )

    def prune(self, now: float, backoff_seconds: float) -> dict[str, Refused]:
        """Forget refusals older than the back-off; the others."""
        self.record.refused = {
            k: r for k, r in self.record.refused.items() if now - r.since < backoff_seconds
        }
        self._keep(write=False)
        return dict(self.record.refused)
