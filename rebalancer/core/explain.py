"""``explain``: where could this pod go, and why not there? (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.core.errors import InputError
from rebalancer.core.model import Snapshot
from rebalancer.core.policy import Policy
from rebalancer.core.selectors import selector_matches, selector_string
from rebalancer.core.simulate import SimState, static_reason, volume_pins
from rebalancer.core.spread import analyze, view_key_constraint


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
    match_counts: tuple[tuple[str, int], ...]  # domain value -> matching pods, eligible nodes only
    global_min: int
    self_match: bool
    default: bool  # came from the cluster defaults, not the pod spec


@dataclass(frozen=True, slots=True)
class Explanation:
    namespace: str
    name: str
    node: str | None  # where the pod is bound now; None for a pending pod
    constraints: tuple[ConstraintExplanation, ...]
    spread_feasible_nodes: tuple[str, ...]  # nodes the PodTopologySpread filter alone accepts
    feasible_nodes: tuple[str, ...]  # nodes passing every hard filter
    rejected: tuple[tuple[str, str], ...]  # node -> first filter that rejects it


def explain(snapshot: Snapshot, policy: Policy, namespace: str, name: str) -> Explanation:
    """Each constraint as kube-scheduler sees it when placing this pod, and the feasible nodes.

    For a bound pod the counts leave the pod itself out, as when its replacement is placed.
    """
    index = next(
        (i for i, p in enumerate(snapshot.pods) if p.namespace == namespace and p.name == name),
        None,
    )
    if index is None:
        raise InputError("--pod", [f"pod {namespace}/{name} is not in the snapshot"])
    pod = snapshot.pods[index]
    analysis = analyze(snapshot, policy)
    state = SimState(snapshot, analysis, range(len(analysis.views)))
    if index in state.placement:
        state.remove(index)
    views = state.own_views.get(index, [])
    constraints = tuple(_constraint(state, v, index) for v in views)
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
    return Explanation(
        namespace=namespace,
        name=name,
        node=pod.node_name,
        constraints=constraints,
        spread_feasible_nodes=tuple(spread_ok),
        feasible_nodes=tuple(feasible),
        rejected=tuple(rejected),
    )


def _constraint(state: SimState, v: int, index: int) -> ConstraintExplanation:
    pod = state.analysis.pods[index]
    spec = state.views[v].spec
    c = spec.constraint
    return ConstraintExplanation(
        topology_key=c.topology_key,
        when_unsatisfiable=c.when_unsatisfiable,
        max_skew=c.max_skew,
        min_domains=c.min_domains,
        node_affinity_policy=c.node_affinity_policy,
        node_taints_policy=c.node_taints_policy,
        selector=selector_string(c.selector),
        match_counts=tuple(state.views[v].all_counts(state.counts[v]).items()),
        global_min=state.gmin(v),
        self_match=selector_matches(c.selector, pod.labels),
        default=any(
            own.default and view_key_constraint(own) == c
            for own in state.analysis.constraints.get(index, ())
        ),
    )
