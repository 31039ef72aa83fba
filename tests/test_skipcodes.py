"""Skip reasons are one enum: every reason the package builds names a member, the JSON spells
each as before, and the reference's list of skip reason codes is the enum, no more, no less."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from rebalancer.cli.render import render_plan
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.plan import SkipCode
from rebalancer.core.planner import plan
from tests.casedsl import build_snapshot

ROOT = Path(__file__).resolve().parent.parent
CASES: list[dict[str, Any]] = yaml.safe_load(
    (ROOT / "tests" / "data" / "planner_cases.yaml").read_text()
)["cases"]
VALUES = {code.value for code in SkipCode}


def _table_codes(doc: str, heading: str) -> list[str]:
    """The backquoted codes opening the rows of the table under ``heading`` in ``doc``."""
    text = (ROOT / "docs" / doc).read_text()
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z-]+)` \|", section, re.MULTILINE)


def test_the_reference_lists_every_code_once() -> None:
    """docs/reference.md's table of skip reason codes holds each member's value, once, and
    nothing else."""
    documented = _table_codes("reference.md", "## Skip reason codes")
    assert len(documented) == len(set(documented)), documented
    assert set(documented) == VALUES


def test_the_policy_pages_codes_are_members() -> None:
    """Every code in docs/policy.md's table of pods never evicted is a member."""
    text = (ROOT / "docs" / "policy.md").read_text()
    section = text.split("\n## Pods that are never evicted\n", 1)[1].split("\n## ", 1)[0]
    codes = re.findall(r"^\|[^|]+\| `([a-z-]+)` \|", section, re.MULTILINE)
    assert len(codes) >= 18, codes
    assert set(codes) <= VALUES, set(codes) - VALUES


def _reason_arguments() -> Iterator[tuple[str, ast.expr]]:
    """The first argument of every ``SkipReason(...)`` and ``Hold(...)`` in the package."""
    for path in sorted((ROOT / "rebalancer").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"SkipReason", "Hold"}
                and node.args
            ):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.args[0]


def test_every_reason_is_built_from_a_member() -> None:
    """No skip reason or hold is built from a bare string: each names a member of the enum
    (or passes on a code it was given)."""
    found = list(_reason_arguments())
    assert len(found) >= 40, found  # the constructors of core and cluster/act are all seen
    literals = [where for where, arg in found if isinstance(arg, ast.Constant)]
    assert literals == []
    for where, arg in found:
        if isinstance(arg, ast.Attribute):
            assert isinstance(arg.value, ast.Name), where
            assert (arg.value.id, arg.attr in SkipCode.__members__) == ("SkipCode", True), where


def test_plans_spell_every_code_as_the_cases_expect() -> None:
    """Over the planner's named cases, the JSON's skip and hold codes are all members, each
    reason starts with its code, and every code a case expects (written by hand in
    tests/data/planner_cases.yaml) appears with that spelling."""
    expected: set[str] = set()
    seen: set[str] = set()
    for case in CASES:
        expected.update(case["expect"].get("skipped", {}).values())
        doc = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy"}
        doc.update(case.get("policy") or {})
        policy = load_policy(yaml.safe_dump(doc), "case")
        data = json.loads(render_plan(plan(build_snapshot(case), policy, 1_000_000.0), "json"))
        for skip in data["skipped"]:
            assert skip["reason"].split(":", 1)[0] == skip["code"], skip
            seen.add(skip["code"])
        seen.update(r["code"] for left in data["unrepaired"] for r in left["reasons"])
    assert len(expected) >= 10, expected
    assert expected <= seen, expected - seen
    assert seen <= VALUES, seen - VALUES
