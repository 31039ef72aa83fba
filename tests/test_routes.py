"""The named read routes: which one a read starts on, each fallback to the next, each logged
(``read.route``) with its reason; and the routes of a snapshot file. Every read is checked
against the plain JSON read (or the converter given the objects) of the same cluster."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from rebalancer.cluster.api.resources import RESOURCES, RESOURCES_BY_NAME
from rebalancer.cluster.read.reader import (
    Route,
    first_route,
    next_route,
    read_cluster,
)
from rebalancer.cluster.read.snapshot import LoadRoute, dump_objects, load_snapshot_skipping
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.errors import InputError
from tests.fakes import FakeLister
from tests.test_protodecode import ProtoLister, cluster_items
from tests.test_stream import StreamLister

STREAM = Route.STREAM
PAGES = Route.PROTOBUF_PAGES
TYPED = Route.JSON_TYPED


def _page(resource: str, namespace: str | None, limit: int, token: str | None) -> bytes:
    raise AssertionError("never called")  # pragma: no cover


def _stream(resource: str, namespace: str | None) -> Any:
    raise AssertionError("never called")  # pragma: no cover


@pytest.mark.parametrize(
    ("asked", "names", "offered", "route"),
    [
        ("keep", ("nodes", "pods"), "both", Route.JSON),
        ("own builder", ("nodes", "pods"), "both", Route.JSON),
        ("convert", ("nodes",), "both", TYPED),
        ("convert", ("nodes", "pods"), "both", STREAM),
        ("convert", ("nodes", "pods"), "stream", STREAM),
        ("convert", ("nodes", "pods"), "pages", PAGES),
        ("convert", ("nodes", "pods"), "json", TYPED),
    ],
)
def test_the_first_route_follows_what_is_asked_and_offered(
    asked: str, names: tuple[str, ...], offered: str, route: Route
) -> None:
    chosen, why = first_route(
        keep_objects=asked == "keep",
        converter=asked != "own builder",
        resources=[RESOURCES_BY_NAME[n] for n in names],
        list_page_proto=_page if offered in {"both", "pages"} else None,
        list_stream=_stream if offered in {"both", "stream"} else None,
    )
    assert chosen is route and why


def test_the_next_route_after_a_decline() -> None:
    assert next_route(STREAM, _page) is PAGES
    assert next_route(STREAM, None) is TYPED
    assert next_route(PAGES, _page) is TYPED


def routes_logged(**kwargs: Any) -> tuple[Any, list[tuple[str, str]]]:
    """read_cluster(**kwargs) and the (route, reason) of each ``read.route`` it logged."""
    with structlog.testing.capture_logs() as logged:
        result = read_cluster(page_size=7, **kwargs)
    return result, [(e["route"], e["reason"]) for e in logged if e["event"] == "read.route"]


def plain(items: dict[str, list[dict[str, Any]]], **kwargs: Any) -> Any:
    return read_cluster(FakeLister(items), page_size=7, keep_objects=True, **kwargs)


def broken_pod(items: dict[str, list[dict[str, Any]]], at: int) -> None:
    """A pod the converter rejects, at position ``at`` of the pods."""
    broken = copy.deepcopy(items["pods"][at])
    broken["metadata"]["name"] = "broken"
    broken["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    items["pods"].insert(at, broken)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_each_route_taken_reads_what_plain_json_reads(prefetch: int) -> None:
    items = cluster_items()
    expected = plain(items).snapshot
    offers: list[tuple[dict[str, Any], str]] = [
        ({"list_stream": StreamLister(items)}, "protobuf-stream"),
        ({"list_page_proto": ProtoLister(FakeLister(items))}, "protobuf-pages"),
        ({}, "json-typed"),
        ({"keep_objects": True}, "json"),
    ]
    for offer, name in offers:
        result, logged = routes_logged(list_page=FakeLister(items), prefetch=prefetch, **offer)
        assert result.snapshot == expected, name
        assert [r for r, _ in logged] == [name]


@pytest.mark.parametrize("proto", [True, False])
@pytest.mark.parametrize("how", ["json", "cut", "pod"])
def test_a_stream_that_declines_moves_to_the_next_route(how: str, proto: bool) -> None:
    """Answered JSON, cut short, or a pod the decoder does not take: protobuf pages when
    offered, else JSON; logged with the reason."""
    items = cluster_items()
    if how == "pod":
        broken_pod(items, 20)
    stream = StreamLister(items, json=how == "json", cut=how == "cut", size=100)
    offers: dict[str, Any] = {"list_page_proto": ProtoLister(FakeLister(items))} if proto else {}
    result, logged = routes_logged(
        list_page=FakeLister(items), list_stream=stream, skip_invalid=True, **offers
    )
    expected = plain(items, skip_invalid=True)
    assert result.snapshot == expected.snapshot and result.rejected == expected.rejected
    after = "protobuf-pages" if proto else "json-typed"
    assert [r for r, _ in logged] == ["protobuf-stream", after]
    reason = logged[1][1]
    assert reason.startswith("protobuf-stream declined: ")
    wanted = {"json": "application/json", "cut": "ends inside", "pod": "does not take"}[how]
    assert wanted in reason
    assert stream.calls == [("pods", None)]


def test_protobuf_pages_whose_first_page_declines_move_to_json() -> None:
    """A pod the decoder does not take on the first page: no list snapshot to read the page
    from again, so the read moves to json-typed (and names the pod)."""
    items = cluster_items()
    broken_pod(items, 2)
    proto = ProtoLister(FakeLister(items))
    lister = FakeLister(items)
    result, logged = routes_logged(list_page=lister, list_page_proto=proto, skip_invalid=True)
    expected = plain(items, skip_invalid=True)
    assert result.snapshot == expected.snapshot and result.rejected == expected.rejected
    assert [r.name for r in result.rejected] == ["broken"]
    assert logged == [
        ("protobuf-pages", "protobuf pages of the pods are offered"),
        ("json-typed", "protobuf-pages declined: the first page of pods does not decode exactly"),
    ]
    assert proto.calls[0] == ("pods", None)
    pods = [c[3] for c in lister.calls if c[0] == "pods"]
    assert pods[0] is None and len(pods) == 9  # all the pods' pages again, as JSON


def test_a_later_page_that_declines_stays_on_the_route() -> None:
    """Any page but the first is read again as JSON from its list snapshot: one route."""
    items = cluster_items()
    broken_pod(items, 10)
    lister = FakeLister(items)
    result, logged = routes_logged(
        list_page=lister, list_page_proto=ProtoLister(FakeLister(items)), skip_invalid=True
    )
    assert [r for r, _ in logged] == ["protobuf-pages"]
    assert [c[3] for c in lister.calls if c[0] == "pods"] == ["pods-7"]
    assert result.snapshot == plain(items, skip_invalid=True).snapshot


def test_an_expired_list_reads_again_on_the_same_route() -> None:
    """410 Gone: the same route from the start, logged with the reason."""
    items = cluster_items()
    lister = FakeLister(items, expire_once="pods-7")
    result, logged = routes_logged(list_page=lister)
    assert result.snapshot == plain(items).snapshot
    assert [r for r, _ in logged] == ["json-typed", "json-typed"]
    assert logged[1][1].startswith("read again from the start: ")
    assert "410" in logged[1][1]


# --- snapshot files ---------------------------------------------------------------------------


def objects() -> list[dict[str, Any]]:
    items = cluster_items()
    return [
        {"kind": r.kind, "apiVersion": r.api_version, **o}
        for r in RESOURCES
        for o in items.get(r.name, [])
    ]


def load(path: Path) -> tuple[Any, list[tuple[LoadRoute, str]]]:
    told: list[tuple[LoadRoute, str]] = []
    snapshot, _ = load_snapshot_skipping(
        path, skip_invalid=False, on_route=lambda r, w: told.append((r, w))
    )
    return snapshot, told


def test_each_snapshot_route_and_fallback(tmp_path: Path) -> None:
    """Each file a route of its own; the snapshot always the converter's of the objects."""
    objs = objects()
    expected = snapshot_from_objects(objs, "t")
    lines = dump_objects(objs, "json")
    head, *rest = lines.split(b"\n")
    nested = copy.deepcopy(objs[0])
    nested_list = {"kind": "List", "items": [nested]}
    files = {
        # The layout, typed.
        "lines.json": (lines, ["lines-typed"]),
        # The layout broken by a nested List: parsed whole (typed decoding takes no nesting).
        "nested.json": (
            b"\n".join([head, json.dumps(nested_list).encode() + b",", *rest[1:]]),
            ["lines-typed", "lines", "whole-typed", "whole"],
        ),
        # The layout with an item over several lines: read whole, typed.
        "spread.json": (
            b"\n".join([head, json.dumps(objs[0], indent=1).encode() + b",", *rest[1:]]),
            ["lines-typed", "lines", "whole-typed"],
        ),
        # JSON in no layout: whole, typed.
        "indented.json": (
            json.dumps({"kind": "List", "apiVersion": "v1", "items": objs}, indent=2).encode(),
            ["whole-typed"],
        ),
        # JSON the typed decoder does not take (documents in an array): parsed whole.
        "array.json": (
            json.dumps([{"kind": "List", "items": objs}]).encode(),
            ["whole-typed", "whole"],
        ),
        # YAML: parsed whole.
        "list.yaml": (dump_objects(objs, "yaml"), ["whole"]),
    }
    for name, (data, routes) in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        snapshot, told = load(path)
        assert snapshot == expected, name
        assert [str(r) for r, _ in told] == routes, name
        check_reasons(told, name)


