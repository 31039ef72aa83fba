"""``explain`` agrees with kube-scheduler's PodTopologySpread filter (SPEC §2.4), case by case.

The cases follow the shape of kube-scheduler's podtopologyspread filtering tests: a few nodes
in zones, existing pods, and one incoming pending pod ``p`` with its constraints. Every expected
value is derived by hand from the SPEC's formula: a node is accepted iff for every hard
constraint ``count(domain) + selfMatch - globalMin <= maxSkew``; a node lacking a hard
constraint's key never is.

The standard layout: zone1 holds node-a and node-b, zone2 holds node-x and node-y.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rebalancer.cluster.read.snapshot import load_snapshot_skipping
from rebalancer.core.errors import InputError
from rebalancer.core.explain import NOT_PLANNED, NOT_VIOLATED, PLANNED, SKIPPED, PlanStatus, explain
from rebalancer.core.model import (
    HARD,
    HOSTNAME_KEY,
    IGNORE,
    SOFT,
    ZONE_KEY,
    LabelSelector,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    Requirement,
    Snapshot,
    SpreadConstraint,
    Taint,
    Toleration,
)
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import node, pod, zones_cluster

HONOR = "Honor"
NOW = 1_000_000.0
DEDICATED = Taint("dedicated", "infra", "NoSchedule")
_serial = itertools.count()


def four_nodes(**overrides: Mapping[str, Any]) -> list[Node]:
    """node-a, node-b in zone1; node-x, node-y in zone2; keyword overrides per node name."""
    layout = [("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2")]
    return [
        node(name, zone, **dict(overrides.get(name.replace("-", "_"), {}))) for name, zone in layout
    ]


def placed(counts: Mapping[str, int], *, app: str = "foo", **extra: Any) -> list[Pod]:
    """``counts[node]`` existing pods labelled ``app`` on each node."""
    return [
        pod(f"{app}-{next(_serial)}", name, app=app, **extra)
        for name, count in counts.items()
        for _ in range(count)
    ]


def spread(
    key: str = ZONE_KEY,
    max_skew: int = 1,
    *,
    when: str = HARD,
    app: str = "foo",
    **fields: Any,
) -> SpreadConstraint:
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        selector=LabelSelector((("app", app),)),
        **fields,
    )


def incoming(*constraints: SpreadConstraint, app: str = "foo", **extra: Any) -> Pod:
    """The pending pod ``p`` being placed."""
    return pod("p", None, app=app, constraints=constraints, **extra)


def zone_in(*zones: str) -> NodeSelector:
    requirement = NodeSelectorRequirement(ZONE_KEY, "In", tuple(zones))
    return NodeSelector((NodeSelectorTerm(match_expressions=(requirement,)),))


THREE_ZONES = [
    node("node-a", "zone1"),
    node("node-b", "zone1"),
    node("node-x", "zone2"),
    node("node-z", "zone3"),
]
TAINTED_ZONE3 = [*THREE_ZONES[:3], node("node-z", "zone3", taints=[DEDICATED])]
POOLS = [
    node("node-a", "zone1", labels={"pool": "blue"}),
    node("node-b", "zone1", labels={"pool": "blue"}),
    node("node-x", "zone2", labels={"pool": "blue"}),
    node("node-y", "zone2"),
    node("node-z", "zone3"),
]
HASH_SELECTOR = LabelSelector((("app", "foo"),), (Requirement("pod-template-hash", "In", ("v2",)),))
ALL = ["node-a", "node-b", "node-x", "node-y"]
ZONE2 = ["node-x", "node-y"]
ZONE1 = ["node-a", "node-b"]

# Each case: nodes, existing pods, the incoming pod, the nodes the spread filter accepts, and
# per constraint (in the pod's order) the match counts and the global minimum. "feasible"
# (every hard filter) defaults to "spread" when absent.
SPREAD_CASES: list[dict[str, Any]] = [
    {
        "name": "zone maxSkew 1, counts 3/1: only zone2",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 2, "node-b": 1, "node-x": 1}),
        "pod": incoming(spread()),
        "spread": ZONE2,
        "counts": [{"zone1": 3, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "zone maxSkew 2, counts 2/1: every node",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-b": 1, "node-x": 1}),
        "pod": incoming(spread(max_skew=2)),
        "spread": ALL,
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "zone maxSkew 2, counts 3/1: only zone2",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 2, "node-b": 1, "node-x": 1}),
        "pod": incoming(spread(max_skew=2)),
        "spread": ZONE2,
        "counts": [{"zone1": 3, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "hostname maxSkew 1: only the empty host",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-b": 1, "node-y": 2}),
        "pod": incoming(spread(HOSTNAME_KEY)),
        "spread": ["node-x"],
        "counts": [{"node-a": 1, "node-b": 1, "node-x": 0, "node-y": 2}],
        "global_min": [0],
    },
    {
        "name": "hostname maxSkew 2: every host below two",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-b": 1, "node-y": 2}),
        "pod": incoming(spread(HOSTNAME_KEY, 2)),
        "spread": ["node-a", "node-b", "node-x"],
        "counts": [{"node-a": 1, "node-b": 1, "node-x": 0, "node-y": 2}],
        "global_min": [0],
    },
    {
        "name": "selfMatch false: the pod does not count itself, so zone1 stays open",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-b": 1, "node-x": 1}),
        "pod": incoming(spread(), app="bar"),
        "spread": ALL,
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [1],
        "self_match": [False],
    },
    {
        "name": "selfMatch true: same cluster, the pod counts itself, zone1 is closed",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-b": 1, "node-x": 1}),
        "pod": incoming(spread()),
        "spread": ZONE2,
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [1],
        "self_match": [True],
    },
    {
        "name": "a node without the zone key is never feasible and its pods are not counted",
        "nodes": [*four_nodes(), node("node-c", None)],
        "pods": placed({"node-a": 1, "node-x": 1, "node-c": 3}),
        "pod": incoming(spread()),
        "spread": ALL,
        "counts": [{"zone1": 1, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "zone + hostname hard: a host without the zone key leaves the hostname view too",
        "nodes": [*four_nodes(), node("node-c", None)],
        "pods": placed({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}),
        "pod": incoming(spread(), spread(HOSTNAME_KEY)),
        "spread": ALL,
        "counts": [
            {"zone1": 2, "zone2": 2},
            {"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1},
        ],
        "global_min": [2, 1],
    },
    {
        "name": "minDomains 3 > 2 zones: global min 0, no zone is open",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 2, "node-x": 1}),
        "pod": incoming(spread(min_domains=3)),
        "spread": [],
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [0],
    },
    {
        "name": "minDomains 2 = 2 zones: the real global min",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 2, "node-x": 1}),
        "pod": incoming(spread(min_domains=2)),
        "spread": ZONE2,
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "minDomains 3 > 2 zones, maxSkew 2: only the zone below two",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-x": 2}),
        "pod": incoming(spread(max_skew=2, min_domains=3)),
        "spread": ZONE1,
        "counts": [{"zone1": 1, "zone2": 2}],
        "global_min": [0],
    },
    {
        "name": "nodeAffinityPolicy Honor: required affinity keeps zone3 out of the counts",
        "nodes": THREE_ZONES,
        "pods": placed({"node-a": 1, "node-x": 2}),
        "pod": incoming(spread(), required_affinity=zone_in("zone1", "zone2")),
        # node-z: zone3 counts 0 (not a domain), so the spread filter passes; affinity fails.
        "spread": ["node-a", "node-b", "node-z"],
        "feasible": ["node-a", "node-b"],
        "counts": [{"zone1": 1, "zone2": 2}],
        "global_min": [1],
    },
    {
        "name": "nodeAffinityPolicy Ignore: empty zone3 counts, global min 0",
        "nodes": THREE_ZONES,
        "pods": placed({"node-a": 1, "node-x": 2}),
        "pod": incoming(
            spread(node_affinity_policy=IGNORE), required_affinity=zone_in("zone1", "zone2")
        ),
        "spread": ["node-z"],
        "feasible": [],
        "counts": [{"zone1": 1, "zone2": 2, "zone3": 0}],
        "global_min": [0],
    },
    {
        "name": "nodeAffinityPolicy Honor: nodeSelector drops node-y's pods and zone3",
        "nodes": POOLS,
        "pods": placed({"node-a": 1, "node-x": 1, "node-y": 2}),
        "pod": incoming(spread(), node_selector={"pool": "blue"}),
        "spread": ["node-a", "node-b", "node-x", "node-y", "node-z"],
        "feasible": ["node-a", "node-b", "node-x"],
        "counts": [{"zone1": 1, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "nodeAffinityPolicy Ignore: nodeSelector does not change the counts",
        "nodes": POOLS,
        "pods": placed({"node-a": 1, "node-x": 1, "node-y": 2}),
        "pod": incoming(spread(node_affinity_policy=IGNORE), node_selector={"pool": "blue"}),
        "spread": ["node-z"],
        "feasible": [],
        "counts": [{"zone1": 1, "zone2": 3, "zone3": 0}],
        "global_min": [0],
    },
    {
        "name": "nodeTaintsPolicy Honor: the untolerated tainted zone is not a domain",
        "nodes": TAINTED_ZONE3,
        "pods": placed({"node-a": 1, "node-x": 1}),
        "pod": incoming(spread(node_taints_policy=HONOR)),
        "spread": ["node-a", "node-b", "node-x", "node-z"],
        "feasible": ["node-a", "node-b", "node-x"],
        "counts": [{"zone1": 1, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "nodeTaintsPolicy Ignore (default): the tainted zone counts, global min 0",
        "nodes": TAINTED_ZONE3,
        "pods": placed({"node-a": 1, "node-x": 1}),
        "pod": incoming(spread()),
        "spread": ["node-z"],
        "feasible": [],
        "counts": [{"zone1": 1, "zone2": 1, "zone3": 0}],
        "global_min": [0],
    },
    {
        "name": "nodeTaintsPolicy Honor with a toleration: the tainted zone counts",
        "nodes": TAINTED_ZONE3,
        "pods": placed({"node-a": 1, "node-x": 1}),
        "pod": incoming(
            spread(node_taints_policy=HONOR),
            tolerations=(Toleration("dedicated", "Equal", "infra", "NoSchedule"),),
        ),
        "spread": ["node-z"],
        "counts": [{"zone1": 1, "zone2": 1, "zone3": 0}],
        "global_min": [0],
    },
    {
        "name": "terminating pods are not counted",
        "nodes": four_nodes(),
        "pods": [
            *placed({"node-a": 1, "node-x": 1}),
            *placed({"node-a": 2, "node-b": 1}, terminating=True),
        ],
        "pod": incoming(spread()),
        "spread": ALL,
        "counts": [{"zone1": 1, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "pods in other namespaces are not counted",
        "nodes": four_nodes(),
        "pods": [*placed({"node-x": 1}), *placed({"node-a": 3}, namespace="other")],
        "pod": incoming(spread()),
        "spread": ZONE1,
        "counts": [{"zone1": 0, "zone2": 1}],
        "global_min": [0],
    },
    {
        "name": "pods not matching the selector and pending pods are not counted",
        "nodes": four_nodes(),
        "pods": [
            *placed({"node-x": 1}),
            *placed({"node-a": 3}, app="bar"),
            pod("foo-pending", None, app="foo"),
        ],
        "pod": incoming(spread()),
        "spread": ZONE1,
        "counts": [{"zone1": 0, "zone2": 1}],
        "global_min": [0],
    },
    {
        "name": "matchLabelKeys pod-template-hash: only the same revision counts",
        "nodes": four_nodes(),
        "pods": [
            *placed({"node-a": 2}, labels={"pod-template-hash": "v1"}),
            *placed({"node-x": 1}, labels={"pod-template-hash": "v2"}),
        ],
        "pod": incoming(
            dataclasses.replace(
                spread(), selector=HASH_SELECTOR, match_label_keys=("pod-template-hash",)
            ),
            labels={"pod-template-hash": "v2"},
        ),
        "spread": ZONE1,
        "counts": [{"zone1": 0, "zone2": 1}],
        "global_min": [0],
    },
    {
        "name": "without matchLabelKeys every revision counts",
        "nodes": four_nodes(),
        "pods": [
            *placed({"node-a": 2}, labels={"pod-template-hash": "v1"}),
            *placed({"node-x": 1}, labels={"pod-template-hash": "v2"}),
        ],
        "pod": incoming(spread(), labels={"pod-template-hash": "v2"}),
        "spread": ZONE2,
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [1],
    },
    {
        "name": "zone and hostname hard constraints are ANDed",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-x": 1, "node-y": 1}),
        "pod": incoming(spread(), spread(HOSTNAME_KEY)),
        # zone alone: zone1; hostname alone: node-b; both: node-b.
        "spread": ["node-b"],
        "counts": [
            {"zone1": 1, "zone2": 2},
            {"node-a": 1, "node-b": 0, "node-x": 1, "node-y": 1},
        ],
        "global_min": [1, 0],
    },
    {
        "name": "a soft constraint does not filter, not even a node without its key",
        "nodes": [*four_nodes(), node("node-c", None)],
        "pods": placed({"node-a": 3}),
        "pod": incoming(spread(when=SOFT)),
        "spread": ["node-a", "node-b", "node-c", "node-x", "node-y"],
        "counts": [{"zone1": 3, "zone2": 0}],
        "global_min": [0],
    },
    {
        "name": "hard zone + soft hostname: only the hard one filters; soft eligibility is its own",
        "nodes": [*four_nodes(), node("node-c", None)],
        "pods": placed({"node-a": 1, "node-b": 1, "node-x": 1}),
        "pod": incoming(spread(), spread(HOSTNAME_KEY, when=SOFT)),
        # node-x has skew 1 + 1 - 0 = 2 > 1 for the soft constraint, yet stays open.
        "spread": ZONE2,
        "counts": [
            {"zone1": 2, "zone2": 1},
            {"node-a": 1, "node-b": 1, "node-c": 0, "node-x": 1, "node-y": 0},
        ],
        "global_min": [1, 0],
    },
    {
        "name": "a bound pod is counted as the plan counts it, and left out for its replacement",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-x": 1}),
        "pod": pod("p", "node-a", app="foo", constraints=[spread()]),
        "spread": ALL,  # zone1 holds 1 with p gone: 1 + 1 - 1 <= 1
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [1],
        "pod_domain": ["zone1"],
        "replacement_global_min": [1],
    },
    {
        "name": "a bound pod that is the only one of its zone: its replacement sees 0 there",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 2}),
        "pod": pod("p", "node-x", app="foo", constraints=[spread()]),
        "spread": ZONE2,  # with p gone: zone1 2, zone2 0; zone1: 2 + 1 - 0 > 1
        "counts": [{"zone1": 2, "zone2": 1}],
        "global_min": [1],
        "pod_domain": ["zone2"],
        "replacement_global_min": [0],
    },
    {
        "name": "a bound pod not matching its own selector is not counted",
        "nodes": four_nodes(),
        "pods": placed({"node-a": 1, "node-x": 1}),
        "pod": pod("p", "node-a", app="bar", constraints=[spread()]),
        "spread": ALL,  # selfMatch 0: 1 + 0 - 1 <= 1 everywhere
        "counts": [{"zone1": 1, "zone2": 1}],
        "global_min": [1],
        "pod_domain": [None],
        "replacement_global_min": [1],
        "self_match": [False],
    },
]


def _explain(nodes: Iterable[Node], pods: Sequence[Pod], target: Pod, **more: Any) -> Any:
    snapshot = Snapshot(nodes=tuple(nodes), pods=(*pods, target), **more)
    return explain(snapshot, Policy(), target.namespace, target.name)


@pytest.mark.parametrize("case", SPREAD_CASES, ids=[c["name"] for c in SPREAD_CASES])
def test_spread_filter_agrees_with_kube_scheduler(case: dict[str, Any]) -> None:
    """spreadFeasibleNodes, matchCounts and globalMin equal the values derived by hand."""
    result = _explain(case["nodes"], case["pods"], case["pod"])
    assert list(result.spread_feasible_nodes) == case["spread"]
    assert list(result.feasible_nodes) == case.get("feasible", case["spread"])
    assert [dict(c.match_counts) for c in result.constraints] == case["counts"]
    assert [c.global_min for c in result.constraints] == case["global_min"]
    if "self_match" in case:
        assert [c.self_match for c in result.constraints] == case["self_match"]
    expected_pod_domain = case.get("pod_domain", [None] * len(case["counts"]))
    assert [c.pod_domain for c in result.constraints] == expected_pod_domain
    if "replacement_global_min" in case:
        replacement = [c.replacement_global_min for c in result.constraints]
        assert replacement == case["replacement_global_min"]
    rejected = {name for name, _ in result.rejected}
    assert rejected.isdisjoint(result.feasible_nodes)
    assert rejected | set(result.feasible_nodes) == {n.name for n in case["nodes"]}


BALANCED = placed({"node-a": 1, "node-x": 1})  # zone1 1, zone2 1: the spread filter accepts all
PINNED_PV = PersistentVolume(
    "pv-1",
    NodeSelector(
        (
            NodeSelectorTerm(
                match_expressions=(NodeSelectorRequirement(HOSTNAME_KEY, "In", ("node-x",)),)
            ),
        )
    ),
)

# Each case: nodes, extra pods, the incoming pod's extra fields, snapshot extras, the feasible
# nodes, and for each rejected node a word of the first filter that rejects it.
FIT_CASES: list[dict[str, Any]] = [
    {
        "name": "a cordoned node is rejected",
        "nodes": four_nodes(node_b={"unschedulable": True}),
        "feasible": ["node-a", "node-x", "node-y"],
        "rejected": {"node-b": "cordoned"},
    },
    {
        "name": "a cordoned node is open to a pod tolerating the unschedulable taint",
        "nodes": four_nodes(node_b={"unschedulable": True}),
        "pod": {
            "tolerations": (
                Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
            )
        },
        "feasible": ALL,
        "rejected": {},
    },
    {
        "name": "an untolerated NoSchedule taint rejects the node",
        "nodes": four_nodes(node_y={"taints": [DEDICATED]}),
        "feasible": ["node-a", "node-b", "node-x"],
        "rejected": {"node-y": "taint"},
    },
    {
        "name": "an untolerated NoExecute taint rejects the node",
        "nodes": four_nodes(node_y={"taints": [Taint("gpu", "yes", "NoExecute")]}),
        "feasible": ["node-a", "node-b", "node-x"],
        "rejected": {"node-y": "taint"},
    },
    {
        "name": "a PreferNoSchedule taint does not filter",
        "nodes": four_nodes(node_y={"taints": [Taint("dedicated", "infra", "PreferNoSchedule")]}),
        "feasible": ALL,
        "rejected": {},
    },
    {
        "name": "a toleration with the right key and value admits the node",
        "nodes": four_nodes(node_y={"taints": [DEDICATED]}),
        "pod": {"tolerations": (Toleration("dedicated", "Equal", "infra", "NoSchedule"),)},
        "feasible": ALL,
        "rejected": {},
    },
    {
        "name": "a toleration with the wrong value does not",
        "nodes": four_nodes(node_y={"taints": [DEDICATED]}),
        "pod": {"tolerations": (Toleration("dedicated", "Equal", "web", "NoSchedule"),)},
        "feasible": ["node-a", "node-b", "node-x"],
        "rejected": {"node-y": "taint"},
    },
    {
        "name": "a node without room for the pod's cpu is rejected; an exact fit is not",
        # node-x: 100 (foo) + 950 used, 100 more > 1100; node-y: 900 used, 100 more = 1000.
        "nodes": four_nodes(node_x={"cpu": 1100}, node_y={"cpu": 1000}),
        "extra": [
            pod("big-x", "node-x", app="other", cpu=950),
            pod("fill-y", "node-y", app="other", cpu=900),
        ],
        "feasible": ["node-a", "node-b", "node-y"],
        "rejected": {"node-x": "resources"},
    },
    {
        "name": "a node at its pod count is rejected",
        "nodes": four_nodes(node_y={"pods": 1}),
        "extra": [pod("only-y", "node-y", app="other")],
        "feasible": ["node-a", "node-b", "node-x"],
        "rejected": {"node-y": "resources"},
    },
    {
        "name": "a NotReady node is rejected",
        "nodes": four_nodes(node_a={"ready": False}),
        "feasible": ["node-b", "node-x", "node-y"],
        "rejected": {"node-a": "Ready"},
    },
    {
        "name": "a bound PersistentVolume pins the pod to its node",
        "nodes": four_nodes(),
        "pod": {"pvc_names": ("data",)},
        "snapshot": {
            "pvcs": (PersistentVolumeClaim("default", "data", "pv-1"),),
            "pvs": (PINNED_PV,),
        },
        "feasible": ["node-x"],
        "rejected": {
            "node-a": "PersistentVolume",
            "node-b": "PersistentVolume",
            "node-y": "PersistentVolume",
        },
    },
    {
        "name": "an unbound claim pins nothing",
        "nodes": four_nodes(),
        "pod": {"pvc_names": ("data",)},
        "snapshot": {"pvcs": (PersistentVolumeClaim("default", "data", None),), "pvs": ()},
        "feasible": ALL,
        "rejected": {},
    },
    {
        "name": "a nodeSelector rejects the other nodes",
        "nodes": four_nodes(node_b={"labels": {"disk": "ssd"}}),
        "pod": {"node_selector": {"disk": "ssd"}},
        "feasible": ["node-b"],
        "rejected": {"node-a": "selector", "node-x": "selector", "node-y": "selector"},
    },
    {
        "name": "the spread filter is reported after the static filters",
        "nodes": four_nodes(node_a={"unschedulable": True}),
        "extra": placed({"node-a": 1}),  # zone1 2, zone2 1: zone1 closed by the spread filter
        "feasible": ZONE2,
        "rejected": {"node-a": "cordoned", "node-b": "PodTopologySpread"},
    },
]


@pytest.mark.parametrize("case", FIT_CASES, ids=[c["name"] for c in FIT_CASES])
def test_feasible_nodes_apply_every_hard_filter(case: dict[str, Any]) -> None:
    """feasibleNodes drops cordoned, tainted, full, NotReady, unselected and volume-pinned nodes."""
    target = incoming(spread(), **case.get("pod", {}))
    pods = [*BALANCED, *case.get("extra", [])]
    result = _explain(case["nodes"], pods, target, **case.get("snapshot", {}))
    assert list(result.feasible_nodes) == case["feasible"]
    rejected = dict(result.rejected)
    assert set(rejected) == set(case["rejected"])
    for name, word in case["rejected"].items():
        assert word in rejected[name], (name, rejected[name])


def test_unknown_pod_is_an_input_error() -> None:
    """Explaining a pod that is not in the snapshot raises InputError naming it."""
    snapshot = Snapshot(nodes=tuple(four_nodes()), pods=tuple(BALANCED))
    with pytest.raises(InputError, match="default/nope"):
        explain(snapshot, Policy(), "default", "nope")


# ---- explain with the plan: the same counts, and what the plan does with the pod ----------


def _planned(snapshot: Snapshot, name: str, policy: Policy | None = None) -> Any:
    policy = policy or Policy()
    result = plan(snapshot, policy, NOW)
    return result, explain(snapshot, policy, "default", name, result)


def test_explain_counts_as_the_plan_counts_and_names_the_target() -> None:
    """Zones [3, 1], maxSkew 1: one eviction from zone a. Explaining the evicted pod shows
    zone a with 3 pods (itself included) as the plan does, globalMin 1, skew 2, and that it
    goes in wave 1 to the plan's target in zone b; its replacement sees zone a at 2."""
    nodes, pods = zones_cluster([3, 1])
    snapshot = Snapshot(nodes=tuple(nodes), pods=tuple(pods))
    result = plan(snapshot, Policy(), NOW)
    [evicted] = result.evictions
    expl = explain(snapshot, Policy(), "default", evicted.name, result)
    [c] = expl.constraints
    assert dict(c.match_counts) == {"zone-a": 3, "zone-b": 1} == dict(result.violations[0].domains)
    assert (c.pod_domain, c.global_min, c.skew, c.replacement_global_min) == ("zone-a", 1, 2, 1)
    assert expl.status == PlanStatus(PLANNED, evicted.reason, 1, "n-zone-b-0", "zone-b")
    others = [p.name for p in pods if p.name != evicted.name]
    for name in others:
        status = explain(snapshot, Policy(), "default", name, result).status
        assert status is not None and status.state == NOT_PLANNED


