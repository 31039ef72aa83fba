"""Which pods may be evicted at all. Every check returns the reason a pod is skipped, or None.

The checks run in a fixed order and the first that applies names the reason: what the pod is
(mirror, DaemonSet, bare), whether it is already leaving (terminating, DisruptionTarget), its
node (unreachable, or being disrupted by Karpenter), Karpenter's ``do-not-disrupt``, priority,
the policy's scope (namespaces, labelSelector, nodeSelector), then the protections a pod may
opt out of (emptyDir, PVCs, DRA resourceClaims, minPodAge, minReplicas, ignorePodsWithoutPDB,
a Mandatory ``prefer-no-eviction``), then the state of its workload: mid-rollout
(:mod:`rebalancer.core.rollout`), and its PodDisruptionBudget as the Eviction API would judge
it now (:mod:`rebalancer.core.budgets`).

A pod annotated ``descheduler.alpha.kubernetes.io/evict`` (any value) opts out of the
protections, as the descheduler's DefaultEvictor lets it; nothing else moves for it: what
SPEC §5.6 never evicts (mirror, DaemonSet, bare, leaving, unreachable or disrupted node,
``karpenter.sh/do-not-disrupt``, priority threshold, rollout), the policy's scope and the
PodDisruptionBudget's answer stay. Worked example: a ReplicaSet pod with an emptyDir volume,
5 minutes old, under ``minPodAge: 1h`` is skipped (``local-storage``); annotated, it is a
candidate; annotated but at priority 2000000000 it is still skipped (``priority-threshold``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rebalancer.core.budgets import DisruptionBudgets
from rebalancer.core.constants import TERMINAL_PHASES
from rebalancer.core.errors import InputError
from rebalancer.core.karpenter.marks import (
    DISRUPTED_TAINT_KEY,
    DO_NOT_DISRUPT_ANNOTATION,
    node_disrupted,
)
from rebalancer.core.model import Node, Pod, PriorityClass, Snapshot
from rebalancer.core.plan import SkipCode, SkipReason
from rebalancer.core.policy import MANDATORY, START_TIME, Policy
from rebalancer.core.rollout import Rollouts
from rebalancer.core.scope import NamespaceScope
from rebalancer.core.selectors import node_unreachable, selector_matches

SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}


def resolve_priority(pod: Pod, classes: Mapping[str, PriorityClass], default: int) -> int:
    """spec.priority, else its PriorityClass's value, else the global default class, else 0."""
    if pod.priority is not None:
        return pod.priority
    if pod.priority_class_name:
        pc = classes.get(pod.priority_class_name)
        if pc is not None:
            return pc.value
        builtin = SYSTEM_PRIORITY_CLASSES.get(pod.priority_class_name)
        if builtin is not None:
            return builtin
    return default


@dataclass(frozen=True, slots=True)
class EvictionContext:
    """What the checks need besides the pod: resolved once per plan."""

    policy: Policy
    now: float
    nodes: Mapping[str, Node]
    classes: Mapping[str, PriorityClass]
    default_priority: int
    threshold: int
    budgets: DisruptionBudgets
    rollouts: Rollouts
    replicas: Mapping[tuple[str, str, str], int]
    """Live pods per workload (namespace, owner kind, owner name); filled for minReplicas."""
    scope: NamespaceScope
    """The namespaces the policy rebalances."""

    @classmethod
    def build(
        cls, snapshot: Snapshot, policy: Policy, now: float, scope: NamespaceScope | None = None
    ) -> EvictionContext:
        classes = {pc.name: pc for pc in snapshot.priority_classes}
        defaults = sorted(pc.value for pc in snapshot.priority_classes if pc.global_default)
        threshold_spec = policy.priority_threshold
        if threshold_spec.name is not None:
            pc = classes.get(threshold_spec.name)
            value = pc.value if pc else SYSTEM_PRIORITY_CLASSES.get(threshold_spec.name)
            if value is None:
                raise InputError(
                    "policy",
                    [
                        f"priorityThreshold.name: PriorityClass {threshold_spec.name!r} "
                        "does not exist in the cluster"
                    ],
                )
            threshold = value
        else:
            threshold = threshold_spec.value if threshold_spec.value is not None else 2_000_000_000
        return cls(
            policy=policy,
            now=now,
            nodes={n.name: n for n in snapshot.nodes},
            classes=classes,
            default_priority=defaults[0] if defaults else 0,
            threshold=threshold,
            budgets=DisruptionBudgets(
                snapshot.pdbs,
                snapshot.pods,
                draining={n.name for n in snapshot.nodes if node_disrupted(n)},
            ),
            rollouts=Rollouts(snapshot),
            replicas=workload_sizes(snapshot.pods) if policy.min_replicas > 1 else {},
            scope=NamespaceScope.of(policy, snapshot) if scope is None else scope,
        )

    def priority(self, pod: Pod) -> int:
        return resolve_priority(pod, self.classes, self.default_priority)


