"""A descheduler ``DeschedulerPolicy`` (``descheduler/v1alpha2``) as a rebalancer policy (pure).

What carries over comes from the profile that enables the
``RemovePodsViolatingTopologySpreadConstraint`` balance plugin: that plugin's arguments, the
profile's ``DefaultEvictor`` arguments and the policy's top level. Every setting that does not
carry over, or carries over with another meaning, is a :class:`Note` naming the rebalancer key
it concerns and whether it changes which pods may be evicted (:data:`NARROWER`, :data:`WIDER`);
a wider one is an error unless accepted, so an import never lets more pods be evicted than the
descheduler would consider without saying so. Several profiles that enable the plugin are
refused without a choice (each named with its scope), since one policy has one scope.

Keys are read as the descheduler's decoder reads them: the policy around the plugin args is
decoded non-strictly (keys match only when spelled exactly, others are skipped: here with a
note), the plugin args strictly (an unknown key fails its start: here an
:class:`~rebalancer.core.errors.InputError`). :func:`unwrap` finds the policy in a ConfigMap or
in the descheduler chart's values.

The descheduler's defaults are not rebalancer's, so the result states them: every namespace
(rebalancer's default excludes kube-system), pods with PersistentVolumeClaims evicted unless
``ignorePvcPods`` (rebalancer: only with ``evictPodsWithPVC: true``), and pods with DRA
resourceClaims unless protected. Worked example::

    profiles:
    - name: spread
      pluginConfig:
      - {name: DefaultEvictor, args: {minReplicas: 2, ignorePvcPods: true,
                                      namespaceLabelSelector: {matchLabels: {team: shop}}}}
      - {name: RemovePodsViolatingTopologySpreadConstraint, args: {constraints: [DoNotSchedule]}}
      plugins: {balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}}

gives ``constraints: [DoNotSchedule]``, ``nodeFit: true`` (``topologyBalanceNodeFit``
defaults to true), ``namespaces.exclude: []``, ``namespaceLabelSelector`` ``team=shop``,
``evictPodsWithPVC: false``, ``evictPodsWithResourceClaims: true``, ``minReplicas: 2``, and
notes (no SCOPE one) on the namespaces, the selector and the resourceClaims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from rebalancer.core.constants import DNS_LABEL, DNS_SUBDOMAIN, INT32_MAX, INT32_MIN, INT64_MAX
from rebalancer.core.convert.checker import Checker, at, show, suggest
from rebalancer.core.convert.selectors import label_selector
from rebalancer.core.errors import InputError
from rebalancer.core.gosyntax import and_selectors, parse_go_duration, parse_label_selector
from rebalancer.core.model import HARD, SOFT, LabelSelector
from rebalancer.core.policy import (
    MANDATORY,
    PREFERRED,
    START_TIME,
    Limits,
    Policy,
    PriorityThreshold,
    policy_from_document,
    policy_to_dict,
    policy_with,
)
from rebalancer.core.selectors import selector_string

__all__ = [
    "API_VERSION",
    "KIND",
    "NARROWER",
    "TOPOLOGY_PLUGIN",
    "WIDER",
    "AllImported",
    "ChartValues",
    "Holder",
    "Imported",
    "Note",
    "chart_values",
    "describe_scope",
    "divide",
    "from_descheduler",
    "from_descheduler_all",
    "unwrap",
]

API_VERSION: Final = "descheduler/v1alpha2"
KIND: Final = "DeschedulerPolicy"
TOPOLOGY_PLUGIN: Final = "RemovePodsViolatingTopologySpreadConstraint"
EVICTOR: Final = "DefaultEvictor"

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
_LIMIT_KEYS: Final = (
    "maxNoOfPodsToEvictTotal",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
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
_DEPRECATED_FLAGS: Final = (
    "evictLocalStoragePods",
    "evictDaemonSetPods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "ignorePodsWithoutPDB",
    "evictFailedBarePods",
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
    *_DEPRECATED_FLAGS,
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


NARROWER: Final = "narrower"
"""A note whose setting leaves pods out that the descheduler would consider."""
WIDER: Final = "wider"
"""A note whose setting lets pods in that the descheduler would not consider: refused unless
accepted (``accept_wider``)."""


@dataclass(frozen=True, slots=True)
class Note:
    """One setting that does not carry over, or carries over with another meaning."""

    path: str
    """Where it is in the descheduler's policy."""
    message: str
    field: str | None = None
    """The rebalancer policy key it concerns (None: the policy as a whole)."""
    scope: str | None = None
    """:data:`NARROWER` or :data:`WIDER` when it changes which pods may be evicted; None when
    it is information."""

    @property
    def tag(self) -> str:
        """``SCOPE`` for a change of which pods may be evicted, else ``note``."""
        return "SCOPE" if self.scope else "note"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True, slots=True)
class Imported:
    """The imported policy and the notes about what did not carry over (or changed meaning)."""

    policy: Policy
    document: dict[str, object]
    """The policy as a rebalancer policy file: the keys the import decided, in the canonical
    order (loads back to ``policy``)."""
    profile: str
    notes: tuple[Note, ...]


_STRICT: Final = (
    " (the descheduler refuses it too: it decodes plugin args strictly, keys spelled exactly)"
)
_IMPORT_DEFAULTS: Final = {
    "namespaces": ((), ()),  # the descheduler's: every namespace
    "evictPodsWithPVC": True,  # the descheduler's default: PVC pods are evicted
    "evictPodsWithResourceClaims": True,  # ... and so are pods with resourceClaims
}
"""Where the descheduler's defaults are not rebalancer's, by policy key."""


