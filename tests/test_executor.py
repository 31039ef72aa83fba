"""The executor against a recording fake of the Eviction API: every status path, no real sleep."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import structlog

from rebalancer.cluster.act.executor import Executor, ExecutorSettings, eviction_body
from rebalancer.cluster.act.lease import EvictionRecord
from rebalancer.cluster.act.outcome import EvictionResult, Outcome
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.errors import EXIT_CLUSTER, InputError
from rebalancer.core.evictability import EvictionContext, skip_reason
from rebalancer.core.model import ZONE_KEY
from rebalancer.core.plan import Eviction
from rebalancer.core.policy import Policy
from tests.builders import NS, api_node, api_pod
from tests.fakes import MULTI_PDB_500, PDB_429, FakeApi, FakeClock, RecordingServer


def evict(
    name: str,
    *,
    node: str = "n1",
    workload: str = "ReplicaSet/web",
    grace: int | None = None,
    uid: str | None = None,
) -> Eviction:
    return Eviction(
        namespace=NS,
        name=name,
        uid=uid or f"uid-{name}",
        node=node,
        priority=0,
        reason="zone=a holds 3, global min 1",
        wave=1,
        workload=workload,
        domain="a",
        topology_key=ZONE_KEY,
        target_node="n3",
        grace_period_seconds=grace,
    )


def executor(
    api: FakeApi,
    clock: FakeClock | None = None,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_result: Callable[[EvictionResult], None] | None = None,
    expected_labels: Mapping[str, Mapping[str, str]] | None = None,
    **settings: Any,
) -> Executor:
    clock = clock or FakeClock()
    return Executor(
        api,
        ExecutorSettings(**settings),
        clock=clock,
        sleep=clock.sleep,
        should_stop=should_stop,
        on_result=on_result,
        expected_labels=expected_labels,
    )


def one(result: tuple[EvictionResult, ...]) -> EvictionResult:
    assert len(result) == 1
    return result[0]


# -- bodies ---------------------------------------------------------------------------------


def test_body_always_has_uid_precondition_and_no_grace_by_default() -> None:
    """Without a policy grace period the body carries only the uid precondition."""
    body = eviction_body(evict("web-1"))
    assert body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": NS},
        "deleteOptions": {"preconditions": {"uid": "uid-web-1"}},
    }


def test_body_grace_follows_the_plan_without_a_pod() -> None:
    """Without the re-read pod, the plan's grace period (already floored) is sent as is."""
    body = eviction_body(evict("web-1", grace=5))
    assert body["deleteOptions"]["gracePeriodSeconds"] == 5


def grace_pod(name: str, own: int | None) -> dict[str, Any]:
    """A pod as re-read, with its own terminationGracePeriodSeconds (None: unset)."""
    pod = api_pod(name)
    if own is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = own
    return pod


# Hand-derived: the policy value travels only when strictly longer than the pod's own
# (unset means 30, the API server's default); otherwise the pod's own applies.
GRACE_FLOOR_CASES = [
    # (policy, pod's own, sent)
    (120, 600, None),
    (120, None, 120),
    (120, 30, 120),
    (5, 12, None),
    (30, None, None),
    (31, None, 31),
    (12, 12, None),
    (13, 12, 13),
    (1, 0, 1),
    (None, 600, None),
    (None, None, None),
]


@pytest.mark.parametrize(("policy", "own", "sent"), GRACE_FLOOR_CASES)
def test_body_grace_is_a_floor_over_the_pods_own(
    policy: int | None, own: int | None, sent: int | None
) -> None:
    """The policy grace is sent only when longer than the pod's own; never shortens it."""
    body = eviction_body(evict("web-1", grace=policy), pod=grace_pod("web-1", own))
    assert body["deleteOptions"].get("gracePeriodSeconds") == sent


@pytest.mark.parametrize("grace", [0, -1])
def test_body_rejects_grace_below_one(grace: int) -> None:
    """Grace 0 (a force delete) or less is refused, even if a plan carried it."""
    with pytest.raises(InputError, match="no grace period"):
        eviction_body(evict("web-1", grace=grace))


def test_body_rejects_missing_uid() -> None:
    """An eviction without a uid is refused: the precondition is mandatory."""
    with pytest.raises(InputError, match="uid"):
        eviction_body(Eviction(NS, "web-1", "", "n1", 0, "r", 1, "", "a", ZONE_KEY, None, None))


def test_server_dry_run_body_has_dry_run_all() -> None:
    """--server-dry-run sends deleteOptions.dryRun = [All]."""
    body = eviction_body(evict("web-1"), dry_run=True)
    assert body["deleteOptions"]["dryRun"] == ["All"]
    assert body["deleteOptions"]["preconditions"] == {"uid": "uid-web-1"}


