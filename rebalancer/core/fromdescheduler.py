"""A descheduler ``DeschedulerPolicy`` (``descheduler/v1alpha2``) as a rebalancer policy (pure).

What carries over comes from the profile that enables the
``RemovePodsViolatingTopologySpreadConstraint`` balance plugin: that plugin's arguments, the
profile's ``DefaultEvictor`` arguments and the policy's top level. Everything else (other
plugins, other profiles, metrics settings) is named in a note saying why it does not carry
over, and so is every setting that carries over with a different meaning. Bad input (not a
``DeschedulerPolicy``, a value of the wrong type, no profile to import) raises
:class:`~rebalancer.core.errors.InputError` naming each field and value.

The descheduler's defaults are not rebalancer's, so the result states them: the descheduler
evicts pods with PersistentVolumeClaims unless ``ignorePvcPods`` (rebalancer: only with
``evictPodsWithPVC: true``), and pods with DRA resourceClaims unless protected. Worked example::

    profiles:
    - name: spread
      pluginConfig:
      - {name: DefaultEvictor, args: {minReplicas: 2, ignorePvcPods: true}}
      - {name: RemovePodsViolatingTopologySpreadConstraint, args: {constraints: [DoNotSchedule]}}
      plugins: {balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}}

gives ``constraints: [DoNotSchedule]``, ``nodeFit: true`` (``topologyBalanceNodeFit``
defaults to true), ``evictPodsWithPVC: false``, ``evictPodsWithResourceClaims: true``,
``minReplicas: 2``, and no note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from rebalancer.core.convert.checker import Checker, show, suggest
from rebalancer.core.convert.selectors import (
    DNS_SUBDOMAIN,
    label_selector,
)
from rebalancer.core.errors import InputError
from rebalancer.core.gosyntax import and_selectors, parse_go_duration, parse_label_selector
from rebalancer.core.model import HARD, SOFT, LabelSelector
from rebalancer.core.policy import (
    MANDATORY,
    PREFERRED,
    Limits,
    Policy,
    PriorityThreshold,
    policy_from_document,
    policy_to_dict,
)

__all__ = [
    "API_VERSION",
    "KIND",
    "TOPOLOGY_PLUGIN",
    "Imported",
    "from_descheduler",
]

API_VERSION: Final = "descheduler/v1alpha2"
KIND: Final = "DeschedulerPolicy"
TOPOLOGY_PLUGIN: Final = "RemovePodsViolatingTopologySpreadConstraint"
EVICTOR: Final = "DefaultEvictor"
DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
INT32_MAX: Final = 2**31 - 1
"""``priorityThreshold.value`` that lets every pod go: ``evictSystemCriticalPods: true``."""

_TOP_KEYS: Final = (
    "apiVersion",
    "kind",
    "profiles",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
    "evictionFailureEventNotification",
    "metricsCollector",
    "metricsProviders",
    "prometheus",
    "gracePeriodSeconds",
)
_NOT_CARRIED_TOP: Final = {
    "evictionFailureEventNotification": "rebalancer reports every eviction it could not make "
    "in its plan, logs and metrics",
    "metricsCollector": "rebalancer reads no utilisation metrics: spread is counted from pods",
    "metricsProviders": "rebalancer reads no utilisation metrics: spread is counted from pods",
    "prometheus": "rebalancer reads no utilisation metrics: spread is counted from pods",
}
_PROFILE_KEYS: Final = ("name", "pluginConfig", "plugins")
_EXTENSION_POINTS: Final = (
    "presort",
    "sort",
    "deschedule",
    "balance",
    "filter",
    "preevictionfilter",
)
_TOPOLOGY_KEYS: Final = (
    "namespaces",
    "labelSelector",
    "constraints",
    "topologyBalanceNodeFit",
    "includeSoftConstraints",
)
_EVICTOR_KEYS: Final = (
    "nodeSelector",
    "labelSelector",
    "namespaceLabelSelector",
    "priorityThreshold",
    "nodeFit",
    "minReplicas",
    "minPodAge",
    "noEvictionPolicy",
    "podProtections",
    "evictLocalStoragePods",
    "evictDaemonSetPods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "ignorePodsWithoutPDB",
    "evictFailedBarePods",
)
_DEPRECATED_FLAGS: Final = (
    "evictLocalStoragePods",
    "evictDaemonSetPods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "ignorePodsWithoutPDB",
    "evictFailedBarePods",
)
_DEFAULT_PROTECTIONS: Final = (
    "PodsWithLocalStorage",
    "DaemonSetPods",
    "SystemCriticalPods",
    "FailedBarePods",
)
_EXTRA_PROTECTIONS: Final = ("PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims")
_WHY_DAEMONSET: Final = (
    "rebalancer never evicts DaemonSet pods: the replacement comes back on the same node"
)
_WHY_BARE: Final = (
    "rebalancer never evicts bare pods for spread: a Failed pod is not counted, and a "
    "running one would not come back"
)


@dataclass(frozen=True, slots=True)
class Imported:
    """The imported policy and the notes about what did not carry over (or changed meaning)."""

    policy: Policy
    document: dict[str, object]
    """The policy as a rebalancer policy file: the keys the import decided, in the canonical
    order (loads back to ``policy``)."""
    profile: str
    notes: tuple[str, ...]


@dataclass(slots=True)
class _Walk:
    """The problems (bad input) and notes (settings left behind) found so far."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    set_keys: set[str] = field(default_factory=set)  # our keys the source decided

    def bad(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}" if path else message)

    def note(self, path: str, message: str) -> None:
        self.notes.append(f"{path}: {message}")

    def mapping(self, value: object, path: str, allowed: Sequence[str]) -> dict[str, Any]:
        """``value`` as a mapping (null is empty); unknown keys are reported."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.bad(path, f"must be a mapping, got {show(value)}")
            return {}
        out: dict[str, Any] = {}
        for key, item in value.items():
            where = _at(path, str(key))
            if not isinstance(key, str):
                self.bad(where, "keys must be strings")
            elif key not in allowed:
                self.bad(where, f"unknown key{suggest(key, allowed)}")
            else:
                out[key] = item
        return out

    def items(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.bad(path, f"must be a list, got {show(value)}")
            return []
        return value

    def boolean(self, raw: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = raw.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.bad(_at(path, key), f"must be true or false, got {show(value)}")
            return default
        return value

    def count(self, raw: Mapping[str, Any], key: str, path: str) -> int | None:
        """An unsigned integer (Go ``uint``); None when absent or null."""
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.bad(_at(path, key), f"must be an integer >= 0, got {show(value)}")
            return None
        if value > INT32_MAX:
            self.bad(_at(path, key), f"must be at most {INT32_MAX}, got {show(value)}")
            return None
        return value

    def text(self, raw: Mapping[str, Any], key: str, path: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.bad(_at(path, key), f"must be a string, got {show(value)}")
            return None
        return value

    def selector(self, raw: Mapping[str, Any], key: str, path: str) -> LabelSelector | None:
        """A ``metav1.LabelSelector``; an empty one (or null) selects everything: None."""
        value = raw.get(key)
        if value is None:
            return None
        found = label_selector(Checker("", self.problems), value, _at(path, key), strict=True)
        if found is None or (not found.match_labels and not found.match_expressions):
            return None
        return found


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


# --- the profile ----------------------------------------------------------------------------


def _enables_topology(profile: Mapping[str, Any]) -> bool:
    """Whether ``plugins.balance.enabled`` lists the topology plugin (read without reporting:
    the chosen profile's plugins are checked by :func:`_plugin_args`)."""
    plugins = profile.get("plugins")
    balance = plugins.get("balance") if isinstance(plugins, dict) else None
    enabled = balance.get("enabled") if isinstance(balance, dict) else None
    return isinstance(enabled, list) and TOPOLOGY_PLUGIN in enabled


def _profiles(walk: _Walk, raw: Mapping[str, Any]) -> list[tuple[int, dict[str, Any], str]]:
    found = []
    for index, item in enumerate(walk.items(raw.get("profiles"), "profiles")):
        path = _at("profiles", index)
        profile = walk.mapping(item, path, _PROFILE_KEYS)
        name = profile.get("name")
        if not isinstance(name, str) or not name:
            walk.bad(_at(path, "name"), f"must be a non-empty string, got {show(name)}")
            name = f"#{index}"
        found.append((index, profile, name))
    return found


def _choose(
    walk: _Walk, profiles: list[tuple[int, dict[str, Any], str]], wanted: str | None
) -> tuple[int, dict[str, Any], str] | None:
    enabling = [p for p in profiles if _enables_topology(p[1])]
    if wanted is not None:
        named = [p for p in profiles if p[2] == wanted]
        if not named:
            names = ", ".join(p[2] for p in profiles) or "none"
            walk.bad("--profile", f"no profile is named {show(wanted)} (profiles: {names})")
            return None
        if named[0] not in enabling:
            walk.bad(
                "--profile",
                f"profile {show(wanted)} does not enable {TOPOLOGY_PLUGIN} "
                "(plugins.balance.enabled)",
            )
            return None
        return named[0]
    if not enabling:
        for index, profile, _ in profiles:  # a typo in plugins is the likely cause: name it
            path = _at(_at("profiles", index), "plugins")
            plugins = walk.mapping(profile.get("plugins"), path, _EXTENSION_POINTS)
            walk.mapping(plugins.get("balance"), _at(path, "balance"), ("enabled", "disabled"))
        walk.bad(
            "profiles",
            f"no profile enables {TOPOLOGY_PLUGIN} (plugins.balance.enabled): nothing "
            "rebalancer does is configured here",
        )
        return None
    if len(enabling) > 1:
        names = ", ".join(show(p[2]) for p in enabling)
        walk.bad(
            "profiles",
            f"{len(enabling)} profiles enable {TOPOLOGY_PLUGIN} ({names}); choose one with "
            "--profile NAME",
        )
        return None
    return enabling[0]


def _plugin_args(
    walk: _Walk, profile: Mapping[str, Any], path: str
) -> tuple[dict[str, Any], str, dict[str, Any], str]:
    """The topology plugin's and the DefaultEvictor's args (with their paths); every other
    plugin configured or enabled gets a note."""
    topology: dict[str, Any] = {}
    evictor: dict[str, Any] = {}
    topology_path = evictor_path = ""
    for index, item in enumerate(
        walk.items(profile.get("pluginConfig"), _at(path, "pluginConfig"))
    ):
        where = _at(_at(path, "pluginConfig"), index)
        config = walk.mapping(item, where, ("name", "args"))
        name = config.get("name")
        args_path = _at(where, "args")
        if name == TOPOLOGY_PLUGIN:
            topology = walk.mapping(config.get("args"), args_path, _TOPOLOGY_KEYS)
            topology_path = args_path
        elif name == EVICTOR:
            evictor = walk.mapping(config.get("args"), args_path, _EVICTOR_KEYS)
            evictor_path = args_path
        elif isinstance(name, str):
            walk.note(where, f"{name}'s args are not carried: {_why_plugin(name)}")
        else:
            walk.bad(_at(where, "name"), f"must be a plugin name, got {show(name)}")
    plugins = walk.mapping(profile.get("plugins"), _at(path, "plugins"), _EXTENSION_POINTS)
    for point in _EXTENSION_POINTS:
        sets = walk.mapping(
            plugins.get(point), _at(path, f"plugins.{point}"), ("enabled", "disabled")
        )
        enabled_path = _at(path, f"plugins.{point}.enabled")
        for index, name in enumerate(walk.items(sets.get("enabled"), enabled_path)):
            if name == TOPOLOGY_PLUGIN and point == "balance":
                continue
            if name == EVICTOR and point in ("filter", "preevictionfilter"):
                continue
            walk.note(
                _at(enabled_path, index),
                f"{show(name)} is not carried: {_why_plugin(str(name))}",
            )
    return topology, topology_path, evictor, evictor_path


def _why_plugin(name: str) -> str:
    if name == TOPOLOGY_PLUGIN:
        return "it is enabled only as a balance plugin"
    if name == EVICTOR:
        return "DefaultEvictor is read from the filter and preEvictionFilter points only"
    return (
        "rebalancer repairs topology spread only; keep this plugin in the descheduler "
        "(see docs/descheduler.md)"
    )


# --- the mapping ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Fields:
    """Rebalancer policy fields, as the import fills them (each named as in :class:`Policy`)."""

    constraints: tuple[str, ...] = (HARD,)
    node_fit: bool = True
    namespaces_include: tuple[str, ...] = ()
    namespaces_exclude: tuple[str, ...] = ("kube-system",)
    label_selector: LabelSelector | None = None
    node_selector: LabelSelector | None = None
    priority_threshold: PriorityThreshold = field(default_factory=PriorityThreshold)
    evict_local_storage_pods: bool = False
    evict_pods_with_pvc: bool = True  # the descheduler's default: PVC pods are evicted
    evict_pods_with_resource_claims: bool = True  # ... and so are pods with resourceClaims
    min_pod_age_seconds: float = 0.0
    min_replicas: int = 0
    ignore_pods_without_pdb: bool = False
    no_eviction_policy: str = PREFERRED
    limits: Limits = field(default_factory=Limits)
    grace_period_seconds: int | None = None


def _topology(walk: _Walk, args: Mapping[str, Any], path: str, out: _Fields) -> bool:
    """The topology plugin's args into ``out``; returns topologyBalanceNodeFit."""
    kinds: list[str] = []
    for index, item in enumerate(walk.items(args.get("constraints"), _at(path, "constraints"))):
        if item not in (HARD, SOFT):
            walk.bad(
                _at(_at(path, "constraints"), index),
                f"must be one of {HARD}, {SOFT}, got {show(item)}",
            )
        elif item not in kinds:
            kinds.append(item)
    soft = walk.boolean(args, "includeSoftConstraints", path, False)
    if kinds:
        if "includeSoftConstraints" in args and soft != (SOFT in kinds):
            walk.note(
                _at(path, "includeSoftConstraints"),
                "not carried: the older spelling; constraints is set and wins, as in the "
                "descheduler since v0.28",
            )
        out.constraints = tuple(kinds)
    elif soft:
        out.constraints = (HARD, SOFT)
    walk.set_keys.add("constraints")
    namespaces = walk.mapping(
        args.get("namespaces"), _at(path, "namespaces"), ("include", "exclude")
    )
    include = _names(walk, namespaces, "include", _at(path, "namespaces"))
    exclude = _names(walk, namespaces, "exclude", _at(path, "namespaces"))
    if include and exclude:
        walk.bad(_at(path, "namespaces"), "only one of include and exclude may be set")
    elif include:
        out.namespaces_include, out.namespaces_exclude = include, ()
        walk.set_keys.add("namespaces")
    elif exclude:
        out.namespaces_exclude = exclude
        walk.set_keys.add("namespaces")
    else:
        walk.note(
            _at(path, "namespaces"),
            "not set: the descheduler processes every namespace; rebalancer's default "
            "namespaces.exclude [kube-system] is kept (set namespaces.exclude: [] for all)",
        )
    out.label_selector = and_selectors(
        out.label_selector, walk.selector(args, "labelSelector", path)
    )
    return walk.boolean(args, "topologyBalanceNodeFit", path, True)


def _names(walk: _Walk, raw: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    names: list[str] = []
    for index, item in enumerate(walk.items(raw.get(key), _at(path, key))):
        if not isinstance(item, str) or not DNS_LABEL.match(item):
            walk.bad(_at(_at(path, key), index), f"must be a namespace name, got {show(item)}")
        elif item not in names:
            names.append(item)
    return tuple(names)


def _node_selector(walk: _Walk, raw: Mapping[str, Any], path: str) -> LabelSelector | None:
    text = walk.text(raw, "nodeSelector", path)
    if text is None:
        return None
    try:
        found = parse_label_selector(text)
    except ValueError as exc:
        walk.bad(_at(path, "nodeSelector"), str(exc))
        return None
    return found if found.match_labels or found.match_expressions else None


def _evictor(walk: _Walk, args: Mapping[str, Any], path: str, out: _Fields) -> bool:
    """The DefaultEvictor's args into ``out``; returns its nodeFit."""
    node_fit = walk.boolean(args, "nodeFit", path, False)
    selector = _node_selector(walk, args, path)
    if selector is not None:
        out.node_selector = and_selectors(out.node_selector, selector)
        walk.note(
            _at(path, "nodeSelector"),
            "carried as nodeSelector (only pods on matching nodes are evicted); the "
            "descheduler itself uses it only to choose nodeFit's candidate nodes",
        )
    out.label_selector = and_selectors(
        out.label_selector, walk.selector(args, "labelSelector", path)
    )
    if args.get("namespaceLabelSelector") is not None:
        walk.note(
            _at(path, "namespaceLabelSelector"),
            "not carried: rebalancer does not read namespaces' labels; pods in every "
            "namespace the policy allows are candidates (list them in namespaces.include)",
        )
    minimum = walk.count(args, "minReplicas", path)
    if minimum is not None:
        out.min_replicas = minimum
        walk.set_keys.add("minReplicas")
    age = walk.text(args, "minPodAge", path)
    if age is not None:
        try:
            out.min_pod_age_seconds = parse_go_duration(age)
            walk.set_keys.add("minPodAge")
            walk.note(
                _at(path, "minPodAge"),
                "carried; rebalancer measures a pod's age from its creationTimestamp, the "
                "descheduler from status.startTime",
            )
        except ValueError as exc:
            walk.bad(_at(path, "minPodAge"), str(exc))
    policy = walk.text(args, "noEvictionPolicy", path)
    if policy in ("", PREFERRED, MANDATORY):
        out.no_eviction_policy = policy or PREFERRED
        walk.set_keys.add("noEvictionPolicy")
    elif policy is not None:
        walk.bad(
            _at(path, "noEvictionPolicy"),
            f'must be "", {PREFERRED} or {MANDATORY}, got {show(policy)}',
        )
    _threshold(walk, args, path, out)
    _protections(walk, args, path, out)
    return node_fit


def _threshold(walk: _Walk, args: Mapping[str, Any], path: str, out: _Fields) -> None:
    raw = walk.mapping(
        args.get("priorityThreshold"), _at(path, "priorityThreshold"), ("value", "name")
    )
    where = _at(path, "priorityThreshold")
    value, name = raw.get("value"), raw.get("name") or None
    if value is not None and name is not None:
        walk.bad(where, "only one of value and name may be set")
    elif value is not None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not -INT32_MAX - 1 <= value <= INT32_MAX
        ):
            walk.bad(_at(where, "value"), f"must be a 32-bit integer, got {show(value)}")
        else:
            out.priority_threshold = PriorityThreshold(value=value)
            walk.set_keys.add("priorityThreshold")
    elif name is not None:
        if not isinstance(name, str) or not DNS_SUBDOMAIN.match(name):
            walk.bad(_at(where, "name"), f"must be a PriorityClass name, got {show(name)}")
        else:
            out.priority_threshold = PriorityThreshold(value=None, name=name)
            walk.set_keys.add("priorityThreshold")


def _protections(walk: _Walk, args: Mapping[str, Any], path: str, out: _Fields) -> None:
    """The deprecated booleans or podProtections (never both, as the descheduler checks)."""
    flags = {key: walk.boolean(args, key, path, False) for key in _DEPRECATED_FLAGS}
    where = _at(path, "podProtections")
    raw = walk.mapping(
        args.get("podProtections"), where, ("extraEnabled", "defaultDisabled", "config")
    )
    disabled = _protection_list(walk, raw, "defaultDisabled", where, _DEFAULT_PROTECTIONS)
    extra = _protection_list(walk, raw, "extraEnabled", where, _EXTRA_PROTECTIONS)
    if any(flags.values()) and (disabled or extra):
        walk.bad(
            where,
            "cannot be used with the deprecated flags ("
            + ", ".join(k for k, v in flags.items() if v)
            + ")",
        )
        return
    # Where each setting was written, for the notes: the flag, or the podProtections entry.
    source = {key: _at(path, key) for key in flags}
    pvc_off = "not set or false"
    if disabled or extra:
        # podProtections: the default protections minus defaultDisabled, plus extraEnabled.
        for key, protection in (
            ("evictLocalStoragePods", "PodsWithLocalStorage"),
            ("evictDaemonSetPods", "DaemonSetPods"),
            ("evictSystemCriticalPods", "SystemCriticalPods"),
            ("evictFailedBarePods", "FailedBarePods"),
        ):
            flags[key] = protection in disabled
            if flags[key]:
                source[key] = _at(_at(where, "defaultDisabled"), disabled.index(protection))
        flags["ignorePvcPods"] = "PodsWithPVC" in extra
        flags["ignorePodsWithoutPDB"] = "PodsWithoutPDB" in extra
        source["ignorePvcPods"] = _at(where, "extraEnabled")
        pvc_off = "no PodsWithPVC"
        out.evict_pods_with_resource_claims = "PodsWithResourceClaims" not in extra
    out.evict_local_storage_pods = flags["evictLocalStoragePods"]
    out.evict_pods_with_pvc = not flags["ignorePvcPods"]
    if out.evict_pods_with_pvc:
        walk.note(
            source["ignorePvcPods"],
            f"{pvc_off}: the descheduler evicts pods with PersistentVolumeClaims, so "
            "evictPodsWithPVC: true (rebalancer's own default is false)",
        )
    if out.evict_pods_with_resource_claims:
        walk.note(
            _at(where, "extraEnabled"),
            "no PodsWithResourceClaims: the descheduler evicts pods with DRA resourceClaims, "
            "so evictPodsWithResourceClaims: true (rebalancer's own default is false)",
        )
    out.ignore_pods_without_pdb = flags["ignorePodsWithoutPDB"]
    if flags["evictDaemonSetPods"]:
        walk.note(source["evictDaemonSetPods"], f"not carried: {_WHY_DAEMONSET}")
    if flags["evictFailedBarePods"]:
        walk.note(source["evictFailedBarePods"], f"not carried: {_WHY_BARE}")
    if flags["evictSystemCriticalPods"]:
        if "priorityThreshold" in walk.set_keys:
            walk.note(
                _at(path, "priorityThreshold"),
                "not carried: evictSystemCriticalPods turns priority filtering off",
            )
        out.priority_threshold = PriorityThreshold(value=INT32_MAX)
        walk.set_keys.add("priorityThreshold")
        walk.note(
            source["evictSystemCriticalPods"],
            f"carried as priorityThreshold.value {INT32_MAX}: system-critical pods may be "
            "evicted (kube-system stays out while namespaces.exclude lists it)",
        )
    config = walk.mapping(raw.get("config"), _at(where, "config"), ("PodsWithPVC",))
    pvc = walk.mapping(
        config.get("PodsWithPVC"), _at(where, "config.PodsWithPVC"), ("protectedStorageClasses",)
    )
    classes = walk.items(
        pvc.get("protectedStorageClasses"), _at(where, "config.PodsWithPVC.protectedStorageClasses")
    )
    if classes and "PodsWithPVC" in extra:
        walk.note(
            _at(where, "config.PodsWithPVC.protectedStorageClasses"),
            "not carried: rebalancer cannot protect PVC pods by storage class; every pod "
            "with a PersistentVolumeClaim is protected (evictPodsWithPVC: false)",
        )
    for key in ("evictLocalStoragePods", "evictPodsWithPVC", "evictPodsWithResourceClaims"):
        walk.set_keys.add(key)
    walk.set_keys.add("ignorePodsWithoutPDB")


def _protection_list(
    walk: _Walk, raw: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]
) -> tuple[str, ...]:
    found: list[str] = []
    where = _at(path, key)
    for index, item in enumerate(walk.items(raw.get(key), where)):
        if item not in allowed:
            hint = suggest(item, allowed) if isinstance(item, str) else ""
            walk.bad(
                _at(where, index), f"must be one of {', '.join(allowed)}, got {show(item)}{hint}"
            )
        elif item in found:
            walk.bad(_at(where, index), f"{show(item)} is listed twice")
        else:
            found.append(item)
    return tuple(found)


