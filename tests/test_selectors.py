"""Node selector operators (In, NotIn, Exists, DoesNotExist, Gt, Lt) against a hand table of
what kube-scheduler's NodeAffinity filter decides, and label selector operators likewise."""

from __future__ import annotations

import pytest

from rebalancer.core.model import (
    LabelSelector,
    Node,
    NodeSelector,
    NodeSelectorOp,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Requirement,
    SelectorOp,
)
from rebalancer.core.selectors import node_selector_matches, selector_matches

ABSENT = None

# (operator, values, the node's value of the label or ABSENT, matches?)
NODE_CASES: list[tuple[NodeSelectorOp, tuple[str, ...], str | None, bool]] = [
    ("In", ("a", "b"), "a", True),
    ("In", ("a", "b"), "c", False),
    ("In", ("a",), ABSENT, False),
    ("In", ("",), "", True),
    ("NotIn", ("a", "b"), "c", True),
    ("NotIn", ("a", "b"), "b", False),
    ("NotIn", ("a",), ABSENT, True),  # a node without the label is not in the set
    ("Exists", (), "anything", True),
    ("Exists", (), "", True),
    ("Exists", (), ABSENT, False),
    ("DoesNotExist", (), ABSENT, True),
    ("DoesNotExist", (), "", False),
    ("Gt", ("4",), "8", True),
    ("Gt", ("4",), "4", False),
    ("Gt", ("4",), "3", False),
    ("Gt", ("-2",), "-1", True),
    ("Gt", ("4",), "+5", True),  # ParseInt takes a sign
    ("Gt", ("4",), "0010", True),  # and leading zeros
    ("Gt", ("4",), ABSENT, False),
    ("Gt", ("4",), "eight", False),  # not an integer: no match, no error
    ("Gt", ("4",), "1_000", False),  # Python's int() would take it; ParseInt does not
    ("Gt", ("4",), "9223372036854775808", False),  # beyond int64
    ("Gt", ("-9223372036854775808",), "9223372036854775807", True),
    ("Gt", ("x",), "8", False),  # a bad value in the requirement matches nothing
    ("Lt", ("4",), "3", True),
    ("Lt", ("4",), "4", False),
    ("Lt", ("4",), "-10", True),
    ("Lt", ("4",), ABSENT, False),
    ("Lt", ("4",), "", False),
    ("Lt", ("4", "5"), "3", False),  # Gt/Lt take exactly one value
]


def _node(value: str | None) -> Node:
    labels = {"kubernetes.io/hostname": "n1"}
    if value is not None:
        labels["cores"] = value
    return Node(name="n1", labels=labels, allocatable={})


@pytest.mark.parametrize(("op", "values", "label", "expected"), NODE_CASES)
def test_node_selector_operator(
    op: NodeSelectorOp, values: tuple[str, ...], label: str | None, expected: bool
) -> None:
    """Each operator decides as the NodeAffinity filter does for that label value."""
    selector = NodeSelector((NodeSelectorTerm((NodeSelectorRequirement("cores", op, values),)),))
    assert node_selector_matches(selector, _node(label)) is expected


@pytest.mark.parametrize(
    ("op", "values", "expected"),
    [("In", ("n1",), True), ("In", ("n2",), False), ("NotIn", ("n1",), False)],
)
def test_match_fields_read_the_node_name(
    op: NodeSelectorOp, values: tuple[str, ...], expected: bool
) -> None:
    """matchFields on metadata.name compare the node's name, not a label."""
    req = NodeSelectorRequirement("metadata.name", op, values)
    selector = NodeSelector((NodeSelectorTerm((), (req,)),))
    assert node_selector_matches(selector, _node(None)) is expected  # the node is n1


def test_terms_are_ored_and_requirements_anded() -> None:
    """A node matches when any term matches; a term when all its requirements do; an empty
    term or no terms match nothing."""
    big = NodeSelectorRequirement("cores", "Gt", ("4",))
    small = NodeSelectorRequirement("cores", "Lt", ("2",))
    node = _node("8")
    assert node_selector_matches(
        NodeSelector((NodeSelectorTerm((small,)), NodeSelectorTerm((big,)))), node
    )
    assert not node_selector_matches(NodeSelector((NodeSelectorTerm((small, big)),)), node)
    assert not node_selector_matches(NodeSelector((NodeSelectorTerm(()),)), node)
    assert not node_selector_matches(NodeSelector(()), node)


# (operator, values, the pod's value of the label or ABSENT, matches?)
LABEL_CASES: list[tuple[SelectorOp, tuple[str, ...], str | None, bool]] = [
    ("In", ("web",), "web", True),
    ("In", ("web",), "db", False),
    ("In", ("web",), ABSENT, False),
    ("NotIn", ("web",), "db", True),
    ("NotIn", ("web",), ABSENT, True),
    ("NotIn", ("web",), "web", False),
    ("Exists", (), "", True),
    ("Exists", (), ABSENT, False),
    ("DoesNotExist", (), ABSENT, True),
    ("DoesNotExist", (), "web", False),
]


@pytest.mark.parametrize(("op", "values", "label", "expected"), LABEL_CASES)
def test_label_selector_operator(
    op: SelectorOp, values: tuple[str, ...], label: str | None, expected: bool
) -> None:
    """metav1.LabelSelector operators decide as labels.Selector does."""
    labels = {} if label is None else {"app": label}
    selector = LabelSelector((), (Requirement("app", op, values),))
    assert selector_matches(selector, labels) is expected


def test_empty_and_absent_label_selectors() -> None:
    """An empty selector matches every pod; an absent one (None) matches none."""
    assert selector_matches(LabelSelector(), {"app": "web"})
    assert not selector_matches(None, {"app": "web"})
