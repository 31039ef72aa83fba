"""Capacity before the eviction (SPEC §5.10): reserve a node for a replacement that waits for
one, evict once it is there, and never evict for a node that does not come.

Whether a run reserves (:func:`resolve`): the policy's ``reserveCapacity`` is ``auto``,
discovery lists ``capacitybuffers`` in ``autoscaling.x-k8s.io/v1beta1``, and
SelfSubjectAccessReviews allow what a reservation takes (create, get, list and delete of
capacitybuffers; create, list and delete of podtemplates). The answer, with why, is the
planner's :class:`CapacityRules`: the plan says which way each waiting replacement goes.

A wave (:class:`Reservations`): for each group of its ``reserve`` evictions
(:func:`~.reservebody.groups`), the names are first written into the Lease holder's record,
then a PodTemplate made from the victim as re-read and a CapacityBuffer of as many replicas are
created in the pods' namespace. The executor then asks :meth:`Reservations.gate` before each
such eviction: it waits, within the wave's timeout, for a node carrying the pinned labels,
Ready, initialized, with room for the replacement's requests (and those of the replacements of
the same pin already sent and not yet placed), and lets the eviction go through the normal path
(re-reads, PodDisruptionBudgets, grace). No node in time: the evictions are not sent
(``capacity-not-added``, saying which pool added no node where, and what the buffer's status
says), the refusal is remembered (the loop's memory and the Lease's record: later runs back
off), and the buffer is deleted. A reservation is deleted once its replacements are placed,
when the wave ends, or when the run ends; a run stopped by a signal sends nothing more (SPEC
§6.2), so what it leaves is named in the Lease's record, and the next run removes it, as it
removes every reservation labelled rebalancer's that another run made
(:func:`remove_orphans`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from rebalancer.cluster import logs
from rebalancer.cluster.act.evictionrequest import Discovery
from rebalancer.cluster.act.outcome import EvictionResult, Outcome
from rebalancer.cluster.act.reservebody import (
    BUFFER_API,
    KINDS,
    OWN,
    RUN_LABEL,
    Group,
    buffer_says,
    capacity_buffer,
    free_room,
    groups,
    not_added,
    place,
    pod_template,
    requests_of,
)
from rebalancer.cluster.act.reserverecord import Ledger, Made, parse
from rebalancer.cluster.api import deadline, errors
from rebalancer.cluster.api.kubeclient import RESERVE_NAME
from rebalancer.core.api import (
    AUTO_API,
    CapacityRules,
    Eviction,
    Refused,
    SkipCode,
    SkipReason,
    refusal_key,
)

GROUP: Final = "autoscaling.x-k8s.io"
NEEDED: Final = (
    ("create", "capacitybuffers", GROUP),
    ("get", "capacitybuffers", GROUP),
    ("list", "capacitybuffers", GROUP),
    ("delete", "capacitybuffers", GROUP),
    ("create", "podtemplates", ""),
    ("list", "podtemplates", ""),
    ("delete", "podtemplates", ""),
)
"""What a run asks RBAC before it reserves: a reservation it could not remove would be left."""


def _log() -> Any:
    return logs.get_logger("rebalancer.reserve")


def served(kube: Discovery) -> bool:
    """Whether discovery lists ``capacitybuffers`` in ``autoscaling.x-k8s.io/v1beta1`` (best
    effort: no answer means not served)."""
    try:
        response = kube.request("GET", f"/apis/{BUFFER_API}")
        if response.status != 200:
            return False
        resources = response.json().get("resources") or ()
    except (errors.ClusterError, ValueError, AttributeError):
        return False
    return any(isinstance(r, Mapping) and r.get("name") == "capacitybuffers" for r in resources)


def resolve(
    kube: Discovery, mode: str, namespace: str | None, *, ask_rbac: bool = True
) -> CapacityRules:
    """Whether this run reserves capacity first, and why: the policy, discovery, then RBAC
    (:data:`NEEDED`; ``ask_rbac`` False, for ``plan`` and the dry run, which send GETs only:
    discovery alone, RBAC assumed to allow it)."""
    if mode != AUTO_API:
        return CapacityRules(reserve=False, why=f"reserveCapacity: {mode}")
    if not served(kube):
        return CapacityRules(reserve=False, why=f"auto: {BUFFER_API} capacitybuffers not served")
    if not ask_rbac:
        why = f"auto: {BUFFER_API} capacitybuffers served (RBAC not asked: GETs only)"
        return CapacityRules(reserve=True, why=why)
    for verb, resource, group in NEEDED:
        allowed, _ = kube.can_i(verb, resource, group=group, namespace=namespace)
        if not allowed:
            return CapacityRules(
                reserve=False, why=f"auto: RBAC does not allow {verb} of {resource}"
            )
    return CapacityRules(reserve=True, why=f"auto: {BUFFER_API} capacitybuffers served and allowed")


def info(policy: str, rules: CapacityRules) -> dict[str, Any]:
    """``server.capacity`` of a run's summary and of ``plan -o json``: the policy's
    ``reserveCapacity``, whether replacements that wait for a node are reserved first, and why."""
    return {"policy": policy, "reserve": rules.reserve, "why": rules.why}


class LeaseReader(Protocol):
    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...


def recorded_refusals(api: LeaseReader, namespace: str, name: str) -> dict[str, Refused]:
    """The refused reservations the Lease holder's record keeps (a GET: what a live ``plan``
    reads for the back-off); none when the Lease is not there or cannot be read (logged)."""
    try:
        lease = api.get_lease(namespace, name)
    except deadline.Stopped:
        raise
    except errors.ClusterError as exc:
        _log().warning("reserve.record_unread", lease=f"{namespace}/{name}", error=str(exc))
        return {}
    meta = lease.get("metadata") if lease is not None else None
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return parse(annotations if isinstance(annotations, Mapping) else None).refused


class ReserveApi(Protocol):
    """The calls this module makes (:class:`~rebalancer.cluster.api.kubeclient.Kube` has them)."""

    def create_reservation(
        self, kind: str, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]: ...

    def get_capacity_buffer(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list_reservations(
        self, kind: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]: ...

    def delete_reservation(self, kind: str, namespace: str, name: str) -> int: ...

    def list_nodes(self, label_selector: str) -> list[dict[str, Any]]: ...

    def list_pods_on_node(self, node: str) -> list[dict[str, Any]]: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class Waiting:
    """How a wave waits for the nodes: until its deadline (``clock``), looking as often as the
    executor looks for replacements."""

    until: float
    seconds: float  # the wave's timeout, as the refusal names it
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    stopping: Callable[[], bool]
    waits: Callable[[], Iterator[float]]


STOPPING: Final = SkipReason(SkipCode.STOPPING, "not sent (SIGTERM)")


@dataclass(slots=True)
class _Reservation:
    group: Group
    name: str
    made: bool = False  # its PodTemplate or CapacityBuffer may exist
    requests: dict[str, int] | None = None  # one replacement's; None: no template made
    held: SkipReason | None = None  # why its evictions are not sent
    open: set[str] = field(default_factory=set)  # uids whose replacement is not placed yet
    claims: dict[str, dict[str, int]] = field(default_factory=dict)  # sent, not placed yet


class Reservations:
    """The reservations of one wave (module docstring)."""

    def __init__(
        self,
        api: ReserveApi,
        ledger: Ledger,
        run_id: str,
        *,
        wall_clock: Callable[[], float],
        remember: Callable[[str, Refused], None],
        dry_run: bool = False,
    ) -> None:
        self.api = api
        self.ledger = ledger
        self.run_id = run_id
        self._wall = wall_clock
        self._remember = remember
        self.dry_run = dry_run
        self._of: dict[str, _Reservation] = {}  # eviction uid -> its reservation
        self._all: list[_Reservation] = []
        self._waiting: Waiting | None = None

    def open(self, wave: Sequence[Eviction], waiting: Waiting) -> None:
        """Make the reservations the wave needs (the record first, then the template and the
        buffer); one that cannot be made holds its evictions, saying why."""
        self._waiting = waiting
        for group in groups(wave):
            r = _Reservation(group, group.name(self.run_id), open={e.uid for e in group.evictions})
            self._all.append(r)
            for e in group.evictions:
                self._of[e.uid] = r
            try:
                self._make(r)
            except deadline.Stopped:
                r.held = STOPPING
            except errors.ClusterError as exc:
                r.held = _not_made(str(exc))
            if r.held is not None:
                _log().warning("reserve.not_made", reservation=r.name, detail=r.held.detail)

    def _make(self, r: _Reservation) -> None:
        group = r.group
        pod = self._victim(group)
        if pod is None:
            return  # gone or replaced: the executor's own re-read says so
        r.requests = requests_of(pod)
        if not self.dry_run:
            try:
                self.ledger.made(Made(group.namespace, r.name, self.run_id, self._wall()))
            except deadline.Stopped:
                raise
            except errors.LeaseLost as exc:
                r.held = SkipReason(SkipCode.LEASE_LOST, f"not sent: {exc}")
                return
            except errors.ClusterError as exc:
                why = f"not sent: the reservation could not be recorded in the Lease: {exc}"
                r.held = SkipReason(SkipCode.NOT_RECORDED, why)
                return
            r.made = True
        body = pod_template(r.name, self.run_id, pod, group.pin, group)
        status, answer = self.api.create_reservation(
            "podtemplates", group.namespace, body, dry_run=self.dry_run
        )
        if status not in (200, 201, 409):  # 409: this run's own, made already
            r.held = _not_made(f"PodTemplate {r.name}: {_status(status, answer)}")
            self._remove(r)
            return
        uid = (answer.get("metadata") or {}).get("uid") if status != 409 else None
        buffer = capacity_buffer(r.name, self.run_id, group, uid if isinstance(uid, str) else None)
        status, answer = self.api.create_reservation(
            "capacitybuffers", group.namespace, buffer, dry_run=self.dry_run
        )
        if status not in (200, 201, 409):
            r.held = _not_made(f"CapacityBuffer {r.name}: {_status(status, answer)}")
            self._remove(r)
            return
        _log().info(
            "reserve.created",
            reservation=f"{group.namespace}/{r.name}",
            workload=group.workload,
            where=group.where,
            replicas=len(group.evictions),
            dry_run=self.dry_run,
        )

    def _victim(self, group: Group) -> Mapping[str, Any] | None:
        """The first of the group's pods as re-read, still the one planned (same uid)."""
        for e in group.evictions:
            pod = self.api.get_pod(e.namespace, e.name)
            meta = pod.get("metadata") if pod is not None else None
            if isinstance(meta, Mapping) and meta.get("uid") == e.uid:
                return pod
        return None

    # -- before each eviction --------------------------------------------------------------

    def gate(self, e: Eviction) -> SkipReason | None:
        """Wait for room for ``e``'s replacement where it is reserved; why it is not sent when
        none comes in time. None for an eviction not reserved."""
        r = self._of.get(e.uid)
        waiting = self._waiting
        if r is None or waiting is None or self.dry_run:
            return r.held if r is not None else None
        if r.held is not None:
            return r.held
        if r.requests is None:
            return None  # no template was made (the pod is gone or replaced): re-read says so
        waits = waiting.waits()
        while True:
            if self._room(r, r.requests):
                r.claims[e.uid] = r.requests
                _log().info("reserve.room", pod=e.key, where=r.group.where)
                return None
            now = waiting.clock()
            if waiting.stopping():
                return STOPPING
            if now >= waiting.until:
                return self._refused(r, waiting)
            waiting.sleep(min(next(waits), waiting.until - now))

    def _room(self, r: _Reservation, requests: dict[str, int]) -> bool:
        """Whether the nodes of the pin have room for this replacement and for those of the
        same pin sent and not yet placed (a failed look: not yet)."""
        claims = [c for o in self._all if o.group.pin == r.group.pin for c in o.claims.values()]
        try:
            free = []
            for node in self.api.list_nodes(r.group.selector):
                name = (node.get("metadata") or {}).get("name")
                if not isinstance(name, str):
                    continue
                room = free_room(node, self.api.list_pods_on_node(name))
                if room is not None:
                    free.append(room)
        except deadline.Stopped:
            raise
        except errors.ClusterError as exc:
            _log().warning("reserve.look_failed", where=r.group.where, error=str(exc))
            return False
        return place(free, [*claims, requests])

    def _refused(self, r: _Reservation, waiting: Waiting) -> SkipReason:
        """No node in time: remember it, delete the buffer, hold the group's evictions."""
        try:
            says = buffer_says(self.api.get_capacity_buffer(r.group.namespace, r.name))
        except errors.ClusterError:
            says = ""
        why = not_added(r.group, waiting.seconds, says)
        r.held = SkipReason(SkipCode.CAPACITY_NOT_ADDED, why)
        self._remember(refusal_key(r.group.workload, r.group.pin), Refused(self._wall(), why))
        _log().warning("reserve.refused", reservation=r.name, workload=r.group.workload, why=why)
        self._remove(r)
        return r.held

    # -- after -----------------------------------------------------------------------------

    def settled(self, result: EvictionResult) -> None:
        """An eviction's result, or its replacement placed: a reservation whose replacements
        are all placed (or not coming: not evicted) is removed."""
        r = self._of.get(result.eviction.uid)
        if r is None:
            return
        uid = result.eviction.uid
        if result.outcome is not Outcome.EVICTED or result.replacement:
            r.open.discard(uid)
            r.claims.pop(uid, None)
        if not r.open:
            self._remove(r)

    def close(self) -> None:
        """The wave is over: remove what is left."""
        for r in self._all:
            self._remove(r)

    def _remove(self, r: _Reservation) -> None:
        if not r.made:
            return
        if remove(self.api, r.group.namespace, r.name):
            r.made = False
            self.ledger.removed(r.group.namespace, r.name)


