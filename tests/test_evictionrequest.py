"""Evictions sent as EvictionRequests (SPEC §5.11), against a recording fake of the API that
plays the evictionrequest-controller and its responder look by look: no real sleep."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from rebalancer.cluster.act import evictionrequest as er
from rebalancer.cluster.act.executor import Executor, ExecutorSettings, poll_waits
from rebalancer.cluster.act.outcome import EvictionResult, Outcome
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.core.plan import Eviction
from tests.builders import NS, api_pod
from tests.fakes import FakeApi, FakeClock, FakeDiscovery, RecordingServer
from tests.test_executor import evict

PDB_MESSAGE = (
    '"web-1" pod deletion via the /eviction subresource failed (attempts=1): Cannot evict pod '
    "as it would violate the pod's disruption budget."
)


def condition(kind: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


def eviction_object(uid: str, message: str) -> dict[str, Any]:
    """An Eviction as the controller makes it, its default responder active with ``message``."""
    return {
        "metadata": {"name": "pod-1-web-1", "labels": {er.REQUESTER: "requester"}},
        "spec": {"target": {"pod": {"name": "web-1", "uid": uid}}},
        "status": {
            "targetResponders": [
                {"name": er.DEFAULT_RESPONDER, "priority": 100, "state": "Active"}
            ],
            "responders": [{"name": er.DEFAULT_RESPONDER, "message": message}],
        },
    }


class RequestWorld:
    """The API as a run of looks sees it: ``at(look)`` (1 for the first look) may change the
    pod, the request's conditions and the responder's message. Records every call; a call
    that would delete anything but rebalancer's request fails the test."""

    def __init__(
        self,
        pod: dict[str, Any] | None,
        *,
        create: tuple[int, dict[str, Any]] = (201, {}),
        at: Callable[[RequestWorld, int], None] = lambda world, look: None,
    ) -> None:
        self.pod = pod
        self.create = create
        self.at = at
        self.request: dict[str, Any] | None = None
        self.message = ""
        self.calls: list[tuple[str, str]] = []
        self.bodies: list[Mapping[str, Any]] = []
        self.looks = 0

    def __getattr__(self, name: str) -> Any:
        if "delete" in name.lower() or "evict" in name.lower():
            pytest.fail(f"called {name}: only rebalancer's own request may be deleted")
        raise AttributeError(name)

    def create_eviction_request(
        self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        self.calls.append(("CREATE dry-run" if dry_run else "CREATE", body["metadata"]["name"]))
        self.bodies.append(body)
        status, answer = self.create
        if status in (200, 201) and not dry_run:
            self.request = {**body, "status": {}}
        return status, answer

    def get_eviction_request(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("GET request", name))
        return self.request

    def delete_eviction_request(self, namespace: str, name: str) -> int:
        self.calls.append(("DELETE request", name))
        assert name.startswith("rebalancer-"), name
        gone, self.request = self.request is None, None
        return 404 if gone else 200

    def list_evictions(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        self.calls.append(("LIST evictions", label_selector))
        if self.pod is None or not self.message:
            return []
        return [eviction_object(self.pod["metadata"]["uid"], self.message)]

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.looks += 1
        self.at(self, self.looks)
        self.calls.append(("GET pod", name))
        return self.pod

    def conditions(self, *conditions: dict[str, Any]) -> None:
        assert self.request is not None
        self.request["status"] = {"conditions": list(conditions)}

    def deleted(self) -> list[str]:
        return [name for call, name in self.calls if call == "DELETE request"]


def follow(clock: FakeClock, timeout: float = 10.0, **settings: Any) -> er.Follow:
    s = ExecutorSettings(**settings)
    return er.Follow(clock() + timeout, clock, clock.sleep, lambda: False, lambda: poll_waits(s))


def send(world: RequestWorld, e: Eviction, **kwargs: Any) -> EvictionResult:
    clock = FakeClock()
    return er.send(world, e, follow(clock, **kwargs))


def web() -> dict[str, Any]:
    return api_pod("web-1")


def terminating(pod: dict[str, Any]) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-12-07T12:00:00Z"}}


# -- the request itself -------------------------------------------------------------------------


def test_the_request_names_rebalancer_and_the_pod_by_name_and_uid() -> None:
    """One EvictionRequest per pod: rebalancer's requester key, intent Eviction, the pod's name
    and uid, named after the uid."""
    assert er.request_body(evict("web-1")) == {
        "apiVersion": "lifecycle.k8s.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {"name": "rebalancer-uid-web-1", "namespace": NS},
        "spec": {
            "requester": "rebalancer/descheduler",
            "intent": "Eviction",
            "target": {"pod": {"name": "web-1", "uid": "uid-web-1"}},
        },
    }


@pytest.mark.parametrize(
    ("mode", "served", "allowed", "used"),
    [
        # hand-written: eviction and evictionRequest are what they say; auto needs both
        ("eviction", True, True, "eviction"),
        ("eviction", False, False, "eviction"),
        ("evictionRequest", False, False, "evictionRequest"),
        ("evictionRequest", True, True, "evictionRequest"),
        ("auto", False, False, "eviction"),
        ("auto", False, True, "eviction"),
        ("auto", True, False, "eviction"),
        ("auto", True, True, "evictionRequest"),
    ],
)
def test_the_api_follows_the_policy_and_for_auto_discovery_and_rbac(
    mode: str, served: bool, allowed: bool, used: str
) -> None:
    """``auto`` sends requests only where they are served and allowed."""
    assert er.choose_api(mode, served=served, allowed=allowed)[0] == used


def discovery(status: int, resources: list[str], allowed: set[str]) -> FakeDiscovery:
    """lifecycle.k8s.io/v1alpha1's discovery and access reviews: the ``allowed`` verbs."""
    return FakeDiscovery(
        "/apis/lifecycle.k8s.io/v1alpha1", status, resources, lambda verb, _: verb in allowed
    )


@pytest.mark.parametrize(
    ("status", "resources", "allowed", "used", "reviews"),
    [
        (404, [], {"create", "delete"}, "eviction", 0),  # the gate off: no group at all
        (200, ["evictions"], {"create", "delete"}, "eviction", 0),
        (200, ["evictionrequests", "evictions"], {"create"}, "eviction", 2),  # no delete
        (200, ["evictionrequests", "evictions"], {"create", "delete"}, "evictionRequest", 2),
    ],
)
def test_auto_asks_discovery_then_rbac_for_create_and_delete(
    status: int, resources: list[str], allowed: set[str], used: str, reviews: int
) -> None:
    """``resolve`` for auto: discovery first; only where served, create and delete are asked."""
    kube = discovery(status, resources, allowed)
    assert er.resolve(kube, "auto", "shop", version="v1.38.0-beta.0")[0] == used
    assert len(kube.asked) == reviews
    assert all(a[1:] == ("evictionrequests", "lifecycle.k8s.io", "shop") for a in kube.asked)


def test_a_plan_asks_discovery_only() -> None:
    """``plan`` and the dry run send GETs only: no SelfSubjectAccessReview, RBAC assumed."""
    kube = discovery(200, ["evictionrequests"], set())
    used = er.resolve(kube, "auto", "shop", version="v1.38.0", ask_rbac=False)[0]
    assert used == "evictionRequest"
    assert kube.asked == []


@pytest.mark.parametrize(
    ("version", "used"),
    [
        # 1.37 serves the API behind its gate, but its controller arrives with 1.38
        ("v1.37.2", "eviction"),
        ("v1.38.0-beta.0", "evictionRequest"),
        ("v1.39.1", "evictionRequest"),
        (None, "eviction"),  # unknown: not assumed
        ("master", "eviction"),
    ],
)
def test_auto_sends_requests_only_where_their_controller_runs(
    version: str | None, used: str
) -> None:
    """Served and allowed, ``auto`` still keeps the Eviction API before 1.38 (nobody would act
    on a request); an explicit ``evictionRequest`` is sent whatever the version."""
    kube = discovery(200, ["evictionrequests"], {"create", "delete"})
    assert er.resolve(kube, "auto", "shop", version=version)[0] == used
    assert er.resolve(kube, "evictionRequest", "shop", version=version)[0] == "evictionRequest"


def test_a_grace_period_longer_than_the_pods_goes_through_the_eviction_api() -> None:
    """A request carries no grace period: a body with one (the plan's floor above the pod's
    own) is not carried by a request."""
    assert er.carries({"deleteOptions": {"preconditions": {"uid": "u"}}})
    assert not er.carries(
        {"deleteOptions": {"preconditions": {"uid": "u"}, "gracePeriodSeconds": 90}}
    )


# -- following it -------------------------------------------------------------------------------


def test_a_pod_the_responder_evicts_is_evicted_and_the_request_deleted() -> None:
    """The pod terminating at the third look: evicted, through a request; the request is
    deleted once (nothing left behind); no pod is deleted or evicted by rebalancer."""

    def at(world: RequestWorld, look: int) -> None:
        if look == 3:
            world.pod = terminating(web())

    world = RequestWorld(web(), at=at)
    result = send(world, evict("web-1"))
    assert (result.outcome, result.api) == (Outcome.EVICTED, "evictionRequest")
    assert "terminating" in result.detail
    assert world.looks == 3
    assert world.deleted() == ["rebalancer-uid-web-1"]
    assert world.calls[0] == ("CREATE", "rebalancer-uid-web-1")


def test_a_pod_replaced_under_the_same_name_counts_as_gone() -> None:
    """Another uid under the pod's name (a StatefulSet's new pod): the evicted one is gone."""
    world = RequestWorld(api_pod("web-1", uid="another"))
    assert send(world, evict("web-1")).outcome is Outcome.EVICTED


def test_a_budget_refusal_is_blocked_with_the_responders_message_and_withdrawn() -> None:
    """The default responder quotes the Eviction API's 429: blocked-by-pdb, its message in the
    detail, reason DisruptionBudget; the request is withdrawn (deleted)."""

    def at(world: RequestWorld, look: int) -> None:
        if look == 2:
            world.message = PDB_MESSAGE

    world = RequestWorld(web(), at=at)
    result = send(world, evict("web-1"))
    assert result.outcome is Outcome.BLOCKED_BY_PDB
    assert result.reason == "DisruptionBudget"
    assert PDB_MESSAGE in result.detail and er.DEFAULT_RESPONDER in result.detail
    assert world.deleted() == ["rebalancer-uid-web-1"]


@pytest.mark.parametrize(
    ("reason", "message", "outcome"),
    [
        (
            "NoFurtherResponder",
            "All responders have completed without evicting the target.",
            Outcome.FAILED,
        ),
        ("EvictionInvalid", "Target pod UID mismatch: expected a, got b.", Outcome.CONFLICT),
        ("EvictionInvalid", "Target pod not found.", Outcome.GONE),
        ("CanceledDueToNoRequesters", "No active requesters with eviction intent.", Outcome.FAILED),
    ],
)
def test_a_failed_request_reports_the_controllers_reason(
    reason: str, message: str, outcome: Outcome
) -> None:
    """Failed=True settles the outcome with the condition's reason and message."""

    def at(world: RequestWorld, look: int) -> None:
        if look == 2:
            world.conditions(condition("Failed", reason, message))

    world = RequestWorld(web(), at=at)
    result = send(world, evict("web-1"))
    assert (result.outcome, result.reason) == (outcome, reason)
    assert message in result.detail
    assert world.deleted() == ["rebalancer-uid-web-1"]


def test_a_request_still_in_progress_at_the_timeout_is_withdrawn_and_counted() -> None:
    """Nothing happens within the wave's 10 s: withdrawn (deleted), outcome withdrawn, reason
    Timeout. Looks: at t = 0, .25, .75, 1.75, 3.75, 5.75, 7.75, 9.75 and 10 (waits double from
    .25 up to 2, the last one cut to the deadline), then one more read of the pod after the
    withdrawal: 10 pod reads, 9 request reads."""
    world = RequestWorld(web())
    world.message = '"web-1" live migration in progress'
    result = send(world, evict("web-1"), timeout=10.0)
    assert (result.outcome, result.reason) == (Outcome.WITHDRAWN, "Timeout")
    assert "live migration in progress" in result.detail
    assert world.deleted() == ["rebalancer-uid-web-1"]
    assert world.looks == 10
    assert sum(1 for call, _ in world.calls if call == "GET request") == 9
    assert world.calls[-2:] == [("DELETE request", "rebalancer-uid-web-1"), ("GET pod", "web-1")]


@pytest.mark.parametrize("timeout", [10.0, 100.0, 1000.0])
def test_the_looks_are_bounded_by_the_timeout(timeout: float) -> None:
    """Looks grow with the timeout by one per poll interval (2 s), no faster: at most
    timeout / 2 + 5 request reads (4 doubling looks before the interval is reached, the last
    one at the deadline)."""
    world = RequestWorld(web())
    send(world, evict("web-1"), timeout=timeout)
    reads = sum(1 for call, _ in world.calls if call == "GET request")
    assert timeout / 2 <= reads <= timeout / 2 + 5


def test_a_pod_evicted_as_the_request_is_withdrawn_is_evicted() -> None:
    """The responder evicts it between the last look and the withdrawal: the read after the
    withdrawal sees it terminating, and the outcome is evicted."""

    def at(world: RequestWorld, look: int) -> None:
        if look == 10:  # the read after the withdrawal (test above: 9 looks in 10 s)
            world.pod = terminating(web())

    world = RequestWorld(web(), at=at)
    result = send(world, evict("web-1"), timeout=10.0)
    assert result.outcome is Outcome.EVICTED
    assert world.deleted() == ["rebalancer-uid-web-1"]


def test_an_interrupted_runs_request_for_the_same_pod_is_adopted() -> None:
    """409 on create, the existing request targets the same uid: it is followed as ours."""
    world = RequestWorld(terminating(web()), create=(409, {"reason": "AlreadyExists"}))
    world.request = er.request_body(evict("web-1"))
    assert send(world, evict("web-1")).outcome is Outcome.EVICTED
    assert world.deleted() == ["rebalancer-uid-web-1"]


def test_a_request_of_that_name_for_another_pod_is_neither_followed_nor_deleted() -> None:
    """409 and the existing request targets another uid: failed, and it is left alone."""
    world = RequestWorld(web(), create=(409, {}))
    world.request = er.request_body(evict("web-1", uid="other"))
    result = send(world, evict("web-1"))
    assert result.outcome is Outcome.FAILED
    assert world.deleted() == []


def test_evictions_rbac_may_not_list_leave_the_rest_of_the_follow_up_alone() -> None:
    """A 403 listing the Evictions: the responder's message is unknown, the pod evicted is
    still seen, and the request still deleted."""

    class NoList(RequestWorld):
        def list_evictions(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
            raise errors.Forbidden(403, "no list", verb="list", resource="evictions")

    def at(world: RequestWorld, look: int) -> None:
        if look == 2:
            world.pod = None

    world = NoList(web(), at=at)
    assert send(world, evict("web-1")).outcome is Outcome.EVICTED
    assert world.deleted() == ["rebalancer-uid-web-1"]


def test_a_request_deleted_by_someone_else_fails() -> None:
    """Our request gone while the pod stays: failed (reason Deleted)."""

    def at(world: RequestWorld, look: int) -> None:
        if look == 2:
            world.request = None

    result = send(RequestWorld(web(), at=at), evict("web-1"))
    assert (result.outcome, result.reason) == (Outcome.FAILED, "Deleted")


def test_server_dry_run_creates_with_dry_run_and_follows_nothing() -> None:
    """--server-dry-run: the create is sent with dryRun, accepted: would-evict; no look."""
    world = RequestWorld(web())
    clock = FakeClock()
    result = er.send(world, evict("web-1"), follow(clock), dry_run=True)
    assert result.outcome is Outcome.WOULD_EVICT
    assert world.calls == [("CREATE dry-run", "rebalancer-uid-web-1")]


# -- through the executor -----------------------------------------------------------------------


class BothApis(FakeApi):
    """The executor's fake with the request calls of :class:`RequestWorld`: the pod evicted by
    a responder at the second look."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        super().__init__(pods)
        self.requests: list[str] = []
        self.withdrawn: list[str] = []

    def create_eviction_request(
        self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        self.requests.append(body["spec"]["target"]["pod"]["name"])
        return 201, {}

    def get_eviction_request(self, namespace: str, name: str) -> dict[str, Any] | None:
        return {"status": {}}

    def list_evictions(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        pod = self.requests[-1]
        self.pods.pop(pod, None)  # the responder evicted it
        return []

    def __getattr__(self, name: str) -> Any:
        if name == "delete_eviction_request":
            return self._withdraw
        return super().__getattr__(name)

    def _withdraw(self, namespace: str, request: str) -> int:
        self.withdrawn.append(request)
        return 200


def test_the_executor_sends_through_requests_when_the_run_chose_them() -> None:
    """eviction_api evictionRequest: no Eviction POST, one request, the pod evicted through it,
    recorded as such."""
    api = BothApis([api_pod("web-1")])
    clock = FakeClock()
    ex = Executor(
        api, ExecutorSettings(eviction_api="evictionRequest"), clock=clock, sleep=clock.sleep
    )
    (result,) = ex.execute_wave([evict("web-1")])
    assert (result.outcome, result.api) == (Outcome.EVICTED, "evictionRequest")
    assert api.requests == ["web-1"]
    assert not [c for c in api.calls if c[0] == "POST"]
    assert api.withdrawn == ["rebalancer-uid-web-1"]


def test_the_executor_keeps_the_eviction_api_for_a_grace_floor() -> None:
    """A plan's grace period above the pod's own cannot travel in a request: that eviction is
    POSTed to the Eviction API, recorded as such."""
    api = BothApis([api_pod("web-1")])
    clock = FakeClock()
    ex = Executor(
        api, ExecutorSettings(eviction_api="evictionRequest"), clock=clock, sleep=clock.sleep
    )
    (result,) = ex.execute_wave([evict("web-1", grace=90)])
    assert (result.outcome, result.api) == (Outcome.EVICTED, "eviction")
    assert api.requests == []
    assert api.bodies[0]["deleteOptions"]["gracePeriodSeconds"] == 90


# -- the HTTP layer -----------------------------------------------------------------------------


def test_kube_deletes_only_rebalancers_own_eviction_requests() -> None:
    """DELETE reaches the wire for ``rebalancer-<uid>`` EvictionRequests only: never a pod,
    never another requester's request."""
    server = RecordingServer(200, b"{}")
    kube = Kube(server.endpoint, source="test")
    assert (
        kube.delete_eviction_request(NS, "rebalancer-0b1c2d3e-aaaa-bbbb-cccc-0123456789ab") == 200
    )
    for path in (
        f"/api/v1/namespaces/{NS}/pods/web-1",
        f"/apis/lifecycle.k8s.io/v1alpha1/namespaces/{NS}/evictionrequests/other-1234",
        f"/apis/lifecycle.k8s.io/v1alpha1/namespaces/{NS}/evictions/pod-1-web-1",
    ):
        with pytest.raises(ValueError, match="never sends DELETE"):
            kube.request("DELETE", path)
    assert [(m, u) for m, u, _ in server.sent] == [
        (
            "DELETE",
            f"/apis/lifecycle.k8s.io/v1alpha1/namespaces/{NS}/evictionrequests/"
            "rebalancer-0b1c2d3e-aaaa-bbbb-cccc-0123456789ab",
        )
    ]
