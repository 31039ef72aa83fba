"""Capacity that can be added: whether a Karpenter NodePool can launch a node for a pod in a
topology domain, within its limits (pure).

A pool can add a node for ``pod`` in domain ``d`` of topology key ``K`` when:

1. the pool is Ready (a Ready condition that is False says it cannot launch);
2. the pod tolerates the pool's taints (NoSchedule and NoExecute; its startupTaints go away
   and are not counted);
3. a node of the pool can carry ``K=d`` and every label the pod's ``nodeSelector`` and one of
   its required node affinity terms ask for. What a node of the pool can carry, per label key:
   the template's label (one value); else the values the pool's requirements allow (``In``
   lists them, ``NotIn`` takes some away, ``Exists`` allows any, ``DoesNotExist`` none); else,
   for the labels Karpenter sets itself from the instance type and offering (zone, region,
   architecture, OS, instance type, capacity type, hostname, nodepool), any value; else none;
4. its limits leave room: for each resource the pool limits, what its nodes hold now
   (``status.resources``) plus the pod's request stays within the limit (``nodes``: one node
   more). Karpenter counts the whole new node against the limit, and rebalancer does not know
   the instance types it would choose: a pool judged to have room may still be refused by
   Karpenter at the last few CPUs, never the other way round.

Worked example: pools ``a`` (zone In [zone-a, zone-b], taint ``gpu=true:NoSchedule``, limits
cpu 8, holding 7.5) and ``c`` (zone In [zone-c]); a pod requesting 1 CPU with no toleration:
``a`` is refused for its taint; tolerating it, ``a`` is refused at its cpu limit (7.5 + 1 > 8);
``c`` can add a node in zone-c and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rebalancer.core.model import (
    HOSTNAME_KEY,
    ZONE_KEY,
    NodePool,
    NodeSelectorRequirement,
    Pod,
)
from rebalancer.core.selectors import FILTER_EFFECTS, untolerated_taint

WELL_KNOWN: Final = frozenset(
    {
        ZONE_KEY,
        "topology.kubernetes.io/region",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/instance-type",
        "karpenter.sh/capacity-type",
        "karpenter.sh/nodepool",
        HOSTNAME_KEY,
    }
)
"""Labels Karpenter sets on a node from its instance type and offering, whatever the pool's
template says."""


@dataclass(frozen=True, slots=True)
class _Values:
    """The values a label key can take on a node of one pool: ``only`` (None: any value but
    ``excluded``); ``present`` False: the key is never set."""

    only: frozenset[str] | None
    excluded: frozenset[str] = frozenset()
    present: bool = True

    def admits(self, value: str) -> bool:
        if not self.present or value in self.excluded:
            return False
        return self.only is None or value in self.only

    def some(self, wanted: Iterable[str] | None = None, *, avoiding: Iterable[str] = ()) -> bool:
        """Some value it admits is in ``wanted`` (None: any) and not in ``avoiding``."""
        if not self.present:
            return False
        avoid = frozenset(avoiding) | self.excluded
        if wanted is not None:
            return any(self.admits(v) and v not in avoid for v in wanted)
        if self.only is None:
            return True
        return bool(self.only - avoid)


def _values(pool: NodePool, key: str, fixed: Mapping[str, str]) -> _Values:
    if key in fixed:
        return _Values(frozenset({fixed[key]}))
    if key in pool.labels:
        return _Values(frozenset({pool.labels[key]}))
    reqs = [r for r in pool.requirements if r.key == key]
    if not reqs:
        return _Values(None) if key in WELL_KNOWN else _Values(None, present=False)
    only: frozenset[str] | None = None
    excluded: set[str] = set()
    for r in reqs:
        if r.operator == "In":
            only = frozenset(r.values) if only is None else only & frozenset(r.values)
        elif r.operator == "NotIn":
            excluded.update(r.values)
        elif r.operator == "DoesNotExist":
            return _Values(None, present=False)
        # Exists, Gt, Lt: any value (Gt/Lt are not narrowed further here)
    return _Values(only, frozenset(excluded))


def _expression_ok(req: NodeSelectorRequirement, values: _Values) -> bool:
    op = req.operator
    if op == "In":
        return values.some(req.values)
    if op == "NotIn":
        return not values.present or values.some(avoiding=req.values)
    if op == "Exists":
        return values.some()
    if op == "DoesNotExist":
        return not values.present
    # Gt / Lt: a value that satisfies it may exist wherever some value does.
    return values.some()


def _labels_ok(pool: NodePool, pod: Pod, fixed: Mapping[str, str]) -> bool:
    for key, value in pod.node_selector.items():
        if not _values(pool, key, fixed).admits(value):
            return False
    affinity = pod.required_affinity
    if affinity is None:
        return True
    return any(
        (term.match_expressions or term.match_fields)
        and not term.match_fields  # a node's name is not known before it exists
        and all(_expression_ok(r, _values(pool, r.key, fixed)) for r in term.match_expressions)
        for term in affinity.terms
    )


def _over_limit(pool: NodePool, pod: Pod) -> str | None:
    for resource, limit in sorted(pool.limits.items()):
        used = pool.used.get(resource, 0)
        wanted = 1 if resource == "nodes" else pod.requests.get(resource, 0)
        if used + wanted > limit:
            return f"at its {resource} limit ({used} of {limit} used, the pod needs {wanted})"
    return None


def pool_refusal(pool: NodePool, pod: Pod, key: str, domain: str) -> str | None:
    """Why ``pool`` cannot add a node for ``pod`` in ``domain`` of topology key ``key``
    (None: it can)."""
    if not pool.ready:
        return "not Ready"
    taint = untolerated_taint(pod.tolerations, pool.taints, FILTER_EFFECTS)
    if taint is not None:
        return f"the pod does not tolerate its taint {taint.key}={taint.value}:{taint.effect}"
    if key != HOSTNAME_KEY and not _values(pool, key, {}).admits(domain):
        return f"its nodes cannot be in {key}={domain}"
    fixed = {} if key == HOSTNAME_KEY else {key: domain}
    if not _labels_ok(pool, pod, fixed):
        return "its nodes do not match the pod's node selector or affinity"
    return _over_limit(pool, pod)


@dataclass(frozen=True, slots=True)
class Addable:
    """Per domain, the first pool (by name) that can add a node there for the pod, and for the
    others why each pool cannot."""

    pools: Mapping[str, str]  # domain -> pool name
    refusals: Mapping[str, tuple[tuple[str, str], ...]]  # domain -> ((pool, why), ...)

    def describe(self, domain: str) -> str:
        """``NodePool default can add a node in zone-b`` or ``no NodePool can add a node in
        zone-c for this pod (default: at its cpu limit ...)``."""
        pool = self.pools.get(domain)
        if pool is not None:
            return f"NodePool {pool} can add a node in {domain}"
        why = "; ".join(f"{name}: {reason}" for name, reason in self.refusals.get(domain, ()))
        return f"no NodePool can add a node in {domain} for this pod" + (f" ({why})" if why else "")


def addable(pools: Sequence[NodePool], pod: Pod, key: str, domains: Iterable[str]) -> Addable:
    """For each of ``domains`` (values of topology key ``key``): which pool can add a node
    there for ``pod`` (the first by name), else why none can."""
    ordered = sorted(pools, key=lambda p: p.name)
    found: dict[str, str] = {}
    refusals: dict[str, tuple[tuple[str, str], ...]] = {}
    for domain in domains:
        why: list[tuple[str, str]] = []
        for pool in ordered:
            reason = pool_refusal(pool, pod, key, domain)
            if reason is None:
                found[domain] = pool.name
                break
            why.append((pool.name, reason))
        else:
            refusals[domain] = tuple(why)
    return Addable(found, refusals)


def pool_note(pools: Sequence[NodePool], pod: Pod, where: tuple[str, Sequence[str]]) -> str:
    """What a no-fit reason adds where NodePools are known: for the domains the replacement's
    spread allows (``where``: its topology key and those domains), which pool can add a node
    there, else why none can (``; NodePool default can add a node in zone-b``)."""
    key, domains = where
    if not domains:
        return ""
    found = addable(pools, pod, key, domains)
    return "".join(f"; {found.describe(d)}" for d in domains)