class _Walk(Checker):
    """The problems (bad input) and notes (settings left behind) found so far, and the
    rebalancer policy the import fills: ``out``, values by policy key (as
    :data:`~rebalancer.core.policy.KEYS` reads them), and ``set_keys``, the keys the source
    decided."""

    __slots__ = ("notes", "out", "set_keys")
    key_room = None

    def __init__(self) -> None:
        super().__init__("", [])
        self.notes: list[Note] = []
        self.out: dict[str, Any] = dict(_IMPORT_DEFAULTS)
        self.set_keys: set[str] = set()

    def put(self, key: str, value: Any) -> None:
        """Set the policy key ``key``: the source decided it."""
        self.out[key] = value
        self.set_keys.add(key)

    def note(
        self, path: str, message: str, key: str | None = None, scope: str | None = None
    ) -> None:
        self.notes.append(Note(path, message, key, scope))

    def strict(self, value: object, path: str, allowed: Sequence[str]) -> dict[str, Any]:
        """``value`` as a mapping decoded strictly, as the descheduler decodes plugin args
        (null is empty): an unknown key is a problem, as it fails the descheduler's start."""
        return self.mapping(value, path, allowed, nullable=True, why=_STRICT)

    def loose(self, value: object, path: str, allowed: Sequence[str]) -> dict[str, Any]:
        """``value`` as a mapping decoded as the descheduler decodes the policy around the
        plugin args: keys match only when spelled exactly, and any other key is ignored
        (a note says so)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.bad(path, f"must be a mapping, got {show(value)}")
            return {}
        out: dict[str, Any] = {}
        for key, item in value.items():
            where = at(path, str(key))
            if isinstance(key, str) and key in allowed:
                out[key] = item
                continue
            hint = suggest(str(key), allowed)
            spelled = (
                f" (it reads {hint.removeprefix('; did you mean ').rstrip('?')})" if hint else ""
            )
            self.note(
                where,
                f"ignored, as the descheduler ignores it: its decoder skips keys it does not "
                f"know and matches keys exactly{spelled}",
            )
        return out

    def count(self, raw: Mapping[str, Any], key: str, path: str) -> int | None:
        """An unsigned integer (Go ``uint``); None when absent or null."""
        value = raw.get(key)
        if value is None:
            return None
        return self.bounded_int(value, at(path, key), 0, nullable=False)

    def optional_text(self, raw: Mapping[str, Any], key: str, path: str) -> str | None:
        """A string; None when absent, null or not a string (reported)."""
        value = raw.get(key)
        if value is None or isinstance(value, str):
            return value
        self.bad(at(path, key), "must be a string", value)
        return None

    def selector(self, raw: Mapping[str, Any], key: str, path: str) -> LabelSelector | None:
        """A ``metav1.LabelSelector``; an empty one (or null) selects everything: None."""
        value = raw.get(key)
        if value is None:
            return None
        found = label_selector(self, value, at(path, key), strict=True)
        if found is None or (not found.match_labels and not found.match_expressions):
            return None
        return found


# --- the profile ----------------------------------------------------------------------------


def _enables_topology(profile: Mapping[str, Any]) -> bool:
    """Whether ``plugins.balance.enabled`` lists the topology plugin (read without reporting:
    the chosen profile's plugins are checked by :func:`_plugin_args`). Keys are matched as the
    descheduler matches them: exactly."""
    plugins = profile.get("plugins")
    balance = plugins.get("balance") if isinstance(plugins, dict) else None
    enabled = balance.get("enabled") if isinstance(balance, dict) else None
    return isinstance(enabled, list) and TOPOLOGY_PLUGIN in enabled


_Profile = tuple[int, dict[str, Any], str]


def _profiles(walk: _Walk, raw: Mapping[str, Any]) -> list[_Profile]:
    return [
        _profile(walk, item, index)
        for index, item in enumerate(walk.items(raw.get("profiles"), "profiles"))
    ]


def _profile(walk: _Walk, item: object, index: int) -> _Profile:
    """The profile at ``index``, its keys read loosely (notes and problems into ``walk``)."""
    path = at("profiles", index)
    profile = walk.loose(item, path, _PROFILE_KEYS)
    name = profile.get("name")
    if not isinstance(name, str) or not name:
        walk.bad(at(path, "name"), f"must be a non-empty string, got {show(name)}")
        name = f"#{index}"
    return (index, profile, name)


def _scope_of(raw: Mapping[str, Any], profile: _Profile) -> str:
    """What the profile's topology plugin considers, in words (for the notes and problems)."""
    walk = _Walk()
    _import_profile(walk, raw, profile)
    if walk.problems:
        return f"see --profile {profile[2]}"
    include, exclude = walk.out["namespaces"]
    return describe_scope(
        include,
        exclude,
        walk.out.get("namespaceLabelSelector"),
        walk.out.get("labelSelector"),
    )


def describe_scope(
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    namespace_selector: LabelSelector | None,
    pod_selector: LabelSelector | None = None,
) -> str:
    """A scope in words: ``namespaces in [shop], namespaceLabelSelector rebalance=enabled``."""
    parts = []
    if include:
        parts.append(f"namespaces in [{', '.join(include)}]")
    elif exclude:
        parts.append(f"namespaces but [{', '.join(exclude)}]")
    else:
        parts.append("every namespace")
    if namespace_selector is not None:
        parts.append(f"namespaceLabelSelector {selector_string(namespace_selector)}")
    if pod_selector is not None:
        parts.append(f"labelSelector {selector_string(pod_selector)}")
    return ", ".join(parts)


def _choose(walk: _Walk, raw: Mapping[str, Any], wanted: str | None) -> _Profile | None:
    profiles = _profiles(walk, raw)
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
        chosen = named[0]
    elif not enabling:
        before = 0  # every key ignored so far may be the typo: name them all
        for index, profile, _ in profiles:  # a typo in plugins is the likely cause: name it
            path = at(at("profiles", index), "plugins")
            plugins = walk.loose(profile.get("plugins"), path, _EXTENSION_POINTS)
            walk.loose(plugins.get("balance"), at(path, "balance"), ("enabled", "disabled"))
        for note in walk.notes[before:]:
            walk.bad(note.path, note.message)
        walk.bad(
            "profiles",
            f"no profile enables {TOPOLOGY_PLUGIN} (plugins.balance.enabled): nothing "
            "rebalancer does is configured here",
        )
        return None
    elif len(enabling) > 1:
        scopes = "; ".join(f"{show(p[2])}: {_scope_of(raw, p)}" for p in enabling)
        walk.bad(
            "profiles",
            f"{len(enabling)} profiles enable {TOPOLOGY_PLUGIN}, each with its own scope "
            f"({scopes}); the descheduler runs them all, one policy cannot keep them apart: "
            "import each with --profile NAME (or all with --all-profiles DIR) and run one "
            "rebalancer per policy (docs/descheduler.md, several profiles)",
        )
        return None
    else:
        chosen = enabling[0]
    enabled = {p[0] for p in enabling}
    for other in profiles:
        index, _, name = other
        if index == chosen[0]:
            continue
        if index in enabled:
            walk.note(
                at("profiles", index),
                f"profile {show(name)} also enables {TOPOLOGY_PLUGIN} ({_scope_of(raw, other)}): "
                f"its pods are not rebalanced by this policy; import it with --profile {name} "
                "into a policy of its own and run one rebalancer per policy (docs/descheduler.md, "
                "several profiles)",
                scope=NARROWER,
            )
        else:
            walk.note(
                at("profiles", index),
                f"profile {show(name)} is not carried: it does not enable {TOPOLOGY_PLUGIN}; "
                "keep it in the descheduler",
            )
    return chosen


def _plugin_args(
    walk: _Walk, profile: Mapping[str, Any], path: str
) -> tuple[dict[str, Any], str, dict[str, Any], str]:
    """The topology plugin's and the DefaultEvictor's args (with their paths); every other
    plugin configured or enabled gets a note."""
    topology: dict[str, Any] = {}
    evictor: dict[str, Any] = {}
    topology_path = evictor_path = ""
    for index, item in enumerate(walk.items(profile.get("pluginConfig"), at(path, "pluginConfig"))):
        where = at(at(path, "pluginConfig"), index)
        config = walk.loose(item, where, ("name", "args"))
        name = config.get("name")
        args_path = at(where, "args")
        if name == TOPOLOGY_PLUGIN:
            topology = walk.strict(config.get("args"), args_path, _TOPOLOGY_KEYS)
            topology_path = args_path
        elif name == EVICTOR:
            evictor = walk.strict(config.get("args"), args_path, _EVICTOR_KEYS)
            evictor_path = args_path
        elif isinstance(name, str):
            walk.note(where, f"{name}'s args are not carried: {_why_plugin(name)}")
        else:
            walk.bad(at(where, "name"), f"must be a plugin name, got {show(name)}")
    plugins = walk.loose(profile.get("plugins"), at(path, "plugins"), _EXTENSION_POINTS)
    for point in _EXTENSION_POINTS:
        sets = walk.loose(plugins.get(point), at(path, f"plugins.{point}"), ("enabled", "disabled"))
        enabled_path = at(path, f"plugins.{point}.enabled")
        for index, name in enumerate(walk.items(sets.get("enabled"), enabled_path)):
            if name == TOPOLOGY_PLUGIN and point == "balance":
                continue
            if name == EVICTOR and point in ("filter", "preevictionfilter"):
                continue
            walk.note(
                at(enabled_path, index),
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


def _topology(walk: _Walk, args: Mapping[str, Any], path: str) -> bool:
    """The topology plugin's args into the policy; returns topologyBalanceNodeFit."""
    kinds: list[str] = []
    for index, item in enumerate(walk.items(args.get("constraints"), at(path, "constraints"))):
        if item not in (HARD, SOFT):
            walk.bad(
                at(at(path, "constraints"), index),
                f"must be one of {HARD}, {SOFT}, got {show(item)}",
            )
        elif item not in kinds:
            kinds.append(item)
    soft = walk.flag(args, "includeSoftConstraints", path, False)
    if kinds:
        if "includeSoftConstraints" in args and soft != (SOFT in kinds):
            walk.note(
                at(path, "includeSoftConstraints"),
                "not carried: the older spelling; constraints is set and wins, as in the "
                "descheduler since v0.28",
                "constraints",
            )
        walk.out["constraints"] = tuple(kinds)
    elif soft:
        walk.out["constraints"] = (HARD, SOFT)
        walk.note(
            at(path, "includeSoftConstraints"),
            f"carried as constraints: [{HARD}, {SOFT}]: rebalancer repairs the soft "
            "(ScheduleAnyway) spread views too, after the hard ones and never at their cost "
            "(docs/spec.md, sections 2.6 and 3.6). It is the descheduler's older spelling "
            "(before v0.28): the descheduler v0.36 decodes plugin args strictly and no longer "
            "reads it; write constraints there too",
            "constraints",
        )
    walk.set_keys.add("constraints")
    namespaces = walk.strict(args.get("namespaces"), at(path, "namespaces"), ("include", "exclude"))
    include = _names(walk, namespaces, "include", at(path, "namespaces"))
    exclude = _names(walk, namespaces, "exclude", at(path, "namespaces"))
    if include and exclude:
        walk.bad(at(path, "namespaces"), "only one of include and exclude may be set")
    elif include:
        walk.put("namespaces", (include, ()))
    elif exclude:
        walk.put("namespaces", ((), exclude))
    else:
        walk.set_keys.add("namespaces")
        walk.note(
            at(path, "namespaces"),
            "not set: the descheduler processes every namespace, kube-system included, so "
            "namespaces.exclude: [] (rebalancer's own default excludes kube-system; "
            "system-critical pods stay protected by priorityThreshold in both)",
            "namespaces",
        )
    walk.out["labelSelector"] = and_selectors(
        walk.out.get("labelSelector"), walk.selector(args, "labelSelector", path)
    )
    return walk.flag(args, "topologyBalanceNodeFit", path, True)


def _names(walk: _Walk, raw: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    names: list[str] = []
    for index, item in enumerate(walk.items(raw.get(key), at(path, key))):
        name = walk.string(item, at(at(path, key), index), DNS_LABEL, "a namespace name")
        if name is not None and name not in names:
            names.append(name)
    return tuple(names)


def _node_selector(walk: _Walk, raw: Mapping[str, Any], path: str) -> LabelSelector | None:
    text = walk.optional_text(raw, "nodeSelector", path)
    if text is None:
        return None
    try:
        found = parse_label_selector(text)
    except ValueError as exc:
        walk.bad(at(path, "nodeSelector"), str(exc))
        return None
    return found if found.match_labels or found.match_expressions else None


def _evictor(walk: _Walk, args: Mapping[str, Any], path: str) -> bool:
    """The DefaultEvictor's args into the policy; returns its nodeFit."""
    node_fit = walk.flag(args, "nodeFit", path, False)
    selector = _node_selector(walk, args, path)
    if selector is not None:
        walk.out["nodeSelector"] = and_selectors(walk.out.get("nodeSelector"), selector)
        walk.note(
            at(path, "nodeSelector"),
            "carried as nodeSelector: only pods on matching nodes are evicted, where the "
            "descheduler uses it only to choose nodeFit's candidate nodes",
            "nodeSelector",
            NARROWER,
        )
    walk.out["labelSelector"] = and_selectors(
        walk.out.get("labelSelector"), walk.selector(args, "labelSelector", path)
    )
    walk.out["namespaceLabelSelector"] = walk.selector(args, "namespaceLabelSelector", path)
    if walk.out.get("namespaceLabelSelector") is not None:
        walk.set_keys.add("namespaceLabelSelector")
        walk.note(
            at(path, "namespaceLabelSelector"),
            "carried: rebalancer reads the namespaces' labels (list on namespaces, granted by "
            "deploy/ and the chart); a snapshot file must hold the Namespace objects",
            "namespaceLabelSelector",
        )
    minimum = walk.count(args, "minReplicas", path)
    if minimum is not None:
        walk.put("minReplicas", minimum)
    age = walk.optional_text(args, "minPodAge", path)
    if age is not None:
        try:
            walk.put("minPodAge", parse_go_duration(age))
            walk.put("minPodAgeFrom", START_TIME)
            walk.note(
                at(path, "minPodAge"),
                "carried with minPodAgeFrom: startTime: the age counts from status.startTime, "
                "as the descheduler counts it (a pod not started yet is age 0), not from "
                "creationTimestamp, rebalancer's default",
                "minPodAge",
            )
        except ValueError as exc:
            walk.bad(at(path, "minPodAge"), str(exc))
    policy = walk.optional_text(args, "noEvictionPolicy", path)
    if policy in ("", PREFERRED, MANDATORY):
        walk.put("noEvictionPolicy", policy or PREFERRED)
    elif policy is not None:
        walk.bad(
            at(path, "noEvictionPolicy"),
            f'must be "", {PREFERRED} or {MANDATORY}, got {show(policy)}',
        )
    _threshold(walk, args, path)
    _protections(walk, args, path)
    return node_fit


def _threshold(walk: _Walk, args: Mapping[str, Any], path: str) -> None:
    raw = walk.strict(
        args.get("priorityThreshold"), at(path, "priorityThreshold"), ("value", "name")
    )
    where = at(path, "priorityThreshold")
    value, name = raw.get("value"), raw.get("name") or None
    if value is not None and name is not None:
        walk.bad(where, "only one of value and name may be set")
    elif value is not None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not INT32_MIN <= value <= INT32_MAX
        ):
            walk.bad(at(where, "value"), f"must be a 32-bit integer, got {show(value)}")
        else:
            walk.put("priorityThreshold", PriorityThreshold(value=value))
    elif name is not None and walk.string(
        name, at(where, "name"), DNS_SUBDOMAIN, "a PriorityClass name"
    ):
        walk.put("priorityThreshold", PriorityThreshold(value=None, name=name))


def _protections(walk: _Walk, args: Mapping[str, Any], path: str) -> None:
    """The deprecated booleans or podProtections (never both, as the descheduler checks)."""
    flags = {key: walk.flag(args, key, path, False) for key in _DEPRECATED_FLAGS}
    where = at(path, "podProtections")
    raw = walk.strict(
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
    source = {key: at(path, key) for key in flags}
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
                source[key] = at(at(where, "defaultDisabled"), disabled.index(protection))
        flags["ignorePvcPods"] = "PodsWithPVC" in extra
        flags["ignorePodsWithoutPDB"] = "PodsWithoutPDB" in extra
        source["ignorePvcPods"] = at(where, "extraEnabled")
        pvc_off = "no PodsWithPVC"
        walk.out["evictPodsWithResourceClaims"] = "PodsWithResourceClaims" not in extra
    walk.out["evictLocalStoragePods"] = flags["evictLocalStoragePods"]
    walk.out["evictPodsWithPVC"] = not flags["ignorePvcPods"]
    if walk.out.get("evictPodsWithPVC"):
        walk.note(
            source["ignorePvcPods"],
            f"{pvc_off}: the descheduler evicts pods with PersistentVolumeClaims, so "
            "evictPodsWithPVC: true (rebalancer's own default is false)",
            "evictPodsWithPVC",
        )
    if walk.out.get("evictPodsWithResourceClaims"):
        walk.note(
            at(where, "extraEnabled"),
            "no PodsWithResourceClaims: the descheduler evicts pods with DRA resourceClaims, "
            "so evictPodsWithResourceClaims: true (rebalancer's own default is false)",
            "evictPodsWithResourceClaims",
        )
    walk.out["ignorePodsWithoutPDB"] = flags["ignorePodsWithoutPDB"]
    if flags["evictDaemonSetPods"]:
        walk.note(source["evictDaemonSetPods"], f"not carried: {_WHY_DAEMONSET}", None, NARROWER)
    if flags["evictFailedBarePods"]:
        walk.note(source["evictFailedBarePods"], f"not carried: {_WHY_BARE}", None, NARROWER)
    if flags["evictSystemCriticalPods"]:
        if "priorityThreshold" in walk.set_keys:
            walk.note(
                at(path, "priorityThreshold"),
                "not carried: evictSystemCriticalPods turns priority filtering off",
                "priorityThreshold",
            )
        walk.put("priorityThreshold", PriorityThreshold(value=INT32_MAX))
        walk.note(
            source["evictSystemCriticalPods"],
            f"carried as priorityThreshold.value {INT32_MAX}: system-critical pods may be "
            "evicted, as in the descheduler (kube-system too, unless namespaces.exclude lists it)",
            "priorityThreshold",
        )
    config = walk.strict(raw.get("config"), at(where, "config"), ("PodsWithPVC",))
    pvc = walk.strict(
        config.get("PodsWithPVC"), at(where, "config.PodsWithPVC"), ("protectedStorageClasses",)
    )
    classes = walk.items(
        pvc.get("protectedStorageClasses"), at(where, "config.PodsWithPVC.protectedStorageClasses")
    )
    if classes and "PodsWithPVC" in extra:
        walk.note(
            at(where, "config.PodsWithPVC.protectedStorageClasses"),
            "not carried: rebalancer cannot protect PVC pods by storage class; every pod "
            "with a PersistentVolumeClaim is protected (evictPodsWithPVC: false)",
            "evictPodsWithPVC",
            NARROWER,
        )
    for key in ("evictLocalStoragePods", "evictPodsWithPVC", "evictPodsWithResourceClaims"):
        walk.set_keys.add(key)
    walk.set_keys.add("ignorePodsWithoutPDB")


def _protection_list(
    walk: _Walk, raw: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]
) -> tuple[str, ...]:
    found: list[str] = []
    where = at(path, key)
    for index, item in enumerate(walk.items(raw.get(key), where)):
        chosen = walk.choice(item, at(where, index), allowed)
        if chosen in found:
            walk.bad(at(where, index), f"{show(chosen)} is listed twice")
        elif chosen is not None:
            found.append(chosen)
    return tuple(found)


def _top_level(walk: _Walk, raw: Mapping[str, Any]) -> None:
    selector = _node_selector(walk, raw, "")
    if selector is not None:
        walk.out["nodeSelector"] = and_selectors(selector, walk.out.get("nodeSelector"))
        walk.note(
            "nodeSelector",
            "carried; pods on other nodes still count in the spread (as the scheduler "
            "counts them) but are never evicted, where the descheduler ignores them entirely",
            "nodeSelector",
        )
    limits = {
        "total": walk.count(raw, "maxNoOfPodsToEvictTotal", ""),
        "per_node": walk.count(raw, "maxNoOfPodsToEvictPerNode", ""),
        "per_namespace": walk.count(raw, "maxNoOfPodsToEvictPerNamespace", ""),
    }
    if any(v is not None for v in limits.values()):
        walk.put("limits", Limits(**limits))
        named = [key for key in _LIMIT_KEYS if raw.get(key) is not None]
        walk.note(
            named[0],
            f"carried as limits ({', '.join(named)}): the descheduler counts them per "
            "descheduling cycle; rebalancer counts each run's evictions together with those "
            "of earlier runs within run --cooldown (10m by default), so runs closer together "
            "than that share one budget (docs/policy.md, limits)",
            "limits",
        )
    grace = raw.get("gracePeriodSeconds")
    if grace is not None:
        if isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace <= INT64_MAX:
            walk.bad("gracePeriodSeconds", f"must be a 64-bit integer >= 0, got {show(grace)}")
        elif grace == 0:
            walk.note(
                "gracePeriodSeconds",
                "0 is not carried: it would kill pods with no grace period; rebalancer never "
                "shortens a pod's own terminationGracePeriodSeconds",
            )
        else:
            walk.put("gracePeriodSeconds", grace)
            walk.note(
                "gracePeriodSeconds",
                f"{grace} is carried as a floor: an eviction carries it only when it is longer "
                "than the pod's own terminationGracePeriodSeconds (the descheduler replaces the "
                "pod's own)",
                "gracePeriodSeconds",
            )
    for key, why in _NOT_CARRIED_TOP.items():
        if raw.get(key) not in (None, False, [], {}):
            walk.note(key, f"not carried: {why}")


def _import_profile(walk: _Walk, raw: Mapping[str, Any], chosen: _Profile) -> None:
    """The rebalancer policy of one profile with the policy's top level, into ``walk.out``."""
    index, profile, _ = chosen
    path = at("profiles", index)
    topology, topology_path, evictor, evictor_path = _plugin_args(walk, profile, path)
    # A plugin with no pluginConfig entry has its defaults; notes name it by its name.
    unset = at(path, "pluginConfig")
    balance_fit = _topology(walk, topology, topology_path or f"{unset}[{TOPOLOGY_PLUGIN}].args")
    evictor_fit = _evictor(walk, evictor, evictor_path or f"{unset}[{EVICTOR}].args")
    walk.put("nodeFit", balance_fit or evictor_fit)
    _top_level(walk, raw)


V1ALPHA1_HINT: Final = (
    "; descheduler/v1alpha1 (strategies) is not read, and the descheduler itself stopped reading"
    " and converting it in v0.31: rewrite it by hand as descheduler/v1alpha2, as the"
    " descheduler's docs show: one profile whose plugins.balance.enabled lists"
    " RemovePodsViolatingTopologySpreadConstraint; that strategy's params.namespaces and"
    " params.labelSelector go to the plugin's args, params.includeSoftConstraints: true becomes"
    " args.constraints [DoNotSchedule, ScheduleAnyway]; params.nodeFit,"
    " params.thresholdPriority and params.thresholdPriorityClassName (as"
    " priorityThreshold.value and .name) and the top-level evictLocalStoragePods,"
    " evictSystemCriticalPods, ignorePvcPods and evictFailedBarePods go to the profile's"
    " DefaultEvictor args; nodeSelector, maxNoOfPodsToEvictPerNode and"
    " maxNoOfPodsToEvictPerNamespace stay at the top"
)
"""What a ``descheduler/v1alpha1`` policy is told to do, field by field."""


def _header(walk: _Walk, document: object) -> dict[str, Any]:
    if not isinstance(document, dict):
        walk.bad("", f"must be a DeschedulerPolicy mapping, got {show(document)}")
        return {}
    for key, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        if key not in document:
            walk.bad(key, f"required; set {expected}")
        elif document[key] != expected:
            hint = (
                V1ALPHA1_HINT
                if key == "apiVersion" and document[key] == "descheduler/v1alpha1"
                else ""
            )
            walk.bad(key, f"must be {expected}, got {show(document[key])}{hint}")
    return document


def from_descheduler(
    document: object,
    source: str,
    profile: str | None = None,
    *,
    accept_wider: bool = False,
) -> Imported:
    """Import a decoded ``DeschedulerPolicy``; raise :class:`InputError` listing every problem.

    ``profile`` names the profile to import; by default the one profile that enables the
    topology-spread balance plugin (none, or several: an error naming each with its scope).
    A setting that would let pods in that the descheduler would not consider (a note of scope
    :data:`WIDER`) is an error too, unless ``accept_wider``.
    """
    walk = _Walk()
    checked = _header(walk, document)
    if walk.problems:
        raise InputError(source, walk.problems)
    raw = walk.loose(checked, "", _TOP_KEYS)
    chosen = _choose(walk, raw, profile)
    if chosen is None:
        raise InputError(source, walk.problems)
    _import_profile(walk, raw, chosen)
    if walk.problems:
        raise InputError(source, walk.problems)
    _refuse_wider(source, walk.notes, accept_wider)
    return _imported(walk, chosen[2])


@dataclass(frozen=True, slots=True)
class AllImported:
    """One policy per profile that enables the topology plugin (``--all-profiles``)."""

    imports: tuple[Imported, ...]
    """In the profiles' order; each with the notes about its own profile and the top level."""
    shared: tuple[Note, ...]
    """The notes about the rest of the policy (keys the descheduler ignores, profiles that do
    not enable the plugin): the same for every policy, so said once."""


def from_descheduler_all(
    document: object,
    source: str,
    *,
    accept_wider: bool = False,
    budget_per_policy: bool = False,
) -> AllImported:
    """Import every profile that enables the topology plugin, each into a policy of its own;
    raise :class:`InputError` listing every problem of every profile.

    The work is linear in the policy: each profile is read once and imported once, and no
    note of one policy names the others. The descheduler counts its limits
    (``maxNoOfPodsToEvict*``) across all its profiles in one cycle, where each rebalancer
    counts its own: so each limit is divided between the policies (:func:`divide`), and one
    that cannot give each at least 1 is a problem, unless ``budget_per_policy`` gives each
    policy the whole limit (the note says the total it allows).
    """
    walk = _Walk()
    checked = _header(walk, document)
    if walk.problems:
        raise InputError(source, walk.problems)
    raw = walk.loose(checked, "", _TOP_KEYS)
    walks: list[tuple[_Walk, _Profile]] = []
    for index, item in enumerate(walk.items(raw.get("profiles"), "profiles")):
        own = _Walk()  # the notes about this profile stay with its policy
        chosen = _profile(own, item, index)
        if _enables_topology(chosen[1]):
            walks.append((own, chosen))
            continue
        walk.problems.extend(own.problems)
        walk.notes.extend(own.notes)
        walk.note(
            at("profiles", index),
            f"profile {show(chosen[2])} is not carried: it does not enable {TOPOLOGY_PLUGIN}; "
            "keep it in the descheduler",
        )
    if not walks:
        walk.notes.clear()  # _choose names every ignored key as a likely typo
        _choose(walk, raw, None)
        raise InputError(source, walk.problems)
    names: dict[str, int] = {}
    for own, chosen in walks:
        if chosen[2] in names:
            own.bad(at(at("profiles", chosen[0]), "name"), f"{show(chosen[2])} is used twice")
        names.setdefault(chosen[2], chosen[0])
        _import_profile(own, raw, chosen)
    _divide_limits(walk, [own for own, _ in walks], raw, budget_per_policy)
    problems = list(
        dict.fromkeys(walk.problems + [p for own, _ in walks for p in own.problems])
    )  # a problem of the top level is found once per profile: said once
    if problems:
        raise InputError(source, problems)
    _refuse_wider(source, [n for own, _ in walks for n in own.notes], accept_wider)
    return AllImported(tuple(_imported(own, chosen[2]) for own, chosen in walks), tuple(walk.notes))


def divide(budget: int, parts: int) -> list[int]:
    """``budget`` in ``parts`` shares: the floor each, the remainder one each to the first
    (``divide(20, 3) == [7, 7, 6]``); they add up to ``budget``."""
    share, rest = divmod(budget, parts)
    return [share + (1 if index < rest else 0) for index in range(parts)]


_LIMIT_FIELDS: Final = (
    ("maxNoOfPodsToEvictTotal", "total"),
    ("maxNoOfPodsToEvictPerNode", "per_node"),
    ("maxNoOfPodsToEvictPerNamespace", "per_namespace"),
)


def _divide_limits(
    walk: _Walk, walks: Sequence[_Walk], raw: Mapping[str, Any], budget_per_policy: bool
) -> None:
    """Each limit of the top level divided between the policies ``walks`` build (or kept whole
    in each with ``budget_per_policy``), with a note beside ``limits`` in each."""
    parts = len(walks)
    limits = walks[0].out.get("limits") if parts > 1 else None
    if not isinstance(limits, Limits):
        return
    shares: dict[str, list[int]] = {}
    for key, name in _LIMIT_FIELDS:
        budget = getattr(limits, name)
        if budget is None:
            continue
        if budget_per_policy:
            shares[name] = [budget] * parts
        elif 0 < budget < parts:
            walk.bad(
                key,
                f"{budget} cannot be divided between the {parts} policies --all-profiles "
                "writes (the descheduler counts it across all its profiles, each rebalancer "
                "counts its own; each policy needs at least 1): raise it, or pass "
                f"--budget-per-policy to give each policy the whole {budget} (up to "
                f"{budget * parts} in all)",
            )
        else:
            shares[name] = divide(budget, parts)
    if not shares or walk.problems:
        return
    said = ", ".join(
        f"{key} {getattr(limits, name)}" for key, name in _LIMIT_FIELDS if name in shares
    )
    widest = ", ".join(
        f"{key} {getattr(limits, name) * parts}" for key, name in _LIMIT_FIELDS if name in shares
    )
    for index, own in enumerate(walks):
        mine = {name: values[index] for name, values in shares.items()}
        own.out["limits"] = replace(limits, **mine)
        these = ", ".join(
            f"{_LIMIT_KEY[name]} {mine[name]}" for _, name in _LIMIT_FIELDS if name in mine
        )
        if budget_per_policy:
            message = (
                f"--budget-per-policy: each of the {parts} policies keeps the whole of "
                f"{said}, which the descheduler counts across all its profiles: the {parts} "
                f"rebalancers together may evict up to {parts} times as many ({widest})"
            )
        else:
            message = (
                f"divided between the {parts} policies --all-profiles writes, as the "
                f"descheduler counts it across all its profiles ({said}): this one has "
                f"{these} (the floor each, the remainder one each to the first policies)"
            )
        own.note(_first_limit(raw), message, "limits")


_LIMIT_KEY: Final = {"total": "total", "per_node": "perNode", "per_namespace": "perNamespace"}
"""The policy's spelling of each :class:`Limits` field."""


def _first_limit(raw: Mapping[str, Any]) -> str:
    return next(key for key in _LIMIT_KEYS if raw.get(key) is not None)


def _refuse_wider(source: str, notes: Sequence[Note], accept_wider: bool) -> None:
    wider = [n for n in notes if n.scope == WIDER]
    if wider and not accept_wider:
        raise InputError(
            source,
            [f"{n.path}: would widen what may be evicted: {n.message}" for n in wider]
            + [
                "the policy is not written; --accept-wider-scope writes it with each of these "
                "marked '# SCOPE: wider' beside its field"
            ],
        )


def _imported(walk: _Walk, profile: str) -> Imported:
    """The policy ``walk`` built, as the document written and as ``policy check`` reads it."""
    for key, value in (
        ("nodeSelector", walk.out.get("nodeSelector")),
        ("labelSelector", walk.out.get("labelSelector")),
    ):
        if value is not None:
            walk.set_keys.add(key)
    keep = {"apiVersion", "kind", *walk.set_keys}
    document_out = {
        key: value for key, value in policy_to_dict(policy_with(walk.out)).items() if key in keep
    }
    # What `policy check` makes of the document printed (minPodAge is written to the
    # millisecond), not the fields above.
    return Imported(
        policy_from_document(document_out, "the imported policy"),
        document_out,
        profile,
        tuple(walk.notes),
    )


# --- what holds the policy ------------------------------------------------------------------

CHART_VALUES_KEY: Final = "deschedulerPolicy"
"""The descheduler chart's value holding the policy (the chart adds apiVersion and kind)."""
_CHART_VERSION_KEY: Final = "deschedulerPolicyAPIVersion"
POLICY_DATA_KEY: Final = "policy.yaml"
"""The key of the descheduler chart's ConfigMap (and of its docs' examples)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Where the policy was found: ``document`` (decoded) or ``text`` (YAML to decode, from a
    ConfigMap's data), and what held it."""

    document: object
    text: str | None
    held_by: str
    """``""`` for a DeschedulerPolicy itself, else e.g. ``ConfigMap descheduler, data
    policy.yaml``."""
    chart: Mapping[str, Any] | None = None
    """The descheduler chart's other values, when its values held the policy
    (:func:`chart_values` carries them)."""


def unwrap(document: object, source: str) -> Holder:
    """The policy inside what users have: a ``DeschedulerPolicy`` as it is, a ConfigMap
    holding it (data key ``policy.yaml``, or its only key; alone or the one ConfigMap of a
    ``kind: List``), or the descheduler chart's values
    (``deschedulerPolicy:`` at the top, rendered as the chart renders it: with
    ``deschedulerPolicyAPIVersion`` and ``kind: DeschedulerPolicy`` added). Raises
    :class:`InputError` when a ConfigMap holds no single policy, or values hold none."""
    if not isinstance(document, dict):
        return Holder(document, None, "")
    if document.get("kind") == "List" and isinstance(document.get("items"), list):
        # kubectl get cm -o yaml without a name: a List; one ConfigMap in it is the one.
        maps = [
            i for i in document["items"] if isinstance(i, dict) and i.get("kind") == "ConfigMap"
        ]
        if len(maps) != 1:
            raise InputError(
                source,
                [f"items: a List must hold exactly one ConfigMap to import, found {len(maps)}"],
            )
        document = maps[0]
    if document.get("kind") == "ConfigMap":
        meta = document.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        data = document.get("data")
        keys = sorted(k for k in data if isinstance(k, str)) if isinstance(data, dict) else []
        key = POLICY_DATA_KEY if POLICY_DATA_KEY in keys else keys[0] if len(keys) == 1 else None
        if key is None or not isinstance(data, dict):
            found = ", ".join(keys) or "none"
            raise InputError(
                source,
                [
                    f"data: a ConfigMap holding a descheduler policy needs the key "
                    f"{POLICY_DATA_KEY} or a single key, found {found}"
                ],
            )
        text = data[key]
        if not isinstance(text, str):
            raise InputError(source, [f"data.{key}: must be the policy's text, got {show(text)}"])
        return Holder(None, text, f"ConfigMap {name or '<unnamed>'}, data {key}")
    if CHART_VALUES_KEY in document and "apiVersion" not in document:  # its kind: CronJob
        policy = document[CHART_VALUES_KEY]
        if not isinstance(policy, dict) or not policy:
            raise InputError(
                source,
                [
                    f"{CHART_VALUES_KEY}: the descheduler chart renders no policy from "
                    f"{show(policy)}; nothing to import"
                ],
            )
        templated = _templated(policy, CHART_VALUES_KEY)
        if templated:
            raise InputError(
                source,
                [
                    f"{path}: a Helm template ({show(value)}); the chart renders it with tpl at "
                    "install time: import the rendered policy (helm get manifest, or the "
                    "ConfigMap)"
                    for path, value in templated
                ],
            )
        version = document.get(_CHART_VERSION_KEY, API_VERSION)
        rendered = {"apiVersion": version, "kind": KIND, **policy}
        return Holder(
            rendered, None, f"the descheduler chart's values, {CHART_VALUES_KEY}", document
        )
    return Holder(document, None, "")


def _templated(value: object, path: str) -> list[tuple[str, str]]:
    """The strings holding ``{{`` (rendered by the chart's tpl), with their paths."""
    if isinstance(value, str):
        return [(path, value)] if "{{" in value else []
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in _templated(v, at(path, str(k)))]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _templated(v, at(path, i))]
    return []


