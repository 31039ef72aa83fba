"""The protobuf decoder of pod LIST pages (rebalancer.cluster.read.protodecode) against the JSON
path.

The oracle is the general path (orjson's objects through the converter): for pods encoded as
kube-apiserver encodes them (tests/protoenc.py, written from the Go encoder's rules with the
classes generated from our schema) the decoder must give equal pods, or decline the page
(None: the reader then reads it as JSON). It never gives a different pod, and bytes that are
not a page are declined, never a traceback. The generated code must be what
scripts/gen_proto.py makes of the schema today.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.gen import generate
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.cluster.api.resources import RESOURCES, RESOURCES_BY_NAME
from rebalancer.cluster.read import fastdecode
from rebalancer.cluster.read.encoding import protobuf_pages
from rebalancer.cluster.read.protodecode import (
    MAGIC,
    PROTOBUF,
    ProtoBuilder,
    is_protobuf,
    parse_page,
    status_body,
)
from rebalancer.cluster.read.protodecode import schema_pb2 as pb
from rebalancer.cluster.read.reader import PREFETCH, read_cluster
from rebalancer.cluster.read.watch import ClusterWatch
from rebalancer.core.convert import SnapshotBuilder, snapshot_from_objects
from rebalancer.core.errors import InputError
from rebalancer.core.model import Snapshot
from tests.fakes import FakeLister, RecordingServer
from tests.protoenc import envelope, pod_page
from tests.test_fastdecode import EVERY_FIELD, check_sharing

# --- the generated code ------------------------------------------------------------------------


ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "rebalancer" / "cluster" / "read" / "protodecode"


def test_generated_code_is_what_the_schema_gives_today(tmp_path: Path) -> None:
    """scripts/gen_proto.py (grpcio-tools' protoc, a dev extra) makes the checked-in code."""
    pytest.importorskip(
        "grpc_tools", reason="grpcio-tools is a dev tool: pip install -e '.[dev]' to run this test"
    )
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schema_pb2.py", "schema_pb2.pyi"]
    for path in tmp_path.iterdir():
        assert path.read_bytes() == (SCHEMA_DIR / path.name).read_bytes(), (
            f"{path.name} is stale: run python scripts/gen_proto.py"
        )


# --- pods, both ways ---------------------------------------------------------------------------


def json_pods(objects: list[dict[str, Any]]) -> Snapshot | tuple[str, ...]:
    """The oracle: the objects through orjson and the converter."""
    typed = [dict(o, kind="Pod", apiVersion="v1") for o in orjson.loads(orjson.dumps(objects))]
    try:
        return snapshot_from_objects(typed, source="x")
    except InputError as exc:
        return exc.problems


def proto_pods(objects: list[dict[str, Any]], page_size: int = 1000) -> Snapshot | None:
    """The objects encoded as protobuf pages, decoded; None when a page is declined."""
    builder = SnapshotBuilder("x")
    proto = ProtoBuilder(builder)
    for start in range(0, max(len(objects), 1), page_size):
        page = parse_page(pod_page(objects[start : start + page_size]))
        assert page is not None
        if proto.add_page(page) is None:
            return None
    return builder.build()


def same(objects: list[dict[str, Any]], page_size: int = 1000) -> Snapshot | None:
    """Decoded as protobuf, the pods equal the JSON path's; None when declined."""
    found = proto_pods(objects, page_size)
    if found is not None:
        expected = json_pods(objects)
        assert isinstance(expected, Snapshot), expected
        assert found.pods == expected.pods
        check_sharing(found)
    return found


def test_a_pod_with_every_field_read_decodes_as_json_does() -> None:
    found = same([EVERY_FIELD])
    assert found is not None
    (pod,) = found.pods
    # The fields are not only equal to the oracle's: they are the ones written above.
    assert (pod.namespace, pod.name, pod.uid, pod.node_name) == ("shop", "web-0", "u-1", "n1")
    assert pod.created == 1714564800.0
    assert pod.terminating and pod.mirror and pod.ready and pod.disruption_target
    assert pod.evict_requested and pod.prefer_no_eviction
    assert (pod.deletion_cost, pod.cost_mark, pod.resource_version) == ("-2", "5", "1234")
    assert pod.pvc_names == ("data-web-0", "web-0-scratch") and pod.local_storage
    assert (pod.priority, pod.priority_class_name, pod.grace_period_seconds) == (100, "prod", 10)
    assert pod.owner is not None and pod.owner.name == "web-1"
    assert pod.resource_claims == ("gpu",)
    assert len(pod.constraints) == 2 and len(pod.tolerations) == 2
    assert pod.required_affinity is not None


def test_shared_constraints_with_and_without_match_label_keys_follow_each_pods_labels() -> None:
    """Pods of one workload whose labels differ (kube-apiserver copies the node's zone onto
    each pod it binds) share one constraints fragment: with matchLabelKeys each pod's own
    label values go into its selector, without them the constraints are one and the same."""

    def pod(name: str, zone: str, hash_: str) -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "namespace": "shop",
                "labels": {"app": "web", "hash": hash_, "topology.kubernetes.io/zone": zone},
            },
            "spec": {
                "nodeName": "n1",
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "matchLabelKeys": ["hash"],
                    },
                    {
                        "maxSkew": 2,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    },
                ],
            },
        }

    objects = [
        pod("a", "z1", "h1"),
        pod("b", "z2", "h1"),
        pod("c", "z1", "h2"),
        pod("d", "z3", "h2"),
        pod("e", "z2", "h1"),
    ]
    found = same(objects)
    assert found is not None
    by_name = {p.name: p for p in found.pods}
    keyed = {n: by_name[n].constraints[0].selector for n in by_name}
    # hand-derived: the matchLabelKeys constraint selects by each pod's own hash value
    assert keyed["a"] == keyed["b"] == keyed["e"] != keyed["c"] == keyed["d"]
    assert "h2" in repr(keyed["c"]) and "h1" in repr(keyed["a"])
    plain = {by_name[n].constraints[1] for n in by_name}
    assert len(plain) == 1  # without matchLabelKeys the labels change nothing
    # The JSON decoder keys the same memo by the same label values.
    typed = fastdecode.load_list(orjson.dumps({"kind": "PodList", "items": objects}), "x")
    assert typed is not None and typed.build().pods == found.pods


