"""Kubernetes API objects (plain dicts, as decoded from JSON or YAML) -> the frozen model.

This is the boundary: every field the planner reads is parsed, validated and defaulted here,
once, the way kube-apiserver and kube-scheduler do it, and nothing downstream re-checks it.
Problems are collected, never raised one by one: each names the object (``Kind ns/name``), the
field path and the bad value, and :class:`SnapshotBuilder` raises one :class:`InputError` with
all of them.

Pure: no I/O, no logging, no clock. Fast enough for 150,000 pods: no deep copies, paths are
only formatted when a problem is found, and quantities are parsed once per distinct string.

Modules, by concern: :mod:`.checker` (reading fields, recording problems; shared with the
policy loader), :mod:`.quantities`, :mod:`.selectors` (the one selector parser), :mod:`.meta`
(names, owners, timestamps), one module per object kind (:mod:`.pods` with
:mod:`.constraints` and :mod:`.requests`, :mod:`.nodes`, :mod:`.budgets`, :mod:`.workloads`),
:mod:`.memo` (the caches of one snapshot) and :mod:`.builder` (snapshots; owns the caches).
"""

from __future__ import annotations

from rebalancer.core.convert.builder import (
    KINDS,
    SnapshotBuilder,
    controller_from_api,
    convert_one,
    deployment_from_api,
    node_from_api,
    pdb_from_api,
    pod_from_api,
    priority_class_from_api,
    pv_from_api,
    pvc_from_api,
    service_from_api,
    snapshot_from_objects,
)
from rebalancer.core.convert.quantities import parse_bytes, parse_cpu_millis, parse_quantity
from rebalancer.core.convert.workloads import CONTROLLER_KINDS

__all__ = [
    "CONTROLLER_KINDS",
    "KINDS",
    "SnapshotBuilder",
    "controller_from_api",
    "convert_one",
    "deployment_from_api",
    "node_from_api",
    "parse_bytes",
    "parse_cpu_millis",
    "parse_quantity",
    "pdb_from_api",
    "pod_from_api",
    "priority_class_from_api",
    "pv_from_api",
    "pvc_from_api",
    "service_from_api",
    "snapshot_from_objects",
]
