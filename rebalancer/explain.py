"""``explain``: where could this pod go, and why not there? (pure)."""

from __future__ import annotations

from dataclasses import dataclass


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
