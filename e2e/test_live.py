"""rebalancer against the real control plane: the live scenarios of issue 3 (opt-in: --e2e).

Each test drives the real ``rebalancer`` command (a subprocess) and judges it by what the API
server saw: the audit log records every request, and rebalancer's are the ones whose user agent
starts with ``rebalancer/``. Every scenario builds its own imbalance on its own fake nodes (a
"pool" labelled and tainted with the test's namespace), so scenarios do not disturb each other
or the fixture's six nodes: 4 replicas are scheduled while only zone-a has nodes, then zone-b
and zone-c nodes are added, leaving a hard zone constraint (maxSkew 1) at [4, 0, 0].

The last test (scenario e) reads the whole audit log: no pod DELETE and no grace-0 eviction
ever came from rebalancer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.controlplane import (
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_ANNOTATION_VALUE,
    Cluster,
    ControlPlane,
)
from rebalancer.cluster.read.reader import DEFAULT_PAGE_SIZE

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
ZONE = "topology.kubernetes.io/zone"
POOL = "e2e-pool"
APP = "web"
AGENT = "rebalancer/"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


# -- helpers ------------------------------------------------------------------------------------


def rebalancer(
    cluster: Cluster, *args: str, kubeconfig: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the real command line against this cluster only; never raises on exit codes. An
    offline command (``--snapshot``) gets no ``--kubeconfig``: it would be refused (exit 2)."""
    kc = kubeconfig or cluster.kubeconfig
    cluster.assert_own_cluster(kc)
    to_cluster = () if "--snapshot" in args else ("--kubeconfig", str(kc))
    return subprocess.run(
        [sys.executable, "-m", "rebalancer", *args, *to_cluster],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def need_own_control_plane(cluster: Cluster) -> ControlPlane:
    if not isinstance(cluster, ControlPlane):
        pytest.skip("needs the local control plane (fake kwok nodes and the audit log)")
    return cluster


def pool_node(ns: str, zone: str, index: int) -> dict[str, Any]:
    name = f"{ns}-{zone}-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                ZONE: zone,
                POOL: ns,
            },
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
        },
        "spec": {"taints": [{"key": POOL, "value": ns, "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        },
    }


def add_pool_nodes(cluster: Cluster, ns: str, zones: dict[str, int]) -> list[str]:
    manifests = [pool_node(ns, z, i) for z, n in zones.items() for i in range(n)]
    cluster.apply(manifests)
    names = [m["metadata"]["name"] for m in manifests]
    cluster.wait_for(
        f"pool nodes {names} Ready", lambda: all(cluster.node_ready(n) for n in names), timeout=90
    )
    return names


def workload(ns: str, replicas: int, grace: int, pdb_min_available: int | None) -> list[Any]:
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": APP, "namespace": ns},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": APP}},
                "template": {
                    "metadata": {"labels": {"app": APP}},
                    "spec": {
                        "terminationGracePeriodSeconds": grace,
                        "nodeSelector": {POOL: ns},
                        "tolerations": [{"key": POOL, "operator": "Exists"}],
                        "topologySpreadConstraints": [
                            {
                                "maxSkew": 1,
                                "topologyKey": ZONE,
                                "whenUnsatisfiable": "DoNotSchedule",
                                "labelSelector": {"matchLabels": {"app": APP}},
                            }
                        ],
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox:1.36",
                                "command": ["sleep", "3600"],
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                    },
                },
            },
        }
    ]
    if pdb_min_available is not None:
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": APP, "namespace": ns},
                "spec": {
                    "minAvailable": pdb_min_available,
                    "selector": {"matchLabels": {"app": APP}},
                },
            }
        )
    return objects


def zone_counts(cluster: Cluster, ns: str) -> Counter[str]:
    zones = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE, "")
        for n in cluster.get_json("nodes", "-l", f"{POOL}={ns}")["items"]
    }
    pods = [
        p
        for p in cluster.pods(ns, f"app={APP}")
        if not p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName")
    ]
    return Counter(zones[p["spec"]["nodeName"]] for p in pods)


