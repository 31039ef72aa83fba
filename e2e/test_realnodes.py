"""Scenarios on REAL nodes: kubelets with containerd run the test image (opt-in: --e2e).

The module's cluster is the e2e control plane plus three real nodes, one per zone
(e2e/cluster/realnodes.py). Containers really receive SIGTERM and the kubelet, not a
simulation, deletes the pod object once the container is gone. Every pod of the test image
also appends its log lines to a hostPath file, so the timeline survives the pod.

- graceful termination: the pod's own 7 s grace; SIGTERM within a second of the eviction; the
  pod object deleted by ``system:node:<node>`` only after the container exited; rebalancer
  sent no DELETE and no grace 0.
- the policy's grace is a floor: own 12 s and policy 5 s -> no grace in the eviction, killed
  after 12 s; own 2 s and policy 5 s -> grace 5 in the eviction, killed after 5 s.
- scenario a of issue 5 (scale-down skew) on real nodes: exactly the minimal evictions.
- PDB with real readiness: replacements Ready only after a few seconds; the next eviction
  waits for that.

Skipped, with the reason, when the host cannot run real nodes (not root, no cgroup v1).
"""

from __future__ import annotations

import json
import os
import tarfile
import time
import tomllib
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.controlplane import build
from e2e.cluster.realnodes import (
    RealNodeCluster,
    build_nodes,
    build_rebalancer_image,
    host_support,
)
from e2e.image.pack import TEST_IMAGE
from e2e.test_live import (
    WRITE_VERBS,
    audit_mark,
    evictions,
    explain,
    rebalancer,
    rebalancer_requests,
    wait_audit,
    write_policy,
)

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
APP = "web"
SELECTOR = f"app={APP}"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
RUN_FLAGS = ("--wave-timeout", "90s", "--max-waves", "10", "-o", "json")


# -- the cluster ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> Iterator[RealNodeCluster]:
    reason = host_support()
    if reason:
        pytest.skip(f"real-node scenarios skipped: this host cannot run real nodes: {reason}")
    c = RealNodeCluster(build(quiet=True), build_nodes(quiet=True), real_nodes=3)
    c.start()
    print(f"\nrebalancer-e2e: real-node cluster up in {c.startup_seconds}s {c.startup_phases}")
    try:
        # rebalancer run holds a Lease in this namespace while it evicts (deploy/ creates it).
        if c.kubectl("get", "namespace", "rebalancer", check=False).returncode != 0:
            c.kubectl("create", "namespace", "rebalancer")
        yield c
    finally:
        c.stop()


@pytest.fixture
def ns(real: RealNodeCluster) -> Iterator[str]:
    name = f"rn-{uuid.uuid4().hex[:8]}"
    real.kubectl("create", "namespace", name)
    real.wait_for(
        f"default ServiceAccount in {name}",
        lambda: real.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
        timeout=60,
    )
    yield name
    real.kubectl("delete", "namespace", name, "--wait=false", check=False)


def log_dir(real: RealNodeCluster, ns: str) -> Path:
    d = real.run_dir / "container-logs" / ns
    d.mkdir(parents=True, exist_ok=True)
    return d


def deployment(
    real: RealNodeCluster,
    ns: str,
    replicas: int,
    *,
    grace: int,
    env: Mapping[str, str],
    readiness_file: bool = False,
) -> dict[str, Any]:
    """The test image on the real nodes, spread over zones (maxSkew 1, DoNotSchedule)."""
    container: dict[str, Any] = {
        "name": "main",
        "image": TEST_IMAGE,
        "imagePullPolicy": "Never",
        "env": [{"name": k, "value": v} for k, v in {**env, "LOG_DIR": "/log"}.items()],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        "volumeMounts": [{"name": "log", "mountPath": "/log"}],
    }
    if readiness_file:
        container["readinessProbe"] = {
            "exec": {"command": ["/testimage", "check", "/tmp/ready"]},
            "periodSeconds": 1,
        }
    return {
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
                    "nodeSelector": {"type": "real"},
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": ZONE,
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": {"app": APP}},
                        }
                    ],
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "log",
                            "hostPath": {
                                "path": str(log_dir(real, ns)),
                                "type": "DirectoryOrCreate",
                            },
                        }
                    ],
                },
            },
        },
    }


