"""The benchmark's own arithmetic: how kube-apiserver CPU is summarised, and the Node PATCH that
gives back a Node's taints (figures derived by hand)."""

from __future__ import annotations

import orjson
import pytest

from bench.live import attributed_cpu, lower_bound_share, mean_cpu, no_gc_cpu
from bench.load import taints_patch


def _run(cpu: float, gc: float | None = None, allocated: float | None = None) -> dict[str, float]:
    run = {"apiserver_cpu_s": cpu}
    if gc is not None and allocated is not None:
        run["apiserver_gc_cpu_s"] = gc
        run["apiserver_alloc_bytes"] = allocated
    return run


def test_mean_cpu_is_over_every_measured_pass() -> None:
    assert mean_cpu([_run(1.0), _run(2.0), _run(6.0)]) == pytest.approx(3.0)
    assert mean_cpu([]) is None


def test_gc_is_charged_by_bytes_allocated_not_where_the_cycle_landed() -> None:
    # Two passes that allocate alike: one got a 6 CPU-s collection cycle, the other none.
    # At 2 CPU-s of collection per GiB, both are charged 1 + 2 = 3 CPU-s.
    gib = float(2**30)
    lucky = _run(1.0, 0.0, gib)
    unlucky = _run(7.0, 6.0, gib)
    assert attributed_cpu([lucky], 2.0 / gib) == pytest.approx(3.0)
    assert attributed_cpu([unlucky], 2.0 / gib) == pytest.approx(3.0)
    # A pass allocating twice as much is charged twice the collection.
    assert attributed_cpu([_run(1.0, 0.0, 2 * gib)], 2.0 / gib) == pytest.approx(5.0)
    assert attributed_cpu([lucky, _run(1.0, 0.0, 2 * gib)], 2.0 / gib) == pytest.approx(4.0)


def test_no_attribution_without_the_runtime_figures() -> None:
    assert attributed_cpu([_run(1.0)], 1e-9) is None
    assert attributed_cpu([_run(1.0, 0.0, 1.0)], None) is None


def test_cpu_without_gc_is_over_the_passes_no_cycle_ran_in() -> None:
    # Passes of 0.7 and 0.8 CPU-s without a cycle; one of 1.8 with a 1.3 CPU-s cycle is left
    # out, and so is one without the runtime's figures.
    runs = [_run(0.7, 0.0, 1.0), _run(1.8, 1.3, 1.0), _run(0.8, 0.0, 1.0), _run(9.0)]
    mean, count = no_gc_cpu(runs) or (0.0, 0)
    assert mean == pytest.approx(0.75)
    assert count == 2
    assert no_gc_cpu([_run(1.8, 1.3, 1.0), _run(9.0)]) is None


def test_the_lists_share_is_over_the_descheduler_pass() -> None:
    assert lower_bound_share({"pods LIST": 0.6, "descheduler": 1.2}) == pytest.approx(0.5)
    assert lower_bound_share({"pods LIST": 0.6, "descheduler": 0.0}) is None
    assert lower_bound_share({"descheduler": 1.2}) is None


@pytest.mark.parametrize(
    ("spec", "taints"),
    [
        ({}, None),
        ({"taints": []}, None),
        (
            {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]},
            [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
        ),
    ],
)
def test_a_node_gets_back_exactly_its_own_taints(
    spec: dict[str, object], taints: list[dict[str, str]] | None
) -> None:
    path, body, label = taints_patch({"kind": "Node", "metadata": {"name": "n-1"}, "spec": spec})
    assert path == "/api/v1/nodes/n-1"
    # A merge PATCH replaces the whole list (null removes it): admission's not-ready taint goes.
    assert orjson.loads(body) == {"spec": {"taints": taints}}
    assert "n-1" in label
