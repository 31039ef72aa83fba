"""The typed decoder (rebalancer.cluster.read.fastdecode) against the general path.

The general path (``parse_objects`` + ``snapshot_from_objects``, orjson and the converter) is
the oracle: for every input the typed path must give an equal Snapshot, or the very same
InputError problems. Inputs: the snapshot files in examples/ and tests/data, bench.gen's small
cluster in both file forms, and hypothesis-generated objects, valid and invalid.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.gen import generate
from rebalancer.cluster.read import fastdecode
from rebalancer.cluster.read.podconvert import Fallback
from rebalancer.cluster.read.slim import slim
from rebalancer.cluster.read.snapshot import (
    dump_objects,
    load_objects,
    load_snapshot,
    parse_objects,
)
from rebalancer.core.convert import SnapshotBuilder, snapshot_from_objects
from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.meta import epoch
from rebalancer.core.errors import InputError
from rebalancer.core.model import Pod, Snapshot, new_pod

ROOT = Path(__file__).resolve().parent.parent


def general(data: bytes, source: str) -> Snapshot | tuple[str, ...]:
    try:
        return snapshot_from_objects(parse_objects(data, source), source=source)
    except InputError as exc:
        return exc.problems


def loaded(path: Path) -> Snapshot | tuple[str, ...]:
    try:
        return load_snapshot(path)
    except InputError as exc:
        return exc.problems


def check_sharing(snapshot: Snapshot) -> None:
    """Equal ``label_set``/``template`` numbers (not compared by ==) mean equal fragments."""
    by_labels: dict[int, Any] = {}
    by_template: dict[int, Any] = {}
    for pod in snapshot.pods:
        assert by_labels.setdefault(pod.label_set, pod.labels) == pod.labels
        fragments = (pod.node_selector, pod.required_affinity, pod.tolerations, pod.constraints)
        assert by_template.setdefault(pod.template, fragments) == fragments


def same(path: Path, typed_expected: bool = True) -> Snapshot | tuple[str, ...]:
    """Load ``path`` both ways; they must agree. Returns the result."""
    data = path.read_bytes()
    expected = general(data, str(path))
    found = loaded(path)
    assert found == expected
    if isinstance(found, Snapshot):
        check_sharing(found)
        if typed_expected and data.lstrip()[:1] == b"{":
            via_list = fastdecode.load_list(data, str(path))
            if not data.startswith(b'{"apiVersion":"v1","items":[\n'):
                assert via_list is not None and via_list.build() == expected
    return found


def json_list(objects: list[dict[str, Any]]) -> bytes:
    # The standard library writes integers of any size (orjson stops at 64 bits).
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}).encode()


def json_lines(objects: list[dict[str, Any]]) -> bytes:
    """The layout of dump_objects(..., "json"), by the standard library."""
    body = ",\n".join(json.dumps(o, separators=(",", ":")) for o in objects)
    head = '{"apiVersion":"v1","items":['
    tail = '],"kind":"List","metadata":{"resourceVersion":""}}'
    return ("\n".join((head, body, tail) if body else (head, tail)) + "\n").encode()


FILES = sorted(
    p
    for p in itertools.chain((ROOT / "examples").rglob("*"), (ROOT / "tests" / "data").rglob("*"))
    if (p.suffix in (".json", ".yaml") and "snapshot" in str(p)) or p.name.startswith("skewed")
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_repository_snapshots_load_the_same(path: Path, tmp_path: Path) -> None:
    objects = load_objects(path)
    for name, data in (
        ("list.json", json_list(objects)),
        ("lines.json", dump_objects(objects, "json")),
        ("slim.json", dump_objects([slim(o) for o in objects], "json")),
    ):
        target = tmp_path / name
        target.write_bytes(data)
        assert isinstance(same(target), Snapshot)


def test_generated_cluster_loads_the_same_in_both_forms(tmp_path: Path) -> None:
    objects = list(generate(60, 1500, 3))
    kubectl = tmp_path / "kubectl.json"
    kubectl.write_bytes(json_list(objects))
    lines = tmp_path / "lines.json"
    lines.write_bytes(dump_objects([slim(o) for o in objects], "json"))
    first = same(kubectl)
    assert isinstance(first, Snapshot) and len(first.pods) == 1500
    assert same(lines) == first


def test_typed_list_lends_its_kind_and_pods_take_the_typed_path(tmp_path: Path) -> None:
    pods = [o for o in generate(4, 40, 5) if o["kind"] == "Pod"]
    for pod in pods:
        del pod["kind"]
    path = tmp_path / "podlist.json"
    path.write_bytes(orjson.dumps({"kind": "PodList", "items": pods}))
    assert isinstance(same(path), Snapshot)
    builder = SnapshotBuilder("x")
    fast = fastdecode.FastBuilder(builder)
    general_calls = []
    original = fast._add_general

    def counting(raw: Any, kind: str | None, listed: bool) -> bool:
        general_calls.append(kind)
        return original(raw, kind, listed)

    fast._add_general = counting  # type: ignore[method-assign]
    for pod in pods:
        assert fast.add_raw(orjson.dumps(pod), "Pod")
    assert general_calls == []  # every pod of the generator takes the typed path
    assert len(builder.build().pods) == len(pods)


def test_pod_fields_are_in_the_order_the_typed_path_builds_them() -> None:
    # The typed path builds Pod positionally; a new field must be added there too.
    assert [f.name for f in dataclasses.fields(Pod)] == [
        "namespace", "name", "uid", "labels", "node_name", "created", "phase", "terminating",
        "priority", "priority_class_name", "owner", "node_selector", "required_affinity",
        "tolerations", "constraints", "requests", "pvc_names", "local_storage", "mirror",
        "grace_period_seconds", "ready", "disruption_target",
        "resource_claims", "evict_requested", "prefer_no_eviction", "deletion_cost", "cost_mark",
        "resource_version", "scheduling_group", "required_features", "do_not_disrupt", "started",
        "label_set", "template",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        b'{"kind":"List","items":[1]}',
        b'{"kind":"List","items":[{"kind":"List","items":[]}]}',
        b'{"kind":"List","items":[{"metadata":{}}]}',
        b'{"kind":"List","items":null}',
        b'{"kind":"List","items":[{"kind":"Pod",]}',
        b'{"apiVersion":"v1","items":[\n{"kind":"Pod"},\n],"kind":"List","metadata":{}}\n',
        b'{"apiVersion":"v1","items":[\n{"kind":"Pod","metadata":{"name":"a"}}\n'
        b'],"kind":"List","metadata":{"resourceVersion":""}}\ntrailing\n',
        b'[{"kind":"Pod","metadata":{"name":"a"}}]',
        b'{"kind":"Pod","metadata":{"name":"a"}}',
    ],
)
def test_odd_documents_give_the_general_answer(text: bytes, tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_bytes(text)
    same(path, typed_expected=False)


# --- hypothesis: pods and their neighbours, valid and not -----------------------------------

names = st.sampled_from(["a", "b", "web-1", "db-0", ""])
label_maps = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["app", "tier", "zone", "hash"]), names, max_size=3),
    st.just({"app": 5}),
)
quantities = st.sampled_from(["100m", "1", "0.5", "1Gi", "512M", "1e3", "-1", "bad", 2, 1.5])
resource_lists = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["cpu", "memory", "hugepages-2Mi"]), quantities, max_size=2),
)
containers = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["main", "side"])},
        optional={
            "resources": st.fixed_dictionaries(
                {}, optional={"requests": resource_lists, "limits": resource_lists}
            ),
            "restartPolicy": st.just("Always"),
            "image": st.just("x"),
            "restartPolicyRules": st.sampled_from(
                [[], [{"action": "RestartAllContainers"}], [{"action": "Restart"}]]
            ),
            "volumeMounts": st.sampled_from(
                [[{"name": "v", "mountPath": "/v"}], [{"name": "v", "bindMountOptions": ["ro"]}]]
            ),
        },
    ),
    max_size=2,
)
selectors = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "matchLabels": label_maps,
            "matchExpressions": st.lists(
                st.fixed_dictionaries(
                    {
                        "key": st.sampled_from(["app", "tier"]),
                        "operator": st.sampled_from(["In", "NotIn", "Exists", "Bogus"]),
                    },
                    optional={"values": st.lists(names, max_size=2)},
                ),
                max_size=2,
            ),
        },
    ),
)
constraints = st.lists(
    st.fixed_dictionaries(
        {
            "maxSkew": st.sampled_from([1, 2, 0, "1"]),
            "topologyKey": st.sampled_from(
                ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
            ),
            "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway", "Maybe"]),
            "labelSelector": selectors,
        },
        optional={
            "matchLabelKeys": st.lists(st.sampled_from(["hash", "tier"]), max_size=2),
            "minDomains": st.sampled_from([None, 1, 3]),
            "nodeTaintsPolicy": st.sampled_from(["Honor", "Ignore"]),
        },
    ),
    max_size=2,
)
tolerations = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(["k", ""]),
            "operator": st.sampled_from(["Equal", "Exists", "Nope"]),
            "value": names,
            "effect": st.sampled_from(["NoSchedule", "NoExecute", ""]),
            "tolerationSeconds": st.just(300),
        },
    ),
    max_size=2,
)
affinity = st.fixed_dictionaries(
    {
        "nodeAffinity": st.fixed_dictionaries(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                    {
                        "nodeSelectorTerms": st.lists(
                            st.fixed_dictionaries(
                                {
                                    "matchExpressions": st.lists(
                                        st.fixed_dictionaries(
                                            {
                                                "key": st.just("zone"),
                                                "operator": st.sampled_from(["In", "Gt"]),
                                                "values": st.lists(names, max_size=2),
                                            }
                                        ),
                                        max_size=2,
                                    )
                                }
                            ),
                            max_size=2,
                        )
                    }
                )
            }
        )
    },
    optional={"podAntiAffinity": st.just({"x": 1})},
)
volumes = st.lists(
    st.one_of(
        st.fixed_dictionaries({"name": names, "emptyDir": st.just({})}),
        st.fixed_dictionaries(
            {"name": names, "persistentVolumeClaim": st.fixed_dictionaries({"claimName": names})}
        ),
        st.fixed_dictionaries({"name": names, "ephemeral": st.just({"volumeClaimTemplate": {}})}),
        st.fixed_dictionaries({"name": names, "projected": st.just({"sources": []})}),
        st.fixed_dictionaries({"name": names, "emptyDir": st.none()}),
    ),
    max_size=3,
)
conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["Ready", "DisruptionTarget", "PodResizePending", "X"]),
            "status": st.sampled_from(["True", "False", "Unknown"]),
        },
        optional={"reason": st.sampled_from(["Infeasible", "Deferred"])},
    ),
    max_size=3,
)
container_statuses = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["main", "side"])},
        optional={
            "resources": st.fixed_dictionaries({}, optional={"requests": resource_lists}),
            "allocatedResources": resource_lists,
            "ready": st.booleans(),
        },
    ),
    max_size=2,
)
timestamps = st.sampled_from(
    [
        None,
        "2024-05-01T12:00:00Z",
        "2024-05-01T12:00:59Z",
        "2024-05-01T12:00:60Z",  # no leap seconds
        "2024-02-30T12:00:07Z",  # the API's shape, not a date
        "1970-01-01T00:00:00Z",  # 0.0
        "2024-05-01T12:00:00.5+02:00",
        "yesterday",
        5,
    ]
)
owner_refs = st.lists(
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["ReplicaSet", "StatefulSet", ""]), "name": names},
        optional={"controller": st.sampled_from([True, False, None]), "uid": names},
    ),
    max_size=2,
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    meta = draw(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["p1", "p2", "p3", ""])},
            optional={
                "namespace": st.sampled_from(["ns", "", None]),
                "uid": st.sampled_from(["u1", None]),
                "labels": label_maps,
                "annotations": st.one_of(
                    label_maps,
                    st.just({"kubernetes.io/config.mirror": "x"}),
                    st.just({"kubectl.kubernetes.io/last-applied-configuration": "{}"}),
                    st.just({"descheduler.alpha.kubernetes.io/evict": ""}),
                    st.just({"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"}),
                    st.just(
                        {
                            "controller.kubernetes.io/pod-deletion-cost": "-3",
                            "rebalancer/deletion-cost": "-3",
                        }
                    ),
                    st.just({"controller.kubernetes.io/pod-deletion-cost": "7"}),
                ),
                "resourceVersion": st.sampled_from(["1", "42", None]),
                "creationTimestamp": timestamps,
                "deletionTimestamp": timestamps,
                "ownerReferences": owner_refs,
                "managedFields": st.just([{"manager": "kubectl"}]),
            },
        )
    )
    spec = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "nodeName": st.sampled_from(["n1", "n2", "", None]),
                "nodeSelector": label_maps,
                "affinity": affinity,
                "tolerations": tolerations,
                "topologySpreadConstraints": constraints,
                "priority": st.sampled_from([None, 0, 1000, 2**70, "high", True]),
                "priorityClassName": st.sampled_from(["prod", None]),
                "terminationGracePeriodSeconds": st.sampled_from([None, 30, 1.5]),
                "containers": containers,
                "initContainers": containers,
                "overhead": resource_lists,
                "resources": st.fixed_dictionaries({}, optional={"requests": resource_lists}),
                "resourceClaims": st.lists(st.fixed_dictionaries({"name": names}), max_size=2),
                "volumes": volumes,
                "hostNetwork": st.booleans(),
                "hostUsers": st.sampled_from([False, True, None]),
                "ephemeralContainers": st.sampled_from(
                    [
                        [],
                        [
                            {
                                "name": "dbg",
                                "volumeMounts": [{"name": "v", "bindMountOptions": ["x"]}],
                            }
                        ],
                    ]
                ),
                "schedulingGroup": st.sampled_from(
                    [
                        None,
                        {},
                        {"podGroupName": "gang-a"},
                        {"podGroupName": ""},
                        {"podGroupName": 5},
                    ]
                ),
            },
        )
    )
    status = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "phase": st.sampled_from(["Running", "Pending", None, 3]),
                "conditions": conditions,
                "containerStatuses": container_statuses,
                "initContainerStatuses": container_statuses,
            },
        )
    )
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta}
    if draw(st.booleans()):
        obj["spec"] = spec
    if draw(st.booleans()):
        obj["status"] = status
    return obj


neighbours = st.sampled_from(
    [
        {"kind": "Event", "metadata": {"name": "e"}, "spec": {"nodeName": 5}},
        {"kind": "ConfigMap", "metadata": {"name": "c"}},
        {"kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}}},
        {"kind": "Node", "metadata": {"name": "n2"}, "status": {"allocatable": {"cpu": "x"}}},
        {"kind": "PriorityClass", "metadata": {"name": "prod"}, "value": 1000},
    ]
)


def _both_forms(objects: list[dict[str, Any]], tmp: Path) -> list[Path]:
    a = tmp / "list.json"
    a.write_bytes(json_list(objects))
    b = tmp / "lines.json"
    b.write_bytes(json_lines(objects))
    return [a, b]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(objects=st.lists(st.one_of(pods(), neighbours), max_size=6))
def test_generated_objects_load_the_same(objects: list[dict[str, Any]], tmp_path: Path) -> None:
    for path in _both_forms(objects, tmp_path):
        same(path)


@settings(max_examples=60, deadline=None)
@given(pod=pods(), copies=st.integers(2, 4))
def test_repeated_fragments_convert_the_same_as_the_first(pod: dict[str, Any], copies: int) -> None:
    """The memo keyed by raw bytes: later pods with the same fragments come out equal."""
    objects = []
    for i in range(copies):
        clone = json.loads(json.dumps(pod))
        clone["metadata"]["name"] = f"p{i}"
        objects.append(clone)
    data = json_list(objects)
    builder = fastdecode.load_list(data, "x")
    assert builder is not None
    try:
        found: Snapshot | tuple[str, ...] = builder.build()
    except InputError as exc:
        found = exc.problems
    assert found == general(data, "x")


def test_error_messages_name_the_path_as_before(tmp_path: Path) -> None:
    objects: list[dict[str, Any]] = [
        {"kind": "Pod", "metadata": {"name": "a", "namespace": "ns"}, "spec": {"priority": "x"}},
        {
            "kind": "Pod",
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "lots"}}}]},
        },
    ]
    for path in _both_forms(objects, tmp_path):
        with pytest.raises(InputError) as info:
            load_snapshot(path)
        assert info.value.problems == (
            'Pod ns/a: spec.priority: must be an integer, got "x"',
            "Pod ns/b: spec.containers[0].resources.requests.cpu: must be a quantity such as "
            '100m, 0.5, 2, 1Gi, 512M or 1e3, got "lots"',
        )


def test_yaml_files_still_take_the_general_path(tmp_path: Path) -> None:
    objects = list(generate(3, 20, 2))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"kind": "List", "items": objects}))
    assert same(path) == general(json_list(objects), str(path))


RESOURCES_REQ = {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"cpu": "1"}}
EVERY_FIELD: dict[str, Any] = {
    "metadata": {
        "name": "web-0",
        "namespace": "shop",
        "uid": "u-1",
        "labels": {"app": "web", "hash": "h1"},
        "annotations": {
            "kubernetes.io/config.mirror": "m",
            "a": "b",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "descheduler.alpha.kubernetes.io/evict": "",
            "descheduler.alpha.kubernetes.io/prefer-no-eviction": "yes",
            "controller.kubernetes.io/pod-deletion-cost": "-2",
            "rebalancer/deletion-cost": "5",
        },
        "resourceVersion": "1234",
        "creationTimestamp": "2024-05-01T12:00:00Z",
        "deletionTimestamp": "2024-05-01T13:00:00Z",
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-1",
                "uid": "r",
                "controller": True,
            },
            {"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": "", "controller": False},
        ],
    },
    "spec": {
        "nodeName": "n1",
        "nodeSelector": {"disk": "ssd"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}],
                            "matchFields": [
                                {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
                            ],
                        }
                    ]
                }
            }
        },
        "tolerations": [
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "gone", "operator": "Equal", "value": "v", "tolerationSeconds": 30},
        ],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}],
                },
                "matchLabelKeys": ["hash"],
                "minDomains": 2,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
            },
            {
                "maxSkew": 3,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
            },
        ],
        "priority": 100,
        "priorityClassName": "prod",
        "terminationGracePeriodSeconds": 10,
        "containers": [{"name": "main", "resources": RESOURCES_REQ}],
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": RESOURCES_REQ},
            {"name": "init", "resources": {"requests": {"cpu": "2"}}},
        ],
        "overhead": {"cpu": "10m"},
        "resources": {"requests": {"memory": "2Gi"}},
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
            {"name": "tmp", "emptyDir": {}},
        ],
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"},
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
        ],
        "containerStatuses": [
            {
                "name": "main",
                "resources": {"requests": {"cpu": "500m"}},
                "allocatedResources": {"cpu": "400m"},
            }
        ],
        "initContainerStatuses": [
            {"name": "side", "resources": {"requests": {"cpu": "300m"}}},
            {"name": "init"},
        ],
    },
}


def test_a_pod_with_every_field_read_takes_the_typed_path() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", **EVERY_FIELD}
    builder = SnapshotBuilder("x")
    fast = fastdecode.FastBuilder(builder)
    fast._add_general = None  # type: ignore[assignment,method-assign]  # must not be called
    assert fast.add_raw(orjson.dumps(pod))
    typed = builder.build()
    assert typed == snapshot_from_objects([pod])
    (converted,) = typed.pods
    assert converted.pvc_names == ("data-web-0", "web-0-scratch")
    assert converted.terminating and converted.mirror and converted.disruption_target


API_TIMES = [
    "2024-05-01T12:00:00Z",
    "2024-05-01T12:00:07Z",
    "2024-05-01T12:00:59Z",
    "2024-05-01T12:59:59Z",
    "2024-12-31T23:59:59Z",
    "2024-02-29T00:00:01Z",
    "1970-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "0001-01-01T00:00:01Z",
    "9999-12-31T23:59:59Z",
    "2023-02-29T00:00:01Z",  # not a leap year
    "2024-05-01T12:00:60Z",
    "2024-05-01T24:00:00Z",
    "2024-05-01T12:60:00Z",
    "2024-13-01T12:00:00Z",
    "2024-05-01T12:00:0\u0661Z",  # a non-ASCII digit
    "2024-05-01t12:00:00Z",
    "2024-05-01T12:00:00z",
    "2024-05-01 12:00:00Z",
    "2024-05-01T12:00:00+02:00",
    "2024-05-01T12:00:00.25Z",
    "2024-05-01T12:00Z",
    "2024-05-01",
    "",
]


@pytest.mark.parametrize("value", API_TIMES)
def test_timestamps_read_as_the_converter_reads_them(value: str) -> None:
    """The typed path reads a timestamp of the API's shape as its minute plus its seconds:
    the converter's number, or its problem (then the pod takes the general path)."""
    problems: list[str] = []
    expected = epoch(Checker("", problems), value, "metadata.creationTimestamp")
    fast = fastdecode.FastBuilder(SnapshotBuilder("t"))
    for _ in range(2):  # converted, then remembered
        if problems:
            with pytest.raises(Fallback):
                fast._epoch(value)
        else:
            assert fast._epoch(value) == expected