def pdb(ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": APP, "namespace": ns},
        "spec": {**spec, "selector": {"matchLabels": {"app": APP}}},
    }


# -- state --------------------------------------------------------------------------------------


def zone_of(real: RealNodeCluster) -> dict[str, str]:
    return {n.name: n.zone for n in real.real_nodes}


def live_pods(real: RealNodeCluster, ns: str) -> list[dict[str, Any]]:
    return [
        p
        for p in real.pods(ns, SELECTOR)
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]


def counts(real: RealNodeCluster, ns: str) -> dict[str, int]:
    out = dict.fromkeys(sorted({n.zone for n in real.real_nodes}), 0)
    zones = zone_of(real)
    for p in live_pods(real, ns):
        out[zones[p["spec"]["nodeName"]]] += 1
    return out


def settle(real: RealNodeCluster, ns: str, replicas: int, timeout: float = 120) -> None:
    """Exactly ``replicas`` Ready pods and no terminating one left."""
    real.wait_pods_running(ns, SELECTOR, replicas, timeout=timeout)
    real.wait_for(
        f"{replicas} pods and none terminating in {ns}",
        lambda: len(real.pods(ns, SELECTOR)) == replicas,
        timeout=timeout,
    )


def scale(real: RealNodeCluster, ns: str, replicas: int) -> None:
    real.kubectl("scale", "deployment", APP, "-n", ns, f"--replicas={replicas}")
    settle(real, ns, replicas)


def node_in(real: RealNodeCluster, zone: str) -> str:
    (name,) = [n.name for n in real.real_nodes if n.zone == zone]
    return name


def build_skew(real: RealNodeCluster, ns: str, per_zone: int) -> dict[str, int]:
    """[per_zone]*3, cordon zone-a, +2 replicas (they can only go to b and c), uncordon, then
    scale down by per_zone with zone-a's pods the cheapest: [0, per_zone+1, per_zone+1]."""
    a = node_in(real, "zone-a")
    settle(real, ns, 3 * per_zone)
    assert counts(real, ns) == dict.fromkeys(("zone-a", "zone-b", "zone-c"), per_zone)
    real.kubectl("cordon", a)
    try:
        scale(real, ns, 3 * per_zone + 2)
    finally:
        real.kubectl("uncordon", a)
    high = per_zone + 1
    assert counts(real, ns) == {"zone-a": per_zone, "zone-b": high, "zone-c": high}
    for p in live_pods(real, ns):
        if p["spec"]["nodeName"] == a:
            real.kubectl("annotate", "pod", p["metadata"]["name"], "-n", ns,
                         f"{DELETION_COST}=-100")  # fmt: skip
    scale(real, ns, 2 * per_zone + 2)
    return counts(real, ns)


# -- audit and container logs -------------------------------------------------------------------


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def container_events(real: RealNodeCluster, ns: str, pod: str) -> dict[str, float]:
    """First time of each testimage event (start, ready, signal=terminated, exit) of a pod."""
    path = log_dir(real, ns) / f"{pod}.log"
    out: dict[str, float] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[1] != "testimage":
            continue
        event = parts[3].removeprefix("event=")
        if event == "signal":
            event = parts[4].removeprefix("signal=")  # "terminated"
        out.setdefault(event, ts(parts[0]))
    return out


def pod_deletes(real: RealNodeCluster, ns: str, pod: str, since: int = 0) -> list[dict[str, Any]]:
    return [
        e
        for e in real.audit_events()[since:]
        if e.get("verb") == "delete"
        and e.get("stage") == "ResponseComplete"
        and e.get("objectRef", {}).get("resource") == "pods"
        and e.get("objectRef", {}).get("namespace") == ns
        and e.get("objectRef", {}).get("name") == pod
        and not e.get("objectRef", {}).get("subresource")
    ]


