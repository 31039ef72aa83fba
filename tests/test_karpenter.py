"""Beside Karpenter: a node it is disrupting is neither a target nor a source of victims, a pod
it is told not to disrupt is not evicted (rebalancer.core.karpenter.marks). Expectations are worked
out by hand from the cluster each test draws."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rebalancer.cluster.act.executor import node_problem, pod_problem
from rebalancer.cluster.act.steering import MAX_WRITER_LOOKUPS, name_writers
from rebalancer.cluster.read import fastdecode
from rebalancer.cluster.read.snapshot import load_snapshot
from rebalancer.core.karpenter.marks import do_not_disrupt, field_writers, node_disrupted
from rebalancer.core.model import (
    LabelSelector,
    PodDisruptionBudget,
    Snapshot,
    Taint,
    Toleration,
)
from rebalancer.core.plan import Eviction
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from rebalancer.core.spread import analyze
from rebalancer.core.steer import Steering, SteerReason, SteerSkip, steer
from tests.builders import NS, api_node, api_pod, list_node, list_pod, node, pod, zone_constraint

NOW = 100_000.0
DISRUPTED = Taint("karpenter.sh/disrupted", "", "NoSchedule")
EVERYTHING = (Toleration(operator="Exists"),)  # tolerates every taint


@pytest.mark.parametrize(
    ("value", "protects"),
    [
        (None, False),
        ("true", True),
        ("True", False),  # Karpenter compares with "true" exactly
        ("false", False),
        ("", False),
        ("5m", True),
        ("1h30m", True),
        ("0", False),  # a duration must be positive
        ("0s", False),
        ("-5m", False),
        ("soon", False),
        ("5", False),  # a Go duration needs its unit
        ("+90s", True),
        (".5h", True),
        ("1.5h", True),
        ("5m0s", True),
        ("0h0m", False),
        ("1h-5m", False),
        ("5 m", False),
        ("5d", False),  # no days in Go
        ("+", False),
    ],
)
def test_do_not_disrupt_values(value: str | None, protects: bool) -> None:
    assert do_not_disrupt(value) is protects


def test_node_disrupted_by_the_taint_key_only() -> None:
    assert node_disrupted(node("n1", "a", taints=[DISRUPTED]))
    assert node_disrupted(
        node("n1", "a", taints=[Taint("karpenter.sh/disrupted", "x", "NoExecute")])
    )
    assert not node_disrupted(
        node("n1", "a", taints=[Taint("karpenter.sh/unregistered", "", "NoExecute")])
    )
    assert not node_disrupted(node("n1", "a"))


COST = "controller.kubernetes.io/pod-deletion-cost"


def _entry(manager: str, *annotations: str, fields_type: str = "FieldsV1") -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": "Update",
        "fieldsType": fields_type,
        "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{a}": {} for a in annotations}}},
    }


def test_field_writers_names_the_managers_of_the_annotation() -> None:
    managed = [
        _entry("kube-controller-manager"),  # owns no annotation
        {"manager": "kubectl", "fieldsV1": {"f:spec": {}}},
        _entry("karpenter", COST, "karpenter.sh/other"),
        _entry("rebalancer", COST, "rebalancer/deletion-cost"),
        _entry("karpenter", COST),  # the same manager twice (an Apply and an Update)
        _entry("kruise-manager", COST, fields_type="FieldsV2"),  # a format it cannot read
        "not an entry",
        {"fieldsV1": {"f:metadata": {"f:annotations": {f"f:{COST}": {}}}}},
    ]
    assert field_writers(managed, COST) == ("karpenter", "rebalancer", "(no manager name)")
    assert field_writers(managed, "rebalancer/deletion-cost") == ("rebalancer",)
    assert field_writers([], COST) == ()


# --- the planner ------------------------------------------------------------------------------
#
# Three zones, one node each, one Deployment (zone maxSkew 1) whose pods tolerate every taint, so
# the NoSchedule taint alone would not keep a replacement away from a disrupted node.


def _cluster(
    counts: tuple[int, int, int],
    disrupted: str | None = None,
    protected: frozenset[str] = frozenset(),
) -> Snapshot:
    c = zone_constraint("web")
    nodes = [
        node(f"n-{z}", f"zone-{z}", taints=[DISRUPTED] if z == disrupted else [])
        for z in ("a", "b", "c")
    ]
    pods = [
        pod(
            f"web-{z}-{k}",
            f"n-{z}",
            constraints=[c],
            created=1000 + k,
            tolerations=EVERYTHING,
            do_not_disrupt=f"web-{z}-{k}" in protected,
        )
        for z, count in zip("abc", counts, strict=True)
        for k in range(count)
    ]
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods))


def _moves(snapshot: Snapshot) -> list[tuple[str, str | None]]:
    result = plan(snapshot, Policy(), NOW)
    return [(e.name, e.target_node) for e in result.evictions]


def _skips(snapshot: Snapshot) -> dict[str, str]:
    return {s.name: str(s.reason.code) for s in plan(snapshot, Policy(), NOW).skipped}


def test_a_disrupted_node_is_never_a_target() -> None:
    # a:3 b:1 c:1, skew 2: one pod leaves zone a. Zones b and c tie at 1; b's node comes first
    # by name, so without Karpenter the replacement lands on n-b.
    before = _moves(_cluster((3, 1, 1)))
    assert len(before) == 1 and before[0][1] == "n-b"
    # n-b is being disrupted: the replacement goes to n-c, the only other node of the minimum.
    after = _moves(_cluster((3, 1, 1), disrupted="b"))
    assert len(after) == 1 and after[0][1] == "n-c"


def test_pods_of_a_disrupted_node_are_not_victims() -> None:
    # a:1 b:3 c:1: the excess is on n-b; with n-b disrupted its pods are skipped, nothing moves.
    assert len(_moves(_cluster((1, 3, 1)))) == 1
    disrupted = _cluster((1, 3, 1), disrupted="b")
    assert _moves(disrupted) == []
    skips = _skips(disrupted)
    assert {name: code for name, code in skips.items() if name.startswith("web-b")} == {
        "web-b-0": "node-disrupted",
        "web-b-1": "node-disrupted",
        "web-b-2": "node-disrupted",
    }


def test_do_not_disrupt_pods_are_not_evicted() -> None:
    # a:3 b:1 c:1 moves one pod of zone a; protect two of them and the third one moves.
    moves = _moves(_cluster((3, 1, 1), protected=frozenset({"web-a-1", "web-a-2"})))
    assert [name for name, _ in moves] == ["web-a-0"]
    # All three protected: nothing moves and each says why.
    everyone = _cluster((3, 1, 1), protected=frozenset({"web-a-0", "web-a-1", "web-a-2"}))
    assert _moves(everyone) == []
    skips = _skips(everyone)
    assert [skips.get(f"web-a-{k}") for k in range(3)] == ["do-not-disrupt"] * 3


def test_without_karpenter_marks_nothing_changes() -> None:
    # A taint or annotation of another name moves nothing out of the plan.
    snapshot = _cluster((3, 1, 1))
    other = Taint("karpenter.sh/unregistered", "", "NoSchedule")
    tainted = Snapshot(
        nodes=tuple(
            node(n.name, n.labels["topology.kubernetes.io/zone"], taints=[other])
            for n in snapshot.nodes
        ),
        pods=snapshot.pods,
    )
    assert _moves(tainted) == _moves(snapshot)


# --- reading the annotation: the general path and the typed one agree ------------------------


@pytest.mark.parametrize(("value", "protects"), [("true", True), ("10m", True), ("false", False)])
def test_the_annotation_is_read_on_every_path(tmp_path: Path, value: str, protects: bool) -> None:
    marked = list_pod("web-0", "n1")
    marked["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": value}
    objects = [
        {"kind": "Node", "apiVersion": "v1", **list_node("n1", "zone-a")},
        {"kind": "Pod", "apiVersion": "v1", **marked},
        {"kind": "Pod", "apiVersion": "v1", **list_pod("web-1", "n1")},
    ]
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}).encode()
    path = tmp_path / "snap.json"
    path.write_bytes(data)
    loaded = load_snapshot(path)
    assert {p.name: p.do_not_disrupt for p in loaded.pods} == {"web-0": protects, "web-1": False}
    typed = fastdecode.load_list(data, str(path))
    assert typed is not None
    assert typed.build() == loaded


# --- steering beside another writer of pod-deletion-cost ------------------------------------
#
# Zones a:3 b:1 (maxSkew 1), a ReplicaSet's pods: steering orders them and writes costs, unless
# another writer owns one of them.


def _steer_cluster(**costs: tuple[str | None, str | None]) -> Snapshot:
    c = zone_constraint("web")
    nodes = (node("n-a", "zone-a"), node("n-b", "zone-b"))
    pods = []
    for k, on in enumerate(["n-a", "n-a", "n-a", "n-b"]):
        name = f"web-{k}"
        cost, mark = costs.get(name, (None, None))
        pods.append(
            pod(
                name,
                on,
                constraints=[c],
                created=1000 + k,
                resource_version=str(10 + k),
                deletion_cost=cost,
                cost_mark=mark,
            )
        )
    return Snapshot(nodes=nodes, pods=tuple(pods))


def _steering(snapshot: Snapshot) -> Steering:
    policy = Policy(steer_scale_down=True)
    return steer(snapshot, policy, analyze(snapshot, policy))


def test_steering_writes_where_no_other_writer_is_seen() -> None:
    result = _steering(_steer_cluster())
    assert result.skipped == () and len(result.changes) == 4


@pytest.mark.parametrize(
    ("costs", "named"),
    [
        ({"web-2": ("7", None)}, "default/web-2"),  # a cost without rebalancer's mark
        ({"web-1": ("7", "-3"), "web-2": ("5", None)}, "default/web-1"),  # cost and mark differ
        ({"web-3": (None, "-1")}, "default/web-3"),  # rebalancer's cost removed by someone
    ],
)
def test_a_foreign_cost_leaves_the_workload_alone_and_names_a_pod(
    costs: dict[str, tuple[str | None, str | None]], named: str
) -> None:
    result = _steering(_steer_cluster(**costs))
    assert result.changes == ()
    assert [(s.reason, s.pods, s.pod) for s in result.skipped] == [
        (SteerReason.FOREIGN_COST, 4, named)
    ]


def test_rebalancers_own_costs_are_not_foreign() -> None:
    # Every pod carries the cost rebalancer wrote (cost == mark): nothing is skipped.
    own = {f"web-{k}": (str(k - 4), str(k - 4)) for k in range(4)}
    assert _steering(_steer_cluster(**own)).skipped == ()


def _managed(*managers: str) -> list[dict[str, Any]]:
    return [_entry(m, COST) for m in managers]


def test_name_writers_reads_the_named_pod_and_leaves_rebalancer_out() -> None:
    steering = _steering(_steer_cluster(**{"web-2": ("7", None)}))
    reads: list[tuple[str, str]] = []
    pods = {
        ("default", "web-2"): {
            "metadata": {"managedFields": _managed("rebalancer", "karpenter", "kruise-manager")}
        }
    }

    def get_pod(namespace: str, name: str) -> dict[str, Any] | None:
        reads.append((namespace, name))
        return pods.get((namespace, name))

    named = name_writers(get_pod, steering)
    assert reads == [("default", "web-2")]
    assert [s.writers for s in named.skipped] == [("karpenter", "kruise-manager")]
    assert (
        str(named.skipped[0])
        == "foreign-cost (default/web-2, written by karpenter, kruise-manager)"
    )
    # The pod gone, or only rebalancer's entry: the skip stays unnamed.
    assert name_writers(lambda ns, n: None, steering).skipped == steering.skipped
    only_ours = {"metadata": {"managedFields": _managed("rebalancer")}}
    assert name_writers(lambda ns, n: only_ours, steering).skipped == steering.skipped
    odd = {"metadata": {"managedFields": "not a list"}}
    assert name_writers(lambda ns, n: odd, steering).skipped == steering.skipped


def test_name_writers_reads_a_bounded_number_of_pods() -> None:
    skips = tuple(
        SteerSkip(f"default/rs-{k}", SteerReason.FOREIGN_COST, 2, f"default/p-{k}")
        for k in range(MAX_WRITER_LOOKUPS + 5)
    )
    steering = Steering(True, (), skips)
    reads: list[str] = []

    def get_pod(namespace: str, name: str) -> dict[str, Any] | None:
        reads.append(name)
        return {"metadata": {"managedFields": _managed("karpenter")}}

    named = name_writers(get_pod, steering)
    assert len(reads) == MAX_WRITER_LOOKUPS
    assert [bool(s.writers) for s in named.skipped] == [True] * MAX_WRITER_LOOKUPS + [False] * 5


# --- the executor's re-read just before an eviction ------------------------------------------


def _eviction() -> Eviction:
    return Eviction(
        namespace=NS,
        name="web-0",
        uid="uid-web-0",
        node="n1",
        priority=0,
        reason="r",
        wave=0,
        workload="ReplicaSet/web",
        domain="zone-a",
        topology_key="topology.kubernetes.io/zone",
        target_node="n2",
        grace_period_seconds=None,
    )


def test_a_node_disrupted_since_the_plan_holds_its_pods() -> None:
    problem = node_problem(api_node("n1", taints=["karpenter.sh/disrupted"]), "n1")
    assert problem is not None and problem.code == "node-disrupted"
    assert node_problem(api_node("n1", taints=["karpenter.sh/unregistered"]), "n1") is None


@pytest.mark.parametrize(
    ("annotations", "code"),
    [
        ({"karpenter.sh/do-not-disrupt": "true"}, "do-not-disrupt"),
        ({"karpenter.sh/do-not-disrupt": "30m"}, "do-not-disrupt"),
        ({"karpenter.sh/do-not-disrupt": "false"}, None),
        ({"karpenter.sh/do-not-disrupt": 1}, None),  # not a string: not Karpenter's
        ({}, None),
        ("not a map", None),
    ],
)
def test_a_pod_annotated_since_the_plan_is_held(annotations: object, code: str | None) -> None:
    found = api_pod("web-0")
    found["metadata"]["annotations"] = annotations
    problem = pod_problem(found, _eviction(), None)
    assert (problem.code if problem else None) == code


# --- a drain claims its PodDisruptionBudget first ---------------------------------------------
#
# Zone a holds three web pods, zone b one, zone c one on n-c and one on n-c2 (zone counts
# 3, 1, 2: skew 2, one pod leaves zone a for zone b). n-c2 may be one Karpenter is draining: its
# Ready pod is the next eviction Karpenter makes, under the same PodDisruptionBudget.


def _claimed(
    allowed: int, *, draining: bool, leaving: bool = False, ready: bool = True
) -> Snapshot:
    c = zone_constraint("web")
    nodes = [
        node("n-a", "zone-a"),
        node("n-b", "zone-b"),
        node("n-c", "zone-c"),
        node("n-c2", "zone-c", taints=[DISRUPTED] if draining else []),
    ]
    where = [("a", "n-a")] * 3 + [("b", "n-b"), ("c", "n-c"), ("d", "n-c2")]
    pods = [
        pod(
            f"web-{z}-{k}",
            n,
            constraints=[c],
            created=1000 + k,
            tolerations=EVERYTHING,
            terminating=leaving and n == "n-c2",
            ready=ready or n != "n-c2",
        )
        for k, (z, n) in enumerate(where)
    ]
    pdb = PodDisruptionBudget(
        namespace="default",
        name="web",
        selector=LabelSelector((("app", "web"),)),
        disruptions_allowed=allowed,
        current_healthy=6,
        desired_healthy=6 - allowed,
    )
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods), pdbs=(pdb,))


def test_a_drain_claims_the_budget_of_the_pods_it_has_yet_to_evict() -> None:
    # no drain: the budget of 1 is the plan's, and one pod of zone a moves to zone b
    assert [t for _, t in _moves(_claimed(1, draining=False))] == ["n-b"]
    # n-c2 is draining and its pod is still there: Karpenter spends the budget first
    held = _claimed(1, draining=True)
    assert _moves(held) == []
    reasons = {s.name: s.reason for s in plan(held, Policy(), NOW).skipped}
    assert {n: str(r.code) for n, r in reasons.items() if n.startswith("web-a")} == {
        f"web-a-{k}": "pdb" for k in range(3)
    }
    assert "claimed by 1 Ready pod on node n-c2, which Karpenter is draining" in (
        reasons["web-a-0"].detail
    )
    # a budget of 2: one left after the claim, and the move is made
    assert [t for _, t in _moves(_claimed(2, draining=True))] == ["n-b"]


@pytest.mark.parametrize(("leaving", "ready"), [(True, True), (False, False)])
def test_a_pod_already_leaving_or_not_ready_claims_nothing(leaving: bool, ready: bool) -> None:
    """Its eviction spends no budget (terminating: already evicted; not Ready: the workload at
    its desired health lets it go free), so the plan keeps the budget."""
    assert len(_moves(_claimed(1, draining=True, leaving=leaving, ready=ready))) == 1