def test_bad_grace_in_a_wave_stops_before_any_request() -> None:
    """One bad grace period in a wave means no request at all is sent."""
    api = FakeApi([api_pod("web-1"), api_pod("web-2")])
    with pytest.raises(InputError):
        executor(api).execute_wave([evict("web-1"), evict("web-2", grace=0)])
    assert api.calls == []


# -- status codes ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201])
def test_success_is_evicted(status: int) -> None:
    """200 and 201 mean evicted; the pod was re-read and its node checked first."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(status, {})]})
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.EVICTED
    assert result.status == status
    assert result.attempts == 1
    assert api.calls[:2] == [("GET pod", "web-1"), ("GET node", "n1")]
    assert api.posts() == ["web-1"]
    assert "gracePeriodSeconds" not in api.bodies[0]["deleteOptions"]


def test_grace_from_policy_reaches_the_request() -> None:
    """A policy grace period longer than the pod's own (unset: 30) is what the server gets."""
    api = FakeApi([api_pod("web-1")])
    executor(api).execute_wave([evict("web-1", grace=45)])
    assert api.bodies[0]["deleteOptions"]["gracePeriodSeconds"] == 45


def test_grace_below_the_pods_own_is_not_sent() -> None:
    """A pod whose own grace (600) exceeds the policy's (120) is evicted without one."""
    api = FakeApi([grace_pod("web-1", 600)])
    result = one(executor(api).execute_wave([evict("web-1", grace=120)]))
    assert result.outcome is Outcome.EVICTED
    assert api.posts() == ["web-1"]
    assert "gracePeriodSeconds" not in api.bodies[0]["deleteOptions"]


def test_grace_floor_uses_the_pod_as_re_read() -> None:
    """The floor is judged on the pod read just before the eviction, each pod on its own."""
    api = FakeApi([grace_pod("web-1", 12), grace_pod("web-2", 3)])
    executor(api).execute_wave(
        [evict("web-1", grace=5, workload="RS/a"), evict("web-2", grace=5, workload="RS/b")]
    )
    sent = {b["metadata"]["name"]: b["deleteOptions"].get("gracePeriodSeconds") for b in api.bodies}
    assert sent == {"web-1": None, "web-2": 5}


def test_server_dry_run_reports_would_evict_and_waits_for_nothing() -> None:
    """With --server-dry-run a 201 is 'would-evict' and no replacement is awaited."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1"), api_pod("web-2")])
    results = executor(api, clock, server_dry_run=True).execute_wave(
        [evict("web-1"), evict("web-2")]
    )
    assert [r.outcome for r in results] == [Outcome.WOULD_EVICT] * 2
    assert all(b["deleteOptions"]["dryRun"] == ["All"] for b in api.bodies)
    assert not [c for c in api.calls if c[0] == "LIST pods"]
    assert clock.sleeps == []


def test_404_is_gone() -> None:
    """404 from the eviction means the pod is already gone."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(404, {"message": "not found"})]})
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.GONE
    assert api.posts() == ["web-1"]


