"""A planned eviction sent as an EvictionRequest (KEP-4563, ``lifecycle.k8s.io/v1alpha1``), and
followed to its outcome within the wave's timeout (SPEC §5.11).

Served from Kubernetes 1.37 behind the ``EvictionRequestAPI`` gate (alpha, off by default, on
kube-apiserver and kube-controller-manager). rebalancer creates one EvictionRequest per pod,
named ``rebalancer-<pod uid>``, with ``spec.requester`` :data:`REQUESTER`, ``spec.intent``
``Eviction`` and ``spec.target.pod`` the pod's name and uid. The evictionrequest-controller
makes an Eviction of it and hands that to the pod's responders in priority order
(``spec.evictionResponders``: a live migration, a graceful hand-off), the last one being the
default ``imperative-eviction.k8s.io/evictor``, which calls the Eviction API with the pod's uid as
a precondition: PodDisruptionBudgets hold as they do for rebalancer's own evictions. Nothing
here deletes a pod; the only DELETE is of rebalancer's own EvictionRequest, which withdraws it.

Following one request (a poll, doubling up to the executor's poll interval):

==========================================================  ==================================
what is seen                                                outcome
==========================================================  ==================================
the pod terminating (same uid), gone, or replaced           ``evicted`` (replacement awaited)
``Failed=True``, reason ``EvictionInvalid``: uid mismatch    ``conflict``
``Failed=True``, ``EvictionInvalid``: target not found       ``gone``
``Failed=True``, any other reason                            ``failed`` (the reason)
the active responder reports a disruption-budget refusal    ``blocked-by-pdb`` (its message)
the request deleted by someone else                          ``failed``
none of these by the wave's timeout, or stopping            ``withdrawn``
==========================================================  ==================================

Every request is deleted once its outcome is known (withdrawn, in the KEP's terms, when still
in progress): nothing of rebalancer's is left behind. The pod is read once more after a
withdrawal: a responder that evicted it in the meantime makes the outcome ``evicted``.

With ``--server-dry-run`` the request is created with ``dryRun=All`` (validated, not stored):
``would-evict``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from rebalancer.cluster import logs
from rebalancer.cluster.act.outcome import EvictionResult, Outcome
from rebalancer.cluster.api import deadline, errors
from rebalancer.core.api import AUTO_API, EVICTION_API, EVICTION_REQUEST_API, Eviction

GROUP_VERSION: Final = "lifecycle.k8s.io/v1alpha1"
REQUESTER: Final = "rebalancer/descheduler"
"""``spec.requester`` of rebalancer's EvictionRequests: a prefixed key (``*.k8s.io`` and
``*.kubernetes.io`` are reserved); the controller also labels each Eviction with it."""
DEFAULT_RESPONDER: Final = "imperative-eviction.k8s.io/evictor"


def _log() -> Any:
    return logs.get_logger("rebalancer.executor")


class RequestApi(Protocol):
    """The calls this module makes (:class:`~rebalancer.cluster.api.kubeclient.Kube` has
    them)."""

    def create_eviction_request(
        self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]: ...

    def get_eviction_request(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def delete_eviction_request(self, namespace: str, name: str) -> int: ...

    def list_evictions(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


FIRST_MINOR: Final = 38
"""1.37 serves the API behind its gate but runs no controller for it (the evictionrequest-
controller and the default responder arrive with 1.38): a request there is never acted on."""
_MINOR = re.compile(r"^v?1\.(\d+)\.")


def minor_of(version: object) -> int | None:
    """The minor of a ``gitVersion`` (``v1.38.0-beta.0``: 38); None when it says none."""
    found = _MINOR.match(version) if isinstance(version, str) else None
    return int(found.group(1)) if found else None


def choose_api(
    mode: str, *, served: bool, allowed: bool, minor: int | None = FIRST_MINOR
) -> tuple[str, str]:
    """The API a run sends its evictions through, and why: the policy's ``evictionAPI``
    (``auto``: EvictionRequests when the server serves them, runs their controller (1.38+) and
    RBAC lets rebalancer create them, else the Eviction API)."""
    if mode == EVICTION_API:
        return EVICTION_API, "evictionAPI: eviction"
    if mode == EVICTION_REQUEST_API:
        return EVICTION_REQUEST_API, "evictionAPI: evictionRequest"
    if not served:
        return EVICTION_API, f"auto: {GROUP_VERSION} evictionrequests not served"
    if minor is None or minor < FIRST_MINOR:
        return EVICTION_API, f"auto: served, but no controller acts on them before 1.{FIRST_MINOR}"
    if not allowed:
        return EVICTION_API, "auto: RBAC does not allow creating evictionrequests"
    return EVICTION_REQUEST_API, f"auto: {GROUP_VERSION} evictionrequests served and allowed"


class Discovery(Protocol):
    """What :func:`resolve` asks the API server (:class:`~rebalancer.cluster.api.kubeclient.
    Kube` has it)."""

    def request(self, method: str, path: str) -> Any: ...

    def can_i(
        self, verb: str, resource: str, *, group: str = "", namespace: str | None = None
    ) -> tuple[bool, str]: ...


def served(kube: Discovery) -> bool:
    """Whether discovery lists ``evictionrequests`` in :data:`GROUP_VERSION` (best effort: no
    answer means not served)."""
    try:
        response = kube.request("GET", f"/apis/{GROUP_VERSION}")
        if response.status != 200:
            return False
        resources = response.json().get("resources") or ()
    except (errors.ClusterError, ValueError, AttributeError):
        return False
    return any(isinstance(r, Mapping) and r.get("name") == "evictionrequests" for r in resources)


def resolve(
    kube: Discovery,
    mode: str,
    namespace: str | None,
    *,
    version: object = None,
    ask_rbac: bool = True,
) -> tuple[str, str]:
    """The API this run sends evictions through, and why (:func:`choose_api`): for ``auto``,
    discovery, then two SelfSubjectAccessReviews (create and delete of evictionrequests: a
    request rebalancer could not withdraw would be left behind). ``version``: the server's
    ``gitVersion`` (requests from 1.38 only). ``ask_rbac`` False (``plan`` and the dry run, which
    send GETs only): discovery alone, RBAC assumed to allow them."""
    minor = minor_of(version)
    if mode != AUTO_API:
        return choose_api(mode, served=True, allowed=True)
    if not served(kube):
        return choose_api(mode, served=False, allowed=False)
    if minor is None or minor < FIRST_MINOR:
        return choose_api(mode, served=True, allowed=False, minor=minor)
    if not ask_rbac:
        api, why = choose_api(mode, served=True, allowed=True, minor=minor)
        return api, f"{why} (RBAC not asked: GETs only)"
    allowed = all(
        kube.can_i(verb, "evictionrequests", group="lifecycle.k8s.io", namespace=namespace)[0]
        for verb in ("create", "delete")
    )
    return choose_api(mode, served=True, allowed=allowed, minor=minor)


def request_name(e: Eviction) -> str:
    """One request per pod: a later run finds (and adopts) what an interrupted one left."""
    return f"rebalancer-{e.uid}"


def request_body(e: Eviction) -> dict[str, Any]:
    """The EvictionRequest for a planned eviction: rebalancer as requester, the pod by name
    and uid."""
    if not e.uid:
        raise ValueError(f"{e.key}: no uid: the pod must be named by its uid")
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "EvictionRequest",
        "metadata": {"name": request_name(e), "namespace": e.namespace},
        "spec": {
            "requester": REQUESTER,
            "intent": "Eviction",
            "target": {"pod": {"name": e.name, "uid": e.uid}},
        },
    }


def carries(body: Mapping[str, Any]) -> bool:
    """Whether a request can carry this policy/v1 Eviction: it has no grace period of its own
    (a responder evicts with the pod's), so one whose plan asks for a longer grace period than
    the pod's own (SPEC §5.2, the floor) goes through the Eviction API."""
    options = body.get("deleteOptions")
    return not (isinstance(options, Mapping) and options.get("gracePeriodSeconds") is not None)


# -- reading what the API says -----------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _true_condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == kind
            and condition.get("status") == "True"
        ):
            return condition
    return None


