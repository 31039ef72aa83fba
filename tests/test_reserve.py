"""Capacity before the eviction (SPEC §5.10), the shell's side: what a reservation is made of
(pure), what the Lease's record keeps of it, which runs reserve at all, what the HTTP layer
lets through, and one wave of the executor against a recording fake of the API: the record
first, then the template and the buffer, the eviction only once a node has room, the buffer
removed after the replacement; and no eviction when no node comes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from rebalancer.cluster.act import reserve
from rebalancer.cluster.act.executor import Executor, ExecutorSettings, poll_waits
from rebalancer.cluster.act.outcome import Outcome
from rebalancer.cluster.act.reservebody import (
    DISRUPTED_TAINT,
    INITIALIZED_LABEL,
    Group,
    buffer_says,
    capacity_buffer,
    free_room,
    groups,
    not_added,
    place,
    pod_template,
)
from rebalancer.cluster.act.reserverecord import (
    CAPACITY_ANNOTATION,
    CapacityRecord,
    Ledger,
    Made,
    parse,
)
from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import RESERVE_NAME, Kube
from rebalancer.core.capacity import CapacityRules, Refused, pin_of, refusal_key
from rebalancer.core.holds import HoldRules, LoopMemory
from rebalancer.core.model import ZONE_KEY, NodeSelectorRequirement
from rebalancer.core.plan import SkipCode
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import NS, api_pod
from tests.fakes import FakeApi, FakeClock, FakeDiscovery, RecordingServer
from tests.test_executor import evict

PIN = pin_of("pb", "zone-c")
"""``karpenter.sh/nodepool=pb``, ``topology.kubernetes.io/zone=zone-c``."""


def reserved(name: str, *, workload: str = "ReplicaSet/web", pin: tuple[Any, ...] = PIN) -> Any:
    """A planned eviction whose replacement waits for a node reserved first."""
    return dataclasses.replace(
        evict(name, workload=workload),
        waits_for="NodePool pb in zone-c",
        capacity="reserve",
        reserve_in=pin,
    )


def victim() -> dict[str, Any]:
    """A pod as re-read, with everything a template must leave out."""
    pod = api_pod("web-1")
    pod["metadata"]["labels"] = {"app": "web", "tier": "front"}
    pod["spec"].update(
        {
            "nodeSelector": {"pool": "yes", "topology.kubernetes.io/zone": "zone-a"},
            "tolerations": [{"key": "pool", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "high",
            "containers": [
                {
                    "name": "app",
                    "image": "web:1",
                    "ports": [{"containerPort": 80}],
                    "env": [{"name": "SECRET", "value": "x"}],
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "64Mi"},
                        "limits": {"memory": "128Mi"},
                        "claims": [{"name": "gpu"}],
                    },
                }
            ],
            "initContainers": [
                {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always"},
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "arch", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": []}}
                    ],
                },
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
            },
        }
    )
    return pod


# -- pure: groups, names, bodies ---------------------------------------------------------------


def test_a_wave_shares_one_reservation_per_workload_and_pin() -> None:
    """Reserved evictions group by workload and pinned labels, in wave order; those that wait
    for no node, or are evicted and awaited, need none."""
    other_pin = pin_of("pb", "zone-b")
    wave = [
        reserved("web-1"),
        evict("plain-1"),  # fits an existing node
        dataclasses.replace(reserved("web-9"), capacity="await"),  # evicted first
        reserved("db-1", workload="ReplicaSet/db"),
        reserved("web-2"),
        reserved("web-3", pin=other_pin),
    ]
    found = [(g.workload, g.pin, [e.name for e in g.evictions]) for g in groups(wave)]
    assert found == [
        (f"{NS}/ReplicaSet/web", PIN, ["web-1", "web-2"]),
        (f"{NS}/ReplicaSet/db", PIN, ["db-1"]),
        (f"{NS}/ReplicaSet/web", other_pin, ["web-3"]),
    ]


def test_names_are_rebalancers_own_and_one_per_run_workload_and_pin() -> None:
    """``rebalancer-reserve-<hash>``, which the HTTP layer lets rebalancer create and delete;
    another run, workload or pin gives another name, the same ones the same."""
    group = Group(f"{NS}/ReplicaSet/web", NS, PIN, (reserved("web-1"),))
    name = group.name("run1")
    assert RESERVE_NAME.match(name), name
    assert name == group.name("run1")
    assert len({name, group.name("run2"), dataclasses.replace(group, pin=()).name("run1")}) == 3
    assert group.where == "NodePool pb in zone-c"
    assert group.selector == (
        f"karpenter.sh/nodepool=pb,topology.kubernetes.io/zone=zone-c,{INITIALIZED_LABEL}=true"
    )


def test_the_template_keeps_only_what_decides_where_the_replacement_fits() -> None:
    """Images and requests and limits (no DRA claim, port, env or volume), the node selector
    with the pin merged over it, tolerations, required node affinity and priority class; no
    spread constraint, no pod (anti-)affinity, no preferred affinity, rebalancer's labels."""
    group = Group(f"{NS}/ReplicaSet/web", NS, PIN, (reserved("web-1"),))
    body = pod_template("rebalancer-reserve-0a", "run1", victim(), PIN, group)
    own = {"app.kubernetes.io/managed-by": "rebalancer", "rebalancer/run": "run1"}
    assert body["metadata"]["labels"] == own
    assert body["metadata"]["namespace"] == NS
    assert body["template"]["metadata"] == {"labels": own}
    assert body["template"]["spec"] == {
        "containers": [
            {
                "name": "app",
                "image": "web:1",
                "resources": {
                    "requests": {"cpu": "500m", "memory": "64Mi"},
                    "limits": {"memory": "128Mi"},
                },
            }
        ],
        "initContainers": [{"name": "proxy", "image": "proxy:1", "restartPolicy": "Always"}],
        "nodeSelector": {
            "pool": "yes",
            "topology.kubernetes.io/zone": "zone-c",  # the pin wins
            "karpenter.sh/nodepool": "pb",
        },
        "tolerations": [{"key": "pool", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        "priorityClassName": "high",
    }


def test_the_buffer_asks_for_the_groups_size_and_is_owned_by_its_template() -> None:
    group = Group(f"{NS}/ReplicaSet/web", NS, PIN, (reserved("web-1"), reserved("web-2")))
    body = capacity_buffer("rebalancer-reserve-0a", "run1", group, "uid-t")
    assert body["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
    assert body["kind"] == "CapacityBuffer"
    assert body["spec"] == {"podTemplateRef": {"name": "rebalancer-reserve-0a"}, "replicas": 2}
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "PodTemplate", "name": "rebalancer-reserve-0a", "uid": "uid-t"}
    ]
    assert "ownerReferences" not in capacity_buffer("n", "run1", group, None)["metadata"]


# -- pure: room on a node -----------------------------------------------------------------------


def node(
    name: str = "n-c",
    *,
    cpu: str = "2",
    pods: str = "10",
    ready: str = "True",
    cordoned: bool = False,
    taints: tuple[str, ...] = (),
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": "pb",
                "topology.kubernetes.io/zone": "zone-c",
                INITIALIZED_LABEL: "true",
            },
        },
        "spec": {
            "unschedulable": cordoned,
            "taints": [{"key": k, "effect": "NoSchedule"} for k in taints],
        },
        "status": {
            "allocatable": {"cpu": cpu, "memory": "4Gi", "pods": pods},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def bound(name: str, cpu: str, *, phase: str = "Running") -> dict[str, Any]:
    pod = api_pod(name, node="n-c")
    pod["spec"]["containers"] = [
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}
    ]
    pod["status"]["phase"] = phase
    return pod


