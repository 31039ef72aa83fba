"""One rebalancer evicting at a time, and a record of its evictions that survives a crash.

SPEC §5.7: a run that evicts holds a ``coordination.k8s.io/v1`` Lease (default
``rebalancer/rebalancer``). It is taken before the first eviction, renewed by a thread every
``renew_seconds`` while the run lasts, and given back at the end (``holderIdentity`` cleared;
the Lease is never deleted). A run that finds it held by someone else, and not expired
(``renewTime + leaseDurationSeconds`` still ahead of this machine's clock), evicts nothing. An
expired Lease is taken over, and so is one that claims more than a holder can (renewTime or
acquireTime further ahead of this clock than clocks differ, a leaseDurationSeconds out of
range: :meth:`LeaseState.distrust`). Every write is a PUT carrying the ``resourceVersion`` last
seen, so of two runs racing for the same Lease exactly one succeeds; the other gets 409 and
knows it lost. A Lease no API server would serve (a spec that is not an object, a field of
another type) is an error naming the field; nothing is written over it.

The record: the Lease's annotation ``rebalancer/evictions`` holds the evictions of the last
``cooldown`` (JSON, at most ``max_records`` entries, newest kept). Each eviction is written
there *before* its request is sent (the write also proves the Lease is still ours), so a run
killed with ``kill -9`` between the two leaves a record of an eviction that may or may not have
happened; the next run checks (a pod with that uid still there and not terminating was not
evicted) and, for the others, counts them against the policy's limits and waits for their
replacements before touching their workloads again. A write that fails ends the run's
evictions: nothing is evicted without its record. A record that cannot be read at all is an
error before the Lease is taken, never an empty record: the run would not know what it may
evict.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, NoReturn, Protocol

from rebalancer.cluster import logs
from rebalancer.cluster.api import errors
from rebalancer.cluster.read.nesting import too_deep
from rebalancer.core.api import Eviction

RECORD_ANNOTATION: Final = "rebalancer/evictions"
DEFAULT_NAMESPACE: Final = "rebalancer"
DEFAULT_NAME: Final = "rebalancer"
DEFAULT_DURATION: Final = 60
DEFAULT_RENEW: Final = 20.0
DEFAULT_COOLDOWN: Final = 600.0
DEFAULT_MAX_RECORDS: Final = 500
"""About 200 bytes each: 100 KB at most, well under the 256 KiB the API allows annotations."""
MAX_RECORD_BYTES: Final = 256 * 1024
"""A record annotation longer than this is refused: the API server allows all of an object's
annotations together no more."""
SKEW_ALLOWANCE: Final = 30.0
"""Seconds a Lease's renewTime or acquireTime may lie ahead of this machine's clock and still
be believed. Clocks kept by NTP or chrony agree within a second; 30 s is a clock left to drift
for weeks, or stepped by hand. Further ahead, the Lease is treated as expired (and taken over):
believed, a renewTime one day ahead would turn every run away for a day."""
MAX_DURATION: Final = 86_400
"""The longest leaseDurationSeconds believed (one day, the most ``--lease-duration`` allows);
one outside 1 s to this is treated as expired."""


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    """Which Lease, and how it is held."""

    namespace: str = DEFAULT_NAMESPACE
    """Namespace of the Lease (``--lease-namespace``); deploy/ grants leases there only."""
    name: str = DEFAULT_NAME
    """Name of the Lease (``--lease-name``)."""
    duration_seconds: int = DEFAULT_DURATION
    """``leaseDurationSeconds``: a holder silent this long is taken over."""
    renew_seconds: float = DEFAULT_RENEW
    """How often the holder renews."""
    cooldown_seconds: float = DEFAULT_COOLDOWN
    """Evictions this recent count against the policy's limits (``--cooldown``)."""
    max_records: int = DEFAULT_MAX_RECORDS
    """Most evictions kept in the record (the newest)."""


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """One eviction as the Lease remembers it."""

    namespace: str
    name: str
    uid: str
    node: str
    workload: str  # Kind/name, as in the plan ("" for none)
    owner_kind: str  # the pod's controller (a ReplicaSet under a Deployment)
    owner_name: str
    owner_uid: str
    ready_before: int  # Ready pods of that controller just before the eviction, the pod included
    at: float  # seconds since the epoch, when the eviction was about to be sent
    run: str  # run id

    def to_json(self) -> dict[str, Any]:
        return {
            "ns": self.namespace,
            "pod": self.name,
            "uid": self.uid,
            "node": self.node,
            "wl": self.workload,
            "ok": self.owner_kind,
            "on": self.owner_name,
            "ou": self.owner_uid,
            "rb": self.ready_before,
            "at": round(self.at, 3),
            "run": self.run,
        }

    @staticmethod
    def from_json(item: Any) -> EvictionRecord | None:
        """A record, or None for anything malformed (a record never stops a run)."""
        if not isinstance(item, dict):
            return None
        text = ("ns", "pod", "uid", "node", "wl", "ok", "on", "ou", "run")
        if not all(isinstance(item.get(k), str) for k in text):
            return None
        rb, at = item.get("rb"), item.get("at")
        if type(rb) is not int or not isinstance(at, int | float) or isinstance(at, bool):
            return None
        try:
            seconds = float(at)
        except OverflowError:  # an integer past any float
            return None
        if not math.isfinite(seconds):  # NaN or Infinity, which Python's JSON reads
            return None
        return EvictionRecord(
            item["ns"],
            item["pod"],
            item["uid"],
            item["node"],
            item["wl"],
            item["ok"],
            item["on"],
            item["ou"],
            rb,
            seconds,
            item["run"],
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def as_eviction(self) -> Eviction:
        """The record as a past eviction, for the planner's limits (``evicted_before``)."""
        return Eviction(
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            node=self.node,
            priority=0,
            reason=f"evicted by run {self.run}",
            wave=0,
            workload=self.workload,
            domain="",
            topology_key="",
            target_node=None,
            grace_period_seconds=None,
        )


class RecordError(ValueError):
    """The record annotation cannot be read (not JSON, too deep, too large, not a list)."""


def parse_records(annotations: Mapping[str, Any] | None) -> tuple[EvictionRecord, ...]:
    """The records in a Lease's annotations (none when it has no record, or an empty one);
    malformed entries are left out. Raises :class:`RecordError` when the annotation as a whole
    cannot be read: the run must not go on without the evictions it counts."""
    return _read_records(annotations)[0]


def _read_records(
    annotations: Mapping[str, Any] | None,
) -> tuple[tuple[EvictionRecord, ...], int]:
    """:func:`parse_records`, and how many entries were left out as malformed."""
    raw = (annotations or {}).get(RECORD_ANNOTATION)
    if raw is None or raw == "":
        return (), 0
    if not isinstance(raw, str):
        raise RecordError(f"not a string but {_shown(raw)}")
    data = raw.encode(errors="surrogatepass")
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"{len(data)} bytes, more than the {MAX_RECORD_BYTES} allowed")
    deep = too_deep(data)
    if deep is not None:
        raise RecordError(deep)
    try:
        items = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise RecordError(f"not JSON ({exc})") from None
    if not isinstance(items, list):
        raise RecordError(f"not a JSON array but {_shown(items)}")
    records = tuple(r for r in map(EvictionRecord.from_json, items) if r is not None)
    return records, len(items) - len(records)