@settings(max_examples=300, deadline=None)
@given(moment=st.datetimes(timezones=st.just(UTC)))
def test_every_whole_second_reads_the_same(moment: datetime) -> None:
    value = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"
    assert len(value) == 20
    expected = epoch(Checker("", []), value, "metadata.creationTimestamp")
    assert fastdecode.FastBuilder(SnapshotBuilder("t"))._epoch(value) == expected


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.booleans(), st.integers(), st.text()), max_size=30))
def test_new_pod_builds_what_pod_builds(values: list[Any]) -> None:
    """new_pod (the typed path's constructor) gives the very object Pod(...) gives."""
    size = len(dataclasses.fields(Pod))
    values = (values + [None] * size)[:size]
    built, expected = new_pod(*values), Pod(*values)
    assert type(built) is Pod
    assert built == expected
    assert [getattr(built, f.name) for f in dataclasses.fields(Pod)] == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda text: text + b"not json\n", id="text-after-the-closing-line"),
        pytest.param(lambda text: text.replace(b"\n]", b"\n{]"), id="bad-json-in-a-line"),
        pytest.param(lambda text: text[: text.rindex(b"\n]")] + b"\n", id="no-closing-line"),
    ],
)
def test_lines_that_stray_from_the_layout_give_the_general_answer(
    change: Any, tmp_path: Path
) -> None:
    objects = list(generate(10, 200, 3))
    path = tmp_path / "lines.json"
    path.write_bytes(change(dump_objects(objects, "json")))
    same(path, typed_expected=False)