def workload_sizes(pods: Iterable[Pod]) -> dict[tuple[str, str, str], int]:
    """The live pods of each workload (its controller's namespace, kind and name): neither
    leaving (terminating, DisruptionTarget) nor finished (Succeeded, Failed)."""
    sizes: Counter[tuple[str, str, str]] = Counter()
    for pod in pods:
        owner = pod.owner
        if owner is not None and not pod.leaving and pod.phase not in TERMINAL_PHASES:
            sizes[(pod.namespace, owner.kind, owner.name)] += 1
    return dict(sizes)


def skip_reason(pod: Pod, ctx: EvictionContext) -> SkipReason | None:
    """The first rule that forbids evicting ``pod``, or None when it may be evicted."""
    policy = ctx.policy
    if pod.mirror:
        return SkipReason(SkipCode.MIRROR_POD, "static pod managed by the kubelet")
    owner = pod.owner
    if owner is not None and owner.kind == "DaemonSet":
        return SkipReason(SkipCode.DAEMONSET, f"owned by DaemonSet {owner.name}")
    if owner is None and not policy.evict_bare_pods:
        return SkipReason(SkipCode.NO_CONTROLLER, "no controller would re-create it")
    leaving = leaving_reason(pod)
    if leaving is not None:
        return leaving
    if pod.scheduling_group is not None:
        return SkipReason(
            SkipCode.GANG_MEMBER,
            f"in PodGroup {pod.scheduling_group}: a gang is not evicted one pod at a time",
        )
    node = ctx.nodes.get(pod.node_name or "")
    held = (node_reason(node) if node is not None else None) or do_not_disrupt_reason(pod)
    if held is not None:
        return held
    priority = ctx.priority(pod)
    if priority >= ctx.threshold:
        return SkipReason(
            SkipCode.PRIORITY_THRESHOLD, f"priority {priority} >= threshold {ctx.threshold}"
        )
    out_of_scope = ctx.scope.why_not(pod.namespace)
    if out_of_scope is not None:
        return SkipReason(SkipCode.NAMESPACE_EXCLUDED, out_of_scope)
    if policy.label_selector is not None and not selector_matches(
        policy.label_selector, pod.labels
    ):
        return SkipReason(SkipCode.LABEL_SELECTOR, "does not match the policy's labelSelector")
    if policy.node_selector is not None:
        node_labels = node.labels if node is not None else {}
        if not selector_matches(policy.node_selector, node_labels):
            return SkipReason(
                SkipCode.NODE_SELECTOR,
                f"node {pod.node_name} does not match the policy's nodeSelector",
            )
    if not pod.evict_requested:
        reason = _protection(pod, ctx)
        if reason is not None:
            return reason
    return ctx.rollouts.reason(pod) or ctx.budgets.judge(pod)[0]


def pod_age(pod: Pod, policy: Policy, now: float) -> float:
    """A pod's age in seconds as ``minPodAge`` counts it: from its creation, or with
    ``minPodAgeFrom: startTime`` from ``status.startTime``, where a pod that has not started
    is age 0 (the youngest: protected by any ``minPodAge``)."""
    if policy.min_pod_age_from == START_TIME:
        return 0.0 if pod.started is None else now - pod.started
    return now - pod.created


