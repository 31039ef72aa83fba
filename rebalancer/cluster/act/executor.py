"""Executing one wave of a plan through the Eviction API, and nothing else (SPEC §5.1).

The only write is ``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` with a ``policy/v1``
Eviction that always carries ``deleteOptions.preconditions.uid``. There is no code path that
deletes a pod: a 429 is retried a few times and then reported, never "forced".

Before each eviction the pod and its node are read again, converted as the plan's snapshot
was, and the eviction is dropped when the plan's premise no longer holds (pod gone, replaced,
moved or relabelled) or the plan's own checks (:mod:`rebalancer.core.evictability`: leaving,
annotated ``karpenter.sh/do-not-disrupt``, its node NotReady, unreachable or being disrupted)
would now hold it.
Within one workload, pods are evicted one at a time: the next one waits until the previous
one's replacement is scheduled and Ready, bounded by the wave timeout, or until no replacement
is coming any more: the owning ReplicaSet or StatefulSet is gone, or was scaled down past it
since the eviction (:func:`replacement_moot`).
Workloads proceed side by side, in rounds: the first pod of every workload, wait, the second...

Status codes (SPEC §5.3):

=====  ==================================================================================
200,   evicted (``would-evict`` with ``--server-dry-run``)
201
404    ``gone``: the pod was already deleted
409    ``conflict``: the pod changed (uid precondition); the runner re-plans
429    a PodDisruptionBudget forbids it now: a few retries with backoff, then
       ``blocked-by-pdb``; a 429 without a disruption-budget cause is API throttling and is
       retried the same way, then ``failed``
403    with a ``DisruptionBudget`` cause (1.37+) or details naming the budget: the budget
       refuses (disruptionsAllowed below 0, or too many unconfirmed evictions):
       ``blocked-by-pdb``, not retried; any other 403 is RBAC's denial (exit 3)
500    about several PDBs covering the pod: ``blocked-by-pdb``, not retried
5xx    and connection errors: retried (jittered exponential backoff, bounded in attempts
       and time), then ``failed``
=====  ==================================================================================

Time and sleep are injected, so tests run without waiting.

Stopping (SIGTERM, SIGINT: ``should_stop``, and the process-wide
:func:`~rebalancer.cluster.api.deadline.stop_requests`): no eviction, retry or re-read is sent
after it, and no wait goes on. An eviction whose request was in flight is abandoned at once
and reported ``failed`` (it may have reached the API server); one answered 5xx or 429 is not
retried and is reported with its last answer; the rest of the wave is ``skipped``
(``stopping``).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol, TypeVar

from tenacity import Retrying

from rebalancer.cluster import logs
from rebalancer.cluster.act import evictionrequest
from rebalancer.cluster.act.lease import EvictionRecord
from rebalancer.cluster.act.outcome import EvictionResult, Outcome
from rebalancer.cluster.api import deadline, errors
from rebalancer.cluster.api.retry import RetryPolicy, retrying
from rebalancer.core.api import (
    EVICTION_REQUEST_API,
    Caches,
    Eviction,
    InputError,
    SkipCode,
    SkipReason,
    do_not_disrupt_reason,
    eviction_grace,
    leaving_reason,
    node_reason,
    workload_key,
)
from rebalancer.core.api import node as convert_node
from rebalancer.core.api import pod as convert_pod


def _log() -> Any:
    """The executor's logger (structlog loads on first use: an offline command never logs)."""
    return logs.get_logger("rebalancer.executor")


OWNER_KINDS: Final = frozenset({"ReplicaSet", "StatefulSet"})
"""Controllers (apps/v1) whose ``spec.replicas`` tells whether a replacement is still coming;
for any other owner (none, a Job, a custom controller) the wait goes on as it is."""


