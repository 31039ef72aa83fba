"""The server's minor in snapshot files: ``rebalancer snapshot`` writes a ``ServerVersion`` item
first, every load route reads it back, and a plan of the file follows that release's rules (an
empty ``labelSelector: {}`` counts nothing up to 1.37). A file without it plans as before."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog
import yaml

from rebalancer.cli.main import main
from rebalancer.cluster.read.snapshot import LoadRoute, dump_objects, load_snapshot_skipping
from rebalancer.core.convert.serverversion import server_version_item
from rebalancer.core.errors import InputError
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.test_nodepools_live import POOL, Server
from tests.test_version_rules import _spread_pod, _zone_nodes

# By hand (as tests/test_version_rules.py): six pods in zone a with ``labelSelector: {}`` and
# maxSkew 1. Where {} counts (no minor, 1.38) (6, 0, 0) -> (2, 2, 2) takes 4 evictions; where it
# counts nothing (1.37) nothing is skewed.
SIX = [
    *_zone_nodes(),
    *(_spread_pod(f"web-{i}", "node-a", {"app": "web"}, {"labelSelector": {}}) for i in range(6)),
]


def _write(tmp_path: Path, objects: list[dict[str, Any]], layout: str) -> Path:
    path = tmp_path / f"snap.{layout}"
    if layout == "lines":  # what `rebalancer snapshot -o json` writes
        path.write_bytes(dump_objects(objects, "json"))
    elif layout == "yaml":
        path.write_bytes(dump_objects(objects, "yaml"))
    else:  # one compact JSON document, as `kubectl get -o json | jq -c` leaves it
        path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def _load(path: Path) -> tuple[Any, list[LoadRoute]]:
    routes: list[LoadRoute] = []
    snapshot, _ = load_snapshot_skipping(
        path, skip_invalid=False, on_route=lambda r, _: routes.append(r)
    )
    return snapshot, routes


@pytest.mark.parametrize(
    ("layout", "route"),
    [("lines", LoadRoute.LINES_TYPED), ("compact", LoadRoute.WHOLE_TYPED), ("yaml", "whole")],
)
@pytest.mark.parametrize(("minor", "evictions"), [(37, 0), (38, 4), (None, 4)])
def test_the_minor_goes_round_trip_and_the_plan_follows_it(
    tmp_path: Path, layout: str, route: str, minor: int | None, evictions: int
) -> None:
    items = [server_version_item(minor)] if minor is not None else []
    snapshot, routes = _load(_write(tmp_path, [*items, *copy.deepcopy(SIX)], layout))
    assert routes[-1] == route
    assert snapshot.server_minor == minor
    assert len(plan(snapshot, Policy(), now=2e9).evictions) == evictions


def test_the_item_is_the_one_the_format_documents() -> None:
    assert server_version_item(37) == yaml.safe_load(
        "apiVersion: rebalancer/v1alpha1\n"
        "kind: ServerVersion\n"
        "metadata: {name: server}\n"
        'major: "1"\n'
        'minor: "37"\n'
    )


@pytest.mark.parametrize(("minor", "read"), [("37+", 37), ("0", 0), ("1234", 1234)])
def test_a_minor_as_version_answers_it_is_taken(tmp_path: Path, minor: str, read: int) -> None:
    item = {**server_version_item(1), "minor": minor}
    snapshot, _ = _load(_write(tmp_path, [item, *copy.deepcopy(SIX)], "lines"))
    assert snapshot.server_minor == read


MINOR = 'minor must be the minor as GET /version says it ("37")'


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"minor": "thirty-seven"}, f'{MINOR}, got "thirty-seven"'),
        ({"minor": 37}, f"{MINOR}, got 37"),
        ({"minor": "037"}, f'{MINOR}, got "037"'),
        ({"minor": "-1"}, f'{MINOR}, got "-1"'),
        ({"minor": None}, f"{MINOR}, got null"),
        ({"major": "2"}, 'major must be "1", got "2"'),
        ({"apiVersion": "v1"}, 'apiVersion must be rebalancer/v1alpha1, got "v1"'),
    ],
)  # fmt: skip
@pytest.mark.parametrize("layout", ["lines", "yaml"])
def test_a_bad_item_is_refused_naming_the_field_and_value(
    tmp_path: Path, change: dict[str, Any], problem: str, layout: str
) -> None:
    item = {**server_version_item(37), **change}
    with pytest.raises(InputError) as caught:
        _load(_write(tmp_path, [item, *copy.deepcopy(SIX)], layout))
    assert f"  - ServerVersion item: {problem}" in str(caught.value).splitlines()


def test_two_items_are_refused(tmp_path: Path) -> None:
    twice = [server_version_item(37), server_version_item(37), *copy.deepcopy(SIX)]
    with pytest.raises(InputError, match="ServerVersion item: appears more than once"):
        _load(_write(tmp_path, twice, "lines"))


@pytest.fixture
def _logging_back_to_defaults() -> Iterator[None]:
    """``rebalancer snapshot`` configures logging onto the captured stderr, which closes when
    the test ends: later tests must not log there."""
    yield
    structlog.reset_defaults()


class VersionedServer(Server):
    """The fake API server, answering ``GET /version`` as a 1.37 cluster does."""

    class _Version:
        status = 200
        body = json.dumps({"major": "1", "minor": "37", "gitVersion": "v1.37.0"}).encode()

    def request(self, method: str, path: str, **_: Any) -> Any:
        assert (method, path) == ("GET", "/version")
        return self._Version()


@pytest.mark.usefixtures("_logging_back_to_defaults")
@pytest.mark.parametrize(("server", "minor"), [(VersionedServer(), 37), (Server(), None)])
def test_rebalancer_snapshot_writes_the_minor_first(
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
    tmp_path: Path,
    server: Server,
    minor: int | None,
) -> None:
    """`rebalancer snapshot -o json`: the ServerVersion item first when the server says its
    version (none when it does not), the NodePools last; the file loads with both."""
    monkeypatch.setattr("rebalancer.cluster.read.live.connect", lambda _: server)
    assert main(["snapshot", "-o", "json"]) == 0
    written = capsysbinary.readouterr().out
    items = json.loads(written)["items"]
    kinds = [item["kind"] for item in items]
    assert kinds[-1] == "NodePool"
    assert (kinds[0] == "ServerVersion") == (minor is not None)
    assert kinds.count("ServerVersion") == (minor is not None)
    path = tmp_path / "written.json"
    path.write_bytes(written)
    snapshot, _ = _load(path)
    assert snapshot.server_minor == minor
    assert snapshot.node_pools == (POOL,)