def test_a_bare_pod_decodes_as_json_does() -> None:
    bare: dict[str, Any] = {"metadata": {"name": "p", "creationTimestamp": None}, "spec": {}}
    found = same([bare])
    assert found is not None
    (pod,) = found.pods
    assert (pod.namespace, pod.phase, pod.created, pod.priority) == (
        "default",
        "Pending",
        0.0,
        None,
    )


def test_a_generated_cluster_decodes_as_json_does_over_several_pages() -> None:
    """bench.gen's pods (whole objects: many workloads sharing fragments) in pages of 97."""
    pods = [o for o in generate(30, 900, 3) if o["kind"] == "Pod"]
    found = same(pods, page_size=97)
    assert found is not None and len(found.pods) == 900
    assert len({p.template for p in found.pods}) < 200  # the workloads' pods share templates


def test_pod_level_resources_and_resize_reasons_count() -> None:
    """Requests differ with the Infeasible reason and the pod-level resources: decoded as JSON."""
    variants = []
    for i, (reason, pod_level) in enumerate(
        [("Infeasible", None), ("Deferred", None), ("Infeasible", {"requests": {"cpu": "3"}})]
    ):
        pod = copy.deepcopy(EVERY_FIELD)
        pod["metadata"]["name"] = f"p{i}"
        pod["status"]["conditions"][2]["reason"] = reason
        if pod_level is None:
            del pod["spec"]["resources"]
        else:
            pod["spec"]["resources"] = pod_level
        variants.append(pod)
    found = same(variants)
    assert found is not None
    assert len({tuple(sorted(p.requests.items())) for p in found.pods}) == 3


