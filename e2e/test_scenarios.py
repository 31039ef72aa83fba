"""Scenarios a, c, h (issue 5), p and r (issue 10) against the real control plane (opt-in: --e2e).

Each test builds its skew on its own pool of fake kwok nodes (labelled and tainted with the
test's namespace, as in test_live.py), drives the real ``rebalancer run`` command, and judges it
by its JSON report, by the audit log (rebalancer's requests carry the ``rebalancer/`` user
agent) and by where the replacements, which the real ReplicaSet controller creates and the real
kube-scheduler places, end up.

- a: scale-down skew: exactly ``minimal.min_moves`` evictions, then balanced; a second run evicts
  nothing.
- c: priority: in an over-full zone shared by two Deployments, the lower-priority pod goes.
- h: zone + hostname together, and minDomains: converge without churn (no pod evicted twice, no
  replacement back in its old domain).
- p: a PodDisruptionBudget's budget is spent one wave at a time: no 429 ever comes back.
- r: pods of a Deployment's replaced revision are left alone while its rollout runs.

Every skew is built so that each replacement has exactly one legal domain, or only legal domains
that are all fine, so the assertions hold whatever node the scheduler picks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_live import (
    POOL,
    add_pool_nodes,
    audit_mark,
    evictions,
    explain,
    need_own_control_plane,
    rebalancer,
    rebalancer_requests,
    wait_audit,
    write_policy,
)
from rebalancer.core.minimal import min_moves

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
APP = "web"
SELECTOR = f"app={APP}"
IMAGE = "registry.k8s.io/pause:3.10"  # kwok runs nothing
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
RUN_FLAGS = ("--wave-timeout", "90s", "--max-waves", "10", "-o", "json")


# -- objects ------------------------------------------------------------------------------------


def spread(key: str, max_skew: int = 1, min_domains: int | None = None) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": APP}},
    }
    if min_domains is not None:
        constraint["minDomains"] = min_domains
    return constraint


def deployment(
    ns: str,
    name: str,
    replicas: int,
    constraints: Sequence[Mapping[str, Any]],
    *,
    labels: Mapping[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A pause Deployment on the test's pool; its pods carry ``app=web`` plus ``labels``."""
    pod_labels = {"app": APP, **(labels or {})}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "nodeSelector": {POOL: ns},
        "tolerations": [{"key": POOL, "operator": "Exists"}],
        "topologySpreadConstraints": [dict(c) for c in constraints],
        "containers": [
            {
                "name": "main",
                "image": IMAGE,
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": pod_labels},
            "template": {"metadata": {"labels": pod_labels}, "spec": spec},
        },
    }


# -- the pool and its state ---------------------------------------------------------------------


