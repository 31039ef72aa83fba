"""The typed, frozen model the planning core works on.

API objects (from a live cluster or a snapshot file) are converted into these once, at the
boundary (:mod:`rebalancer.core.convert`). Nothing downstream re-validates or re-defaults them:
a :class:`SpreadConstraint` here is already normalised the way kube-scheduler normalises it
(selector parsed and merged with ``matchLabelKeys``, ``minDomains`` and the inclusion
policies defaulted).

Mappings (labels, allocatable, requests) are plain dicts that nobody mutates; the objects are
compared by value and never hashed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, TypeVar, cast

HARD: Final = "DoNotSchedule"
SOFT: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"

HOSTNAME_KEY: Final = "kubernetes.io/hostname"
ZONE_KEY: Final = "topology.kubernetes.io/zone"

NOT_SHARED: Final = -1
"""``Pod.label_set`` / ``Pod.template`` of a pod the converter did not build."""

SelectorOp = Literal["In", "NotIn", "Exists", "DoesNotExist"]
NodeSelectorOp = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: SelectorOp
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed ``metav1.LabelSelector``; ``matchLabels`` entries are kept as pairs."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` or ``matchFields`` entry of a node selector term."""

    key: str
    operator: NodeSelectorOp
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A node selector term: all its expressions and fields must match."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """Required node affinity (or a PV's node affinity): the terms are ORed."""

    terms: tuple[NodeSelectorTerm, ...]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A normalised ``topologySpreadConstraints`` entry of one pod.

    ``selector`` is the effective selector: the constraint's ``labelSelector`` with, for each
    ``matchLabelKeys`` key the pod carries, an ``In [value]`` requirement added. ``None`` means
    the constraint had no ``labelSelector`` and so matches no pod (as in kube-scheduler).
    ``default`` marks a constraint that came from the cluster defaults, not the pod spec.
    """

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    match_label_keys: tuple[str, ...] = ()
    default: bool = False

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == HARD


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """The controlling owner reference of a pod."""

    kind: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]  # cpu in millicores, memory and storage in bytes, pods
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True  # the Ready condition is True (False or Unknown make it NotReady)
    declared_features: frozenset[str] = frozenset()  # status.declaredFeatures (1.36+)
    pool_hash: str = ""  # the template hash Karpenter launched it with ("version/hash"), if any


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    node_name: str | None
    created: float  # creationTimestamp, seconds since the epoch
    phase: str = "Running"
    terminating: bool = False  # metadata.deletionTimestamp is set
    priority: int | None = None  # spec.priority as written in the pod
    priority_class_name: str | None = None
    owner: OwnerRef | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    constraints: tuple[SpreadConstraint, ...] = ()
    requests: Mapping[str, int] = field(default_factory=dict)  # effective, as the scheduler sums
    pvc_names: tuple[str, ...] = ()
    local_storage: bool = False  # has an emptyDir volume
    mirror: bool = False  # static pod mirrored by the kubelet
    grace_period_seconds: int | None = None  # spec.terminationGracePeriodSeconds
    ready: bool = True  # the Ready condition is True (what the Eviction API calls healthy)
    disruption_target: bool = False  # the DisruptionTarget condition is True: it is leaving
    resource_claims: tuple[str, ...] = ()  # spec.resourceClaims names (DRA)
    evict_requested: bool = False  # annotated descheduler.alpha.kubernetes.io/evict
    prefer_no_eviction: bool = False  # annotated descheduler.alpha.kubernetes.io/prefer-no-eviction
    deletion_cost: str | None = None  # controller.kubernetes.io/pod-deletion-cost, as written
    cost_mark: str | None = None  # rebalancer/deletion-cost: the cost rebalancer last wrote
    resource_version: str = ""  # metadata.resourceVersion (a write's precondition)
    scheduling_group: str | None = None  # spec.schedulingGroup.podGroupName: a gang's PodGroup
    required_features: frozenset[str] = frozenset()  # node features it needs (convert.features)
    do_not_disrupt: bool = False  # karpenter.sh/do-not-disrupt protects it (core.karpenter.marks)
    started: float | None = None  # status.startTime, seconds since the epoch; None: not started
    label_set: int = field(default=NOT_SHARED, compare=False, repr=False)
    """Pods converted in one snapshot with equal labels carry the same number (see template)."""
    template: int = field(default=NOT_SHARED, compare=False, repr=False)
    """Pods converted in one snapshot with equal node selector, required affinity, tolerations
    and constraints carry the same number: caches downstream key on it. Set by the converter;
    a pod built by hand shares nothing (:data:`NOT_SHARED`)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def leaving(self) -> bool:
        """Terminating, or marked for disruption (DisruptionTarget): not counted, not evicted."""
        return self.terminating or self.disruption_target


_T = TypeVar("_T")


def _positional(cls: type[_T]) -> Callable[..., _T]:
    """A constructor of ``cls`` (a frozen, slotted dataclass) taking every field in order.

    The dataclass's own ``__init__`` must go through ``object.__setattr__`` once per field (the
    class forbids plain assignment): about 3 µs for a Pod's 32 fields. This one assigns them
    to an instance of an unfrozen twin with the very same slots, then makes the instance a
    ``cls``: the same object, built in a fifth of the time (150,000 pods are built per load).
    Only for classes whose ``__init__`` does nothing but assign (no ``__post_init__``, every
    field in ``__init__``): checked here.
    """
    names = [f.name for f in fields(cast(Any, cls))]
    slots = tuple(getattr(cls, "__slots__", ()))
    if (
        tuple(names) != slots
        or hasattr(cls, "__post_init__")
        or not all(f.init for f in fields(cast(Any, cls)))
    ):
        raise TypeError(f"{cls.__name__}: not a plain frozen, slotted dataclass")
    body = "".join(f"    self.{name} = {name}\n" for name in names)
    source = f"def __init__(self, {', '.join(names)}):\n{body}    self.__class__ = cls\n"
    scope: dict[str, Any] = {"cls": cls}
    exec(source, scope)  # as dataclasses writes __init__: one assignment per field
    twin = type(f"_Building{cls.__name__}", (), {"__slots__": slots, "__init__": scope["__init__"]})
    return cast(Callable[..., _T], twin)


new_pod: Final = _positional(Pod)
"""``Pod(*values)`` with all 33 fields given in order, faster (the typed decoder's)."""


IF_HEALTHY_BUDGET: Final = "IfHealthyBudget"
ALWAYS_ALLOW: Final = "AlwaysAllow"


def shared_key(number: int, index: int) -> int:
    """A cache key from a pod's ``label_set`` or ``template`` and its index in the snapshot:
    the number when the converter set it, else one of the pod's own (negative, never shared)."""
    return number if number != NOT_SHARED else -1 - index


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """The status the Eviction API judges by (disruptionsAllowed, the healthy counts, the
    generations); minAvailable/maxUnavailable are folded into it by the disruption controller,
    so the spec's budgets are not kept."""

    namespace: str
    name: str
    selector: LabelSelector | None  # None selects nothing; an empty selector selects all
    disruptions_allowed: int
    current_healthy: int = 0
    desired_healthy: int = 0
    generation: int = 0  # metadata.generation
    observed_generation: int = 0  # status.observedGeneration; behind generation: no budget
    unhealthy_pod_eviction_policy: str = IF_HEALTHY_BUDGET  # or ALWAYS_ALLOW


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str | None


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    node_affinity: NodeSelector | None


@dataclass(frozen=True, slots=True)
class Service:
    namespace: str
    name: str
    selector: Mapping[str, str]  # empty selects nothing (a Service without a selector)


@dataclass(frozen=True, slots=True)
class Controller:
    """A ReplicaSet, StatefulSet or ReplicationController, for default-constraint selectors."""

    kind: str
    namespace: str
    name: str
    selector: LabelSelector | None
    owner: OwnerRef | None = None  # e.g. the Deployment that owns a ReplicaSet
    revision: int | None = None  # a ReplicaSet's deployment.kubernetes.io/revision
    current_revision: str = ""  # a StatefulSet's status.currentRevision
    update_revision: str = ""  # a StatefulSet's status.updateRevision


@dataclass(frozen=True, slots=True)
class Deployment:
    """What the rollout rule needs of a Deployment (see :mod:`rebalancer.core.rollout`)."""

    namespace: str
    name: str
    revision: int | None = None  # deployment.kubernetes.io/revision: its newest ReplicaSet's
    generation: int = 0
    observed_generation: int = 0
    paused: bool = False  # spec.paused
    progressing_status: str = ""  # the Progressing condition's status ("" when absent)
    progressing_reason: str = ""  # ... and its reason (e.g. ProgressDeadlineExceeded)


@dataclass(frozen=True, slots=True)
class Namespace:
    """A namespace's labels, for the policy's ``namespaceLabelSelector``."""

    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class NodePool:
    """A Karpenter NodePool (``karpenter.sh/v1``): the nodes it can add, for which pods, and
    how much room its limits leave (:mod:`rebalancer.core.karpenter.nodepools`)."""

    name: str
    requirements: tuple[NodeSelectorRequirement, ...] = ()  # spec.template.spec.requirements
    labels: Mapping[str, str] = field(default_factory=dict)  # spec.template.metadata.labels
    taints: tuple[Taint, ...] = ()  # spec.template.spec.taints (not its startupTaints)
    limits: Mapping[str, int] = field(default_factory=dict)  # spec.limits, in Node's units
    used: Mapping[str, int] = field(default_factory=dict)  # status.resources, in Node's units
    ready: bool = True  # no Ready condition that is False
    template_hash: str = ""  # its template's hash now ("version/hash"; Karpenter writes it)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the planner reads, as one immutable value."""

    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    priority_classes: tuple[PriorityClass, ...] = ()
    pvcs: tuple[PersistentVolumeClaim, ...] = ()
    pvs: tuple[PersistentVolume, ...] = ()
    services: tuple[Service, ...] = ()
    controllers: tuple[Controller, ...] = ()
    deployments: tuple[Deployment, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    """The Namespace objects read (their labels); empty when the source had none."""
    server_minor: int | None = None
    """The API server's minor of 1.x when the source said (a live read), else None: the
    scheduler rules that changed between releases follow it (:mod:`rebalancer.core.spread`)."""
    node_pools: tuple[NodePool, ...] = ()
    """Karpenter's NodePools read (where served, or in the snapshot file); empty otherwise."""
