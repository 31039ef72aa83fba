"""Spread counting: the pod and selector indexes, sparse view counts, the distance to balance."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from rebalancer.core.ids import ViewId, ViewKey
from rebalancer.core.minimal import min_moves
from rebalancer.core.model import ZONE_KEY, LabelSelector, Pod, Requirement, Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from rebalancer.core.selectors import SelectorIndex, selector_matches
from rebalancer.core.simulate import SimState
from rebalancer.core.spread import PodIndex, analyze, global_min, skew_of
from tests.builders import pod, zones_cluster
from tests.strategies import Cluster, clusters

LABEL_KEYS = ("app", "tier")
LABEL_VALUES = ("a", "b", "c")

label_maps = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES))

requirements = st.builds(
    Requirement,
    key=st.sampled_from(LABEL_KEYS),
    operator=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    values=st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=2, unique=True).map(tuple),
)

selectors = st.none() | st.builds(
    LabelSelector,
    match_labels=st.dictionaries(
        st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2
    ).map(lambda d: tuple(sorted(d.items()))),
    match_expressions=st.lists(requirements, max_size=2).map(tuple),
)


@st.composite
def pod_lists(draw: st.DrawFn) -> list[Pod]:
    """Pods in two namespaces, some sharing one labels map (as the converter does), some
    unbound, terminating or finished."""
    shared = draw(st.lists(label_maps, min_size=1, max_size=3))
    pods: list[Pod] = []
    for k in range(draw(st.integers(0, 25))):
        made = pod(
            f"p{k}",
            draw(st.sampled_from(["n1", "n2", None])),
            namespace=draw(st.sampled_from(["default", "team"])),
            terminating=draw(st.booleans()),
            phase=draw(st.sampled_from(["Running", "Running", "Succeeded"])),
        )
        # pod() builds its own labels map: put the drawn (maybe shared) one in place.
        pods.append(dataclasses.replace(made, labels=draw(st.sampled_from(shared) | label_maps)))
    return pods


def is_counted(p: Pod) -> bool:
    return p.node_name is not None and not p.terminating and p.phase != "Succeeded"


@given(pod_lists(), selectors, st.sampled_from(["default", "team"]))
def test_pod_index_matches_like_trying_every_pod(
    pods: list[Pod], selector: LabelSelector | None, namespace: str
) -> None:
    """Matching label groups finds exactly the counted pods the selector matches, in order."""
    index = PodIndex(pods)
    expected = [
        i
        for i, p in enumerate(pods)
        if is_counted(p) and p.namespace == namespace and selector_matches(selector, p.labels)
    ]
    assert index.matching(namespace, selector) == expected
    assert index.placement == {i: p.node_name for i, p in enumerate(pods) if is_counted(p)}
    assert index.terminating == {
        i: p.node_name
        for i, p in enumerate(pods)
        if p.node_name is not None and p.terminating and p.phase != "Succeeded"
    }


@given(
    st.lists(st.tuples(st.sampled_from(["default", "team"]), selectors), max_size=8),
    st.sampled_from(["default", "team"]),
    label_maps,
)
def test_selector_index_finds_the_selectors_that_match(
    indexed: list[tuple[str, LabelSelector | None]], namespace: str, labels: dict[str, str]
) -> None:
    """Selectors filed by a required label, or tried for every pod, match like trying all."""
    expected = [
        k
        for k, (ns, selector) in enumerate(indexed)
        if ns == namespace and selector_matches(selector, labels)
    ]
    assert SelectorIndex(indexed).matching(namespace, labels) == expected


@given(
    st.lists(st.integers(0, 30), max_size=8),
    st.integers(0, 20),
    st.tuples(st.integers(1, 4), st.integers(1, 12), st.booleans(), st.integers(0, 10)),
)
def test_min_moves_counts_the_domains_left_out_as_empty(
    counts: list[int], empty: int, shape: tuple[int, int, bool, int]
) -> None:
    """Passing empty domains as a number equals listing them as zeros."""
    max_skew, min_domains, hard, top_floor = shape
    with_zeros = min_moves(counts + [0] * empty, max_skew, min_domains, hard, top_floor)
    assert min_moves(counts, max_skew, min_domains, hard, top_floor, empty=empty) == with_zeros


def dense_min(counts: list[int], min_domains: int, hard: bool) -> int:
    if not counts or (hard and len(counts) < min_domains):
        return 0
    return min(counts)


@given(clusters())
def test_views_count_only_the_domains_holding_pods(cluster: Cluster) -> None:
    """A view's counts leave out empty domains; with them added back they are the full counts,
    and its global minimum and skew are those of the full counts."""
    analysis = analyze(cluster.snapshot, Policy())
    for view in analysis.views:
        assert all(count > 0 for count in view.counts.values())
        full = dict.fromkeys(view.domains, 0)
        for i in view.members:
            full[view.node_domain[analysis.placement[i]]] += 1
        assert view.all_counts(view.counts) == full
        c = view.spec.constraint
        floor = dense_min(list(full.values()), c.min_domains, c.hard)
        assert view.global_min == floor
        top = max(full.values(), default=0)
        assert view.skew == (top - floor if top else 0)


@given(clusters(), st.data())
def test_simulated_counts_drop_the_domains_they_empty(
    cluster: Cluster, data: st.DataObject
) -> None:
    """Moving pods keeps each view's counts equal to a recount, without empty domains."""
    analysis = analyze(cluster.snapshot, Policy())
    state = SimState(cluster.snapshot, analysis, map(ViewId, range(len(analysis.views))))
    nodes = sorted(analysis.nodes)
    placed = sorted(state.placement)
    if placed:
        for i in data.draw(st.lists(st.sampled_from(placed), unique=True)):
            state.remove(i)
            state.add(i, data.draw(st.sampled_from(nodes)))
    for v, view in zip(map(ViewId, range(len(analysis.views))), analysis.views, strict=True):
        spec = view.spec
        recount: dict[str, int] = {}
        for i, node in state.placement.items():
            p = analysis.pods[i]
            domain = view.node_domain.get(node)
            if (
                domain is not None
                and p.namespace == spec.namespace
                and selector_matches(spec.constraint.selector, p.labels)
            ):
                recount[domain] = recount.get(domain, 0) + 1
        assert state.counts[v] == recount
        c = view.spec.constraint
        full = list(view.all_counts(recount).values())
        assert state.gmin(v) == dense_min(full, c.min_domains, c.hard)
        assert state.gmin(v) == global_min(recount, len(view.domains), c.min_domains, c.hard)
        assert state.skew(v) == skew_of(recount, len(view.domains), c.min_domains, c.hard)


def test_a_view_is_named_the_same_by_its_spec_and_by_its_report() -> None:
    """The key of a view, from its constraint (the analysis) or from the plan's report of it,
    is one record whose fields are named as the report's: zone constraint, maxSkew 1, pods
    [3, 1, 0] in namespace default."""
    nodes, pods = zones_cluster([3, 1, 0])
    snapshot = Snapshot(nodes=tuple(nodes), pods=tuple(pods))
    (view,) = analyze(snapshot, Policy()).views
    (report,) = plan(snapshot, Policy(), 1_000_000.0).violations
    expected = ViewKey(
        namespace="default",
        topology_key=ZONE_KEY,
        selector="app=web",
        max_skew=1,
        when_unsatisfiable="DoNotSchedule",
    )
    assert view.spec.key == expected
    assert report.key == expected
    assert (report.key.selector, report.key.max_skew) == (report.selector, report.max_skew)
