"""The workload key (core/plan.workload_key): one spelling for the executor's groups, the
Lease's earlier evictions and the runner's cooldown, and the one difference (a pod with no
controller) stated. Expected strings written out by hand."""

from __future__ import annotations

import pytest

from rebalancer.core.plan import Eviction, workload_key

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
