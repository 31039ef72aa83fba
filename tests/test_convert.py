"""Tests for rebalancer.core.convert: API objects (dicts) -> the frozen model."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rebalancer.cli.render import render_plan
from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.cluster.read.snapshot import load_snapshot
from rebalancer.core.convert import (
    SnapshotBuilder,
    controller_from_api,
    label_selector_from_api,
    node_from_api,
    node_selector_from_api,
    parse_bytes,
    parse_cpu_millis,
    parse_quantity,
    pdb_from_api,
    pod_from_api,
    priority_class_from_api,
    pv_from_api,
    pvc_from_api,
    service_from_api,
    snapshot_from_objects,
)
from rebalancer.core.errors import InputError
from rebalancer.core.model import (
    NOT_SHARED,
    LabelSelector,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    Pod,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
    shared_key,
)
from rebalancer.core.planner import plan
from tests.builders import constraint, containers, node_obj, pod_obj

GI = 1024**3
ROOT = Path(__file__).resolve().parent.parent
MI = 1024**2


def problems_of(obj: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(InputError) as info:
        snapshot_from_objects([obj])
    return info.value.problems


# --- quantities -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("100m", 100),
        ("0.5", 500),
        ("2", 2000),
        (".5", 500),
        ("1.", 1000),
        ("+1", 1000),
        ("1e-3", 1),
        ("0.0001", 1),  # rounded up, like MilliValue()
        ("1500u", 2),
        ("100n", 1),
        ("250000000n", 250),
        (2, 2000),  # unquoted YAML numbers are quantities too
        (0.25, 250),
    ],
)
def test_parse_cpu_millis(text: object, millis: int) -> None:
    """CPU quantities convert to millicores, fractions rounded up."""
    assert parse_cpu_millis(text, "cpu") == millis


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("128Mi", 128 * MI),
        ("1.5Gi", 1536 * MI),
        ("0.5Ki", 512),
        ("1Ti", 1024**4),
        ("1Pi", 1024**5),
        ("1Ei", 1024**6),
        ("1k", 1000),
        ("1M", 10**6),
        ("2G", 2 * 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),  # E alone is exa ...
        ("1E3", 1000),  # ... E with digits is an exponent
        ("1e3", 1000),
        ("1.5e3", 1500),
        ("1e+3", 1000),
        ("1.5", 2),  # fractional bytes round up
        ("100m", 1),
        ("0", 0),
        ("110", 110),
        ("99999999999999999999", 2**63 - 1),  # capped like resource.Quantity
    ],
)
def test_parse_bytes(text: str, units: int) -> None:
    """Memory and counts convert to whole units with binary, decimal and exponent suffixes."""
    assert parse_bytes(text, "memory") == units


def test_parse_quantity_is_exact_in_nano_units() -> None:
    """parse_quantity keeps nano precision and rounds anything finer up, away from zero."""
    assert parse_quantity("1n", "q") == 1
    assert parse_quantity("0.1n", "q") == 1
    assert parse_quantity("-0.1n", "q") == -1
    assert parse_quantity("1", "q") == 10**9
    assert parse_quantity("-1.5Ki", "q") == -1536 * 10**9


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "1 Gi",
        "1KiB",
        "1ki",
        "1K",
        "Ki",
        "1e",
        "1.5.0",
        "--1",
        "1e1.5",
        ".",
        "1Gi ",
        None,
    ],
)
def test_parse_quantity_rejects_malformed(text: object) -> None:
    """Malformed quantities raise InputError naming the path and the value."""
    with pytest.raises(InputError) as info:
        parse_quantity(text, "spec.x.cpu")
    assert info.value.problems[0].startswith("spec.x.cpu: must be a quantity")
    assert "got " in info.value.problems[0]


def test_parse_bytes_rejects_negative() -> None:
    """Requests and capacities cannot be negative."""
    with pytest.raises(InputError, match='must not be negative, got "-1Gi"'):
        parse_bytes("-1Gi", "memory")


# --- effective requests ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": []}, {}, id="no requests"),
        pytest.param(
            {"containers": containers({"cpu": "100m", "memory": "128Mi"})},
            {"cpu": 100, "memory": 128 * MI},
            id="one container",
        ),
        pytest.param(
            {"containers": containers({"cpu": "100m"}, {"cpu": "250m", "memory": "1Gi"})},
            {"cpu": 350, "memory": GI},
            id="containers are summed",
        ),
        pytest.param(
            {"containers": containers({"cpu": "0.5m"}, {"cpu": "0.5m"})},
            {"cpu": 1},
            id="summed exactly, rounded up once",
        ),
        pytest.param(
            {
                "containers": containers({"cpu": "100m", "memory": "1Gi"}),
                "initContainers": containers({"cpu": "500m", "memory": "64Mi"}),
            },
            {"cpu": 500, "memory": GI},
            id="init container raises the max per resource",
        ),
        pytest.param(
            {
                "containers": containers({"cpu": "100m"}),
                "initContainers": [
                    {"name": "sidecar", "restartPolicy": "Always"}
                    | {"resources": {"requests": {"cpu": "50m"}}},
                    {"name": "init", "resources": {"requests": {"cpu": "200m"}}},
                ],
            },
            {"cpu": 250},
            id="init after a sidecar adds the sidecar",
        ),
        pytest.param(
            {
                "containers": containers({"cpu": "100m"}),
                "initContainers": [
                    {"name": "init", "resources": {"requests": {"cpu": "200m"}}},
                    {"name": "sidecar", "restartPolicy": "Always"}
                    | {"resources": {"requests": {"cpu": "50m"}}},
                ],
            },
            {"cpu": 200},
            id="init before a sidecar does not",
        ),
        pytest.param(
            {
                "containers": containers({"cpu": "100m"}),
                "initContainers": [
                    {"name": "s1", "restartPolicy": "Always"}
                    | {"resources": {"requests": {"cpu": "300m"}}},
                    {"name": "s2", "restartPolicy": "Always"}
                    | {"resources": {"requests": {"cpu": "300m"}}},
                ],
            },
            {"cpu": 700},
            id="sidecars are summed with containers",
        ),
        pytest.param(
            {
                "containers": containers({"cpu": "100m", "memory": "100Mi"}),
                "overhead": {"cpu": "250m", "memory": "120Mi"},
            },
            {"cpu": 350, "memory": 220 * MI},
            id="overhead is added",
        ),
        pytest.param(
            {
                "containers": [
                    {
                        "name": "c",
                        "resources": {
                            "requests": {"cpu": "100m"},
                            "limits": {"cpu": "1", "memory": "1Gi"},
                        },
                    }
                ]
            },
            {"cpu": 100, "memory": GI},
            id="missing requests default to limits",
        ),
        pytest.param(
            {
                "containers": containers({"cpu": "100m", "ephemeral-storage": "1Gi"}),
                "resources": {"requests": {"cpu": "2", "ephemeral-storage": "5Gi"}},
            },
            {"cpu": 2000, "ephemeral-storage": GI},
            id="pod-level cpu replaces the sum, other resources do not",
        ),
        pytest.param(
            {"containers": containers({"nvidia.com/gpu": "1", "hugepages-2Mi": "4Mi"})},
            {"nvidia.com/gpu": 1, "hugepages-2Mi": 4 * MI},
            id="extended resources are counts or bytes",
        ),
    ],
)
def test_effective_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    """Requests follow kube-scheduler's PodRequests: sum, sidecars, init max, overhead."""
    assert dict(pod_from_api(pod_obj(spec=spec)).requests) == expected


