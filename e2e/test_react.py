"""Loop mode's early runs on the real control plane (kwok nodes): ``run --interval D
--react-after R``.

With the watch, a pod bound, deleted or starting to terminate brings the next run forward to R
after the last such change, no sooner than max(R, D/10) after the previous run started; the log
line ``interval.woken`` marks such a run. Each test runs the real ``rebalancer run`` in the
background (its own Lease) on its own pool of one node per zone, and reads its JSON log lines:

- a scale-down that leaves a hard zone spread (maxSkew 1) at [0, 3, 3] wakes a run within
  seconds of a 60 s interval, and that run evicts until the zones are back within maxSkew;
- with ``--react-after 0s`` the same scale-down waits for the interval (20 s here): no early
  run, the second run starts an interval after the first;
- labels changed on every pod wake nothing; a pod deleted afterwards does (the watch was live).

The skew is made as in scenario a of test_scenarios: zone-a cordoned while scaling 6 -> 8
([2, 3, 3]), then zone-a's pods made the cheapest to delete (pod-deletion-cost), so the
ReplicaSet's scale-down to 6 removes exactly those.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from e2e.cluster.controlplane import Cluster
from e2e.test_faults import Background, start
from e2e.test_live import need_own_control_plane
from e2e.test_scenarios import APP, DELETION_COST, SELECTOR, ZONE, Pool, deployment, spread

pytestmark = pytest.mark.e2e

WOKEN = "interval.woken"
RUN_START = "run.start"
PLANNED = "wave.planned"
SUMMARY = "run.summary"


# -- the workload -------------------------------------------------------------------------------


def balanced_and_primed(cluster: Cluster, pool: Pool) -> None:
    """[2, 3, 3] over zones a, b, c (within maxSkew 1), zone-a's pods the cheapest to delete:
    scaling to 6 then leaves [0, 3, 3]."""
    ns = pool.ns
    (a,) = pool.add({"zone-a": 1})
    pool.add({"zone-b": 1, "zone-c": 1})
    cluster.apply(deployment(ns, APP, 6, [spread(ZONE)]))
    pool.settle(6)
    assert pool.counts() == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
    pool.cordon(a)
    pool.scale(APP, 8)
    assert pool.counts() == {"zone-a": 2, "zone-b": 3, "zone-c": 3}
    pool.uncordon(a)
    for p in pool.pods():
        if p["spec"]["nodeName"] == a:
            cluster.kubectl("annotate", "pod", p["metadata"]["name"], "-n", ns,
                            f"{DELETION_COST}=-100")  # fmt: skip


def scale_down_to_skew(cluster: Cluster, pool: Pool) -> datetime:
    """Scale 8 -> 6 (zone-a's two pods go); when the scale was sent."""
    sent = datetime.now().astimezone()
    cluster.kubectl("scale", "deployment", APP, "-n", pool.ns, "--replicas=6")
    return sent


# -- the background run and its log -------------------------------------------------------------


@contextlib.contextmanager
def loop(cluster: Cluster, ns: str, interval: str, react_after: str) -> Iterator[Background]:
    """``rebalancer run --interval`` in the background; stopped (SIGTERM, exit 0) after."""
    bg = start(cluster, "run", "-n", ns, "--interval", interval, "--react-after", react_after,
               "--lease-name", f"react-{ns}", "--wave-timeout", "30s", "-o", "json")  # fmt: skip
    try:
        yield bg
    finally:
        if bg.proc.poll() is None:
            bg.proc.terminate()
        code, _ = bg.finish(timeout=60)
    assert code == 0, bg.stderr[-3000:]


def at(event: dict[str, Any]) -> datetime:
    """When a log line was written (structlog's ISO timestamp, UTC)."""
    return datetime.fromisoformat(str(event["timestamp"]))


def seconds(later: dict[str, Any] | datetime, earlier: dict[str, Any] | datetime) -> float:
    t1 = later if isinstance(later, datetime) else at(later)
    t0 = earlier if isinstance(earlier, datetime) else at(earlier)
    return (t1 - t0).total_seconds()


def after(bg: Background, name: str, first: int = 0) -> list[dict[str, Any]]:
    """The lines named ``name`` from line ``first`` on."""
    return [e for e in list(bg.lines)[first:] if e.get("event") == name]


def first_run(bg: Background) -> dict[str, Any]:
    """Wait for the first run's summary; its run.start line."""
    bg.wait_event(lambda e: e.get("event") == SUMMARY, timeout=120)
    summary = bg.events(SUMMARY)[0]
    assert summary["evicted"] == 0 and summary["violations_before"] == 0, summary
    return bg.events(RUN_START)[0]


@pytest.fixture
def pool(cluster: Cluster, namespace: str) -> Iterator[Pool]:
    need_own_control_plane(cluster)
    p = Pool(cluster, namespace)
    yield p
    p.cleanup()


# -- the tests ----------------------------------------------------------------------------------


def test_a_scale_down_skew_wakes_a_run_that_repairs_it(cluster: Cluster, pool: Pool) -> None:
    balanced_and_primed(cluster, pool)
    with loop(cluster, pool.ns, "60s", "1s") as bg:
        run1 = first_run(bg)
        mark = len(bg.lines)
        scaled = scale_down_to_skew(cluster, pool)
        bg.wait_event(lambda e: e.get("event") == WOKEN, timeout=30)
        woken = after(bg, WOKEN, mark)[0]
        bg.wait_event(lambda e: len(after(bg, SUMMARY, mark)) >= 1, timeout=60)
        repair = after(bg, SUMMARY, mark)[0]
        start2 = after(bg, RUN_START, mark)[0]
        pool.settle(6)
        counts = pool.counts()
    # The early run: R after the last change, not before a tenth of the interval, long before 60 s.
    assert woken["since_last_change_seconds"] >= 1.0, woken
    assert 5.5 <= seconds(woken, run1) < 20, (run1, woken)
    assert seconds(start2, woken) >= 0 and seconds(start2, run1) < 20, (run1, woken, start2)
    # It found the skew the scale-down left and repaired it.
    assert repair["violations_before"] >= 1 and repair["evicted"] >= 1, repair
    assert repair["end"] == "balanced", repair
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    assert seconds(repair, scaled) < 20, (scaled, repair)
    print(
        f"\nreact: woken {seconds(woken, scaled):.1f}s after the scale-down "
        f"(since last change {woken['since_last_change_seconds']}s); repaired "
        f"({repair['evicted']} evicted) {seconds(repair, scaled):.1f}s after it; zones {counts}"
    )


def test_b_react_after_zero_waits_for_the_interval(cluster: Cluster, pool: Pool) -> None:
    balanced_and_primed(cluster, pool)
    with loop(cluster, pool.ns, "20s", "0s") as bg:
        run1 = first_run(bg)
        mark = len(bg.lines)
        scaled = scale_down_to_skew(cluster, pool)
        bg.wait_event(lambda e: len(after(bg, RUN_START, mark)) >= 1, timeout=60)
        start2 = after(bg, RUN_START, mark)[0]
        bg.wait_event(lambda e: len(after(bg, PLANNED, mark)) >= 1, timeout=60)
        plan = after(bg, PLANNED, mark)[0]
    assert after(bg, WOKEN, 0) == []
    gap = seconds(start2, run1)
    assert 18 <= gap < 30, (run1, start2)  # the interval, from start to start
    assert seconds(start2, scaled) > 10, (scaled, start2)  # the skew waited for it
    assert plan["violations"] >= 1 and plan["evictions"] >= 1, plan  # a skew to react to
    print(f"\nno react: second run {gap:.1f}s after the first, {seconds(start2, scaled):.1f}s "
          f"after the scale-down; it plans {plan['evictions']} evictions")  # fmt: skip


def test_c_label_changes_wake_nothing_a_deletion_does(cluster: Cluster, pool: Pool) -> None:
    ns = pool.ns
    pool.add({"zone-a": 1, "zone-b": 1, "zone-c": 1})
    cluster.apply(deployment(ns, APP, 3, [spread(ZONE)]))
    pool.settle(3)
    with loop(cluster, ns, "20s", "1s") as bg:
        first_run(bg)
        mark = len(bg.lines)
        for value in ("one", "two"):  # every pod MODIFIED twice, none bound, moved or leaving
            cluster.kubectl("label", "pod", "-n", ns, "-l", SELECTOR, f"note={value}",
                            "--overwrite")  # fmt: skip
        labels = [p["metadata"]["labels"].get("note") for p in pool.pods()]
        # Well past when an early run could come (1 s after a change, and max(1 s, 20 s / 10)
        # after the first run started), well before the interval.
        time.sleep(6)
        quiet = list(bg.lines)[mark:]
        victim = pool.pods()[0]["metadata"]["name"]
        deleted = datetime.now().astimezone()
        cluster.kubectl("delete", "pod", victim, "-n", ns, "--wait=false")
        bg.wait_event(lambda e: e.get("event") == WOKEN, timeout=15)
        woken = after(bg, WOKEN, mark)[0]
        bg.wait_event(lambda e: len(after(bg, RUN_START, mark)) >= 1, timeout=15)
    names = [e.get("event") for e in quiet]
    assert WOKEN not in names and RUN_START not in names, names
    assert labels == ["two"] * 3, labels
    assert 0 < seconds(woken, deleted) < 10, (deleted, woken)
    assert woken["since_last_change_seconds"] >= 1.0, woken
    print(f"\nlabels: no run in the 6 s after them; a deletion woke one "
          f"{seconds(woken, deleted):.1f}s after it ({woken['since_last_change_seconds']}s "
          "after the last change)")  # fmt: skip