class Pool:
    """The test's own fake nodes (see test_live.add_pool_nodes); deleted after the test."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        self.cluster = cluster
        self.ns = ns
        self.nodes: list[str] = []

    def add(self, zones: dict[str, int]) -> list[str]:
        names = add_pool_nodes(self.cluster, self.ns, zones)
        self.nodes += names
        return names

    def labels(self) -> dict[str, dict[str, str]]:
        items = self.cluster.get_json("nodes", "-l", f"{POOL}={self.ns}")["items"]
        return {n["metadata"]["name"]: n["metadata"]["labels"] for n in items}

    def in_zone(self, zone: str) -> list[str]:
        return sorted(n for n, lab in self.labels().items() if lab.get(ZONE) == zone)

    def pods(self, selector: str = SELECTOR) -> list[dict[str, Any]]:
        """Bound, non-terminating pods."""
        return [
            p
            for p in self.cluster.pods(self.ns, selector)
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]

    def counts(self, key: str = ZONE, selector: str = SELECTOR) -> dict[str, int]:
        """Matching pods per domain of ``key``, every domain of the pool listed (0 if empty)."""
        labels = self.labels()
        counts = dict.fromkeys(sorted({lab[key] for lab in labels.values()}), 0)
        for p in self.pods(selector):
            counts[labels[p["spec"]["nodeName"]][key]] += 1
        return counts

    def skew(self, key: str = ZONE, min_domains: int = 1) -> int:
        """Skew as the scheduler sees it: global minimum 0 below minDomains domains."""
        counts = self.counts(key)
        floor = 0 if len(counts) < min_domains else min(counts.values())
        return max(counts.values()) - floor

    def domain_of(self, node: str, key: str) -> str:
        return self.labels()[node][key]

    def cordon(self, *nodes: str) -> None:
        if nodes:
            self.cluster.kubectl("cordon", *nodes)

    def uncordon(self, *nodes: str) -> None:
        if nodes:
            self.cluster.kubectl("uncordon", *nodes)

    def settle(self, replicas: int, timeout: float = 120) -> list[dict[str, Any]]:
        """Wait for exactly ``replicas`` Ready pods and no terminating one left."""
        self.cluster.wait_pods_running(self.ns, SELECTOR, replicas, timeout=timeout)

        def all_gone() -> list[dict[str, Any]] | None:
            pods = self.cluster.pods(self.ns, SELECTOR)
            return pods if len(pods) == replicas else None

        return self.cluster.wait_for(
            f"{replicas} pods and none terminating in {self.ns}", all_gone, timeout=timeout
        )

    def scale(self, name: str, replicas: int, total: int | None = None) -> None:
        """Scale one Deployment; wait until ``total`` (default ``replicas``) app=web pods."""
        self.cluster.kubectl("scale", "deployment", name, "-n", self.ns, f"--replicas={replicas}")
        self.settle(replicas if total is None else total)

    def cleanup(self) -> None:
        if self.nodes:
            self.cluster.kubectl("delete", "node", *self.nodes, "--wait=false", check=False)


@pytest.fixture
def pool(cluster: Cluster, namespace: str) -> Iterator[Pool]:
    need_own_control_plane(cluster)
    p = Pool(cluster, namespace)
    yield p
    p.cleanup()


# -- running rebalancer and reading what it did -------------------------------------------------


def run(cluster: Cluster, ns: str, policy: Path, expect_exit: int = 0) -> dict[str, Any]:
    ran = rebalancer(cluster, "run", "-n", ns, "--policy", str(policy), *RUN_FLAGS)
    assert ran.returncode == expect_exit, explain(ran)
    report: dict[str, Any] = json.loads(ran.stdout)
    return report


def evicted_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in report["results"] if r["outcome"] == "evicted"]


def audited_evictions(cluster: Cluster, mark: int, ns: str, expected: int) -> list[Any]:
    """rebalancer's successful (201) evictions since ``mark``: exactly ``expected`` of them."""

    def ok() -> list[Any]:
        return [
            e
            for e in evictions(rebalancer_requests(cluster, mark, ns))
            if e["responseStatus"]["code"] in (200, 201)
        ]

    if expected:
        wait_audit(cluster, f"{expected} evictions in the audit log", lambda: len(ok()) >= expected)
    time.sleep(2)  # the batch audit backend: let any further entry arrive
    sent = ok()
    assert len(sent) == expected, [e["objectRef"]["name"] for e in sent]
    return sent


def assert_second_run_evicts_nothing(cluster: Cluster, ns: str, policy: Path) -> None:
    mark = audit_mark(cluster)
    again = run(cluster, ns, policy)
    assert again["summary"]["evicted"] == 0, again["summary"]
    assert again["plan"]["evictions"] == [], again["plan"]
    assert again["summary"]["end"] == "balanced", again["summary"]
    time.sleep(2)
    assert evictions(rebalancer_requests(cluster, mark, ns)) == []


def assert_no_churn(
    pool: Pool,
    report: Mapping[str, Any],
    sent: Sequence[Any],
    before: Mapping[str, dict[str, Any]],
    keys: Sequence[str],
) -> None:
    """No pod evicted twice, no replacement evicted, no replacement back in its old domain.

    ``before`` are the pods (by uid) before the run. The replacements are the pods the run's
    report names, checked against the pods that are new since then (same ReplicaSet, created
    by the ReplicaSet controller after the eviction).
    """
    uids = [e["requestObject"]["deleteOptions"]["preconditions"]["uid"] for e in sent]
    assert len(uids) == len(set(uids)), f"a pod was evicted twice: {uids}"
    assert set(uids) <= set(before), "a replacement (a pod created during the run) was evicted"
    now = {p["metadata"]["uid"]: p for p in pool.pods()}
    new = {p["metadata"]["name"]: p for uid, p in now.items() if uid not in before}
    rows = evicted_rows(report)
    assert {r["uid"] for r in rows} == set(uids)
    replacements = {r["uid"]: str(r["replacement"]).split("/")[-1] for r in rows}
    assert sorted(replacements.values()) == sorted(new), (replacements, sorted(new))
    for uid, name in replacements.items():
        old, repl = before[uid], new[name]
        old_owner = old["metadata"]["ownerReferences"][0]["uid"]
        assert repl["metadata"]["ownerReferences"][0]["uid"] == old_owner
        for key in keys:
            was = pool.domain_of(old["spec"]["nodeName"], key)
            went = pool.domain_of(repl["spec"]["nodeName"], key)
            assert went != was, f"{name}, replacing {old['metadata']['name']}, is back in {was}"