@pytest.mark.parametrize(
    ("reason", "expected_cpu"),
    [(None, 500), ("Deferred", 500), ("Infeasible", 300)],
)
def test_requests_follow_in_place_resize(reason: str | None, expected_cpu: int) -> None:
    """A resized container counts max(spec, status); only status if the resize is Infeasible."""
    status: dict[str, Any] = {
        "containerStatuses": [
            {
                "name": "c0",
                "resources": {"requests": {"cpu": "300m"}},
                "allocatedResources": {"cpu": "200m"},
            }
        ]
    }
    if reason is not None:
        status["conditions"] = [{"type": "PodResizePending", "reason": reason}]
    obj = pod_obj(spec={"containers": containers({"cpu": "500m"})}, status=status)
    assert pod_from_api(obj).requests["cpu"] == expected_cpu


def test_requests_memo_does_not_mix_pods() -> None:
    """Pods with different resources never share a memoised result."""
    a = pod_from_api(pod_obj("a", spec={"containers": containers({"cpu": "1"})}))
    b = pod_from_api(pod_obj("b", spec={"containers": containers({"cpu": "2"})}))
    a2 = pod_from_api(pod_obj("a2", spec={"containers": containers({"cpu": "1"})}))
    assert (a.requests["cpu"], b.requests["cpu"], a2.requests["cpu"]) == (1000, 2000, 1000)


# --- pods -----------------------------------------------------------------------------------


def test_pod_fields() -> None:
    """Pod metadata, ownership, volumes, priority and grace period are read."""
    obj = pod_obj(
        meta={
            "creationTimestamp": "2024-05-01T12:00:00Z",
            "deletionTimestamp": "2024-05-01T13:00:00Z",
            "annotations": {
                "kubernetes.io/config.mirror": "abc",
                "kubectl.kubernetes.io/last-applied-configuration": "{...}",
            },
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "1"},
                {"kind": "ReplicaSet", "name": "web-7d9", "uid": "rs-1", "controller": True},
            ],
        },
        spec={
            "priority": 1000,
            "priorityClassName": "batch-low",
            "terminationGracePeriodSeconds": 45,
            "nodeSelector": {"disk": "ssd"},
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "tmp", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "cfg"}},
            ],
        },
    )
    pod = pod_from_api(obj)
    assert pod.created == 1714564800.0
    assert pod.terminating
    assert pod.mirror
    assert pod.owner == OwnerRef("ReplicaSet", "web-7d9", "rs-1")
    assert pod.pvc_names == ("data-web-1", "web-1-scratch")
    assert pod.local_storage
    assert (pod.priority, pod.priority_class_name) == (1000, "batch-low")
    assert pod.grace_period_seconds == 45
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.node_name == "node-a"
    assert pod.phase == "Running"
    assert not hasattr(pod, "annotations")  # only the mirror flag is kept
    assert pod.key == "default/web-1"


def test_pod_defaults() -> None:
    """Absent fields take the documented defaults."""
    obj = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    pod = pod_from_api(obj)
    assert pod.namespace == "default"
    assert pod.created == 0.0
    assert pod.phase == "Pending"
    assert pod.node_name is None
    assert pod.owner is None
    assert pod.priority is None
    assert pod.priority_class_name is None
    assert pod.grace_period_seconds is None
    assert not (pod.terminating or pod.mirror or pod.local_storage)
    assert pod.constraints == ()


def test_creation_timestamp_with_fraction_and_offset() -> None:
    """RFC 3339 timestamps with fractions and offsets convert to epoch seconds."""
    obj = pod_obj(meta={"creationTimestamp": "2024-05-01T14:00:00.5+02:00"})
    assert pod_from_api(obj).created == 1714564800.5