def test_409_is_conflict() -> None:
    """409 (uid precondition failed) is a conflict for the runner to re-plan, not retried."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(409, {"message": "uid mismatch"})]})
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.CONFLICT
    assert result.status == 409
    assert api.posts() == ["web-1"]


def test_429_pdb_is_retried_boundedly_then_blocked() -> None:
    """A PDB 429 is retried pdb_retries times with doubling backoff, then blocked-by-pdb."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(429, PDB_429)]})
    result = one(executor(api, clock, pdb_retries=3).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.BLOCKED_BY_PDB
    assert result.status == 429
    assert result.attempts == 4
    assert api.posts() == ["web-1"] * 4
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert "needs 3 healthy pods" in result.detail


def test_429_backoff_is_capped() -> None:
    """The wait between 429 retries never exceeds its cap."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(429, PDB_429)]})
    executor(
        api, clock, pdb_retries=6, pdb_backoff_seconds=1, pdb_backoff_max_seconds=5
    ).execute_wave([evict("web-1")])
    assert clock.sleeps == [1, 2, 4, 5, 5, 5]


def test_429_then_success_is_evicted() -> None:
    """A PDB that allows the disruption on a retry lets the eviction through."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(429, PDB_429), (201, {})]})
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.EVICTED
    assert result.attempts == 2


def test_429_throttling_uses_retry_after_and_fails() -> None:
    """A 429 without a disruption-budget cause is throttling: retried, then failed."""
    clock = FakeClock()
    throttled = {"message": "too many requests", "details": {"retryAfterSeconds": 3}}
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(429, throttled)]})
    result = one(executor(api, clock, pdb_retries=2).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.FAILED
    assert result.detail.startswith("throttled")
    assert clock.sleeps == [3.0, 3.0]


def test_500_multiple_pdbs_is_blocked_without_retry() -> None:
    """A 500 about several PDBs covering the pod is reported, not retried."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(500, MULTI_PDB_500)]})
    result = one(executor(api, clock).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.BLOCKED_BY_PDB
    assert result.detail.startswith("multiple-pdbs")
    assert api.posts() == ["web-1"]
    assert clock.sleeps == []


def test_5xx_is_retried_with_bounded_attempts_then_failed() -> None:
    """503 is retried max_attempts times with capped jittered backoff, then failed."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(503, {"message": "unavailable"})]})
    result = one(
        executor(api, clock, max_attempts=4, backoff_seconds=1, backoff_max_seconds=3).execute_wave(
            [evict("web-1")]
        )
    )
    assert result.outcome is Outcome.FAILED
    assert result.attempts == 4
    assert result.status == 503
    assert api.posts() == ["web-1"] * 4
    assert len(clock.sleeps) == 3
    assert all(0 <= s <= 3 for s in clock.sleeps)


def test_5xx_then_success_is_evicted() -> None:
    """A transient 5xx followed by 201 ends evicted."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(502, {}), (201, {})]})
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.EVICTED
    assert result.attempts == 2


def test_connection_errors_are_retried_then_failed() -> None:
    """Connection errors are retried like 5xx and end failed, with no status."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [errors.Unreachable("connection refused")]})
    result = one(executor(api, max_attempts=3).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.FAILED
    assert result.status is None
    assert result.attempts == 3
    assert "connection refused" in result.detail


def test_retry_total_time_is_bounded_by_the_injected_clock() -> None:
    """Retries stop when max_retry_seconds have passed, even with attempts left."""
    clock = FakeClock()
    api = FakeApi(
        [api_pod("web-1")],
        answers={"web-1": [(503, {})]},
        clock=clock,
        post_seconds=10.0,
    )
    result = one(
        executor(
            api, clock, max_attempts=50, max_retry_seconds=25, backoff_max_seconds=0.001
        ).execute_wave([evict("web-1")])
    )
    assert result.outcome is Outcome.FAILED
    assert result.attempts == 3


@pytest.mark.parametrize("status", [400, 422])
def test_other_4xx_fail_without_retry(status: int) -> None:
    """Other client errors are failures, not retried."""
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(status, {"message": "invalid"})]})
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.FAILED
    assert api.posts() == ["web-1"]


def test_forbidden_eviction_raises_cluster_error() -> None:
    """RBAC denying the eviction aborts the run with exit 3, naming verb and resource."""
    denied = errors.Forbidden(403, "no", verb="create", resource="pods/eviction", namespace=NS)
    api = FakeApi([api_pod("web-1")], answers={"web-1": [denied]})
    with pytest.raises(errors.Forbidden) as caught:
        executor(api).execute_wave([evict("web-1")])
    assert caught.value.exit_code == EXIT_CLUSTER
    assert "RBAC: cannot create pods/eviction (in namespace shop)" in str(caught.value)


# -- re-read before evicting ----------------------------------------------------------------


def test_pod_gone_on_reread_is_dropped() -> None:
    """A pod that no longer exists is reported gone and never evicted."""
    api = FakeApi([])
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.GONE
    assert api.posts() == []


