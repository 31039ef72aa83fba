"""What the planner produces. A plan is data: dry run renders it, run mode executes it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from rebalancer.core.ids import ViewKey

if TYPE_CHECKING:
    from rebalancer.core.steer import Steering


class SkipCode(StrEnum):
    """Why a pod is not evicted: the stable ``code`` of a :class:`SkipReason` or a
    :class:`Hold`, as the JSON output and the reference's list of skip reasons spell it."""

    # The pod may not be evicted at all (evictability, budgets, rollout).
    MIRROR_POD = "mirror-pod"
    DAEMONSET = "daemonset"
    NO_CONTROLLER = "no-controller"
    TERMINATING = "terminating"
    DISRUPTION_TARGET = "disruption-target"
    GANG_MEMBER = "gang-member"
    NODE_NOT_READY = "node-not-ready"
    NODE_DISRUPTED = "node-disrupted"  # its node is being disrupted (karpenter.sh/disrupted)
    DO_NOT_DISRUPT = "do-not-disrupt"  # annotated karpenter.sh/do-not-disrupt
    PRIORITY_THRESHOLD = "priority-threshold"
    NAMESPACE_EXCLUDED = "namespace-excluded"
    LABEL_SELECTOR = "label-selector"
    NODE_SELECTOR = "node-selector"
    LOCAL_STORAGE = "local-storage"
    HAS_PVC = "has-pvc"
    RESOURCE_CLAIMS = "resource-claims"
    TOO_YOUNG = "too-young"
    MIN_REPLICAS = "min-replicas"
    NO_PDB = "no-pdb"
    PREFER_NO_EVICTION = "prefer-no-eviction"
    ROLLOUT = "rollout"
    PDB = "pdb"
    MULTIPLE_PDBS = "multiple-pdbs"
    # Planning: a policy limit is reached, or moving the pod does not work out.
    LIMIT = "limit"
    NO_FIT = "no-fit"  # its replacement would stay Pending
    LANDS_BACK = "lands-back"  # its replacement would land back on its node (never reported)
    NO_GAIN = "no-gain"  # moving it would not improve the spread, or would harm another view
    # What else holds a view left above maxSkew.
    REPLACED = "replaced"
    MIN_DOMAINS = "min-domains"
    # At run time: the plan's premise no longer holds, a guard holds the pod, or the run stops.
    NODE_GONE = "node-gone"
    UID_CHANGED = "uid-changed"
    MOVED = "moved"
    LABELS_CHANGED = "labels-changed"
    REPLACEMENT_NOT_READY = "replacement-not-ready"
    COOLDOWN = "cooldown"
    THRASH_GUARD = "thrash-guard"
    LAUNCH_DEFERRED = "launch-deferred"  # its replacement needs a new node: repaired later
    NODE_DRIFTING = "node-drifting"  # its replacement may land on a node Karpenter replaces
    UNPLACED = "pods-unplaced"  # its workload has pods the scheduler has yet to place
    CAPACITY_NOT_ADDED = "capacity-not-added"  # a reservation there brought no node: back-off
    STOPPING = "stopping"
    LEASE_LOST = "lease-lost"
    NOT_RECORDED = "not-recorded"


@dataclass(frozen=True, slots=True)
class SkipReason:
    """Why a pod is not a candidate for eviction. ``code`` is stable; ``detail`` is for people."""

    code: SkipCode
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else str(self.code)


@dataclass(frozen=True, slots=True)
class Skip:
    """A pod in a violated view that the planner could not or would not evict."""

    namespace: str
    name: str
    uid: str
    node: str | None
    reason: SkipReason


@dataclass(frozen=True, slots=True)
class ViewReport:
    """The domain counts of one spread view (one constraint as its pods see it)."""

    namespace: str
    topology_key: str
    max_skew: int
    when_unsatisfiable: str
    selector: str
    min_domains: int
    domains: tuple[tuple[str, int], ...]  # sorted by domain value
    global_min: int
    skew: int
    pods: tuple[str, ...] = ()  # namespace/name of the pods that declare this view
    workloads: tuple[str, ...] = ()  # their workloads (Kind/name, "" for none), sorted, distinct

    @property
    def key(self) -> ViewKey:
        return ViewKey(
            self.namespace, self.topology_key, self.selector, self.max_skew, self.when_unsatisfiable
        )

    @property
    def violated(self) -> bool:
        return self.skew > self.max_skew

    @property
    def excess(self) -> int:
        return max(0, self.skew - self.max_skew)


