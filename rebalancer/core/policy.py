"""The operator's policy: a decoded document in, a typed and frozen :class:`Policy` out.

Validation is pure (a document in, :class:`Policy` or :class:`~rebalancer.core.errors.InputError`
out; the file is read and its YAML parsed in :mod:`rebalancer.cluster.read.policyfile`). It never
stops at the first mistake:
every problem is collected with its path and the offending value, so one
``rebalancer policy check`` shows them all::

    nodefit: unknown key; did you mean nodeFit?
    limits.perNode: must be an integer >= 0 or null, got -1
    namespaces: include and exclude are mutually exclusive

Each key of the file is declared once, on the :class:`Policy` field it sets: its name in the
file and its :class:`Kind` (how it is read, with its bounds, and written back) in the field's
metadata, beside the field's type, default and docstring. Parsing, the canonical dump
(:func:`policy_to_dict`, ``policy check -o yaml``), the chart's JSON Schema
(:mod:`rebalancer.core.policy_schema`) and the descheduler import all go by :data:`KEYS`.

Problems are recorded by the one :class:`~rebalancer.core.convert.checker.Checker` that also
reads snapshots and descheduler policies, and the label selector goes through the converters'
one selector parser (in strict mode).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from rebalancer.core.constants import DNS_LABEL, DNS_SUBDOMAIN, INT32_MAX, INT32_MIN, INT64_MAX
from rebalancer.core.convert.checker import Checker, at
from rebalancer.core.convert.selectors import LABEL_KEY_WHAT, is_label_key, label_selector
from rebalancer.core.errors import InputError
from rebalancer.core.goduration import scan_go_duration
from rebalancer.core.model import HARD, HONOR, IGNORE, SOFT, LabelSelector
from rebalancer.core.schedule import Schedule, Window, cron_problem, time_zone_problem

SYSTEM_CRITICAL = 2_000_000_000

PREFERRED: Final = "Preferred"
MANDATORY: Final = "Mandatory"
NO_EVICTION_POLICIES: Final = (PREFERRED, MANDATORY)
CREATION_TIMESTAMP: Final = "creationTimestamp"
"""``minPodAgeFrom``: a pod's age counts from its creation (the default)."""
START_TIME: Final = "startTime"
"""``minPodAgeFrom``: a pod's age counts from ``status.startTime``, as the descheduler's."""
AUTO_API: Final = "auto"
EVICTION_API: Final = "eviction"
EVICTION_REQUEST_API: Final = "evictionRequest"
EVICTION_APIS: Final = (AUTO_API, EVICTION_API, EVICTION_REQUEST_API)
"""``evictionAPI``: how a planned eviction is sent (SPEC §5.11)."""
NEVER: Final = "never"
RESERVE_CAPACITY_MODES: Final = (AUTO_API, NEVER)
"""``reserveCapacity``: whether a replacement that waits for a new node gets it first (SPEC
§5.10): ``auto`` where the CapacityBuffer API is served and RBAC allows it, ``never``."""

API_VERSION: Final = "rebalancer/v1alpha1"
KIND: Final = "RebalancerPolicy"
HEADER_KEYS: Final = ("apiVersion", "kind")

WHEN_UNSATISFIABLE: Final = (HARD, SOFT)
INCLUSION_POLICIES: Final = (HONOR, IGNORE)


# --------------------------------------------------------------------------------------------
# Durations


