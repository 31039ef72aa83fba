"""A node's drain and its replacements: which controllers a drain touched and which pods are
new (rebalancer.core.karpenter.drains), and loop mode's thrash guard going around the
replacements, so that a repair right after Karpenter drained a node takes older pods, not those
it just moved.
And drift: nodes whose NodePool's template hash changed, onto which no replacement is sent."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import structlog

from rebalancer.cluster.act.runner import Runner
from rebalancer.core.convert.builder import snapshot_from_objects
from rebalancer.core.karpenter.drains import DrainLedger, Seen, arrived, drained
from rebalancer.core.karpenter.marks import drifted
from rebalancer.core.model import Snapshot
from tests.builders import web_pod, zone_node
from tests.fakes import NOW, FakeCluster, Wall, fake_runner

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def tainted(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out.setdefault("spec", {})["taints"] = [DISRUPTED]
    return out


def of(*objects: dict[str, Any]) -> Snapshot:
    return snapshot_from_objects(list(objects))


def other_pod(name: str, node: str, uid: str) -> dict[str, Any]:
    pod = web_pod(name, node, uid)
    pod["metadata"]["ownerReferences"][0]["name"] = "api-rs"
    return pod


# -- the pure part: hand-made reads -------------------------------------------------------------

A, B, C = zone_node("n1", "a"), zone_node("n2", "b"), zone_node("n3", "c")
WEB = "shop/ReplicaSet/web-rs"


def leaving(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["deletionTimestamp"] = "2025-01-01T01:00:00Z"
    return pod


def test_a_pod_leaving_a_disrupted_node_is_drained_without_a_read_before() -> None:
    """Terminating there: drained. Still running there: not yet (no replacement yet)."""
    now = of(
        A,
        tainted(C),
        web_pod("w1", "n1", "u1"),
        leaving(web_pod("w2", "n3", "u2")),
        other_pod("x3", "n3", "u3"),
    )
    assert drained(None, now) == {WEB: {"u2": "n3"}}
    assert arrived(None, now) == []


def test_pods_gone_from_a_node_now_gone_or_disrupted_were_drained() -> None:
    before = Seen.of(of(A, C, web_pod("w1", "n1", "u1"), other_pod("x2", "n3", "u2")))
    gone = of(A, web_pod("w1", "n1", "u1"), other_pod("x3", "n1", "u3"))
    assert drained(before, gone) == {"shop/ReplicaSet/api-rs": {"u2": "n3"}}
    assert [p.name for p in arrived(before, gone)] == ["x3"]
    emptied = of(A, tainted(C), web_pod("w1", "n1", "u1"), other_pod("x3", "n1", "u3"))
    assert drained(before, emptied) == {"shop/ReplicaSet/api-rs": {"u2": "n3"}}


def test_a_scale_down_is_no_drain() -> None:
    """The pod left a node that stays, untainted: no drain, whatever arrived meanwhile."""
    before = Seen.of(of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2")))
    after = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w4", "n1", "u4"))
    assert drained(before, after) == {}
    assert [p.name for p in arrived(before, after)] == ["w4"]


def test_a_node_gone_whose_pods_stay_is_no_drain_of_them() -> None:
    """A pod still there (by uid) did not leave, even if its node did (it is orphaned)."""
    before = Seen.of(of(A, C, web_pod("w2", "n3", "u2")))
    assert drained(before, of(A, web_pod("w2", "n3", "u2"))) == {}


def test_a_replacement_that_keeps_the_name_is_new_by_uid() -> None:
    before = Seen.of(of(A, web_pod("db-0", "n1", "u1")))
    again = of(A, web_pod("db-0", "n1", "u9"))
    assert [p.uid for p in arrived(before, again)] == ["u9"]


@pytest.mark.parametrize("names", [("n1", "n2", "n3"), ("zz", "aa", "mm")])
def test_renaming_the_nodes_changes_nothing_but_the_names(names: tuple[str, str, str]) -> None:
    x, y, z = names
    now = of(
        zone_node(x, "a"),
        tainted(zone_node(y, "b")),
        tainted(zone_node(z, "c")),
        leaving(web_pod("w1", y, "u1")),
        leaving(web_pod("w2", z, "u2")),
    )
    assert drained(None, now) == {WEB: {"u1": y, "u2": z}}


def _ledger_reads(*reads: Snapshot) -> list[tuple[dict[str, str], dict[str, str]]]:
    ledger = DrainLedger(tail=30)
    return [ledger.update(snap, NOW + 5 * i) for i, snap in enumerate(reads)]


def test_the_ledger_pays_one_replacement_per_drained_pod_oldest_first() -> None:
    """Two pods leave the disrupted node n3; three new pods of the ReplicaSet arrive (two
    replacements and a scale-up): the two oldest are the replacements."""
    start = of(
        A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"), web_pod("w3", "n3", "u3")
    )
    new = [web_pod(f"w{k}", "n1", f"u{k}") for k in (4, 5, 6)]
    for k, pod in zip((4, 5, 6), new, strict=True):
        pod["metadata"]["creationTimestamp"] = f"2025-01-01T00:00:0{10 - k}Z"  # w6 oldest
    after = of(A, web_pod("w1", "n1", "u1"), *new)
    (_, first), (replacements, fresh) = _ledger_reads(start, after)
    assert first == {}
    assert fresh == {WEB: "n3"}
    assert sorted(replacements) == ["shop/w5", "shop/w6"]


def test_a_scale_up_just_before_the_drain_does_not_pay_for_it() -> None:
    """Two pods of a scale-up arrive a read before the drain (older than its replacement);
    the drain takes one pod and its replacement arrives with the debt: it pays, they do not."""
    start = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"))
    up = [web_pod(f"w{k}", "n1", f"u{k}") for k in (3, 4)]
    scaled = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"), *up)
    repl = web_pod("w5", "n1", "u5")
    repl["metadata"]["creationTimestamp"] = "2025-01-01T00:00:09Z"  # the youngest
    drain = of(A, web_pod("w1", "n1", "u1"), *up, repl)
    reads = _ledger_reads(start, scaled, drain)
    assert [r for r, _ in reads] == [{}, {}, {"shop/w5": "n3"}]


def test_the_ledger_pays_with_a_replacement_seen_before_the_drained_pod_left() -> None:
    """The replacement arrives a read before its drained pod is seen gone (the pod was never
    seen terminating): within the tail it still pays."""
    start = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"))
    early = of(
        A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"), web_pod("w9", "n1", "u9")
    )
    late = of(A, web_pod("w1", "n1", "u1"), web_pod("w9", "n1", "u9"))
    reads = _ledger_reads(start, early, late)
    assert [r for r, _ in reads] == [{}, {}, {"shop/w9": "n3"}]


def test_of_the_pods_seen_before_the_debt_the_latest_pays() -> None:
    """A scale-up pod arrives, then the replacement (the watch delivered it before its drained
    pod's termination), then the drain is seen: both arrived before the debt, and the one
    that came last pays, not the older scale-up pod."""
    start = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"))
    up = web_pod("w3", "n1", "u3")
    up["metadata"]["creationTimestamp"] = "2025-01-01T00:00:03Z"
    repl = web_pod("w9", "n1", "u9")
    repl["metadata"]["creationTimestamp"] = "2025-01-01T00:00:09Z"
    scaled = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"), up)
    early = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"), up, repl)
    late = of(A, web_pod("w1", "n1", "u1"), up, repl)
    reads = _ledger_reads(start, scaled, early, late)
    assert [r for r, _ in reads] == [{}, {}, {}, {"shop/w9": "n3"}]


def test_a_pod_the_runner_knows_replaces_its_own_eviction_pays_no_drain() -> None:
    """The runner's own replacement arrived just before the drain: it is not the drain's."""
    start = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"))
    own = web_pod("w8", "n1", "u8")
    own["metadata"]["creationTimestamp"] = "2025-01-01T00:00:09Z"
    repl = web_pod("w9", "n1", "u9")
    repl["metadata"]["creationTimestamp"] = "2025-01-01T00:00:05Z"
    early = of(A, C, web_pod("w1", "n1", "u1"), web_pod("w2", "n3", "u2"), own, repl)
    late = of(A, web_pod("w1", "n1", "u1"), own, repl)
    ledger = DrainLedger(tail=30)
    paid = [
        ledger.update(s, NOW + 5 * i, mine={"shop/w8"})[0]
        for i, s in enumerate((start, early, late))
    ]
    assert paid == [{}, {}, {"shop/w9": "n3"}]


# -- the runner: a repair right after a drain ---------------------------------------------------


class Drained(FakeCluster):
    """Zones a, b, c with two web pods each, each pod a minute younger than the one before,
    and an empty node in zone c: the one Karpenter launched to replace node-c."""

    def __init__(self) -> None:
        super().__init__({"a": 2, "b": 2, "c": 2})
        self.nodes["node-c2"] = zone_node("node-c2", "c")
        self.stubborn = False

    def _add(self, node: str) -> str:
        if node not in getattr(self, "nodes", {node: None}):
            node = "node-c2"  # the scheduler's pick for zone c once node-c is gone
        name = super()._add(node)
        n = int(name.split("-")[1])
        self.pods[name]["metadata"]["creationTimestamp"] = f"2025-01-01T00:{n:02d}:00Z"
        return name

    def taint(self) -> None:
        self.nodes["node-c"] = tainted(self.nodes["node-c"])

    def drain(self, *, delete_node: bool = True) -> list[str]:
        """node-c's pods leave and their replacements land in zone a (zone c's new node was
        not Ready yet); node-c is deleted. The replacements' names."""
        for name in [n for n, p in self.pods.items() if p["spec"]["nodeName"] == "node-c"]:
            del self.pods[name]
        if delete_node:
            del self.nodes["node-c"]
        return [self._add("node-a"), self._add("node-a")]