# --- declined, never different -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "containers", 0, "resources", "requests", "cpu"), "lots"),
        (("spec", "tolerations", 0, "operator"), "Sometimes"),
        (("spec", "topologySpreadConstraints", 0, "maxSkew"), 0),
        (("spec", "topologySpreadConstraints", 0, "whenUnsatisfiable"), "Maybe"),
        (
            (
                "spec",
                "affinity",
                "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms",
                0,
                "matchExpressions",
                0,
                "operator",
            ),
            "Near",
        ),
        (("spec", "volumes", 0, "persistentVolumeClaim", "claimName"), ""),
        (("metadata", "name"), ""),
    ],
)
def test_a_pod_the_converter_rejects_declines_the_page(path: tuple[Any, ...], value: Any) -> None:
    """The converter names the problem on the JSON path; the protobuf path declines the page."""
    pod = copy.deepcopy(EVERY_FIELD)
    target = pod
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert proto_pods([EVERY_FIELD, pod]) is None
    assert isinstance(json_pods([pod]), tuple)  # the JSON path reports it


def test_a_deletion_time_at_the_epoch_declines_the_page() -> None:
    """An empty Time is the zero time (JSON: null) or 1970-01-01: ambiguous, so declined."""
    pod = copy.deepcopy(EVERY_FIELD)
    pod["metadata"]["deletionTimestamp"] = "1970-01-01T00:00:00Z"
    assert proto_pods([pod]) is None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{}",
        MAGIC,
        MAGIC + b"\xff\xff\xff",
        envelope("PodList", b"\x12\x05\x0a\x03"),  # an item cut short
        envelope("NodeList", b""),
        MAGIC + pb.Unknown(raw=b"", contentEncoding="gzip").SerializeToString(),
    ],
)
def test_bytes_that_are_not_a_pod_page_are_declined(raw: bytes) -> None:
    assert parse_page(raw) is None


def test_invalid_utf8_in_a_string_declines_the_page_or_decodes_as_replaced() -> None:
    page = pb.PodList()
    item = page.items.add()
    item.metadata.name = "p"
    raw = bytearray(envelope("PodList", page.SerializeToString()))
    at = raw.index(b"\x0a\x01p") + 2
    raw[at] = 0xFF  # the name's only byte: not UTF-8
    parsed = parse_page(bytes(raw))
    if parsed is not None:
        assert ProtoBuilder(SnapshotBuilder("x")).convert_items(parsed.items) is None


def test_an_error_answer_in_protobuf_reads_as_its_status() -> None:
    status = pb.Status(
        status="Failure", message="too old resource version", reason="Expired", code=410
    )
    body = status_body(envelope("Status", status.SerializeToString()))
    assert body == {
        "kind": "Status",
        "status": "Failure",
        "message": "too old resource version",
        "reason": "Expired",
        "code": 410,
    }
    assert status_body(b"{}") == {}


# --- hypothesis: pod shapes --------------------------------------------------------------------


def some(elements: st.SearchStrategy[Any], most: int) -> st.SearchStrategy[list[Any]]:
    """Lists of 1 to ``most`` elements (kube-apiserver leaves empty ones out)."""
    return st.one_of(*(st.tuples(*[elements] * n).map(list) for n in range(1, most + 1)))