_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Parse a Go-style duration (``0s``, ``90s``, ``5m``, ``1h30m``, ``1.5h``) into seconds.

    Read as Go reads it (:func:`~rebalancer.core.goduration.scan_go_duration`), in a narrower
    form: units ``h``, ``m``, ``s`` and ``ms``, no sign, no bare ``0`` and no number ending in
    a point; surrounding blanks are dropped. Raises :class:`ValueError` with a message fit for
    a person.
    """
    shown = json.dumps(text)
    stripped = text.strip()
    if stripped.startswith("-"):
        raise ValueError(f"must not be negative, got {shown}")
    if not stripped:
        raise ValueError(f"must be a duration like 90s, 5m or 1h30m, got {shown}")
    duration = scan_go_duration(stripped)
    if (
        duration is None
        or duration.sign
        or not duration.parts
        or any(unit not in _UNIT_SECONDS or n.endswith(".") for n, unit in duration.parts)
    ):
        raise ValueError(
            f"must be a duration like 90s, 5m or 1h30m (units h, m, s, ms), got {shown}"
        )
    return duration.seconds


def format_duration(seconds: float) -> str:
    """The canonical spelling of a duration: ``0s``, ``1m30s``, ``1h30m``, ``2h``, ``1.5s``."""
    whole = int(seconds)
    fraction = seconds - whole
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if fraction:
        parts.append(f"{round(secs + fraction, 3):g}s")
    elif secs or not parts:
        parts.append(f"{secs}s")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Reading a value. Each reader records problems and returns a usable fallback, so the walk goes
# on and every problem is reported at once.

_SHOWN: Final = 60  # characters of a bad string or number quoted in a problem


def _show(value: object) -> str:
    """A value as the problem message quotes it (YAML-ish: null, true, "text", 3), cut short."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        text = json.dumps(value[: _SHOWN + 1])
        return text if len(value) <= _SHOWN else text[:_SHOWN] + '..."'
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int) and value.bit_length() > 200:
        return f"a {value.bit_length()}-bit integer"
    text = str(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


class _Checker(Checker):
    """The checker of a policy file: each problem is the path and a message quoting the value
    the YAML way (:func:`_show`)."""

    __slots__ = ()
    quote = staticmethod(_show)
    key_room = _SHOWN

    def __init__(self) -> None:
        super().__init__("", [])


class Kind:
    """How the value of one key is read from a policy file and written back."""

    __slots__ = ()

    def read(self, check: Checker, value: object, path: str) -> Any:
        """The value, or a fallback after recording its problems."""
        raise NotImplementedError

    def dump(self, value: Any) -> object:
        """The value as the canonical policy file writes it."""
        return value


@dataclass(frozen=True, slots=True)
class Flag(Kind):
    """true or false."""

    def read(self, check: Checker, value: object, path: str) -> bool:
        return check.boolean(value, path, default=False)


@dataclass(frozen=True, slots=True)
class Count(Kind):
    """An integer in [minimum, maximum], and null when nullable; ``zero``, when set, is the
    problem of a 0 (which means something else to the API, as gracePeriodSeconds' does)."""

    minimum: int
    maximum: int = INT32_MAX
    nullable: bool = False
    zero: str | None = None

    def read(self, check: Checker, value: object, path: str) -> int | None:
        if self.zero is not None and value == 0 and not isinstance(value, bool):
            check.bad(path, self.zero)
            return None
        return check.bounded_int(
            value, path, self.minimum, nullable=self.nullable, maximum=self.maximum
        )


@dataclass(frozen=True, slots=True)
class OneOf(Kind):
    """One of a few words."""

    choices: tuple[str, ...]

    def read(self, check: Checker, value: object, path: str) -> str | None:
        return check.choice(value, path, self.choices)


@dataclass(frozen=True, slots=True)
class LabelKey(Kind):
    """A label key (``app``, ``example.com/tier``)."""

    def read(self, check: Checker, value: object, path: str) -> str | None:
        if isinstance(value, str) and is_label_key(value):
            return value
        check.bad(path, f"must be {LABEL_KEY_WHAT}, got {check.quote(value)}")
        return None


MAX_DURATION_SECONDS: Final = 365 * 24 * 3600
"""The longest duration a policy may give (``minPodAge``, a window's ``duration``): 8760h, a
year. Longer ones mean nothing to a planner whose pods and windows come and go within one,
and the largest numbers a duration can spell do not even fit a float."""


@dataclass(frozen=True, slots=True)
class Duration(Kind):
    """A Go-style duration (``90s``, ``1h30m``) of at most :data:`MAX_DURATION_SECONDS`."""

    def read(self, check: Checker, value: object, path: str) -> float:
        if not isinstance(value, str):
            check.bad(
                path, f"must be a duration string like 90s, 5m or 1h30m, got {check.quote(value)}"
            )
            return 0.0
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            check.bad(path, str(exc))
            return 0.0
        if not seconds <= MAX_DURATION_SECONDS:
            longest = format_duration(MAX_DURATION_SECONDS)
            check.bad(path, f"must be at most {longest} (365 days), got {check.quote(value)}")
            return 0.0
        return seconds

    def dump(self, value: float) -> str:
        return format_duration(value)


@dataclass(frozen=True, slots=True)
class Selector(Kind):
    """A ``metav1.LabelSelector`` (matchLabels sorted by key), or null; ``nodes``: on node
    labels, where the descheduler's string form gets a pointer to the import."""

    nodes: bool = False

    def read(self, check: Checker, value: object, path: str) -> LabelSelector | None:
        if self.nodes and isinstance(value, str):
            check.bad(
                path,
                "must be a label selector mapping (matchLabels, matchExpressions), "
                f"got {check.quote(value)}; rebalancer policy import converts the descheduler's "
                "string form",
            )
            return None
        return label_selector(check, value, path, strict=True)

    def dump(self, value: LabelSelector | None) -> object:
        return None if value is None else label_selector_to_dict(value)


@dataclass(frozen=True, slots=True)
class Struct(Kind):
    """A mapping whose keys are the declared fields of ``cls``; ``rule`` checks them together
    once ``rule_after`` is read. After a problem in a field the result is None."""

    cls: type
    required: tuple[str, ...] = ()
    nullable: bool = False
    rule: Callable[[Checker, dict[str, Any], str], None] | None = None
    rule_after: str = ""

    def read(self, check: Checker, value: object, path: str) -> Any:
        keys = keys_of(self.cls)
        raw = check.mapping(value, path, names_of(self.cls), nullable=self.nullable)
        if not isinstance(value, dict) and not (value is None and self.nullable):
            return None
        before = len(check.problems)
        ruled = 0  # the rule's problems, which fail no field
        for name in self.required:
            if name not in raw:
                check.bad(at(path, name), "required")
        found: dict[str, Any] = {}
        for key in keys:
            if key.name in raw:  # a struct's keys set one field each
                found[key.attrs[0]] = key.kind.read(check, raw[key.name], at(path, key.name))
            if key.name == self.rule_after and self.rule is not None:
                ruled -= len(check.problems)
                self.rule(check, found, path)
                ruled += len(check.problems)
        return None if len(check.problems) - ruled > before else self.cls(**found)

    def dump(self, value: Any) -> dict[str, object]:
        return {key.name: key.kind.dump(key.value(value)) for key in keys_of(self.cls)}


@dataclass(frozen=True, slots=True)
class Key:
    """One key of the policy file: its name, its kind, and the fields it sets (namespaces sets
    two)."""

    name: str
    kind: Kind
    attrs: tuple[str, ...]

    def value(self, obj: object) -> Any:
        if len(self.attrs) == 1:
            return getattr(obj, self.attrs[0])
        return tuple(getattr(obj, attr) for attr in self.attrs)

    def assign(self, value: Any) -> dict[str, Any]:
        """The fields ``value`` sets, by name."""
        if len(self.attrs) == 1:
            return {self.attrs[0]: value}
        return dict(zip(self.attrs, value, strict=True))


def _key(name: str, kind: Kind, *also: str) -> dict[str, Any]:
    """The metadata declaring a field's key: ``name`` in the file, read as ``kind``; ``also``
    names further fields the key sets."""
    return {"key": name, "kind": kind, "also": also}


@functools.cache
def keys_of(cls: type) -> tuple[Key, ...]:
    """The declared keys of a policy dataclass, in the order of its fields."""
    return tuple(
        Key(f.metadata["key"], f.metadata["kind"], (f.name, *f.metadata["also"]))
        for f in fields(cls)
        if "key" in f.metadata
    )


@functools.cache
def names_of(cls: type) -> tuple[str, ...]:
    """The names of the declared keys of a policy dataclass."""
    return tuple(key.name for key in keys_of(cls))


# Kinds of their own


@dataclass(frozen=True, slots=True)
class ConstraintKinds(Kind):
    """The whenUnsatisfiable kinds to rebalance: a non-empty list, each once."""

    def read(self, check: Checker, value: object, path: str) -> tuple[str, ...]:
        kinds: list[str] = []
        items = check.items(value, path)
        for index, item in enumerate(items):
            chosen = check.choice(item, at(path, index), WHEN_UNSATISFIABLE)
            if chosen in kinds:
                check.bad(at(path, index), f"{chosen} is listed twice")
            elif chosen is not None:
                kinds.append(chosen)
        if not items and (value is None or isinstance(value, list)):
            check.bad(path, f"must list at least one of {', '.join(WHEN_UNSATISFIABLE)}")
        return tuple(kinds)

    def dump(self, value: tuple[str, ...]) -> list[str]:
        return list(value)


@dataclass(frozen=True, slots=True)
class DefaultConstraints(Kind):
    """Spread constraints for pods that declare none; each (topologyKey, whenUnsatisfiable)
    once."""

    def read(self, check: Checker, value: object, path: str) -> tuple[DefaultConstraint, ...]:
        result: list[DefaultConstraint] = []
        pairs: set[tuple[str, str]] = set()
        for index, item in enumerate(check.items(value, path)):
            constraint = DEFAULT_CONSTRAINT.read(check, item, at(path, index))
            if constraint is None:
                continue
            pair = (constraint.topology_key, constraint.when_unsatisfiable)
            if pair in pairs:
                check.bad(
                    at(path, index),
                    f"a second {pair[1]} constraint on {pair[0]}; "
                    "topologyKey and whenUnsatisfiable pairs must be unique",
                )
            else:
                pairs.add(pair)
                result.append(constraint)
        return tuple(result)

    def dump(self, value: tuple[DefaultConstraint, ...]) -> list[object]:
        return [DEFAULT_CONSTRAINT.dump(c) for c in value]


@dataclass(frozen=True, slots=True)
class Namespaces(Kind):
    """``{include, exclude}`` (names of namespaces), not both; with include set and exclude
    omitted, exclude is empty. Sets two fields: (include, exclude)."""

    def read(
        self, check: Checker, value: object, path: str
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        raw = check.mapping(value, path, ("include", "exclude"))
        what = "a namespace name (DNS label)"
        include = check.string_list(raw.get("include"), at(path, "include"), DNS_LABEL, what)
        if "exclude" in raw:
            exclude = check.string_list(raw["exclude"], at(path, "exclude"), DNS_LABEL, what)
        else:
            exclude = () if include else _DEFAULTS.namespaces_exclude
        if include and exclude:
            check.bad(path, "include and exclude are mutually exclusive")
        return include, exclude

    def dump(self, value: tuple[tuple[str, ...], tuple[str, ...]]) -> dict[str, object]:
        return {"include": list(value[0]), "exclude": list(value[1])}


@dataclass(frozen=True, slots=True)
class Threshold(Kind):
    """``{value: N}`` (a 32-bit integer) or ``{name: PriorityClass}``, exactly one."""

    def read(self, check: Checker, value: object, path: str) -> PriorityThreshold:
        raw = check.mapping(value, path, ("value", "name"))
        if not isinstance(value, dict):
            return PriorityThreshold()
        has_value = raw.get("value") is not None
        has_name = raw.get("name") is not None
        if has_value and has_name:
            check.bad(path, "set value or name, not both")
            return PriorityThreshold()
        if has_name:
            name = check.string(
                raw["name"], at(path, "name"), DNS_SUBDOMAIN, "a PriorityClass name"
            )
            return PriorityThreshold(value=None, name=name)
        if not has_value:
            check.bad(path, "set value or name")
            return PriorityThreshold()
        number = raw["value"]
        if (
            isinstance(number, int)
            and not isinstance(number, bool)
            and INT32_MIN <= number <= INT32_MAX
        ):
            return PriorityThreshold(value=number)
        check.bad(at(path, "value"), f"must be a 32-bit integer, got {check.quote(number)}")
        return PriorityThreshold()

    def dump(self, value: PriorityThreshold) -> dict[str, object]:
        return {"name": value.name} if value.name is not None else {"value": value.value}


WINDOW_KEYS: Final = ("cron", "duration", "timeZone")


@dataclass(frozen=True, slots=True)
class Windows(Kind):
    """``{windows: [{cron, duration, timeZone}, ...]}``, at least one; null is any time."""

    def read(self, check: Checker, value: object, path: str) -> Schedule:
        if value is None:
            return Schedule()
        raw = check.mapping(value, path, ("windows",))
        windows_path = at(path, "windows")
        if isinstance(value, dict) and raw.get("windows") in (None, []):
            check.bad(windows_path, "must list at least one window; omit schedule for any time")
            return Schedule()
        found = [
            _window(check, item, at(windows_path, index))
            for index, item in enumerate(check.items(raw.get("windows"), windows_path))
        ]
        return Schedule(tuple(w for w in found if w is not None))

    def dump(self, value: Schedule) -> object:
        if not value.windows:
            return None
        return {
            "windows": [
                {
                    "cron": w.cron,
                    "duration": format_duration(w.duration_seconds),
                    "timeZone": w.time_zone,
                }
                for w in value.windows
            ]
        }


# --------------------------------------------------------------------------------------------
# The policy: each field declared with its key


def _soft_min_domains(check: Checker, found: dict[str, Any], path: str) -> None:
    if found.get("when_unsatisfiable") == SOFT and found.get("min_domains", 1) not in (None, 1):
        check.bad(at(path, "minDomains"), "applies only to whenUnsatisfiable DoNotSchedule")


@dataclass(frozen=True, slots=True)
class DefaultConstraint:
    """A spread constraint applied to pods that declare none (like a scheduler profile's)."""

    max_skew: int = field(metadata=_key("maxSkew", Count(1)))
    topology_key: str = field(metadata=_key("topologyKey", LabelKey()))
    when_unsatisfiable: str = field(
        default=HARD, metadata=_key("whenUnsatisfiable", OneOf(WHEN_UNSATISFIABLE))
    )
    min_domains: int = field(default=1, metadata=_key("minDomains", Count(1)))
    node_affinity_policy: str = field(
        default=HONOR, metadata=_key("nodeAffinityPolicy", OneOf(INCLUSION_POLICIES))
    )
    node_taints_policy: str = field(
        default=IGNORE, metadata=_key("nodeTaintsPolicy", OneOf(INCLUSION_POLICIES))
    )


DEFAULT_CONSTRAINT: Final = Struct(
    DefaultConstraint,
    required=("maxSkew", "topologyKey"),
    rule=_soft_min_domains,
    rule_after="minDomains",
)
"""One entry of ``defaultConstraints`` (minDomains applies only to DoNotSchedule)."""

_LIMIT: Final = Count(0, nullable=True)


@dataclass(frozen=True, slots=True)
class Limits:
    """Upper bounds on the evictions of a run, counting those of earlier runs within
    ``run --cooldown`` (:mod:`~rebalancer.core.limits`); ``None`` means unlimited."""

    total: int | None = field(default=None, metadata=_key("total", _LIMIT))
    per_node: int | None = field(default=None, metadata=_key("perNode", _LIMIT))
    per_namespace: int | None = field(default=None, metadata=_key("perNamespace", _LIMIT))
    per_workload: int | None = field(default=None, metadata=_key("perWorkload", _LIMIT))


@dataclass(frozen=True, slots=True)
class PriorityThreshold:
    """Pods at or above this priority are never evicted; exactly one of the two is set."""

    value: int | None = SYSTEM_CRITICAL
    name: str | None = None


_FLAG: Final = Flag()
_SELECTOR: Final = Selector()


@dataclass(frozen=True, slots=True)
class Policy:
    constraints: tuple[str, ...] = field(
        default=(HARD,), metadata=_key("constraints", ConstraintKinds())
    )
    """whenUnsatisfiable kinds to rebalance: DoNotSchedule, and ScheduleAnyway for soft ones."""
    node_fit: bool = field(default=True, metadata=_key("nodeFit", _FLAG))
    """False: allow evictions whose replacement stays Pending (cluster-autoscaler adds room)."""
    max_waiting_for_nodes: int | None = field(
        default=None, metadata=_key("maxWaitingForNodes", _LIMIT)
    )
    """With node_fit off: at most this many replacements of one plan go where no node has room
    for them yet (they wait for new nodes); None means no bound."""
    default_constraints: tuple[DefaultConstraint, ...] = field(
        default=(), metadata=_key("defaultConstraints", DefaultConstraints())
    )
    """Applied to pods that have no constraints and belong to a Service or controller."""
    namespaces_include: tuple[str, ...] = field(
        default=(), metadata=_key("namespaces", Namespaces(), "namespaces_exclude")
    )
    """Only these namespaces are rebalanced (exclusive with namespaces_exclude)."""
    namespaces_exclude: tuple[str, ...] = ("kube-system",)
    """These namespaces are never rebalanced (the key ``namespaces`` sets both)."""
    namespace_label_selector: LabelSelector | None = field(
        default=None, metadata=_key("namespaceLabelSelector", _SELECTOR)
    )
    """Only pods in namespaces whose labels match it are rebalanced (within namespaces_include
    / namespaces_exclude); None means every namespace those allow."""
    label_selector: LabelSelector | None = field(
        default=None, metadata=_key("labelSelector", _SELECTOR)
    )
    """Only pods matching it are candidates for eviction; None means all pods."""
    priority_threshold: PriorityThreshold = field(
        default_factory=PriorityThreshold, metadata=_key("priorityThreshold", Threshold())
    )
    """Pods at or above it are never evicted."""
    evict_local_storage_pods: bool = field(
        default=False, metadata=_key("evictLocalStoragePods", _FLAG)
    )
    """Allow evicting pods with emptyDir volumes."""
    evict_pods_with_pvc: bool = field(default=False, metadata=_key("evictPodsWithPVC", _FLAG))
    """Allow evicting pods that mount PersistentVolumeClaims."""
    evict_pods_with_resource_claims: bool = field(
        default=False, metadata=_key("evictPodsWithResourceClaims", _FLAG)
    )
    """Allow evicting pods with DRA ``spec.resourceClaims`` (their devices are re-allocated)."""
    evict_bare_pods: bool = field(default=False, metadata=_key("evictBarePods", _FLAG))
    """Allow evicting pods without a controller; they never come back."""
    min_pod_age_seconds: float = field(default=0.0, metadata=_key("minPodAge", Duration()))
    """Pods younger than this are never evicted."""
    min_pod_age_from: str = field(
        default=CREATION_TIMESTAMP,
        metadata=_key("minPodAgeFrom", OneOf((CREATION_TIMESTAMP, START_TIME))),
    )
    """Where a pod's age for ``minPodAge`` starts: its ``metadata.creationTimestamp``, or its
    ``status.startTime`` (as the descheduler counts it; a pod not started yet is age 0)."""
    limits: Limits = field(
        default_factory=Limits, metadata=_key("limits", Struct(Limits, nullable=True))
    )
    """Upper bounds on evictions in one run."""
    grace_period_seconds: int | None = field(
        default=None,
        metadata=_key(
            "gracePeriodSeconds",
            Count(1, INT64_MAX, nullable=True, zero="0 means no grace period; use >= 1 or omit"),
        ),
    )
    """A floor (>= 1, an int64 as in DeleteOptions): sent only when longer than a pod's own
    terminationGracePeriodSeconds (30 when unset), so a pod's shutdown is never shortened; None
    keeps each pod's own."""
    schedule: Schedule = field(default_factory=Schedule, metadata=_key("schedule", Windows()))
    """Maintenance windows: ``run`` evicts only inside one; no windows means at any time."""
    min_replicas: int = field(default=0, metadata=_key("minReplicas", Count(0)))
    """Pods of a workload with fewer live pods than this are never evicted; 0 and 1 mean off."""
    node_selector: LabelSelector | None = field(
        default=None, metadata=_key("nodeSelector", Selector(nodes=True))
    )
    """Only pods on nodes whose labels match it are evicted (all pods still count)."""
    ignore_pods_without_pdb: bool = field(
        default=False, metadata=_key("ignorePodsWithoutPDB", _FLAG)
    )
    """True: pods that no PodDisruptionBudget covers are never evicted."""
    no_eviction_policy: str = field(
        default=PREFERRED, metadata=_key("noEvictionPolicy", OneOf(NO_EVICTION_POLICIES))
    )
    """The ``prefer-no-eviction`` pod annotation: Preferred (evicted last) or Mandatory (never)."""
    steer_scale_down: bool = field(default=False, metadata=_key("steerScaleDown", _FLAG))
    """True: keep ``pod-deletion-cost`` on ReplicaSet pods so scale-downs keep the spread."""
    eviction_api: str = field(default=AUTO_API, metadata=_key("evictionAPI", OneOf(EVICTION_APIS)))
    """How planned evictions are sent: ``eviction`` (the Eviction API), ``evictionRequest``
    (EvictionRequests, KEP-4563: the pod's responders act first), or ``auto`` (requests where
    the server serves them and RBAC allows them, else the Eviction API)."""
    reserve_capacity: str = field(
        default=AUTO_API, metadata=_key("reserveCapacity", OneOf(RESERVE_CAPACITY_MODES))
    )
    """A replacement that waits for a node a NodePool adds: ``auto`` reserves that capacity
    first (a CapacityBuffer, where the API is served and RBAC allows it) and evicts once a node
    is Ready; ``never`` evicts and lets the replacement wait, Pending (SPEC §5.10)."""


_DEFAULTS: Final = Policy()
KEYS: Final = keys_of(Policy)
"""The keys of a policy file after its header, in the documented order."""
TOP_KEYS: Final = (*HEADER_KEYS, *(key.name for key in KEYS))


# --------------------------------------------------------------------------------------------
# The readers of the kinds of their own


def _window(check: Checker, value: object, path: str) -> Window | None:
    """One maintenance window: ``{cron, duration, timeZone}``, timeZone UTC when omitted."""
    raw = check.mapping(value, path, WINDOW_KEYS)
    if not isinstance(value, dict):
        return None
    before = len(check.problems)
    for key in ("cron", "duration"):
        if key not in raw:
            check.bad(at(path, key), "required")
    cron = raw.get("cron")
    if "cron" in raw:
        if not isinstance(cron, str):
            check.bad(
                at(path, "cron"), f"must be a cron expression string, got {check.quote(cron)}"
            )
        elif (problem := cron_problem(cron)) is not None:
            check.bad(at(path, "cron"), f"{problem}, got {check.quote(cron)}")
    seconds = 0.0
    if "duration" in raw:
        read = len(check.problems)
        seconds = Duration().read(check, raw["duration"], at(path, "duration"))
        if len(check.problems) == read and seconds <= 0:
            check.bad(at(path, "duration"), f"must be > 0, got {check.quote(raw['duration'])}")
    zone = raw.get("timeZone", "UTC")
    if not isinstance(zone, str):
        check.bad(at(path, "timeZone"), f"must be a time zone name, got {check.quote(zone)}")
    elif (problem := time_zone_problem(zone)) is not None:
        check.bad(at(path, "timeZone"), f"{problem}, got {check.quote(zone)}")
    if len(check.problems) > before or not isinstance(cron, str) or not isinstance(zone, str):
        return None
    return Window(cron=" ".join(cron.split()), duration_seconds=seconds, time_zone=zone)


# --------------------------------------------------------------------------------------------
# Public API


def policy_from_document(document: object, source: str, problems: Sequence[str] = ()) -> Policy:
    """Validate a decoded policy document; raise :class:`InputError` listing every problem.

    ``None`` (an empty document, or one holding only comments) is the default :class:`Policy`.
    Otherwise ``apiVersion: rebalancer/v1alpha1`` and ``kind: RebalancerPolicy`` are required.
    ``problems`` (found while decoding, such as duplicate keys) are reported first.
    """
    if document is None:
        if problems:
            raise InputError(source, problems)
        return Policy()
    check = _Checker()
    check.problems.extend(problems)
    policy = _policy(check, document)
    if check.problems:
        raise InputError(source, check.problems)
    return policy


def _policy(check: Checker, document: object) -> Policy:
    if not isinstance(document, dict):
        check.bad("", f"the policy must be a mapping, got {check.quote(document)}")
        return Policy()
    raw = check.mapping(document, "", TOP_KEYS)
    for name, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        if name not in raw:
            check.bad(name, f"required; set {expected}")
        elif raw[name] != expected:
            check.bad(name, f"must be {expected}, got {check.quote(raw[name])}")
    # Read in the documented key order, so the problems come out in that order too.
    found: dict[str, Any] = {}
    for key in KEYS:
        if key.name in raw:
            found.update(key.assign(key.kind.read(check, raw[key.name], key.name)))
    return Policy(**found)


def policy_with(values: Mapping[str, Any]) -> Policy:
    """The default policy with ``values`` set: by key, each as its kind reads it."""
    unknown = set(values).difference(key.name for key in KEYS)
    if unknown:
        raise ValueError(f"not policy keys: {sorted(unknown)}")
    found: dict[str, Any] = {}
    for key in KEYS:
        if key.name in values:
            found.update(key.assign(values[key.name]))
    return Policy(**found)


def restrict_to_namespace(policy: Policy, namespace: str) -> Policy:
    """Narrow ``policy`` to one namespace (the CLI's ``-n``).

    The namespace must be allowed by the policy: listed in ``namespaces.include`` when that is
    set, and not listed in ``namespaces.exclude``. Raises :class:`InputError` otherwise, since
    the result would rebalance nothing.
    """
    if not DNS_LABEL.match(namespace):
        raise InputError("--namespace", [f"must be a namespace name, got {_show(namespace)}"])
    if policy.namespaces_include and namespace not in policy.namespaces_include:
        raise InputError("--namespace", [f"{namespace} is not in the policy's namespaces.include"])
    if namespace in policy.namespaces_exclude:
        raise InputError("--namespace", [f"{namespace} is in the policy's namespaces.exclude"])
    return dataclasses.replace(policy, namespaces_include=(namespace,), namespaces_exclude=())


def label_selector_to_dict(selector: LabelSelector) -> dict[str, object]:
    """The ``metav1.LabelSelector`` form of a parsed selector."""
    return {
        "matchLabels": dict(selector.match_labels),
        "matchExpressions": [
            {"key": r.key, "operator": r.operator, "values": list(r.values)}
            for r in selector.match_expressions
        ],
    }


def policy_to_dict(policy: Policy) -> dict[str, object]:
    """The canonical camelCase form: every key, defaults filled in; loads back to ``policy``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        **{key.name: key.kind.dump(key.value(policy)) for key in KEYS},
    }