def test_room_is_allocatable_less_the_requests_of_the_pods_bound_there() -> None:
    """Millicores and pod slots left; a finished pod takes none."""
    pods = [bound("a", "500m"), bound("b", "1"), bound("done", "1", phase="Succeeded")]
    free = free_room(node(cpu="2", pods="3"), pods)
    assert free is not None
    assert (free["cpu"], free["pods"]) == (500, 1)
    assert place([free], [{"cpu": 500}])
    assert not place([free], [{"cpu": 600}])
    assert not place([free], [{"cpu": 100}, {"cpu": 100}])  # one pod slot left
    # first fit across nodes, each claim taking its room
    assert place([{"cpu": 500}, {"cpu": 1000}], [{"cpu": 500}, {"cpu": 1000}])
    assert not place([{"cpu": 500}, {"cpu": 1000}], [{"cpu": 600}, {"cpu": 600}])


@pytest.mark.parametrize(
    "changed",
    [{"ready": "False"}, {"ready": "Unknown"}, {"cordoned": True}, {"taints": (DISRUPTED_TAINT,)}],
)
def test_a_node_not_ready_cordoned_or_disrupted_has_no_room(changed: dict[str, Any]) -> None:
    assert free_room(node(), []) is not None
    assert free_room(node(**changed), []) is None


# -- pure: what a refusal says ------------------------------------------------------------------