def _top_level(walk: _Walk, raw: Mapping[str, Any], out: _Fields) -> None:
    selector = _node_selector(walk, raw, "")
    if selector is not None:
        out.node_selector = and_selectors(selector, out.node_selector)
        walk.note(
            "nodeSelector",
            "carried; pods on other nodes still count in the spread (as the scheduler "
            "counts them) but are never evicted, where the descheduler ignores them entirely",
        )
    limits = {
        "total": walk.count(raw, "maxNoOfPodsToEvictTotal", ""),
        "per_node": walk.count(raw, "maxNoOfPodsToEvictPerNode", ""),
        "per_namespace": walk.count(raw, "maxNoOfPodsToEvictPerNamespace", ""),
    }
    if any(v is not None for v in limits.values()):
        out.limits = Limits(**limits)
        walk.set_keys.add("limits")
    grace = raw.get("gracePeriodSeconds")
    if grace is not None:
        if isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace < 2**63:
            walk.bad("gracePeriodSeconds", f"must be a 64-bit integer >= 0, got {show(grace)}")
        elif grace == 0:
            walk.note(
                "gracePeriodSeconds",
                "0 is not carried: it would kill pods with no grace period; rebalancer never "
                "shortens a pod's own terminationGracePeriodSeconds",
            )
        else:
            out.grace_period_seconds = grace
            walk.set_keys.add("gracePeriodSeconds")
            walk.note(
                "gracePeriodSeconds",
                f"{grace} is carried as a floor: an eviction carries it only when it is longer "
                "than the pod's own terminationGracePeriodSeconds (the descheduler replaces the "
                "pod's own)",
            )
    for key, why in _NOT_CARRIED_TOP.items():
        if raw.get(key) not in (None, False, [], {}):
            walk.note(key, f"not carried: {why}")