@pytest.mark.parametrize(
    ("pod", "code"),
    [
        (api_pod("web-1", uid="someone-else"), "uid-changed"),
        (api_pod("web-1", terminating=True), "terminating"),
        (api_pod("web-1", node="n2"), "moved"),
        (api_pod("web-1", labels={"app": "web", "canary": "yes"}), "labels-changed"),
    ],
)
def test_changed_pod_is_dropped(pod: dict[str, Any], code: str) -> None:
    """A pod replaced, terminating, moved or relabelled since the plan is not evicted."""
    api = FakeApi([pod])
    expected = {"uid-web-1": {"app": "web"}}
    result = one(executor(api, expected_labels=expected).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.SKIPPED
    assert result.detail.startswith(code)
    assert api.posts() == []


@pytest.mark.parametrize(
    "node",
    [
        api_node("n1", ready="False"),
        api_node("n1", ready="Unknown"),
        api_node("n1", taints=["node.kubernetes.io/unreachable"]),
        None,
    ],
)
def test_pod_on_unready_node_is_dropped(node: dict[str, Any] | None) -> None:
    """Pods on NotReady, Unknown, unreachable-tainted or vanished nodes are never evicted."""
    api = FakeApi([api_pod("web-1")], nodes=[node] if node else [])
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.SKIPPED
    assert result.detail.startswith(("node-not-ready", "node-gone"))
    assert api.posts() == []


def _planned_skip(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    """What the plan says of ``pod`` on ``node``: its skip reason as printed, or None."""
    snapshot = snapshot_from_objects([node, pod])
    reason = skip_reason(snapshot.pods[0], EvictionContext.build(snapshot, Policy(), 0.0))
    return None if reason is None else str(reason)


@pytest.mark.parametrize(
    ("node", "code"),
    [
        (api_node("n1", ready="False"), "node-not-ready"),
        (api_node("n1", ready="Unknown"), "node-not-ready"),
        (api_node("n1", taints=["node.kubernetes.io/unreachable"]), "node-not-ready"),
        (api_node("n1", taints=["node.kubernetes.io/not-ready"]), "node-not-ready"),
        (api_node("n1", taints=["karpenter.sh/disrupted"]), "node-disrupted"),
        (api_node("n1", taints=["karpenter.sh/unregistered"]), None),
        (api_node("n1"), None),
    ],
)
def test_the_reread_node_is_judged_as_the_plan_judges_it(
    node: dict[str, Any], code: str | None
) -> None:
    """The check before each eviction and the plan hold a pod back for the same node states,
    in the same words: the executor's skip detail is the plan's skip reason."""
    pod = api_pod("web-1")
    api = FakeApi([pod], nodes=[node])
    result = one(executor(api).execute_wave([evict("web-1")]))
    planned = _planned_skip(pod, node)
    if code is None:
        assert planned is None
        assert result.outcome is Outcome.EVICTED
    else:
        assert result.outcome is Outcome.SKIPPED
        assert result.detail.startswith(f"{code}: node n1 ")
        assert result.detail == planned
        assert api.posts() == []


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}, "terminating"),
        (
            {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}},
            "disruption-target",
        ),
        ({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}, "do-not-disrupt"),
    ],
)
def test_the_reread_pod_is_judged_as_the_plan_judges_it(
    change: dict[str, dict[str, Any]], code: str
) -> None:
    """A pod leaving (terminating, DisruptionTarget) or annotated do-not-disrupt since the plan
    is held back with the reason the plan would give it."""
    pod = api_pod("web-1")
    for part, fields in change.items():
        pod[part] = {**pod[part], **fields}
    api = FakeApi([pod], nodes=[api_node("n1")])
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.SKIPPED
    assert result.detail.startswith(f"{code}: ")
    assert result.detail == _planned_skip(pod, api_node("n1"))
    assert api.posts() == []


def test_reread_failure_is_failed_and_nothing_sent() -> None:
    """When the pod cannot be re-read (after retries), nothing is sent for it."""

    class Broken(FakeApi):
        def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
            raise errors.ServerError(500, "etcd down", verb="get", resource="pods")

    api = Broken([api_pod("web-1")])
    result = one(executor(api, max_attempts=2).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.FAILED
    assert api.posts() == []


# -- one at a time per workload -------------------------------------------------------------


def test_same_workload_waits_for_replacement_before_next() -> None:
    """The second pod of a workload is evicted only once the first's replacement is Ready."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1"), api_pod("web-2")], replace_after=2)
    results = executor(api, clock, poll_interval_seconds=2, first_poll_seconds=2).execute_wave(
        [evict("web-1"), evict("web-2")]
    )
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.EVICTED]
    first_post = api.calls.index(("POST", "web-1"))
    second_post = api.calls.index(("POST", "web-2"))
    between = api.calls[first_post:second_post]
    assert sum(1 for c in between if c[0] == "LIST pods") >= 3  # polled until Ready
    assert results[0].replacement is not None
    assert clock.sleeps[:2] == [2, 2]


@pytest.mark.parametrize(
    ("first", "cap", "expected"),
    [
        (0.25, 2.0, [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]),
        (0.5, 3.0, [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]),
        (2.0, 2.0, [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]),
        (5.0, 1.0, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),  # the cap wins over a larger first wait
    ],
)
def test_replacement_polls_start_soon_and_double_to_the_interval(
    first: float, cap: float, expected: list[float]
) -> None:
    """The waits between looks for a replacement (whose Ready comes after 6 looks) double from
    the first poll up to the poll interval; a table written by hand."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1"), api_pod("web-2")], replace_after=6)
    results = executor(
        api, clock, poll_interval_seconds=cap, first_poll_seconds=first
    ).execute_wave([evict("web-1"), evict("web-2")])
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.EVICTED]
    first_post = api.calls.index(("POST", "web-1"))
    second_post = api.calls.index(("POST", "web-2"))
    # the replacement shows up on the 7th look: six waits before it, seven LISTs (and the
    # second eviction's own count of Ready pods before it is sent)
    assert clock.sleeps[:6] == expected
    assert sum(1 for c in api.calls[first_post:second_post] if c[0] == "LIST pods") == 7 + 1
    # the second eviction's looks start soon again
    assert clock.sleeps[6] == min(first, cap)


