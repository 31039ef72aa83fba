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
   Karpenter at the last few CPUs, never the other way round. Within one plan the nodes its
   waiting replacements imply spend the limits too (:class:`PoolPlan`).

Worked example: pools ``a`` (zone In [zone-a, zone-b], taint ``gpu=true:NoSchedule``, limits
cpu 8, holding 7.5) and ``c`` (zone In [zone-c]); a pod requesting 1 CPU with no toleration:
``a`` is refused for its taint; tolerating it, ``a`` is refused at its cpu limit (7.5 + 1 > 8);
``c`` can add a node in zone-c and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rebalancer.core.karpenter.marks import NODEPOOL_LABEL
from rebalancer.core.model import (
    HOSTNAME_KEY,
    ZONE_KEY,
    Node,
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


def _wanted(resource: str, pod: Pod) -> int:
    """What a new node for ``pod`` adds at least to a pool's use of ``resource``."""
    return 1 if resource == "nodes" else pod.requests.get(resource, 0)


def _over_limit(pool: NodePool, pod: Pod, spent: Mapping[str, int] | None = None) -> Refusal | None:
    """The first resource (by name) whose limit a new node for ``pod`` would pass: what the
    pool's nodes hold (``used``), plus what the nodes a plan already waits for spend
    (``spent``), plus the pod's request."""
    for resource, limit in sorted(pool.limits.items()):
        used = pool.used.get(resource, 0)
        more = spent.get(resource, 0) if spent else 0
        wanted = _wanted(resource, pod)
        if used + more + wanted > limit:
            planned = f", {more} more by the nodes this plan waits for" if more else ""
            return Refusal(
                f"at their {resource} limit",
                f"at its {resource} limit ({used} of {limit} used{planned}, "
                f"the pod needs {wanted})",
            )
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one pool cannot add a node for a pod in a domain: ``kind`` is what refusals are
    counted by in a reason (``with a taint the pod does not tolerate``), ``detail`` the whole
    of it (``the pod does not tolerate its taint gpu=true:NoSchedule``)."""

    kind: str
    detail: str


_NOT_READY: Final = Refusal("not Ready", "not Ready")
_NO_MATCH: Final = Refusal(
    "whose nodes do not match the pod's node selector or affinity",
    "its nodes do not match the pod's node selector or affinity",
)


def _early_refusal(pool: NodePool, pod: Pod) -> Refusal | None:
    """The refusals that hold in every domain whatever the topology key: readiness, taints."""
    if not pool.ready:
        return _NOT_READY
    taint = untolerated_taint(pod.tolerations, pool.taints, FILTER_EFFECTS)
    if taint is not None:
        return Refusal(
            "with a taint the pod does not tolerate",
            f"the pod does not tolerate its taint {taint.key}={taint.value}:{taint.effect}",
        )
    return None


def _place_refusal(pool: NodePool, pod: Pod, key: str, domain: str) -> Refusal | None:
    """The refusals after readiness and taints, before the limits: the domain, the labels."""
    if key != HOSTNAME_KEY and not _values(pool, key, {}).admits(domain):
        return Refusal(
            "whose requirements rule the domain out", f"its nodes cannot be in {key}={domain}"
        )
    fixed = {} if key == HOSTNAME_KEY else {key: domain}
    if not _labels_ok(pool, pod, fixed):
        return _NO_MATCH
    return None


def _late_refusal(pool: NodePool, pod: Pod, key: str, domain: str) -> Refusal | None:
    """The refusals after readiness and taints: the domain, the pod's labels, the limits."""
    return _place_refusal(pool, pod, key, domain) or _over_limit(pool, pod)


def refusal(pool: NodePool, pod: Pod, key: str, domain: str) -> Refusal | None:
    """Why ``pool`` cannot add a node for ``pod`` in ``domain`` of topology key ``key``
    (None: it can). With the hostname key the domain does not matter (a new node has a new
    name)."""
    return _early_refusal(pool, pod) or _late_refusal(pool, pod, key, domain)


def pool_refusal(pool: NodePool, pod: Pod, key: str, domain: str) -> str | None:
    """The whole text of :func:`refusal` (None: the pool can add a node there)."""
    found = refusal(pool, pod, key, domain)
    return None if found is None else found.detail


# --- bounded reasons -------------------------------------------------------------------------

MAX_EXAMPLES: Final = 3
"""A reason names at most this many pools of one kind of refusal (or domains of one verdict),
then ``...``; with at most this many refusing pools it gives each pool's whole refusal."""
MAX_KINDS: Final = 4
"""A reason counts at most this many kinds of refusal by name; the others are summed."""
MAX_GROUPS: Final = 3
"""A reason over more than :data:`MAX_EXAMPLES` domains names at most this many verdicts."""


def _names(names: Sequence[str], total: int) -> str:
    return ", ".join(names) + (", ..." if total > len(names) else "")


class _Tally:
    """Refusals counted by kind as pools are judged in name order: for each kind its count and
    first :data:`MAX_EXAMPLES` pools, and the first refusals in full (one more than a reason
    gives whole, to know when it cannot). Its size does not grow with the pools."""

    __slots__ = ("count", "first", "kinds")

    def __init__(self) -> None:
        self.count = 0
        self.kinds: dict[str, tuple[int, list[str]]] = {}
        self.first: list[tuple[str, str]] = []

    def add(self, name: str, why: Refusal) -> None:
        self.count += 1
        count, examples = self.kinds.get(why.kind, (0, []))
        if len(examples) < MAX_EXAMPLES:
            examples.append(name)
        self.kinds[why.kind] = (count + 1, examples)
        if len(self.first) <= MAX_EXAMPLES:
            self.first.append((name, why.detail))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the NodePools say for pods of one shape in one domain: the first pool (by name)
    that can add a node there (``pool``), else why none can, in bounded text (``why``)."""

    pool: str  # "": none can
    why: str = ""

    def describe(self, where: str) -> str:
        """``NodePool pb can add a node in zone-b`` or ``no NodePool can add a node in zone-c
        for this pod (pb: its nodes cannot be in topology.kubernetes.io/zone=zone-c)``."""
        if self.pool:
            return f"NodePool {self.pool} can add a node in {where}"
        return f"no NodePool can add a node in {where} for this pod" + (
            f" ({self.why})" if self.why else ""
        )


def _refused(early: _Tally, late: _Tally) -> Verdict:
    """The verdict where every pool refused: early refusals (readiness, taints) and late ones
    (domain, labels, limits) are of different kinds, so their counts add up kind by kind."""
    total = early.count + late.count
    if total <= MAX_EXAMPLES:  # few pools: each one's whole refusal, by name
        first = sorted(early.first + late.first)
        return Verdict("", "; ".join(f"{name}: {detail}" for name, detail in first))
    kinds = sorted(
        (*early.kinds.items(), *late.kinds.items()), key=lambda item: (-item[1][0], item[0])
    )
    parts = [
        f"{count} {kind} ({_names(examples, count)})"
        for kind, (count, examples) in kinds[:MAX_KINDS]
    ]
    rest = kinds[MAX_KINDS:]
    if rest:
        others = sum(count for _, (count, _) in rest)
        parts.append(f"{others} for {len(rest)} other reason" + ("s" if len(rest) > 1 else ""))
    return Verdict("", f"{total} NodePools refuse: " + ", ".join(parts))


@dataclass(frozen=True, slots=True)
class _Shape:
    """The pools, judged for pods of one shape before any domain: those that stay refused
    everywhere (counted) and those a domain may admit (``open``, by name)."""

    early: _Tally
    open: tuple[NodePool, ...]


def _shape_of(pod: Pod) -> tuple[object, ...]:
    """The fields of a pod a pool's verdict depends on: pods equal in these share verdicts."""
    return (
        pod.tolerations,
        tuple(sorted(pod.node_selector.items())),
        pod.required_affinity,
        tuple(sorted(pod.requests.items())),
    )


class PoolJudge:
    """The snapshot's NodePools, and what they say for each pod shape in each domain.

    A verdict is worked out once per (pod shape, topology key, domain): readiness and taints
    once per shape for every pool, then the domain, labels and limits for the pools left; the
    hostname key's verdict is the same for every node. The refusals are counted, never written
    out one by one, so a verdict's cost is linear in the pools and its text is bounded.
    """

    def __init__(self, pools: Iterable[NodePool]) -> None:
        self.pools = tuple(sorted(pools, key=lambda p: p.name))
        self._shapes: dict[tuple[object, ...], _Shape] = {}
        self._verdicts: dict[tuple[tuple[object, ...], str, str], Verdict] = {}

    def __bool__(self) -> bool:
        return bool(self.pools)

    def verdict(self, pod: Pod, key: str, domain: str) -> Verdict:
        """The first pool (by name) that can add a node for ``pod`` in ``domain`` of ``key``,
        else why none can."""
        return self._verdict(_shape_of(pod), pod, key, domain)

    def _verdict(self, shape_key: tuple[object, ...], pod: Pod, key: str, domain: str) -> Verdict:
        if key == HOSTNAME_KEY:
            domain = ""  # a new node's name is new: the same verdict for every node
        found = self._verdicts.get((shape_key, key, domain))
        if found is not None:
            return found
        shape = self.shape(shape_key, pod)
        late = _Tally()
        for pool in shape.open:
            why = _late_refusal(pool, pod, key, domain)
            if why is None:
                found = Verdict(pool.name)
                break
            late.add(pool.name, why)
        else:
            found = _refused(shape.early, late)
        self._verdicts[shape_key, key, domain] = found
        return found

    def shape(self, shape_key: tuple[object, ...], pod: Pod) -> _Shape:
        """The pools judged for pods of ``pod``'s shape (``shape_key``) before any domain."""
        shape = self._shapes.get(shape_key)
        if shape is None:
            early = _Tally()
            still: list[NodePool] = []
            for pool in self.pools:
                why = _early_refusal(pool, pod)
                if why is None:
                    still.append(pool)
                else:
                    early.add(pool.name, why)
            shape = self._shapes[shape_key] = _Shape(early, tuple(still))
        return shape

    def note(self, pod: Pod, where: tuple[str, Sequence[str]], plan: PoolPlan | None = None) -> str:
        """What a no-fit reason adds where NodePools are known: for the domains the
        replacement's spread allows (``where``: its topology key and those domains, in order),
        which pool can add a node there, else why none can (``; NodePool default can add a node
        in zone-b``), with what ``plan`` waits for spent. Up to :data:`MAX_EXAMPLES` domains,
        one clause each; beyond, the domains sharing a verdict are named together, at most
        :data:`MAX_GROUPS` verdicts."""
        key, domains = where
        if not domains:
            return ""
        shape = _shape_of(pod)

        def judged(d: str) -> Verdict:
            if plan is not None and plan.active:
                return plan.verdict(pod, key, d)
            return self._verdict(shape, pod, key, d)

        if len(domains) <= MAX_EXAMPLES:
            return "".join(f"; {judged(d).describe(d)}" for d in domains)
        groups: dict[Verdict, list[str]] = {}
        for d in domains:
            groups.setdefault(judged(d), []).append(d)
        out = ""
        for found, members in list(groups.items())[:MAX_GROUPS]:
            where_text = (
                members[0]
                if len(members) == 1
                else f"{len(members)} domains of {key} "
                f"({_names(members[:MAX_EXAMPLES], len(members))})"
            )
            out += f"; {found.describe(where_text)}"
        rest = list(groups.items())[MAX_GROUPS:]
        if rest:
            can = sum(len(m) for v, m in rest if v.pool)
            cannot = sum(len(m) for v, m in rest if not v.pool)
            parts = [f"{can} where a NodePool can add a node"] if can else []
            parts += [f"{cannot} where none can"] if cannot else []
            out += f"; {can + cannot} more domains of {key} ({', '.join(parts)})"
        return out


# --- the nodes one plan waits for ------------------------------------------------------------


def pool_node_sizes(nodes: Iterable[Node]) -> dict[str, Mapping[str, int]]:
    """Per NodePool, the allocatable of its largest node (most CPU, then memory, then by its
    resources), read from the nodes labelled ``karpenter.sh/nodepool``: the size
    :class:`PoolPlan` takes a new node of the pool to be."""
    best: dict[str, Mapping[str, int]] = {}

    def rank(alloc: Mapping[str, int]) -> tuple[int, int, tuple[tuple[str, int], ...]]:
        return alloc.get("cpu", 0), alloc.get("memory", 0), tuple(sorted(alloc.items()))

    for node in nodes:
        name = node.labels.get(NODEPOOL_LABEL)
        if name and (name not in best or rank(node.allocatable) > rank(best[name])):
            best[name] = node.allocatable
    return best


@dataclass(slots=True, eq=False)  # each planned node is itself, whatever it holds
class _Planned:
    """One node a pool is planned to add in a domain: the room left on it (``free``, per
    resource its size names; ``pods`` counted one a pod), what opening it spent of the pool's
    limits (``cost``) and the replacements planned onto it (``pods``)."""

    free: dict[str, int]
    cost: dict[str, int]
    pods: set[int]


_Bin = tuple[str, str, str]  # pool, topology key, domain ("" under the hostname key)


class PoolPlan:
    """The nodes the waiting replacements of one plan imply, and the pool limits they spend.

    A replacement that waits for a node from pool ``p`` in domain ``d`` joins the first node
    planned for ``p`` in ``d`` with room for it; else ``p`` is planned to add one more
    node there, which spends the pool's limits: a new node is taken to be the size of the
    pool's largest node (:func:`pool_node_sizes`; a pool without nodes: the size of the node
    the replacement was planned beside), at least what the pod requests, and at most what the
    limits leave (Karpenter picks an instance type within them). Resources the size does not
    name are spent by each pod's request; ``nodes`` by one a node. A later replacement is then
    judged against the limits less what the plan spent, and a planned node with room counts as
    room, whatever the limits.

    Worked example: pool ``p`` (cpu limit 8, none used), nodes of 4 CPUs, replacements of 1 CPU
    waiting in one zone: the first opens a node (4 CPUs spent), the next three join it, the
    fifth opens a second (8 spent), three more join; the ninth is refused at the cpu limit
    (``0 of 8 used, 8 more by the nodes this plan waits for, the pod needs 1``). Taking a
    replacement back frees its room, and a planned node left empty gives back what it spent.
    """

    def __init__(self, judge: PoolJudge, sizes: Mapping[str, Mapping[str, int]]) -> None:
        self.judge = judge
        self.sizes = sizes
        self.spent: dict[str, dict[str, int]] = {}
        """Per pool, what its planned nodes spend of its limits (pools with none absent)."""
        self._by_name = {p.name: p for p in judge.pools}
        self._nodes: dict[_Bin, list[_Planned]] = {}
        self._of: dict[int, tuple[_Bin, _Planned]] = {}
        self._cache: dict[tuple[tuple[object, ...], str, str], Verdict] = {}
        self._full: dict[_Bin, dict[tuple[tuple[str, int], ...], int]] = {}
        """Per domain's planned nodes and pod requests, how many of the first nodes have no
        room for such a pod: room only shrinks until a replacement is taken back, which
        forgets these counts. First fit then costs one pass over the nodes, not one a pod."""

    @property
    def active(self) -> bool:
        """Some replacement of the plan waits for a planned node."""
        return bool(self._of)

    def where(self, i: int) -> tuple[str, str, str] | None:
        """The pool, topology key and domain pod ``i``'s replacement waits in ("" domain under
        the hostname key: anywhere); None when it waits for no planned node."""
        found = self._of.get(i)
        return found[0] if found is not None else None

    def planned_nodes(self) -> dict[str, int]:
        """How many new nodes the plan implies, per pool (pools with none absent)."""
        out: dict[str, int] = {}
        for (pool, _, _), nodes in self._nodes.items():
            out[pool] = out.get(pool, 0) + len(nodes)
        return out

    def verdict(self, pod: Pod, key: str, domain: str) -> Verdict:
        """As :meth:`PoolJudge.verdict`, with the plan's planned nodes and spent limits."""
        base = self.judge.verdict(pod, key, domain)
        if not self._of:
            return base
        busy = set(self.spent).union(where[0] for where in self._nodes)
        if base.pool and not any(name <= base.pool for name in busy):
            return base  # no pool up to the one chosen as read has planned or spent anything
        if key == HOSTNAME_KEY:
            domain = ""
        shape_key = _shape_of(pod)
        cache_key = (shape_key, key, domain)
        found = self._cache.get(cache_key)
        if found is None:
            shape = self.judge.shape(shape_key, pod)
            found = self._cache[cache_key] = self._judge(shape, pod, key, domain)
        return found

    def _judge(self, shape: _Shape, pod: Pod, key: str, domain: str) -> Verdict:
        """As :meth:`PoolJudge.verdict` for the pools readiness and taints leave
        (``shape.open``), each judged with the plan's planned nodes and spent limits."""
        tally = _Tally()
        for pool in shape.open:
            why = _place_refusal(pool, pod, key, domain)
            if why is None and self._room(pool, (pool.name, key, domain), pod) is None:
                why = _over_limit(pool, pod, self.spent.get(pool.name))
            if why is None:
                return Verdict(pool.name)
            tally.add(pool.name, why)
        return _refused(shape.early, tally)

    def reserve(self, i: int, pod: Pod, where: tuple[str, str], beside: Mapping[str, int]) -> str:
        """Plan pod ``i``'s replacement onto a node the first pool able to (by name) adds in
        ``where`` (topology key, domain), joining a planned node with room or planning one
        more; ``beside``: the allocatable of the node it was planned beside. Returns the pool
        ("": none can, nothing planned)."""
        key, domain = where
        if key == HOSTNAME_KEY:
            domain = ""
        name = self.verdict(pod, key, domain).pool
        if not name:
            return ""
        pool = self._by_name[name]
        nodes = self._nodes.setdefault((name, key, domain), [])
        node = self._room(pool, (name, key, domain), pod)
        if node is None:
            node = self._open(pool, pod, self.sizes.get(name) or beside)
            nodes.append(node)
        self._take(pool, node, pod, 1)
        node.pods.add(i)
        self._of[i] = ((name, key, domain), node)
        self._cache.clear()
        return name

    def release(self, i: int, pod: Pod) -> None:
        """Take pod ``i``'s replacement back off its planned node (if it is on one); a planned
        node left empty is no longer planned and gives back what it spent."""
        found = self._of.pop(i, None)
        if found is None:
            return
        where, node = found
        pool = self._by_name[where[0]]
        self._take(pool, node, pod, -1)
        node.pods.discard(i)
        if not node.pods:
            if node.cost:
                spent = self.spent[pool.name]
                for resource, amount in node.cost.items():
                    spent[resource] -= amount
                    if not spent[resource]:
                        del spent[resource]
                if not spent:
                    del self.spent[pool.name]
            nodes = self._nodes[where]
            nodes.remove(node)
            if not nodes:
                del self._nodes[where]
        self._cache.clear()
        self._full.clear()

    def _room(self, pool: NodePool, where: _Bin, pod: Pod) -> _Planned | None:
        """The first node planned in ``where`` with room for ``pod``, within what the pool's
        limits leave of the resources its size does not name; None for none."""
        nodes = self._nodes.get(where)
        if not nodes:
            return None
        requests = tuple(sorted(pod.requests.items()))
        full = self._full.setdefault(where, {})
        for at in range(full.get(requests, 0), len(nodes)):
            if self._fits(pool, nodes[at], pod):
                full[requests] = at
                return nodes[at]
        full[requests] = len(nodes)
        return None

    def _fits(self, pool: NodePool, node: _Planned, pod: Pod) -> bool:
        if node.free.get("pods", 1) < 1:
            return False
        if any(node.free.get(r, amount) < amount for r, amount in pod.requests.items()):
            return False
        spent = self.spent.get(pool.name, {})
        return all(
            pool.used.get(r, 0) + spent.get(r, 0) + pod.requests.get(r, 0) <= limit
            for r, limit in pool.limits.items()
            if r != "nodes" and r not in node.free
        )

    def _open(self, pool: NodePool, pod: Pod, size: Mapping[str, int]) -> _Planned:
        spent = self.spent.setdefault(pool.name, {})
        free: dict[str, int] = {}
        cost: dict[str, int] = {"nodes": 1} if "nodes" in pool.limits else {}
        for resource, amount in size.items():
            room = max(amount, 1 if resource == "pods" else pod.requests.get(resource, 0))
            limit = pool.limits.get(resource)
            if limit is not None:
                left = limit - pool.used.get(resource, 0) - spent.get(resource, 0)
                room = cost[resource] = max(0, min(room, left))
            free[resource] = room
        for resource, amount in cost.items():
            spent[resource] = spent.get(resource, 0) + amount
        return _Planned(free, cost, set())

    def _take(self, pool: NodePool, node: _Planned, pod: Pod, sign: int) -> None:
        """Charge (``sign`` 1) or free (-1) the pod's requests on the planned node, and on the
        pool's limits for the resources the node's size does not name."""
        if "pods" in node.free:
            node.free["pods"] -= sign
        spent = self.spent.setdefault(pool.name, {})
        for resource, amount in pod.requests.items():
            if resource in node.free:
                node.free[resource] -= sign * amount
            elif resource in pool.limits and resource != "nodes" and amount:
                spent[resource] = spent.get(resource, 0) + sign * amount
                if not spent[resource]:
                    del spent[resource]
        if not spent:
            del self.spent[pool.name]


# --- the whole detail, for explain -----------------------------------------------------------


ANY_NODE: Final = "*"
"""The domain of a :class:`PoolDetail` whose verdict holds on any node (the hostname key, or
no domain known); no label value is ``*``."""


@dataclass(frozen=True, slots=True)
class PoolDetail:
    """One NodePool and a pod: per domain, None where it can add a node for the pod, else the
    whole of its refusal (:func:`refusal`)."""

    name: str
    domains: tuple[tuple[str, str | None], ...]


def pool_details(
    pools: Iterable[NodePool], pod: Pod, key: str, domains: Sequence[str]
) -> tuple[PoolDetail, ...]:
    """Every pool (by name) and, in each of ``domains`` of ``key``, whether it can add a node
    for ``pod`` and why not: the detail a no-fit reason counts. With the hostname key (or no
    domains) one verdict for any node, under the domain :data:`ANY_NODE`."""
    anywhere = key == HOSTNAME_KEY or not domains
    out = []
    for pool in sorted(pools, key=lambda p: p.name):
        verdicts: tuple[tuple[str, str | None], ...]
        if anywhere:
            verdicts = ((ANY_NODE, pool_refusal(pool, pod, HOSTNAME_KEY, "")),)
        else:
            early = _early_refusal(pool, pod)
            verdicts = tuple(
                (d, early.detail if early is not None else pool_refusal(pool, pod, key, d))
                for d in domains
            )
        out.append(PoolDetail(pool.name, verdicts))
    return tuple(out)
