"""Evictions sent as EvictionRequests (KEP-4563, ``lifecycle.k8s.io/v1alpha1``) where the
server serves them, and the Eviction API where it does not (SPEC §5.11).

With the gate on (1.38): ``REBALANCER_E2E_EVICTION_REQUESTS=1 pytest
e2e/test_eviction_requests.py --e2e --k8s 1.38``; the control plane then turns the
``EvictionRequestAPI`` gate on for kube-apiserver and kube-controller-manager and serves
``lifecycle.k8s.io/v1alpha1``. Without it (every ``k8s_versions`` session, 1.32 to 1.38) the
same plan goes through the Eviction API: ``auto`` falls back, and the scenarios that need the
API skip, saying so.

- A plan executed through EvictionRequests: the audit log shows requests created (and deleted
  once done) by rebalancer, no eviction and no DELETE of a pod by rebalancer; the default
  responder evicted through the Eviction API, the PodDisruptionBudget held.
- A request still in progress at the wave's timeout (the pods name a responder of their own,
  which never acts) is withdrawn: deleted, the pods untouched, outcome ``withdrawn``.
- A budget refusal through a request: the test plays the pods' responder, lowers the budget to
  0 meanwhile, then hands the eviction on to the default responder, whose Eviction API call the
  budget refuses: ``blocked-by-pdb`` with the responder's message, the request withdrawn.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_live import (
    APP,
    ROOT,
    Imbalance,
    add_pool_nodes,
    audit_mark,
    explain,
    imbalance,
    need_own_control_plane,
    pdb_settled,
    rebalancer,
    rebalancer_requests,
    wait_audit,
    workload,
    zone_counts,
)
from e2e.test_versions import minor

pytestmark = [pytest.mark.e2e, pytest.mark.k8s_versions]
__all__ = ["imbalance"]  # test_live's fixture, used here

REQUESTS = "evictionrequests"
HANDOFF = "example.com/handoff"  # a responder of the pods' own, played (or not) by the test


def served(cluster: Cluster) -> bool:
    """Served, and acted on: 1.37 serves the API behind its gate but runs no controller for
    it (``auto`` keeps the Eviction API there)."""
    got = cluster.kubectl("get", "--raw", "/apis/lifecycle.k8s.io/v1alpha1", check=False)
    if got.returncode != 0 or minor(cluster) < (1, 38):
        return False
    return any(r.get("name") == REQUESTS for r in json.loads(got.stdout).get("resources", []))


def need_requests(cluster: Cluster) -> None:
    if not served(cluster):
        pytest.skip(
            "the EvictionRequest API is not served (or, before 1.38, not acted on): start a "
            "1.38 control plane with REBALANCER_E2E_EVICTION_REQUESTS=1"
        )


def summary_line(stderr: str) -> dict[str, Any]:
    for line in stderr.splitlines():
        if '"run.summary"' in line:
            found: dict[str, Any] = json.loads(line)
            return found
    raise AssertionError(f"no run.summary line in:\n{stderr[-3000:]}")


def left_requests(cluster: Cluster, ns: str) -> list[Any]:
    items: list[Any] = cluster.get_json(REQUESTS, "-n", ns)["items"]
    return items


class WithResponder:
    """[4, 0, 0] as :class:`~e2e.test_live.Imbalance` makes it, its pods naming a responder of
    their own (:data:`HANDOFF`, priority 10000: it is asked first)."""

    def __init__(self, cluster: Cluster, ns: str, *, pdb_min_available: int | None) -> None:
        self.cluster, self.ns = cluster, ns
        self.nodes = add_pool_nodes(cluster, ns, {"zone-a": 2})
        objects = workload(ns, 4, 2, pdb_min_available)
        template = objects[0]["spec"]["template"]["spec"]
        template["evictionResponders"] = [{"name": HANDOFF, "priority": 10000}]
        cluster.apply(objects)
        cluster.wait_pods_running(ns, f"app={APP}", 4, timeout=120)
        self.nodes += add_pool_nodes(cluster, ns, {"zone-b": 1, "zone-c": 1})
        assert zone_counts(cluster, ns) == Counter({"zone-a": 4})

    def cleanup(self) -> None:
        self.cluster.kubectl("delete", "node", *self.nodes, "--wait=false", check=False)


@pytest.fixture
def with_responder(cluster: Cluster, namespace: str) -> Iterator[Callable[..., WithResponder]]:
    need_own_control_plane(cluster)
    need_requests(cluster)
    made: list[WithResponder] = []

    def make(**kw: Any) -> WithResponder:
        made.append(WithResponder(cluster, namespace, **kw))
        return made[-1]

    yield make
    for m in made:
        m.cleanup()


def test_auto_sends_through_requests_where_served_else_through_the_eviction_api(
    cluster: Cluster, imbalance: Callable[..., Imbalance]
) -> None:
    """``auto`` (the default): where served, each planned eviction is an EvictionRequest
    created by rebalancer and evicted by the default responder through the Eviction API (the
    budget of 1 held: one pod at a time), each request deleted once done; where not served, the
    Eviction API as before. Either way no DELETE of a pod by rebalancer."""
    setup: Imbalance = imbalance(pdb_min_available=3)
    ns = setup.ns
    cluster.wait_for("PDB allows 1", lambda: pdb_settled(cluster, ns, 1), timeout=60)
    requests = served(cluster)
    mark = audit_mark(cluster)
    ran = rebalancer(cluster, "run", "-n", ns, "-o", "json")
    assert ran.returncode == 0, explain(ran)
    report = json.loads(ran.stdout)
    used = "evictionRequest" if requests else "eviction"
    evicted = [r for r in report["results"] if r["outcome"] == "evicted"]
    assert len(evicted) == 2 and {r["api"] for r in evicted} == {used}, report["results"]
    chosen = summary_line(ran.stderr)["server"]["evictionApi"]
    assert (chosen["policy"], chosen["used"]) == ("auto", used), chosen
    time.sleep(2)  # the batch audit backend
    mine = rebalancer_requests(cluster, mark, ns)
    res = Counter((e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("subresource"))
                  for e in mine)  # fmt: skip
    writes = ("delete", "deletecollection", "update", "patch")
    assert not [e for e in mine if e["objectRef"].get("resource") == "pods"
                and e["verb"] in writes], res  # fmt: skip
    if requests:
        assert res["create", REQUESTS, None] == 2, res
        assert res["delete", REQUESTS, None] == 2, res  # withdrawn once done: none left
        assert res["create", "pods", "eviction"] == 0, res
        assert left_requests(cluster, ns) == []
        by_responder = [
            e for e in cluster.audit_events()[mark:]
            if e.get("stage") == "ResponseComplete"
            and e["objectRef"].get("namespace") == ns
            and e["objectRef"].get("subresource") == "eviction"
            and "imperative-eviction-responder" in e["user"]["username"]
        ]  # fmt: skip
        codes = [e["responseStatus"]["code"] for e in by_responder]
        assert codes.count(201) == 2 and set(codes) <= {201, 429}, codes
    else:
        assert res["create", "pods", "eviction"] == 2, res
        assert res["create", REQUESTS, None] == 0, res
    cluster.wait_pods_running(ns, f"app={APP}", 4, timeout=120)
    assert sorted(zone_counts(cluster, ns).values()) == [1, 1, 2]
    assert pdb_settled(cluster, ns, 1)


def test_a_request_still_in_progress_at_the_wave_timeout_is_withdrawn(
    cluster: Cluster, with_responder: Callable[..., WithResponder]
) -> None:
    """The pods' own responder never acts: at the wave's timeout the request is withdrawn
    (deleted), the outcome is ``withdrawn`` (reason Timeout), the pods are untouched and no
    request is left behind."""
    setup = with_responder(pdb_min_available=None)
    ns = setup.ns
    before = {p["metadata"]["uid"] for p in cluster.pods(ns, f"app={APP}")}
    mark = audit_mark(cluster)
    ran = rebalancer(
        cluster, "run", "-n", ns, "-o", "json", "--wave-timeout", "15s", "--max-waves", "1"
    )
    report = json.loads(ran.stdout)
    (first, *_rest) = report["results"]
    assert (first["outcome"], first["api"], first["reason"]) == (
        "withdrawn",
        "evictionRequest",
        "Timeout",
    ), report["results"]
    assert report["summary"]["withdrawn"] >= 1, report["summary"]
    assert left_requests(cluster, ns) == []
    pods = cluster.pods(ns, f"app={APP}")
    assert {p["metadata"]["uid"] for p in pods} == before
    assert not [p for p in pods if p["metadata"].get("deletionTimestamp")]
    wait_audit(
        cluster, "the withdrawal in the audit log",
        lambda: any(e["verb"] == "delete" for e in rebalancer_requests(cluster, mark, ns)),
    )  # fmt: skip
    deletes = [e for e in rebalancer_requests(cluster, mark, ns) if e["verb"] == "delete"]
    assert {e["objectRef"]["resource"] for e in deletes} == {REQUESTS}, deletes


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _active_handoff(cluster: Cluster, ns: str) -> dict[str, Any] | None:
    """The Eviction whose active responder is :data:`HANDOFF`, started (status initialised)."""
    for ev in cluster.get_json("evictions.lifecycle.k8s.io", "-n", ns)["items"]:
        status = ev.get("status", {})
        active = [r["name"] for r in status.get("targetResponders", []) if r["state"] == "Active"]
        started = [r for r in status.get("responders", []) if r.get("startTime")]
        if active == [HANDOFF] and any(r["name"] == HANDOFF for r in started):
            found: dict[str, Any] = ev
            return found
    return None


def _complete_handoff(cluster: Cluster, eviction: dict[str, Any]) -> None:
    """As the pods' responder: done, without evicting (the default responder comes next)."""
    now = _now()
    for responder in eviction["status"]["responders"]:
        if responder["name"] == HANDOFF:
            responder.update(heartbeatTime=now, completionTime=now, message="handed on")
    cluster.kubectl("replace", "--subresource=status", "-f", "-", input=json.dumps(eviction))