def test_tolerations() -> None:
    """Tolerations keep key, operator (default Equal), value and effect."""
    tolerations = [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
        {"operator": "Exists"},
        {"key": "k", "value": "v"},
    ]
    pod = pod_from_api(pod_obj(spec={"tolerations": tolerations}))
    assert pod.tolerations == (
        Toleration("dedicated", "Equal", "gpu", "NoSchedule"),
        Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
        Toleration("", "Exists", "", ""),
        Toleration("k", "Equal", "v", ""),
    )


def test_required_node_affinity() -> None:
    """Required node affinity keeps its terms, expressions and fields."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["a", "b"]},
                            {"key": "cores", "operator": "Gt", "values": ["4"]},
                        ]
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": []}}
            ],
        }
    }
    pod = pod_from_api(pod_obj(spec={"affinity": affinity}))
    assert pod.required_affinity == NodeSelector(
        (
            NodeSelectorTerm(
                match_expressions=(
                    NodeSelectorRequirement("zone", "In", ("a", "b")),
                    NodeSelectorRequirement("cores", "Gt", ("4",)),
                )
            ),
            NodeSelectorTerm(
                match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n1",)),)
            ),
        )
    )


def test_pod_without_required_affinity() -> None:
    """Only preferred affinity, or pod affinity, leaves required_affinity None."""
    spec: dict[str, Any] = {"affinity": {"podAntiAffinity": {}, "nodeAffinity": {}}}
    assert pod_from_api(pod_obj(spec=spec)).required_affinity is None


# --- spread constraints ---------------------------------------------------------------------


def test_constraint_defaults() -> None:
    """A minimal constraint gets minDomains 1, nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore."""
    pod = pod_from_api(pod_obj(spec={"topologySpreadConstraints": [constraint()]}))
    assert pod.constraints == (
        SpreadConstraint(
            max_skew=1,
            topology_key="topology.kubernetes.io/zone",
            when_unsatisfiable="DoNotSchedule",
            selector=LabelSelector(match_labels=(("app", "web"),)),
            min_domains=1,
            node_affinity_policy="Honor",
            node_taints_policy="Ignore",
        ),
    )
    assert pod.constraints[0].hard


def test_constraint_explicit_fields() -> None:
    """Explicit minDomains and inclusion policies are kept."""
    raw = constraint(maxSkew=2, minDomains=3, nodeAffinityPolicy="Ignore", nodeTaintsPolicy="Honor")
    (c,) = pod_from_api(pod_obj(spec={"topologySpreadConstraints": [raw]})).constraints
    assert (c.max_skew, c.min_domains, c.node_affinity_policy, c.node_taints_policy) == (
        2,
        3,
        "Ignore",
        "Honor",
    )


def test_constraint_without_selector_matches_nothing() -> None:
    """An absent labelSelector stays None; an empty one is kept as the match-all selector."""
    raw = [
        constraint(labelSelector=None),
        constraint(topologyKey="kubernetes.io/hostname", labelSelector={}),
    ]
    c1, c2 = pod_from_api(pod_obj(spec={"topologySpreadConstraints": raw})).constraints
    assert c1.selector is None
    assert c2.selector == LabelSelector()


@pytest.mark.parametrize(
    ("keys", "labels", "expected_extra"),
    [
        pytest.param(
            ["pod-template-hash"],
            {"app": "web", "pod-template-hash": "7d9"},
            (Requirement("pod-template-hash", "In", ("7d9",)),),
            id="key the pod carries is added",
        ),
        pytest.param(["release"], {"app": "web"}, (), id="key the pod lacks is ignored"),
        pytest.param(
            ["a", "b"],
            {"app": "web", "a": "1", "b": "2"},
            (Requirement("a", "In", ("1",)), Requirement("b", "In", ("2",))),
            id="several keys in order",
        ),
    ],
)
def test_match_label_keys_merge(
    keys: list[str], labels: dict[str, str], expected_extra: tuple[Requirement, ...]
) -> None:
    """matchLabelKeys add `key In [pod's value]` to the selector for keys the pod carries."""
    raw = constraint(
        labelSelector={
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
        },
        matchLabelKeys=keys,
    )
    pod = pod_from_api(pod_obj(labels=labels, spec={"topologySpreadConstraints": [raw]}))
    (c,) = pod.constraints
    assert c.match_label_keys == tuple(keys)
    assert c.selector == LabelSelector(
        match_labels=(("app", "web"),),
        match_expressions=(Requirement("tier", "NotIn", ("db",)), *expected_extra),
    )


def test_match_label_keys_already_merged_by_apiserver() -> None:
    """A 1.34+ pod whose selector already holds the merged requirement is accepted as is."""
    raw = constraint(
        labelSelector={
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["7d9"]}],
        },
        matchLabelKeys=["pod-template-hash"],
    )
    labels = {"app": "web", "pod-template-hash": "7d9"}
    (c,) = pod_from_api(
        pod_obj(labels=labels, spec={"topologySpreadConstraints": [raw]})
    ).constraints
    assert c.selector is not None
    assert c.selector.match_expressions == (Requirement("pod-template-hash", "In", ("7d9",)),)


def test_match_label_keys_without_selector_stays_none() -> None:
    """matchLabelKeys do not turn an absent selector into one (kube-scheduler: matches nothing)."""
    raw = constraint(labelSelector=None, matchLabelKeys=["pod-template-hash"])
    labels = {"app": "web", "pod-template-hash": "7d9"}
    (c,) = pod_from_api(
        pod_obj(labels=labels, spec={"topologySpreadConstraints": [raw]})
    ).constraints
    assert c.selector is None


def test_match_label_keys_memo_is_per_label_value() -> None:
    """Pods sharing a constraint but not a pod-template-hash get their own selectors."""
    raw = [constraint(matchLabelKeys=["pod-template-hash"])]
    selectors = []
    for name, value in [("a", "111"), ("b", "222"), ("c", "111")]:
        labels = {"app": "web", "pod-template-hash": value}
        pod = pod_from_api(pod_obj(name, labels=labels, spec={"topologySpreadConstraints": raw}))
        assert pod.constraints[0].selector is not None
        selectors.append(pod.constraints[0].selector.match_expressions[-1].values)
    assert selectors == [("111",), ("222",), ("111",)]


# --- validation -----------------------------------------------------------------------------

P = "Pod default/web-1: "
TSC = P + "spec.topologySpreadConstraints[0]"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (constraint(maxSkew=0), f"{TSC}.maxSkew: must be an integer > 0, got 0"),
        (constraint(maxSkew="1"), f'{TSC}.maxSkew: must be an integer > 0, got "1"'),
        (constraint(maxSkew=None), f"{TSC}.maxSkew: must be an integer > 0, got null"),
        (constraint(topologyKey=""), f'{TSC}.topologyKey: must be a non-empty string, got ""'),
        (
            constraint(whenUnsatisfiable="Never"),
            f'{TSC}.whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway, got "Never"',
        ),
        (constraint(minDomains=0), f"{TSC}.minDomains: must be an integer > 0, got 0"),
        (
            constraint(whenUnsatisfiable="ScheduleAnyway", minDomains=2),
            f"{TSC}.minDomains: may only be set when whenUnsatisfiable is DoNotSchedule, got 2",
        ),
        (
            constraint(nodeAffinityPolicy="honor"),
            f'{TSC}.nodeAffinityPolicy: must be Honor or Ignore, got "honor"',
        ),
        (
            constraint(nodeTaintsPolicy="Always"),
            f'{TSC}.nodeTaintsPolicy: must be Honor or Ignore, got "Always"',
        ),
        (
            constraint(labelSelector={"matchExpressions": [{"key": "a", "operator": "In"}]}),
            f"{TSC}.labelSelector.matchExpressions[0].values: "
            "must be non-empty for operator In, got []",
        ),
        (
            constraint(
                labelSelector={
                    "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]
                }
            ),
            f"{TSC}.labelSelector.matchExpressions[0].values: "
            'must be empty for operator Exists, got ["x"]',
        ),
        (
            constraint(labelSelector={"matchExpressions": [{"key": "a", "operator": "Has"}]}),
            f"{TSC}.labelSelector.matchExpressions[0].operator: "
            'must be one of In, NotIn, Exists, DoesNotExist, got "Has"',
        ),
        (
            constraint(labelSelector={"matchLabels": {"app": 1}}),
            f"{TSC}.labelSelector.matchLabels[app]: must be a string, got 1",
        ),
        (
            constraint(matchLabelKeys=["app"]),
            f'{TSC}.matchLabelKeys[0]: must not also be in labelSelector, got "app"',
        ),
        (
            constraint(
                labelSelector={
                    "matchExpressions": [{"key": "h", "operator": "NotIn", "values": ["x"]}]
                },
                matchLabelKeys=["h"],
            ),
            f'{TSC}.matchLabelKeys[0]: must not also be in labelSelector, got "h"',
        ),
    ],
)
def test_constraint_validation_messages(raw: dict[str, Any], message: str) -> None:
    """Each invalid constraint field is reported with object, field path and value."""
    assert message in problems_of(pod_obj(spec={"topologySpreadConstraints": [raw]}))


def test_duplicate_constraint_pair_is_reported() -> None:
    """Two constraints with the same topologyKey and whenUnsatisfiable are an API error."""
    problems = problems_of(
        pod_obj(spec={"topologySpreadConstraints": [constraint(), constraint()]})
    )
    assert problems == (
        P + "spec.topologySpreadConstraints[1]: duplicate {topologyKey, whenUnsatisfiable} pair, "
        'got ["topology.kubernetes.io/zone", "DoNotSchedule"]',
    )


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            pod_obj(spec={"containers": containers({"cpu": "lots"})}),
            P + "spec.containers[0].resources.requests.cpu: must be a quantity such as 100m, "
            '0.5, 2, 1Gi, 512M or 1e3, got "lots"',
        ),
        (
            pod_obj(spec={"overhead": {"memory": "-1Mi"}}),
            P + 'spec.overhead.memory: must not be negative, got "-1Mi"',
        ),
        (
            pod_obj(meta={"creationTimestamp": "yesterday"}),
            P + "metadata.creationTimestamp: must be an RFC 3339 timestamp such as "
            '2024-05-01T12:00:00Z, got "yesterday"',
        ),
        (pod_obj(labels={"app": True}), P + "metadata.labels[app]: must be a string, got true"),
        (pod_obj(spec={"priority": "high"}), P + 'spec.priority: must be an integer, got "high"'),
        (pod_obj(spec={"tolerations": {}}), P + "spec.tolerations: must be a list, got {}"),
        (
            pod_obj(spec={"tolerations": [{"key": "k", "operator": "Equals"}]}),
            P + 'spec.tolerations[0].operator: must be Equal or Exists, got "Equals"',
        ),
        (
            pod_obj(spec={"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
            P + 'spec.tolerations[0].value: must be empty when operator is Exists, got "v"',
        ),
        (
            pod_obj(spec={"tolerations": [{"operator": "Exists", "effect": "NoRun"}]}),
            P + "spec.tolerations[0].effect: must be empty, NoSchedule, PreferNoSchedule "
            'or NoExecute, got "NoRun"',
        ),
        (
            pod_obj(
                spec={
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchFields": [{"key": "metadata.labels", "operator": "In"}]}
                                ]
                            }
                        }
                    }
                }
            ),
            P + "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchFields[0].values: "
            "must be non-empty for operator In, got []",
        ),
        (
            pod_obj(
                meta={
                    "ownerReferences": [
                        {"kind": "ReplicaSet", "name": "a", "controller": True},
                        {"kind": "ReplicaSet", "name": "b", "controller": True},
                    ]
                }
            ),
            P + "metadata.ownerReferences[1].controller: only one owner reference may be the "
            "controller, got true",
        ),
        (
            {"kind": "Pod", "metadata": {"namespace": "x"}},
            "Pod x/<unnamed>: metadata.name: must be a non-empty string, got null",
        ),
    ],
)
def test_pod_validation_messages(obj: dict[str, Any], message: str) -> None:
    """Each invalid pod field is reported with object, field path and value."""
    assert message in problems_of(obj)


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        (
            {"key": "cores", "operator": "Gt", "values": ["many"]},
            "must be one integer for operator Gt",
        ),
        (
            {"key": "cores", "operator": "Lt", "values": ["1", "2"]},
            "must be one integer for operator Lt",
        ),
        ({"key": "zone", "operator": "Near", "values": ["a"]}, "must be one of In, NotIn, Exists"),
    ],
)
def test_node_selector_validation(requirement: dict[str, Any], message: str) -> None:
    """Node selector requirements follow the API's operator and value rules."""
    raw = {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}
    with pytest.raises(InputError) as info:
        node_selector_from_api(raw, "affinity")
    assert info.value.problems[0].startswith("affinity.nodeSelectorTerms[0].matchExpressions[0]")
    assert message in info.value.problems[0]