# --- the descheduler chart's other values ---------------------------------------------------

_CHART_AS_IS: Final = (
    "kind",
    "schedule",
    "deschedulingInterval",
    "replicas",
    "suspend",
    "timeZone",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "resources",
    "priorityClassName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "podAnnotations",
    "podLabels",
    "securityContext",
    "podSecurityContext",
    "imagePullSecrets",
    "commonLabels",
    "leaderElection",
    "rbac",
    "podDisruptionBudget",
    "schedulerName",
)
"""The descheduler chart's values (v0.36) that this chart reads by the same name, with the same
meaning (docs/helm.md): carried as they are."""
_CHART_PARTLY: Final = {
    "cmdOptions": ("dry-run", "v"),
    "serviceMonitor": (
        "enabled",
        "namespace",
        "interval",
        "scrapeTimeout",
        "honorLabels",
        "additionalLabels",
        "relabelings",
        "metricRelabelings",
    ),
    "serviceAccount": ("create", "name", "annotations"),
}
"""Values carried with the keys this chart has; each other key is a note."""
_WHY_PARTLY: Final = {
    "cmdOptions": "rebalancer has no such option (dry-run and v are carried; put rebalancer's "
    "own flags in extraArgs)",
    "serviceMonitor": "rebalancer's metrics are plain HTTP on the metrics port, scraped through "
    "the monitoring.coreos.com/v1 ServiceMonitor",
    "serviceAccount": "the run needs its token, mounted the usual way",
}
_CHART_NOT_CARRIED: Final = {
    "image": "it is the descheduler's image: this chart runs rebalancer's (image.repository "
    "and image.tag or image.digest)",
    "nameOverride": "it named the descheduler's objects; rebalancer's keep their own names, so "
    "the two releases do not collide",
    "fullnameOverride": "it named the descheduler's objects; rebalancer's keep their own "
    "names, so the two releases do not collide",
    "livenessProbe": "the descheduler's probe is /healthz on port 10258, which rebalancer does "
    "not serve; with kind Deployment, point livenessProbe at the metrics port",
    "command": "the image's entrypoint is rebalancer; its arguments come from the values",
    "ports": "kind Deployment's one port is deployment.metricsPort (8080)",
    "service": "deployment.service.enabled makes the metrics Service (on by default)",
    "namespaceOverride": "everything goes in the release namespace (helm -n)",
    "cronJobApiVersion": "the CronJob is always batch/v1",
    "deploymentAnnotations": "commonLabels labels every object; podAnnotations annotate the pods",
    "cronJobAnnotations": "commonLabels labels every object; podAnnotations annotate the pods",
    "cronJobLabels": "commonLabels labels every object, podLabels the pods",
    "jobAnnotations": "commonLabels labels every object; podAnnotations annotate the pods",
    "jobLabels": "commonLabels labels every object, podLabels the pods",
    "dnsConfig": "this chart does not offer it",
    "initContainers": "this chart does not offer it",
    "topologySpreadConstraints": "this chart does not offer it",
    "automountServiceAccountToken": "the run needs its token, mounted the usual way",
    "extraServiceAccountVolumes": "the run needs its token, mounted the usual way",
    "extraServiceAccountVolumeMounts": "the run needs its token, mounted the usual way",
}
"""The descheduler chart's values with no counterpart here, and why."""
_CHART_DEFAULTS: Final = {
    "schedule": ("CronJob", "*/2 * * * *", "*/15 * * * *"),
    "deschedulingInterval": ("Deployment", "5m", "10m"),
    "priorityClassName": (None, "system-cluster-critical", "none"),
}
"""Defaults of the descheduler chart (v0.36) that differ from this chart's: (the kind they
apply to, None for both; theirs; ours)."""