def test_the_refusal_names_the_pool_the_zone_the_wait_and_what_the_buffer_says() -> None:
    group = Group(f"{NS}/ReplicaSet/web", NS, PIN, (reserved("web-1"),))
    buffer = {
        "status": {
            "conditions": [
                {"type": "ReadyForProvisioning", "status": "True", "message": "resolved"},
                {"type": "Provisioning", "status": "False", "message": "1/1 virtual pods failed"},
            ]
        }
    }
    says = buffer_says(buffer)
    assert says == "Provisioning: 1/1 virtual pods failed"
    assert not_added(group, 600, says) == (
        "NodePool pb added no node in zone-c within 10m: Provisioning: 1/1 virtual pods failed"
    )
    nowhere = dataclasses.replace(group, pin=pin_of("pb", None))
    assert not_added(nowhere, 90, buffer_says(None)) == "NodePool pb added no node within 1m30s"


# -- the Lease's record -------------------------------------------------------------------------


def test_the_record_round_trips_and_leaves_out_what_it_cannot_read() -> None:
    record = CapacityRecord(
        [Made(NS, "rebalancer-reserve-0a", "run1", 10.0)],
        {"k|p": Refused(20.0, "NodePool pb added no node in zone-c within 10m")},
    )
    assert parse({CAPACITY_ANNOTATION: record.dump()}) == record
    messy = {
        "made": [
            {"ns": NS, "name": "rebalancer-reserve-0b", "run": "r", "at": 1},
            {"ns": NS, "name": 3, "run": "r", "at": 1},  # not a name
            {"ns": NS, "name": "x", "run": "r", "at": "soon"},
            "junk",
        ],
        "refused": {"k": {"since": 1.5, "why": "w"}, "bad": {"since": True, "why": "w"}},
    }
    read = parse({CAPACITY_ANNOTATION: json.dumps(messy)})
    assert read.made == [Made(NS, "rebalancer-reserve-0b", "r", 1.0)]
    assert read.refused == {"k": Refused(1.5, "w")}
    for raw in ("{not json", "[1, 2]", 7, "[" * 200 + "]" * 200):
        assert parse({CAPACITY_ANNOTATION: raw}) == CapacityRecord()


class Keeper:
    """The Lease's side of the ledger, recorded; ``fail`` makes the next write raise."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.log = log if log is not None else []
        self.kept: dict[str, str] = {}
        self.fail: Exception | None = None

    def keep(self, key: str, value: str, *, write: bool) -> None:
        if write and self.fail is not None:
            raise self.fail
        self.kept[key] = value
        if write:
            self.log.append(f"record {len(parse(self.kept).made)} made")


def test_the_ledger_writes_before_a_reservation_and_prunes_old_refusals() -> None:
    keeper = Keeper()
    ledger = Ledger(
        keeper, CapacityRecord(refused={"old": Refused(0.0, "w"), "new": Refused(500.0, "w")})
    )
    ledger.made(Made(NS, "rebalancer-reserve-0a", "r", 1.0))
    assert keeper.log == ["record 1 made"]
    keeper.fail = errors.LeaseLost("taken over")
    with pytest.raises(errors.LeaseLost):
        ledger.made(Made(NS, "rebalancer-reserve-0b", "r", 1.0))
    assert [m.name for m in ledger.record.made] == ["rebalancer-reserve-0a"]
    assert ledger.prune(700.0, 600.0) == {"new": Refused(500.0, "w")}


# -- which runs reserve ---------------------------------------------------------------------------


def discovery(status: int, resources: list[str], denied: set[tuple[str, str]]) -> FakeDiscovery:
    """autoscaling.x-k8s.io/v1beta1's discovery and access reviews: all allowed but ``denied``."""
    return FakeDiscovery(
        "/apis/autoscaling.x-k8s.io/v1beta1",
        status,
        resources,
        lambda verb, resource: (verb, resource) not in denied,
    )


@pytest.mark.parametrize(
    ("mode", "status", "resources", "denied", "reserve", "why", "reviews"),
    [
        ("never", 200, ["capacitybuffers"], set(), False, "reserveCapacity: never", 0),
        (
            "auto",
            404,
            [],
            set(),
            False,
            "auto: autoscaling.x-k8s.io/v1beta1 capacitybuffers not served",
            0,
        ),
        (
            "auto",
            200,
            ["capacitybuffers"],
            {("delete", "podtemplates")},
            False,
            "auto: RBAC does not allow delete of podtemplates",
            7,
        ),
        (
            "auto",
            200,
            ["capacitybuffers", "capacitybuffers/status"],
            set(),
            True,
            "auto: autoscaling.x-k8s.io/v1beta1 capacitybuffers served and allowed",
            7,
        ),
    ],
)
def test_a_run_reserves_where_the_policy_the_server_and_rbac_allow_it(  # noqa: PLR0917
    mode: str,
    status: int,
    resources: list[str],
    denied: set[tuple[str, str]],
    reserve: bool,
    why: str,
    reviews: int,
) -> None:
    kube = discovery(status, resources, denied)
    rules = reserve_resolve(kube, mode)
    assert (rules.reserve, rules.why, len(kube.asked)) == (reserve, why, reviews)
    assert all(a[3] == NS for a in kube.asked)


