"""What rebalancer reads of a node autoscaler that disrupts nodes itself (Karpenter): the marks
that say a node or a pod is about to move, or must not be moved. Pure.

Karpenter (sigs.k8s.io/karpenter, v1.x) writes and reads these names:

- ``karpenter.sh/disrupted`` (taint, NoSchedule): put on a node its disruption (consolidation,
  drift, expiry) or termination has chosen; the node is then drained through the Eviction API
  and deleted. Such a node is never a target of a replacement (whatever the pod tolerates: the
  node is going away), and its pods are not victims: they are about to move anyway.
- ``karpenter.sh/do-not-disrupt`` (annotation on a pod): its owner asks that the pod not be
  disrupted voluntarily. Karpenter takes ``"true"``, or a positive Go duration (``"5m"``) that
  protects the pod for that long after it started; any other value is ignored. rebalancer does
  not read a pod's start time, so a duration protects the pod as ``"true"`` does (Karpenter
  itself protects a pod whose start time it does not know).

- ``karpenter.sh/nodepool`` (label on a node it launched) names its NodePool, and
  ``karpenter.sh/nodepool-hash`` with ``karpenter.sh/nodepool-hash-version`` (annotations on
  the pool, and copied onto each node from its NodeClaim) hash the pool's template. When the
  template changes, the pool's hash does and its older nodes have drifted: Karpenter replaces
  each, in turn, with a new node. A replacement placed on a drifted node is drained again
  within minutes.

Worked example: node n1 tainted ``karpenter.sh/disrupted:NoSchedule`` and node n2 without;
a ReplicaSet pod on n1 is skipped (``node-disrupted``); one on n2 annotated
``karpenter.sh/do-not-disrupt: "10m"`` is skipped (``do-not-disrupt``); one annotated
``"false"`` or ``"soon"`` is a candidate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from rebalancer.core.goduration import scan_go_duration
from rebalancer.core.model import Node, NodePool

DISRUPTED_TAINT_KEY: Final = "karpenter.sh/disrupted"
DO_NOT_DISRUPT_ANNOTATION: Final = "karpenter.sh/do-not-disrupt"
NODEPOOL_LABEL: Final = "karpenter.sh/nodepool"
NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION: Final = "karpenter.sh/nodepool-hash-version"


def node_disrupted(node: Node) -> bool:
    """The node carries Karpenter's disrupted taint (any effect, any value)."""
    return any(t.key == DISRUPTED_TAINT_KEY for t in node.taints)


def drifted(nodes: Iterable[Node], pools: Iterable[NodePool]) -> dict[str, str]:
    """Node name -> its NodePool, for each node that has drifted from its pool: the node's
    ``karpenter.sh/nodepool`` label names a pool whose template hash (``version/hash``) is no
    longer the one the node was launched with. Karpenter replaces such a node (drift): it
    launches a new one, then taints and drains the old. A node or pool without the hash, or a
    pool not read, says nothing."""
    now = {p.name: p.template_hash for p in pools if p.template_hash}
    found: dict[str, str] = {}
    for node in nodes:
        pool = node.labels.get(NODEPOOL_LABEL, "")
        if node.pool_hash and pool in now and now[pool] != node.pool_hash:
            found[node.name] = pool
    return found


def do_not_disrupt(value: str | None) -> bool:
    """Whether a ``karpenter.sh/do-not-disrupt`` value protects the pod: ``"true"``, or a
    positive Go duration (see the module docstring); absent or any other value does not.
    Linear in the value's length (an annotation may hold up to 256 KiB)."""
    if value is None:
        return False
    if value == "true":
        return True
    duration = scan_go_duration(value)
    return duration is not None and duration.positive


def field_writers(managed_fields: Iterable[object], annotation: str) -> tuple[str, ...]:
    """The managers whose ``managedFields`` entry owns ``metadata.annotations[annotation]``
    (``fieldsV1`` holds ``f:metadata`` > ``f:annotations`` > ``f:<annotation>``), in the order
    of the entries, each once. Entries that are not objects, or not in the FieldsV1 format,
    own nothing."""
    key = f"f:{annotation}"
    found: list[str] = []
    for entry in managed_fields:
        if not isinstance(entry, Mapping) or entry.get("fieldsType", "FieldsV1") != "FieldsV1":
            continue
        fields = entry.get("fieldsV1")
        meta = fields.get("f:metadata") if isinstance(fields, Mapping) else None
        annotations = meta.get("f:annotations") if isinstance(meta, Mapping) else None
        if isinstance(annotations, Mapping) and key in annotations:
            manager = entry.get("manager")
            name = manager if isinstance(manager, str) and manager else "(no manager name)"
            if name not in found:
                found.append(name)
    return tuple(found)