def test_a_budget_refusal_through_a_request_is_blocked_and_withdrawn(
    cluster: Cluster, with_responder: Callable[..., WithResponder]
) -> None:
    """The budget falls to 0 (minAvailable raised to every pod) while the pods' responder holds
    the eviction; handed on, the default responder's Eviction API call is refused (429):
    rebalancer reports ``blocked-by-pdb`` with the responder's message, withdraws the request,
    and the pod stays."""
    setup = with_responder(pdb_min_available=3)
    ns = setup.ns
    cluster.wait_for("PDB allows 1", lambda: pdb_settled(cluster, ns, 1), timeout=60)
    cluster.assert_own_cluster(cluster.kubeconfig)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rebalancer", "run", "-n", ns, "-o", "json", "--wave-timeout",
         "120s", "--max-waves", "1", "--kubeconfig", str(cluster.kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        held = cluster.wait_for("the pods' responder active", lambda: _active_handoff(cluster, ns),
                                timeout=60)  # fmt: skip
        target = held["spec"]["target"]["pod"]["name"]
        # the budget goes to 0 while the pods' responder holds the eviction
        cluster.kubectl(
            "patch", "pdb", APP, "-n", ns, "--type=merge", "-p", '{"spec":{"minAvailable":4}}'
        )
        cluster.wait_for("PDB allows 0", lambda: pdb_settled(cluster, ns, 0), timeout=60)
        for _ in range(5):  # the controller writes the status too: retry on a conflict
            current = _active_handoff(cluster, ns)
            assert current is not None
            try:
                _complete_handoff(cluster, current)
                break
            except Exception:  # a 409: read it again
                time.sleep(0.5)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    report = json.loads(stdout)
    (result,) = [r for r in report["results"] if r["name"] == target]
    assert (result["outcome"], result["api"], result["reason"]) == (
        "blocked-by-pdb",
        "evictionRequest",
        "DisruptionBudget",
    ), (result, stderr[-2000:])
    assert "disruption budget" in result["detail"].lower(), result
    assert left_requests(cluster, ns) == []
    pod = cluster.get_json("pod", target, "-n", ns)
    assert not pod["metadata"].get("deletionTimestamp"), pod["metadata"]
    events = cluster.get_json("events", "-n", ns)["items"]
    blocked = [e for e in events if e.get("reason") == "RebalanceBlocked"
               and e["involvedObject"]["name"] == target]  # fmt: skip
    assert blocked and "EvictionRequest" in blocked[0]["message"], blocked
