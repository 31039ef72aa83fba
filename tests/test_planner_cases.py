"""The planner against the named cases of tests/data/planner_cases.yaml (one per SPEC item)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.casedsl import build_snapshot, check_case

CASES = yaml.safe_load((Path(__file__).parent / "data" / "planner_cases.yaml").read_text())["cases"]
NOW = 1_000_000.0


def _policy(raw: dict[str, Any] | None) -> Policy:
    doc = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy", **(raw or {})}
    return load_policy(yaml.safe_dump(doc), "case")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case: dict[str, Any]) -> None:
    """The plan for the case's cluster has exactly the expected evictions, skips and end state."""
    assert check_case(case) == []
    result = plan(build_snapshot(case), _policy(case.get("policy")), NOW)
    expect = case["expect"]
    names = [e.name for e in result.evictions]
    assert len(names) == expect["evictions"], names
    assert len(set(names)) == len(names), "a pod is evicted twice"
    for name in expect.get("evicted", []):
        assert name in names
    for name in expect.get("notEvicted", []):
        assert name not in names
    skipped = {s.name: s.reason.code for s in result.skipped}
    for name, code in expect.get("skipped", {}).items():
        assert skipped.get(name) == code, skipped
    if "within" in expect:
        assert all(not v.violated for v in result.after) is expect["within"], result.after
    if "after" in expect:
        # One {domain: count} per view after the plan; a single mapping when there is one view.
        wanted = expect["after"] if isinstance(expect["after"], list) else [expect["after"]]
        got = [
            {d.split("-")[-1] if "-" in d else d: c for d, c in view.domains}
            for view in result.after
        ]
        assert got == wanted
    if "lowerBound" in expect:
        assert result.lower_bound == expect["lowerBound"]
    if "minimal" in expect:
        assert result.minimal is expect["minimal"]
    if "priorities" in expect:
        assert sorted((e.priority for e in result.evictions), reverse=True) == expect["priorities"]
    if "grace" in expect:
        assert all(e.grace_period_seconds == expect["grace"] for e in result.evictions)
    if "reasonContains" in expect:
        assert all(expect["reasonContains"] in e.reason for e in result.evictions)
    if "waves" in expect:
        assert {e.name: e.wave for e in result.evictions} == expect["waves"]
    if "waveSizes" in expect:
        assert [len(w) for w in result.waves] == expect["waveSizes"], result.waves
    assert not any("HTTP 429" in e.reason for e in result.evictions), "a plan names a 429"


def test_unknown_case_keys_are_reported() -> None:
    """A misspelt key anywhere the DSL defines keys fails instead of testing nothing."""
    case = {
        "name": "typos",
        "zones": {"a": 1},
        "constraints": {"z": {"topologyKey": "zone", "maxskew": 2}},
        "workloads": [{"app": "web", "place": {"a1": 1}, "tolerations": [{"kye": "x"}]}],
        "pdbs": [{"name": "p", "allowed": 0, "selector": {"matchLabel": {"app": "web"}}}],
        "expect": {"evictions": 0, "wave": 1},
        "polcy": {},
    }
    assert sorted(check_case(case)) == sorted(
        [
            "typos.polcy: unknown key",
            "typos.constraints.z.maxskew: unknown key",
            "typos.workloads[0].tolerations[0].kye: unknown key",
            "typos.pdbs[0].selector.matchLabel: unknown key",
            "typos.expect.wave: unknown key",
        ]
    )