def test_a_string_that_is_not_utf8_is_bad_input_not_a_crash(tmp_path: Path) -> None:
    """A list item whose kind holds a byte that is not UTF-8: the file is refused as invalid
    JSON (exit 2 from the CLI), as the general path refuses it."""
    path = tmp_path / "bad.json"
    path.write_bytes(
        b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "\x80Node",'
        b' "metadata": {"name": "n"}}]}'
    )
    with pytest.raises(InputError, match="UTF-8"):
        load_snapshot(path)


def test_both_typed_decoders_fill_every_field_of_a_pods_own_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The JSON and the protobuf decoder each set every named field of what a pod holds of its
    own (a field left out would fail when read), and agree on their values, on generated pods
    (terminating, with volumes, PVCs, priorities, annotations)."""
    from rebalancer.cluster.read.podconvert import Own, PodConverter  # noqa: PLC0415
    from rebalancer.cluster.read.protodecode import ProtoBuilder  # noqa: PLC0415
    from tests.protoenc import encode_pod  # noqa: PLC0415

    seen: list[Own] = []
    convert = PodConverter.pod

    def recording(self: PodConverter, key: Any, own: Own) -> Pod:
        seen.append(own)
        return convert(self, key, own)

    monkeypatch.setattr(PodConverter, "pod", recording)
    pods = [o for o in generate(20, 200, 3) if o["kind"] == "Pod"]
    json_builder = fastdecode.FastBuilder(SnapshotBuilder())
    for obj in pods:
        assert json_builder.add_raw(orjson.dumps(obj), "Pod")
    from_json = list(seen)
    seen.clear()
    assert ProtoBuilder(SnapshotBuilder()).convert_items(encode_pod(o) for o in pods) is not None
    from_proto = list(seen)
    assert len(from_json) == len(from_proto) == len(pods)
    fields = Own.__slots__
    assert len(fields) == 24  # with status.startTime
    for a, b in zip(from_json, from_proto, strict=True):
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    with pytest.raises(AttributeError):
        Own().name  # noqa: B018  # an unset field is an error, not a stale value