def test_node_selector_needs_a_term() -> None:
    """A node selector without terms is an API error."""
    with pytest.raises(InputError, match="must hold at least one term"):
        node_selector_from_api({"nodeSelectorTerms": []}, "pv")


def test_all_problems_reported_at_once() -> None:
    """Every problem of every object is collected and raised together."""
    bad_pod = pod_obj(
        spec={
            "topologySpreadConstraints": [constraint(maxSkew=0, whenUnsatisfiable="Maybe")],
            "containers": containers({"cpu": "x"}),
        }
    )
    bad_node = node_obj(status={"allocatable": {"cpu": "four"}})
    other = pod_obj("web-2", meta={"creationTimestamp": 5})
    with pytest.raises(InputError) as info:
        snapshot_from_objects([bad_pod, node_obj("ok"), bad_node, other], source="cluster.yaml")
    problems = info.value.problems
    assert len(problems) == 5
    assert problems[0].startswith(TSC + ".maxSkew")
    assert problems[1].startswith(TSC + ".whenUnsatisfiable")
    assert problems[2].startswith(P + "spec.containers[0].resources.requests.cpu")
    assert problems[3].startswith("Node node-a: status.allocatable.cpu")
    assert problems[4].startswith("Pod default/web-2: metadata.creationTimestamp")
    assert str(info.value).startswith("cluster.yaml: 5 problem(s):")


