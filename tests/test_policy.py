"""Policy loading: the table of cases in tests/data/policy_cases.yaml, plus the shipped files."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cluster.read.policyfile import load_policy, load_policy_file
from rebalancer.core.errors import InputError
from rebalancer.core.model import LabelSelector, Requirement
from rebalancer.core.policy import (
    KEYS,
    DefaultConstraint,
    Limits,
    Policy,
    PriorityThreshold,
    format_duration,
    parse_duration,
    policy_to_dict,
    policy_with,
    restrict_to_namespace,
)

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
HEADER = "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"
CASES: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent / "data/policy_cases.yaml").read_text()
)
POLICY_FILES = sorted(POLICIES.rglob("*.yaml"))


def _text(case: dict[str, Any]) -> str:
    text: str = case["text"] if "text" in case else HEADER + case["body"]
    return text


CASE_KEYS = frozenset({"name", "body", "text", "problems", "effective"})


def test_case_file_has_no_unknown_keys() -> None:
    """Every case has a name, one input (body or text) and one expectation (problems or
    effective), and no other key: a typo must not make a case test nothing."""
    assert set(CASES) == {"cases", "durations", "badDurations"}
    for case in CASES["cases"]:
        assert set(case) <= CASE_KEYS, case["name"]
        assert len(set(case) & {"body", "text"}) == 1, case["name"]
        assert len(set(case) & {"problems", "effective"}) == 1, case["name"]


@pytest.mark.parametrize("case", CASES["cases"], ids=[c["name"] for c in CASES["cases"]])
def test_policy_case(case: dict[str, Any]) -> None:
    """Each case loads to its expected effective values or fails with exactly its problems."""
    if "problems" in case:
        with pytest.raises(InputError) as info:
            load_policy(_text(case), "case.yaml")
        assert list(info.value.problems) == case["problems"]
        assert info.value.source == "case.yaml"
    else:
        effective = policy_to_dict(load_policy(_text(case), "case.yaml"))
        assert {key: effective[key] for key in case["effective"]} == case["effective"]


@pytest.mark.parametrize(
    "case",
    [c for c in CASES["cases"] if "effective" in c],
    ids=[c["name"] for c in CASES["cases"] if "effective" in c],
)
def test_canonical_form_loads_back(case: dict[str, Any]) -> None:
    """policy_to_dict of any valid policy, dumped as YAML, loads back to the same Policy."""
    policy = load_policy(_text(case), "case.yaml")
    assert load_policy(yaml.safe_dump(policy_to_dict(policy)), "canonical") == policy


@pytest.mark.parametrize(("text", "seconds"), CASES["durations"].items())
def test_parse_duration(text: str, seconds: float) -> None:
    """Go-style durations parse to seconds."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "message"), CASES["badDurations"].items())
def test_parse_duration_rejects(text: str, message: str) -> None:
    """Negative, unitless and unknown-unit durations are rejected with a readable message."""
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize("seconds", [0.0, 1.0, 59.0, 90.0, 300.0, 3600.0, 5400.0, 86400.0, 0.25])
def test_format_duration_round_trips(seconds: float) -> None:
    """format_duration spells a duration that parse_duration reads back to the same seconds."""
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


def test_loaded_fields_are_typed() -> None:
    """A full policy loads into the typed dataclasses, with snake_case fields."""
    policy = load_policy(
        HEADER
        + """
constraints: [DoNotSchedule, ScheduleAnyway]
nodeFit: false
defaultConstraints: [{maxSkew: 3, topologyKey: kubernetes.io/hostname}]
namespaces: {include: [shop]}
labelSelector: {matchExpressions: [{key: app, operator: NotIn, values: [db]}]}
priorityThreshold: {name: high}
minPodAge: 5m
limits: {total: 4, perWorkload: 1}
gracePeriodSeconds: 45
""",
        "full.yaml",
    )
    assert policy == Policy(
        constraints=("DoNotSchedule", "ScheduleAnyway"),
        node_fit=False,
        default_constraints=(DefaultConstraint(max_skew=3, topology_key="kubernetes.io/hostname"),),
        namespaces_include=("shop",),
        namespaces_exclude=(),
        label_selector=LabelSelector(
            match_expressions=(Requirement(key="app", operator="NotIn", values=("db",)),)
        ),
        priority_threshold=PriorityThreshold(value=None, name="high"),
        min_pod_age_seconds=300.0,
        limits=Limits(total=4, per_workload=1),
        grace_period_seconds=45,
    )


def test_problem_message_names_the_source() -> None:
    """The InputError message names the source and lists every problem on its own line."""
    with pytest.raises(InputError) as info:
        load_policy(HEADER + "gracePeriodSeconds: 0\nnodefit: true\n", "policy.yaml")
    assert str(info.value) == (
        "policy.yaml: 2 problem(s):\n"
        "  - nodefit: unknown key; did you mean nodeFit?\n"
        "  - gracePeriodSeconds: 0 means no grace period; use >= 1 or omit"
    )


@pytest.mark.parametrize("path", POLICY_FILES, ids=[str(p.relative_to(ROOT)) for p in POLICY_FILES])
def test_shipped_policies_are_valid(path: Path) -> None:
    """Every policy file shipped in policies/ loads without problems."""
    assert isinstance(load_policy_file(path), Policy)


def test_shipped_policies_exist() -> None:
    """policies/ ships the default and the three annotated examples."""
    names = {str(p.relative_to(POLICIES)) for p in POLICY_FILES}
    assert names >= {
        "default.yaml",
        "examples/soft-and-defaults.yaml",
        "examples/conservative.yaml",
        "examples/cluster-autoscaler.yaml",
    }