def _runner(fake: FakeCluster, wall: Wall, guard: float) -> Runner:
    return fake_runner(fake, wall, max_waves=1, thrash_guard_seconds=guard)


def _after_drain(guard: float, *, seen_tainted: bool) -> tuple[list[str], list[str], list[str]]:
    """Runs before the drain (balanced: nothing evicted), then one after it: the drain's
    replacements, the run's evictions and its thrash-guard skips."""
    fake, wall = Drained(), Wall()
    runner = _runner(fake, wall, guard)
    runner.run_once("r1")
    fake.taint()
    with structlog.testing.capture_logs() as logged:
        if seen_tainted:
            wall.now += 5
            runner.run_once("r2")
        assert fake.posts == []
        replacements = fake.drain()
        wall.now += 5
        report = runner.run_once("r3")
    seen = [(e["controller"], e["node"]) for e in logged if e["event"] == "drain.seen"]
    assert seen == ([("shop/ReplicaSet/web-rs", "node-c")] if guard else [])
    planned = [e["held_by"] for e in logged if e["event"] == "wave.planned"]
    assert planned and all(p == {} for p in planned)  # nothing held any view above maxSkew
    assert report.first_plan is not None
    held = [s.name for s in report.first_plan.skipped if s.reason.code == "thrash-guard"]
    return replacements, [name for name, _ in fake.posts], held