def test_replacement_is_found_by_owner_selector_not_by_the_pods_labels() -> None:
    """The replacement is looked up with the controller's selector and matched by owner uid."""
    api = FakeApi([api_pod("web-1"), api_pod("web-2")])
    selectors = {("ReplicaSet", NS, "web"): "app=web"}
    ex = Executor(api, ExecutorSettings(), clock=FakeClock(), sleep=FakeClock().sleep,
                  owner_selectors=selectors)  # fmt: skip
    results = ex.execute_wave([evict("web-1"), evict("web-2")])
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.EVICTED]
    assert results[0].replacement is not None
    assert {c[1] for c in api.calls if c[0] == "LIST pods"} == {"app=web"}


def test_different_workloads_are_evicted_side_by_side() -> None:
    """Pods of different workloads go in the same round, before any waiting."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1"), api_pod("db-1", app="db", owner_uid="rs-db")], replace_after=3)
    real_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        api.calls.append(("SLEEP", str(seconds)))
        real_sleep(seconds)

    Executor(api, ExecutorSettings(), clock=clock, sleep=sleep).execute_wave(
        [evict("web-1"), evict("db-1", workload="ReplicaSet/db")]
    )
    kinds = [c[0] for c in api.calls]
    assert kinds.count("POST") == 2
    assert "SLEEP" in kinds
    assert max(i for i, k in enumerate(kinds) if k == "POST") < kinds.index("SLEEP")


def test_replacement_timeout_skips_the_rest_of_the_workload() -> None:
    """When a replacement is not Ready within the wave timeout, its workload stops there."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1"), api_pod("web-2")], replace_after=None)
    results = executor(api, clock, wave_timeout_seconds=30, poll_interval_seconds=4).execute_wave(
        [evict("web-1"), evict("web-2")]
    )
    assert results[0].outcome is Outcome.EVICTED
    assert "not scheduled and Ready in time" in results[0].detail
    assert results[1].outcome is Outcome.SKIPPED
    assert results[1].detail.startswith("replacement-not-ready")
    assert api.posts() == ["web-1"]
    assert sum(clock.sleeps) <= 30


def test_a_replacement_must_be_a_new_pod_of_the_same_owner() -> None:
    """Existing siblings and pods of other owners do not count as the replacement."""
    clock = FakeClock()
    sibling = api_pod("web-9", node="n2")
    stranger = api_pod("other", owner_uid="rs-other", node="n2")
    api = FakeApi([api_pod("web-1"), api_pod("web-2"), sibling, stranger], replace_after=None)
    results = executor(api, clock, wave_timeout_seconds=10).execute_wave(
        [evict("web-1"), evict("web-2")]
    )
    assert results[1].outcome is Outcome.SKIPPED
    assert api.posts() == ["web-1"]


def test_stop_finishes_the_current_eviction_and_sends_no_more() -> None:
    """Once a stop is requested, the eviction in flight completes and nothing else is sent."""
    stopping = False

    def on_result(result: EvictionResult) -> None:
        nonlocal stopping
        stopping = True

    api = FakeApi([api_pod("web-1"), api_pod("db-1", app="db", owner_uid="rs-db")])
    results = executor(api, should_stop=lambda: stopping, on_result=on_result).execute_wave(
        [evict("web-1"), evict("db-1", workload="ReplicaSet/db")]
    )
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.SKIPPED]
    assert results[1].detail.startswith("stopping")
    assert api.posts() == ["web-1"]


def test_on_result_sees_every_result() -> None:
    """The on_result callback is called once per planned eviction, in order."""
    seen: list[str] = []
    api = FakeApi([api_pod("web-1")])
    executor(api, on_result=lambda r: seen.append(f"{r.eviction.name}:{r.outcome}")).execute_wave(
        [evict("web-1"), evict("gone-1", workload="")]
    )
    assert seen == ["web-1:evicted", "gone-1:gone"]


# -- the HTTP layer itself ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH"])
def test_kube_refuses_anything_but_get_and_post(method: str) -> None:
    """The HTTP layer cannot send a DELETE (or any other write than POST)."""
    api = RecordingServer()
    with pytest.raises(ValueError, match="never sends"):
        Kube(api.endpoint, source="test").request(method, f"/api/v1/namespaces/{NS}/pods/web-1")
    assert api.sent == []


def test_kube_posts_eviction_to_the_subresource() -> None:
    """post_eviction POSTs the body to pods/{name}/eviction, with dryRun=All when asked."""
    api = RecordingServer(201, b'{"kind":"Status"}')
    kube = Kube(api.endpoint, source="test")
    body = eviction_body(evict("web-1"), dry_run=True)
    status, answer = kube.post_eviction(NS, "web-1", body)
    assert (status, answer) == (201, {"kind": "Status"})
    method, url, sent = api.sent[0]
    assert method == "POST"
    assert url == f"/api/v1/namespaces/{NS}/pods/web-1/eviction?dryRun=All"
    assert sent["deleteOptions"]["preconditions"] == {"uid": "uid-web-1"}