def reserve_resolve(kube: FakeDiscovery, mode: str, *, ask_rbac: bool = True) -> Any:
    return reserve.resolve(kube, mode, NS, ask_rbac=ask_rbac)


def test_a_plan_asks_discovery_only() -> None:
    kube = discovery(200, ["capacitybuffers"], {("create", "capacitybuffers")})
    rules = reserve_resolve(kube, "auto", ask_rbac=False)
    assert rules.reserve and kube.asked == []
    assert rules.why.endswith("(RBAC not asked: GETs only)")


# -- the HTTP layer -------------------------------------------------------------------------------


def test_kube_creates_and_deletes_only_rebalancers_own_reservations() -> None:
    """A POST of a PodTemplate or CapacityBuffer must name one of rebalancer's own; a DELETE
    reaches the wire for those names only, never a pod or another's template or buffer."""
    server = RecordingServer(200, b"{}")
    kube = Kube(server.endpoint, source="test")
    own = "rebalancer-reserve-0a1b2c3d4e"
    assert kube.delete_reservation("capacitybuffers", NS, own) == 200
    assert kube.delete_reservation("podtemplates", NS, own) == 200
    assert kube.create_reservation("podtemplates", NS, {"metadata": {"name": own}})[0] == 200
    buffers = f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{NS}/capacitybuffers"
    for path in (
        f"/api/v1/namespaces/{NS}/pods/web-1",
        f"/api/v1/namespaces/{NS}/podtemplates/theirs",
        f"{buffers}/rebalancer-reserve-NOTHEX",
        f"/api/v1/namespaces/{NS}/capacitybuffers/{own}",  # the wrong group
        f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{NS}/podtemplates/{own}",
    ):
        with pytest.raises(ValueError, match="never sends DELETE"):
            kube.request("DELETE", path)
    for name in ("theirs", None):
        with pytest.raises(ValueError, match="never sends POST"):
            kube.request("POST", buffers, body={"metadata": {"name": name}})
    assert [(m, u) for m, u, _ in server.sent] == [
        ("DELETE", f"{buffers}/{own}"),
        ("DELETE", f"/api/v1/namespaces/{NS}/podtemplates/{own}"),
        ("POST", f"/api/v1/namespaces/{NS}/podtemplates"),
    ]


# -- one wave, against a recording fake of the API -----------------------------------------------