def pdb_allows(cluster: Cluster, ns: str) -> int | None:
    pdb = cluster.get_json("pdb", APP, "-n", ns)
    status = pdb.get("status", {})
    if status.get("observedGeneration", 0) < pdb["metadata"]["generation"]:
        return None
    allowed: int | None = status.get("disruptionsAllowed")
    return allowed


# -- a: scale-down skew -------------------------------------------------------------------------


def test_a_scale_down_skew_repaired_with_the_fewest_evictions(
    cluster: Cluster, pool: Pool, tmp_path: Path
) -> None:
    """Cordon, scale up, uncordon, scale down by deletion cost: exactly min_moves evictions."""
    ns = pool.ns
    (a,) = pool.add({"zone-a": 1})
    pool.add({"zone-b": 1, "zone-c": 1})
    cluster.apply(
        [
            deployment(ns, APP, 6, [spread(ZONE)]),
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": APP, "namespace": ns},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}},
            },
        ]
    )
    pool.settle(6)
    assert pool.counts() == {"zone-a": 2, "zone-b": 2, "zone-c": 2}  # maxSkew 1 forces it
    # Scale up with zone-a cordoned: zone-a's 2 pods cap b and c at 3 each.
    pool.cordon(a)
    pool.scale(APP, 8)
    assert pool.counts() == {"zone-a": 2, "zone-b": 3, "zone-c": 3}
    pool.uncordon(a)
    # Scale down: the ReplicaSet deletes the cheapest pods first, i.e. zone-a's.
    for p in pool.pods():
        if p["spec"]["nodeName"] == a:
            cluster.kubectl("annotate", "pod", p["metadata"]["name"], "-n", ns,
                            f"{DELETION_COST}=-100")  # fmt: skip
    pool.scale(APP, 6)
    counts = pool.counts()
    assert counts == {"zone-a": 0, "zone-b": 3, "zone-c": 3}, counts
    expected = min_moves(list(counts.values()), 1)
    assert expected == 2
    # Each replacement then has one legal zone: [0,2,3] -> zone-a, [1,2,2] -> zone-a.
    cluster.wait_for("PDB allows 1", lambda: pdb_allows(cluster, ns) == 1, timeout=60)

    policy = write_policy(tmp_path, "a")
    mark = audit_mark(cluster)
    report = run(cluster, ns, policy)
    assert report["plan"]["summary"]["evictions"] == expected, report["plan"]
    assert report["summary"]["evicted"] == expected, report["summary"]
    assert len(evicted_rows(report)) == expected, report["results"]
    assert report["summary"]["end"] == "balanced", report["summary"]
    sent = audited_evictions(cluster, mark, ns, expected)
    assert {e["objectRef"]["name"] for e in sent} == {r["name"] for r in evicted_rows(report)}

    pool.settle(6)
    assert pool.skew() <= 1, pool.counts()
    assert pool.counts() == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
    assert_second_run_evicts_nothing(cluster, ns, policy)


# -- c: priority --------------------------------------------------------------------------------


@pytest.fixture
def priority_classes(cluster: Cluster, namespace: str) -> Iterator[dict[str, str]]:
    names = {"low": f"{namespace}-low", "high": f"{namespace}-high"}
    cluster.apply(
        [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": names[tier]},
                "value": value,
                "preemptionPolicy": "Never",
            }
            for tier, value in (("low", 100), ("high", 10000))
        ]
    )
    yield names
    cluster.kubectl("delete", "priorityclass", *names.values(), "--wait=false", check=False)