def test_bad_objects_are_reported_every_time() -> None:
    """A memoised fragment never hides the problem of a later pod that shares it."""
    raw = [constraint(maxSkew=0)]
    objs = [pod_obj(name, spec={"topologySpreadConstraints": raw}) for name in ("a", "b")]
    with pytest.raises(InputError) as info:
        snapshot_from_objects(objs)
    assert [p.split(":")[0] for p in info.value.problems] == ["Pod default/a", "Pod default/b"]


# --- selectors ------------------------------------------------------------------------------


def test_label_selector_from_api() -> None:
    """None stays None, {} is the empty selector, matchLabels are sorted pairs."""
    assert label_selector_from_api(None, "s") is None
    assert label_selector_from_api({}, "s") == LabelSelector()
    selector = label_selector_from_api(
        {
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "c", "operator": "DoesNotExist"}],
        },
        "s",
    )
    assert selector == LabelSelector(
        (("a", "1"), ("b", "2")), (Requirement("c", "DoesNotExist", ()),)
    )


def test_label_selector_problems_can_be_collected() -> None:
    """With a problems list, selector problems are appended instead of raised."""
    problems: list[str] = []
    raw = {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}
    label_selector_from_api(raw, "policy.labelSelector", problems)
    assert problems == [
        "policy.labelSelector.matchExpressions[0].values: must be non-empty for operator NotIn, "
        "got []"
    ]


# --- nodes ----------------------------------------------------------------------------------