def pdb_settled(cluster: Cluster, ns: str, allowed: int) -> bool:
    pdb = cluster.get_json("pdb", APP, "-n", ns)
    status = pdb.get("status", {})
    return bool(
        status.get("observedGeneration", 0) >= pdb["metadata"]["generation"]
        and status.get("disruptionsAllowed") == allowed
    )


class Imbalance:
    """A Deployment stuck at [4, 0, 0] over three zones of its own pool of nodes."""

    def __init__(
        self,
        cluster: Cluster,
        ns: str,
        *,
        replicas: int = 4,
        grace: int = 2,
        pdb_min_available: int | None = None,
        zone_a_nodes: int = 2,
    ) -> None:
        self.cluster = cluster
        self.ns = ns
        self.replicas = replicas
        self.nodes = add_pool_nodes(cluster, ns, {"zone-a": zone_a_nodes})
        cluster.apply(workload(ns, replicas, grace, pdb_min_available))
        cluster.wait_pods_running(ns, f"app={APP}", replicas, timeout=120)
        self.nodes += add_pool_nodes(cluster, ns, {"zone-b": 1, "zone-c": 1})
        assert zone_counts(cluster, ns) == Counter({"zone-a": replicas})

    def cleanup(self) -> None:
        self.cluster.kubectl("delete", "node", *self.nodes, "--wait=false", check=False)


@pytest.fixture
def imbalance(cluster: Cluster, namespace: str) -> Iterator[Callable[..., Imbalance]]:
    need_own_control_plane(cluster)
    made: list[Imbalance] = []

    def make(**kw: Any) -> Imbalance:
        made.append(Imbalance(cluster, namespace, **kw))
        return made[-1]

    yield make
    for m in made:
        m.cleanup()


def audit_mark(cluster: Cluster) -> int:
    """How many audit events exist now: later ones are what a command caused."""
    return len(cluster.audit_events())


def rebalancer_requests(cluster: Cluster, since: int = 0, ns: str | None = None) -> list[Any]:
    """Audit events (ResponseComplete) of requests sent by rebalancer, optionally in one ns."""
    out = []
    for ev in cluster.audit_events()[since:]:
        if not str(ev.get("userAgent", "")).startswith(AGENT):
            continue
        if ev.get("stage") != "ResponseComplete":
            continue
        if ns is not None and ev.get("objectRef", {}).get("namespace") != ns:
            continue
        out.append(ev)
    return out


def evictions(events: Sequence[Any]) -> list[Any]:
    return [e for e in events if e.get("objectRef", {}).get("subresource") == "eviction"]


def write_policy(tmp_path: Path, name: str, **fields: Any) -> Path:
    path = tmp_path / f"{name}.yaml"
    doc = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy", **fields}
    path.write_text(yaml.safe_dump(doc))
    return path


def wait_audit(cluster: Cluster, what: str, probe: Any, timeout: float = 15) -> Any:
    """The audit log is written asynchronously (batch backend): wait for an entry."""
    return cluster.wait_for(what, probe, timeout=timeout, interval=0.25)


# -- f: plan and run --dry-run write nothing ----------------------------------------------------


def test_f_plan_and_dry_run_send_no_write(
    cluster: Cluster, imbalance: Callable[..., Imbalance]
) -> None:
    """Live plan and run --dry-run print the 2-eviction plan; rebalancer sent only GETs."""
    setup: Imbalance = imbalance()
    mark = audit_mark(cluster)
    planned = rebalancer(cluster, "plan", "-n", setup.ns, "-o", "json")
    assert planned.returncode == 0, explain(planned)
    plan = json.loads(planned.stdout)
    dry = rebalancer(cluster, "run", "--dry-run", "-n", setup.ns, "-o", "json")
    assert dry.returncode == 0, explain(dry)
    assert json.loads(dry.stdout) == plan
    assert len(plan["evictions"]) == 2, plan
    wait_audit(
        cluster, "rebalancer's LISTs in the audit log", lambda: rebalancer_requests(cluster, mark)
    )
    time.sleep(2)  # let the batch audit backend flush the rest
    sent = rebalancer_requests(cluster, mark)
    assert sent, "rebalancer's requests must show in the audit log"
    writes = [e for e in sent if e["verb"] in WRITE_VERBS]
    assert writes == [], writes
    lists = [e for e in sent if e["verb"] == "list"]
    page = f"limit={DEFAULT_PAGE_SIZE}"
    assert any(page in e["requestURI"] for e in lists), [e["requestURI"] for e in lists]
    assert zone_counts(cluster, setup.ns) == Counter({"zone-a": 4})


