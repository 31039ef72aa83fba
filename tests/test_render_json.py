"""The JSON form is written by orjson where it gives the bytes ``json.dumps(indent=2,
ensure_ascii=False)`` gives, and by json everywhere else (floats, wide integers, non-string
keys): the oracle here is :mod:`json` itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.cli.render import _JSON_OPTIONS, _json, plan_data, render_plan
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.planner import plan
from tests.casedsl import build_snapshot

# Every code point but the lone surrogates (which orjson refuses: then json writes them).
_TEXT = st.text(
    st.characters(min_codepoint=0, max_codepoint=sys.maxunicode, exclude_categories=["Cs"])
)
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    _TEXT,
)
_DATA = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(_TEXT, inner, max_size=4),
    ),
    max_leaves=30,
)


def _oracle(data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _orjson(data: object) -> str:
    """orjson alone (no fallback), as ``_json`` calls it."""
    return orjson.dumps(data, option=_JSON_OPTIONS).decode()


@settings(max_examples=400, deadline=None)
@given(_DATA)
def test_orjson_writes_what_json_writes(data: object) -> None:
    assert _orjson(data) == _oracle(data)
    assert _json(data, floats=False) == _oracle(data)


def test_every_single_character_is_escaped_alike() -> None:
    """Control characters, quotes, backslashes, DEL, line separators, astral planes."""
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    data = {c: [c, f"a{c}b"] for c in chars}
    assert _orjson(data) == _oracle(data)


def test_what_orjson_refuses_or_writes_differently_goes_through_json() -> None:
    cases: list[object] = [
        {"wide": 2**64},  # wider than 64 bits
        {"narrow": -(2**63) - 1},
        {1: "int key", None: "null key"},  # json turns the keys into strings
        ["\ud800 lone surrogate"],
    ]
    for data in cases:
        assert _json(data, floats=False) == _oracle(data)
    floats: list[object] = [1e-05, -3.2e-07, float("nan"), float("inf"), 0.5, 1e16]
    assert _json(floats, floats=True) == _oracle(floats)


def test_plans_of_the_planner_cases_render_as_json_would() -> None:
    cases = yaml.safe_load((Path(__file__).parent / "data" / "planner_cases.yaml").read_text())
    for case in cases["cases"]:
        doc = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy"}
        doc.update(case.get("policy") or {})
        result = plan(build_snapshot(case), load_policy(yaml.safe_dump(doc), "case"), 1_000_000.0)
        data = plan_data(result)
        assert _orjson(data) == render_plan(result, "json") == _oracle(data), case["name"]