_CHART_RESOURCES: Final = {"requests": "cpu 100m, memory 256Mi", "limits": "cpu 1, memory 1Gi"}
"""This chart's default resources, which Helm merges into a user's unless set to null."""


def _resources(value: Mapping[str, Any], notes: list[Note]) -> dict[str, Any]:
    """``resources`` as written, with null for requests or limits it does not set: Helm would
    otherwise merge this chart's defaults in, which the descheduler's pods did not have."""
    out = dict(value)
    for part, default in _CHART_RESOURCES.items():
        if part not in value:
            out[part] = None
            notes.append(
                Note(
                    at("resources", part),
                    f"not set, so null: this chart's default {part} ({default}) would be merged "
                    "in otherwise, where the descheduler's pods had none",
                    "resources",
                )
            )
    return out


@dataclass(frozen=True, slots=True)
class ChartValues:
    """The descheduler chart's values (besides its policy) as this chart's values."""

    values: dict[str, Any]
    """The values carried, in the file's order."""
    notes: tuple[Note, ...]
    """Each value not carried (``field`` None), or carried in part or with a remark (``field``
    the value's name)."""


def chart_values(values: Mapping[str, Any]) -> ChartValues:
    """Carry the descheduler chart's ``values`` (its ``deschedulerPolicy`` left out) to this
    chart: each value this chart reads by the same name as it is, the known keys of the ones it
    reads in part, and a note for every value or key left behind (and for a default of the
    descheduler's chart that differs from this one's, when the file does not set it)."""
    out: dict[str, Any] = {}
    notes: list[Note] = []
    for key, value in values.items():
        name = str(key)
        if name in _CHART_AS_IS:
            out[name] = value
            if name == "resources" and isinstance(value, dict):
                out[name] = _resources(value, notes)
            if name == "priorityClassName" and str(value).startswith("system-"):
                notes.append(
                    Note(
                        name,
                        f"carried: {show(value)} is admitted only in kube-system unless a "
                        "ResourceQuota allows it elsewhere: install this release in kube-system "
                        "or choose another PriorityClass",
                        name,
                    )
                )
        elif name in _CHART_PARTLY and isinstance(value, dict):
            known = _CHART_PARTLY[name]
            out[name] = {k: v for k, v in value.items() if k in known}
            notes.extend(
                Note(at(name, str(k)), f"not carried: {_WHY_PARTLY[name]}", name)
                for k in value
                if k not in known
            )
        elif name in _CHART_NOT_CARRIED:
            notes.append(Note(name, f"not carried: {_CHART_NOT_CARRIED[name]}"))
        elif name in (CHART_VALUES_KEY, _CHART_VERSION_KEY):
            continue
        else:
            notes.append(
                Note(
                    name, "not carried: not a value of the descheduler chart (v0.36) this chart has"
                )
            )
    kind = values.get("kind", "CronJob")
    for name, (applies, theirs, ours) in _CHART_DEFAULTS.items():
        if name not in values and applies in (None, kind):
            notes.append(
                Note(
                    name,
                    f"not set: the descheduler chart's default is {theirs}, this chart's is "
                    f"{ours}; set {name} to keep the descheduler's",
                )
            )
    return ChartValues(out, tuple(notes))