def test_node_fields() -> None:
    """Nodes keep labels, allocatable in millicores/bytes/counts, taints and cordon."""
    node = node_from_api(
        node_obj(
            spec={
                "unschedulable": True,
                "taints": [
                    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
                    {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
                ],
            },
            status={
                "allocatable": {
                    "cpu": "3920m",
                    "memory": "15720236Ki",
                    "pods": "110",
                    "ephemeral-storage": "95551679124",
                    "hugepages-2Mi": "0",
                }
            },
        )
    )
    assert node.name == "node-a"
    assert node.labels == {"kubernetes.io/hostname": "node-a"}
    assert node.allocatable == {
        "cpu": 3920,
        "memory": 15720236 * 1024,
        "pods": 110,
        "ephemeral-storage": 95551679124,
        "hugepages-2Mi": 0,
    }
    assert node.taints == (
        Taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"),
        Taint("dedicated", "gpu", "NoExecute"),
    )
    assert node.unschedulable
    assert node.ready


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([{"type": "Ready", "status": "True"}], True),
        (
            [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            True,
        ),
        ([{"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "Unknown"}], False),
        ([{"type": "MemoryPressure", "status": "False"}], False),
        ([], False),
    ],
)
def test_node_ready_condition(conditions: list[dict[str, str]], ready: bool) -> None:
    """A node is ready only when its Ready condition has status True."""
    assert node_from_api(node_obj(status={"conditions": conditions})).ready is ready


def test_taint_validation() -> None:
    """Taints need a key and a known effect."""
    problems = problems_of(node_obj(spec={"taints": [{"key": "", "effect": "Sometimes"}]}))
    assert problems == (
        'Node node-a: spec.taints[0].key: must be a non-empty string, got ""',
        "Node node-a: spec.taints[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute, "
        'got "Sometimes"',
    )


# --- other kinds ----------------------------------------------------------------------------


def test_pdb() -> None:
    """PDBs keep their selector and status.disruptionsAllowed (default 0)."""
    pdb = pdb_from_api(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 2, "currentHealthy": 6, "desiredHealthy": 4},
        }
    )
    assert (pdb.namespace, pdb.name) == ("shop", "web")
    assert pdb.selector == LabelSelector((("app", "web"),))
    assert pdb.disruptions_allowed == 2
    bare = pdb_from_api(
        {"kind": "PodDisruptionBudget", "metadata": {"name": "x"}, "spec": {"maxUnavailable": 1}}
    )
    assert (bare.selector, bare.disruptions_allowed) == (None, 0)


def test_priority_class() -> None:
    """PriorityClasses keep value and globalDefault; value is required."""
    pc = priority_class_from_api(
        {"kind": "PriorityClass", "metadata": {"name": "prod-high"}, "value": 100000}
    )
    assert (pc.name, pc.value, pc.global_default) == ("prod-high", 100000, False)
    with pytest.raises(InputError, match="PriorityClass x: value: must be an integer, got null"):
        priority_class_from_api({"kind": "PriorityClass", "metadata": {"name": "x"}})


def test_volumes_and_claims() -> None:
    """PVCs keep their bound volume; PVs their required node affinity."""
    pvc = pvc_from_api(
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-cache-0", "namespace": "data"},
            "spec": {"volumeName": "pv-1"},
        }
    )
    assert (pvc.namespace, pvc.name, pvc.volume_name) == ("data", "data-cache-0", "pv-1")
    pending = pvc_from_api({"kind": "PersistentVolumeClaim", "metadata": {"name": "p"}})
    assert pending.volume_name is None
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-west-1a"]}
    pv = pv_from_api(
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-1"},
            "spec": {
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}}
            },
        }
    )
    assert pv.node_affinity == NodeSelector(
        (
            NodeSelectorTerm(
                (NodeSelectorRequirement("topology.kubernetes.io/zone", "In", ("eu-west-1a",)),)
            ),
        )
    )
    assert (
        pv_from_api({"kind": "PersistentVolume", "metadata": {"name": "nfs"}}).node_affinity is None
    )


def test_service() -> None:
    """Services keep their selector; none is the empty map."""
    svc = service_from_api(
        {
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"app": "web"}},
        }
    )
    assert (svc.namespace, svc.name, svc.selector) == ("shop", "web", {"app": "web"})
    headless = service_from_api({"kind": "Service", "metadata": {"name": "ext"}, "spec": {}})
    assert headless.selector == {}


def test_controllers() -> None:
    """ReplicaSets and StatefulSets keep their selector and owner; RCs have a plain map."""
    rs = controller_from_api(
        {
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-7d9",
                "namespace": "shop",
                "ownerReferences": [
                    {"kind": "Deployment", "name": "web", "uid": "d1", "controller": True}
                ],
            },
            "spec": {"selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d9"}}},
        }
    )
    assert rs.kind == "ReplicaSet"
    assert rs.selector == LabelSelector((("app", "web"), ("pod-template-hash", "7d9")))
    assert rs.owner == OwnerRef("Deployment", "web", "d1")
    rc = controller_from_api(
        {
            "kind": "ReplicationController",
            "metadata": {"name": "old"},
            "spec": {"selector": {"app": "old"}},
        }
    )
    assert (rc.kind, rc.selector) == ("ReplicationController", LabelSelector((("app", "old"),)))
    defaulted = controller_from_api(
        {
            "kind": "ReplicationController",
            "metadata": {"name": "old"},
            "spec": {"template": {"metadata": {"labels": {"app": "tpl"}}}},
        }
    )
    assert defaulted.selector == LabelSelector((("app", "tpl"),))


# --- snapshots ------------------------------------------------------------------------------