names = st.sampled_from(["a", "b", "web"])
label_maps = st.dictionaries(
    st.sampled_from(["app", "tier", "hash"]), st.sampled_from(["web", "db", ""]), max_size=3
)
full_maps = some(
    st.tuples(st.sampled_from(["app", "tier", "hash"]), st.sampled_from(["web", "db", ""])), 3
).map(dict)
quantities = st.sampled_from(["100m", "1", "2Gi", "250m", "0", "lots"])
resource_lists = some(
    st.tuples(st.sampled_from(["cpu", "memory", "hugepages-2Mi", "example.com/gpu"]), quantities),
    2,
).map(dict)
requirements = st.fixed_dictionaries(
    {}, optional={"requests": resource_lists, "limits": resource_lists}
)
container = st.fixed_dictionaries(
    {"name": st.sampled_from(["main", "side", "init"]), "resources": requirements},
    optional={
        "restartPolicy": st.just("Always"),
        "restartPolicyRules": st.sampled_from(
            [[{"action": "RestartAllContainers"}], [{"action": "Restart"}]]
        ),
        "volumeMounts": st.sampled_from([[{"bindMountOptions": ["ro"]}], [{"name": "v"}]]),
    },
)
containers = st.one_of(st.just([]), some(container, 2))
expressions = some(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["app", "tier", "zone"]),
            "operator": st.sampled_from(["In", "NotIn", "Exists", "Gt"]),
        },
        optional={"values": st.lists(st.sampled_from(["a", "1", "web"]), min_size=1, max_size=2)},
    ),
    2,
)
selectors = st.fixed_dictionaries(
    {}, optional={"matchLabels": full_maps, "matchExpressions": expressions}
)
constraints = some(
    st.fixed_dictionaries(
        {
            "maxSkew": st.sampled_from([1, 2, 0]),
            "topologyKey": st.sampled_from(
                ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
            ),
            "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
        },
        optional={
            "labelSelector": selectors,
            "matchLabelKeys": st.lists(st.sampled_from(["hash", "tier"]), min_size=1, max_size=2),
            "minDomains": st.sampled_from([1, 3]),
            "nodeAffinityPolicy": st.sampled_from(["Honor", "Ignore"]),
            "nodeTaintsPolicy": st.sampled_from(["Honor", "Ignore"]),
        },
    ),
    2,
)
tolerations = some(
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(["k", "node.kubernetes.io/not-ready"]),
            "operator": st.sampled_from(["Equal", "Exists"]),
            "value": st.sampled_from(["v"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
            "tolerationSeconds": st.sampled_from([0, 300]),
        },
    ),
    2,
)
affinity = st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": st.fixed_dictionaries(
            {},
            optional={
                "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                    {
                        "nodeSelectorTerms": some(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "matchExpressions": expressions,
                                    "matchFields": expressions,
                                },
                            ),
                            2,
                        )
                    }
                )
            },
        )
    },
)
volumes = some(
    st.one_of(
        st.fixed_dictionaries({"name": names, "emptyDir": st.just({})}),
        st.fixed_dictionaries(
            {"name": names, "persistentVolumeClaim": st.fixed_dictionaries({"claimName": names})}
        ),
        st.fixed_dictionaries({"name": names, "ephemeral": st.just({"volumeClaimTemplate": {}})}),
        st.fixed_dictionaries({"name": names, "configMap": st.just({"name": "c"})}),
    ),
    3,
)
statuses = some(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["main", "side", "init"])},
        optional={"resources": requirements, "allocatedResources": resource_lists},
    ),
    2,
)
conditions = some(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["Ready", "DisruptionTarget", "PodResizePending", "X"]),
            "status": st.sampled_from(["True", "False", "Unknown"]),
        },
        optional={"reason": st.sampled_from(["Infeasible", "Deferred"])},
    ),
    3,
)
owners = some(
    st.fixed_dictionaries(
        {
            "apiVersion": st.just("apps/v1"),
            "kind": st.sampled_from(["ReplicaSet", "StatefulSet"]),
            "name": names,
            "uid": st.sampled_from(["u1", "u2"]),
        },
        optional={"controller": st.booleans()},
    ),
    2,
)
times = st.sampled_from(["2024-05-01T12:00:00Z", "2023-01-01T00:00:01Z"])


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    """A pod in the shape kube-apiserver writes it (empty optional fields left out)."""
    meta = draw(
        st.fixed_dictionaries(
            {"name": names, "creationTimestamp": times},
            optional={
                "namespace": st.sampled_from(["ns", "other"]),
                "uid": st.sampled_from(["u1", "u2"]),
                "labels": full_maps,
                "annotations": st.one_of(
                    full_maps,
                    st.just({"kubernetes.io/config.mirror": "x"}),
                    st.just({"kubectl.kubernetes.io/last-applied-configuration": "{}", "a": "b"}),
                    st.just({"descheduler.alpha.kubernetes.io/evict": "", "a": "b"}),
                    st.just(
                        {
                            "descheduler.alpha.kubernetes.io/prefer-no-eviction": "x",
                            "descheduler.alpha.kubernetes.io/evict": "y",
                        }
                    ),
                    st.just(
                        {
                            "controller.kubernetes.io/pod-deletion-cost": "10",
                            "rebalancer/deletion-cost": "10",
                            "a": "b",
                        }
                    ),
                ),
                "resourceVersion": st.sampled_from(["5", "77"]),
                "deletionTimestamp": times,
                "ownerReferences": owners,
            },
        )
    )
    spec = draw(
        st.fixed_dictionaries(
            {"containers": containers},
            optional={
                "nodeName": st.sampled_from(["n1", "n2"]),
                "nodeSelector": full_maps,
                "affinity": affinity,
                "tolerations": tolerations,
                "topologySpreadConstraints": constraints,
                "priority": st.sampled_from([0, 1000, -5, 2**31 - 1]),
                "priorityClassName": st.sampled_from(["prod"]),
                "terminationGracePeriodSeconds": st.sampled_from([0, 30]),
                "initContainers": some(container, 2),
                "overhead": resource_lists,
                "resources": requirements,
                "resourceClaims": some(st.fixed_dictionaries({"name": names}), 2),
                "volumes": volumes,
                "schedulingGroup": st.sampled_from([{"podGroupName": "gang-a"}, {}]),
                "hostNetwork": st.booleans(),
                "hostUsers": st.sampled_from([False, True]),
                "ephemeralContainers": st.just([{"name": "dbg"}]),
            },
        )
    )
    status = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "phase": st.sampled_from(["Running", "Pending", "Succeeded"]),
                "conditions": conditions,
                "containerStatuses": statuses,
                "initContainerStatuses": statuses,
            },
        )
    )
    return {"metadata": meta, "spec": spec, "status": status}