def from_descheduler(document: object, source: str, profile: str | None = None) -> Imported:
    """Import a decoded ``DeschedulerPolicy``; raise :class:`InputError` listing every problem.

    ``profile`` names the profile to import; by default the one profile that enables the
    topology-spread balance plugin (none, or several: an error).
    """
    walk = _Walk()
    if not isinstance(document, dict):
        raise InputError(source, [f"must be a DeschedulerPolicy mapping, got {show(document)}"])
    raw = walk.mapping(document, "", _TOP_KEYS)
    for key, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        if key not in document:
            walk.bad(key, f"required; set {expected}")
        elif document[key] != expected:
            hint = (
                "; descheduler/v1alpha1 (strategies) is not read: convert it with the "
                "descheduler's own v1alpha2 migration first"
                if key == "apiVersion" and document[key] == "descheduler/v1alpha1"
                else ""
            )
            walk.bad(key, f"must be {expected}, got {show(document[key])}{hint}")
    if walk.problems:
        raise InputError(source, walk.problems)
    profiles = _profiles(walk, raw)
    chosen = _choose(walk, profiles, profile)
    if chosen is None:
        raise InputError(source, walk.problems)
    index, chosen_profile, name = chosen
    for other_index, _, other_name in profiles:
        if other_index != index:
            walk.note(
                _at("profiles", other_index),
                f"profile {show(other_name)} is not carried: only profile {show(name)} enables "
                f"{TOPOLOGY_PLUGIN}; keep the others in the descheduler",
            )
    out = _Fields()
    path = _at("profiles", index)
    topology, topology_path, evictor, evictor_path = _plugin_args(walk, chosen_profile, path)
    # A plugin with no pluginConfig entry has its defaults; notes name it by its name.
    unset = _at(path, "pluginConfig")
    balance_fit = _topology(
        walk, topology, topology_path or f"{unset}[{TOPOLOGY_PLUGIN}].args", out
    )
    evictor_fit = _evictor(walk, evictor, evictor_path or f"{unset}[{EVICTOR}].args", out)
    out.node_fit = balance_fit or evictor_fit
    walk.set_keys.add("nodeFit")
    _top_level(walk, raw, out)
    if walk.problems:
        raise InputError(source, walk.problems)
    if out.node_selector is not None:
        walk.set_keys.add("nodeSelector")
    if out.label_selector is not None:
        walk.set_keys.add("labelSelector")
    # _Fields names the policy's fields it fills, so they pass across by name.
    policy = Policy(**{f.name: getattr(out, f.name) for f in fields(out)})
    keep = {"apiVersion", "kind", *walk.set_keys}
    document_out = {key: value for key, value in policy_to_dict(policy).items() if key in keep}
    # What `policy check` makes of the document printed (minPodAge is written to the
    # millisecond), not the fields above.
    return Imported(
        policy_from_document(document_out, "the imported policy"),
        document_out,
        name,
        tuple(walk.notes),
    )