def ok_evictions(real: RealNodeCluster, mark: int, ns: str) -> list[dict[str, Any]]:
    return [
        e
        for e in evictions(rebalancer_requests(real, mark, ns))
        if e["responseStatus"]["code"] in (200, 201)
    ]


def assert_rebalancer_only_evicted(real: RealNodeCluster, mark: int, ns: str) -> None:
    """No DELETE, no other pod write, no grace 0 from rebalancer since ``mark``."""
    mine = rebalancer_requests(real, mark, ns)
    assert mine, "no rebalancer request in the audit log"
    writes = [
        e
        for e in mine
        if e["verb"] in WRITE_VERBS and e.get("objectRef", {}).get("subresource") != "eviction"
    ]
    assert writes == [], writes
    for ev in evictions(mine):
        options = (ev.get("requestObject") or {}).get("deleteOptions") or {}
        assert options.get("gracePeriodSeconds") != 0, ev


def who_deleted(real: RealNodeCluster, ns: str, evicted: Sequence[dict[str, Any]]) -> list[str]:
    """Audit lines (user, grace, time) of the final DELETE of each evicted pod."""
    lines = []
    for e in evicted:
        name = e["objectRef"]["name"]
        dels = wait_audit(
            real, f"the final delete of {name}", lambda n=name: pod_deletes(real, ns, n), timeout=60
        )
        for d in dels:
            grace = (d.get("requestObject") or {}).get("gracePeriodSeconds")
            lines.append(
                f"{d['requestReceivedTimestamp']} DELETE pods/{name} by "
                f"{d['user']['username']} gracePeriodSeconds={grace} -> "
                f"{d['responseStatus']['code']}"
            )
    return lines


# -- smoke: real containers, kubectl logs, pods reach the API -----------------------------------


def test_real_nodes_run_the_test_image_in_every_zone(real: RealNodeCluster, ns: str) -> None:
    """One real node per zone runs the test image; `kubectl logs` reaches its kubelet."""
    nodes = real.get_json("nodes", "-l", "type=real")["items"]
    assert sorted(n["metadata"]["labels"][ZONE] for n in nodes) == ["zone-a", "zone-b", "zone-c"]
    for n in nodes:
        assert n["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://2.")
        assert n["metadata"].get("annotations", {}).get("kwok.x-k8s.io/node") is None
    real.apply(deployment(real, ns, 3, grace=2, env={"READY_AFTER": "0"}))
    settle(real, ns, 3)
    assert counts(real, ns) == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    pod = live_pods(real, ns)[0]["metadata"]["name"]
    logs = real.kubectl("logs", pod, "-n", ns).stdout  # apiserver -> kubelet on its node IP
    assert "event=start" in logs, logs
    assert "start" in container_events(real, ns, pod)


# -- graceful termination -----------------------------------------------------------------------


def _one_eviction_timeline(
    real: RealNodeCluster, ns: str, mark: int
) -> tuple[dict[str, Any], dict[str, float], dict[str, Any], list[str]]:
    (evicted,) = wait_audit(real, "the eviction", lambda: ok_evictions(real, mark, ns))
    victim = evicted["objectRef"]["name"]
    deletes = wait_audit(
        real, f"the final delete of {victim}", lambda: pod_deletes(real, ns, victim, mark),
        timeout=60,
    )  # fmt: skip
    (final,) = deletes
    events = container_events(real, ns, victim)
    t0 = ts(evicted["requestReceivedTimestamp"])
    timeline = [f"+0.000 eviction of {victim} -> {evicted['responseStatus']['code']}"]
    for name, t in sorted(events.items(), key=lambda kv: kv[1]):
        if t >= t0 - 60:
            timeline.append(f"{t - t0:+.3f} container: {name}")
    timeline.append(
        f"{ts(final['requestReceivedTimestamp']) - t0:+.3f} DELETE by {final['user']['username']}"
        f" gracePeriodSeconds={(final.get('requestObject') or {}).get('gracePeriodSeconds')}"
    )
    return evicted, events, final, timeline


