"""Eviction refusals by their structured causes, with the answers' shapes as kube-apiserver
builds them (pkg/registry/core/pod/storage/eviction.go and apimachinery's errors.NewForbidden /
NewTooManyRequests at v1.35.8, v1.37.2 and v1.38.0-beta.0).

- 429 with a ``DisruptionBudget`` cause (``details.causes[].reason``): every release since 1.32.
- 403 (``disruptionsAllowed`` below 0; more than 2000 evictions the disruption controller has
  not confirmed): from 1.37 with a ``DisruptionBudget`` cause; before, only the details name the
  budget. Either way the budget refuses, not RBAC: ``blocked-by-pdb``, not an exit 3.
- 1.38 answers a successful eviction with the deleted pod's resourceVersion in the Status.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import structlog

from rebalancer.cli.metrics import Metrics
from rebalancer.cluster.act.events import BLOCKED
from rebalancer.cluster.act.executor import eviction_body
from rebalancer.cluster.act.outcome import Outcome
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.core.errors import EXIT_OK
from tests.builders import NS, api_pod
from tests.fakes import FakeApi, FakeClock, FakeCluster, RecordingServer, ScriptedPlanner
from tests.test_executor import evict, executor, one
from tests.test_runner import runner

NEGATIVE_MSG = "pdb disruptions allowed is negative"
NEGATIVE_CAUSE = (
    "The disruption budget web does not allow evicting pods currently: pdb disruptions allowed "
    "is negative"
)
UNCONFIRMED_CAUSE = (
    "The disruption budget web does not allow evicting pods currently: too many pending "
    "evictions not confirmed by PDB controller"
)


def forbidden(reason: str, cause: str | None) -> dict[str, Any]:
    """errors.NewForbidden(policy.Resource("poddisruptionbudget"), "web", reason), with the
    DisruptionBudget cause 1.37 appends (None: 1.35, without it)."""
    details: dict[str, Any] = {"name": "web", "group": "policy", "kind": "poddisruptionbudget"}
    if cause is not None:
        details["causes"] = [{"reason": "DisruptionBudget", "message": cause}]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'poddisruptionbudget.policy "web" is forbidden: {reason}',
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def too_many(cause: str, retry_after: int) -> dict[str, Any]:
    """errors.NewTooManyRequests with the DisruptionBudget cause (all supported releases)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [{"reason": "DisruptionBudget", "message": cause}],
            **({"retryAfterSeconds": retry_after} if retry_after else {}),
        },
        "code": 429,
    }


RBAC_403 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'pods "web-1" is forbidden: User "system:serviceaccount:kube-system:rebalancer" '
    'cannot create resource "pods/eviction" in API group "" in the namespace "shop"',
    "reason": "Forbidden",
    "details": {"name": "web-1", "kind": "pods"},
    "code": 403,
}
SUCCESS_138 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {"resourceVersion": "4711"},
    "status": "Success",
    "code": 201,
}

# (case, status, answer, the detail the result carries), by hand from the answers above.
REFUSALS: list[tuple[str, int, dict[str, Any], str]] = [
    ("1.37 403 negative, with its cause", 403, forbidden(NEGATIVE_MSG, NEGATIVE_CAUSE),
     f"pdb: {NEGATIVE_CAUSE}"),
    ("1.37 403 unconfirmed evictions, with its cause", 403,
     forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller",
               UNCONFIRMED_CAUSE),
     f"pdb: {UNCONFIRMED_CAUSE}"),
    ("1.35 403 negative, no cause: the details name the budget", 403,
     forbidden(NEGATIVE_MSG, None),
     f'pdb: poddisruptionbudget.policy "web" is forbidden: {NEGATIVE_MSG}'),
    ("429 still being processed", 429,
     too_many("The disruption budget web is still being processed by the server.", 10),
     "pdb: The disruption budget web is still being processed by the server."),
    ("429 needs healthy pods", 429,
     too_many("The disruption budget web needs 3 healthy pods and has 3 currently", 0),
     "pdb: The disruption budget web needs 3 healthy pods and has 3 currently"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "status", "answer", "detail"), REFUSALS)
def test_a_budget_refusal_is_blocked_by_pdb_with_its_cause(
    case: str, status: int, answer: dict[str, Any], detail: str
) -> None:
    clock = FakeClock()
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(status, answer)]})
    result = one(executor(api, clock, pdb_retries=2).execute_wave([evict("web-1")]))
    assert result.outcome is Outcome.BLOCKED_BY_PDB, case
    assert result.detail == detail, case
    assert result.status == status
    # a 429 is retried (pdb_retries), a 403 is not: neither clears in seconds
    assert result.attempts == (1 if status == 403 else 3), case


@pytest.mark.parametrize(
    "answer", [forbidden(NEGATIVE_MSG, NEGATIVE_CAUSE), forbidden(NEGATIVE_MSG, None)]
)
def test_kube_returns_a_budgets_403_and_raises_rbacs(answer: dict[str, Any]) -> None:
    budget = RecordingServer(403, orjson.dumps(answer))
    rbac = RecordingServer(403, orjson.dumps(RBAC_403))
    kube = Kube(budget.endpoint, source="test")
    status, body = kube.post_eviction(NS, "web-1", eviction_body(evict("web-1")))
    assert (status, body) == (403, answer)
    denied = Kube(rbac.endpoint, source="test")
    with pytest.raises(errors.Forbidden, match=r"RBAC: cannot create pods/eviction"):
        denied.post_eviction(NS, "web-1", eviction_body(evict("web-1")))


def test_a_1_38_success_with_a_resource_version_is_evicted() -> None:
    api = FakeApi([api_pod("web-1")], answers={"web-1": [(201, SUCCESS_138)]})
    result = one(executor(api).execute_wave([evict("web-1")]))
    assert (result.outcome, result.status, result.attempts) == (Outcome.EVICTED, 201, 1)


def test_a_run_reports_the_cause_in_its_event_and_metric() -> None:
    """A 1.37 budget 403 in a run: exit 0, the summary's blocked_by_pdb, a RebalanceBlocked
    Event whose message quotes the cause, and evictions_total{result="blocked-by-pdb"}."""
    fake = FakeCluster(
        {"a": 3, "b": 0}, answers={"web-1": (403, forbidden(NEGATIVE_MSG, NEGATIVE_CAUSE))}
    )
    with structlog.testing.capture_logs():
        report = runner(fake, plan_fn=ScriptedPlanner(fake, [1, 1, 1])).run_once()
    assert report.exit_code == EXIT_OK
    assert report.blocked_by_pdb == 1
    assert report.summary()["blocked_by_pdb"] == 1
    (event,) = fake.events
    assert (event["type"], event["reason"]) == ("Warning", BLOCKED)
    assert NEGATIVE_CAUSE in event["message"]
    metrics = Metrics()
    metrics.record(report)
    sample = metrics.registry.get_sample_value
    assert sample("rebalancer_evictions_total", {"result": "blocked-by-pdb"}) == 1.0
    assert sample("rebalancer_evictions_total", {"result": "failed"}) == 0.0