def remove(api: ReserveApi, namespace: str, name: str) -> bool:
    """Delete a reservation's CapacityBuffer, then its PodTemplate; whether both are gone. A
    run stopping sends nothing: what is left stays named in the Lease's record."""
    try:
        for kind in KINDS:
            api.delete_reservation(kind, namespace, name)
    except deadline.Stopped:
        _log().warning("reserve.left", reservation=f"{namespace}/{name}", why="stopping")
        return False
    except errors.ClusterError as exc:
        _log().warning("reserve.left", reservation=f"{namespace}/{name}", why=str(exc))
        return False
    _log().info("reserve.deleted", reservation=f"{namespace}/{name}")
    return True


def remove_orphans(
    api: ReserveApi,
    ledger: Ledger,
    run_id: str,
    *,
    namespace: str | None,
    in_scope: Callable[[str], bool],
    listing: bool,
) -> int:
    """Remove the reservations earlier runs left: those the Lease's record names, and, when
    ``listing``, every one labelled rebalancer's in ``namespace`` (None: all) whose run is
    not this one, in the policy's namespaces. How many were removed."""
    found = {(m.namespace, m.name) for m in ledger.earlier if m.run != run_id}
    if listing:
        for kind in KINDS:
            try:
                items = api.list_reservations(kind, namespace, OWN)
            except deadline.Stopped:
                raise
            except errors.ClusterError as exc:
                _log().warning("reserve.orphans_unlisted", kind=kind, error=str(exc))
                continue
            for item in items:
                meta = item.get("metadata") or {}
                ns, name = meta.get("namespace"), meta.get("name")
                run = (meta.get("labels") or {}).get(RUN_LABEL)
                if (
                    isinstance(ns, str)
                    and isinstance(name, str)
                    and RESERVE_NAME.match(name)
                    and run != run_id
                    and in_scope(ns)
                ):
                    found.add((ns, name))
    removed = 0
    for ns, name in sorted(found):
        if remove(api, ns, name):
            ledger.removed(ns, name)
            removed += 1
    if found:
        _log().info("reserve.orphans_removed", found=len(found), removed=removed)
    return removed


def _not_made(detail: str) -> SkipReason:
    return SkipReason(SkipCode.CAPACITY_NOT_ADDED, f"no capacity reserved: {detail}")


def _status(status: int, answer: Mapping[str, Any]) -> str:
    message = answer.get("message")
    return f"HTTP {status}: {message}" if message else f"HTTP {status}"