@pytest.mark.parametrize("seen_tainted", [True, False])
def test_the_repair_after_a_drain_takes_older_pods_than_its_replacements(
    seen_tainted: bool,
) -> None:
    """Zones [4, 2, 0] after the drain, maxSkew 1: two evictions from zone a. The youngest
    pods there are the drain's replacements, which the planner would take first; the guard
    holds them and the plan takes the two older pods of zone a instead. Whether a run saw the
    node tainted or only gone, the same."""
    replacements, evicted, held = _after_drain(3600, seen_tainted=seen_tainted)
    assert sorted(held) == sorted(replacements)
    assert sorted(evicted) == ["web-1", "web-2"]
    _, unguarded, none_held = _after_drain(0, seen_tainted=seen_tainted)
    assert sorted(unguarded) == sorted(replacements)
    assert none_held == []


def test_new_pods_after_a_scale_down_are_not_held() -> None:
    """The same counts reached by a scale-down in zone c (its node stays, untainted) and a
    scale-up in zone a: no drain, the planner takes the youngest pods as always."""
    fake, wall = Drained(), Wall()
    runner = _runner(fake, wall, 3600)
    runner.run_once("r1")
    added = fake.drain(delete_node=False)
    wall.now += 5
    report = runner.run_once("r2")
    assert report.first_plan is not None
    assert [s for s in report.first_plan.skipped if s.reason.code == "thrash-guard"] == []
    assert sorted(name for name, _ in fake.posts) == sorted(added)