def dump_records(records: Iterable[EvictionRecord]) -> str:
    return json.dumps([r.to_json() for r in records], separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the Lease, as read from it."""

    identity: str
    acquired: str  # acquireTime as written, "" if unset
    renewed: str  # renewTime as written, "" if unset
    expires_in: float  # seconds from now, by this machine's clock


class LeaseApi(Protocol):
    """The three Lease calls; :class:`~rebalancer.cluster.api.kubeclient.Kube` has them."""

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def update_lease(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...


def micro_time(seconds: float) -> str:
    """A ``metav1.MicroTime``: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _shown(value: Any) -> str:
    """A value from the Lease as a message shows it: its JSON type, and the value if short
    (an object or array by its size only: it may nest deeper than anything should walk)."""
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if value is None:
        return "null"
    kind = (
        "a boolean"
        if isinstance(value, bool)
        else "a string"
        if isinstance(value, str)
        else "a number"
    )
    try:
        text = json.dumps(value)
    except ValueError:  # an integer of more digits than Python converts
        return f"{kind} too long to show"
    return f"{kind} {text}" if len(text) <= 80 else f"{kind} of {len(text)} characters"


@dataclass(frozen=True, slots=True)
class LeaseState:
    """The spec of a Lease as read, each field checked for its type (absent fields are None)."""

    identity: str  # holderIdentity, "" when nobody holds it
    duration: int | None  # leaseDurationSeconds
    acquired: float | None  # acquireTime, seconds since the epoch
    renewed: float | None  # renewTime, seconds since the epoch
    acquired_text: str  # acquireTime as written, "" if unset
    renewed_text: str  # renewTime as written, "" if unset
    transitions: int  # leaseTransitions, 0 if unset

    def distrust(self, now: float) -> str | None:
        """Why this Lease's claim to be held cannot be believed, or None.

        A holder writes its own clock's time into renewTime and acquireTime, so they run ahead
        of ``now`` by no more than the two clocks differ: more than :data:`SKEW_ALLOWANCE`
        ahead is a clock far off or an edit, and believing it would turn every run away until
        that time has passed. A leaseDurationSeconds outside 1 s to :data:`MAX_DURATION` is
        none that rebalancer writes (``--lease-duration`` allows 3 s to one day).
        """
        d = self.duration
        if d is not None and not 1 <= d <= MAX_DURATION:
            return f"leaseDurationSeconds {d} is outside 1..{MAX_DURATION}"
        for field, at, text in (
            ("renewTime", self.renewed, self.renewed_text),
            ("acquireTime", self.acquired, self.acquired_text),
        ):
            if at is not None and at - now > SKEW_ALLOWANCE:
                return (
                    f"{field} {text} is {at - now:.0f}s ahead of this machine's clock "
                    f"(more than the {SKEW_ALLOWANCE:.0f}s allowed for clock skew)"
                )
        return None

    def holder(self, now: float) -> Holder | None:
        """The live holder, or None when the Lease is free or expired (untrusted or not)."""
        renewed = self.renewed if self.renewed is not None else self.acquired
        if not self.identity or renewed is None or self.duration is None:
            return None  # nobody, or nothing says until when: treat as expired
        expires_in = renewed + self.duration - now
        if expires_in <= 0:
            return None
        return Holder(self.identity, self.acquired_text, self.renewed_text, expires_in)


def read_state(obj: Mapping[str, Any], where: str) -> LeaseState:
    """The spec of the Lease ``obj`` (``where``: namespace/name, for messages), checked.

    Raises :class:`errors.LeaseError` naming the field and its value when the spec is not one
    an API server serves (not an object, a field of another type, a time that does not parse):
    nothing is written over such an object.
    """
    bad = _malformed(where)
    spec = obj.get("spec", {})
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise bad("spec", spec, "an object")
    identity = spec.get("holderIdentity")
    if identity is not None and not isinstance(identity, str):
        raise bad("spec.holderIdentity", identity, "a string")
    numbers: dict[str, int | None] = {}
    for field in ("leaseDurationSeconds", "leaseTransitions"):
        value = spec.get(field)
        if value is not None and type(value) is not int:
            raise bad(f"spec.{field}", value, "an integer")
        numbers[field] = value
    times: dict[str, tuple[float | None, str]] = {}
    for field in ("acquireTime", "renewTime"):
        value = spec.get(field)
        if value is None:
            times[field] = (None, "")
            continue
        at = _parse_time(value)
        if at is None:
            raise bad(f"spec.{field}", value, "an RFC 3339 time")
        times[field] = (at, value)
    return LeaseState(
        identity=identity or "",
        duration=numbers["leaseDurationSeconds"],
        acquired=times["acquireTime"][0],
        renewed=times["renewTime"][0],
        acquired_text=times["acquireTime"][1],
        renewed_text=times["renewTime"][1],
        transitions=numbers["leaseTransitions"] or 0,
    )


def read_metadata(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """The annotations of the Lease ``obj`` read before it is written over: the object must
    have the resourceVersion that makes the write conditional (a PUT without one would win
    any race), and annotations that are an object. Raises :class:`errors.LeaseError`."""
    bad = _malformed(where)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise bad("metadata", meta, "an object")
    version = meta.get("resourceVersion")
    if not isinstance(version, str) or not version:
        raise bad("metadata.resourceVersion", version, "a non-empty string")
    annotations = meta.get("annotations")
    if annotations is None:
        return {}
    if not isinstance(annotations, dict):
        raise bad("metadata.annotations", annotations, "an object")
    return annotations


def _malformed(where: str) -> Callable[[str, Any, str], errors.LeaseError]:
    def bad(field: str, value: Any, want: str) -> errors.LeaseError:
        return errors.LeaseError(
            f"the Lease {where} as read is malformed: {field} is {_shown(value)}, not {want}; "
            "nothing was written to it and nothing was evicted"
        )

    return bad


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if at.tzinfo is None:
            return None  # a MicroTime says UTC; a local time would be read as this machine's
        return at.timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def holder_of(obj: Mapping[str, Any], now: float) -> Holder | None:
    """The live holder of a Lease object, or None when it is free, expired or not to be
    believed (:meth:`LeaseState.distrust`). Raises :class:`errors.LeaseError` when malformed."""
    state = read_state(obj, _where(obj))
    return None if state.distrust(now) else state.holder(now)


def _where(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"


def _spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


class Lease:
    """The Lease as one run holds it: acquire, record, renew (in a thread), release."""

    def __init__(
        self,
        api: LeaseApi,
        settings: LeaseSettings,
        identity: str,
        *,
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.settings = settings
        self.identity = identity
        self._wall = wall_clock
        self._clock = clock
        self._lock = threading.RLock()
        self._obj: dict[str, Any] | None = None
        self._records: list[EvictionRecord] = []
        self._not_evicted: set[str] = set()
        self._last_write = 0.0
        self.earlier: tuple[EvictionRecord, ...] = ()
        """Evictions within the cooldown recorded before this run took the Lease."""
        self.annotations: Mapping[str, Any] = {}
        """The Lease's annotations as read when this run took it (other records than the
        evictions': :meth:`keep`)."""
        self._kept: dict[str, str] = {}
        self.lost = threading.Event()
        self.lost_reason = ""
        self._on_lost: Callable[[], None] | None = None
        self._stop_renewing = threading.Event()
        self._renewer: threading.Thread | None = None
        self._log = logs.get_logger("rebalancer.lease")

    @property
    def where(self) -> str:
        return f"{self.settings.namespace}/{self.settings.name}"

    @property
    def held(self) -> bool:
        return self._obj is not None and not self.lost.is_set()

    # -- acquire -----------------------------------------------------------------------------

    def acquire(self) -> Holder | None:
        """Take the Lease; None when taken, else who holds it (nothing is written then).

        Raises :class:`errors.ClusterError` when the API fails (RBAC, namespace missing, ...).
        """
        s = self.settings
        now = self._wall()
        current = self.api.get_lease(s.namespace, s.name)
        if current is None:
            body = self._body({}, now, transitions=0)
            try:
                written = self.api.create_lease(s.namespace, body)
            except errors.NotFound as exc:
                raise errors.LeaseError(
                    f"cannot create the Lease {self.where}: namespace {s.namespace} does not "
                    "exist (create it, or pass --lease-namespace)"
                ) from exc
            except errors.Conflict:  # created by someone else since our GET
                current = self.api.get_lease(s.namespace, s.name)
                return self._holder_or_unknown(current)
            self._took(written, (), 0, {})
            return None
        state = read_state(current, self.where)
        theirs = bool(state.identity) and state.identity != self.identity
        untrusted = state.distrust(now) if theirs else None
        holder = None if untrusted else state.holder(now)
        if holder is not None and theirs:
            return holder
        records, dropped = self._earlier_records(current)  # read before anything is written
        annotations = dict(read_metadata(current, self.where))
        if untrusted:
            self._log.warning(
                logs.LEASE_UNTRUSTED,
                lease=self.where,
                holder=state.identity,
                reason=untrusted,
                since=state.acquired_text,
                renewed=state.renewed_text,
            )
        transitions = state.transitions + (state.identity != self.identity)
        body = self._body(current, now, transitions=transitions)
        try:
            written = self.api.update_lease(s.namespace, s.name, body)
        except errors.Conflict:  # someone else wrote it since our GET: they won
            return self._holder_or_unknown(self.api.get_lease(s.namespace, s.name))
        self._took(written, records, dropped, annotations)
        return None

    def _earlier_records(
        self, current: Mapping[str, Any]
    ) -> tuple[tuple[EvictionRecord, ...], int]:
        """The record of the Lease about to be taken, and how many entries were left out.

        An annotation that cannot be read at all is an error (exit 3), not an empty record: it
        holds the evictions that count against the policy's limits within the cooldown, and a
        run without them could evict more than the limits allow."""
        annotations = read_metadata(current, self.where)
        try:
            return _read_records(annotations)
        except RecordError as exc:
            s = self.settings
            raise errors.LeaseError(
                f"the Lease {self.where} has an eviction record that cannot be read "
                f"(annotation {RECORD_ANNOTATION}: {exc}); it holds the evictions of earlier "
                "runs that count against the policy's limits, so nothing was evicted. Repair "
                "it, or once those evictions are older than --cooldown remove it: kubectl "
                f"annotate lease -n {s.namespace} {s.name} {RECORD_ANNOTATION}-"
            ) from None

    def _holder_or_unknown(self, obj: Mapping[str, Any] | None) -> Holder:
        """Who won the race for the Lease, as far as a read just after says."""
        holder = None if obj is None else holder_of(obj, self._wall())
        if holder is not None:
            return holder
        return Holder(
            "(another rebalancer, just now)", "", "", float(self.settings.duration_seconds)
        )

    def _took(
        self,
        written: dict[str, Any],
        records: tuple[EvictionRecord, ...],
        dropped: int,
        annotations: Mapping[str, Any],
    ) -> None:
        """The Lease is ours: keep the records within the cooldown. One dated in the future
        (a clock ahead, or an edit) counts as made now, so it holds for one cooldown, no more
        and no less."""
        now = self._wall()
        horizon = now - self.settings.cooldown_seconds
        self._obj = written
        self._last_write = self._clock()
        self._records = [
            dataclasses.replace(r, at=now) if r.at > now else r for r in records if r.at >= horizon
        ]
        self.earlier = tuple(self._records)
        self.annotations = annotations
        spec = _spec(written)
        self._log.info(
            logs.LEASE_ACQUIRED,
            lease=self.where,
            holder=self.identity,
            duration_seconds=self.settings.duration_seconds,
            transitions=spec.get("leaseTransitions"),
            earlier_evictions=len(self.earlier),
            **({"malformed_records": dropped} if dropped else {}),
        )

    def _body(self, base: Mapping[str, Any], now: float, *, transitions: int) -> dict[str, Any]:
        """``base`` (the Lease as read, or {}) held by us from ``now``."""
        s = self.settings
        body = copy.deepcopy(dict(base))
        body["apiVersion"] = "coordination.k8s.io/v1"
        body["kind"] = "Lease"
        meta = body.setdefault("metadata", {})
        meta["name"] = s.name
        meta["namespace"] = s.namespace
        meta.pop("managedFields", None)
        spec = _spec_of(body)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = s.duration_seconds
        spec["acquireTime"] = micro_time(now)
        spec["renewTime"] = micro_time(now)
        spec["leaseTransitions"] = transitions
        return body

    # -- writes while held --------------------------------------------------------------------

    def _write(self, change: Callable[[dict[str, Any], float], None], what: str) -> None:
        """PUT the Lease changed by ``change(body, now)``; raise :class:`errors.LeaseLost` if
        it is no longer ours. One 409 is looked into: if the Lease is still ours (our previous
        write landed but its answer was lost), the write is made again on the new version."""
        s = self.settings
        with self._lock:
            if self.lost.is_set():
                raise errors.LeaseLost(self.lost_reason)
            if self._obj is None:
                raise errors.LeaseLost(f"Lease {self.where} is not held")
            if self._clock() - self._last_write > s.duration_seconds:
                self._lose(
                    f"not renewed for over {s.duration_seconds}s: it may have been taken over"
                )
            base = self._obj
            for attempt in range(2):
                now = self._wall()
                body = copy.deepcopy(base)
                body.get("metadata", {}).pop("managedFields", None)
                change(body, now)
                try:
                    self._obj = self.api.update_lease(s.namespace, s.name, body)
                except errors.Conflict:
                    current = self.api.get_lease(s.namespace, s.name)
                    theirs = _spec(current).get("holderIdentity") if current else None
                    if current is None or theirs != self.identity or attempt == 1:
                        self._lose(f"{what}: the Lease is now held by {theirs or 'nobody'}")
                    read_metadata(current, self.where)  # still ours: fit to write again?
                    base = current
                    continue
                self._last_write = self._clock()
                return

    def _lose(self, reason: str) -> NoReturn:
        """Mark the Lease lost (no eviction from now on) and raise :class:`errors.LeaseLost`."""
        message = f"Lease {self.where} lost: {reason}"
        if not self.lost.is_set():
            self.lost_reason = message
            self.lost.set()
            self._log.error(logs.LEASE_LOST, lease=self.where, reason=reason)
            if self._on_lost is not None:
                self._on_lost()
        raise errors.LeaseLost(message)

    def _renewed(self, body: dict[str, Any], now: float) -> None:
        """The change every write makes: renewTime moved to ``now``, the records written."""
        _spec_of(body)["renewTime"] = micro_time(now)
        self._set_records(body, now)

    def _set_records(self, body: dict[str, Any], now: float) -> None:
        horizon = now - self.settings.cooldown_seconds
        kept = [r for r in self._records if r.at >= horizon and r.uid not in self._not_evicted][
            -self.settings.max_records :
        ]
        meta = body.setdefault("metadata", {})
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[RECORD_ANNOTATION] = dump_records(kept)
        annotations.update(self._kept)

    def record(self, entry: EvictionRecord) -> None:
        """Write ``entry`` into the Lease before its eviction is sent (raises LeaseLost)."""
        with self._lock:
            self._records.append(entry)
            try:
                self._write(self._renewed, f"recording the eviction of {entry.key}")
            except errors.ClusterError:
                self._records.pop()
                raise

    def keep(self, key: str, value: str, *, write: bool) -> None:
        """Keep ``value`` in the annotation ``key`` from now on (another record than the
        evictions': capacity reservations, :mod:`.reserverecord`); written now when ``write``
        (raises LeaseLost, or a ClusterError), else with the next write."""
        with self._lock:
            before = self._kept.get(key)
            self._kept[key] = value
            if not write:
                return
            try:
                self._write(self._renewed, f"recording {key}")
            except errors.ClusterError:
                if before is None:
                    del self._kept[key]
                else:
                    self._kept[key] = before
                raise

    def not_evicted(self, uid: str) -> None:
        """The recorded eviction of ``uid`` did not happen: dropped at the next write."""
        with self._lock:
            self._not_evicted.add(uid)

    def renew(self) -> None:
        """Move renewTime to now (raises LeaseLost, or a ClusterError when unreachable)."""
        self._write(self._renewed, "renewing")

    def release(self) -> None:
        """Give the Lease back (holder cleared, the record kept); never raises."""
        self.stop_renewing()
        if self._obj is None or self.lost.is_set():
            return

        def change(body: dict[str, Any], now: float) -> None:
            _spec_of(body).pop("holderIdentity", None)
            self._renewed(body, now)

        try:
            self._write(change, "releasing")
        except errors.ClusterError as exc:
            # It expires on its own after leaseDurationSeconds.
            self._log.warning(logs.LEASE_RENEW_FAILED, lease=self.where, error=str(exc))
            return
        finally:
            self._obj = None
        self._log.info(logs.LEASE_RELEASED, lease=self.where, recorded=len(self._records))

    # -- the renewing thread ------------------------------------------------------------------

    def start_renewing(self, on_lost: Callable[[], None] | None = None) -> None:
        """Renew every ``renew_seconds`` in a daemon thread until :meth:`stop_renewing`."""
        self._on_lost = on_lost
        self._stop_renewing.clear()
        self._renewer = threading.Thread(
            target=self._renew_loop, name="rebalancer-lease", daemon=True
        )
        self._renewer.start()

    def stop_renewing(self) -> None:
        self._stop_renewing.set()
        thread, self._renewer = self._renewer, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _renew_loop(self) -> None:
        while not self._stop_renewing.wait(self.settings.renew_seconds):
            try:
                self.renew()
            except errors.LeaseLost:
                return
            except errors.ClusterError as exc:
                self._log.warning(logs.LEASE_RENEW_FAILED, lease=self.where, error=str(exc))
                if self._clock() - self._last_write > self.settings.duration_seconds:
                    try:
                        self._lose(f"not renewed for over {self.settings.duration_seconds}s")
                    except errors.LeaseLost:
                        return


def _spec_of(body: dict[str, Any]) -> dict[str, Any]:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        spec = body["spec"] = {}
    return spec
