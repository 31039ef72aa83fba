"""Loop mode keeps the cluster current with LIST + WATCH (issue 14), on the real API server.

A real ``run --dry-run --interval`` against the [4, 0, 0] imbalance of test_live: its first run
LISTs and plans 2 evictions; then a fifth pod is bound in zone-a ([5, 0, 0]: 3 evictions), and
a later run plans 3, so it saw the pod, while the audit log shows no LIST from rebalancer after
the first run (the watches themselves are not audited by the fixture's policy).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_live import (
    APP,
    POOL,
    ROOT,
    ZONE,
    Imbalance,
    audit_mark,
    need_own_control_plane,
    rebalancer_requests,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def setup(cluster: Cluster, namespace: str) -> Iterator[Imbalance]:
    need_own_control_plane(cluster)
    made = Imbalance(cluster, namespace)
    yield made
    made.cleanup()


def test_k_loop_mode_watches_instead_of_listing_again(cluster: Cluster, setup: Imbalance) -> None:
    control = need_own_control_plane(cluster)
    cluster.assert_own_cluster(cluster.kubeconfig)
    start = audit_mark(cluster)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rebalancer", "run", "--dry-run", "--interval", "2s",
         "-n", setup.ns, "--kubeconfig", str(cluster.kubeconfig)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    summaries: list[dict[str, Any]] = []
    lines: list[str] = []

    def follow() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "run.summary":
                summaries.append(event)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        cluster.wait_for("the first run", lambda: len(summaries) >= 1, timeout=120)
        assert summaries[0]["planned"] == 2, summaries[0]
        time.sleep(3)  # the audit backend flushes in batches: the first run's LISTs land
        mark = audit_mark(cluster)
        first = [e for e in rebalancer_requests(control, start, setup.ns) if e["verb"] == "list"]
        assert first, "the first run's LISTs show in the audit log"
        zone_a = next(
            n["metadata"]["name"]
            for n in cluster.get_json("nodes", "-l", f"{POOL}={setup.ns},{ZONE}=zone-a")["items"]
        )
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "extra", "namespace": setup.ns, "labels": {"app": APP}},
                "spec": {
                    "nodeName": zone_a,
                    "tolerations": [{"key": POOL, "operator": "Exists"}],
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                },
            }
        )
        seen = len(summaries)
        cluster.wait_for(
            "a run that plans the fifth pod",
            lambda: any(s["planned"] == 3 for s in summaries[seen:]),
            timeout=60,
        )
        runs_after = len(summaries) - seen
        time.sleep(3)
        sent = rebalancer_requests(control, mark)
        lists = [e["requestURI"] for e in sent if e["verb"] == "list"]
        assert lists == [], lists
        assert runs_after >= 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        finally:
            reader.join(5)
            if proc.stderr is not None:
                proc.stderr.close()
    assert proc.returncode == 0, "".join(lines[-50:])
