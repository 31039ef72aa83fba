"""Parsing label selectors (``metav1.LabelSelector``) and node selectors (``v1.NodeSelector``).

The one selector parser: pods, PDBs, controllers and the policy's ``labelSelector`` all go
through it. Matching lives in :mod:`rebalancer.core.selectors`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, cast

from rebalancer.core.constants import DNS_SUBDOMAIN
from rebalancer.core.convert.checker import Checker, show, suggest
from rebalancer.core.model import (
    LabelSelector,
    NodeSelector,
    NodeSelectorOp,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Requirement,
    SelectorOp,
)

__all__ = [
    "LABEL_VALUE",
    "is_label_key",
    "label_selector",
    "node_selector",
]

SELECTOR_OPS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPS: Final = (*SELECTOR_OPS, "Gt", "Lt")

LABEL_NAME: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE: Final = re.compile(f"^({LABEL_NAME.pattern[1:-1]})?$")
LABEL_KEY_WHAT: Final = "a label key like app or example.com/tier"


def is_label_key(value: object) -> bool:
    """A qualified label key: ``name`` or ``prefix/name`` (prefix a DNS subdomain)."""
    if type(value) is not str:
        return False
    prefix, slash, name = value.rpartition("/")
    return (not slash or DNS_SUBDOMAIN.match(prefix) is not None) and bool(LABEL_NAME.match(name))


def _check_labels(chk: Checker, labels: Mapping[str, str], path: str) -> None:
    """Strict mode: matchLabels keys and values as Kubernetes checks them."""
    for key, value in labels.items():
        where = f"{path}.matchLabels[{key}]"
        if not is_label_key(key):
            chk.bad(where, f"must be {LABEL_KEY_WHAT}", key)
        elif not LABEL_VALUE.match(value):
            chk.bad(where, "must be a label value", value)


def _check_requirement(chk: Checker, key: str, values: tuple[str, ...], path: str) -> None:
    """Strict mode: the key and values of one expression, and no value listed twice."""
    if key and not is_label_key(key):
        chk.bad(f"{path}.key", f"must be {LABEL_KEY_WHAT}", key)
    seen: set[str] = set()
    for j, value in enumerate(values):
        if not LABEL_VALUE.match(value):
            chk.bad(f"{path}.values[{j}]", "must be a label value", value)
        elif value in seen:
            chk.bad(f"{path}.values[{j}]", "is listed twice", value)
        seen.add(value)


def _requirement_values(
    chk: Checker, expr: Mapping[str, Any], op: str, path: str
) -> tuple[str, ...]:
    values = chk.strings(expr, "values", path)
    if op in ("In", "NotIn"):
        if not values:
            chk.bad(f"{path}.values", f"must be non-empty for operator {op}", list(values))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            chk.bad(f"{path}.values", f"must be empty for operator {op}", list(values))
    elif op in ("Gt", "Lt") and (len(values) != 1 or not _is_integer(values[0])):
        chk.bad(f"{path}.values", f"must be one integer for operator {op}", list(values))
    return values


def _is_integer(text: str) -> bool:
    digits = text[1:] if text[:1] in ("-", "+") else text
    return digits.isascii() and digits.isdigit()


def _bad_operator(chk: Checker, path: str, op: object, allowed: tuple[str, ...]) -> None:
    hint = suggest(op, allowed) if type(op) is str else ""
    chk.bad(f"{path}.operator", f"must be one of {', '.join(allowed)}, got {show(op)}{hint}")


def _label_requirement(chk: Checker, raw: object, path: str, strict: bool) -> Requirement | None:
    expr = chk.as_obj(raw, path)
    if strict:
        chk.known_keys(expr, path, ("key", "operator", "values"))
    key = chk.required_text(expr, "key", path)
    op = expr.get("operator")
    if op not in SELECTOR_OPS:
        _bad_operator(chk, path, op, SELECTOR_OPS)
        return None
    values = _requirement_values(chk, expr, cast(str, op), path)
    if strict:
        _check_requirement(chk, key, values, path)
    return Requirement(key, cast(SelectorOp, op), values)


def label_selector(
    chk: Checker, raw: object, path: str, *, strict: bool = False
) -> LabelSelector | None:
    """A label selector; ``None`` (absent) stays ``None``, which matches nothing, and ``{}`` is
    the empty selector, which matches everything.

    ``strict`` (a selector a person wrote, as in the policy): unknown keys, label key and
    value syntax and repeated values are reported too; the API server has already checked
    them in the objects of a snapshot.
    """
    if raw is None:
        return None
    obj = chk.as_obj(raw, path)
    if strict:
        chk.known_keys(obj, path, ("matchLabels", "matchExpressions"))
    match_labels = chk.string_map(obj, "matchLabels", path)
    if strict:
        _check_labels(chk, match_labels, path)
    expressions: list[Requirement] = []
    for i, expr in enumerate(chk.seq(obj, "matchExpressions", path)):
        requirement = _label_requirement(chk, expr, f"{path}.matchExpressions[{i}]", strict)
        if requirement is not None:
            expressions.append(requirement)
    return LabelSelector(tuple(sorted(match_labels.items())), tuple(expressions))


def _node_requirement(
    chk: Checker, raw: object, path: str, field: bool
) -> NodeSelectorRequirement | None:
    expr = chk.as_obj(raw, path)
    key = chk.required_text(expr, "key", path)
    op = expr.get("operator")
    allowed = ("In", "NotIn") if field else NODE_SELECTOR_OPS
    if op not in allowed:
        _bad_operator(chk, path, op, allowed)
        return None
    values = _requirement_values(chk, expr, cast(str, op), path)
    if field:
        if key and key != "metadata.name":
            chk.bad(f"{path}.key", "must be metadata.name (the only node field)", key)
        if len(values) > 1:
            chk.bad(f"{path}.values", "must hold one value for a node field", list(values))
    return NodeSelectorRequirement(key, cast(NodeSelectorOp, op), values)


def _node_selector_term(chk: Checker, raw: object, path: str) -> NodeSelectorTerm:
    term = chk.as_obj(raw, path)
    parts: list[tuple[NodeSelectorRequirement, ...]] = []
    for key, is_field in (("matchExpressions", False), ("matchFields", True)):
        found = []
        for i, expr in enumerate(chk.seq(term, key, path)):
            requirement = _node_requirement(chk, expr, f"{path}.{key}[{i}]", is_field)
            if requirement is not None:
                found.append(requirement)
        parts.append(tuple(found))
    return NodeSelectorTerm(parts[0], parts[1])


def node_selector(chk: Checker, raw: object, path: str) -> NodeSelector | None:
    """A ``v1.NodeSelector`` (required node affinity, a PV's node affinity; terms ORed); ``None``
    (absent) stays ``None``."""
    if raw is None:
        return None
    obj = chk.as_obj(raw, path)
    terms = chk.seq(obj, "nodeSelectorTerms", path)
    if not terms:
        chk.bad(
            f"{path}.nodeSelectorTerms", "must hold at least one term", obj.get("nodeSelectorTerms")
        )
    return NodeSelector(
        tuple(
            _node_selector_term(chk, term, f"{path}.nodeSelectorTerms[{i}]")
            for i, term in enumerate(terms)
        )
    )