def test_pods_long_after_a_drain_are_not_its_replacements() -> None:
    """A drain's replacements are those that came with it: pods of the same ReplicaSet
    created two minutes later are not held for it."""
    fake, wall = Drained(), Wall()
    runner = _runner(fake, wall, 3600)
    fake.taint()
    runner.run_once("r1")
    fake.drain()  # the replacements come back to zone a
    wall.now += 5
    runner.run_once("r2")
    wall.now += 120
    late = [fake._add("node-a"), fake._add("node-a")]
    wall.now += 5
    report = runner.run_once("r3")
    assert report.first_plan is not None
    held = {s.name for s in report.first_plan.skipped if s.reason.code == "thrash-guard"}
    assert held and not held & set(late)


# -- drift: a replacement must not land on a node Karpenter is about to replace -----------------


def pool_obj(name: str, version: str | None, value: str | None) -> dict[str, Any]:
    annotations = {}
    if version is not None:
        annotations["karpenter.sh/nodepool-hash-version"] = version
    if value is not None:
        annotations["karpenter.sh/nodepool-hash"] = value
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": {"spec": {"requirements": []}}},
    }


def pool_node(name: str, zone: str, pool: str, value: str | None) -> dict[str, Any]:
    node = zone_node(name, zone)
    node["metadata"]["labels"]["karpenter.sh/nodepool"] = pool
    if value is not None:
        node["metadata"]["annotations"] = {
            "karpenter.sh/nodepool-hash-version": "v3",
            "karpenter.sh/nodepool-hash": value,
        }
    return node


def test_the_hashes_are_read_from_nodes_and_pools() -> None:
    snap = of(
        pool_node("n1", "a", "p", "111"),
        zone_node("n2", "b"),
        pool_obj("p", "v3", "222"),
        pool_obj("half", "v3", None),
    )
    assert {n.name: n.pool_hash for n in snap.nodes} == {"n1": "v3/111", "n2": ""}
    assert {p.name: p.template_hash for p in snap.node_pools} == {"p": "v3/222", "half": ""}


@pytest.mark.parametrize(
    ("node_hash", "pool", "pool_hash", "drift"),
    [
        ("111", ("p", "v3", "222"), "template changed", True),
        ("222", ("p", "v3", "222"), "same template", False),
        ("111", ("p", "v4", "111"), "hash version changed", True),
        (None, ("p", "v3", "222"), "node without the hash", False),
        ("111", ("p", None, "222"), "pool without the version", False),
        ("111", ("other", "v3", "222"), "its pool not read", False),
    ],
)
def test_a_node_has_drifted_when_its_pools_hash_is_not_its_own(
    node_hash: str | None, pool: tuple[str, str | None, str], pool_hash: str, drift: bool
) -> None:
    snap = of(pool_node("n1", "a", "p", node_hash), pool_obj(*pool))
    assert drifted(snap.nodes, snap.node_pools) == ({"n1": "p"} if drift else {}), pool_hash