def responder_says(evictions: list[dict[str, Any]], uid: str) -> tuple[str, str]:
    """(responder, message) of the active responder of the Eviction targeting pod ``uid``;
    empty strings when there is none yet."""
    for eviction in evictions:
        spec = eviction.get("spec")
        target = spec.get("target") if isinstance(spec, Mapping) else None
        pod = target.get("pod") if isinstance(target, Mapping) else None
        if not isinstance(pod, Mapping) or pod.get("uid") != uid:
            continue
        status = eviction.get("status")
        if not isinstance(status, Mapping):
            continue
        active = [
            str(r.get("name"))
            for r in status.get("targetResponders") or ()
            if isinstance(r, Mapping) and r.get("state") == "Active"
        ]
        for responder in status.get("responders") or ():
            if isinstance(responder, Mapping) and responder.get("name") in active:
                return str(responder.get("name")), str(responder.get("message") or "")
    return "", ""


def refused_by_budget(message: str) -> bool:
    """A responder's message that says a PodDisruptionBudget refused its eviction (the default
    responder quotes the Eviction API's answer)."""
    return "disruption budget" in message.lower()


@dataclass(frozen=True, slots=True)
class Seen:
    """One look at a request: the outcome it settles on, or None while it is in progress."""

    outcome: Outcome | None
    detail: str
    reason: str = ""


