"""Parsing label selectors (``metav1.LabelSelector``) and node selectors (``v1.NodeSelector``).

The one selector parser: pods, PDBs, controllers and the policy's ``labelSelector`` all go
through it. Matching lives in :mod:`rebalancer.core.selectors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

from rebalancer.core.convert.checker import Checker, raise_if
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
    "label_selector",
    "label_selector_from_api",
    "node_selector",
    "node_selector_from_api",
]

SELECTOR_OPS: Final[frozenset[str]] = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
NODE_SELECTOR_OPS: Final[frozenset[str]] = SELECTOR_OPS | {"Gt", "Lt"}


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


def _label_requirement(chk: Checker, raw: object, path: str) -> Requirement | None:
    expr = chk.as_obj(raw, path)
    key = chk.required_text(expr, "key", path)
    op = expr.get("operator")
    if op not in SELECTOR_OPS:
        chk.bad(f"{path}.operator", "must be one of In, NotIn, Exists, DoesNotExist", op)
        return None
    values = _requirement_values(chk, expr, cast(str, op), path)
    return Requirement(key, cast(SelectorOp, op), values)


def label_selector(chk: Checker, raw: object, path: str) -> LabelSelector | None:
    """A label selector; ``None`` (absent) stays ``None``, which matches nothing."""
    if raw is None:
        return None
    obj = chk.as_obj(raw, path)
    match_labels = chk.string_map(obj, "matchLabels", path)
    expressions: list[Requirement] = []
    for i, expr in enumerate(chk.seq(obj, "matchExpressions", path)):
        requirement = _label_requirement(chk, expr, f"{path}.matchExpressions[{i}]")
        if requirement is not None:
            expressions.append(requirement)
    return LabelSelector(tuple(sorted(match_labels.items())), tuple(expressions))


def label_selector_from_api(
    obj: Mapping[str, Any] | None, path: str, problems: list[str] | None = None
) -> LabelSelector | None:
    """Parse a ``metav1.LabelSelector``; ``None`` (absent) stays ``None``, which matches nothing.

    ``{}`` is an empty selector, which matches everything. Problems are appended to
    ``problems`` when given, else raised as one :class:`InputError` named ``path``.
    """
    found: list[str] = [] if problems is None else problems
    selector = label_selector(Checker("", found), obj, path)
    if problems is None:
        raise_if(found, path)
    return selector


def _node_requirement(
    chk: Checker, raw: object, path: str, field: bool
) -> NodeSelectorRequirement | None:
    expr = chk.as_obj(raw, path)
    key = chk.required_text(expr, "key", path)
    op = expr.get("operator")
    if op not in (("In", "NotIn") if field else NODE_SELECTOR_OPS):
        allowed = "In, NotIn" if field else "In, NotIn, Exists, DoesNotExist, Gt, Lt"
        chk.bad(f"{path}.operator", f"must be one of {allowed}", op)
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
    """A node selector (terms ORed); ``None`` (absent) stays ``None``."""
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


def node_selector_from_api(
    obj: Mapping[str, Any] | None, path: str, problems: list[str] | None = None
) -> NodeSelector | None:
    """Parse a ``v1.NodeSelector`` (required node affinity, a PV's node affinity); terms are ORed.

    Problems are appended to ``problems`` when given, else raised as one :class:`InputError`.
    """
    found: list[str] = [] if problems is None else problems
    selector = node_selector(Checker("", found), obj, path)
    if problems is None:
        raise_if(found, path)
    return selector
