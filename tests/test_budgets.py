"""The Eviction API's PodDisruptionBudget rules, one row each (kube-apiserver's eviction.go)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rebalancer.core.budgets import DisruptionBudgets, budget
from rebalancer.core.model import ALWAYS_ALLOW, LabelSelector, Pod, PodDisruptionBudget

WEB = PodDisruptionBudget(
    namespace="shop",
    name="web",
    selector=LabelSelector((("app", "web"),)),
    disruptions_allowed=1,
    current_healthy=3,
    desired_healthy=2,
    generation=2,
    observed_generation=2,
)
POD = Pod("shop", "web-1", "u1", {"app": "web"}, "node-a", 0.0)

# (case, pod changes, PDB changes, expected skip code or None, spends the PDB)
ROWS: list[tuple[str, dict[str, object], dict[str, object], str | None, bool]] = [
    ("Ready pod, budget left: spends it", {}, {}, None, True),
    ("Ready pod, nothing left", {}, {"disruptions_allowed": 0}, "pdb", False),
    ("negative disruptionsAllowed (403 Forbidden)", {}, {"disruptions_allowed": -1}, "pdb", False),
    ("status behind generation: 429", {}, {"observed_generation": 1}, "pdb", False),
    (
        "Pending pod: no PDB check at all",
        {"phase": "Pending"},
        {"disruptions_allowed": 0},
        None,
        False,
    ),
    (
        "terminating pod: no PDB check",
        {"terminating": True},
        {"disruptions_allowed": 0},
        None,
        False,
    ),
    (
        "not Ready, IfHealthyBudget, healthy: free",
        {"ready": False},
        {"disruptions_allowed": 0},
        None,
        False,
    ),
    (
        "not Ready, IfHealthyBudget, below desired: needs budget",
        {"ready": False},
        {"disruptions_allowed": 0, "current_healthy": 1},
        "pdb",
        False,
    ),
    (
        "not Ready, IfHealthyBudget, desiredHealthy 0: spends budget",
        {"ready": False},
        {"desired_healthy": 0},
        None,
        True,
    ),
    (
        "not Ready, AlwaysAllow, nothing left, status lagging: free",
        {"ready": False},
        {
            "unhealthy_pod_eviction_policy": ALWAYS_ALLOW,
            "disruptions_allowed": 0,
            "current_healthy": 0,
            "observed_generation": 1,
        },
        None,
        False,
    ),
    (
        "Ready, AlwaysAllow: the budget applies",
        {},
        {"unhealthy_pod_eviction_policy": ALWAYS_ALLOW, "disruptions_allowed": 0},
        "pdb",
        False,
    ),
    (
        "other namespace: not covered",
        {"namespace": "data"},
        {"disruptions_allowed": 0},
        None,
        False,
    ),
]


@pytest.mark.parametrize(
    ("pod_changes", "pdb_changes", "code", "spends"),
    [r[1:] for r in ROWS],
    ids=[r[0] for r in ROWS],
)
def test_judge(
    pod_changes: dict[str, object], pdb_changes: dict[str, object], code: str | None, spends: bool
) -> None:
    """The skip reason and the spent PDB follow the Eviction API's decision for the pod."""
    budgets = DisruptionBudgets([replace(WEB, **pdb_changes)])  # type: ignore[arg-type]
    reason, spent = budgets.judge(replace(POD, **pod_changes))  # type: ignore[arg-type]
    assert (reason.code if reason else None, spent) == (code, (0,) if spends else ())


def test_several_pdbs_are_refused_whatever_their_budget() -> None:
    """Two PDBs over one Ready pod: multiple-pdbs (the API answers 500), even with budget."""
    other = replace(WEB, name="all", selector=LabelSelector())
    reason, spent = DisruptionBudgets([WEB, other]).judge(POD)
    assert reason is not None and reason.code == "multiple-pdbs"
    assert "web, all" in reason.detail
    assert spent == ()


def test_a_spent_budget_names_disruptions_allowed_first() -> None:
    """A Ready pod of a PDB with 3 healthy of 2 desired but nothing left to spend: the reason
    leads with the figure that refuses it (disruptionsAllowed 0), the counts only as context."""
    reason, _ = DisruptionBudgets([replace(WEB, disruptions_allowed=0)]).judge(POD)
    assert reason is not None
    assert reason.detail == (
        "PodDisruptionBudget web allows no disruption now "
        "(disruptionsAllowed 0; currentHealthy 3, desiredHealthy 2)"
    )


def test_budget_per_wave() -> None:
    """The per-wave budget is disruptionsAllowed, 0 while the status lags or if negative."""
    assert budget(replace(WEB, disruptions_allowed=3)) == 3
    assert budget(replace(WEB, disruptions_allowed=3, observed_generation=1)) == 0
    assert budget(replace(WEB, disruptions_allowed=-2)) == 0