def look(
    e: Eviction,
    pod: Mapping[str, Any] | None,
    request: Mapping[str, Any] | None,
    responder: tuple[str, str],
) -> Seen:
    """What one look at the pod, the request and its Eviction's active responder settles
    (the table of the module's docstring, top to bottom)."""
    meta = _meta(pod) if pod is not None else {}
    if pod is None or meta.get("uid") != e.uid:
        return Seen(Outcome.EVICTED, "evicted through an EvictionRequest: the pod is gone")
    if meta.get("deletionTimestamp"):
        return Seen(Outcome.EVICTED, "evicted through an EvictionRequest: the pod is terminating")
    if request is None:
        return Seen(Outcome.FAILED, "the EvictionRequest was deleted by someone else", "Deleted")
    failed = _true_condition(request, "Failed")
    if failed is not None:
        reason = str(failed.get("reason") or "Failed")
        message = str(failed.get("message") or "")
        detail = f"EvictionRequest failed: {reason}: {message}".rstrip(": ")
        if reason == "EvictionInvalid" and "uid mismatch" in message.lower():
            return Seen(Outcome.CONFLICT, detail, reason)
        if reason == "EvictionInvalid" and "not found" in message.lower():
            return Seen(Outcome.GONE, detail, reason)
        return Seen(Outcome.FAILED, detail, reason)
    name, message = responder
    if message and refused_by_budget(message):
        return Seen(Outcome.BLOCKED_BY_PDB, f"pdb ({name}): {message}", "DisruptionBudget")
    return Seen(None, f"{name}: {message}" if name else "no responder active yet")


# -- sending and following ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Follow:
    """How one request is followed."""

    until: float  # the wave's deadline, on ``clock``
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    stopped: Callable[[], bool]
    waits: Callable[[], Iterator[float]]  # the executor's poll waits


def send(api: RequestApi, e: Eviction, follow: Follow, *, dry_run: bool = False) -> EvictionResult:
    """Create the EvictionRequest for ``e`` and follow it to its outcome (module docstring)."""
    name = request_name(e)
    status, answer = api.create_eviction_request(e.namespace, request_body(e), dry_run=dry_run)
    if dry_run:
        if status in (200, 201):
            return _result(e, Outcome.WOULD_EVICT, "server dry run: EvictionRequest accepted")
        return _result(e, Outcome.FAILED, f"HTTP {status}: {_message(answer, status)}", status)
    if status == 409:  # an interrupted run's request for this very pod: adopt it
        existing = api.get_eviction_request(e.namespace, name)
        if existing is None or _target_uid(existing) != e.uid:
            why = f"EvictionRequest {name} exists for another pod"
            return _result(e, Outcome.FAILED, why, status)
        _log().info("eviction_request.adopted", pod=e.key, request=name)
    elif status not in (200, 201):
        detail = f"EvictionRequest not created: HTTP {status}: {_message(answer, status)}"
        return _result(e, Outcome.FAILED, detail, status)
    _log().info("eviction_request.created", pod=e.key, request=name, requester=REQUESTER)
    seen = _follow(api, e, follow)
    if seen.outcome is None or seen.outcome is not Outcome.EVICTED:
        seen = _withdraw(api, e, seen)
    else:
        _delete(api, e)  # its work is done: nothing is left behind
    _log().info(
        "eviction_request.outcome",
        pod=e.key,
        request=name,
        outcome=str(seen.outcome),
        reason=seen.reason,
        detail=seen.detail,
    )
    outcome = seen.outcome or Outcome.WITHDRAWN  # _withdraw settles every outcome
    return _result(e, outcome, seen.detail, status, reason=seen.reason)