class Transport(Protocol):
    """The API calls the executor makes; :class:`~rebalancer.cluster.api.kubeclient.Kube` has
    them."""

    def post_eviction(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def get_node(self, name: str) -> dict[str, Any] | None: ...

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]: ...

    def get_owner(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        """The ReplicaSet or StatefulSet (a kind of :data:`OWNER_KINDS`), or None when it does
        not exist."""
        ...


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    """How hard to try, and how long to wait."""

    server_dry_run: bool = False
    """Send every eviction with ``dryRun: [All]``: the API server answers, nothing is evicted."""
    pdb_retries: int = 3
    """Extra attempts after a 429, within the run, before reporting ``blocked-by-pdb``."""
    pdb_backoff_seconds: float = 1.0
    """First wait after a 429; doubles each time (a ``retryAfterSeconds`` in the answer wins)."""
    pdb_backoff_max_seconds: float = 10.0
    """Cap of one wait after a 429."""
    max_attempts: int = 5
    """Attempts of one request on 5xx and connection errors."""
    max_retry_seconds: float = 60.0
    """Total time one request may spend retrying 5xx and connection errors."""
    backoff_seconds: float = 0.5
    """Scale of the jittered exponential backoff for 5xx and connection errors."""
    backoff_max_seconds: float = 8.0
    """Cap of one such backoff."""
    wave_timeout_seconds: float = 600.0
    """How long a wave may wait, in all, for replacements to be scheduled and Ready."""
    poll_interval_seconds: float = 2.0
    """How often to look for a replacement, at most."""
    first_poll_seconds: float = 0.25
    """The first look after an eviction comes this soon, then each wait doubles up to
    ``poll_interval_seconds``: a replacement Ready in a second does not hold the workload's
    next eviction (nor the next wave) for a whole poll interval."""
    eviction_api: str = "eviction"
    """The API evictions go through, as the run resolved the policy's ``evictionAPI``:
    ``eviction``, or ``evictionRequest`` (:mod:`.evictionrequest`, SPEC §5.11)."""


def poll_waits(settings: ExecutorSettings) -> Iterator[float]:
    """The waits between looks for a replacement: doubling from ``first_poll_seconds``, capped
    at ``poll_interval_seconds``."""
    wait = min(settings.first_poll_seconds, settings.poll_interval_seconds)
    while True:
        yield wait
        wait = min(2 * wait, settings.poll_interval_seconds)


def eviction_body(
    eviction: Eviction, *, dry_run: bool = False, pod: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The policy/v1 Eviction for a planned eviction: uid precondition always, grace as a floor.

    The plan's grace period is sent only when it is longer than the pod's own
    ``terminationGracePeriodSeconds`` (30 when unset), read from ``pod`` (the pod as just
    re-read) when given: a policy grace period never shortens a pod's shutdown (SPEC §5.2).
    """
    grace = eviction.grace_period_seconds
    if grace is not None and grace < 1:
        # Not an assert: this must hold with python -O too. Grace 0 would end the pod at once.
        raise InputError(
            eviction.key, [f"gracePeriodSeconds {grace} means no grace period; it must be >= 1"]
        )
    if not eviction.uid:
        raise InputError(eviction.key, ["no uid: the uid precondition is mandatory"])
    options: dict[str, Any] = {"preconditions": {"uid": eviction.uid}}
    if pod is not None:
        grace = eviction_grace(grace, _own_grace(pod))
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    if dry_run:
        options["dryRun"] = ["All"]
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": eviction.name, "namespace": eviction.namespace},
        "deleteOptions": options,
    }


# -- reading API objects (dicts) ---------------------------------------------------------------


def _part(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` (``metadata``, ``spec``, ``status``) when it is a mapping, else empty."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _own_grace(pod: Mapping[str, Any]) -> int | None:
    """The pod's ``spec.terminationGracePeriodSeconds``; None when unset or not an integer."""
    return _integer(_part(pod, "spec").get("terminationGracePeriodSeconds"))


def _condition(obj: Mapping[str, Any], kind: str) -> str | None:
    for condition in _part(obj, "status").get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in _part(pod, "metadata").get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def _owned_by(pod: Mapping[str, Any], owner_uid: str) -> bool:
    """Whether the pod's controller is the one with this uid."""
    ref = _controller(pod)
    return ref is not None and ref.get("uid") == owner_uid


def node_problem(node: Mapping[str, Any] | None, name: str) -> SkipReason | None:
    """Why pods on the re-read node must not be evicted now, or None: it is gone, or the
    plan's own node check (:func:`~rebalancer.core.evictability.node_reason`) holds them."""
    if node is None:
        return SkipReason(SkipCode.NODE_GONE, f"node {name} no longer exists")
    return node_reason(_converted(convert_node, node))


def pod_problem(
    pod: Mapping[str, Any],
    eviction: Eviction,
    expected_labels: Mapping[str, str] | None,
) -> SkipReason | None:
    """Why the re-read pod no longer matches the plan's premise, or None: another pod by the
    same name, one leaving, moved or relabelled, or one the plan's own checks would now hold
    (:func:`~rebalancer.core.evictability.leaving_reason`, ``do_not_disrupt_reason``)."""
    found = _converted(convert_pod, pod)
    key = eviction.key
    if found.uid != eviction.uid:
        return SkipReason(
            SkipCode.UID_CHANGED,
            f"{key} is now uid {found.uid or None}, the plan evicts uid {eviction.uid}",
        )
    leaving = leaving_reason(found)
    if leaving is not None:
        return leaving
    if found.node_name != eviction.node:
        return SkipReason(
            SkipCode.MOVED,
            f"{key} is on node {found.node_name}, the plan saw it on {eviction.node}",
        )
    if expected_labels is not None and dict(found.labels) != dict(expected_labels):
        return SkipReason(SkipCode.LABELS_CHANGED, f"the labels of {key} changed since the plan")
    return do_not_disrupt_reason(found)


_T = TypeVar("_T")


def _converted(
    convert: Callable[[Mapping[str, Any], list[str], Caches], _T], obj: Mapping[str, Any]
) -> _T:
    """A re-read object in the model, by the converter the plan's snapshot went through. A
    field the checks do not read that fails to convert (a quantity, a constraint) holds nothing
    back; one they read comes out defaulted (an unreadable uid is no uid: ``uid-changed``)."""
    return convert(obj, [], Caches())


def _is_ready(pod: Mapping[str, Any]) -> bool:
    """Scheduled, not terminating, and Ready."""
    return (
        not _part(pod, "metadata").get("deletionTimestamp")
        and bool(_part(pod, "spec").get("nodeName"))
        and _condition(pod, "Ready") == "True"
    )


def earlier_settled(record: EvictionRecord, pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an earlier run's eviction has settled, judged from its namespace's pods.

    The pod still there and not terminating: the eviction never happened (its run died before
    sending it, or it was refused). Still terminating: not settled. Gone: settled once its
    controller has as many Ready pods as it had just before the eviction, or once nothing of
    it is on the way any more: every pod it has left is Ready and none is terminating (a
    scale-down since then removed the replacement, or the workload is gone: there is nothing
    to wait for).
    """
    ready = on_the_way = 0
    for pod in pods:
        meta = _part(pod, "metadata")
        if meta.get("uid") == record.uid:
            return not meta.get("deletionTimestamp")
        if not _owned_by(pod, record.owner_uid):
            continue
        if _is_ready(pod):
            ready += 1
        else:
            on_the_way += 1
    return ready >= record.ready_before or on_the_way == 0


@dataclass(frozen=True, slots=True)
class Moot:
    """Why no replacement is coming any more for an evicted pod (:func:`replacement_moot`)."""

    owner: str  # Kind/name of the pod's controller
    replicas: int | None  # its spec.replicas as just read; None: it is gone
    ready: int  # its pods Ready and not terminating now, the evicted pod left out
    gone_why: str = ""  # how it is gone, when it is
    ordinal: int | None = None  # a StatefulSet's: the evicted pod's, no longer wanted

    @property
    def detail(self) -> str:
        if self.replicas is None:
            return f"the owner {self.owner} {self.gone_why}: no replacement to wait for"
        have = (
            f": ordinal {self.ordinal} is no longer wanted"
            if self.ordinal is not None
            else f" and has {self.ready} Ready besides the evicted one"
        )
        return (
            f"the owner {self.owner} wants {self.replicas} pods{have}: no replacement to wait for"
        )


def replacement_moot(
    owner: Mapping[str, Any] | None,
    ref: tuple[str, str, str],
    pods: Sequence[Mapping[str, Any]],
    evicted: tuple[str, str],
) -> Moot | None:
    """Whether the replacement of an evicted pod is no longer coming, judged from its owner as
    just read (None: not found) and the pods of its namespace as just listed; None when one
    may still come (or it cannot be told).

    ``ref`` is the evicted pod's controller: (kind, name, uid); ``evicted`` the pod's (name,
    uid). Moot when that controller is gone (not found, found with another uid: deleted and
    made again, or being deleted: its controller creates no pod any more), or when its
    ``spec.replicas`` is at most the number of its pods that are Ready and not terminating
    now, the evicted pod left out: a scale-down since the eviction removed the replacement, or
    will. A StatefulSet's replacement is the pod of the same name: it is moot only when that
    ordinal is past the last one wanted (``spec.ordinals.start + spec.replicas``); a scale-down
    that keeps it makes the pod again, and deletes the highest ordinal only once it is Ready.
    The evicted pod being gone with no replacement listed yet proves nothing: the controller
    may not have created it yet; only the owner decides.
    """
    kind, name, uid = ref
    evicted_name, evicted_uid = evicted
    label = f"{kind}/{name}"
    ready = sum(
        1
        for pod in pods
        if _owned_by(pod, uid)
        and _part(pod, "metadata").get("uid") != evicted_uid
        and _is_ready(pod)
    )
    if owner is None:
        return Moot(label, None, ready, "is gone")
    meta = _part(owner, "metadata")
    if meta.get("uid") != uid:
        return Moot(label, None, ready, f"is gone (one of that name has uid {meta.get('uid')})")
    if meta.get("deletionTimestamp"):
        return Moot(label, None, ready, "is being deleted")
    spec = _part(owner, "spec")
    replicas = _integer(spec.get("replicas"))
    if replicas is None:
        return None  # the API server defaults it: something else answered, wait as before
    if kind == "StatefulSet":
        ordinal = _ordinal(evicted_name, name)
        start = _integer(_part(spec, "ordinals").get("start", 0))
        if ordinal is None or start is None or start <= ordinal < start + replicas:
            return None
        return Moot(label, replicas, ready, ordinal=ordinal)
    return Moot(label, replicas, ready) if replicas <= ready else None


def _ordinal(pod: str, stateful_set: str) -> int | None:
    """The ordinal of a StatefulSet's pod, from its name ``<set>-<ordinal>``; None if not one."""
    prefix = f"{stateful_set}-"
    rest = pod[len(prefix) :] if pod.startswith(prefix) else ""
    return int(rest) if rest.isascii() and rest.isdigit() else None


def _is_ready_replacement(pod: Mapping[str, Any], pending: _Pending) -> bool:
    return (
        _owned_by(pod, pending.owner_uid)
        and _part(pod, "metadata").get("uid") not in pending.known
        and _is_ready(pod)
    )


def _disruption_budget_cause(body: Mapping[str, Any]) -> bool:
    """A 429 from a PodDisruptionBudget: its structured cause, or (a server that sends none)
    its message; a 429 without either is API throttling."""
    if errors.budget_causes(body):
        return True
    return "disruption budget" in str(body.get("message", "")).lower()


def _refusal(answer: Mapping[str, Any], message: str) -> str:
    """A PDB refusal's detail: its ``DisruptionBudget`` causes' messages when it carries them
    (each names the budget and why), else the answer's message."""
    causes = [c for c in errors.budget_causes(answer) if c] or list(_causes(answer))
    return "pdb: " + ("; ".join(causes) or message)


def _multiple_pdbs(body: Mapping[str, Any]) -> bool:
    return "more than one poddisruptionbudget" in str(body.get("message", "")).lower()


def _retry_after(body: Mapping[str, Any]) -> float | None:
    details = body.get("details")
    value = details.get("retryAfterSeconds") if isinstance(details, Mapping) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _message(body: Mapping[str, Any], status: int) -> str:
    message = body.get("message")
    return str(message) if message else f"HTTP {status}"


# -- the executor ------------------------------------------------------------------------------


class _Transient(Exception):
    """A 5xx answer or a connection error: worth retrying."""

    def __init__(self, status: int | None, body: Mapping[str, Any], detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.body = body
        self.detail = detail


STOPPING: Final = SkipReason(SkipCode.STOPPING, "not sent (SIGTERM)")


@dataclass(frozen=True, slots=True)
class _Posted:
    """What one (retried) eviction request came to."""

    status: int | None
    body: dict[str, Any]
    sent: int  # requests sent
    gave_up: str | None  # why retrying stopped without an answer worth classifying
    stopped: bool = False  # a stop ended it (nothing sent at all when ``sent`` is 0)


@dataclass(frozen=True, slots=True)
class _Pending:
    """An evicted pod whose replacement we wait for."""

    index: int  # into the results
    eviction: Eviction
    owner_kind: str
    owner_name: str
    owner_uid: str
    selector: str
    known: frozenset[str]  # uids of the owner's pods before the eviction
    ready_before: int  # of those, Ready (the evicted pod included)


@dataclass(frozen=True, slots=True)
class EvictionIntent:
    """An eviction about to be sent, with what a later run needs to judge it (the record)."""

    eviction: Eviction
    owner_kind: str
    owner_name: str
    owner_uid: str
    ready_before: int


class Executor:
    """Executes waves of evictions against a :class:`Transport`."""

    def __init__(
        self,
        transport: Transport,
        settings: ExecutorSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = deadline.pause,
        should_stop: Callable[[], bool] = lambda: False,
        on_result: Callable[[EvictionResult], None] | None = None,
        expected_labels: Mapping[str, Mapping[str, str]] | None = None,
        owner_selectors: Mapping[tuple[str, str, str], str] | None = None,
        before_evict: Callable[[EvictionIntent], None] | None = None,
        earlier: Sequence[EvictionRecord] = (),
        gate: Callable[[Eviction], SkipReason | None] | None = None,
        on_replaced: Callable[[EvictionResult], None] | None = None,
    ) -> None:
        """``expected_labels`` maps a pod uid to the labels the plan saw; a change drops it.

        ``owner_selectors`` maps (kind, namespace, name) of a controller to its label selector
        (API syntax); replacements are looked for with it. Without one, the whole namespace is
        listed. Either way only pods whose controller has the evicted pod's owner uid count: a
        pod's own labels are no guide, the API server may add some (topology labels) at binding.

        ``before_evict`` is called just before each eviction request (the Lease records it
        there); a :class:`errors.ClusterError` from it skips that eviction. ``earlier`` are
        evictions of earlier runs: a workload with one that has not settled yet
        (:func:`earlier_settled`) is waited for, within the wave timeout, before any of its
        pods is evicted.

        ``gate`` is asked first for each eviction (it may wait: capacity reserved for its
        replacement, :mod:`.reserve`); a reason it returns skips the eviction.
        ``on_replaced`` sees each result again once its replacement is Ready.
        """
        self._transport = transport
        self.settings = settings or ExecutorSettings()
        self._clock = clock
        self._sleep = sleep
        self._should_stop = should_stop
        self._on_result = on_result
        self._expected_labels = expected_labels or {}
        self._owner_selectors = owner_selectors or {}
        self._before_evict = before_evict
        self._gate = gate
        self._on_replaced = on_replaced
        self._earlier: dict[str, list[EvictionRecord]] = {}
        self._owner_unread: set[str] = set()  # workloads whose owner could not be read
        self._until = 0.0  # the current wave's deadline (an EvictionRequest is followed until it)
        for record in earlier:
            key = workload_key(record.namespace, record.workload, record.name)
            self._earlier.setdefault(key, []).append(record)

    # -- public ----------------------------------------------------------------------------

    def execute_wave(self, evictions: Sequence[Eviction]) -> tuple[EvictionResult, ...]:
        """Evict these pods (one wave) and wait for their replacements; one result each.

        Bodies are validated for the whole wave before the first request, so a bad grace
        period stops everything before anything is evicted.
        """
        dry_run = self.settings.server_dry_run
        for e in evictions:
            eviction_body(e, dry_run=dry_run)  # validates; the body sent is built per pod
        until = self._until = self._clock() + self.settings.wave_timeout_seconds
        groups: OrderedDict[str, deque[Eviction]] = OrderedDict()
        for e in evictions:
            groups.setdefault(e.workload_key, deque()).append(e)
        results: list[EvictionResult] = []
        stuck: dict[str, SkipReason] = {}  # workload -> why its next pods are not evicted
        if not dry_run:
            self._await_earlier(groups, stuck, until)
        while any(groups.values()):
            pending: dict[str, _Pending] = {}
            for workload, queue in groups.items():
                if not queue:
                    continue
                e = queue.popleft()
                if self._stopped():
                    result = _skipped(e, STOPPING)
                elif workload in stuck:
                    result = _skipped(e, stuck[workload])
                else:
                    result, wait = self._evict_one(e, len(results))
                    if wait is not None:
                        pending[workload] = wait
                self._emit(results, result)
            if pending and not dry_run:
                self._await(pending, results, stuck, until)
        return tuple(results)

    def _stopped(self) -> bool:
        """Stopping: the caller's stop, or the process's (:func:`.deadline.stopping`)."""
        return self._should_stop() or deadline.stopping()

    # -- one eviction ----------------------------------------------------------------------

    def _emit(self, results: list[EvictionResult], result: EvictionResult) -> None:
        results.append(result)
        _log().info(
            "eviction.result",
            pod=result.eviction.key,
            uid=result.eviction.uid,
            outcome=str(result.outcome),
            status=result.status,
            attempts=result.attempts,
            detail=result.detail,
        )
        if self._on_result is not None:
            self._on_result(result)

    def _evict_one(self, e: Eviction, index: int) -> tuple[EvictionResult, _Pending | None]:
        try:
            return self._evict_checked(e, index)
        except deadline.Stopped:  # a re-read, or the Lease's record, cut short: nothing sent
            return _skipped(e, STOPPING), None

    def _evict_checked(self, e: Eviction, index: int) -> tuple[EvictionResult, _Pending | None]:
        held = self._gate(e) if self._gate is not None else None
        if held is not None:
            return _skipped(e, held), None
        # Re-read the pod and its node: the plan may be stale by now.
        try:
            pod = self._transport.get_pod(e.namespace, e.name)
            if pod is None:
                return EvictionResult(e, Outcome.GONE, "pod-gone: no longer exists"), None
            problem = pod_problem(pod, e, self._expected_labels.get(e.uid))
            if problem is None:
                node = self._transport.get_node(e.node)
                problem = node_problem(node, e.node)
            if problem is not None:
                return _skipped(e, problem), None
            pending = self._prepare_wait(e, pod, index)
        except (errors.Unreachable, errors.ServerError) as exc:
            return EvictionResult(e, Outcome.FAILED, f"re-read failed: {exc}"), None
        if self._before_evict is not None:
            owner = _controller(pod) or {}
            intent = EvictionIntent(
                e,
                str(owner.get("kind", "")),
                str(owner.get("name", "")),
                str(owner.get("uid", "")),
                pending.ready_before if pending is not None else 0,
            )
            try:
                self._before_evict(intent)
            except deadline.Stopped:
                raise
            except errors.ClusterError as exc:
                code = (
                    SkipCode.LEASE_LOST
                    if isinstance(exc, errors.LeaseLost)
                    else SkipCode.NOT_RECORDED
                )
                return _skipped(e, SkipReason(code, f"not sent: {exc}")), None
        body = eviction_body(e, dry_run=self.settings.server_dry_run, pod=pod)
        if self.settings.eviction_api == EVICTION_REQUEST_API and evictionrequest.carries(body):
            follow = evictionrequest.Follow(
                self._until,
                self._clock,
                self._sleep,
                self._stopped,
                lambda: poll_waits(self.settings),
            )
            sent = evictionrequest.send(
                self._transport,  # type: ignore[arg-type]  # Kube serves both protocols
                e,
                follow,
                dry_run=self.settings.server_dry_run,
            )
            return sent, pending
        return self._send(e, body), pending

    def _prepare_wait(self, e: Eviction, pod: Mapping[str, Any], index: int) -> _Pending | None:
        """What to wait for after evicting ``pod``: a new Ready pod of the same controller."""
        if self.settings.server_dry_run:
            return None
        owner = _controller(pod)
        if owner is None or not owner.get("uid"):
            return None
        key = (str(owner.get("kind", "")), e.namespace, str(owner.get("name", "")))
        selector = self._owner_selectors.get(key, "")
        siblings = self._transport.list_pods(e.namespace, selector)
        mine = [p for p in siblings if _owned_by(p, owner["uid"])]
        known = frozenset(str(_part(p, "metadata").get("uid")) for p in mine)
        ready = sum(1 for p in mine if _is_ready(p))
        return _Pending(
            index,
            e,
            str(owner.get("kind", "")),
            str(owner.get("name", "")),
            str(owner["uid"]),
            selector,
            known | {e.uid},
            ready,
        )

    def _send(self, e: Eviction, body: Mapping[str, Any]) -> EvictionResult:
        s = self.settings
        attempts = 0
        status = 0
        answer: Mapping[str, Any] = {}
        for try_number in range(s.pdb_retries + 1):
            outcome = self._post(e, body)
            attempts += outcome.sent
            if outcome.stopped and not outcome.sent:  # stopped before anything went out
                if not attempts:
                    return _skipped(e, STOPPING)
                break  # the last 429's answer stands
            if outcome.gave_up is not None:
                return EvictionResult(
                    e, Outcome.FAILED, f"gave up: {outcome.gave_up}", outcome.status, attempts
                )
            status, answer = outcome.status or 0, outcome.body
            if status != 429 or try_number == s.pdb_retries or self._stopped():
                break
            delay = _retry_after(answer) or s.pdb_backoff_seconds * 2**try_number
            delay = min(delay, s.pdb_backoff_max_seconds)
            _log().info(
                "eviction.retry_429", pod=e.key, attempt=try_number + 1, sleep_seconds=delay
            )
            self._sleep(delay)
        return self._classify(e, status, answer, attempts)

    def _classify(
        self, e: Eviction, status: int, answer: Mapping[str, Any], attempts: int
    ) -> EvictionResult:
        message = _message(answer, status)
        if status in (200, 201) and self.settings.server_dry_run:
            outcome, detail = Outcome.WOULD_EVICT, "server dry run: accepted"
        elif status in (200, 201):
            outcome, detail = Outcome.EVICTED, "evicted"
            # From 1.38 the answer's Status carries the evicted pod's resourceVersion.
            version = _part(answer, "metadata").get("resourceVersion")
            if version:
                _log().info("eviction.accepted", pod=e.key, resource_version=str(version))
        elif status == 404:
            outcome, detail = Outcome.GONE, f"pod-gone: {message}"
        elif status == 409:
            outcome, detail = Outcome.CONFLICT, f"pod changed: {message}"
        elif status == 429 and _disruption_budget_cause(answer):
            outcome, detail = Outcome.BLOCKED_BY_PDB, _refusal(answer, message)
        elif status == 403 and errors.budget_forbidden(answer):
            # disruptionsAllowed below 0, or too many evictions the disruption controller has
            # not confirmed: not retried in the run (neither clears in seconds)
            outcome, detail = Outcome.BLOCKED_BY_PDB, _refusal(answer, message)
        elif status == 429:
            outcome, detail = Outcome.FAILED, f"throttled: {message}"
        elif status >= 500 and _multiple_pdbs(answer):
            outcome, detail = Outcome.BLOCKED_BY_PDB, f"multiple-pdbs: {message}"
        else:
            outcome, detail = Outcome.FAILED, f"HTTP {status}: {message}"
        return EvictionResult(e, outcome, detail, status, attempts)

    def _post(self, e: Eviction, body: Mapping[str, Any]) -> _Posted:
        """One eviction, retried on 5xx and connection errors, never once stopping: then a
        request in flight is abandoned (``failed``: it may have reached the server), and the
        last answer stands, not retried."""
        sent = 0
        last: _Transient | None = None

        def once() -> tuple[int, dict[str, Any]]:
            nonlocal sent, last
            sent += 1
            try:
                status, answer = self._transport.post_eviction(e.namespace, e.name, body)
            except deadline.Stopped as exc:
                if not exc.abandoned:  # refused before it was sent
                    sent -= 1
                raise
            except errors.Unreachable as exc:
                last = _Transient(None, {}, str(exc))
                raise last from exc
            if status >= 500 and not _multiple_pdbs(answer):
                last = _Transient(status, answer, f"HTTP {status}: {_message(answer, status)}")
                raise last
            return status, answer

        try:
            status, answer = self._retrying()(once)
        except _Transient as exc:
            return _Posted(exc.status, dict(exc.body), sent, exc.detail)
        except deadline.Stopped as exc:
            if exc.abandoned:
                why = "abandoned in flight (stopping): it may have been evicted"
                return _Posted(None, {}, sent, why, stopped=True)
            if last is None:
                return _Posted(None, {}, sent, None, stopped=True)
            why = f"{last.detail}; not retried (stopping)"
            return _Posted(last.status, dict(last.body), sent, why, stopped=True)
        return _Posted(status, answer, sent, None)

    def _retrying(self) -> Retrying:
        """Retries of an eviction (its reads are retried by the transport's GET policy)."""
        s = self.settings
        policy = RetryPolicy(
            s.max_attempts,
            s.backoff_seconds,
            s.backoff_max_seconds,
            s.max_retry_seconds,
            jitter=True,
        )
        return retrying(
            policy,
            lambda answer: isinstance(answer, _Transient),
            sleep=self._sleep,
            clock=self._clock,
            stopping=self._should_stop,
        )

    # -- waiting for replacements ----------------------------------------------------------

    def _await_earlier(
        self,
        groups: Mapping[str, deque[Eviction]],
        stuck: dict[str, SkipReason],
        until: float,
    ) -> None:
        """Wait until the earlier runs' evictions of this wave's workloads have settled."""
        waiting = {w: self._earlier[w] for w in groups if w in self._earlier}
        waits = poll_waits(self.settings)
        try:
            while waiting:
                self._look_earlier(waiting)
                now = self._clock()
                if not waiting or now >= until or self._stopped():
                    break
                _log().info("eviction.wait_earlier", workloads=sorted(waiting))
                self._sleep(min(next(waits), until - now))
        except deadline.Stopped:
            pass  # no look is sent any more: the workloads still waiting are stuck
        for workload, records in waiting.items():
            last = records[-1]
            why = (
                "stopping: not waiting for earlier replacements (SIGTERM)"
                if self._stopped()
                else f"the replacement of {last.key}, evicted by run {last.run}, is not Ready yet"
            )
            stuck[workload] = SkipReason(SkipCode.REPLACEMENT_NOT_READY, why)
            _log().warning("eviction.earlier_not_settled", workload=workload, detail=why)

    def _look_earlier(self, waiting: dict[str, list[EvictionRecord]]) -> None:
        """One look at the workloads whose earlier evictions are still settling: those that
        have settled (or whose replacements are moot) leave ``waiting``."""
        for workload, records in list(waiting.items()):
            first = records[0]
            key = (first.owner_kind, first.namespace, first.owner_name)
            selector = self._owner_selectors.get(key, "")
            try:
                pods = self._transport.list_pods(first.namespace, selector)
            except (errors.Unreachable, errors.ServerError):
                continue
            unsettled = [r for r in records if not earlier_settled(r, pods)]
            owners: dict[tuple[str, str], _OwnerRead] = {}  # one GET per owner and look
            moots = [self._moot(r, pods, workload, owners) for r in unsettled]
            known = [m for m in moots if m is not None]
            if len(known) == len(unsettled):  # each settled, or no replacement is coming
                for record, moot in zip(unsettled, known, strict=True):
                    self._log_moot(record.key, moot, run=record.run)
                del waiting[workload]

    def _await(
        self,
        pending: Mapping[str, _Pending],
        results: list[EvictionResult],
        stuck: dict[str, SkipReason],
        until: float,
    ) -> None:
        outstanding = {
            w: p for w, p in pending.items() if results[p.index].outcome is Outcome.EVICTED
        }
        waits = poll_waits(self.settings)
        try:
            while outstanding:
                self._look(outstanding, results)
                now = self._clock()
                if not outstanding or now >= until or self._stopped():
                    break
                self._sleep(min(next(waits), until - now))
        except deadline.Stopped:
            pass  # no look is sent any more: the replacements still awaited are not waited for
        for workload, wait in outstanding.items():
            why = (
                "stopping: not waiting for replacements (SIGTERM)"
                if self._stopped()
                else f"replacement of {wait.eviction.key} not scheduled and Ready in time"
            )
            stuck[workload] = SkipReason(SkipCode.REPLACEMENT_NOT_READY, why)
            _log().warning("eviction.replacement_timeout", pod=wait.eviction.key, detail=why)
            results[wait.index] = replace(
                results[wait.index], detail=f"{results[wait.index].detail}; {why}"
            )

    def _look(self, outstanding: dict[str, _Pending], results: list[EvictionResult]) -> None:
        """One look for the replacements still awaited: those Ready (or moot) leave
        ``outstanding``, noted in their results."""
        for workload, wait in list(outstanding.items()):
            try:
                pods = self._transport.list_pods(wait.eviction.namespace, wait.selector)
            except (errors.Unreachable, errors.ServerError):
                continue
            ready = next((p for p in pods if _is_ready_replacement(p, wait)), None)
            if ready is not None:
                name = f"{wait.eviction.namespace}/{_part(ready, 'metadata').get('name')}"
                results[wait.index] = replace(results[wait.index], replacement=name)
                _log().info("eviction.replacement_ready", pod=wait.eviction.key, replacement=name)
                if self._on_replaced is not None:
                    self._on_replaced(results[wait.index])
                del outstanding[workload]
            elif (moot := self._moot(wait, pods, workload, {})) is not None:
                # No replacement is coming: the workload's next eviction goes now.
                result = results[wait.index]
                results[wait.index] = replace(result, detail=f"{result.detail}; {moot.detail}")
                self._log_moot(wait.eviction.key, moot)
                del outstanding[workload]

    def _moot(
        self,
        evicted: _Pending | EvictionRecord,
        pods: Sequence[Mapping[str, Any]],
        workload: str,
        owners: dict[tuple[str, str], _OwnerRead],
    ) -> Moot | None:
        """Whether the evicted pod's replacement is no longer coming (:func:`replacement_moot`),
        its owner read now (once per look: ``owners`` keeps what this look read). None for an
        owner of another kind than :data:`OWNER_KINDS`, and when the owner cannot be read (403,
        5xx, no answer, after the transport's own retries): the wait goes on as before."""
        pod: Eviction | EvictionRecord = (
            evicted.eviction if isinstance(evicted, _Pending) else evicted
        )
        kind, name, uid = evicted.owner_kind, evicted.owner_name, evicted.owner_uid
        if kind not in OWNER_KINDS or not name or not uid:
            return None
        if (kind, name) not in owners:
            try:
                owners[kind, name] = _OwnerRead(
                    self._transport.get_owner(pod.namespace, kind, name)
                )
            except deadline.Stopped:
                raise
            except errors.ClusterError as exc:
                owners[kind, name] = _OwnerRead(None, str(exc))
        read = owners[kind, name]
        if read.error is not None:
            if workload not in self._owner_unread:  # once, not at every look
                self._owner_unread.add(workload)
                _log().warning(
                    "eviction.owner_unreadable",
                    workload=workload,
                    owner=f"{kind}/{name}",
                    detail=f"waiting for a replacement as usual: {read.error}",
                )
            return None
        return replacement_moot(read.owner, (kind, name, uid), pods, (pod.name, pod.uid))

    @staticmethod
    def _log_moot(pod: str, moot: Moot, **extra: str) -> None:
        _log().info(
            "eviction.replacement_moot",
            pod=pod,
            owner=moot.owner,
            replicas=moot.replicas,
            ready=moot.ready,
            detail=moot.detail,
            **extra,
        )


@dataclass(frozen=True, slots=True)
class _OwnerRead:
    """An owner as one look read it: the object (None: not found), or why it could not be."""

    owner: dict[str, Any] | None
    error: str | None = None


def _skipped(e: Eviction, reason: SkipReason) -> EvictionResult:
    return EvictionResult(e, Outcome.SKIPPED, str(reason), skip=reason)


def _causes(answer: Mapping[str, Any]) -> Iterable[str]:
    details = answer.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    for cause in causes or ():
        if isinstance(cause, Mapping) and cause.get("message"):
            yield str(cause["message"])