def test_c_the_lower_priority_pod_is_the_one_evicted(
    cluster: Cluster, pool: Pool, priority_classes: dict[str, str], tmp_path: Path
) -> None:
    """zone-a holds 1 low (100) and 2 high (10000) pods of one spread: the low one goes."""
    ns = pool.ns
    pool.add({"zone-a": 1})
    # Same constraint and selector (app=web) on both, so "cannot return" does not separate the
    # candidates; the low pod is the oldest, so "youngest first" would pick a high one.
    low = deployment(ns, "web-low", 1, [spread(ZONE)], labels={"tier": "low"},
                     priority_class=priority_classes["low"])  # fmt: skip
    high = deployment(ns, "web-high", 2, [spread(ZONE)], labels={"tier": "high"},
                      priority_class=priority_classes["high"])  # fmt: skip
    cluster.apply(low)
    pool.settle(1)
    time.sleep(1.1)  # creationTimestamp has 1 s resolution
    cluster.apply(high)
    pool.settle(3)
    pool.add({"zone-b": 1, "zone-c": 1})
    # [3,0,0]: the 2 new high pods can only go one to zone-b and one to zone-c.
    pool.scale("web-high", 4, total=5)
    counts = pool.counts()
    assert counts == {"zone-a": 3, "zone-b": 1, "zone-c": 1}, counts
    assert min_moves(list(counts.values()), 1) == 1
    (low_pod,) = pool.pods("tier=low")
    assert low_pod["spec"]["priority"] == 100
    assert {p["spec"]["priority"] for p in pool.pods("tier=high")} == {10000}

    mark = audit_mark(cluster)
    report = run(cluster, ns, write_policy(tmp_path, "c"))
    (planned,) = report["plan"]["evictions"]
    assert planned["name"] == low_pod["metadata"]["name"], planned
    assert planned["priority"] == 100, planned
    (row,) = evicted_rows(report)
    assert row["uid"] == low_pod["metadata"]["uid"]
    (sent,) = audited_evictions(cluster, mark, ns, 1)
    assert sent["objectRef"]["name"] == low_pod["metadata"]["name"]
    precondition = sent["requestObject"]["deleteOptions"]["preconditions"]["uid"]
    assert precondition == low_pod["metadata"]["uid"]
    pool.settle(5)
    assert pool.skew() <= 1, pool.counts()
    assert {p["spec"]["priority"] for p in pool.pods("tier=high")} == {10000}
    assert len(pool.pods("tier=high")) == 4  # no high pod was touched


# -- h: harder constraints converge without churn -----------------------------------------------


def test_h1_zone_and_hostname_together_converge_without_churn(
    cluster: Cluster, pool: Pool, tmp_path: Path
) -> None:
    """maxSkew 1 on zone and on hostname, 6 pods piled on zone-a's 2 of 6 nodes."""
    ns = pool.ns
    pool.add({"zone-a": 2})
    cluster.apply(deployment(ns, APP, 6, [spread(ZONE), spread(HOST)]))
    pool.settle(6)
    pool.add({"zone-b": 2, "zone-c": 2})
    zones, hosts = pool.counts(ZONE), pool.counts(HOST)
    assert zones == {"zone-a": 6, "zone-b": 0, "zone-c": 0}, zones
    assert sorted(hosts.values()) == [0, 0, 0, 0, 3, 3], hosts
    # Both views need 4 moves, and 4 suffice (2 from each zone-a node, one to each new node).
    assert min_moves(list(zones.values()), 1) == 4
    assert min_moves(list(hosts.values()), 1) == 4
    # Every replacement's legal nodes are empty nodes outside zone-a whatever the scheduler
    # picked before (zone-a stays above the others' minimum + 1 until the last move), so no
    # replacement can land back in its zone or on its node.
    before = {p["metadata"]["uid"]: p for p in pool.pods()}

    policy = write_policy(tmp_path, "h1")
    mark = audit_mark(cluster)
    report = run(cluster, ns, policy)
    assert report["summary"]["end"] == "balanced", report["summary"]
    evicted = report["summary"]["evicted"]
    assert evicted == 4, report["results"]
    sent = audited_evictions(cluster, mark, ns, evicted)

    pool.settle(6)
    assert pool.skew(ZONE) <= 1, pool.counts(ZONE)
    assert pool.skew(HOST) <= 1, pool.counts(HOST)
    assert_no_churn(pool, report, sent, before, (ZONE, HOST))
    assert_second_run_evicts_nothing(cluster, ns, policy)