def test_kube_returns_eviction_statuses_and_raises_forbidden() -> None:
    """Eviction error statuses come back as data, except 403 which names the denied request."""
    busy, forbidding = RecordingServer(429, orjson_bytes(PDB_429)), forbidden()
    kube = Kube(busy.endpoint, source="test")
    assert kube.post_eviction(NS, "web-1", eviction_body(evict("web-1")))[0] == 429
    denied = Kube(forbidding.endpoint, source="test")
    with pytest.raises(errors.Forbidden, match=r"RBAC: cannot create pods/eviction"):
        denied.post_eviction(NS, "web-1", eviction_body(evict("web-1")))


def test_kube_get_pod_404_is_none() -> None:
    """A GET of a missing pod is None, not an error."""
    missing = RecordingServer(404, b"{}")
    assert Kube(missing.endpoint, source="test").get_pod(NS, "web-1") is None


def forbidden() -> RecordingServer:
    return RecordingServer(403, b'{"message":"forbidden"}')


def orjson_bytes(value: Any) -> bytes:
    import orjson  # noqa: PLC0415  # only this helper needs it

    return orjson.dumps(value)


# -- a replacement made moot by a scale-down ----------------------------------------------------

MOOT_EVENT = "eviction.replacement_moot"


def owner_gets(api: FakeApi) -> int:
    return sum(1 for c in api.calls if c[0] == "GET owner")


def between_posts(api: FakeApi, first: str, second: str) -> list[tuple[str, ...]]:
    """The calls made after the eviction of ``first`` and before that of ``second``."""
    return api.calls[api.calls.index(("POST", first)) + 1 : api.calls.index(("POST", second))]


def of_kind(kind: str, *pods: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods with their controller made a ``kind``."""
    for pod in pods:
        pod["metadata"]["ownerReferences"][0]["kind"] = kind
    return list(pods)


def test_a_scale_down_during_the_wait_ends_it_and_the_next_pod_goes() -> None:
    """web (3 pods) loses web-1; at the second look the owner has been scaled to 2 and its
    replacement-to-be removed: web-2 and web-3 are Ready, 2 <= 2, nothing to wait for; web-2 is
    evicted at once, and its own replacement is awaited as usual."""
    api = FakeApi([api_pod("web-1"), api_pod("web-2"), api_pod("web-3")], replace_after=5)
    api.on_list = lambda n: api.scale("web", 2) if n == 2 and api.posts() == ["web-1"] else None
    with structlog.testing.capture_logs() as logged:
        results = executor(api).execute_wave([evict("web-1"), evict("web-2")])
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.EVICTED]
    assert results[0].replacement is None
    assert results[0].detail == (
        "evicted; the owner ReplicaSet/web wants 2 pods and has 2 Ready besides the "
        "evicted one: no replacement to wait for"
    )
    assert results[1].replacement == "shop/web-2-r2"  # web-1's replacement never came
    assert api.posts() == ["web-1", "web-2"]
    # two looks (the second one settles), one owner GET each, then web-2's count before it goes
    assert [c[0] for c in between_posts(api, "web-1", "web-2")] == [
        "LIST pods", "GET owner", "LIST pods", "GET owner", "GET pod", "GET node", "LIST pods",
    ]  # fmt: skip
    moot = [e for e in logged if e["event"] == MOOT_EVENT]
    assert [(e["pod"], e["owner"], e["replicas"]) for e in moot] == [
        ("shop/web-1", "ReplicaSet/web", 2)
    ]


def stateful_set_api(replace_after: int) -> FakeApi:
    """StatefulSet db with db-0, db-1, db-2 (ordinals from 0)."""
    pods = [api_pod(f"db-{i}", app="db", owner_uid="sts-db") for i in range(3)]
    api = FakeApi(of_kind("StatefulSet", *pods), replace_after=replace_after)
    api.owners["db"]["kind"] = "StatefulSet"
    return api


def test_a_stateful_set_scaled_below_the_evicted_ordinal_ends_the_wait() -> None:
    """db-2 evicted, then db scaled to 2: ordinal 2 is no longer wanted, no db-2 comes back;
    db-0 goes next."""
    api = stateful_set_api(replace_after=5)
    api.on_list = lambda n: api.scale("db", 2) if n == 1 and api.posts() == ["db-2"] else None
    results = executor(api).execute_wave(
        [evict("db-2", workload="StatefulSet/db"), evict("db-0", workload="StatefulSet/db")]
    )
    assert results[0].detail == (
        "evicted; the owner StatefulSet/db wants 2 pods: ordinal 2 is no longer wanted: "
        "no replacement to wait for"
    )
    assert results[0].replacement is None
    assert api.posts() == ["db-2", "db-0"]


def test_a_stateful_set_scaled_down_above_the_evicted_ordinal_still_makes_it_again() -> None:
    """db-1 evicted, then db scaled to 2 while db-2 is still Ready (the StatefulSet controller
    makes db-1 again first, and removes db-2 only once it is Ready): 2 Ready would count as
    enough, but ordinal 1 is wanted: the wait goes on until db-1's replacement is Ready."""
    api = stateful_set_api(replace_after=3)
    api.on_list = lambda n: (
        api.owners["db"]["spec"].update(replicas=2) if api.posts() == ["db-1"] else None
    )
    results = executor(api).execute_wave(
        [evict("db-1", workload="StatefulSet/db"), evict("db-0", workload="StatefulSet/db")]
    )
    assert results[0].detail == "evicted"
    assert results[0].replacement == "shop/db-1-r1"
    assert api.posts() == ["db-1", "db-0"]
    assert [c[0] for c in between_posts(api, "db-1", "db-0")].count("GET owner") == 3


def test_a_replacement_not_created_yet_is_waited_for() -> None:
    """The race right after an eviction: web-1 is gone, its replacement not created yet (3
    looks), the owner unchanged (2 wanted, 1 Ready): the wait goes on until the replacement is
    Ready; the owner is read at each look that found none, never more often."""
    api = FakeApi([api_pod("web-1"), api_pod("web-2")], replace_after=3)
    results = executor(api).execute_wave([evict("web-1"), evict("web-2")])
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.EVICTED]
    assert results[0].replacement == "shop/web-1-r1"
    assert results[0].detail == "evicted"
    calls = [c[0] for c in between_posts(api, "web-1", "web-2")]
    assert calls.count("LIST pods") == 4 + 1  # 4 looks, the last finds it; web-2's count
    assert calls.count("GET owner") == 3


