"""Label selectors, node selectors and tolerations, with Kubernetes' exact semantics (pure)."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping

from rebalancer.core.constants import INT64_MAX, INT64_MIN
from rebalancer.core.model import (
    LabelSelector,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Requirement,
    Taint,
    Toleration,
)

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREADY_TAINT_KEYS = frozenset({UNREACHABLE_TAINT_KEY, NOT_READY_TAINT_KEY})
FILTER_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    """One ``matchExpressions`` entry against a label set."""
    return _requirement_holds(req.key, req.operator, req.values, labels)


def _requirement_holds(
    key: str, operator: str, values: Container[str], labels: Mapping[str, str]
) -> bool:
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    return not present  # DoesNotExist


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """``None`` matches nothing; an empty selector matches everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    return all(requirement_matches(r, labels) for r in selector.match_expressions)


def selector_matcher(selector: LabelSelector) -> Callable[[Mapping[str, str]], bool]:
    """:func:`selector_matches` of ``selector`` for many label sets: each ``In`` and ``NotIn``
    list becomes a set once, so matching k label sets costs k plus the values, not k times
    the values (70,000 values over 10,000 namespaces)."""
    pairs = selector.match_labels
    requirements = [(r.key, r.operator, frozenset(r.values)) for r in selector.match_expressions]

    def matches(labels: Mapping[str, str]) -> bool:
        for key, value in pairs:
            if labels.get(key) != value:
                return False
        return all(_requirement_holds(k, op, values, labels) for k, op, values in requirements)

    return matches


def required_label(selector: LabelSelector) -> tuple[str, str] | None:
    """A label every matching pod must carry: a matchLabels pair or a one-value In."""
    if selector.match_labels:
        return selector.match_labels[0]
    for req in selector.match_expressions:
        if req.operator == "In" and len(req.values) == 1:
            return (req.key, req.values[0])
    return None


class SelectorIndex:
    """Namespaced label selectors, indexed to find those that match a pod without trying all.

    A selector is filed under a label every pod it matches must carry (:func:`required_label`);
    one without such a label is tried for every pod of its namespace. ``None`` matches nothing.
    """

    def __init__(self, selectors: Iterable[tuple[str, LabelSelector | None]]) -> None:
        self.selectors: list[LabelSelector | None] = []
        self._by_label: dict[tuple[str, str, str], list[int]] = {}
        self._scanned: dict[str, list[int]] = {}
        for k, (namespace, selector) in enumerate(selectors):
            self.selectors.append(selector)
            if selector is None:
                continue
            required = required_label(selector)
            if required is None:
                self._scanned.setdefault(namespace, []).append(k)
            else:
                self._by_label.setdefault((namespace, *required), []).append(k)

    def matching(self, namespace: str, labels: Mapping[str, str]) -> list[int]:
        """Positions (ascending) of the selectors of ``namespace`` that match ``labels``."""
        candidates = list(self._scanned.get(namespace, ()))
        for key, value in labels.items():
            candidates.extend(self._by_label.get((namespace, key, value), ()))
        selectors = self.selectors
        return sorted(k for k in candidates if selector_matches(selectors[k], labels))


def selector_string(selector: LabelSelector | None) -> str:
    """The selector as ``kubectl`` prints it: ``app=web,tier in (a,b),!canary``."""
    if selector is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in selector.match_labels]
    for req in selector.match_expressions:
        if req.operator == "In":
            parts.append(f"{req.key} in ({','.join(req.values)})")
        elif req.operator == "NotIn":
            parts.append(f"{req.key} notin ({','.join(req.values)})")
        elif req.operator == "Exists":
            parts.append(req.key)
        else:
            parts.append(f"!{req.key}")
    return ",".join(parts) if parts else "<all>"


def and_selectors(selectors: Iterable[LabelSelector]) -> LabelSelector:
    """The conjunction of several selectors (used for default constraints)."""
    labels: list[tuple[str, str]] = []
    exprs: list[Requirement] = []
    for sel in selectors:
        labels.extend(sel.match_labels)
        exprs.extend(sel.match_expressions)
    return LabelSelector(tuple(sorted(set(labels))), tuple(exprs))


def _node_requirement_matches(req: NodeSelectorRequirement, value: str | None) -> bool:
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    # Gt / Lt: both sides must parse as Go's strconv.ParseInt(s, 10, 64) does, else no match.
    if value is None or len(req.values) != 1:
        return False
    have, want = _go_int64(value), _go_int64(req.values[0])
    if have is None or want is None:
        return False
    return have > want if req.operator == "Gt" else have < want


def _go_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: an optional sign and ASCII digits, in int64 range.

    Python's ``int`` is laxer (``" 5"``, ``"1_000"``): a label such as ``1_000`` must not
    match ``Gt 5`` when kube-scheduler says it does not.
    """
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit() or len(digits) > 100:
        return None
    number = int(text)
    return number if INT64_MIN <= number <= INT64_MAX else None


def term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A term with neither expressions nor fields matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not _node_requirement_matches(req, node.labels.get(req.key)):
            return False
    for req in term.match_fields:
        value = node.name if req.key == "metadata.name" else None
        if not _node_requirement_matches(req, value):
            return False
    return True


def node_selector_matches(selector: NodeSelector, node: Node) -> bool:
    """Terms are ORed; no terms matches no node."""
    return any(term_matches(t, node) for t in selector.terms)


def pod_affinity_matches(pod: Pod, node: Node) -> bool:
    """``nodeSelector`` and required node affinity, as the NodeAffinity filter decides."""
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return False
    return pod.required_affinity is None or node_selector_matches(pod.required_affinity, node)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates one taint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    # Equal (or empty): an empty key only makes sense with Exists.
    return bool(toleration.key) and toleration.value == taint.value


def untolerated_taint(
    tolerations: tuple[Toleration, ...], taints: Iterable[Taint], effects: frozenset[str]
) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates."""
    for taint in taints:
        if taint.effect in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def node_unreachable(node: Node) -> bool:
    """NotReady/Unknown, or carrying the unreachable or not-ready taint (the node lifecycle
    controller's, which may outlive the condition by a moment): evictions there cannot
    complete."""
    return not node.ready or any(t.key in UNREADY_TAINT_KEYS for t in node.taints)