class ReserveWorld(FakeApi):
    """The executor's fake API, with reservations, nodes and their pods; ``log`` orders what
    matters: the record, the creations, the evictions, the deletions. A node of the pin shows
    up (Ready, initialized, with room) after ``node_after`` looks, never when None."""

    def __init__(self, pods: list[dict[str, Any]], node_after: int | None, log: list[str]) -> None:
        super().__init__(pods)
        self.node_after = node_after
        self.log = log
        self.looks = 0
        self.made: dict[tuple[str, str], Mapping[str, Any]] = {}

    def post_eviction(
        self, namespace: str, name: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        self.log.append(f"evict {name}")
        return super().post_eviction(namespace, name, body)

    def create_reservation(
        self, kind: str, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        self.log.append(f"create {kind}")
        self.made[kind, body["metadata"]["name"]] = body
        return 201, {"metadata": {"uid": f"uid-{kind}"}}

    def get_capacity_buffer(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.made.get(("capacitybuffers", name))
        if found is None:
            return None
        status = {"type": "Provisioning", "status": "False", "message": "1/1 virtual pods failed"}
        return {**found, "status": {"conditions": [status]}}

    def delete_reservation(self, kind: str, namespace: str, name: str) -> int:
        self.log.append(f"delete {kind}")
        return 200 if self.made.pop((kind, name), None) is not None else 404

    def list_nodes(self, label_selector: str) -> list[dict[str, Any]]:
        self.looks += 1
        assert label_selector == Group("w", NS, PIN, ()).selector
        if self.node_after is None or self.looks <= self.node_after:
            return []
        if self.looks == self.node_after + 1:
            self.log.append("node ready")
        return [node(cpu="1")]

    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        return [bound("other", "200m")]


def run_wave(world: ReserveWorld, log: list[str], timeout: float = 60.0) -> tuple[Any, ...]:
    """One wave of ``web-1`` (reserved) with reservations as the runner makes them."""
    clock = FakeClock()
    settings = ExecutorSettings(wave_timeout_seconds=timeout)
    refused: dict[str, Refused] = {}
    reservations = reserve.Reservations(
        world,
        Ledger(Keeper(log), CapacityRecord()),
        "run1",
        wall_clock=lambda: 1000.0 + clock.now,
        remember=refused.__setitem__,
    )
    wave = [reserved("web-1")]
    reservations.open(
        wave,
        reserve.Waiting(
            timeout, timeout, clock, clock.sleep, lambda: False, lambda: poll_waits(settings)
        ),
    )
    try:
        results = Executor(
            world,
            settings,
            clock=clock,
            sleep=clock.sleep,
            on_result=reservations.settled,
            gate=reservations.gate,
            on_replaced=reservations.settled,
        ).execute_wave(wave)
    finally:
        reservations.close()
    return results, refused


def test_a_reserved_eviction_is_sent_once_a_node_has_room_and_the_buffer_goes_after() -> None:
    log: list[str] = []
    world = ReserveWorld([api_pod("web-1")], node_after=3, log=log)
    world.pods["web-1"]["spec"]["containers"] = [
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}
    ]
    (result,), refused = run_wave(world, log)
    assert result.outcome is Outcome.EVICTED and result.replacement, result
    assert log == [
        "record 1 made",
        "create podtemplates",
        "create capacitybuffers",
        "node ready",
        "evict web-1",
        "delete capacitybuffers",
        "delete podtemplates",
    ]
    assert world.made == {} and refused == {}


def test_no_node_in_time_sends_nothing_says_why_and_is_remembered() -> None:
    log: list[str] = []
    world = ReserveWorld([api_pod("web-1")], node_after=None, log=log)
    (result,), refused = run_wave(world, log, timeout=30.0)
    assert result.outcome is Outcome.SKIPPED
    assert result.skip is not None and result.skip.code is SkipCode.CAPACITY_NOT_ADDED
    why = "NodePool pb added no node in zone-c within 30s: Provisioning: 1/1 virtual pods failed"
    assert result.skip.detail == why
    assert world.posts() == []
    assert log[-2:] == ["delete capacitybuffers", "delete podtemplates"]
    assert world.made == {}
    key = refusal_key(f"{NS}/ReplicaSet/web", PIN)
    assert refused == {key: Refused(refused[key].since, why)}
    assert refused[key].since >= 1030.0  # when the wave's timeout had passed


# -- a live plan's memory: the Lease's record alone ---------------------------------------------


def test_a_plan_with_the_records_refusal_holds_that_landing_and_names_only_that_hold() -> None:
    """A refusal read from the Lease's record (a live ``plan``, ``run --dry-run``) holds the
    workload's landings in that pool and zone for the back-off, and the plan names the
    back-off among its holds, none of a loop's (no thrash guard, cooldown or deferral: no loop
    remembered anything); without it, or once the back-off is over, the move is planned."""
    from tests.test_nodepools import _packed, _pool  # noqa: PLC0415  # its scenario

    pb = _pool("pb", requirements=(NodeSelectorRequirement(ZONE_KEY, "In", ("zone-b",)),))
    snapshot = _packed(pb)
    rules = HoldRules(
        thrash_guard_seconds=3600.0,
        wait_for_nodes_after_seconds=600.0,
        capacity=CapacityRules(reserve=True, why="served"),
    )
    now = 100_000.0
    unheld = plan(snapshot, Policy(), now, rules=rules, memory=LoopMemory(from_record=True))
    (free,) = unheld.evictions
    assert unheld.holds == ("capacity-not-added",)
    assert (free.capacity, free.reserve_in) == ("reserve", pin_of("pb", "zone-b"))
    why = "NodePool pb added no node in zone-b within 10m"
    key = refusal_key(free.workload_key, free.reserve_in)
    record = LoopMemory(refused={key: Refused(now - 60, why)}, from_record=True)
    held = plan(snapshot, Policy(), now, rules=rules, memory=record)
    assert held.evictions == ()
    assert held.holds == ("capacity-not-added",)
    reasons = {
        s.reason.detail for s in held.skipped if s.reason.code is SkipCode.CAPACITY_NOT_ADDED
    }
    assert reasons == {f"{why} (60s ago; tried again in 540s)"}
    later = plan(snapshot, Policy(), now + 600, rules=rules, memory=record)
    assert [e.name for e in later.evictions] == [free.name]