def test_explain_says_why_a_pod_is_skipped() -> None:
    """Zones [3, 1] whose pods mount PVCs: every pod is skipped with `has-pvc`."""
    nodes, pods = zones_cluster([3, 1])
    pods = [dataclasses.replace(p, pvc_names=("data",)) for p in pods]
    snapshot = Snapshot(nodes=tuple(nodes), pods=tuple(pods))
    _, expl = _planned(snapshot, pods[0].name)
    assert expl.status.state == SKIPPED
    assert expl.status.detail.startswith("has-pvc: ")


def test_explain_a_pod_of_a_balanced_view() -> None:
    """Zones [2, 2]: nothing to do; the pod is counted in its own zone, 2 there."""
    nodes, pods = zones_cluster([2, 2])
    snapshot = Snapshot(nodes=tuple(nodes), pods=tuple(pods))
    _, expl = _planned(snapshot, pods[0].name)
    assert expl.status == PlanStatus(NOT_VIOLATED, "no view counting it is above its maxSkew")
    assert dict(expl.constraints[0].match_counts) == {"zone-a": 2, "zone-b": 2}


def test_explain_agrees_with_the_bundled_example() -> None:
    """For every pod the README's example plans to evict: explain's counts of the view that
    chose it are the plan's counts before the plan, and its status is the eviction's."""
    root = Path(__file__).resolve().parent.parent
    snapshot, _ = load_snapshot_skipping(
        str(root / "examples" / "skewed-cluster.yaml"), skip_invalid=False, max_bytes=10**8
    )
    result = plan(snapshot, Policy(), NOW)
    before = {(v.namespace, v.topology_key, v.selector): dict(v.domains) for v in result.violations}
    for e in result.evictions:
        expl = explain(snapshot, Policy(), e.namespace, e.name, result)
        assert expl.status is not None
        assert (expl.status.wave, expl.status.target_node) == (e.wave, e.target_node)
        chosen = [c for c in expl.constraints if c.topology_key == e.topology_key]
        assert any(
            dict(c.match_counts) == before.get((e.namespace, c.topology_key, c.selector))
            and c.pod_domain == e.domain
            for c in chosen
        )