def test_graceful_termination_on_a_real_node(
    real: RealNodeCluster, ns: str, tmp_path: Path
) -> None:
    """Grace 7 (the pod's own), the container exits 3 s after SIGTERM: the kubelet deletes the
    pod once the container is gone, before the grace period runs out."""
    real.apply(deployment(real, ns, 3, grace=7, env={"TERM_DELAY": "3"}))
    assert build_skew(real, ns, 1) == {"zone-a": 0, "zone-b": 2, "zone-c": 2}
    one = {"limits": {"total": 1}}

    # The pod's own grace period (7 s): the container exits 3 s after SIGTERM.
    node_of = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in live_pods(real, ns)}
    mark = audit_mark(real)
    ran = rebalancer(real, "run", "-n", ns, "--policy", str(write_policy(tmp_path, "own", **one)),
                     *RUN_FLAGS)  # fmt: skip
    assert ran.returncode == 0, explain(ran)
    evicted, events, final, timeline = _one_eviction_timeline(real, ns, mark)
    print("\neviction timeline, grace 7 (pod), TERM_DELAY 3:\n  " + "\n  ".join(timeline))
    assert "gracePeriodSeconds" not in evicted["requestObject"].get("deleteOptions", {})
    t0 = ts(evicted["requestReceivedTimestamp"])
    t_term, t_exit = events["terminated"], events["exit"]
    t_del = ts(final["requestReceivedTimestamp"])
    assert final["user"]["username"] == f"system:node:{node_of[evicted['objectRef']['name']]}"
    assert 0 <= t_term - t0 < 1.0, timeline
    assert 2.9 <= t_exit - t_term < 4.0, timeline
    assert t_del >= t_exit, timeline  # deleted only after the container exited
    assert t_del - t0 < 7, timeline  # ... which was before the grace period ran out
    settle(real, ns, 4)
    after = counts(real, ns)
    assert after["zone-a"] == 1 and sorted(after.values()) == [1, 1, 2], after
    assert_rebalancer_only_evicted(real, mark, ns)


def _ignoring_sigterm(
    real: RealNodeCluster, ns: str, tmp_path: Path, *, own: int, policy_grace: int, name: str
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """One eviction of a pod whose container ignores SIGTERM: the kubelet kills it when the
    grace period that applies runs out, then deletes the pod object. Returns the timeline."""
    real.kubectl("delete", "deployment", APP, "-n", ns, "--wait=true", "--timeout=60s",
                 check=False)  # fmt: skip
    real.wait_for("old pods gone", lambda: real.pods(ns, SELECTOR) == [], timeout=90)
    real.apply(deployment(real, ns, 3, grace=own, env={"TERM_DELAY": "never"}))
    assert build_skew(real, ns, 1) == {"zone-a": 0, "zone-b": 2, "zone-c": 2}
    node_of = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in live_pods(real, ns)}
    mark = audit_mark(real)
    policy = write_policy(tmp_path, name, gracePeriodSeconds=policy_grace, limits={"total": 1})
    # --cooldown 0s: an earlier eviction in this namespace must not count against limits.total.
    ran = rebalancer(real, "run", "-n", ns, "--policy", str(policy), "--cooldown", "0s", *RUN_FLAGS)
    assert ran.returncode == 0, explain(ran)
    evicted, events, final, timeline = _one_eviction_timeline(real, ns, mark)
    assert final["user"]["username"] == f"system:node:{node_of[evicted['objectRef']['name']]}"
    assert 0 <= events["terminated"] - ts(evicted["requestReceivedTimestamp"]) < 1.0, timeline
    assert "exit" not in events, timeline  # it never exits by itself: SIGKILL
    assert_rebalancer_only_evicted(real, mark, ns)
    return evicted, final, timeline