def _unique(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, obj in enumerate(objects):
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{i}"
    return objects


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.lists(pods(), max_size=6), page_size=st.integers(1, 4))
def test_generated_pods_decode_as_json_does_or_are_declined(
    objects: list[dict[str, Any]], page_size: int
) -> None:
    """Decoded pods equal the JSON path's; a declined page is one the JSON path finds a
    problem in, or one with a pod that may need node features (the JSON path infers them),
    or, rarely, one declined for an encoding JSON writes differently."""
    objects = _unique(objects)
    found = same(objects, page_size)
    if found is None:
        assert isinstance(json_pods(objects), tuple) or any(map(_may_need_features, objects))


def _may_need_features(obj: dict[str, Any]) -> bool:
    """Fields kube-scheduler infers node features from (rebalancer.core.convert.features)."""
    spec = obj["spec"]
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    return bool(
        (spec.get("hostNetwork") and "hostUsers" in spec)
        or spec.get("ephemeralContainers")
        or any(c.get("restartPolicyRules") for c in containers)
        or any(m.get("bindMountOptions") for c in containers for m in c.get("volumeMounts") or ())
    )


@settings(max_examples=60, deadline=None)
@given(pod=pods(), copies=st.integers(2, 4))
def test_repeated_fragments_decode_as_the_first(pod: dict[str, Any], copies: int) -> None:
    """The memos keyed by protobuf bytes: later pods with the same fragments come out equal."""
    objects = _unique([copy.deepcopy(pod) for _ in range(copies)])
    found = same(objects)
    if found is not None:
        assert len({p.template for p in found.pods}) == 1


# --- the reader and the client ------------------------------------------------------------------