def cluster_objects() -> list[dict[str, Any]]:
    return [
        node_obj("node-b"),
        node_obj("node-a"),
        pod_obj("web-2", namespace="shop"),
        pod_obj("web-1", namespace="shop"),
        pod_obj("api-1", namespace="a"),
        {"kind": "PriorityClass", "metadata": {"name": "z"}, "value": 1},
        {"kind": "PriorityClass", "metadata": {"name": "a"}, "value": 2},
        {"kind": "StatefulSet", "metadata": {"name": "b", "namespace": "x"}, "spec": {}},
        {"kind": "ReplicaSet", "metadata": {"name": "b", "namespace": "x"}, "spec": {}},
        {"kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}},
        {"kind": "Event", "metadata": {"name": "e1", "namespace": "shop"}},
        {"kind": "Event", "metadata": {"name": "e2", "namespace": "shop"}},
    ]


def test_snapshot_is_sorted_and_deterministic() -> None:
    """Output tuples are sorted, whatever the input order."""
    objects = cluster_objects()
    snapshot = snapshot_from_objects(objects)
    assert [n.name for n in snapshot.nodes] == ["node-a", "node-b"]
    assert [p.key for p in snapshot.pods] == ["a/api-1", "shop/web-1", "shop/web-2"]
    assert [p.name for p in snapshot.priority_classes] == ["a", "z"]
    assert [(c.kind, c.name) for c in snapshot.controllers] == [
        ("ReplicaSet", "b"),
        ("StatefulSet", "b"),
    ]
    shuffled = objects[:]
    random.Random(7).shuffle(shuffled)
    assert snapshot_from_objects(shuffled) == snapshot


def test_builder_counts_ignored_kinds() -> None:
    """Unused kinds are skipped silently but counted; pages can be added one by one."""
    objects = cluster_objects()
    builder = SnapshotBuilder("live")
    builder.add_all(objects[:5])
    builder.add_all(objects[5:])
    assert builder.ignored == {"Event": 2}
    assert builder.counts["Pod"] == 3
    assert builder.counts["Deployment"] == 1
    assert builder.build() == snapshot_from_objects(objects)


def test_duplicates_and_kindless_items_are_problems() -> None:
    """The same object twice, or an item without kind, is reported."""
    with pytest.raises(InputError) as info:
        snapshot_from_objects(
            [pod_obj(), pod_obj(), {"metadata": {"name": "x"}}, node_obj(), node_obj()]
        )
    assert info.value.problems == (
        "Pod default/web-1: appears more than once",
        "item 2: kind must be a string, got null",
        "Node node-a: appears more than once",
    )


def test_single_owner_reference_forms() -> None:
    """One owner reference: a controller is shared between pods, a non-controller is no owner,
    and a malformed one is still reported with its path."""
    ref = {"kind": "ReplicaSet", "name": "web-7d9", "uid": "rs-9", "controller": True}
    first, second = snapshot_from_objects(
        [pod_obj(name, meta={"ownerReferences": [dict(ref)]}) for name in ("a", "b")]
    ).pods
    assert first.owner == OwnerRef("ReplicaSet", "web-7d9", "rs-9")
    assert second.owner is first.owner
    loose = {**ref, "controller": False}
    assert pod_from_api(pod_obj("c", meta={"ownerReferences": [loose]})).owner is None
    bad = {"kind": "ReplicaSet", "controller": True}
    assert problems_of(pod_obj("web-1", meta={"ownerReferences": [bad]})) == (
        P + "metadata.ownerReferences[0].name: must be a non-empty string, got null",
    )


def test_the_descheduler_annotations_are_read_by_their_exact_keys_whatever_the_value() -> None:
    """descheduler.alpha.kubernetes.io/evict and .../prefer-no-eviction are kept as flags
    when the exact key is present, with any value (the descheduler reads only presence)."""

    def flags(annotations: dict[str, Any]) -> tuple[bool, bool]:
        pod = pod_from_api(pod_obj("web-1", meta={"annotations": annotations}))
        return pod.evict_requested, pod.prefer_no_eviction

    evict = "descheduler.alpha.kubernetes.io/evict"
    prefer = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
    assert flags({evict: ""}) == (True, False)
    assert flags({evict: "false"}) == (True, False)
    assert flags({prefer: "true"}) == (False, True)
    assert flags({evict: "x", prefer: "y"}) == (True, True)
    assert flags({}) == (False, False)
    assert flags({evict + "x": "", "a": evict, "descheduler.alpha.kubernetes.io/Evict": ""}) == (
        False,
        False,
    )


def test_the_deletion_cost_its_mark_and_the_resource_version_are_kept_as_written() -> None:
    """controller.kubernetes.io/pod-deletion-cost and rebalancer/deletion-cost are kept as
    the text written (absent: None), and metadata.resourceVersion as text (absent: "")."""
    cost = "controller.kubernetes.io/pod-deletion-cost"
    mark = "rebalancer/deletion-cost"

    def kept(meta: dict[str, Any]) -> tuple[str | None, str | None, str]:
        pod = pod_from_api(pod_obj("web-1", meta=meta))
        return pod.deletion_cost, pod.cost_mark, pod.resource_version

    assert kept({}) == (None, None, "")
    assert kept({"annotations": {cost: "-7"}, "resourceVersion": "981"}) == ("-7", None, "981")
    assert kept({"annotations": {cost: "x", mark: "3"}}) == ("x", "3", "")
    assert kept({"annotations": {cost + "s": "1", "a": cost}}) == (None, None, "")


def test_annotations_are_checked_and_only_the_mirror_key_marks_a_mirror() -> None:
    """Annotations are not kept, but a bad one is still reported, and only the exact mirror
    key (whatever its value) makes a pod a static pod's mirror."""

    def mirror(annotations: dict[str, Any]) -> bool:
        return pod_from_api(pod_obj("web-1", meta={"annotations": annotations})).mirror

    assert mirror({"kubernetes.io/config.mirror": ""})
    assert not mirror({"kubernetes.io/config.mirror-x": "a", "b": "kubernetes.io/config.mirror"})
    assert not mirror({})
    assert problems_of(pod_obj("web-1", meta={"annotations": {"team": 1}})) == (
        P + "metadata.annotations[team]: must be a string, got 1",
    )
    (problem,) = problems_of(pod_obj("web-1", meta={"annotations": ["x"]}))
    assert problem.startswith(P + "metadata.annotations: ")


def test_equal_string_maps_are_shared_and_bad_ones_still_reported() -> None:
    """Pods with equal labels and nodeSelector share one dict of each; a bad
    (even unhashable) value is reported every time, never cached."""
    spec = {"nodeSelector": {"disk": "ssd"}}
    meta = {"annotations": {"team": "shop"}}
    a, b, c = snapshot_from_objects(
        [
            pod_obj("a", labels={"app": "web", "tier": "1"}, meta=meta, spec=spec),
            pod_obj("b", labels={"app": "web", "tier": "1"}, meta=meta, spec=spec),
            pod_obj("c", labels={"app": "db"}),
        ]
    ).pods
    assert a.labels == {"app": "web", "tier": "1"} and a.labels is b.labels
    assert a.node_selector is b.node_selector
    assert c.labels == {"app": "db"}
    for bad, shown in (({"app": 1}, "1"), ({"app": ["x"]}, '["x"]')):
        builder = SnapshotBuilder()
        builder.add_all([pod_obj("x", labels=bad), pod_obj("y", labels=bad)])
        assert builder.problems == tuple(
            f"Pod default/{name}: metadata.labels[app]: must be a string, got {shown}"
            for name in ("x", "y")
        )


def test_two_snapshots_share_no_state() -> None:
    """Each snapshot's conversion owns its caches: equal fragments are shared within one
    snapshot, never between two built in the same process."""
    ref = {"kind": "ReplicaSet", "name": "web-7d9", "uid": "rs-9", "controller": True}
    tolerations = [{"key": "gpu", "operator": "Exists"}]
    objects = [
        pod_obj(name, meta={"ownerReferences": [dict(ref)]}, spec={"tolerations": tolerations})
        for name in ("a", "b")
    ]
    one = snapshot_from_objects(objects).pods
    two = snapshot_from_objects(objects).pods
    assert one[0].owner is one[1].owner
    assert one[0].labels is one[1].labels
    assert one[0].tolerations is one[1].tolerations
    assert one == two  # equal content...
    assert one[0].owner is not two[0].owner  # ...but nothing carried over
    assert one[0].labels is not two[0].labels
    assert one[0].tolerations is not two[0].tolerations
    # The numbers are the builder's own: the second snapshot starts afresh, as the first did.
    assert [(p.label_set, p.template) for p in one] == [(p.label_set, p.template) for p in two]


def test_template_numbers_follow_content() -> None:
    """Pods with equal labels share a label_set number and pods with equal scheduling
    fragments a template number; any difference gives a different number."""
    zone = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    host = {**zone, "topologyKey": "kubernetes.io/hostname"}
    objects = [
        pod_obj("a", spec={"topologySpreadConstraints": [zone]}),
        pod_obj("b", spec={"topologySpreadConstraints": [zone]}),
        pod_obj("c", spec={"topologySpreadConstraints": [host]}),
        pod_obj("d", spec={"topologySpreadConstraints": [zone], "nodeSelector": {"x": "1"}}),
        pod_obj("e", spec={"topologySpreadConstraints": [zone]}, labels={"app": "db"}),
        pod_obj("f", spec={"tolerations": [{"key": "gpu", "operator": "Exists"}]}),
        pod_obj("g"),
        pod_obj("h"),
    ]
    pods = {p.name: p for p in snapshot_from_objects(objects).pods}
    assert pods["a"].template == pods["b"].template == pods["e"].template
    assert pods["g"].template == pods["h"].template
    templates = {pods[n].template for n in "acdfg"}
    assert len(templates) == 5
    assert pods["a"].label_set == pods["d"].label_set
    assert pods["a"].label_set != pods["e"].label_set
    assert min(p.label_set for p in pods.values()) >= 0


def test_hand_built_pods_share_nothing() -> None:
    """A pod the converter did not build carries NOT_SHARED, and shared_key gives each such
    pod a key of its own."""
    hand = Pod("default", "p", "u", {"app": "web"}, None, 0.0)
    assert hand.label_set == hand.template == NOT_SHARED
    assert {shared_key(hand.template, i) for i in range(3)} == {-1, -2, -3}
    assert shared_key(7, 0) == shared_key(7, 5) == 7


@pytest.mark.parametrize(
    "policy_text",
    [
        "",
        "constraints: [DoNotSchedule, ScheduleAnyway]\n"
        "defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone}]\n",
    ],
)
def test_template_keys_change_no_plan(policy_text: str) -> None:
    """The numbers only let caches share work: the example cluster plans the same with them as
    with every pod's numbers removed (no sharing at all)."""
    snapshot = load_snapshot(ROOT / "examples" / "skewed-cluster.yaml")
    assert len({p.template for p in snapshot.pods}) < len(snapshot.pods)  # sharing happens
    header = "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"
    policy = load_policy(header + policy_text, "policy")
    unshared = replace(
        snapshot,
        pods=tuple(replace(p, label_set=NOT_SHARED, template=NOT_SHARED) for p in snapshot.pods),
    )
    shared_plan = render_plan(plan(snapshot, policy, 2_000_000_000.0), "json")
    unshared_plan = render_plan(plan(unshared, policy, 2_000_000_000.0), "json")
    assert shared_plan == unshared_plan
    assert json.loads(shared_plan)["evictions"]  # the example does need evictions
