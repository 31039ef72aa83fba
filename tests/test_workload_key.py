"""The workload key (core/plan.workload_key): one spelling for the executor's groups, the
Lease's earlier evictions and the runner's cooldown, and the one difference (a pod with no
controller) stated. Expected strings written out by hand."""

from __future__ import annotations

import pytest

from rebalancer.core.limits import RunLimits
from rebalancer.core.plan import Eviction, workload_key
from rebalancer.core.policy import Limits, Policy

CASES = [
    # namespace, workload, pod, marked key, unmarked key
    ("shop", "Deployment/web", "web-7d9-x2k", "shop/Deployment/web", "shop/Deployment/web"),
    ("shop", "StatefulSet/db", "db-0", "shop/StatefulSet/db", "shop/StatefulSet/db"),
    ("shop", "", "debug", "pod:shop/debug", "shop/debug"),
    ("blog", "", "debug", "pod:blog/debug", "blog/debug"),
]


@pytest.mark.parametrize(("namespace", "workload", "pod", "marked", "unmarked"), CASES)
def test_the_key_of_a_pods_workload(
    namespace: str, workload: str, pod: str, marked: str, unmarked: str
) -> None:
    assert workload_key(namespace, workload, pod) == marked
    assert workload_key(namespace, workload, pod, marked=False) == unmarked


def test_an_evictions_key_is_the_marked_one() -> None:
    e = Eviction("shop", "debug", "u1", "n1", 0, "", 1, "", "zone-a", "zone", None, None)
    assert e.workload_key == "pod:shop/debug"
    owned = Eviction(
        "shop", "web-1", "u2", "n1", 0, "", 1, "ReplicaSet/web", "a", "zone", None, None
    )
    assert owned.workload_key == "shop/ReplicaSet/web"


def _evicted(namespace: str, workload: str, name: str) -> Eviction:
    return Eviction(namespace, name, "u", "n1", 0, "", 1, workload, "a", "zone", None, None)


def test_the_limits_count_a_workload_per_namespace_and_bare_pods_as_one() -> None:
    """``perWorkload: 1`` with one eviction of shop's Deployment/web and one bare pod of shop
    made earlier: web and shop's bare pods are spent; the same names in blog are not."""
    policy = Policy(limits=Limits(per_workload=1))
    limits = RunLimits(
        policy, [_evicted("shop", "Deployment/web", "web-1"), _evicted("shop", "", "x")]
    )
    assert limits.allows("n2", "shop", "Deployment/web") is not None
    assert limits.allows("n2", "shop", "") is not None
    assert limits.allows("n2", "shop", "Deployment/api") is None
    assert limits.allows("n2", "blog", "Deployment/web") is None
    assert limits.allows("n2", "blog", "") is None
    limits.spend("n2", "blog", "")
    reached = limits.allows("n3", "blog", "")
    assert reached is not None and reached.detail == "limits.perWorkload (1) reached for "