def set_uid(api: FakeApi) -> None:
    api.owners["web"]["metadata"]["uid"] = "rs-web-2"


def set_deleting(api: FakeApi) -> None:
    api.owners["web"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("change", "how"),
    [
        (lambda api: api.remove_owner("web"), "is gone"),
        (set_uid, "is gone (one of that name has uid rs-web-2)"),
        (set_deleting, "is being deleted"),
    ],
)
def test_an_owner_gone_ends_the_wait(change: Callable[[FakeApi], None], how: str) -> None:
    """The ReplicaSet deleted (or made again under the same name, or being deleted) after the
    eviction: no replacement of it will come; both pods go, neither waits long."""
    api = FakeApi([api_pod("web-1"), api_pod("web-2"), api_pod("web-3")], replace_after=5)
    api.on_list = lambda n: change(api) if n == 1 and api.posts() == ["web-1"] else None
    results = executor(api).execute_wave([evict("web-1"), evict("web-2")])
    detail = f"evicted; the owner ReplicaSet/web {how}: no replacement to wait for"
    assert [(r.outcome, r.detail, r.replacement) for r in results] == [
        (Outcome.EVICTED, detail, None),
        (Outcome.EVICTED, detail, None),
    ]
    assert api.posts() == ["web-1", "web-2"]
    assert [c[0] for c in between_posts(api, "web-1", "web-2")].count("LIST pods") == 1 + 1


OWNER_ERRORS = [
    errors.Forbidden(403, "replicasets.apps is forbidden", verb="get", resource="replicasets"),
    errors.ServerError(500, "etcd timeout", verb="get", resource="replicasets"),
    errors.Unreachable("connection refused"),
]


@pytest.mark.parametrize("error", OWNER_ERRORS, ids=["403", "500", "unreachable"])
def test_an_owner_that_cannot_be_read_keeps_the_wait_to_the_timeout(error: Exception) -> None:
    """Scaled down, but the owner GET fails: it cannot be told, so the wait runs to the wave
    timeout as before (the owner asked at every look), and web-2 is not evicted; one warning."""
    clock = FakeClock()
    api = FakeApi([api_pod("web-1"), api_pod("web-2"), api_pod("web-3")], replace_after=5)
    api.owner_error = error
    api.on_list = lambda n: api.scale("web", 2) if n == 1 and api.posts() == ["web-1"] else None
    with structlog.testing.capture_logs() as logged:
        results = executor(api, clock, wave_timeout_seconds=20).execute_wave(
            [evict("web-1"), evict("web-2")]
        )
    assert results[0].outcome is Outcome.EVICTED
    assert results[0].replacement is None
    assert "not scheduled and Ready in time" in results[0].detail
    assert "no replacement to wait for" not in results[0].detail
    assert results[1].outcome is Outcome.SKIPPED
    assert results[1].detail.startswith("replacement-not-ready")
    assert api.posts() == ["web-1"]
    looks = sum(1 for c in api.calls if c[0] == "LIST pods") - 1  # web-1's count before it
    assert owner_gets(api) == looks
    # a look at once, then after waits of 0.25, 0.5, 1 (t = 1.75), 9 of 2 (t = 19.75) and the
    # 0.25 left to the 20 s timeout: 1 + 3 + 9 + 1 looks
    assert looks == 14
    assert [e["event"] for e in logged].count("eviction.owner_unreadable") == 1