@dataclass
class ProtoLister:
    """Serves pod pages in protobuf (the rest JSON, as kube-apiserver would for a client
    asking for protobuf of a kind it has no protobuf for... here: for every other resource
    because the reader only asks for pods), recording calls; ``bad`` page numbers are served
    garbled, ``json_only`` answers JSON like a proxy that does not speak protobuf."""

    json: FakeLister
    bad: set[int] = field(default_factory=set)
    json_only: bool = False
    calls: list[tuple[str, str | None]] = field(default_factory=list)

    def __call__(
        self, resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        self.calls.append((resource, token))
        raw = self.json(resource, namespace, limit, token)
        if resource != "pods" or self.json_only:
            return raw
        page = orjson.loads(raw)
        encoded = pod_page(
            page["items"], page["metadata"].get("continue", ""), page["metadata"]["resourceVersion"]
        )
        if len(self.calls) - 1 in self.bad:
            return encoded[: len(encoded) // 2]
        return encoded


def cluster_items() -> dict[str, list[dict[str, Any]]]:
    by_kind = {r.kind: r.name for r in RESOURCES}
    items: dict[str, list[dict[str, Any]]] = {}
    for obj in generate(8, 60, 3):
        resource = by_kind.get(obj["kind"])
        if resource is not None:
            items.setdefault(resource, []).append(obj)
    return items


def _read_both(proto: ProtoLister, lister: FakeLister) -> tuple[Snapshot, Snapshot, int]:
    json_result = read_cluster(FakeLister(lister.items), page_size=7)
    result = read_cluster(lister, page_size=7, list_page_proto=proto)
    return result.snapshot, json_result.snapshot, result.pages


def test_reader_takes_pod_pages_as_protobuf() -> None:
    lister = FakeLister(cluster_items())
    proto = ProtoLister(FakeLister(lister.items))
    found, expected, _ = _read_both(proto, lister)
    assert found == expected and len(found.pods) == 60
    assert {r for r, _ in proto.calls} == {"pods"}  # the other resources: JSON
    assert not [c for c in lister.calls if c[0] == "pods"]  # no pod page read as JSON


def test_a_garbled_page_is_read_again_as_json_with_its_token() -> None:
    lister = FakeLister(cluster_items())
    proto = ProtoLister(FakeLister(lister.items), bad={3})
    found, expected, _ = _read_both(proto, lister)
    assert found == expected
    assert [c[3] for c in lister.calls if c[0] == "pods"] == [proto.calls[3][1]]


def test_a_page_the_decoder_declines_is_read_again_as_json() -> None:
    """A pod the converter rejects: its page again as JSON, where the reader names it."""
    items = cluster_items()
    broken = copy.deepcopy(items["pods"][10])
    broken["metadata"]["name"] = "broken"
    broken["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    items["pods"].insert(10, broken)
    lister = FakeLister(items)
    proto = ProtoLister(FakeLister(items))
    result = read_cluster(lister, page_size=7, list_page_proto=proto, skip_invalid=True)
    expected = read_cluster(FakeLister(items), page_size=7, skip_invalid=True)
    assert result.snapshot == expected.snapshot and result.rejected == expected.rejected
    assert [c[3] for c in lister.calls if c[0] == "pods"] == ["pods-7"]


def test_a_garbled_first_page_is_read_again_as_json_and_the_rest_as_protobuf() -> None:
    lister = FakeLister(cluster_items())
    proto = ProtoLister(FakeLister(lister.items), bad={0})
    found, expected, _ = _read_both(proto, lister)
    assert found == expected
    assert [c[3] for c in lister.calls if c[0] == "pods"] == [None]
    assert len(proto.calls) == 9


def test_a_declined_first_page_reads_everything_again_as_json() -> None:
    """No list snapshot to read the first page again from: the whole read again, in JSON."""
    items = cluster_items()
    broken = copy.deepcopy(items["pods"][0])
    broken["metadata"]["name"] = "broken"
    broken["spec"]["tolerations"] = [{"operator": "Sometimes"}]
    items["pods"].insert(0, broken)
    lister = FakeLister(items)
    proto = ProtoLister(FakeLister(items))
    result = read_cluster(lister, page_size=7, list_page_proto=proto, skip_invalid=True)
    expected = read_cluster(FakeLister(items), page_size=7, skip_invalid=True)
    assert result.snapshot == expected.snapshot and result.rejected == expected.rejected
    # the first page, and what was prefetched meanwhile: PageFetcher's contract is PREFETCH pages
    # queued that the consumer has not taken, plus the one it is fetching
    assert len(proto.calls) <= 1 + PREFETCH + 1
    assert [c[0] for c in lister.calls if c[3] is None].count("nodes") == 2  # read twice
    assert next(c[3] for c in lister.calls if c[0] == "pods") is None


def test_a_server_answering_json_to_a_protobuf_request_still_works() -> None:
    lister = FakeLister(cluster_items())
    proto = ProtoLister(FakeLister(lister.items), json_only=True)
    found, expected, _ = _read_both(proto, lister)
    assert found == expected


def test_kept_objects_are_read_as_json() -> None:
    lister = FakeLister(cluster_items())
    proto = ProtoLister(FakeLister(lister.items))
    result = read_cluster(lister, page_size=7, keep_objects=True, list_page_proto=proto)
    assert not proto.calls and result.objects is not None


def _pages(server: RecordingServer) -> Callable[[str, str | None, int, str | None], bytes]:
    return protobuf_pages(Kube(server.endpoint, source="t"))


def test_kube_asks_for_protobuf_and_checks_the_content_type() -> None:
    page = pod_page([EVERY_FIELD])
    api = RecordingServer(200, page, PROTOBUF)
    assert _pages(api)("pods", None, 5, None) == page
    assert api.headers[0]["Accept"] == "application/vnd.kubernetes.protobuf, application/json"
    json_page = b'{"kind":"PodList","items":[]}'
    assert (
        _pages(RecordingServer(200, json_page, "application/json"))("pods", None, 5, None)
        == json_page
    )
    protobuf_answering_json = RecordingServer(200, json_page, PROTOBUF)
    with pytest.raises(errors.ClusterError, match="Content-Type"):
        _pages(protobuf_answering_json)("pods", None, 5, None)
    json_answering_protobuf = RecordingServer(200, page, "application/json")
    with pytest.raises(errors.ClusterError, match="Content-Type"):
        _pages(json_answering_protobuf)("pods", None, 5, None)


def test_kube_reads_a_protobuf_error_answer() -> None:
    status = pb.Status(message="too old", reason="Expired", code=410)
    api = RecordingServer(410, envelope("Status", status.SerializeToString()), PROTOBUF)
    with pytest.raises(errors.Gone, match="too old"):
        _pages(api)("pods", None, 5, "tok")


def test_is_protobuf_is_the_magic() -> None:
    assert is_protobuf(pod_page([])) and not is_protobuf(b'{"kind":"PodList"}')
    assert RESOURCES_BY_NAME["pods"].kind == "Pod"


# --- loop mode: the watch's LIST ----------------------------------------------------------------


def _proto_transport(api: Any, calls: list[str | None], decline: bool = False) -> Any:
    """The fake's pod LIST pages in protobuf (``decline``: with a pod the converter rejects)."""

    def list_page_proto(
        resource: str, namespace: str | None, limit: int, token: str | None
    ) -> bytes:
        raw = api.list_page(resource, namespace, limit, token)
        if resource != "pods":
            return bytes(raw)
        calls.append(token)
        page = orjson.loads(raw)
        items = page["items"]
        if decline:
            items = [*items, dict(items[0], metadata={"name": "zz-bad"}, spec={"priority": 0,
                     "tolerations": [{"operator": "Sometimes"}]})]  # fmt: skip
        meta = page["metadata"]
        return pod_page(items, meta.get("continue", ""), meta["resourceVersion"])

    return list_page_proto


def test_loop_mode_lists_pods_as_protobuf_and_then_follows_json_events() -> None:
    from tests.builders import cluster_items as watch_items  # noqa: PLC0415
    from tests.test_watch import FAST, FakeApi, _pod, eventually, settled  # noqa: PLC0415

    api = FakeApi(watch_items())
    calls: list[str | None] = []
    watch = ClusterWatch(
        api.list_page,
        api.watch_lines,
        settings=FAST,
        seed=1,
        list_page_proto=_proto_transport(api, calls),
    )
    try:
        assert watch.snapshot() == api.expected()
        assert calls[0] is None and calls[1:] == ["3", "6"]  # the pods' LIST as protobuf
        api.put("pods", _pod("web-new", "node-c1"))
        eventually(lambda: settled(watch, api))
        assert "web-new" in {p.name for p in watch.snapshot().pods}
    finally:
        api.close()
        watch.close()


def test_loop_mode_reads_a_declined_first_page_again_as_json() -> None:
    from tests.builders import cluster_items as watch_items  # noqa: PLC0415
    from tests.test_watch import FAST, FakeApi  # noqa: PLC0415

    api = FakeApi(watch_items())
    calls: list[str | None] = []
    watch = ClusterWatch(
        api.list_page,
        api.watch_lines,
        settings=FAST,
        seed=1,
        list_page_proto=_proto_transport(api, calls, decline=True),
    )
    try:
        # The JSON read has no such pod: the protobuf page was declined, not taken.
        assert watch.snapshot() == api.expected()
        assert calls[0] is None
    finally:
        api.close()
        watch.close()