def test_policy_grace_is_a_floor_on_a_real_node(
    real: RealNodeCluster, ns: str, tmp_path: Path
) -> None:
    """The policy's gracePeriodSeconds never shortens a pod's own: own 12 s, policy 5 s -> the
    eviction carries no grace and the kubelet kills and deletes the pod after ~12 s, not 5;
    own 2 s, policy 5 s -> the eviction carries 5 and the pod gets 5 s, not 2."""
    evicted, final, timeline = _ignoring_sigterm(
        real, ns, tmp_path, own=12, policy_grace=5, name="floor-below"
    )
    print("\neviction timeline, own grace 12, policy 5, SIGTERM ignored:\n  "
          + "\n  ".join(timeline))  # fmt: skip
    assert "gracePeriodSeconds" not in (evicted["requestObject"].get("deleteOptions") or {})
    waited = ts(final["requestReceivedTimestamp"]) - ts(evicted["requestReceivedTimestamp"])
    assert waited >= 12 - 0.2, timeline  # the pod's own 12 s, not the policy's 5
    assert waited < 12 + 4, timeline

    evicted, final, timeline = _ignoring_sigterm(
        real, ns, tmp_path, own=2, policy_grace=5, name="floor-above"
    )
    print("\neviction timeline, own grace 2, policy 5, SIGTERM ignored:\n  "
          + "\n  ".join(timeline))  # fmt: skip
    assert evicted["requestObject"]["deleteOptions"]["gracePeriodSeconds"] == 5
    waited = ts(final["requestReceivedTimestamp"]) - ts(evicted["requestReceivedTimestamp"])
    assert waited >= 5 - 0.2, timeline  # the policy's floor, not the pod's own 2
    assert waited < 5 + 4, timeline


# -- scenario a on real nodes -------------------------------------------------------------------


def test_a_scale_down_skew_repaired_on_real_nodes(
    real: RealNodeCluster, ns: str, tmp_path: Path
) -> None:
    """[0, 3, 3] after a scale-down: exactly 2 evictions (hand count: 3-1 and 3-1 -> 2-2-2 needs
    one pod out of each full zone), the replacements land in zone-a, a second run evicts
    nothing; the kubelets delete the evicted pods."""
    real.apply([deployment(real, ns, 6, grace=2, env={"TERM_DELAY": "0.5"}),
                pdb(ns, maxUnavailable=1)])  # fmt: skip
    before = build_skew(real, ns, 2)
    assert before == {"zone-a": 0, "zone-b": 3, "zone-c": 3}, before
    expected = 2
    policy = write_policy(tmp_path, "a")
    mark = audit_mark(real)
    ran = rebalancer(real, "run", "-n", ns, "--policy", str(policy), *RUN_FLAGS)
    assert ran.returncode == 0, explain(ran)
    report = json.loads(ran.stdout)
    assert report["plan"]["summary"]["evictions"] == expected, report["plan"]
    assert report["summary"]["evicted"] == expected, report["summary"]
    assert report["summary"]["end"] == "balanced", report["summary"]
    wait_audit(real, "2 evictions", lambda: len(ok_evictions(real, mark, ns)) >= expected)
    time.sleep(2)
    sent = ok_evictions(real, mark, ns)
    assert len(sent) == expected, [e["objectRef"]["name"] for e in sent]
    settle(real, ns, 6)
    assert counts(real, ns) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
    lines = who_deleted(real, ns, sent)
    print("\nscenario a on real nodes, who deleted the evicted pods:\n  " + "\n  ".join(lines))
    assert len(lines) == expected
    assert all(" by system:node:real-zone-" in line for line in lines), lines
    assert_rebalancer_only_evicted(real, mark, ns)
    mark = audit_mark(real)
    again = rebalancer(real, "run", "-n", ns, "--policy", str(policy), *RUN_FLAGS)
    assert again.returncode == 0, explain(again)
    assert json.loads(again.stdout)["summary"]["evicted"] == 0
    time.sleep(2)
    assert evictions(rebalancer_requests(real, mark, ns)) == []


# -- PDB with real readiness --------------------------------------------------------------------