def _follow(api: RequestApi, e: Eviction, follow: Follow) -> Seen:
    """Look until an outcome settles, the wave's timeout passes, or a stop comes."""
    waits = follow.waits()
    last = Seen(None, "not looked at yet")
    try:
        while True:
            pod = api.get_pod(e.namespace, e.name)
            request = api.get_eviction_request(e.namespace, request_name(e))
            last = look(e, pod, request, responder_says(_evictions(api, e), e.uid))
            now = follow.clock()
            if last.outcome is not None or now >= follow.until or follow.stopped():
                return last
            follow.sleep(min(next(waits), follow.until - now))
    except deadline.Stopped:
        return last
    except (errors.Unreachable, errors.ServerError) as exc:
        return Seen(None, f"follow-up failed: {exc}")


def _evictions(api: RequestApi, e: Eviction) -> list[dict[str, Any]]:
    """The Evictions of rebalancer's requests in the pod's namespace; none when they cannot be
    listed (no RBAC for it): the responder's message is then unknown, the rest still holds."""
    try:
        return api.list_evictions(e.namespace, REQUESTER)
    except errors.ApiError as exc:
        _log().warning("eviction_request.evictions_unread", pod=e.key, error=str(exc))
        return []


def _withdraw(api: RequestApi, e: Eviction, seen: Seen) -> Seen:
    """Delete the request (withdrawing it: its responders stop) and look at the pod once more:
    a responder may have evicted it meanwhile."""
    deleted = _delete(api, e)
    try:
        pod = api.get_pod(e.namespace, e.name)
    except (errors.ClusterError, deadline.Stopped):
        pod = {"metadata": {"uid": e.uid}}  # unknown: as it was
    if pod is None or _meta(pod).get("uid") != e.uid or _meta(pod).get("deletionTimestamp"):
        return Seen(Outcome.EVICTED, "evicted through an EvictionRequest (as it was withdrawn)")
    if seen.outcome is not None:
        return seen
    left = "" if deleted else f"; the request {request_name(e)} could not be deleted"
    detail = f"still in progress at the wave's timeout (or stop), withdrawn: {seen.detail}{left}"
    return Seen(Outcome.WITHDRAWN, detail, "Timeout")


def _delete(api: RequestApi, e: Eviction) -> bool:
    """Delete rebalancer's request for ``e``; whether it is gone (404 counts)."""
    try:
        status = api.delete_eviction_request(e.namespace, request_name(e))
    except (errors.ClusterError, deadline.Stopped) as exc:
        _log().warning("eviction_request.not_deleted", pod=e.key, error=str(exc))
        return False
    return status in (200, 202, 404)


def _target_uid(request: Mapping[str, Any]) -> object:
    spec = request.get("spec")
    target = spec.get("target") if isinstance(spec, Mapping) else None
    pod = target.get("pod") if isinstance(target, Mapping) else None
    return pod.get("uid") if isinstance(pod, Mapping) else None


def _message(body: Mapping[str, Any], status: int) -> str:
    message = body.get("message")
    return str(message) if message else f"HTTP {status}"


def _result(
    e: Eviction, outcome: Outcome, detail: str, status: int | None = None, *, reason: str = ""
) -> EvictionResult:
    return EvictionResult(
        e, outcome, detail, status, attempts=1, api=EVICTION_REQUEST_API, reason=reason
    )