def test_h2_min_domains_converges_without_churn(
    cluster: Cluster, pool: Pool, tmp_path: Path
) -> None:
    """maxSkew 2, minDomains 3, pods [3, 1] in the only 2 zones left: a violation only because
    of minDomains (global minimum 0), repaired by one eviction into zone-b."""
    ns = pool.ns
    a, b, c = (pool.add({z: 1})[0] for z in ("zone-a", "zone-b", "zone-c"))
    cluster.apply(deployment(ns, APP, 0, [spread(ZONE, max_skew=2, min_domains=3)]))

    # Steer each new pod by cordoning the other zones (cordoned domains still count).
    def grow(replicas: int, onto: str) -> None:
        pool.cordon(*(n for n in (a, b, c) if n != onto))
        pool.uncordon(onto)
        pool.scale(APP, replicas)

    for replicas, onto in ((2, a), (3, b), (4, c), (5, a)):
        grow(replicas, onto)
    pool.uncordon(a, b, c)
    assert pool.counts() == {"zone-a": 3, "zone-b": 1, "zone-c": 1}, pool.counts()
    (in_c,) = [p for p in pool.pods() if p["spec"]["nodeName"] == c]
    cluster.kubectl("annotate", "pod", in_c["metadata"]["name"], "-n", ns,
                    f"{DELETION_COST}=-100")  # fmt: skip
    pool.scale(APP, 4)
    cluster.kubectl("delete", "node", c)
    pool.nodes.remove(c)
    cluster.wait_for("zone-c gone", lambda: "zone-c" not in pool.counts(), timeout=30)
    counts = pool.counts()
    assert counts == {"zone-a": 3, "zone-b": 1}, counts
    assert pool.skew(ZONE, min_domains=3) == 3  # without minDomains it would be 2: no violation
    expected = min_moves(list(counts.values()), 2, min_domains=3)
    assert expected == 1
    # The replacement's only legal zone is zone-b (zone-a: 2 + 1 - 0 > 2).
    before = {p["metadata"]["uid"]: p for p in pool.pods()}

    policy = write_policy(tmp_path, "h2")
    mark = audit_mark(cluster)
    report = run(cluster, ns, policy)
    assert report["summary"]["evicted"] == expected, report["results"]
    assert report["summary"]["end"] == "balanced", report["summary"]
    sent = audited_evictions(cluster, mark, ns, expected)

    pool.settle(4)
    assert pool.skew(ZONE, min_domains=3) <= 2, pool.counts()
    assert pool.counts() == {"zone-a": 2, "zone-b": 2}
    assert_no_churn(pool, report, sent, before, (ZONE,))
    assert_second_run_evicts_nothing(cluster, ns, policy)


# -- p: a PodDisruptionBudget is a budget each wave spends ---------------------------------------


@pytest.mark.k8s_versions
def test_p_pdb_budget_is_spent_one_wave_at_a_time(
    cluster: Cluster, pool: Pool, tmp_path: Path
) -> None:
    """Two pods of one Deployment under a PDB with maxUnavailable 1 are both in the plan:
    wave 1 evicts one, wave 2 (re-planned once the replacement is Ready and the PDB has its
    budget back) the other; the API server never answers 429."""
    ns = pool.ns
    pool.add({"zone-a": 1})
    cluster.apply(
        [
            deployment(ns, APP, 3, [spread(ZONE)]),
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": APP, "namespace": ns},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}},
            },
        ]
    )
    pool.settle(3)
    pool.add({"zone-b": 1, "zone-c": 1})
    counts = pool.counts()
    assert counts == {"zone-a": 3, "zone-b": 0, "zone-c": 0}, counts
    assert min_moves(list(counts.values()), 1) == 2
    # [3,0,0] -> the first replacement's legal zones are b and c, the second's the empty one.
    cluster.wait_for("PDB allows 1", lambda: pdb_allows(cluster, ns) == 1, timeout=60)
    before = {p["metadata"]["uid"]: p for p in pool.pods()}

    policy = write_policy(tmp_path, "p")
    mark = audit_mark(cluster)
    report = run(cluster, ns, policy)
    planned = report["plan"]["evictions"]
    assert [e["wave"] for e in planned] == [1, 2], planned
    assert all(e["podDisruptionBudget"] == APP for e in planned), planned
    assert all("429" not in e["reason"] for e in planned), planned
    rows = evicted_rows(report)
    assert [r["wave"] for r in rows] == [1, 2], report["results"]
    assert report["summary"]["evicted"] == 2, report["summary"]
    assert report["summary"]["blockedByPdb"] == 0, report["summary"]
    assert report["summary"]["end"] == "balanced", report["summary"]
    sent = audited_evictions(cluster, mark, ns, 2)
    codes = [e["responseStatus"]["code"] for e in evictions(rebalancer_requests(cluster, mark, ns))]
    assert 429 not in codes, codes
    assert len(codes) == 2, codes
    # Between the waves the runner read the PDB until its budget was back (GET, 200).
    pdb_reads = [
        e
        for e in rebalancer_requests(cluster, mark, ns)
        if e["verb"] == "get" and e["objectRef"].get("resource") == "poddisruptionbudgets"
    ]
    assert pdb_reads and all(e["responseStatus"]["code"] == 200 for e in pdb_reads), pdb_reads

    pool.settle(3)
    assert pool.counts() == {"zone-a": 1, "zone-b": 1, "zone-c": 1}, pool.counts()
    assert_no_churn(pool, report, sent, before, (ZONE,))
    assert_second_run_evicts_nothing(cluster, ns, policy)


