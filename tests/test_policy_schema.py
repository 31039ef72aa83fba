"""The chart's policy schema against the policy validator: the same policies accepted and refused.

Random policy values, good and bad, go through the JSON Schema (the ``jsonschema`` library, as
Helm's checker reads the same draft) and through ``policy_from_document``, the function behind
``rebalancer policy check``. The schema must never refuse a policy the validator accepts, and
may accept a refused one only for the rules JSON Schema cannot state, each named in
:mod:`rebalancer.core.policy_schema` and recognised here by the validator's own message.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from rebalancer.cli.main import main as rebalancer_main
from rebalancer.core.constants import INT32_MAX, INT32_MIN, INT64_MAX
from rebalancer.core.errors import InputError
from rebalancer.core.policy import (
    API_VERSION,
    CREATION_TIMESTAMP,
    EVICTION_APIS,
    HEADER_KEYS,
    KEYS,
    KIND,
    NO_EVICTION_POLICIES,
    RESERVE_CAPACITY_MODES,
    START_TIME,
    policy_from_document,
)
from rebalancer.core.policy_schema import (
    OPEN_KEYS,
    Schema,
    policy_values_schema,
)
from tests.packaging_tools import ROOT

CHART_SCHEMA = ROOT / "charts" / "rebalancer" / "values.schema.json"

VALUES_CHECKER: Final = Draft7Validator(policy_values_schema())

GAPS: Final = (
    re.compile(r"a second \w+ constraint on"),  # unique (topologyKey, whenUnsatisfiable) pairs
    re.compile(r"\.cron: (not a cron expression|never fires)"),
    re.compile(r"\.timeZone: unknown time zone"),
    re.compile(r"^(minPodAge|schedule\.windows\[\d+\]\.duration): must be at most 8760h"),
)
"""Validator messages of the rules the schema leaves to the validator (policy_schema's list)."""


def schema_accepts(values: dict[str, Any]) -> bool:
    return VALUES_CHECKER.is_valid(values)


def validator_problems(values: dict[str, Any]) -> tuple[str, ...]:
    try:
        policy_from_document({"apiVersion": API_VERSION, "kind": KIND, **values}, "values")
    except InputError as exc:
        return exc.problems
    return ()


def is_gap(problem: str) -> bool:
    if any(gap.search(problem) for gap in GAPS):
        return True
    return any(problem.startswith(key) for key in OPEN_KEYS)


# -- strategies --------------------------------------------------------------------------------

small_ints = st.one_of(
    st.integers(-2, 4),
    st.sampled_from(
        [INT32_MAX, INT32_MAX + 1, INT32_MIN, INT32_MIN - 1, INT64_MAX, INT64_MAX + 1, 100]
    ),
)
not_integral = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer())
# Through Helm a YAML 1.0 reaches the policy as 1 (toYaml), so integral floats are left out.
scalars = st.one_of(
    st.none(), st.booleans(), small_ints, not_integral, st.text("ab1-/.", max_size=4)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text("abk", max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def mixed(
    good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any] = json_values
) -> st.SearchStrategy[Any]:
    """Mostly ``good`` values (4 in 5), sometimes ``bad`` (by default anything at all)."""
    return st.integers(0, 4).flatmap(lambda n: bad if n == 0 else good)


label_keys = mixed(
    st.sampled_from(
        ["app", "example.com/tier", "topology.kubernetes.io/zone", "a.b_c-d", "x" * 63]
    ),
    st.one_of(
        st.sampled_from(["-app", "app-", "a/b/c", "Example.com/x", "/app", "x" * 64, "", "a b"]),
        st.text("aZ0-._/", max_size=6),
    ),
)
label_values = mixed(
    st.sampled_from(["", "web", "x" * 63, "a_b.c", "v1.2"]),
    st.one_of(st.sampled_from(["-web", "x" * 64, "a b", "web."]), st.text("aZ0-._", max_size=4)),
)
durations = mixed(
    st.sampled_from(["0s", "90s", "1h30m", " 5m ", "1.5h", ".5s", "00m", "1m0s", "10ms", "0ms0s"]),
    st.one_of(
        st.sampled_from(["100us", "5ns", "5", "", "-1s", "1.s", "1..5s", "h", "3mh", "5 m"]),
        st.text("0123456789.mshu -", max_size=6),
    ),
)
crons = mixed(
    st.sampled_from(["*/15 * * * *", "0 2 * * 1-5", "0 22 * * MON-FRI", "30  1 * * *"]),
    st.sampled_from(
        [
            "* * * *",
            "* * * * * *",
            "@daily",
            "61 * * * *",  # out of range: a gap
            "0 0 31 2 *",  # never fires: a gap
            "",
            "a b c d e",
        ]
    ),
)
time_zones = mixed(
    st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Etc/GMT+5"]),
    st.sampled_from(["Mars/Olympus", "", " UTC", "a b", "Europe//Berlin"]),  # Mars: a gap
)
counts = mixed(st.integers(0, 4), small_ints)
when = mixed(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]), st.sampled_from(["Sometimes"]))
inclusion = mixed(st.sampled_from(["Honor", "Ignore"]), st.sampled_from(["honor", ""]))


