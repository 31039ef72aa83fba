"""One decision: what ``plan`` prints is what ``run`` does (SPEC §3.12).

Over generated clusters (3-4 zones, one or two workloads, maxSkew 1-3, hard and soft,
minDomains, pods not placed yet young and old, a node drifted from its NodePool) and generated
loop memories (workloads cooling down, guarded replacements):

* the evictions a ``run`` sends to a recording API in its first wave are the first wave of the
  plan made with the same memory, and, with no memory, the first wave ``plan -o json`` prints;
* an oracle written apart from the planner (the held pods worked out from the generated
  parameters; the fewest evictions by brute force, tests/oracle.py) shows that no held pod is
  evicted, no replacement is sent into the drifted zone, and the plan is minimal among the
  plans that leave the held pods in place: where no plan repairs a view without them, the view
  is left above maxSkew with a hold among its reasons.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rebalancer.cli.main import main
from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.core.convert import snapshot_from_objects
from rebalancer.core.holds import Guard, LoopMemory
from rebalancer.core.model import HARD, SOFT, ZONE_KEY
from rebalancer.core.plan import Plan
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.builders import zone_node
from tests.fakes import FakeClock, FakeCluster
from tests.oracle import (
    OracleCluster,
    OracleConstraint,
    OraclePod,
    joint_minimum,
    lexicographic_minimum,
)

NOW = 1_800_000_000.0
GRACE = 120.0
NS = "shop"
POLICY = Policy(constraints=(HARD, SOFT))
SETTINGS = RunSettings(
    max_waves=1,
    executor=ExecutorSettings(pdb_retries=1),
    instance="test",
    pdb_settle_seconds=0,
    workload_cooldown_seconds=60.0,
    unplaced_grace_seconds=GRACE,
)


def _stamp(seconds: float) -> str:
    import datetime  # noqa: PLC0415

    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Workload:
    name: str
    counts: tuple[int, ...]  # pods per zone
    max_skew: int
    soft: bool
    min_domains: int
    pending: float | None  # the age of a pod not placed yet, if any
    cooling: bool  # in the loop's memory: its replacements landed 5 s ago
    guarded: frozenset[int]  # which of its pods (by index) the thrash guard holds


@dataclass(frozen=True)
class Case:
    zones: int
    workloads: tuple[Workload, ...]
    drifted: int | None  # the zone whose node has drifted from its NodePool
    memory: bool  # whether the run has a memory (False: a plan with none, as `plan` has)

    def pod_names(self, w: Workload) -> list[tuple[str, int]]:
        """Its bound pods (name, zone), oldest first."""
        names = []
        k = 0
        for zone, count in enumerate(w.counts):
            for _ in range(count):
                names.append((f"{w.name}-{k}", zone))
                k += 1
        return names


@st.composite
def cases(draw: st.DrawFn) -> Case:
    zones = draw(st.integers(3, 4))
    workloads = []
    for name in draw(st.sampled_from((("web",), ("web", "api")))):
        counts = tuple(draw(st.lists(st.integers(0, 4), min_size=zones, max_size=zones)))
        size = sum(counts)
        workloads.append(
            Workload(
                name=name,
                counts=counts,
                max_skew=draw(st.integers(1, 3)),
                soft=draw(st.booleans()),
                min_domains=draw(st.sampled_from((1, 1, zones + 1))),
                pending=draw(st.sampled_from((None, None, 10.0, 3600.0))),
                cooling=draw(st.integers(0, 4)) == 0,
                guarded=frozenset(
                    draw(st.sets(st.integers(0, max(size - 1, 0)), max_size=2)) if size else ()
                ),
            )
        )
    drifted = draw(st.sampled_from((None, None, *range(zones))))
    return Case(zones, tuple(workloads), drifted, draw(st.booleans()))


def _objects(case: Case) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {
                "name": "pool",
                "annotations": {
                    "karpenter.sh/nodepool-hash-version": "v3",
                    "karpenter.sh/nodepool-hash": "222",
                },
            },
            "spec": {"template": {"spec": {"requirements": []}}},
        }
    ]
    for z in range(case.zones):
        node = zone_node(f"node-{z}", f"zone-{z}")
        node["metadata"]["labels"]["karpenter.sh/nodepool"] = "pool"
        node["metadata"]["annotations"] = {
            "karpenter.sh/nodepool-hash-version": "v3",
            "karpenter.sh/nodepool-hash": "111" if z == case.drifted else "222",
        }
        objects.append(node)
    for w in case.workloads:
        for k, (name, zone) in enumerate(case.pod_names(w)):
            objects.append(_pod(case, w, name, f"node-{zone}", NOW - 86400 + 60 * k))
        if w.pending is not None:
            pending = _pod(case, w, f"{w.name}-pending", None, NOW - w.pending)
            objects.append(pending)
    return objects


def _pod(case: Case, w: Workload, name: str, node: str | None, created: float) -> dict[str, Any]:
    constraint = {
        "maxSkew": w.max_skew,
        "topologyKey": ZONE_KEY,
        "whenUnsatisfiable": "ScheduleAnyway" if w.soft else "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": w.name}},
    }
    if w.min_domains > 1 and not w.soft:
        constraint["minDomains"] = w.min_domains
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        "topologySpreadConstraints": [constraint],
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"] = node
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "creationTimestamp": _stamp(created),
            "labels": {"app": w.name},
            "ownerReferences": [
                {
                    "kind": "ReplicaSet",
                    "name": f"{w.name}-rs",
                    "uid": f"uid-{w.name}-rs",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def _memory(case: Case) -> LoopMemory:
    cooling = {f"{NS}/ReplicaSet/{w.name}-rs": NOW - 5 for w in case.workloads if w.cooling}
    guarded = {
        f"{NS}/{case.pod_names(w)[k][0]}": Guard(NOW - 30, "replaced an earlier pod")
        for w in case.workloads
        for k in w.guarded
        if k < sum(w.counts)
    }
    return LoopMemory(cooling=cooling, guarded=guarded)


def _first_wave(p: Plan) -> list[str]:
    return sorted(e.name for e in p.evictions if e.wave == 1)


def _held(case: Case) -> set[str]:
    """The oracle's held pods, from the generated parameters alone."""
    held: set[str] = set()
    for w in case.workloads:
        names = [name for name, _ in case.pod_names(w)]
        young = w.pending is not None and w.pending < GRACE
        if young or (case.memory and w.cooling):
            held.update(names)
        if case.memory:
            held.update(names[k] for k in w.guarded if k < len(names))
    return held


