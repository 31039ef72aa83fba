"""``explain``: where could this pod go, and why not there? And what does the plan do with it?
(pure).

The counts are the plan's: every matching pod on an eligible node, the pod itself included
where it is counted (``pod_domain``). Placing its replacement, the scheduler sees the same
counts with the pod gone (``replacement_global_min``); the feasible nodes are computed so."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.core.errors import InputError
from rebalancer.core.ids import PodId, ViewId
from rebalancer.core.karpenter.nodepools import PoolDetail, pool_details
from rebalancer.core.model import ZONE_KEY, Snapshot
from rebalancer.core.nearest import nearest_pods
from rebalancer.core.plan import Plan
from rebalancer.core.policy import Policy
from rebalancer.core.selectors import selector_matches, selector_string
from rebalancer.core.simulate import SimState, static_reason, volume_pins
from rebalancer.core.spread import Analysis, analyze, considered, view_key_constraint


@dataclass(frozen=True, slots=True)
class ConstraintExplanation:
    """One of the pod's constraints, as kube-scheduler sees it when placing the pod."""

    topology_key: str
    when_unsatisfiable: str
    max_skew: int
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    selector: str
    match_counts: tuple[tuple[str, int], ...]  # domain -> matching pods, as the plan counts them
    global_min: int  # of match_counts
    self_match: bool
    default: bool  # came from the cluster defaults, not the pod spec
    pod_domain: str | None = None  # where match_counts count the pod itself; None: not counted
    replacement_global_min: int = 0  # the global minimum with the pod gone (its replacement's)
    skew: int = 0  # of match_counts


PLANNED = "planned"
SKIPPED = "skipped"
NOT_PLANNED = "not-planned"
NOT_VIOLATED = "not-violated"


@dataclass(frozen=True, slots=True)
class PlanStatus:
    """What the plan does with the pod: evicts it (``planned``: wave, target), may not
    (``skipped``: the reason), leaves it although a view counting it is violated
    (``not-planned``), or has nothing to do (``not-violated``)."""

    state: str
    detail: str  # the eviction's or the skip's reason, or why it is not in the plan
    wave: int | None = None
    target_node: str | None = None
    target_domain: str | None = None


@dataclass(frozen=True, slots=True)
class Explanation:
    namespace: str
    name: str
    node: str | None  # where the pod is bound now; None for a pending pod
    constraints: tuple[ConstraintExplanation, ...]
    spread_feasible_nodes: tuple[str, ...]  # nodes the PodTopologySpread filter alone accepts
    feasible_nodes: tuple[str, ...]  # nodes passing every hard filter
    rejected: tuple[tuple[str, str], ...]  # node -> first filter that rejects it
    status: PlanStatus | None = None  # with the plan: what it does with the pod
    pools_key: str = ZONE_KEY  # the topology key node_pools judges domains of
    node_pools: tuple[PoolDetail, ...] = ()  # each NodePool, per domain: why it cannot add a node


def pod_index(snapshot: Snapshot, namespace: str, name: str) -> PodId:
    """The pod's index in the snapshot; an :class:`InputError` naming the nearest pods when the
    snapshot holds none of that name (:func:`nearest_pods`)."""
    for i, p in enumerate(snapshot.pods):
        if p.namespace == namespace and p.name == name:
            return PodId(i)
    near = nearest_pods(snapshot, namespace, name)
    hint = f"; did you mean {', '.join(near)}?" if near else "; no pod has a name close to it"
    raise InputError("--pod", [f"pod {namespace}/{name} is not in the snapshot{hint}"])