def leaving_reason(pod: Pod) -> SkipReason | None:
    """Why ``pod`` is already on its way out (terminating, or carrying the DisruptionTarget
    condition), or None. Checked by the plan and again just before each eviction."""
    if pod.terminating:
        return SkipReason(SkipCode.TERMINATING, "already terminating; its grace can only shrink")
    if pod.disruption_target:
        return SkipReason(
            SkipCode.DISRUPTION_TARGET, "has the DisruptionTarget condition: it is leaving"
        )
    return None


def node_reason(node: Node) -> SkipReason | None:
    """Why no pod on ``node`` may be evicted now, or None: the node is NotReady, Unknown or
    tainted unreachable or not-ready (the termination cannot complete), or Karpenter is draining
    it. Checked by the plan and again just before each eviction."""
    if node_unreachable(node):
        return SkipReason(SkipCode.NODE_NOT_READY, f"node {node.name} is NotReady or unreachable")
    if node_disrupted(node):
        return SkipReason(
            SkipCode.NODE_DISRUPTED,
            f"node {node.name} has the {DISRUPTED_TAINT_KEY} taint: it is being drained",
        )
    return None


def do_not_disrupt_reason(pod: Pod) -> SkipReason | None:
    """Why Karpenter's ``do-not-disrupt`` annotation protects ``pod``, or None. Checked by the
    plan and again just before each eviction."""
    if pod.do_not_disrupt:
        return SkipReason(SkipCode.DO_NOT_DISRUPT, f"annotated {DO_NOT_DISRUPT_ANNOTATION}")
    return None


def _protection(pod: Pod, ctx: EvictionContext) -> SkipReason | None:
    """The protections a pod annotated ``descheduler.alpha.kubernetes.io/evict`` opts out of."""
    policy = ctx.policy
    if pod.local_storage and not policy.evict_local_storage_pods:
        return SkipReason(SkipCode.LOCAL_STORAGE, "uses emptyDir (evictLocalStoragePods is false)")
    if pod.pvc_names and not policy.evict_pods_with_pvc:
        return SkipReason(
            SkipCode.HAS_PVC, "mounts a PersistentVolumeClaim (evictPodsWithPVC is false)"
        )
    if pod.resource_claims and not policy.evict_pods_with_resource_claims:
        return SkipReason(
            SkipCode.RESOURCE_CLAIMS,
            "has DRA resourceClaims (evictPodsWithResourceClaims is false)",
        )
    if policy.min_pod_age_seconds > 0:
        age = pod_age(pod, policy, ctx.now)
        if age < policy.min_pod_age_seconds:
            return SkipReason(
                SkipCode.TOO_YOUNG,
                f"{int(age)}s old, minPodAge is {int(policy.min_pod_age_seconds)}s"
                + (" (from startTime)" if policy.min_pod_age_from == START_TIME else ""),
            )
    owner = pod.owner
    if policy.min_replicas > 1 and owner is not None:
        live = ctx.replicas.get((pod.namespace, owner.kind, owner.name), 0)
        if live < policy.min_replicas:
            return SkipReason(
                SkipCode.MIN_REPLICAS,
                f"{owner.kind} {owner.name} has {live} pods, minReplicas is {policy.min_replicas}",
            )
    if policy.ignore_pods_without_pdb and not ctx.budgets.covering(pod):
        return SkipReason(
            SkipCode.NO_PDB, "no PodDisruptionBudget covers it (ignorePodsWithoutPDB is true)"
        )
    if pod.prefer_no_eviction and policy.no_eviction_policy == MANDATORY:
        return SkipReason(
            SkipCode.PREFER_NO_EVICTION,
            "annotated descheduler.alpha.kubernetes.io/prefer-no-eviction "
            "(noEvictionPolicy is Mandatory)",
        )
    return None