def test_default_yaml_is_the_default_policy() -> None:
    """policies/default.yaml is exactly Policy() and spells out every key."""
    assert load_policy_file(POLICIES / "default.yaml") == Policy()
    raw = yaml.safe_load((POLICIES / "default.yaml").read_text())
    assert list(raw) == list(policy_to_dict(Policy()))


def test_soft_example_matches_the_scheduler_defaults() -> None:
    """The soft example's defaults are kube-scheduler's built-in ones: hostname 3, zone 5."""
    policy = load_policy_file(POLICIES / "examples/soft-and-defaults.yaml")
    assert "ScheduleAnyway" in policy.constraints
    assert [
        (c.topology_key, c.max_skew, c.when_unsatisfiable) for c in policy.default_constraints
    ] == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway"),
        ("topology.kubernetes.io/zone", 5, "ScheduleAnyway"),
    ]


def test_autoscaler_example_turns_node_fit_off() -> None:
    """The cluster-autoscaler example allows evictions whose replacement stays Pending."""
    assert load_policy_file(POLICIES / "examples/cluster-autoscaler.yaml").node_fit is False


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    """A policy file that cannot be read is an InputError naming the path."""
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as info:
        load_policy_file(path)
    assert info.value.source == str(path)
    assert "cannot read the file" in info.value.problems[0]


def test_non_utf8_file_is_an_input_error(tmp_path: Path) -> None:
    """A policy file that is not UTF-8 is an InputError, not a traceback."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"nodeFit: \xff\n")
    with pytest.raises(InputError, match="not UTF-8"):
        load_policy_file(path)


def test_restrict_to_namespace_narrows_include() -> None:
    """-n NAMESPACE turns the policy's namespaces into exactly that one."""
    narrowed = restrict_to_namespace(Policy(), "shop")
    assert (narrowed.namespaces_include, narrowed.namespaces_exclude) == (("shop",), ())


@pytest.mark.parametrize(
    ("policy", "namespace", "problem"),
    [
        (Policy(), "kube-system", "kube-system is in the policy's namespaces.exclude"),
        (
            Policy(namespaces_include=("shop",), namespaces_exclude=()),
            "billing",
            "billing is not in the policy's namespaces.include",
        ),
        (Policy(), "Bad_Name", 'must be a namespace name, got "Bad_Name"'),
    ],
)
def test_restrict_to_namespace_refuses(policy: Policy, namespace: str, problem: str) -> None:
    """-n with a namespace the policy excludes (or a bad name) is an input error."""
    with pytest.raises(InputError) as info:
        restrict_to_namespace(policy, namespace)
    assert info.value.problems == (problem,)


# The keys of a policy file in the order docs/policy.md lists them, written out by hand, each
# with the Policy fields it sets.
DOCUMENTED_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("constraints", ("constraints",)),
    ("nodeFit", ("node_fit",)),
    ("maxWaitingForNodes", ("max_waiting_for_nodes",)),
    ("defaultConstraints", ("default_constraints",)),
    ("namespaces", ("namespaces_include", "namespaces_exclude")),
    ("namespaceLabelSelector", ("namespace_label_selector",)),
    ("labelSelector", ("label_selector",)),
    ("priorityThreshold", ("priority_threshold",)),
    ("evictLocalStoragePods", ("evict_local_storage_pods",)),
    ("evictPodsWithPVC", ("evict_pods_with_pvc",)),
    ("evictPodsWithResourceClaims", ("evict_pods_with_resource_claims",)),
    ("evictBarePods", ("evict_bare_pods",)),
    ("minPodAge", ("min_pod_age_seconds",)),
    ("minPodAgeFrom", ("min_pod_age_from",)),
    ("limits", ("limits",)),
    ("gracePeriodSeconds", ("grace_period_seconds",)),
    ("schedule", ("schedule",)),
    ("minReplicas", ("min_replicas",)),
    ("nodeSelector", ("node_selector",)),
    ("ignorePodsWithoutPDB", ("ignore_pods_without_pdb",)),
    ("noEvictionPolicy", ("no_eviction_policy",)),
    ("steerScaleDown", ("steer_scale_down",)),
    ("evictionAPI", ("eviction_api",)),
    ("reserveCapacity", ("reserve_capacity",)),
)


def test_every_policy_field_is_set_by_one_declared_key() -> None:
    """The declared keys are the documented ones, in order, and together set every field of
    Policy exactly once: parsing, the dump and the chart's schema all go by them."""
    assert [(key.name, key.attrs) for key in KEYS] == list(DOCUMENTED_KEYS)
    attrs = [attr for key in KEYS for attr in key.attrs]
    assert sorted(attrs) == sorted(f.name for f in dataclasses.fields(Policy))
    assert list(policy_to_dict(Policy()))[2:] == [name for name, _ in DOCUMENTED_KEYS]


def test_policy_with_sets_keys_and_refuses_others() -> None:
    """policy_with takes values by key (namespaces as its two lists) and keeps the defaults of
    the rest; a name that is no policy key is a bug, not a policy."""
    policy = policy_with({"namespaces": (("shop",), ()), "minReplicas": 2})
    assert policy == Policy(namespaces_include=("shop",), namespaces_exclude=(), min_replicas=2)
    with pytest.raises(ValueError, match="nodefit"):
        policy_with({"nodefit": True})


def test_a_non_string_key_is_shown_cut_short() -> None:
    """A mapping key that is no string is named in its problem, cut at 60 characters."""
    with pytest.raises(InputError) as info:
        load_policy(HEADER + f"limits: {{{'9' * 70}: 1}}\n", "case.yaml")
    assert info.value.problems == (f"limits.{'9' * 60}: keys must be strings",)
