"""Topology spread constraints of a pod: validated and defaulted once per distinct list, then
merged with the pod's labels for ``matchLabelKeys`` (as kube-apiserver and kube-scheduler do)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from rebalancer.core.constants import INT32_MAX
from rebalancer.core.convert.checker import Checker
from rebalancer.core.convert.memo import EMPTY_NUMBER, Caches, fingerprint
from rebalancer.core.convert.selectors import label_selector
from rebalancer.core.model import (
    HARD,
    HONOR,
    IGNORE,
    SOFT,
    LabelSelector,
    Requirement,
    SpreadConstraint,
)

__all__ = ["spread_constraints"]


def _positive(chk: Checker, obj: Mapping[str, Any], key: str, path: str, default: int) -> int:
    """An integer > 0 that fits in int32, as the API has them (``maxSkew``, ``minDomains``);
    ``default`` if bad (reported)."""
    value = obj.get(key)
    if type(value) is int and 0 < value <= INT32_MAX:
        return value
    if type(value) is int and value > INT32_MAX:
        chk.bad(f"{path}.{key}", f"must fit in int32 (at most {INT32_MAX})", value)
    else:
        chk.bad(f"{path}.{key}", "must be an integer > 0", value)
    return default


def _one_of(
    chk: Checker, obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, str]
) -> str | None:
    value = obj.get(key)
    if value in allowed:
        return cast(str, value)
    chk.bad(f"{path}.{key}", f"must be {allowed[0]} or {allowed[1]}", value)
    return None


def _is_merged(requirement: Requirement) -> bool:
    """The shape kube-apiserver (1.34+) writes when it merges a matchLabelKeys key itself."""
    return requirement.operator == "In" and len(requirement.values) == 1


def _check_match_label_keys(
    chk: Checker, selector: LabelSelector, keys: tuple[str, ...], path: str
) -> None:
    """Report a matchLabelKeys key that the labelSelector also names (an API error).

    Since 1.34 kube-apiserver stores each key the pod carries as an ``In [value]`` expression
    in the labelSelector (MatchLabelKeysInPodTopologySpreadSelectorMerge), so exactly one such
    expression per key is the server's own merge, not a conflict.
    """
    in_labels = {key for key, _ in selector.match_labels}
    for i, key in enumerate(keys):
        exprs = [r for r in selector.match_expressions if r.key == key]
        merged_only = len(exprs) == 1 and _is_merged(exprs[0])
        if key in in_labels or (exprs and not merged_only):
            chk.bad(f"{path}.matchLabelKeys[{i}]", "must not also be in labelSelector", key)


def _merge_match_label_keys(
    selector: LabelSelector | None, keys: tuple[str, ...], labels: Mapping[str, str]
) -> LabelSelector | None:
    """The effective selector: ``key In [pod's value]`` added for each key the pod carries.

    A nil labelSelector stays nil even if matchLabelKeys would add requirements: kube-scheduler
    turns a nil selector into ``labels.Nothing()``, and merging a label set into Nothing keeps
    Nothing (``mergeLabelSetWithSelector`` returns it unchanged), so the constraint matches no
    pod. (Recent API servers reject matchLabelKeys without a labelSelector; older ones did not.)
    Requirements the API server already merged are not added twice.
    """
    if selector is None or not keys:
        return selector
    added = []
    for key in keys:
        value = labels.get(key)
        if value is None:
            continue  # keys the pod lacks are ignored
        requirement = Requirement(key, "In", (value,))
        if requirement not in selector.match_expressions and requirement not in added:
            added.append(requirement)
    if not added:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + tuple(added))


def _spread_constraint(chk: Checker, raw: object, path: str) -> SpreadConstraint:
    """One constraint, validated and defaulted; its selector is merged later, per pod."""
    obj = chk.as_obj(raw, path)
    max_skew = _positive(chk, obj, "maxSkew", path, 1)
    topology_key = chk.required_text(obj, "topologyKey", path)
    when = _one_of(chk, obj, "whenUnsatisfiable", path, (HARD, SOFT)) or HARD
    min_domains = 1
    if obj.get("minDomains") is not None:
        min_domains = _positive(chk, obj, "minDomains", path, 1)
        if when == SOFT:  # kube-apiserver rejects it
            chk.bad(
                f"{path}.minDomains",
                "may only be set when whenUnsatisfiable is DoNotSchedule",
                obj.get("minDomains"),
            )
    affinity_policy = HONOR
    if obj.get("nodeAffinityPolicy") is not None:
        affinity_policy = _one_of(chk, obj, "nodeAffinityPolicy", path, (HONOR, IGNORE)) or HONOR
    taints_policy = IGNORE
    if obj.get("nodeTaintsPolicy") is not None:
        taints_policy = _one_of(chk, obj, "nodeTaintsPolicy", path, (HONOR, IGNORE)) or IGNORE
    selector = label_selector(chk, obj.get("labelSelector"), f"{path}.labelSelector")
    keys = chk.strings(obj, "matchLabelKeys", path)
    if selector is not None and keys:
        _check_match_label_keys(chk, selector, keys, path)
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        when_unsatisfiable=when,
        selector=selector,
        min_domains=min_domains,
        node_affinity_policy=affinity_policy,
        node_taints_policy=taints_policy,
        match_label_keys=keys,
    )


def _parse_spread_constraints(
    chk: Checker, raw: Sequence[Any]
) -> tuple[tuple[SpreadConstraint, ...], tuple[str, ...]]:
    """The constraints with selectors not yet merged with matchLabelKeys, and all their keys."""
    result = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        path = f"spec.topologySpreadConstraints[{i}]"
        constraint = _spread_constraint(chk, item, path)
        pair = (constraint.topology_key, constraint.when_unsatisfiable)
        if pair in seen:
            chk.bad(path, "duplicate {topologyKey, whenUnsatisfiable} pair", list(pair))
        seen.add(pair)
        result.append(constraint)
    keys = sorted({key for c in result if c.selector is not None for key in c.match_label_keys})
    return tuple(result), tuple(keys)


def _with_label_keys(
    constraints: tuple[SpreadConstraint, ...], labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    return tuple(
        replace(c, selector=_merge_match_label_keys(c.selector, c.match_label_keys, labels))
        if c.match_label_keys
        else c
        for c in constraints
    )


def spread_constraints(
    chk: Checker, spec: Mapping[str, Any], labels: Mapping[str, str], caches: Caches
) -> tuple[tuple[SpreadConstraint, ...], int]:
    raw = chk.seq(spec, "topologySpreadConstraints", "spec")
    if not raw:
        return (), EMPTY_NUMBER
    key = fingerprint(raw)
    (parsed, label_keys), number = caches.constraints.get(
        chk, key, lambda: _parse_spread_constraints(chk, raw)
    )
    if not label_keys:
        return parsed, number
    values = tuple(labels.get(k) for k in label_keys)
    merged_key = None if key is None else (key, values)
    return caches.merged.get(chk, merged_key, lambda: _with_label_keys(parsed, labels))
