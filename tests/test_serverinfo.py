"""The server's version and behaviour-changing feature gates: /version, /metrics, discovery."""

from __future__ import annotations

import json

import pytest

from rebalancer.cluster.api.serverinfo import (
    GATES,
    default_gates,
    gates_from_metrics,
    minor_of,
    read_server_info,
    read_server_minor,
)

# Hand-copied from each release's pkg/features/kube_features.go (default of each gate).
DEFAULTS = {
    32: {"MatchLabelKeysInPodTopologySpreadSelectorMerge": False, "PodLevelResources": False,
         "NodeDeclaredFeatures": False, "GenericWorkload": False,
         "InPlacePodVerticalScaling": False},
    34: {"MatchLabelKeysInPodTopologySpreadSelectorMerge": True, "PodLevelResources": True,
         "NodeDeclaredFeatures": False, "GenericWorkload": False,
         "InPlacePodVerticalScaling": True},
    35: {"MatchLabelKeysInPodTopologySpreadSelectorMerge": True, "PodLevelResources": True,
         "NodeDeclaredFeatures": False, "GenericWorkload": False,
         "InPlacePodVerticalScaling": True},
    36: {"MatchLabelKeysInPodTopologySpreadSelectorMerge": True, "PodLevelResources": True,
         "NodeDeclaredFeatures": True, "GenericWorkload": False,
         "InPlacePodVerticalScaling": True},
    37: {"MatchLabelKeysInPodTopologySpreadSelectorMerge": True, "PodLevelResources": True,
         "NodeDeclaredFeatures": True, "GenericWorkload": False,
         "InPlacePodVerticalScaling": True},
}  # fmt: skip


@pytest.mark.parametrize("minor", sorted(DEFAULTS))
def test_release_defaults(minor: int) -> None:
    assert default_gates(minor) == DEFAULTS[minor]


METRICS = """\
# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="GenericWorkload",stage="BETA"} 1
kubernetes_feature_enabled{name="NodeDeclaredFeatures",stage=""} 1
kubernetes_feature_enabled{name="PodLevelResources",stage="BETA"} 0
kubernetes_feature_enabled{name="SomethingElse",stage="ALPHA"} 1
apiserver_request_total{code="200"} 12
"""  # noqa: E501


def test_metrics_name_the_gates_they_carry() -> None:
    assert gates_from_metrics(METRICS) == {
        "GenericWorkload": True,
        "NodeDeclaredFeatures": True,
        "PodLevelResources": False,
    }


@pytest.mark.parametrize(("minor", "want"), [("37", 37), ("32+", 32), ("", None), ("x", None)])
def test_minor_of(minor: str, want: int | None) -> None:
    assert minor_of({"minor": minor}) == want


def _server(answers: dict[str, tuple[int, bytes]]):  # type: ignore[no-untyped-def]
    asked: list[str] = []

    def get(path: str) -> tuple[int, bytes]:
        asked.append(path)
        if path not in answers:
            raise ConnectionError(path)
        return answers[path]

    return get, asked


VERSION_137 = json.dumps({"major": "1", "minor": "37", "gitVersion": "v1.37.2"}).encode()
GROUP = json.dumps(
    {"versions": [{"groupVersion": "scheduling.k8s.io/v1"},
                  {"groupVersion": "scheduling.k8s.io/v1beta1"}]}
).encode()  # fmt: skip
V1BETA1 = json.dumps({"resources": [{"name": "podgroups"}, {"name": "workloads"}]}).encode()


def test_metrics_override_the_defaults_and_discovery_finds_podgroups() -> None:
    get, asked = _server(
        {
            "/version": (200, VERSION_137),
            "/metrics": (200, METRICS.encode()),
            "/apis/scheduling.k8s.io": (200, GROUP),
            "/apis/scheduling.k8s.io/v1beta1": (200, V1BETA1),
        }
    )
    info = read_server_info(get)
    assert info.data() == {
        "version": "v1.37.2",
        "featureGates": {**DEFAULTS[37], "GenericWorkload": True, "PodLevelResources": False},
        "featureGatesFrom": "metrics",
        "workloadApi": "scheduling.k8s.io/v1beta1",
    }
    assert "/apis/scheduling.k8s.io/v1" not in asked  # v1 serves PriorityClasses only