@dataclass(frozen=True, slots=True)
class Eviction:
    """One planned eviction, with the reason a person reads in the plan."""

    namespace: str
    name: str
    uid: str
    node: str
    priority: int
    reason: str
    wave: int
    workload: str  # Kind/name of the controller, or "" for none
    domain: str  # the domain the pod leaves, in the view that chose it
    topology_key: str
    target_node: str | None  # where the simulated scheduler placed the replacement
    grace_period_seconds: int | None  # the policy's floor when above the pod's own, else None
    pdb: str = ""  # the PodDisruptionBudget whose budget (per wave) this eviction spends, if any
    target_domain: str | None = None  # the target node's domain in ``topology_key``
    waits_for: str = ""  # the pool node the replacement waits for: "NodePool p in zone-c"
    capacity: str = ""  # with waits_for: "reserve" (capacity first) or "await" (SPEC §5.10)
    reserve_in: tuple[tuple[str, str], ...] = ()  # with waits_for: the node labels to pin

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload_key(self) -> str:
        """Its workload across namespaces (:func:`workload_key`)."""
        return workload_key(self.namespace, self.workload, self.name)


def workload_key(namespace: str, workload: str, name: str, *, marked: bool = True) -> str:
    """The workload a pod belongs to, across namespaces: ``namespace/Kind/name``. A pod with no
    controller (``workload`` "") is a workload of its own: ``pod:namespace/name``, as the
    executor groups and logs it, or ``namespace/name`` unmarked, as the cooldown names it."""
    if workload:
        return f"{namespace}/{workload}"
    return f"pod:{namespace}/{name}" if marked else f"{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class Hold:
    """One reason a view stays above its maxSkew, and how many of its pods it holds."""

    code: (
        SkipCode  # a skip code (``has-pvc``, ``pdb``, ``limit``, ``no-fit``, ...), ``min-domains``
    )
    pods: int
    detail: str  # the detail of the first such pod (namespace/name order), for people


@dataclass(frozen=True, slots=True)
class Unrepaired:
    """A considered view still above its maxSkew after the plan, and what holds it there."""

    view: ViewReport  # after the plan
    skew_before: int
    needed: int  # fewest evictions bringing it within maxSkew from before the plan, none held
    reasons: tuple[Hold, ...]  # the most pods first, then by code

    @property
    def skew_after(self) -> int:
        return self.view.skew


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's whole answer for one snapshot and policy."""

    evictions: tuple[Eviction, ...]
    skipped: tuple[Skip, ...]
    violations: tuple[ViewReport, ...]  # violated views, before the plan
    after: tuple[ViewReport, ...]  # the same views after the simulated plan
    lower_bound: int  # no plan reaching the skews this plan reaches evicts fewer pods
    notes: tuple[str, ...] = ()
    unrepaired: tuple[Unrepaired, ...] = ()  # considered views left above maxSkew, worst first
    holds: tuple[str, ...] = ()  # the holds in force, as skip codes (SPEC §3.12, core.holds)
    launch_wanted: tuple[str, ...] = ()  # workloads whose repair needed a new node (the loop's)
    skews: tuple[tuple[ViewKey, int], ...] = ()  # every view's skew before, the largest per key
    steering: Steering | None = None  # the deletion costs a run would write (SPEC §7)

    @property
    def waves(self) -> tuple[tuple[str, ...], ...]:
        count = max((e.wave for e in self.evictions), default=0)
        return tuple(
            tuple(e.key for e in self.evictions if e.wave == w) for w in range(1, count + 1)
        )

    @property
    def minimal(self) -> bool:
        """True when the plan is proven minimal: its size meets the lower bound, the bound of
        what it sets out to reach (every view it repairs within maxSkew, every other one at
        the skew it ends at; :attr:`unrepaired` says what holds those)."""
        return len(self.evictions) == self.lower_bound

    @property
    def repaired(self) -> int:
        """Violated views the plan brings within their maxSkew."""
        return sum(not v.violated for v in self.after)
