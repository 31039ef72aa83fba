"""The core as the shells see it: every name ``rebalancer.cli`` and ``rebalancer.cluster`` use
of the planning core, and nothing else (an import contract keeps it the one way in).

The names load on first use (PEP 562), so a command that needs little of the core (``policy
check``, ``version``) loads little of it: ``from rebalancer.core.api import plan`` imports the
planner then, and only then. What each name is: its own module's docstring.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rebalancer.core.budgets import (
        budget,
    )
    from rebalancer.core.capacity import (
        AWAIT,
        CAPACITY_WAYS,
        DEFAULT_BACKOFF_SECONDS,
        RESERVE,
        CapacityRules,
        Refused,
        pin_of,
        refusal_key,
    )
    from rebalancer.core.constants import (
        DNS_SUBDOMAIN,
        INT32_MAX,
        INT32_MIN,
        INT64_MAX,
        INT64_MIN,
    )
    from rebalancer.core.convert import (
        KINDS,
        SnapshotBuilder,
        convert_one,
        pdb_from_api,
    )
    from rebalancer.core.convert.builder import (
        Rejected,
    )
    from rebalancer.core.convert.checker import (
        Checker,
        show,
    )
    from rebalancer.core.convert.constraints import (
        spread_constraints,
    )
    from rebalancer.core.convert.disruption import (
        resource_claims,
    )
    from rebalancer.core.convert.features import (
        NO_FEATURES,
    )
    from rebalancer.core.convert.memo import (
        EMPTY_NUMBER,
        Caches,
    )
    from rebalancer.core.convert.meta import (
        controller_owner,
        epoch,
    )
    from rebalancer.core.convert.nodes import (
        node,
    )
    from rebalancer.core.convert.pods import (
        COST_MARK_ANNOTATION,
        DELETION_COST_ANNOTATION,
        EVICT_ANNOTATION,
        MIRROR_ANNOTATION,
        PREFER_NO_EVICTION_ANNOTATION,
        pod,
        required_node_affinity,
        tolerations,
    )
    from rebalancer.core.convert.requests import (
        pod_requests,
    )
    from rebalancer.core.convert.serverversion import (
        server_version_item,
    )
    from rebalancer.core.errors import (
        EXIT_BAD_INPUT,
        EXIT_CLUSTER,
        EXIT_EVICTIONS_FAILED,
        EXIT_INTERNAL,
        EXIT_OK,
        MAX_PROBLEMS_SHOWN,
        InputError,
        RebalancerError,
    )
    from rebalancer.core.evictability import (
        do_not_disrupt_reason,
        leaving_reason,
        node_reason,
    )
    from rebalancer.core.explain import (
        ConstraintExplanation,
        Explanation,
        PlanStatus,
        explain,
        pod_index,
    )
    from rebalancer.core.fromdescheduler import (
        API_VERSION,
        KIND,
        TOPOLOGY_PLUGIN,
        WIDER,
        ChartValues,
        Imported,
        Note,
        chart_values,
        from_descheduler,
        from_descheduler_all,
        unwrap,
    )
    from rebalancer.core.grace import (
        eviction_grace,
    )
    from rebalancer.core.holds import (
        THRASH_GUARD_SECONDS,
        Guard,
        HoldRules,
        LoopMemory,
        remembered_launches,
    )
    from rebalancer.core.ids import (
        ViewKey,
    )
    from rebalancer.core.karpenter.drains import (
        DrainLedger,
    )
    from rebalancer.core.karpenter.marks import (
        DO_NOT_DISRUPT_ANNOTATION,
        NODEPOOL_LABEL,
        do_not_disrupt,
        field_writers,
    )
    from rebalancer.core.karpenter.nodepools import (
        ANY_NODE,
    )
    from rebalancer.core.model import (
        ZONE_KEY,
        LabelSelector,
        NodeSelector,
        OwnerRef,
        Pod,
        Snapshot,
        SpreadConstraint,
        Toleration,
        new_pod,
    )
    from rebalancer.core.plan import (
        Eviction,
        Hold,
        Plan,
        Skip,
        SkipCode,
        SkipReason,
        Unrepaired,
        ViewReport,
        workload_key,
    )
    from rebalancer.core.planner import (
        plan,
    )
    from rebalancer.core.policy import (
        AUTO_API,
        EVICTION_API,
        EVICTION_REQUEST_API,
        HEADER_KEYS,
        NEVER,
        RESERVE_CAPACITY_MODES,
        Policy,
        format_duration,
        parse_duration,
        policy_from_document,
        policy_to_dict,
        restrict_to_namespace,
    )
    from rebalancer.core.schedule import (
        describe,
        window_state,
    )
    from rebalancer.core.scope import (
        NamespaceScope,
    )
    from rebalancer.core.selectors import (
        selector_matches,
        selector_string,
    )
    from rebalancer.core.steer import (
        CostChange,
        Steering,
    )

_WHERE: dict[str, str] = {
    "AWAIT": "rebalancer.core.capacity",
    "CAPACITY_WAYS": "rebalancer.core.capacity",
    "DEFAULT_BACKOFF_SECONDS": "rebalancer.core.capacity",
    "RESERVE": "rebalancer.core.capacity",
    "CapacityRules": "rebalancer.core.capacity",
    "Refused": "rebalancer.core.capacity",
    "pin_of": "rebalancer.core.capacity",
    "refusal_key": "rebalancer.core.capacity",
    "NEVER": "rebalancer.core.policy",
    "RESERVE_CAPACITY_MODES": "rebalancer.core.policy",
    "THRASH_GUARD_SECONDS": "rebalancer.core.holds",
    "ANY_NODE": "rebalancer.core.karpenter.nodepools",
    "API_VERSION": "rebalancer.core.fromdescheduler",
    "AUTO_API": "rebalancer.core.policy",
    "COST_MARK_ANNOTATION": "rebalancer.core.convert.pods",
    "Caches": "rebalancer.core.convert.memo",
    "ChartValues": "rebalancer.core.fromdescheduler",
    "Checker": "rebalancer.core.convert.checker",
    "ConstraintExplanation": "rebalancer.core.explain",
    "CostChange": "rebalancer.core.steer",
    "DELETION_COST_ANNOTATION": "rebalancer.core.convert.pods",
    "DNS_SUBDOMAIN": "rebalancer.core.constants",
    "DO_NOT_DISRUPT_ANNOTATION": "rebalancer.core.karpenter.marks",
    "NODEPOOL_LABEL": "rebalancer.core.karpenter.marks",
    "ZONE_KEY": "rebalancer.core.model",
    "DrainLedger": "rebalancer.core.karpenter.drains",
    "EMPTY_NUMBER": "rebalancer.core.convert.memo",
    "EVICTION_API": "rebalancer.core.policy",
    "EVICTION_REQUEST_API": "rebalancer.core.policy",
    "EVICT_ANNOTATION": "rebalancer.core.convert.pods",
    "EXIT_BAD_INPUT": "rebalancer.core.errors",
    "EXIT_CLUSTER": "rebalancer.core.errors",
    "EXIT_EVICTIONS_FAILED": "rebalancer.core.errors",
    "EXIT_INTERNAL": "rebalancer.core.errors",
    "EXIT_OK": "rebalancer.core.errors",
    "Eviction": "rebalancer.core.plan",
    "Explanation": "rebalancer.core.explain",
    "Guard": "rebalancer.core.holds",
    "HEADER_KEYS": "rebalancer.core.policy",
    "Hold": "rebalancer.core.plan",
    "HoldRules": "rebalancer.core.holds",
    "INT32_MAX": "rebalancer.core.constants",
    "INT32_MIN": "rebalancer.core.constants",
    "INT64_MAX": "rebalancer.core.constants",
    "INT64_MIN": "rebalancer.core.constants",
    "Imported": "rebalancer.core.fromdescheduler",
    "InputError": "rebalancer.core.errors",
    "KIND": "rebalancer.core.fromdescheduler",
    "KINDS": "rebalancer.core.convert",
    "LabelSelector": "rebalancer.core.model",
    "LoopMemory": "rebalancer.core.holds",
    "MAX_PROBLEMS_SHOWN": "rebalancer.core.errors",
    "MIRROR_ANNOTATION": "rebalancer.core.convert.pods",
    "NO_FEATURES": "rebalancer.core.convert.features",
    "NamespaceScope": "rebalancer.core.scope",
    "NodeSelector": "rebalancer.core.model",
    "Note": "rebalancer.core.fromdescheduler",
    "OwnerRef": "rebalancer.core.model",
    "PREFER_NO_EVICTION_ANNOTATION": "rebalancer.core.convert.pods",
    "Plan": "rebalancer.core.plan",
    "PlanStatus": "rebalancer.core.explain",
    "Pod": "rebalancer.core.model",
    "Policy": "rebalancer.core.policy",
    "RebalancerError": "rebalancer.core.errors",
    "Rejected": "rebalancer.core.convert.builder",
    "Skip": "rebalancer.core.plan",
    "SkipCode": "rebalancer.core.plan",
    "SkipReason": "rebalancer.core.plan",
    "Snapshot": "rebalancer.core.model",
    "SnapshotBuilder": "rebalancer.core.convert",
    "SpreadConstraint": "rebalancer.core.model",
    "Steering": "rebalancer.core.steer",
    "TOPOLOGY_PLUGIN": "rebalancer.core.fromdescheduler",
    "Toleration": "rebalancer.core.model",
    "Unrepaired": "rebalancer.core.plan",
    "ViewKey": "rebalancer.core.ids",
    "ViewReport": "rebalancer.core.plan",
    "WIDER": "rebalancer.core.fromdescheduler",
    "budget": "rebalancer.core.budgets",
    "chart_values": "rebalancer.core.fromdescheduler",
    "controller_owner": "rebalancer.core.convert.meta",
    "convert_one": "rebalancer.core.convert",
    "describe": "rebalancer.core.schedule",
    "do_not_disrupt": "rebalancer.core.karpenter.marks",
    "do_not_disrupt_reason": "rebalancer.core.evictability",
    "epoch": "rebalancer.core.convert.meta",
    "eviction_grace": "rebalancer.core.grace",
    "explain": "rebalancer.core.explain",
    "field_writers": "rebalancer.core.karpenter.marks",
    "format_duration": "rebalancer.core.policy",
    "from_descheduler": "rebalancer.core.fromdescheduler",
    "from_descheduler_all": "rebalancer.core.fromdescheduler",
    "leaving_reason": "rebalancer.core.evictability",
    "new_pod": "rebalancer.core.model",
    "node": "rebalancer.core.convert.nodes",
    "node_reason": "rebalancer.core.evictability",
    "parse_duration": "rebalancer.core.policy",
    "pdb_from_api": "rebalancer.core.convert",
    "plan": "rebalancer.core.planner",
    "pod": "rebalancer.core.convert.pods",
    "pod_index": "rebalancer.core.explain",
    "pod_requests": "rebalancer.core.convert.requests",
    "policy_from_document": "rebalancer.core.policy",
    "policy_to_dict": "rebalancer.core.policy",
    "remembered_launches": "rebalancer.core.holds",
    "required_node_affinity": "rebalancer.core.convert.pods",
    "resource_claims": "rebalancer.core.convert.disruption",
    "restrict_to_namespace": "rebalancer.core.policy",
    "selector_matches": "rebalancer.core.selectors",
    "selector_string": "rebalancer.core.selectors",
    "server_version_item": "rebalancer.core.convert.serverversion",
    "show": "rebalancer.core.convert.checker",
    "spread_constraints": "rebalancer.core.convert.constraints",
    "tolerations": "rebalancer.core.convert.pods",
    "unwrap": "rebalancer.core.fromdescheduler",
    "window_state": "rebalancer.core.schedule",
    "workload_key": "rebalancer.core.plan",
}

__all__ = [
    "ANY_NODE",
    "API_VERSION",
    "AUTO_API",
    "AWAIT",
    "CAPACITY_WAYS",
    "COST_MARK_ANNOTATION",
    "DEFAULT_BACKOFF_SECONDS",
    "DELETION_COST_ANNOTATION",
    "DNS_SUBDOMAIN",
    "DO_NOT_DISRUPT_ANNOTATION",
    "EMPTY_NUMBER",
    "EVICTION_API",
    "EVICTION_REQUEST_API",
    "EVICT_ANNOTATION",
    "EXIT_BAD_INPUT",
    "EXIT_CLUSTER",
    "EXIT_EVICTIONS_FAILED",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "HEADER_KEYS",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "KIND",
    "KINDS",
    "MAX_PROBLEMS_SHOWN",
    "MIRROR_ANNOTATION",
    "NEVER",
    "NODEPOOL_LABEL",
    "NO_FEATURES",
    "PREFER_NO_EVICTION_ANNOTATION",
    "RESERVE",
    "RESERVE_CAPACITY_MODES",
    "THRASH_GUARD_SECONDS",
    "TOPOLOGY_PLUGIN",
    "WIDER",
    "ZONE_KEY",
    "Caches",
    "CapacityRules",
    "ChartValues",
    "Checker",
    "ConstraintExplanation",
    "CostChange",
    "DrainLedger",
    "Eviction",
    "Explanation",
    "Guard",
    "Hold",
    "HoldRules",
    "Imported",
    "InputError",
    "LabelSelector",
    "LoopMemory",
    "NamespaceScope",
    "NodeSelector",
    "Note",
    "OwnerRef",
    "Plan",
    "PlanStatus",
    "Pod",
    "Policy",
    "RebalancerError",
    "Refused",
    "Rejected",
    "Skip",
    "SkipCode",
    "SkipReason",
    "Snapshot",
    "SnapshotBuilder",
    "SpreadConstraint",
    "Steering",
    "Toleration",
    "Unrepaired",
    "ViewKey",
    "ViewReport",
    "budget",
    "chart_values",
    "controller_owner",
    "convert_one",
    "describe",
    "do_not_disrupt",
    "do_not_disrupt_reason",
    "epoch",
    "eviction_grace",
    "explain",
    "field_writers",
    "format_duration",
    "from_descheduler",
    "from_descheduler_all",
    "leaving_reason",
    "new_pod",
    "node",
    "node_reason",
    "parse_duration",
    "pdb_from_api",
    "pin_of",
    "plan",
    "pod",
    "pod_index",
    "pod_requests",
    "policy_from_document",
    "policy_to_dict",
    "refusal_key",
    "remembered_launches",
    "required_node_affinity",
    "resource_claims",
    "restrict_to_namespace",
    "selector_matches",
    "selector_string",
    "server_version_item",
    "show",
    "spread_constraints",
    "tolerations",
    "unwrap",
    "window_state",
    "workload_key",
]


def __getattr__(name: str) -> Any:
    """The name from its module, imported on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