def check_reasons(told: list[tuple[LoadRoute, str]], name: str) -> None:
    assert told[0][1], name
    for (before, _), (_, why) in itertools.pairwise(told):
        assert why.startswith(f"{before} declined: "), name


def test_a_line_typed_decoding_does_not_take_is_read_by_the_lines_route(tmp_path: Path) -> None:
    """An item without a kind: typed decoding leaves it to the general path, the lines route
    takes it and the converter names the problem."""
    objs = objects()
    head, *rest = dump_objects(objs, "json").split(b"\n")
    path = tmp_path / "kindless.json"
    path.write_bytes(b"\n".join([head, b'{"metadata":{"name":"x"}},', *rest]))
    told: list[tuple[LoadRoute, str]] = []
    with pytest.raises(InputError, match="kind"):
        load_snapshot_skipping(path, skip_invalid=False, on_route=lambda r, w: told.append((r, w)))
    assert [str(r) for r, _ in told] == ["lines-typed", "lines"]
    check_reasons(told, "kindless.json")


@pytest.mark.parametrize("declined", [False, True])
def test_loop_mode_logs_the_route_of_the_pods_list(declined: bool) -> None:
    """The watch's LIST of pods takes the reader's routes: the stream, or (answered JSON)
    the next route, for good; each logged with the resource."""
    from rebalancer.cluster.read.watch import ClusterWatch  # noqa: PLC0415
    from tests.builders import cluster_items as watch_items  # noqa: PLC0415
    from tests.test_stream import _stream_of  # noqa: PLC0415
    from tests.test_watch import FAST, FakeApi  # noqa: PLC0415

    api = FakeApi(watch_items())
    streams: list[str | None] = []
    with structlog.testing.capture_logs() as logged:
        watch = ClusterWatch(
            api.list_page,
            api.watch_lines,
            settings=FAST,
            seed=1,
            list_stream=_stream_of(api, streams, declined=declined),
        )
        try:
            assert watch.snapshot() == api.expected()
        finally:
            api.close()
            watch.close()
    routes = [
        (e["resource"], e["route"], e["reason"]) for e in logged if e["event"] == "read.route"
    ]
    assert [r[:2] for r in routes] == [("pods", "protobuf-stream")] + (
        [("pods", "json-typed")] if declined else []
    )
    if declined:
        assert routes[1][2] == "protobuf-stream declined: LIST pods: answered application/json"
