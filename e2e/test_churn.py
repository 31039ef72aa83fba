"""The short churn trace of ``bench.churn`` on the real control plane (kwok nodes), so that CI
keeps the benchmark alive and checks what must hold under churn.

One Deployment (hard zone constraint maxSkew 1, PDB maxUnavailable 1) on its own 3 zones x 2
nodes, scaled 9 -> 15 -> 6 -> 12 -> 5 -> 11 -> 14 -> 7 -> 10 -> 4 -> 9, replayed once with no
tool and once with ``rebalancer run --interval 2s --verify-state-every 1``, at speed-up 2
(about 2 minutes each). From the audit log (filtered by rebalancer's own user) and a sampler:
no pod DELETE, no 429 answered three times in a row for one object, no replacement evicted
again (thrash), never more of the Deployment's evicted pods waiting for their replacement than
its PDB allows, the watch-fed state equal to a fresh LIST at every check, and fewer
skew-seconds above maxSkew than with no tool (when no tool left skew lasting at least one scale
event; otherwise no more than one scale event's worth).
"""

from __future__ import annotations

import pytest

from bench.churn import run_all, summary_line
from bench.trace import short_trace
from e2e.cluster.controlplane import Cluster
from e2e.test_live import need_own_control_plane

pytestmark = pytest.mark.e2e

SPEEDUP = 2.0  # a scale event every 10 s
INTERVAL = "2s"  # rebalancer reacts within a scale event
SCALE_EVENT_SECONDS = 10  # 20 trace seconds between scale events, at SPEEDUP


def test_churn_short_trace_rebalancer_keeps_the_invariants(cluster: Cluster) -> None:
    control = need_own_control_plane(cluster)
    control.assert_own_cluster(control.kubeconfig)
    nothing, rebalancer = run_all(
        control, short_trace(), ("nothing", "rebalancer"), speedup=SPEEDUP, interval=INTERVAL
    )
    assert nothing.evictions == 0  # the trace itself evicts nothing as rebalancer's user
    assert rebalancer.exit_code == 0, summary_line(rebalancer)  # a clean stop on SIGTERM
    assert rebalancer.deletes == 0, summary_line(rebalancer)
    assert rebalancer.loops_429 == 0, summary_line(rebalancer)
    assert rebalancer.thrash == 0, summary_line(rebalancer)
    assert not rebalancer.beyond_pdb, (rebalancer.most_unavailable, rebalancer.pdb)
    assert rebalancer.verify_differences == 0, summary_line(rebalancer)
    assert len(rebalancer.skew) >= 0.8 * len(nothing.skew) > 0  # both were sampled throughout
    both = (summary_line(nothing), summary_line(rebalancer))
    if nothing.skew_seconds < SCALE_EVENT_SECONDS:
        # The ReplicaSet's own picks left (almost) no lasting skew this time: nothing to beat,
        # but rebalancer must not make one that outlasts a scale event either.
        assert rebalancer.skew_seconds <= SCALE_EVENT_SECONDS, both
    else:
        assert rebalancer.skew_seconds < nothing.skew_seconds, both