def _oracle_minimum(case: Case, w: Workload, held: set[str]) -> int | None:
    """The fewest evictions of workload ``w`` that bring its view within maxSkew with the held
    pods left in place (one node per zone, so zones are nodes), by brute force."""
    pods = tuple(
        OraclePod(node=zone, priority=0, evictable=name not in held)
        for name, zone in case.pod_names(w)
    )
    constraint = OracleConstraint("zone", w.max_skew, 1 if w.soft else w.min_domains, soft=w.soft)
    cluster = OracleCluster(tuple(range(case.zones)), pods, (constraint,))
    if not w.soft:
        return joint_minimum(cluster)
    found = lexicographic_minimum(cluster)
    return None if found is None else found[1]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=cases())
def test_run_sends_the_first_wave_plan_prints_and_no_held_pod(
    case: Case,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("rebalancer.cli.common.time.time", lambda: NOW)
    objects = _objects(case)
    snapshot = snapshot_from_objects(copy.deepcopy(objects))
    memory = _memory(case) if case.memory else None
    rules = SETTINGS.holds
    planned = plan(snapshot, POLICY, NOW, rules=rules, memory=memory)

    # run: the evictions of its first wave, through a recording API
    cluster = FakeCluster.of(objects)
    clock = FakeClock()
    runner = Runner(
        cluster,
        cluster,
        POLICY,
        SETTINGS,
        clock=clock,
        wall_clock=lambda: NOW,
        sleep=clock.sleep,
        memory=memory,
    )
    report = runner.run_once("r1")
    assert sorted(name for name, _ in cluster.posts) == _first_wave(planned)
    assert _first_wave(report.first_plan) == _first_wave(planned)

    if memory is None:  # `plan` has no memory: it prints the same first wave
        path = tmp_path / "snapshot.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        policy = tmp_path / "policy.yaml"
        policy.write_text(
            "apiVersion: rebalancer/v1alpha1\nkind: RebalancerPolicy\n"
            "constraints: [DoNotSchedule, ScheduleAnyway]\n"
        )
        capsys.readouterr()
        assert main(["plan", "--snapshot", str(path), "--policy", str(policy), "-o", "json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        wave = sorted(e["name"] for e in printed["evictions"] if e["wave"] == 1)
        assert wave == _first_wave(planned)

    # the oracle: nothing held is evicted, nothing lands in the drifted zone, and minimal
    held = _held(case)
    evicted = {e.name for e in planned.evictions}
    event("evicts" if evicted else "evicts nothing")
    event("held pods" if held else "nothing held")
    if any(h.code.value in planned.holds for u in planned.unrepaired for h in u.reasons):
        event("a view left above maxSkew by a hold")
    assert not evicted & held
    if case.drifted is not None:
        assert all(e.target_domain != f"zone-{case.drifted}" for e in planned.evictions)
    for w in case.workloads:
        if case.drifted is not None:
            continue  # a landing hold: the oracle here knows no scheduler's choice
        mine = sum(1 for e in planned.evictions if e.name.startswith(f"{w.name}-"))
        least = _oracle_minimum(case, w, held)
        left = [u for u in planned.unrepaired if u.view.selector == f"app={w.name}"]
        if least is None:
            assert left, (w, planned.evictions)
        elif least == 0:
            assert mine == 0
        else:
            assert mine == least, (w, least, [e.name for e in planned.evictions])
            assert not left


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "skewed-cluster.yaml"


def test_plan_refuses_a_bad_unplaced_grace_naming_the_flag_and_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``plan --unplaced-grace soon`` is bad input: exit 2, the flag and the value named."""
    assert main(["plan", "--snapshot", str(EXAMPLE), "--unplaced-grace", "soon"]) == 2
    err = capsys.readouterr().err
    assert "--unplaced-grace" in err and "soon" in err


def test_the_summary_names_the_holds_a_loop_would_add(capsys: pytest.CaptureFixture[str]) -> None:
    """``plan`` applies the holds that need no memory; the loop-only ones it can only name,
    and ``run --dry-run`` names its thrash guard among them (``nextRun.holds``)."""
    assert main(["plan", "--snapshot", str(EXAMPLE), "--unplaced-grace", "0s", "-o", "json"]) == 0
    holds = json.loads(capsys.readouterr().out)["nextRun"]["holds"]
    assert holds == {"applied": ["node-drifting"], "loopOnly": ["thrash-guard"]}
    from rebalancer.cli.common import plan_holds  # noqa: PLC0415
    from rebalancer.cli.wording import holds_sentence  # noqa: PLC0415

    assert holds_sentence(SETTINGS.holds) == (
        "Holds: pods-unplaced 2m, node-drifting; with --interval also cooldown 1m, thrash-guard 1h."
    )
    assert holds_sentence(plan_holds(30.0)) == (
        "Holds: pods-unplaced 30s, node-drifting; with --interval also thrash-guard 1h."
    )
