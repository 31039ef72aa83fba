"""The operator's policy: a decoded document in, a typed and frozen :class:`Policy` out.

Validation is pure (a document in, :class:`Policy` or :class:`~rebalancer.core.errors.InputError`
out; the file is read and its YAML parsed in :mod:`rebalancer.cluster.read.policyfile`). It never
stops at the first mistake:
every problem is collected with its path and the offending value, so one
``rebalancer policy check`` shows them all::

    nodefit: unknown key; did you mean nodeFit?
    limits.perNode: must be an integer >= 0 or null, got -1
    namespaces: include and exclude are mutually exclusive

Problems are recorded by the converters' :class:`~rebalancer.core.convert.checker.Checker`
and the label selector goes through their one selector parser (in strict mode).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from rebalancer.core.constants import DNS_LABEL, DNS_SUBDOMAIN, INT32_MAX, INT32_MIN, INT64_MAX
from rebalancer.core.convert.checker import Checker, suggest
from rebalancer.core.convert.selectors import is_label_key, label_selector
from rebalancer.core.errors import InputError
from rebalancer.core.model import HARD, HONOR, IGNORE, SOFT, LabelSelector
from rebalancer.core.schedule import Schedule, Window, cron_problem, time_zone_problem

SYSTEM_CRITICAL = 2_000_000_000

PREFERRED: Final = "Preferred"
MANDATORY: Final = "Mandatory"
NO_EVICTION_POLICIES: Final = (PREFERRED, MANDATORY)

API_VERSION: Final = "rebalancer/v1alpha1"
KIND: Final = "RebalancerPolicy"


@dataclass(frozen=True, slots=True)
class DefaultConstraint:
    """A spread constraint applied to pods that declare none (like a scheduler profile's)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str = HARD
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


@dataclass(frozen=True, slots=True)
class Limits:
    """Upper bounds on evictions in one run; ``None`` means unlimited."""

    total: int | None = None
    per_node: int | None = None
    per_namespace: int | None = None
    per_workload: int | None = None


@dataclass(frozen=True, slots=True)
class PriorityThreshold:
    """Pods at or above this priority are never evicted; exactly one of the two is set."""

    value: int | None = SYSTEM_CRITICAL
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    constraints: tuple[str, ...] = (HARD,)
    """whenUnsatisfiable kinds to rebalance: DoNotSchedule, and ScheduleAnyway for soft ones."""
    node_fit: bool = True
    """False: allow evictions whose replacement stays Pending (cluster-autoscaler adds room)."""
    default_constraints: tuple[DefaultConstraint, ...] = ()
    """Applied to pods that have no constraints and belong to a Service or controller."""
    namespaces_include: tuple[str, ...] = ()
    """Only these namespaces are rebalanced (exclusive with namespaces_exclude)."""
    namespaces_exclude: tuple[str, ...] = ("kube-system",)
    """These namespaces are never rebalanced."""
    label_selector: LabelSelector | None = None
    """Only pods matching it are candidates for eviction; None means all pods."""
    namespace_label_selector: LabelSelector | None = None
    """Only pods in namespaces whose labels match it are rebalanced (within namespaces_include
    / namespaces_exclude); None means every namespace those allow."""
    priority_threshold: PriorityThreshold = field(default_factory=PriorityThreshold)
    """Pods at or above it are never evicted."""
    evict_local_storage_pods: bool = False
    """Allow evicting pods with emptyDir volumes."""
    evict_pods_with_pvc: bool = False
    """Allow evicting pods that mount PersistentVolumeClaims."""
    evict_pods_with_resource_claims: bool = False
    """Allow evicting pods with DRA ``spec.resourceClaims`` (their devices are re-allocated)."""
    evict_bare_pods: bool = False
    """Allow evicting pods without a controller; they never come back."""
    min_pod_age_seconds: float = 0.0
    """Pods younger than this are never evicted."""
    limits: Limits = field(default_factory=Limits)
    """Upper bounds on evictions in one run."""
    grace_period_seconds: int | None = None
    """A floor (>= 1): sent only when longer than a pod's own terminationGracePeriodSeconds
    (30 when unset), so a pod's shutdown is never shortened; None keeps each pod's own."""
    schedule: Schedule = field(default_factory=Schedule)
    """Maintenance windows: ``run`` evicts only inside one; no windows means at any time."""
    min_replicas: int = 0
    """Pods of a workload with fewer live pods than this are never evicted; 0 and 1 mean off."""
    node_selector: LabelSelector | None = None
    """Only pods on nodes whose labels match it are evicted (all pods still count)."""
    ignore_pods_without_pdb: bool = False
    """True: pods that no PodDisruptionBudget covers are never evicted."""
    no_eviction_policy: str = PREFERRED
    """The ``prefer-no-eviction`` pod annotation: Preferred (evicted last) or Mandatory (never)."""
    steer_scale_down: bool = False
    """True: keep ``pod-deletion-cost`` on ReplicaSet pods so scale-downs keep the spread."""


_DEFAULTS: Final = Policy()


# --------------------------------------------------------------------------------------------
# Durations


_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Parse a Go-style duration (``0s``, ``90s``, ``5m``, ``1h30m``, ``1.5h``) into seconds.

    Units are ``h``, ``m``, ``s`` and ``ms``; a bare number without a unit and negative durations
    are rejected. Raises :class:`ValueError` with a message fit for a person.
    """
    shown = json.dumps(text)
    stripped = text.strip()
    if stripped.startswith("-"):
        raise ValueError(f"must not be negative, got {shown}")
    if not stripped:
        raise ValueError(f"must be a duration like 90s, 5m or 1h30m, got {shown}")
    total = 0.0
    pos = 0
    while pos < len(stripped):
        match = _DURATION_PART.match(stripped, pos)
        if match is None:
            raise ValueError(
                f"must be a duration like 90s, 5m or 1h30m (units h, m, s, ms), got {shown}"
            )
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return total


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
# Validation helpers. Each reads one value, records problems, and returns a usable fallback so
# the walk goes on and every problem is reported at once.

_WHEN_UNSATISFIABLE: Final = (HARD, SOFT)
_INCLUSION_POLICIES: Final = (HONOR, IGNORE)
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


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Checker(Checker):
    """The converters' checker with the readers of a hand-written document: each problem is
    the path and a message quoting the value the YAML way (:func:`_show`)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("", [])

    def add(self, path: str, message: str) -> None:
        self.bad(path, message)

    def mapping(
        self, value: object, path: str, allowed: tuple[str, ...], *, nullable: bool = False
    ) -> dict[str, object]:
        """``value`` as a mapping whose unknown keys are reported; {} when it is no mapping."""
        if value is None and nullable:
            return {}
        if not isinstance(value, dict):
            self.add(path, f"must be a mapping, got {_show(value)}")
            return {}
        result: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.add(_join(path, str(key)[:_SHOWN]), "keys must be strings")
            elif key not in allowed:
                self.add(_join(path, key), f"unknown key{suggest(key, allowed)}")
            else:
                result[key] = item
        return result

    def boolean(self, value: object, path: str, default: bool) -> bool:
        if isinstance(value, bool):
            return value
        self.add(path, f"must be true or false, got {_show(value)}")
        return default

    def bounded_int(
        self,
        value: object,
        path: str,
        minimum: int,
        default: int | None,
        *,
        nullable: bool,
        maximum: int = INT32_MAX,
    ) -> int | None:
        """An integer in [minimum, maximum] (a 32-bit one unless told), or null if nullable."""
        if value is None and nullable:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            if value <= maximum:
                return value
            self.add(path, f"must be at most {maximum}, got {_show(value)}")
            return default
        null = " or null" if nullable else ""
        self.add(path, f"must be an integer >= {minimum}{null}, got {_show(value)}")
        return default

    def string(self, value: object, path: str, pattern: re.Pattern[str], what: str) -> str | None:
        if isinstance(value, str) and pattern.match(value):
            return value
        self.add(path, f"must be {what}, got {_show(value)}")
        return None

    def choice(self, value: object, path: str, choices: tuple[str, ...]) -> str | None:
        if isinstance(value, str) and value in choices:
            return value
        hint = suggest(value, choices) if isinstance(value, str) else ""
        self.add(path, f"must be one of {', '.join(choices)}, got {_show(value)}{hint}")
        return None

    def items(self, value: object, path: str) -> list[object]:
        """``value`` as a list; null is an empty list."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, f"must be a list, got {_show(value)}")
            return []
        return value

    def string_list(
        self, value: object, path: str, pattern: re.Pattern[str], what: str
    ) -> tuple[str, ...]:
        result: dict[str, None] = {}  # insertion-ordered; membership in constant time
        for index, item in enumerate(self.items(value, path)):
            text = self.string(item, _join(path, index), pattern, what)
            if text is None:
                continue
            if text in result:
                self.add(_join(path, index), f"{_show(text)} is listed twice")
            else:
                result[text] = None
        return tuple(result)


# --------------------------------------------------------------------------------------------
# Sections of the policy. Each takes the checker, the raw value and its path.

_TOP_KEYS: Final = (
    "apiVersion",
    "kind",
    "constraints",
    "nodeFit",
    "defaultConstraints",
    "namespaces",
    "namespaceLabelSelector",
    "labelSelector",
    "priorityThreshold",
    "evictLocalStoragePods",
    "evictPodsWithPVC",
    "evictPodsWithResourceClaims",
    "evictBarePods",
    "minPodAge",
    "limits",
    "gracePeriodSeconds",
    "schedule",
    "minReplicas",
    "nodeSelector",
    "ignorePodsWithoutPDB",
    "noEvictionPolicy",
    "steerScaleDown",
)
_WINDOW_KEYS: Final = ("cron", "duration", "timeZone")
_DEFAULT_CONSTRAINT_KEYS: Final = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
)
_LIMIT_KEYS: Final = ("total", "perNode", "perNamespace", "perWorkload")
_LABEL_KEY_WHAT: Final = "a label key like app or example.com/tier"


def _check_label_key(check: _Checker, value: object, path: str) -> str | None:
    if isinstance(value, str) and is_label_key(value):
        return value
    check.add(path, f"must be {_LABEL_KEY_WHAT}, got {_show(value)}")
    return None


def _header(check: _Checker, raw: dict[str, object]) -> None:
    for key, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        if key not in raw:
            check.add(key, f"required; set {expected}")
        elif raw[key] != expected:
            check.add(key, f"must be {expected}, got {_show(raw[key])}")


def _constraint_kinds(check: _Checker, value: object, path: str) -> tuple[str, ...]:
    kinds: list[str] = []
    items = check.items(value, path)
    for index, item in enumerate(items):
        chosen = check.choice(item, _join(path, index), _WHEN_UNSATISFIABLE)
        if chosen in kinds:
            check.add(_join(path, index), f"{chosen} is listed twice")
        elif chosen is not None:
            kinds.append(chosen)
    if not items and (value is None or isinstance(value, list)):
        check.add(path, f"must list at least one of {', '.join(_WHEN_UNSATISFIABLE)}")
    return tuple(kinds) or _DEFAULTS.constraints


def _default_constraint(check: _Checker, value: object, path: str) -> DefaultConstraint | None:
    raw = check.mapping(value, path, _DEFAULT_CONSTRAINT_KEYS)
    if not isinstance(value, dict):
        return None
    missing = [key for key in ("maxSkew", "topologyKey") if key not in raw]
    for name in missing:
        check.add(_join(path, name), "required")
    max_skew = check.bounded_int(
        raw.get("maxSkew", 1), _join(path, "maxSkew"), 1, None, nullable=False
    )
    topology_key = _check_label_key(check, raw.get("topologyKey", "x"), _join(path, "topologyKey"))
    when = check.choice(
        raw.get("whenUnsatisfiable", HARD), _join(path, "whenUnsatisfiable"), _WHEN_UNSATISFIABLE
    )
    min_domains = check.bounded_int(
        raw.get("minDomains", 1), _join(path, "minDomains"), 1, None, nullable=False
    )
    if when == SOFT and min_domains not in (None, 1):
        check.add(_join(path, "minDomains"), "applies only to whenUnsatisfiable DoNotSchedule")
    affinity = check.choice(
        raw.get("nodeAffinityPolicy", HONOR), _join(path, "nodeAffinityPolicy"), _INCLUSION_POLICIES
    )
    taints = check.choice(
        raw.get("nodeTaintsPolicy", IGNORE), _join(path, "nodeTaintsPolicy"), _INCLUSION_POLICIES
    )
    if (
        missing
        or max_skew is None
        or topology_key is None
        or when is None
        or min_domains is None
        or affinity is None
        or taints is None
    ):
        return None
    return DefaultConstraint(max_skew, topology_key, when, min_domains, affinity, taints)


def _default_constraints(
    check: _Checker, value: object, path: str
) -> tuple[DefaultConstraint, ...]:
    result: list[DefaultConstraint] = []
    pairs: set[tuple[str, str]] = set()
    for index, item in enumerate(check.items(value, path)):
        constraint = _default_constraint(check, item, _join(path, index))
        if constraint is None:
            continue
        pair = (constraint.topology_key, constraint.when_unsatisfiable)
        if pair in pairs:
            check.add(
                _join(path, index),
                f"a second {pair[1]} constraint on {pair[0]}; "
                "topologyKey and whenUnsatisfiable pairs must be unique",
            )
        else:
            pairs.add(pair)
            result.append(constraint)
    return tuple(result)


def _namespaces(
    check: _Checker, value: object, path: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(include, exclude). With include set and exclude omitted, exclude is empty."""
    raw = check.mapping(value, path, ("include", "exclude"))
    what = "a namespace name (DNS label)"
    include = check.string_list(raw.get("include"), _join(path, "include"), DNS_LABEL, what)
    if "exclude" in raw:
        exclude = check.string_list(raw["exclude"], _join(path, "exclude"), DNS_LABEL, what)
    else:
        exclude = () if include else _DEFAULTS.namespaces_exclude
    if include and exclude:
        check.add(path, "include and exclude are mutually exclusive")
    return include, exclude


def _label_selector(check: _Checker, value: object, path: str) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` (matchLabels sorted by key); None for null."""
    return label_selector(check, value, path, strict=True)


def _priority_threshold(check: _Checker, value: object, path: str) -> PriorityThreshold:
    raw = check.mapping(value, path, ("value", "name"))
    if not isinstance(value, dict):
        return PriorityThreshold()
    has_value = raw.get("value") is not None
    has_name = raw.get("name") is not None
    if has_value and has_name:
        check.add(path, "set value or name, not both")
        return PriorityThreshold()
    if has_name:
        name = check.string(raw["name"], _join(path, "name"), DNS_SUBDOMAIN, "a PriorityClass name")
        return PriorityThreshold(value=None, name=name)
    if not has_value:
        check.add(path, "set value or name")
        return PriorityThreshold()
    number = raw["value"]
    if (
        isinstance(number, int)
        and not isinstance(number, bool)
        and INT32_MIN <= number <= INT32_MAX
    ):
        return PriorityThreshold(value=number)
    check.add(_join(path, "value"), f"must be a 32-bit integer, got {_show(number)}")
    return PriorityThreshold()


def _boolean(check: _Checker, value: object, path: str) -> bool:
    return check.boolean(value, path, default=False)


MAX_DURATION_SECONDS: Final = 365 * 24 * 3600
"""The longest duration a policy may give (``minPodAge``, a window's ``duration``): 8760h, a
year. Longer ones mean nothing to a planner whose pods and windows come and go within one,
and the largest numbers a duration can spell do not even fit a float."""


def _duration(check: _Checker, value: object, path: str) -> float:
    if not isinstance(value, str):
        check.add(path, f"must be a duration string like 90s, 5m or 1h30m, got {_show(value)}")
        return 0.0
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        check.add(path, str(exc))
        return 0.0
    if not seconds <= MAX_DURATION_SECONDS:
        longest = format_duration(MAX_DURATION_SECONDS)
        check.add(path, f"must be at most {longest} (365 days), got {_show(value)}")
        return 0.0
    return seconds


def _limits(check: _Checker, value: object, path: str) -> Limits:
    raw = check.mapping(value, path, _LIMIT_KEYS, nullable=True)
    found = {
        key: check.bounded_int(raw.get(key), _join(path, key), 0, None, nullable=True)
        for key in _LIMIT_KEYS
    }
    return Limits(
        total=found["total"],
        per_node=found["perNode"],
        per_namespace=found["perNamespace"],
        per_workload=found["perWorkload"],
    )


def _grace_period(check: _Checker, value: object, path: str) -> int | None:
    """DeleteOptions.gracePeriodSeconds: an int64 >= 1."""
    if value == 0 and not isinstance(value, bool):
        check.add(path, "0 means no grace period; use >= 1 or omit")
        return None
    return check.bounded_int(value, path, 1, None, nullable=True, maximum=INT64_MAX)


def _window(check: _Checker, value: object, path: str) -> Window | None:
    raw = check.mapping(value, path, _WINDOW_KEYS)
    if not isinstance(value, dict):
        return None
    ok = True
    for key in ("cron", "duration"):
        if key not in raw:
            check.add(_join(path, key), "required")
            ok = False
    cron = raw.get("cron")
    if "cron" in raw:
        if not isinstance(cron, str):
            check.add(_join(path, "cron"), f"must be a cron expression string, got {_show(cron)}")
            ok = False
        elif (problem := cron_problem(cron)) is not None:
            check.add(_join(path, "cron"), f"{problem}, got {_show(cron)}")
            ok = False
    seconds = 0.0
    if "duration" in raw:
        before = len(check.problems)
        seconds = _duration(check, raw["duration"], _join(path, "duration"))
        if len(check.problems) > before:
            ok = False
        elif seconds <= 0:
            check.add(_join(path, "duration"), f"must be > 0, got {_show(raw['duration'])}")
            ok = False
    zone = raw.get("timeZone", "UTC")
    if not isinstance(zone, str):
        check.add(_join(path, "timeZone"), f"must be a time zone name, got {_show(zone)}")
        ok = False
    elif (problem := time_zone_problem(zone)) is not None:
        check.add(_join(path, "timeZone"), f"{problem}, got {_show(zone)}")
        ok = False
    if not ok or not isinstance(cron, str) or not isinstance(zone, str):
        return None
    return Window(cron=" ".join(cron.split()), duration_seconds=seconds, time_zone=zone)


def _schedule(check: _Checker, value: object, path: str) -> Schedule:
    """``schedule: {windows: [...]}``; null (or no key) means evictions at any time."""
    if value is None:
        return Schedule()
    raw = check.mapping(value, path, ("windows",))
    windows_path = _join(path, "windows")
    if isinstance(value, dict) and raw.get("windows") in (None, []):
        check.add(windows_path, "must list at least one window; omit schedule for any time")
        return Schedule()
    found = [
        _window(check, item, _join(windows_path, index))
        for index, item in enumerate(check.items(raw.get("windows"), windows_path))
    ]
    return Schedule(tuple(w for w in found if w is not None))


def _node_selector(check: _Checker, value: object, path: str) -> LabelSelector | None:
    """A label selector on node labels; the descheduler's string form gets a pointer."""
    if isinstance(value, str):
        check.add(
            path,
            "must be a label selector mapping (matchLabels, matchExpressions), "
            f"got {_show(value)}; rebalancer policy import converts the descheduler's string form",
        )
        return None
    return _label_selector(check, value, path)


def _min_replicas(check: _Checker, value: object, path: str) -> int:
    found = check.bounded_int(value, path, 0, None, nullable=False)
    return _DEFAULTS.min_replicas if found is None else found


def _no_eviction_policy(check: _Checker, value: object, path: str) -> str:
    return check.choice(value, path, NO_EVICTION_POLICIES) or _DEFAULTS.no_eviction_policy


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


_T = TypeVar("_T")


def _policy(check: _Checker, document: object) -> Policy:
    if not isinstance(document, dict):
        check.add("", f"the policy must be a mapping, got {_show(document)}")
        return Policy()
    raw = check.mapping(document, "", _TOP_KEYS)
    _header(check, raw)
    defaults = _DEFAULTS

    def read(key: str, reader: Callable[[_Checker, object, str], _T], default: _T) -> _T:
        return reader(check, raw[key], key) if key in raw else default

    # Read in the documented key order, so the problems come out in that order too.
    constraints = read("constraints", _constraint_kinds, defaults.constraints)
    node_fit = read("nodeFit", _boolean, defaults.node_fit)
    default_constraints = read(
        "defaultConstraints", _default_constraints, defaults.default_constraints
    )
    include, exclude = _namespaces(check, raw.get("namespaces", {}), "namespaces")
    return Policy(
        constraints=constraints,
        node_fit=node_fit,
        default_constraints=default_constraints,
        namespaces_include=include,
        namespaces_exclude=exclude,
        namespace_label_selector=read(
            "namespaceLabelSelector", _label_selector, defaults.namespace_label_selector
        ),
        label_selector=read("labelSelector", _label_selector, defaults.label_selector),
        priority_threshold=read(
            "priorityThreshold", _priority_threshold, defaults.priority_threshold
        ),
        evict_local_storage_pods=read(
            "evictLocalStoragePods", _boolean, defaults.evict_local_storage_pods
        ),
        evict_pods_with_pvc=read("evictPodsWithPVC", _boolean, defaults.evict_pods_with_pvc),
        evict_pods_with_resource_claims=read(
            "evictPodsWithResourceClaims", _boolean, defaults.evict_pods_with_resource_claims
        ),
        evict_bare_pods=read("evictBarePods", _boolean, defaults.evict_bare_pods),
        min_pod_age_seconds=read("minPodAge", _duration, defaults.min_pod_age_seconds),
        limits=read("limits", _limits, defaults.limits),
        grace_period_seconds=read(
            "gracePeriodSeconds", _grace_period, defaults.grace_period_seconds
        ),
        schedule=read("schedule", _schedule, defaults.schedule),
        min_replicas=read("minReplicas", _min_replicas, defaults.min_replicas),
        node_selector=read("nodeSelector", _node_selector, defaults.node_selector),
        ignore_pods_without_pdb=read(
            "ignorePodsWithoutPDB", _boolean, defaults.ignore_pods_without_pdb
        ),
        no_eviction_policy=read(
            "noEvictionPolicy", _no_eviction_policy, defaults.no_eviction_policy
        ),
        steer_scale_down=read("steerScaleDown", _boolean, defaults.steer_scale_down),
    )


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
    threshold = policy.priority_threshold
    limits = policy.limits
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "constraints": list(policy.constraints),
        "nodeFit": policy.node_fit,
        "defaultConstraints": [
            {
                "maxSkew": c.max_skew,
                "topologyKey": c.topology_key,
                "whenUnsatisfiable": c.when_unsatisfiable,
                "minDomains": c.min_domains,
                "nodeAffinityPolicy": c.node_affinity_policy,
                "nodeTaintsPolicy": c.node_taints_policy,
            }
            for c in policy.default_constraints
        ],
        "namespaces": {
            "include": list(policy.namespaces_include),
            "exclude": list(policy.namespaces_exclude),
        },
        "namespaceLabelSelector": (
            None
            if policy.namespace_label_selector is None
            else label_selector_to_dict(policy.namespace_label_selector)
        ),
        "labelSelector": (
            None if policy.label_selector is None else label_selector_to_dict(policy.label_selector)
        ),
        "priorityThreshold": (
            {"name": threshold.name} if threshold.name is not None else {"value": threshold.value}
        ),
        "evictLocalStoragePods": policy.evict_local_storage_pods,
        "evictPodsWithPVC": policy.evict_pods_with_pvc,
        "evictPodsWithResourceClaims": policy.evict_pods_with_resource_claims,
        "evictBarePods": policy.evict_bare_pods,
        "minPodAge": format_duration(policy.min_pod_age_seconds),
        "limits": {
            "total": limits.total,
            "perNode": limits.per_node,
            "perNamespace": limits.per_namespace,
            "perWorkload": limits.per_workload,
        },
        "gracePeriodSeconds": policy.grace_period_seconds,
        "schedule": (
            {
                "windows": [
                    {
                        "cron": w.cron,
                        "duration": format_duration(w.duration_seconds),
                        "timeZone": w.time_zone,
                    }
                    for w in policy.schedule.windows
                ]
            }
            if policy.schedule.windows
            else None
        ),
        "minReplicas": policy.min_replicas,
        "nodeSelector": (
            None if policy.node_selector is None else label_selector_to_dict(policy.node_selector)
        ),
        "ignorePodsWithoutPDB": policy.ignore_pods_without_pdb,
        "noEvictionPolicy": policy.no_eviction_policy,
        "steerScaleDown": policy.steer_scale_down,
    }
