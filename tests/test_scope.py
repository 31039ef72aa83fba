"""namespaceLabelSelector: the policy field, the one namespace scope, and the Namespace objects
read from the cluster, written by `rebalancer snapshot` and read back from snapshot files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cluster.read.reader import read_cluster
from rebalancer.cluster.read.snapshot import dump_objects, load_snapshot
from rebalancer.core.errors import InputError
from rebalancer.core.model import LabelSelector, Namespace, Requirement, Snapshot
from rebalancer.core.policy import Policy, policy_from_document, policy_to_dict
from rebalancer.core.scope import NamespaceScope
from tests.builders import cluster_items
from tests.fakes import FakeLister

LABELS = {
    "shop": {"rebalance": "enabled", "team": "shop"},
    "blog": {"rebalance": "enabled"},
    "batch": {},
    "ops": {"team": "ops"},
}
NAMESPACES = tuple(Namespace(name, labels) for name, labels in LABELS.items())
ENABLED = LabelSelector((("rebalance", "enabled"),))
TEAMS = LabelSelector((), (Requirement("team", "In", ("shop", "ops")),))
NO_TEAM = LabelSelector((), (Requirement("team", "DoesNotExist"),))


@pytest.mark.parametrize(
    ("policy", "in_scope"),
    [
        # Hand-derived from each namespace's labels (table above) and the policy's rules;
        # "gone" has no Namespace object: it matches no selector.
        (Policy(), {"shop", "blog", "batch", "ops", "gone"}),
        (Policy(namespace_label_selector=ENABLED), {"shop", "blog"}),
        (Policy(namespace_label_selector=TEAMS), {"shop", "ops"}),
        (Policy(namespace_label_selector=NO_TEAM), {"blog", "batch"}),
        (Policy(namespace_label_selector=LabelSelector()), {"shop", "blog", "batch", "ops"}),
        (
            Policy(namespace_label_selector=ENABLED, namespaces_exclude=("shop",)),
            {"blog"},
        ),
        (
            Policy(
                namespace_label_selector=TEAMS,
                namespaces_include=("ops", "batch"),
                namespaces_exclude=(),
            ),
            {"ops"},
        ),
    ],
)
def test_the_scope_is_the_namespaces_rules_and_the_labels(
    policy: Policy, in_scope: set[str]
) -> None:
    scope = NamespaceScope.of(policy, Snapshot(namespaces=NAMESPACES))
    assert {ns for ns in (*LABELS, "gone") if ns in scope} == in_scope


def test_the_reasons_name_the_rule() -> None:
    policy = Policy(namespace_label_selector=ENABLED, namespaces_exclude=("blog",))
    scope = NamespaceScope.of(policy, Snapshot(namespaces=NAMESPACES))
    assert scope.why_not("shop") is None
    assert scope.why_not("blog") == "namespace blog is excluded"
    assert scope.why_not("batch") == (
        "namespace batch does not match the policy's namespaceLabelSelector"
    )
    assert scope.why_not("gone") == (
        "namespace gone has no Namespace object to match namespaceLabelSelector"
    )


def test_a_selector_over_a_snapshot_without_namespaces_is_an_error() -> None:
    """No Namespace object at all: which namespaces match is unknown, never "all"."""
    with pytest.raises(InputError) as info:
        NamespaceScope.of(Policy(namespace_label_selector=ENABLED), Snapshot())
    assert info.value.problems[0].startswith(
        "namespaceLabelSelector: set, but the snapshot holds no Namespace objects"
    )
    assert "x" in NamespaceScope.of(Policy(), Snapshot())  # without the selector: as before


def test_the_policy_field_round_trips() -> None:
    document = {
        "apiVersion": "rebalancer/v1alpha1",
        "kind": "RebalancerPolicy",
        "namespaceLabelSelector": {
            "matchLabels": {"rebalance": "enabled"},
            "matchExpressions": [{"key": "team", "operator": "Exists"}],
        },
    }
    policy = policy_from_document(document, "p")
    assert policy.namespace_label_selector == LabelSelector(
        (("rebalance", "enabled"),), (Requirement("team", "Exists"),)
    )
    assert policy_from_document(policy_to_dict(policy), "again") == policy
    bad = {**document, "namespaceLabelSelector": {"matchLabels": {"bad key": "x"}}}
    with pytest.raises(InputError) as info:
        policy_from_document(bad, "p")
    assert info.value.problems[0].startswith("namespaceLabelSelector.matchLabels[bad key]:")


def _namespace_items() -> list[dict[str, Any]]:
    return [{"metadata": {"name": n, "labels": labels}} for n, labels in LABELS.items()]


def test_namespaces_are_read_written_and_read_back(tmp_path: Path) -> None:
    """The live read lists namespaces (cluster-wide, also with -n); `rebalancer snapshot`
    writes them and a snapshot file gives them back with their labels."""
    items = {**cluster_items(), "namespaces": _namespace_items()}
    lister = FakeLister(items)
    result = read_cluster(lister, keep_objects=True, namespace="shop")
    assert ("namespaces", None) in {(c[0], c[1]) for c in lister.calls}
    assert {n.name: dict(n.labels) for n in result.snapshot.namespaces} == LABELS
    path = tmp_path / "snap.json"
    path.write_bytes(dump_objects(result.objects or (), "json"))
    assert load_snapshot(path).namespaces == result.snapshot.namespaces
    kinds = [o["kind"] for o in yaml.safe_load(path.read_text())["items"]]
    assert kinds.count("Namespace") == len(LABELS)