# -- j: snapshot round trip ---------------------------------------------------------------------


@pytest.mark.k8s_versions
def test_j_snapshot_round_trip_gives_the_live_plan(
    cluster: Cluster, imbalance: Callable[..., Imbalance], tmp_path: Path
) -> None:
    """`rebalancer snapshot` then `plan --snapshot` prints exactly the live plan."""
    setup: Imbalance = imbalance()
    for fmt in ("yaml", "json"):
        snap = rebalancer(cluster, "snapshot", "-n", setup.ns, "-o", fmt)
        assert snap.returncode == 0, explain(snap)
        path = tmp_path / f"snapshot.{fmt}"
        path.write_text(snap.stdout)
        live = rebalancer(cluster, "plan", "-n", setup.ns, "-o", "json")
        offline = subprocess.run(
            [sys.executable, "-m", "rebalancer", "plan", "--snapshot", str(path), "-n", setup.ns,
             "-o", "json"],
            capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        )  # fmt: skip
        assert live.returncode == 0, explain(live)
        assert offline.returncode == 0, explain(offline)
        # The live plan ends with the server's version and gates; a snapshot holds no server.
        live_doc = json.loads(live.stdout)
        assert live_doc.pop("server")["version"].startswith("v1."), live.stdout
        assert json.loads(offline.stdout) == live_doc
        assert offline.stdout.startswith(live.stdout.split(',\n  "server"')[0])  # same bytes
        assert len(live_doc["evictions"]) == 2


# -- l: the summary's next run, and explain, against the cluster ------------------------------


