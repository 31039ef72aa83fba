"""The descheduler's protections on random clusters (tests/strategies.py): minReplicas,
nodeSelector, ignorePodsWithoutPDB, noEvictionPolicy and the two pod annotations, each
checked against its definition written out here, not through the planner's own rules."""

from __future__ import annotations

import dataclasses
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.core.model import ZONE_KEY, LabelSelector, Pod, Requirement, Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import MANDATORY, PREFERRED, Policy
from tests.strategies import NOW, Cluster, clusters

_GONE = ("Succeeded", "Failed")


def _live_sizes(snapshot: Snapshot) -> Counter[tuple[str, str, str]]:
    """Pods per controller that are neither terminating, being disrupted, nor finished."""
    return Counter(
        (p.namespace, p.owner.kind, p.owner.name)
        for p in snapshot.pods
        if p.owner is not None
        and not p.terminating
        and not p.disruption_target
        and p.phase not in _GONE
    )


def _covered(snapshot: Snapshot, pod: Pod) -> bool:
    """Some PDB of the pod's namespace selects it (the generator's PDBs use matchLabels)."""
    for pdb in snapshot.pdbs:
        if pdb.namespace != pod.namespace or pdb.selector is None:
            continue
        assert not pdb.selector.match_expressions  # the generator writes none
        if all(pod.labels.get(k) == v for k, v in pdb.selector.match_labels):
            return True
    return False


@st.composite
def annotated(draw: st.DrawFn, cluster: Cluster) -> Snapshot:
    """The cluster with some pods carrying either descheduler annotation, or both."""
    flags = st.sampled_from([(False, False)] * 4 + [(True, False), (False, True), (True, True)])
    pods = []
    for p in cluster.snapshot.pods:
        evict, prefer = draw(flags)
        pods.append(dataclasses.replace(p, evict_requested=evict, prefer_no_eviction=prefer))
    return dataclasses.replace(cluster.snapshot, pods=tuple(pods))


@st.composite
def protecting(draw: st.DrawFn, snapshot: Snapshot) -> Policy:
    """A policy with random settings of the four protections (nodeSelector: some zones)."""
    zones = sorted({n.labels[ZONE_KEY] for n in snapshot.nodes})
    chosen: list[str] = draw(st.lists(st.sampled_from(zones), unique=True, max_size=len(zones)))
    narrow: bool = draw(st.booleans())
    selector = (
        LabelSelector((), (Requirement(ZONE_KEY, "In", tuple(sorted(chosen))),))
        if chosen and narrow
        else None
    )
    return Policy(
        min_replicas=draw(st.integers(0, 12)),
        node_selector=selector,
        ignore_pods_without_pdb=draw(st.booleans()),
        no_eviction_policy=draw(st.sampled_from([PREFERRED, MANDATORY])),
    )


@settings(max_examples=150)
@given(st.data())
def test_protections_hold_for_every_eviction(data: st.DataObject) -> None:
    """Every evicted pod is on a node the nodeSelector matches; and unless it carries the
    evict annotation, its workload has at least minReplicas live pods, a PDB covers it when
    ignorePodsWithoutPDB is set, and it carries no prefer-no-eviction under Mandatory."""
    cluster = data.draw(clusters())
    snapshot = data.draw(annotated(cluster))
    policy = data.draw(protecting(snapshot))
    result = plan(snapshot, policy, NOW)
    pods = {p.uid: p for p in snapshot.pods}
    zones = {n.name: n.labels[ZONE_KEY] for n in snapshot.nodes}
    sizes = _live_sizes(snapshot)
    for e in result.evictions:
        pod = pods[e.uid]
        assert pod.owner is not None
        if policy.node_selector is not None:
            (allowed,) = policy.node_selector.match_expressions
            assert zones[e.node] in allowed.values, e.key
        if pod.evict_requested:
            continue
        if policy.min_replicas > 1:
            live = sizes[(pod.namespace, pod.owner.kind, pod.owner.name)]
            assert live >= policy.min_replicas, e.key
        if policy.ignore_pods_without_pdb:
            assert _covered(snapshot, pod), e.key
        if policy.no_eviction_policy == MANDATORY:
            assert not pod.prefer_no_eviction, e.key


@settings(max_examples=100)
@given(st.data())
def test_node_selector_never_changes_what_is_counted(data: st.DataObject) -> None:
    """With or without a nodeSelector, the violated views and their counts are the same:
    pods on other nodes still count, as the scheduler counts them."""
    cluster = data.draw(clusters())
    policy = data.draw(protecting(cluster.snapshot))
    narrowed = plan(cluster.snapshot, policy, NOW)
    wide = plan(cluster.snapshot, dataclasses.replace(policy, node_selector=None), NOW)
    assert narrowed.violations == wide.violations


@settings(max_examples=100)
@given(st.data())
def test_the_evict_annotation_on_every_pod_lifts_the_protections(data: st.DataObject) -> None:
    """When every pod carries the evict annotation (and, so that the victim order is the same,
    prefer-no-eviction), minReplicas, ignorePodsWithoutPDB and a Mandatory noEvictionPolicy
    change nothing: the plan is the one without them."""
    cluster = data.draw(clusters())
    pods = tuple(
        dataclasses.replace(p, evict_requested=True, prefer_no_eviction=True)
        for p in cluster.snapshot.pods
    )
    snapshot = dataclasses.replace(cluster.snapshot, pods=pods)
    protected = Policy(
        min_replicas=data.draw(st.integers(2, 100)),
        ignore_pods_without_pdb=True,
        no_eviction_policy=MANDATORY,
    )
    assert plan(snapshot, protected, NOW) == plan(snapshot, Policy(), NOW)


@settings(max_examples=100)
@given(st.data())
def test_without_the_annotations_the_preference_changes_nothing(data: st.DataObject) -> None:
    """No pod annotated: noEvictionPolicy Mandatory and Preferred give the same plan, and
    minReplicas 0 and 1 are both off."""
    cluster = data.draw(clusters())
    base = plan(cluster.snapshot, Policy(), NOW)
    assert plan(cluster.snapshot, Policy(no_eviction_policy=MANDATORY), NOW) == base
    assert plan(cluster.snapshot, Policy(min_replicas=1), NOW) == base
