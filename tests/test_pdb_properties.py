"""PodDisruptionBudget invariants on random clusters: no wave spends more than a PDB allows,
and no plan names a pod whose PDB allows nothing (the API server would answer 429)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings

from rebalancer.core.model import Pod, PodDisruptionBudget
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.strategies import NOW, Cluster, clusters


def covers(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """The strategies' PDBs select ``app=<name>`` pods of their namespace (matchLabels only)."""
    assert pdb.selector is not None and not pdb.selector.match_expressions
    return pod.namespace == pdb.namespace and all(
        pod.labels.get(k) == v for k, v in pdb.selector.match_labels
    )


@settings(max_examples=120)
@given(clusters(pdbs=True))
def test_no_wave_spends_more_than_a_pdb_allows(cluster: Cluster) -> None:
    """Per wave, evictions of pods a PDB covers <= its disruptionsAllowed (all pods Ready)."""
    snapshot = cluster.snapshot
    result = plan(snapshot, Policy(), NOW)
    pods = {(p.namespace, p.name): p for p in snapshot.pods}
    spent: Counter[tuple[int, str]] = Counter()
    for e in result.evictions:
        pod = pods[(e.namespace, e.name)]
        assert pod.ready and pod.phase == "Running"  # the oracle below assumes it
        covering = [b for b in snapshot.pdbs if covers(b, pod)]
        assert len(covering) <= 1
        for b in covering:
            assert b.disruptions_allowed > 0, f"{e.key}: its PDB allows nothing"
            assert e.pdb == b.name
            spent[(e.wave, b.name)] += 1
            assert spent[(e.wave, b.name)] <= b.disruptions_allowed, (e.wave, b.name)
        if not covering:
            assert e.pdb == ""
        assert "429" not in e.reason
    for s in result.skipped:
        if s.reason.code == "pdb":
            pod = pods[(s.namespace, s.name)]
            assert any(covers(b, pod) and b.disruptions_allowed <= 0 for b in snapshot.pdbs)