def test_l_run_evicts_what_the_summary_said_and_explain_reads_the_cluster(
    cluster: Cluster, imbalance: Callable[..., Imbalance], tmp_path: Path
) -> None:
    """`explain -n NS POD` on the live cluster says what `explain --snapshot` says on a
    snapshot of it; `run` then evicts the pods the plan's nextRun counted."""
    setup: Imbalance = imbalance()
    planned = rebalancer(cluster, "plan", "-n", setup.ns, "-o", "json")
    assert planned.returncode == 0, explain(planned)
    plan = json.loads(planned.stdout)
    first = plan["evictions"][0]
    snap = rebalancer(cluster, "snapshot", "-o", "json")
    assert snap.returncode == 0, explain(snap)
    path = tmp_path / "snapshot.json"
    path.write_text(snap.stdout)
    live = rebalancer(cluster, "explain", "-n", setup.ns, first["name"], "-o", "json")
    offline = subprocess.run(
        [sys.executable, "-m", "rebalancer", "explain", "--snapshot", str(path),
         f"{setup.ns}/{first['name']}", "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert live.returncode == 0, explain(live)
    assert offline.returncode == 0, explain(offline)
    assert json.loads(live.stdout) == json.loads(offline.stdout)
    assert json.loads(live.stdout)["plan"]["state"] == "planned"
    expected = plan["nextRun"]["evictions"]
    assert expected == len(plan["evictions"]) == 2, plan["nextRun"]
    ran = rebalancer(cluster, "run", "-n", setup.ns, "-o", "json")
    assert ran.returncode == 0, explain(ran)
    evicted = [r for r in json.loads(ran.stdout)["results"] if r["outcome"] == "evicted"]
    assert len(evicted) == expected, ran.stdout


# -- b: a PodDisruptionBudget blocks, then allows ----------------------------------------------


@pytest.mark.k8s_versions
def test_b_pdb_at_zero_is_skipped_then_next_run_proceeds(
    cluster: Cluster, imbalance: Callable[..., Imbalance]
) -> None:
    """A PDB allowing no disruption: the plan skips its pods (pdb) and sends no eviction, so
    the API server never answers 429 and nothing is deleted; once the PDB allows 1, the run
    heals wave by wave (issue 10: a plan never names an eviction the API server refuses)."""
    setup: Imbalance = imbalance(pdb_min_available=4)
    ns = setup.ns
    cluster.wait_for("PDB allows 0", lambda: pdb_settled(cluster, ns, 0), timeout=60)
    before = {p["metadata"]["uid"] for p in cluster.pods(ns, f"app={APP}")}
    mark = audit_mark(cluster)
    blocked = rebalancer(cluster, "run", "-n", ns, "-o", "json")
    assert blocked.returncode == 0, explain(blocked)
    report = json.loads(blocked.stdout)
    assert report["plan"]["evictions"] == [], report["plan"]
    assert report["results"] == [], report["results"]
    skipped = {s["name"]: s["code"] for s in report["plan"]["skipped"]}
    assert len(skipped) == 4 and set(skipped.values()) == {"pdb"}, skipped
    assert report["summary"]["end"] == "nothing-to-evict", report["summary"]
    time.sleep(2)  # the batch audit backend: let any entry arrive
    assert evictions(rebalancer_requests(cluster, mark, ns)) == []
    assert not [e for e in rebalancer_requests(cluster, mark) if e["verb"] == "delete"]
    pods = cluster.pods(ns, f"app={APP}")
    assert {p["metadata"]["uid"] for p in pods} == before
    assert not [p for p in pods if p["metadata"].get("deletionTimestamp")]

    cluster.kubectl(
        "patch", "pdb", APP, "-n", ns, "--type=merge", "-p", '{"spec":{"minAvailable":3}}'
    )
    cluster.wait_for("PDB allows 1", lambda: pdb_settled(cluster, ns, 1), timeout=60)
    mark = audit_mark(cluster)
    healed = rebalancer(cluster, "run", "-n", ns, "-o", "json")
    assert healed.returncode == 0, explain(healed)
    report = json.loads(healed.stdout)
    assert [e["wave"] for e in report["plan"]["evictions"]] == [1, 2], report["plan"]
    summary = report["summary"]
    assert summary["evicted"] == 2, summary
    assert summary["blockedByPdb"] == 0, summary
    assert summary["end"] == "balanced", summary
    assert [r["wave"] for r in report["results"]] == [1, 2], report["results"]
    sent = wait_audit(
        cluster, "2 evictions in the audit log",
        lambda: len(evictions(rebalancer_requests(cluster, mark, ns))) >= 2,
    )  # fmt: skip
    assert sent
    time.sleep(2)
    codes = [e["responseStatus"]["code"] for e in evictions(rebalancer_requests(cluster, mark, ns))]
    assert sorted(codes) == [201, 201], codes
    cluster.wait_pods_running(ns, f"app={APP}", 4, timeout=120)
    assert sorted(zone_counts(cluster, ns).values()) == [1, 1, 2]
    reasons = Counter(
        e["reason"] for e in cluster.get_json("events", "-n", ns)["items"]
        if e.get("source", {}).get("component") == "rebalancer"
    )  # fmt: skip
    assert reasons["RebalanceBlocked"] == 0, reasons
    assert reasons["Rebalanced"] == 2, reasons


# -- d: grace periods ---------------------------------------------------------------------------


def test_d_grace_period_follows_the_pod_then_the_policy(
    cluster: Cluster, imbalance: Callable[..., Imbalance], tmp_path: Path
) -> None:
    """Unset keeps the pod's 7 s; policy grace 5 (below the pod's 7) is not sent; policy grace
    10 (above) is sent; grace 0 is refused before any request. [6, 0, 0] leaves a violation
    after each of the three one-eviction runs."""
    setup: Imbalance = imbalance(grace=7, replicas=6)
    ns = setup.ns
    one = {"limits": {"total": 1}}

    # Grace 0: refused when the policy loads, before any request.
    mark = audit_mark(cluster)
    zero = rebalancer(
        cluster, "run", "-n", ns, "--policy", str(write_policy(tmp_path, "zero",
                                                               gracePeriodSeconds=0, **one))
    )  # fmt: skip
    assert zero.returncode == 2, explain(zero)
    assert "gracePeriodSeconds" in zero.stderr
    time.sleep(2)
    assert rebalancer_requests(cluster, mark) == []

    # No override: the pod's own terminationGracePeriodSeconds (7) applies.
    mark = audit_mark(cluster)
    own = rebalancer(
        cluster, "run", "-n", ns, "--policy", str(write_policy(tmp_path, "own", **one))
    )
    assert own.returncode == 0, explain(own)
    (evicted,) = wait_audit(cluster, "the eviction", lambda: [
        e for e in evictions(rebalancer_requests(cluster, mark, ns))
        if e["responseStatus"]["code"] == 201])  # fmt: skip
    options = evicted["requestObject"].get("deleteOptions", {})
    assert "gracePeriodSeconds" not in options
    assert options["preconditions"]["uid"]
    victim = evicted["objectRef"]["name"]
    deleted = wait_audit(
        cluster, f"kwok's final delete of {victim}",
        lambda: [e for e in cluster.audit_events()[mark:]
                 if e.get("verb") == "delete" and e.get("objectRef", {}).get("name") == victim
                 and e.get("objectRef", {}).get("resource") == "pods"
                 and e.get("stage") == "ResponseComplete"],
        timeout=30,
    )  # fmt: skip
    lingered = _seconds_between(evicted["requestReceivedTimestamp"],
                                deleted[-1]["requestReceivedTimestamp"])  # fmt: skip
    assert lingered >= 7 - 1.5, f"the pod lingered {lingered:.1f}s, its grace is 7s"
    assert not str(deleted[-1].get("userAgent", "")).startswith(AGENT)

    # The policy's grace is a floor: 5 is below the pod's own 7, so none is sent; 10 is above,
    # so 10 is sent. (--cooldown 0s: the previous runs' evictions, in the Lease's record, must
    # not count against limits.total 1.)
    for policy_grace, sent in ((5, None), (10, 10)):
        mark = audit_mark(cluster)
        floor = rebalancer(
            cluster, "run", "-n", ns, "--cooldown", "0s", "--policy",
            str(write_policy(tmp_path, f"grace{policy_grace}", gracePeriodSeconds=policy_grace,
                             **one)),
        )  # fmt: skip
        assert floor.returncode == 0, explain(floor)
        (evicted,) = wait_audit(cluster, "the eviction", lambda m=mark: [
            e for e in evictions(rebalancer_requests(cluster, m, ns))
            if e["responseStatus"]["code"] == 201])  # fmt: skip
        assert evicted["requestObject"]["deleteOptions"].get("gracePeriodSeconds") == sent


def _seconds_between(start: str, end: str) -> float:
    from datetime import datetime  # noqa: PLC0415

    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


# -- g: NotReady nodes --------------------------------------------------------------------------


def test_g_pods_on_a_not_ready_node_are_never_evicted(
    cluster: Cluster, imbalance: Callable[..., Imbalance]
) -> None:
    """All 4 pods sit on one zone-a node that goes NotReady: rebalancer evicts none of them."""
    setup: Imbalance = imbalance(zone_a_nodes=1)
    control = need_own_control_plane(cluster)
    node = setup.nodes[0]
    control.set_node_ready(node, False)
    try:
        mark = audit_mark(cluster)
        ran = rebalancer(cluster, "run", "-n", setup.ns, "-o", "json")
        assert ran.returncode in (0, 1), explain(ran)
        time.sleep(2)
        sent = evictions(rebalancer_requests(cluster, mark, setup.ns))
        assert sent == [], sent
        pods = cluster.pods(setup.ns, f"app={APP}")
        assert all(p["spec"]["nodeName"] == node for p in pods)
        assert not [p for p in pods if p["metadata"].get("deletionTimestamp")]
    finally:
        control.set_node_ready(node, True)


# -- i: deploy/ and its ServiceAccount ----------------------------------------------------------


def _rendered_rbac(cluster: Cluster) -> list[dict[str, Any]]:
    out = cluster.kubectl("kustomize", str(ROOT / "deploy")).stdout
    keep = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding"}  # fmt: skip
    return [d for d in yaml.safe_load_all(out) if d and d["kind"] in keep]


def staying(pods: Sequence[dict[str, Any]]) -> set[str]:
    """The uids of the pods not being deleted."""
    return {p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def test_i_deploy_applies_and_its_service_account_suffices(
    cluster: Cluster, imbalance: Callable[..., Imbalance]
) -> None:
    """deploy/ passes a server dry run; its ServiceAccount runs; without pods/eviction: exit 3."""
    rbac = _rendered_rbac(cluster)
    # A server dry run cannot create the Namespace the other objects go into: create it first.
    cluster.apply([d for d in rbac if d["kind"] == "Namespace"])
    for path in ("deploy", "deploy/overlays/evict", "deploy/overlays/deployment"):
        applied = cluster.kubectl("apply", "--dry-run=server", "-k", str(ROOT / path))
        assert "(server dry run)" in applied.stdout, applied.stdout
    setup: Imbalance = imbalance()
    cluster.apply(rbac)
    sa = "system:serviceaccount:rebalancer:rebalancer"
    try:
        kc = cluster.token_kubeconfig("rebalancer", "rebalancer")
        ran = rebalancer(cluster, "run", "-n", setup.ns, "-o", "json", kubeconfig=kc)
        assert ran.returncode == 0, explain(ran)
        assert json.loads(ran.stdout)["summary"]["evicted"] == 2

        role = next(d for d in rbac if d["kind"] == "ClusterRole")
        role["rules"] = [r for r in role["rules"] if "pods/eviction" not in r["resources"]]
        cluster.apply(role)
        cluster.wait_for("RBAC to drop pods/eviction", lambda: cluster.kubectl(
            "auth", "can-i", "create", "pods/eviction", "--as", sa, check=False
        ).stdout.strip() == "no", timeout=30)  # fmt: skip
        before = staying(cluster.pods(setup.ns, f"app={APP}"))
        denied = rebalancer(cluster, "run", "-n", setup.ns, kubeconfig=kc)
        assert denied.returncode == 3, explain(denied)
        assert "RBAC: cannot create pods/eviction" in denied.stderr, denied.stderr
        # the pods that stay are the same (the first run's evicted pods may still be going)
        assert staying(cluster.pods(setup.ns, f"app={APP}")) == before
    finally:
        for d in rbac:
            if d["kind"] == "Namespace":
                continue  # the Lease of every other test's runs lives there
            scope = ["-n", d["metadata"]["namespace"]] if "namespace" in d["metadata"] else []
            cluster.kubectl("delete", d["kind"], d["metadata"]["name"], *scope, "--wait=false",
                            check=False)  # fmt: skip


# -- k: a denial message with terminal escapes ---------------------------------------------------


def _denying_policy(ns: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy denying every eviction in ``ns`` with OSC/BEL/CR/CSI."""
    name = f"deny-evictions-{ns}"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods/eviction"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "false",
                        "messageExpression": "'denied \\x1b]0;PWNED\\x07\\r\\x1b[2J'",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
                },
            },
        },
    ]


def test_k_an_admission_denial_with_escapes_reaches_no_terminal_raw(
    cluster: Cluster, imbalance: Callable[..., Imbalance], tmp_path: Path
) -> None:
    """A ValidatingAdmissionPolicy denies the eviction with ESC/OSC/BEL/CR in its message: the
    run's table and its log lines show the message escaped, never a raw control byte."""
    setup: Imbalance = imbalance(replicas=6)  # room for a few evictions before balance
    ns = setup.ns
    policy = _denying_policy(ns)
    cluster.apply(policy)
    try:
        name = policy[0]["metadata"]["name"]
        cluster.wait_for(
            "the admission policy type-checked",
            lambda: (
                cluster.get_json("validatingadmissionpolicy", name)
                .get("status", {})
                .get("observedGeneration")
            ),
            timeout=30,
        )
        mark = audit_mark(cluster)
        denied: list[Any] = []

        def try_once() -> list[Any]:
            ran = rebalancer(
                cluster, "run", "-n", ns, "--cooldown", "0s", "--max-waves", "1", "-o", "wide",
                "--policy", str(write_policy(tmp_path, "one", limits={"total": 1})),
            )  # fmt: skip
            denied.append(ran)
            return [
                e for e in evictions(rebalancer_requests(cluster, mark, ns))
                if "PWNED" in json.dumps(e.get("responseStatus", {}))
            ]  # fmt: skip

        # The binding takes a moment to reach the admission chain: try until it denies.
        cluster.wait_for("an eviction denied by the policy", try_once, timeout=60, interval=2)
        ran = denied[-1]
        print(f"\nrun with a denying admission policy: {explain(ran)}")
        for stream in (ran.stdout, ran.stderr):
            raw = sorted(
                {c for c in stream if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0}
            )
            assert raw == [], raw
        assert "denied \\u001b]0;PWNED\\u0007\\r\\u001b[2J" in ran.stdout, explain(ran)
        assert "PWNED" in ran.stderr  # the eviction.result log line, escaped
    finally:
        cluster.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy",
                        policy[0]["metadata"]["name"], "--wait=false", check=False)  # fmt: skip


# -- e: the whole audit log, last ---------------------------------------------------------------


def _only_the_deletion_cost(event: dict[str, Any]) -> bool:
    """A pod PATCH that is steering's (docs/steering.md): a merge patch of the deletion cost and
    rebalancer's mark of it, with the resourceVersion it was read at, and nothing else."""
    body = event.get("requestObject") or {}
    meta = body.get("metadata") or {}
    return (
        event["verb"] == "patch"
        and set(body) == {"metadata"}
        and set(meta) == {"resourceVersion", "annotations"}
        and bool(meta["resourceVersion"])
        and set(meta["annotations"])
        == {"controller.kubernetes.io/pod-deletion-cost", "rebalancer/deletion-cost"}
    )


@pytest.mark.k8s_versions
def _own_object(ref: dict[str, Any]) -> bool:
    """An object only rebalancer makes, by its resource and name."""
    name = str(ref.get("name") or "")
    if (ref.get("apiGroup"), ref.get("resource")) == ("lifecycle.k8s.io", "evictionrequests"):
        return name.startswith("rebalancer-")
    own = {
        ("autoscaling.x-k8s.io", "capacitybuffers"),
        (None, "podtemplates"),
        ("", "podtemplates"),
    }
    return (ref.get("apiGroup"), ref.get("resource")) in own and name.startswith(
        "rebalancer-reserve-"
    )


def test_e_audit_log_never_shows_a_delete_or_grace_zero_from_rebalancer(cluster: Cluster) -> None:
    """Over the whole session: rebalancer never DELETEd a pod and never evicted with grace 0;
    its only other write to a pod is steering's patch of the deletion-cost annotation. Its
    only DELETEs are of its own objects: EvictionRequests (rebalancer-<uid>, spec §5.11) and
    capacity reservations (rebalancer-reserve-<hash>, spec §5.10)."""
    need_own_control_plane(cluster)
    mine = [
        e
        for e in cluster.audit_events()
        if str(e.get("userAgent", "")).startswith(AGENT) and e.get("stage") == "ResponseComplete"
    ]
    assert mine, "no rebalancer request in the audit log: did the scenarios run?"
    deletes = [
        e
        for e in mine
        if e["verb"] in ("delete", "deletecollection") and not _own_object(e.get("objectRef", {}))
    ]
    assert deletes == [], deletes
    pod_writes = [
        e
        for e in mine
        if e.get("objectRef", {}).get("resource") == "pods"
        and e["verb"] in WRITE_VERBS
        and e["objectRef"].get("subresource") != "eviction"
        and not _only_the_deletion_cost(e)
    ]
    assert pod_writes == [], pod_writes
    for ev in evictions(mine):
        options = (ev.get("requestObject") or {}).get("deleteOptions") or {}
        assert options.get("gracePeriodSeconds") != 0, ev
        assert options.get("preconditions", {}).get("uid"), ev