def explain(
    snapshot: Snapshot, policy: Policy, namespace: str, name: str, plan: Plan | None = None
) -> Explanation:
    """Each constraint as the plan counts it, the nodes where kube-scheduler would place this
    pod's replacement (the pod itself gone), and, given ``plan`` (made from the same snapshot
    and policy), what the plan does with the pod."""
    index = pod_index(snapshot, namespace, name)
    pod = snapshot.pods[index]
    analysis = analyze(snapshot, policy)
    state = SimState(snapshot, analysis, map(ViewId, range(len(analysis.views))))
    views = state.own_views.get(index, [])
    counted = {v: (dict(state.counts[v]), state.gmin(v), state.skew(v)) for v in views}
    if index in state.placement:
        state.remove(index)
    constraints = tuple(_constraint(state, v, index, counted[v]) for v in views)
    spread_ok: list[str] = []
    feasible: list[str] = []
    rejected: list[tuple[str, str]] = []
    pins = volume_pins(pod, state.pv_affinity, state.pvc_volume)
    for node_name in state.node_names:
        spread = state.spread_ok(index, node_name)
        if spread:
            spread_ok.append(node_name)
        why = static_reason(pod, state.nodes[node_name], pins)
        if why is None and not spread:
            why = "PodTopologySpread: skew would exceed maxSkew or the node lacks a topology key"
        if why is None and not state.fits(pod, node_name):
            why = "insufficient resources"
        if why is None:
            feasible.append(node_name)
        else:
            rejected.append((node_name, why))
    key, domains = _pool_domains(state, index)
    return Explanation(
        namespace=namespace,
        name=name,
        node=pod.node_name,
        constraints=constraints,
        spread_feasible_nodes=tuple(spread_ok),
        feasible_nodes=tuple(feasible),
        rejected=tuple(rejected),
        status=None if plan is None else _status(plan, analysis, policy, index),
        pools_key=key,
        node_pools=pool_details(snapshot.node_pools, pod, key, domains),
    )


def _pool_domains(state: SimState, index: PodId) -> tuple[str, list[str]]:
    """The topology key a no-fit reason judges the NodePools by for this pod (its first ranking
    view's, else the zone) and every domain of it: the whole of what the reason counts."""
    views = state.rank_views_of(index)
    if views:
        view = state.views[views[0]]
        return view.spec.topology_key, list(view.domains)
    zones = {n.labels.get(ZONE_KEY) for n in state.nodes.values()}
    return ZONE_KEY, sorted(z for z in zones if z is not None)


def _status(plan: Plan, analysis: Analysis, policy: Policy, index: PodId) -> PlanStatus:
    pod = analysis.pods[index]
    for e in plan.evictions:
        if e.uid == pod.uid:
            return PlanStatus(PLANNED, e.reason, e.wave, e.target_node, e.target_domain)
    for s in plan.skipped:
        if (s.namespace, s.name) == (pod.namespace, pod.name):
            return PlanStatus(SKIPPED, str(s.reason))
    violated = [
        v
        for v, view in enumerate(analysis.views)
        if view.violated and considered(view, policy, analysis.scope) and index in view.members
    ]
    if not violated:
        return PlanStatus(NOT_VIOLATED, "no view counting it is above its maxSkew")
    return PlanStatus(
        NOT_PLANNED,
        f"{len(violated)} violated view(s) count it; the plan repairs them with other pods, or "
        "evicting it would not help (see the plan's views left above maxSkew)",
    )


def _constraint(
    state: SimState, v: ViewId, index: PodId, counted: tuple[dict[str, int], int, int]
) -> ConstraintExplanation:
    """View v as the plan counts it (``counted``: counts, global minimum, skew), ``state``
    being the counts with the pod gone."""
    counts, gmin, skew = counted
    pod = state.analysis.pods[index]
    view = state.views[v]
    spec = view.spec
    c = spec.constraint
    node = state.analysis.placement.get(index)
    own = node is not None and index in view.members
    return ConstraintExplanation(
        topology_key=c.topology_key,
        when_unsatisfiable=c.when_unsatisfiable,
        max_skew=c.max_skew,
        min_domains=c.min_domains,
        node_affinity_policy=c.node_affinity_policy,
        node_taints_policy=c.node_taints_policy,
        selector=selector_string(c.selector),
        match_counts=tuple(view.all_counts(counts).items()),
        global_min=gmin,
        self_match=selector_matches(c.selector, pod.labels),
        default=any(
            own.default and view_key_constraint(own) == c
            for own in state.analysis.constraints.get(index, ())
        ),
        pod_domain=view.node_domain.get(node) if own and node is not None else None,
        replacement_global_min=state.gmin(v),
        skew=skew,
    )