@pytest.mark.parametrize("error", OWNER_ERRORS, ids=["403", "500", "unreachable"])
def test_an_owner_that_cannot_be_read_still_lets_the_replacement_end_the_wait(
    error: Exception,
) -> None:
    """The owner GET fails, the replacement comes after 2 empty looks: found, as before."""
    api = FakeApi([api_pod("web-1"), api_pod("web-2")], replace_after=2)
    api.owner_error = error
    results = executor(api).execute_wave([evict("web-1"), evict("web-2")])
    assert [r.outcome for r in results] == [Outcome.EVICTED, Outcome.EVICTED]
    assert results[0].replacement == "shop/web-1-r1"
    assert api.posts() == ["web-1", "web-2"]
    assert [c[0] for c in between_posts(api, "web-1", "web-2")].count("GET owner") == 2


@pytest.mark.parametrize("kind", ["Job", "MyController"])
def test_other_owners_are_not_read_and_the_wait_stays_as_before(kind: str) -> None:
    """A pod of a Job or of a custom controller: no owner GET, the wait runs to the timeout."""
    api = FakeApi(of_kind(kind, api_pod("web-1"), api_pod("web-2")), replace_after=None)
    results = executor(api, wave_timeout_seconds=10).execute_wave([evict("web-1"), evict("web-2")])
    assert "not scheduled and Ready in time" in results[0].detail
    assert results[1].outcome is Outcome.SKIPPED
    assert owner_gets(api) == 0


def earlier_record(ready_before: int) -> EvictionRecord:
    """web-0, of ReplicaSet web, evicted by an earlier run when web had ``ready_before``."""
    return EvictionRecord(NS, "web-0", "uid-web-0", "n1", "ReplicaSet/web", "ReplicaSet",
                          "web", "rs-web", ready_before, 0.0, "old")  # fmt: skip


@pytest.mark.parametrize(("replicas", "evicted"), [(2, ["web-1"]), (3, [])])
def test_an_earlier_eviction_whose_owner_was_scaled_down_does_not_hold_the_workload(
    replicas: int, evicted: list[str]
) -> None:
    """An earlier run evicted web-0 when web had 3 Ready; now web-1 and web-2 are Ready and
    web-3 is not (the controller has not removed it yet): the owner wanting 2 (<= 2 Ready)
    lets web-1 go at once; wanting 3, the workload waits out the timeout as before."""
    clock = FakeClock()
    pods = [api_pod("web-1"), api_pod("web-2"), api_pod("web-3", ready=False)]
    api = FakeApi(pods, replace_after=0)
    api.owners["web"]["spec"]["replicas"] = replicas
    ex = Executor(api, ExecutorSettings(wave_timeout_seconds=10), clock=clock,
                  sleep=clock.sleep, earlier=[earlier_record(3)])  # fmt: skip
    results = ex.execute_wave([evict("web-1")])
    assert api.posts() == evicted
    assert owner_gets(api) >= 1
    if not evicted:
        assert results[0].detail.startswith("replacement-not-ready")


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("ReplicaSet", f"/apis/apps/v1/namespaces/{NS}/replicasets/web-7d4f"),
        ("StatefulSet", f"/apis/apps/v1/namespaces/{NS}/statefulsets/web-7d4f"),
    ],
)
def test_kube_get_owner_reads_the_apps_v1_object(kind: str, path: str) -> None:
    """get_owner GETs the ReplicaSet or StatefulSet by name; 404 is None, 403 names the
    denied request, other kinds are never asked for."""
    api = RecordingServer(200, b'{"kind":"%s","spec":{"replicas":2}}' % kind.encode())
    assert Kube(api.endpoint, source="test").get_owner(NS, kind, "web-7d4f") == {
        "kind": kind,
        "spec": {"replicas": 2},
    }
    assert api.sent == [("GET", path, None)]
    missing, forbidding = RecordingServer(404, b"{}"), forbidden()
    assert Kube(missing.endpoint, source="test").get_owner(NS, kind, "x") is None
    denied = Kube(forbidding.endpoint, source="test")
    with pytest.raises(errors.Forbidden, match=r"RBAC: cannot get \w+\.apps"):
        denied.get_owner(NS, kind, "web-7d4f")


def test_kube_get_owner_refuses_other_kinds() -> None:
    """A Job or a custom controller is never read: nothing is sent."""
    api = RecordingServer(200, b"{}")
    with pytest.raises(ValueError, match="no owner of kind 'Job'"):
        Kube(api.endpoint, source="test").get_owner(NS, "Job", "batch-1")
    assert api.sent == []