def optional_keys(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping holding some of ``fields``, now and then with an unknown key too."""
    some = st.fixed_dictionaries({}, optional=fields)
    return mixed(some, st.fixed_dictionaries({"unknownKey": st.just(1)}, optional=fields))


def with_keys(
    required: dict[str, st.SearchStrategy[Any]], **optional: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping with each of ``required`` most of the time and some of ``optional``."""
    return mixed(
        st.fixed_dictionaries(required, optional=optional),
        st.fixed_dictionaries({}, optional={**required, **optional}),
    )


default_constraint = with_keys(
    {"maxSkew": counts, "topologyKey": label_keys},
    whenUnsatisfiable=when,
    minDomains=counts,
    nodeAffinityPolicy=inclusion,
    nodeTaintsPolicy=inclusion,
)
namespace_names = mixed(
    st.sampled_from(["shop", "kube-system", "a", "b-2"]),
    st.sampled_from(["Shop", "-a", "a" * 64, "x.y", ""]),
)
namespace_lists = st.one_of(st.none(), st.lists(namespace_names, max_size=3))
good_label_keys = st.sampled_from(["app", "example.com/tier", "topology.kubernetes.io/zone"])
requirement = mixed(
    st.one_of(
        st.fixed_dictionaries(
            {
                "key": good_label_keys,
                "operator": st.sampled_from(["In", "NotIn"]),
                "values": st.lists(label_values, min_size=1, max_size=3),
            }
        ),
        st.fixed_dictionaries(
            {"key": good_label_keys, "operator": st.sampled_from(["Exists", "DoesNotExist"])},
            optional={"values": st.sampled_from([[], None])},
        ),
    ),
    with_keys(
        {
            "key": label_keys,
            "operator": mixed(
                st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                st.sampled_from(["Gt", "in", ""]),
            ),
        },
        values=st.one_of(st.none(), st.lists(label_values, max_size=3)),
    ),
)
label_selector = st.one_of(
    st.none(),
    optional_keys(
        matchLabels=st.one_of(st.none(), st.dictionaries(label_keys, label_values, max_size=3)),
        matchExpressions=st.one_of(st.none(), st.lists(requirement, max_size=3)),
    ),
)
window = with_keys({"cron": crons, "duration": durations}, timeZone=time_zones)
priority_threshold = mixed(
    st.one_of(
        st.fixed_dictionaries({"value": st.integers(-5, 2**31 - 1)}),
        st.fixed_dictionaries({"name": st.sampled_from(["high", "system-cluster-critical"])}),
        st.fixed_dictionaries({"value": st.integers(0, 5), "name": st.none()}),
    ),
    optional_keys(
        value=st.one_of(st.none(), small_ints),
        name=st.one_of(st.none(), st.sampled_from(["high", "Hi", ""])),
    ),
)

KEY_VALUES: Final[dict[str, st.SearchStrategy[Any]]] = {
    "constraints": st.lists(
        mixed(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]), st.just("Always")),
        max_size=3,
    ),
    "defaultConstraints": st.one_of(st.none(), st.lists(default_constraint, max_size=3)),
    "namespaces": optional_keys(include=namespace_lists, exclude=namespace_lists),
    "labelSelector": label_selector,
    "priorityThreshold": priority_threshold,
    "minPodAge": durations,
    "limits": st.one_of(
        st.none(),
        optional_keys(
            total=st.one_of(st.none(), counts),
            perNode=st.one_of(st.none(), counts),
            perNamespace=counts,
            perWorkload=counts,
        ),
    ),
    "gracePeriodSeconds": st.one_of(st.none(), counts),
    "minReplicas": counts,
    "nodeSelector": label_selector,
    "noEvictionPolicy": mixed(
        st.sampled_from(list(NO_EVICTION_POLICIES)), st.sampled_from(["preferred", "Never", ""])
    ),
    "minPodAgeFrom": mixed(
        st.sampled_from([CREATION_TIMESTAMP, START_TIME]),
        st.sampled_from(["creation", "StartTime", ""]),
    ),
    "evictionAPI": mixed(
        st.sampled_from(list(EVICTION_APIS)), st.sampled_from(["Auto", "evictionrequest", ""])
    ),
    "reserveCapacity": mixed(
        st.sampled_from(list(RESERVE_CAPACITY_MODES)), st.sampled_from(["Never", "always", ""])
    ),
    "schedule": st.one_of(
        st.none(),
        optional_keys(windows=st.one_of(st.none(), st.lists(window, max_size=2))),
    ),
}
"""Values for each key; a key not listed (a boolean, or one added later) gets any value."""

POLICY_KEYS: Final = tuple(key.name for key in KEYS)