def test_pdb_waits_for_real_readiness(real: RealNodeCluster, ns: str, tmp_path: Path) -> None:
    """minAvailable = replicas - 1 and replacements Ready only 4 s after start: the second
    eviction comes only after the first replacement is really Ready, and none gets a 429."""
    ready_after = 4.0
    real.apply([
        deployment(real, ns, 6, grace=2, env={"TERM_DELAY": "0", "READY_AFTER": str(ready_after),
                                              "READY_FILE": "/tmp/ready"}, readiness_file=True),
        pdb(ns, minAvailable=5),
    ])  # fmt: skip
    assert build_skew(real, ns, 2) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}
    real.wait_for(
        "PDB allows 1",
        lambda: (
            real.get_json("pdb", APP, "-n", ns).get("status", {}).get("disruptionsAllowed") == 1
        ),
        timeout=60,
    )
    mark = audit_mark(real)
    ran = rebalancer(real, "run", "-n", ns, "--policy", str(write_policy(tmp_path, "pdb")),
                     *RUN_FLAGS)  # fmt: skip
    assert ran.returncode == 0, explain(ran)
    report = json.loads(ran.stdout)
    assert report["summary"]["evicted"] == 2, report["summary"]
    first, second = sorted(
        ok_evictions(real, mark, ns), key=lambda e: e["requestReceivedTimestamp"]
    )
    t1, t2 = ts(first["requestReceivedTimestamp"]), ts(second["requestReceivedTimestamp"])
    # The first replacement: the pod whose own log says it started after the first eviction.
    readies = []
    for p in real.pods(ns, SELECTOR):
        ev = container_events(real, ns, p["metadata"]["name"])
        if ev.get("start", 0) > t1 and "ready" in ev:
            readies.append(ev["ready"])
    assert readies, "no replacement became ready"
    assert t2 >= min(readies), (t1, t2, readies)
    assert t2 - t1 >= ready_after, (t1, t2)
    blocked = [e for e in evictions(rebalancer_requests(real, mark, ns))
               if e["responseStatus"]["code"] == 429]  # fmt: skip
    print(f"\nPDB with real readiness: evictions {t2 - t1:.2f}s apart, 429s: {len(blocked)}")
    assert blocked == [], "the plan spends the PDB's budget per wave: no eviction may get 429"
    settle(real, ns, 6)
    assert counts(real, ns) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
    assert_rebalancer_only_evicted(real, mark, ns)


# -- the rebalancer image and the CronJob, for real ---------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
SA_USER = "system:serviceaccount:rebalancer:rebalancer"


def project_version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


@pytest.fixture(scope="module")
def rebalancer_image(real: RealNodeCluster) -> str:
    """The image built from the Dockerfile (cached), loaded into every real node."""
    ref, tar = build_rebalancer_image()
    real.load_image(tar)
    return ref