def test_metrics_forbidden_gives_the_release_defaults() -> None:
    get, _ = _server(
        {
            "/version": (200, json.dumps({"minor": "32", "gitVersion": "v1.32.11"}).encode()),
            "/metrics": (403, b"forbidden"),
            "/apis/scheduling.k8s.io": (200, json.dumps({"versions": []}).encode()),
        }
    )
    info = read_server_info(get)
    assert (info.version, info.minor, info.gates_from) == ("v1.32.11", 32, "defaults")
    assert info.feature_gates == DEFAULTS[32]
    assert info.workload_api is None


def test_no_answer_at_all_is_unknown_not_an_error() -> None:
    get, asked = _server({})
    info = read_server_info(get)
    assert info.data() == {
        "version": None,
        "featureGates": {},
        "featureGatesFrom": "unknown",
        "workloadApi": None,
    }
    assert asked == ["/version", "/metrics", "/apis/scheduling.k8s.io"]
    assert set(GATES) == set(DEFAULTS[37])


@pytest.mark.parametrize("answer", [b"[]", b"null", b"not json", b'"text"'])
def test_answers_that_are_not_json_objects_are_not_known(answer: bytes) -> None:
    """Every answer read as JSON: anything but an object is no answer, never an error."""
    get, asked = _server(
        {
            "/version": (200, answer),
            "/apis/scheduling.k8s.io": (200, answer),
        }
    )
    info = read_server_info(get)
    assert (info.version, info.minor, info.gates_from, info.workload_api) == (
        None,
        None,
        "unknown",
        None,
    )
    get, asked = _server(
        {
            "/apis/scheduling.k8s.io": (200, GROUP),
            "/apis/scheduling.k8s.io/v1beta1": (200, answer),
        }
    )
    assert read_server_info(get).workload_api is None
    assert asked[-1] == "/apis/scheduling.k8s.io/v1beta1"


def test_plan_json_ends_with_the_server_field_and_keeps_the_other_keys_in_order() -> None:
    from rebalancer.cli.render import plan_data, render_plan  # noqa: PLC0415
    from rebalancer.cluster.act.runner import EMPTY_PLAN  # noqa: PLC0415

    server = read_server_info(_server({"/version": (200, VERSION_137)})[0]).data()
    with_server = json.loads(render_plan(EMPTY_PLAN, "json", server=server))
    without = json.loads(render_plan(EMPTY_PLAN, "json"))
    assert list(without) == list(plan_data(EMPTY_PLAN))
    assert list(with_server) == [*without, "server"]
    assert with_server["server"]["version"] == "v1.37.2"
    assert with_server["server"]["featureGatesFrom"] == "defaults"


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ((200, b'{"major": "1", "minor": "37", "gitVersion": "v1.37.2"}'), 37),
        ((200, b'{"major": "1", "minor": "38+", "gitVersion": "v1.38.0-beta.0"}'), 38),
        ((200, b'{"major": "1"}'), None),
        ((403, b'{"kind": "Status"}'), None),
        ((200, b"not json"), None),
        (None, None),  # no answer at all
    ],
)
def test_read_server_minor(answer: tuple[int, bytes] | None, want: int | None) -> None:
    get, asked = _server({} if answer is None else {"/version": answer})
    assert read_server_minor(get) == want
    assert asked == ["/version"]


def test_the_live_reader_stamps_the_server_minor_once() -> None:
    """The planner's per-release rules need the minor: the live reader asks /version on its
    first read only, and every snapshot it returns carries the answer."""
    from rebalancer.cluster.read.live import Connection, LiveSource  # noqa: PLC0415
    from tests.test_invalid import list_page as pages  # noqa: PLC0415

    asked: list[str] = []

    class Response:
        status = 200
        body = b'{"major": "1", "minor": "37", "gitVersion": "v1.37.2"}'

    class Kube:
        list_page = staticmethod(pages)

        @staticmethod
        def list_page_as(
            resource: str, namespace: str | None, limit: int, token: str | None, **_: object
        ) -> tuple[str, bytes]:
            return "application/json", pages(resource, namespace, limit, token)

        @staticmethod
        def list_stream(resource: str, namespace: str | None, **_: object) -> object:
            from rebalancer.cluster.api import errors  # noqa: PLC0415

            raise errors.UnexpectedMediaType("LIST pods: answered application/json")

        @staticmethod
        def request(method: str, path: str, **_: object) -> Response:
            asked.append(f"{method} {path}")
            return Response()

    source = LiveSource(Kube(), Connection(None, None, 5, 60, 120), None)  # type: ignore[arg-type]
    assert source.read().server_minor == 37
    assert source.read().server_minor == 37
    assert asked == ["GET /version"]