class Drifting(FakeCluster):
    """Zones [3, 1, 1]: one eviction from zone a, its replacement into zone b or c. Zones b
    and c are Karpenter's, from NodePool "pool", launched from template hash 111."""

    def __init__(self, zones: dict[str, int] | None = None) -> None:
        super().__init__(zones or {"a": 3, "b": 1, "c": 1})
        for zone in "bc":
            self.nodes[f"node-{zone}"] = pool_node(f"node-{zone}", zone, "pool", "111")
        self.pool = pool_obj("pool", "v3", "111")

    def read(self) -> Snapshot:
        self.reads += 1
        return snapshot_from_objects([*self.nodes.values(), *self.pods.values(), self.pool])


def test_no_replacement_is_sent_onto_a_node_karpenter_is_about_to_replace() -> None:
    """The pool's template changes (hash 222): nodes b and c have drifted, every replacement
    may land on one, and the run evicts nothing (skips node-drifting, naming the node and the
    pool). Once the drift has replaced them (the nodes carry the new hash), the repair goes
    on; a one-shot run holds as a loop does."""
    fake, wall = Drifting(), Wall()
    runner = _runner(fake, wall, 3600)
    fake.pool = pool_obj("pool", "v3", "222")
    held = runner.run_once("r1")
    assert fake.posts == []
    assert held.first_plan is not None
    # the planner went around every pod of zone a, and none could go elsewhere
    skips = held.first_plan.skipped
    assert len(skips) == 3
    for skip in skips:
        assert skip.reason.code == "node-drifting"
        assert "drifted from NodePool pool" in skip.reason.detail
        assert "node-b" in skip.reason.detail or "node-c" in skip.reason.detail
    (left,) = held.first_plan.unrepaired
    assert [(h.code, h.pods) for h in left.reasons] == [("node-drifting", 3)]
    for zone in "bc":
        fake.nodes[f"node-{zone}"] = pool_node(f"node-{zone}", zone, "pool", "222")
    wall.now += 60
    runner.run_once("r2")
    assert len(fake.posts) == 1


@pytest.mark.parametrize(("drifted_zone", "sent"), [("c", 1), ("b", 0)])
def test_only_a_drifted_node_in_the_target_domain_holds(drifted_zone: str, sent: int) -> None:
    """Zones [3, 0, 2]: the replacement goes to zone b. A drifted node in zone c holds
    nothing; one in zone b holds the eviction."""
    fake, wall = Drifting({"a": 3, "b": 0, "c": 2}), Wall()
    name = f"node-{drifted_zone}"
    fake.nodes[name] = pool_node(name, drifted_zone, "pool", "000")
    report = _runner(fake, wall, 3600).run_once("r1")
    assert report.first_plan is not None
    assert len(fake.posts) == sent
    skipped = [s.reason.code for s in report.first_plan.skipped]
    # held: every pod of the over-full zones a (3) and c (2) would land in the drifted zone b,
    # the least populated, and none has anywhere else to go
    assert skipped == ([] if sent else ["node-drifting"] * 5)


def test_the_plan_log_says_what_holds_views_above_max_skew() -> None:
    """Zones [2, 0, 0] right after a drain, zone a holding the drain's two replacements only:
    both guarded, nothing is evicted, and wave.planned's held_by counts the pods holding the
    view (thrash-guard)."""
    fake, wall = Drained(), Wall()
    runner = _runner(fake, wall, 3600)
    runner.run_once("r1")
    for name in ("web-1", "web-2", "web-3", "web-4"):
        del fake.pods[name]  # gone from nodes that stay: no drain
    fake.drain()
    wall.now += 5
    with structlog.testing.capture_logs() as logged:
        report = runner.run_once("r2")
    assert fake.posts == []
    assert report.first_plan is not None and report.first_plan.evictions == ()
    (held_by,) = [e["held_by"] for e in logged if e["event"] == "wave.planned"]
    assert held_by == {"thrash-guard": 2}, held_by