# -- r: a Deployment in the middle of a rollout is left alone ------------------------------------


def plan_json(cluster: Cluster, ns: str, *flags: str) -> dict[str, Any]:
    planned = rebalancer(cluster, "plan", "-n", ns, "-o", "json", *flags)
    assert planned.returncode == 0, explain(planned)
    result: dict[str, Any] = json.loads(planned.stdout)
    return result


@pytest.mark.k8s_versions
def test_r_pods_of_the_replaced_revision_are_skipped_while_the_rollout_runs(
    cluster: Cluster, pool: Pool
) -> None:
    """[3,0,0], then a rollout whose new pod cannot be scheduled: the real Deployment controller
    keeps the 3 old pods (revision 1) while revision 2 waits, so the plan skips them
    (``rollout``) and evicts nothing; once the rollout is paused they are candidates again."""
    ns = pool.ns
    pool.add({"zone-a": 1})
    cluster.apply(deployment(ns, APP, 3, [spread(ZONE)]))
    pool.settle(3)
    pool.add({"zone-b": 1, "zone-c": 1})
    old = {p["metadata"]["name"] for p in pool.pods()}
    assert pool.counts() == {"zone-a": 3, "zone-b": 0, "zone-c": 0}
    assert plan_json(cluster, ns)["summary"]["evictions"] == 2

    # Revision 2 asks for a node label no node has: its one surge pod stays Pending.
    patch = {"spec": {"template": {"spec": {"nodeSelector": {POOL: ns, "e2e-nowhere": "x"}}}}}
    cluster.kubectl("patch", "deployment", APP, "-n", ns, "--type=merge", "-p", json.dumps(patch))

    def rolling() -> bool:
        d = cluster.get_json("deployment", APP, "-n", ns)
        status = d.get("status", {})
        progressing = {c["type"]: c for c in status.get("conditions", [])}.get("Progressing", {})
        return bool(
            d["metadata"]["annotations"].get("deployment.kubernetes.io/revision") == "2"
            and status.get("observedGeneration", 0) >= d["metadata"]["generation"]
            # NewReplicaSetCreated, FoundNewReplicaSet or ReplicaSetUpdated, depending on how far
            # the controller got; only a False status (deadline exceeded) ends the rollout.
            and progressing.get("status") == "True"
        )

    cluster.wait_for("rollout to revision 2 under way", rolling, timeout=60)
    mid = plan_json(cluster, ns)
    assert mid["evictions"] == [], mid["evictions"]
    skipped = {s["name"]: s["code"] for s in mid["skipped"]}
    assert skipped == dict.fromkeys(old, "rollout"), skipped

    cluster.kubectl("rollout", "pause", "deployment", APP, "-n", ns)

    def paused() -> bool:
        d = cluster.get_json("deployment", APP, "-n", ns)
        return bool(d["status"].get("observedGeneration", 0) >= d["metadata"]["generation"])

    cluster.wait_for("paused rollout observed", paused, timeout=60)
    # The surge pod waits (Pending, younger than --unplaced-grace): plan, as run, holds the
    # workload first (SPEC §3.12); past the grace (0s here) the old pods go.
    held = plan_json(cluster, ns)
    assert held["evictions"] == [], held["evictions"]
    assert {r["code"] for u in held["unrepaired"] for r in u["reasons"]} == {"pods-unplaced"}
    after = plan_json(cluster, ns, "--unplaced-grace", "0s")
    assert len(after["evictions"]) == 2, after
    assert {e["name"] for e in after["evictions"]} <= old
    assert not [s for s in after["skipped"] if s["code"] == "rollout"], after["skipped"]