def _policy(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({key: mixed(KEY_VALUES.get(key, st.booleans())) for key in keys})


# A few keys at a time, so that many policies are good and a bad one has few faults.
policies = st.lists(st.sampled_from((*POLICY_KEYS, "nodefit")), max_size=3, unique=True).flatmap(
    _policy
)


# -- tests -------------------------------------------------------------------------------------


def check_agreement(values: dict[str, Any]) -> None:
    """The schema refuses exactly what the validator refuses, but for the named gaps."""
    problems = validator_problems(values)
    accepted = schema_accepts(values)
    if not problems:
        errors = [e.message for e in VALUES_CHECKER.iter_errors(values)]
        assert accepted, f"the schema refuses a good policy: {errors}"
    elif accepted:
        assert all(is_gap(p) for p in problems), f"the schema accepts a bad policy: {problems}"


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies)
def test_schema_and_validator_accept_the_same_policies(values: dict[str, Any]) -> None:
    """The schema refuses exactly what the validator refuses, but for the named gaps."""
    check_agreement(values)


@pytest.mark.parametrize("key", POLICY_KEYS)
def test_schema_and_validator_agree_key_by_key(key: str) -> None:
    """The same, one key at a time: a bad value deep in one key (a label value in a
    matchExpressions entry, a window's duration) is never hidden by another key's fault."""

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mixed(KEY_VALUES.get(key, st.booleans())))
    def agree(value: Any) -> None:
        check_agreement({key: value})

    agree()


@pytest.mark.parametrize("key", POLICY_KEYS)
def test_strategies_reach_both_verdicts_for_every_key(key: str) -> None:
    """The draws above are not all good or all bad: for every key, each verdict occurs (drawn
    per key and derandomized, so the check does not depend on how a run's draws fall)."""
    seen: set[bool] = set()

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(mixed(KEY_VALUES.get(key, st.booleans())))
    def draw(value: Any) -> None:
        seen.add(not validator_problems({key: value}))

    draw()
    assert seen == {True, False}


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"minPodAge": "100us"}, "minPodAge"),
        ({"schedule": {"windows": [{"duration": "1h"}]}}, "cron: required"),
        ({"schedule": {"windows": [{"cron": "0 2 * * *"}]}}, "duration: required"),
        ({"defaultConstraints": [{"maxSkew": 1}]}, "topologyKey: required"),
        ({"defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone"}]}, "maxSkew"),
        ({"namespaces": {"include": ["a"], "exclude": ["b"]}}, "mutually exclusive"),
    ],
)
def test_values_the_old_schema_let_through_are_refused_by_both(
    values: dict[str, Any], problem: str, tmp_path: Path
) -> None:
    """The cases that made every Job exit 2: the schema refuses them, as `policy check` does
    (exit 2, naming the field)."""
    errors = list(VALUES_CHECKER.iter_errors(values))
    assert errors
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump({"apiVersion": API_VERSION, "kind": KIND, **values}))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = rebalancer_main(["policy", "check", str(policy_file)])
    assert code == 2
    assert problem in err.getvalue()


def test_include_and_exclude_error_names_exclude() -> None:
    """include with exclude: the schema's error is at namespaces.exclude, not a bare 'not'."""
    (error,) = VALUES_CHECKER.iter_errors({"namespaces": {"include": ["a"], "exclude": ["b"]}})
    assert list(error.absolute_path) == ["namespaces", "exclude"]


def test_chart_schema_holds_the_generated_policy_part() -> None:
    """values.schema.json's policy part is what scripts/gen_chart_schema.py writes."""
    chart = json.loads(CHART_SCHEMA.read_text())
    assert chart["properties"]["policy"] == policy_values_schema()
    assert chart["properties"]["policy"]["additionalProperties"] is False


def test_every_validator_key_is_in_the_schema() -> None:
    """Each key the validator takes is in the schema (an open one lets any value through), and
    the schema takes no other."""
    properties = policy_values_schema()["properties"]
    assert set(properties) == set(POLICY_KEYS)
    assert {k for k, rule in properties.items() if "type" not in rule and "enum" not in rule} == (
        set(OPEN_KEYS)
    )


def policy_document_schema() -> Schema:
    """The schema of a whole policy file: the values' policy with its header."""
    body = policy_values_schema()
    return {
        **body,
        "required": list(HEADER_KEYS),
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": KIND},
            **body["properties"],
        },
    }


def test_shipped_policies_fit_the_document_schema() -> None:
    """Every policy file the project ships passes the whole-document schema and the validator."""
    checker = Draft7Validator(policy_document_schema())
    files = sorted((ROOT / "policies").glob("*.yaml"))
    assert files
    for path in files:
        document = yaml.safe_load(path.read_text())
        assert checker.is_valid(document), path
        policy_from_document(document, str(path))


@pytest.mark.parametrize(
    "values",
    [
        {"minPodAge": "8761h"},
        {"minPodAge": "99999999999h"},
        {"schedule": {"windows": [{"cron": "0 2 * * *", "duration": "9000h"}]}},
    ],
)
def test_durations_past_a_year_are_the_validators_to_refuse(values: dict[str, Any]) -> None:
    """The schema cannot add up a duration's parts: it lets a duration past 8760h through, the
    validator refuses it naming the field, and the test counts it as a named gap."""
    problems = validator_problems(values)
    assert len(problems) == 1 and "must be at most 8760h" in problems[0]
    assert schema_accepts(values)
    assert is_gap(problems[0])
    check_agreement(values)