def image_config(tar: Path) -> dict[str, Any]:
    with tarfile.open(tar) as t:
        manifest = json.load(t.extractfile("manifest.json"))  # type: ignore[arg-type]
        config: dict[str, Any] = json.load(t.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
    return config


def test_the_image_runs_non_root_read_only_and_prints_its_version(
    real: RealNodeCluster, ns: str, rebalancer_image: str
) -> None:
    """The image from the Dockerfile runs as 65532 with a read-only root filesystem and
    `rebalancer --version` prints the project's version."""
    _, tar = build_rebalancer_image()
    assert image_config(tar)["config"]["User"] == "65532:65532"
    real.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "version", "namespace": ns},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"type": "real"},
                "automountServiceAccountToken": False,
                "securityContext": {"runAsNonRoot": True},  # the image's own user must do
                "containers": [
                    {
                        "name": "rebalancer",
                        "image": rebalancer_image,
                        "imagePullPolicy": "Never",
                        "args": ["--version"],
                        "securityContext": {
                            "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        }
    )
    real.wait_for(
        "the --version pod to finish",
        lambda: (
            real.get_json("pod", "version", "-n", ns)["status"].get("phase")
            in ("Succeeded", "Failed")
        ),
        timeout=120,
    )
    pod = real.get_json("pod", "version", "-n", ns)
    out = real.kubectl("logs", "version", "-n", ns).stdout.strip()
    assert pod["status"]["phase"] == "Succeeded", (pod["status"], out)
    assert out == f"rebalancer {project_version()}", out


def local_overlay(
    tmp_path: Path, base: str, image_ref: str, namespace: str, *, kind: str, container_path: str
) -> Path:
    """deploy/overlays/<base>, with the local image (never pulled) and a policy for one ns."""
    name, tag = image_ref.rsplit(":", 1)
    overlay = tmp_path / f"overlay-{base}"
    overlay.mkdir()
    policy = yaml.safe_load((ROOT / "deploy" / "base" / "policy.yaml").read_text())
    policy["namespaces"] = {"include": [namespace]}
    (overlay / "policy.yaml").write_text(yaml.safe_dump(policy))
    group, version = ("apps", "v1") if kind == "Deployment" else ("batch", "v1")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(ROOT / "deploy" / "overlays" / base, overlay)],
        "images": [{"name": "rebalancer", "newName": name, "newTag": tag}],
        "configMapGenerator": [
            {
                "name": "rebalancer-policy",
                "namespace": "rebalancer",
                "behavior": "replace",
                "files": ["policy.yaml"],
            }
        ],
        "patches": [
            {
                "target": {"group": group, "version": version, "kind": kind},
                "patch": yaml.safe_dump(
                    [
                        {
                            "op": "replace",
                            "path": f"{container_path}/imagePullPolicy",
                            "value": "Never",
                        }
                    ]
                ),
            }
        ],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return overlay


def test_the_cronjob_runs_in_the_cluster_and_repairs_the_spread(
    real: RealNodeCluster, ns: str, rebalancer_image: str, tmp_path: Path
) -> None:
    """kubectl apply -k deploy/overlays/evict (local image), a Job from the CronJob: the pod
    uses its ServiceAccount token, evicts exactly 2, logs JSON with the summary line; the
    kubelets delete the evicted pods; Events Rebalanced; the spread is repaired."""
    real.apply([deployment(real, ns, 6, grace=2, env={"TERM_DELAY": "0.5"}),
                pdb(ns, maxUnavailable=1)])  # fmt: skip
    assert build_skew(real, ns, 2) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}
    job_container = "/spec/jobTemplate/spec/template/spec/containers/0"
    overlay = local_overlay(
        tmp_path, "evict", rebalancer_image, ns, kind="CronJob", container_path=job_container
    )
    rendered = real.kubectl("kustomize", str(overlay)).stdout
    real.kubectl("apply", "-k", str(overlay))
    try:
        mark = audit_mark(real)
        real.kubectl("create", "job", "--from=cronjob/rebalancer", "run-now", "-n", "rebalancer")

        def finished() -> dict[str, Any] | None:
            job: dict[str, Any] = real.get_json("job", "run-now", "-n", "rebalancer")
            s = job.get("status", {})
            return job if s.get("succeeded") or s.get("failed") else None

        job = real.wait_for("the Job to finish", finished, timeout=240)
        logs = real.kubectl("logs", "job/run-now", "-n", "rebalancer").stdout
        assert job["status"].get("succeeded") == 1, (job["status"], logs[-3000:])
        # stderr: one JSON object per log line (no tty); stdout: the run's table report.
        lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
        assert lines, logs[-2000:]
        assert all({"event", "level", "timestamp"} <= set(line) for line in lines), lines[:2]
        assert "2 evictions, proven minimal" in logs, logs[-2000:]
        (summary,) = [line for line in lines if line.get("event") == "run.summary"]
        print(f"\nCronJob summary line: {json.dumps(summary, sort_keys=True)}")
        assert summary["evicted"] == 2, summary
        # In-cluster credentials: the ServiceAccount's token, no kubeconfig.
        (pod,) = real.pods("rebalancer", "job-name=run-now")
        assert pod["spec"]["serviceAccountName"] == "rebalancer"
        assert pod["spec"]["nodeName"] in {n.name for n in real.real_nodes}
        sc = pod["spec"]["containers"][0]["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True
        assert "image: " + rebalancer_image in rendered

        def sa_evictions() -> list[dict[str, Any]]:
            return [
                e
                for e in real.audit_events()[mark:]
                if e.get("stage") == "ResponseComplete"
                and e.get("objectRef", {}).get("subresource") == "eviction"
                and e.get("objectRef", {}).get("namespace") == ns
            ]

        sent = wait_audit(real, "2 evictions", lambda: len(sa_evictions()) >= 2 and sa_evictions())
        assert {e["user"]["username"] for e in sent} == {SA_USER}, sent
        ok = [e for e in sent if e["responseStatus"]["code"] == 201]
        assert len(ok) == 2, [(e["objectRef"]["name"], e["responseStatus"]["code"]) for e in sent]
        for e in sent:
            grace = ((e.get("requestObject") or {}).get("deleteOptions") or {}).get(
                "gracePeriodSeconds"
            )
            assert grace != 0, e
        deleted = who_deleted(real, ns, ok)
        print("CronJob evictions, who deleted each pod:\n  " + "\n  ".join(deleted))
        assert all(" by system:node:real-zone-" in line for line in deleted), deleted
        by_sa = [
            e
            for e in real.audit_events()[mark:]
            if e.get("user", {}).get("username") == SA_USER
            and e.get("verb") in ("delete", "deletecollection")
        ]
        assert by_sa == [], by_sa
        settle(real, ns, 6)
        assert counts(real, ns) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
        events = real.get_json("events", "-n", ns, "--field-selector", "reason=Rebalanced")
        assert {ev["involvedObject"]["name"] for ev in events["items"]} == {
            e["objectRef"]["name"] for e in ok
        }
    finally:
        real.kubectl("delete", "-k", str(overlay), "--timeout=120s", check=False, timeout=150)


def scrape(url: str) -> dict[str, float]:
    """Prometheus text format: ``name{labels}`` -> value (comments skipped)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_the_deployment_overlay_runs_in_interval_mode_with_metrics_on_the_pod_ip(
    real: RealNodeCluster, ns: str, rebalancer_image: str, tmp_path: Path
) -> None:
    """deploy/overlays/deployment (dry run, --interval 10m): the pod plans at once, evicts
    nothing, and its metrics, scraped from the pod IP, show the planned moves and the skew."""
    real.apply([deployment(real, ns, 6, grace=2, env={"TERM_DELAY": "0.5"}),
                pdb(ns, maxUnavailable=1)])  # fmt: skip
    assert build_skew(real, ns, 2) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}
    overlay = local_overlay(tmp_path, "deployment", rebalancer_image, ns, kind="Deployment",
                            container_path="/spec/template/spec/containers/0")  # fmt: skip
    mark = audit_mark(real)
    real.kubectl("apply", "-k", str(overlay))
    try:
        selector = "app.kubernetes.io/name=rebalancer"
        (pod,) = real.wait_pods_running("rebalancer", selector, 1, timeout=120)
        url = f"http://{pod['status']['podIP']}:8080/metrics"

        def after_first_run() -> dict[str, float] | None:
            m = scrape(url)
            return m if m.get('rebalancer_runs_total{result="ok"}') == 1 else None

        metrics = real.wait_for(f"a finished run in {url}", after_first_run, timeout=120)
        shown = ("rebalancer_runs_total", "rebalancer_planned_moves", "rebalancer_skew")
        print(f"\nDeployment overlay metrics from {url}: " + ", ".join(
            f"{k}={v:g}" for k, v in sorted(metrics.items()) if k.startswith(shown)))  # fmt: skip
        assert metrics["rebalancer_planned_moves"] == 2, metrics
        skews = {k: v for k, v in metrics.items() if k.startswith("rebalancer_skew_before{")}
        assert list(skews.values()) == [3], skews
        assert f'namespace="{ns}"' in next(iter(skews))
        assert metrics['rebalancer_runs_total{result="error"}'] == 0
        # A dry run: no eviction at all, the spread is as it was.
        time.sleep(2)
        sent = [
            e
            for e in real.audit_events()[mark:]
            if e.get("objectRef", {}).get("subresource") == "eviction"
        ]
        assert sent == [], sent
        assert counts(real, ns) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}
        logs = real.kubectl("logs", pod["metadata"]["name"], "-n", "rebalancer").stdout
        assert '"event":"interval.sleep"' in logs.replace(" ", ""), logs[-2000:]
    finally:
        real.kubectl("delete", "-k", str(overlay), "--timeout=120s", check=False, timeout=150)
