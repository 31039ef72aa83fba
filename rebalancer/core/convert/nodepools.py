"""Karpenter NodePools (``karpenter.sh/v1``): requirements, template labels and taints, limits
and the resources its nodes hold now."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalancer.core.convert.memo import Caches
from rebalancer.core.convert.meta import identify
from rebalancer.core.convert.nodes import _taint as taint  # the Node converter's own rule
from rebalancer.core.convert.nodes import pool_hash, ready_condition
from rebalancer.core.convert.quantities import resource_list, to_units
from rebalancer.core.convert.selectors import _node_requirement
from rebalancer.core.model import NodePool

__all__ = ["node_pool"]


def node_pool(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> NodePool:
    """A NodePool; problems are appended to ``problems``."""
    chk, meta, _, name = identify(obj, "NodePool", problems, namespaced=False)
    spec = chk.obj(obj, "spec", "")
    template = chk.obj(spec, "template", "spec")
    template_meta = chk.obj(template, "metadata", "spec.template")
    template_spec = chk.obj(template, "spec", "spec.template")
    status = chk.obj(obj, "status", "")
    where = "spec.template.spec"
    requirements = []
    for i, raw in enumerate(chk.seq(template_spec, "requirements", where)):
        found = _node_requirement(chk, raw, f"{where}.requirements[{i}]", field=False)
        if found is not None:
            requirements.append(found)
    return NodePool(
        name=name,
        requirements=tuple(requirements),
        labels=chk.string_map(template_meta, "labels", "spec.template.metadata"),
        taints=tuple(
            taint(chk, t, f"{where}.taints[{i}]")
            for i, t in enumerate(chk.seq(template_spec, "taints", where))
        ),
        limits=to_units(
            resource_list(chk, chk.obj(spec, "limits", "spec"), "spec.limits", caches.quantities)
        ),
        used=to_units(
            resource_list(
                chk, chk.obj(status, "resources", "status"), "status.resources", caches.quantities
            )
        ),
        ready=ready_condition(chk, status) != "False",  # a pool not yet reconciled has none
        template_hash=pool_hash(chk.string_map(meta, "annotations", "metadata")),
    )
