"""The churn trace on nodes Karpenter provides: ``python -m bench.churn --karpenter``.

Karpenter's kwok provider (``e2e/cluster/karpenter.py``, built by
``e2e/cluster/build-karpenter.sh``) runs beside the control plane as its own ServiceAccount, so
the audit log tells its evictions from the tools'. Each contestant gets three NodePools of its
own (one per zone, nodes labelled with the contestant's tag, which its pods select,
consolidation ``WhenEmptyOrUnderutilized`` after :data:`CONSOLIDATE_AFTER`, CPU limits from the
trace) and no node to start with: Karpenter launches the nodes for the initial replicas, for
every scale-up and for every replacement that fits no node; consolidation removes what
scale-downs leave idle; the trace's drift event changes one pool's template, and Karpenter
replaces each node of that pool.

Figures besides ``bench.churn``'s, each sample from a LIST of the contestant's nodes:

* nodes launched and removed during the replay, and node-minutes (nodes alive per sample);
* Karpenter's evictions in the contestant's namespace (audit log, its own user);
* fights: a node launched for one of the tool's replacements (the replacement, evicted before
  the node was created, is the first to be bound to it) and removed within
  :data:`bench.churn.THRASH_WINDOW`; and evictions by both sides of one workload's slot within
  the same window (the tool evicted a pod whose replacement Karpenter evicted, or the other way
  round); and of those, the fights before a drift: the tool's eviction came before the trace's
  drift event, its replacement's node was one of the drifted pool's older nodes, and Karpenter
  evicted the replacement in the drift (no tool could see those coming: at its eviction the
  pool had not changed);
* replacements never placed: a tool eviction whose replacement was still there, on no node, when
  the replay ended (one a scale-down removed before it was placed does not count);
* replica-seconds below: over the tool's evictions, the time from each eviction until its
  replacement was Ready (``bench.churn``'s unavailability windows, summed): a replacement that
  waits for a node Karpenter launches is below for the whole launch, one whose node was there
  before the eviction (capacity reserved first) only for its own start;
* replacements' Pending-seconds: over the tool's evictions, the time from each replacement's
  first sample until the first sample that saw it on a node (to the replay's end when none
  did), summed.

``python -m bench.churn --karpenter`` runs ``rebalancer run`` with the default policy
(``reserveCapacity: auto``); a variant with a policy file saying ``reserveCapacity: never``
(``--variant evictfirst='--policy FILE'``, see ``bench/README.md``) is the same tool evicting
first, for these two figures side by side.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.churn import (
    CONTESTANT_LABEL,
    SAMPLE_SECONDS,
    THRASH_WINDOW,
    TOOL_NAMESPACE,
    ZONE,
    Replay,
    Result,
    evictions_of,
    in_namespace,
    spread_of,
    tool_kubeconfig,
    tool_requests,
    user_of,
)
from bench.trace import DRIFT, Trace

ZONES = ("zone-a", "zone-b", "zone-c")
"""The zones of the kwok provider's instance types (``karpenter-instance-types.json``)."""
CONSOLIDATE_AFTER = "20s"
KARPENTER = "karpenter"
"""The ServiceAccount name Karpenter runs as (``churn-karpenter``): its user in the audit log."""
NODE_GONE_TIMEOUT = 180.0


def _stamp(ts: str | None) -> float | None:
    if not ts:
        return None
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class KarpenterReplay(Replay):
    """One contestant's NodePools (no node of its own), namespace, workloads and sampler."""

    def __init__(self, cp: Any, trace: Trace, contestant: str, *, speedup: float) -> None:
        super().__init__(cp, trace, contestant, speedup=speedup)
        self.nodes = {}  # every node of the contestant's pools seen so far -> its zone
        self.zones = list(ZONES[: trace.zones])
        # node -> [created, gone or None] (wall times)
        self.node_life: dict[str, list[float | None]] = {}
        self.node_count: list[tuple[float, int]] = []  # per sample: nodes alive
        self.first_node: dict[str, tuple[str, float]] = {}  # pod -> (its first node, when seen)
        self.t0: float | None = None
        self.drifts: list[tuple[float, str]] = []  # (wall time, zone) of each drift event

    def pool_name(self, zone: str) -> str:
        return f"{self.tag}-{zone}"

    def pools(self) -> list[dict[str, Any]]:
        from e2e.cluster.karpenter import node_pool  # noqa: PLC0415

        return [
            node_pool(
                zone,
                cpu_limit=str(cpu),
                consolidate_after=CONSOLIDATE_AFTER,
                name=self.pool_name(zone),
                labels={CONTESTANT_LABEL: self.tag},
                tainted=False,
            )
            for zone, cpu in zip(self.zones, self.trace.pool_cpu, strict=True)
        ]

    # -- setup -------------------------------------------------------------------------------
    def setup_nodes(self) -> None:
        self.cp.apply(self.pools())

    def cleanup(self) -> None:
        """The namespace, then the pools (Karpenter removes their nodes), waited for: the next
        run starts on a cluster without them."""
        cp = self.cp
        cp.kubectl("delete", "namespace", self.ns, "--wait=false", check=False)
        for zone in self.zones:
            cp.kubectl("delete", "nodepool", self.pool_name(zone), "--wait=false", check=False)
        deadline = time.time() + NODE_GONE_TIMEOUT
        while time.time() < deadline:
            left = cp.get_json("nodes", "-l", f"{CONTESTANT_LABEL}={self.tag}")["items"]
            if not left:
                return
            time.sleep(2.0)

    # -- the events ----------------------------------------------------------------------------
    def apply_event(self, kind: str, target: str, value: int) -> None:
        if kind != DRIFT:
            super().apply_event(kind, target, value)
            return
        # a changed template: every node of the pool drifts and Karpenter replaces it
        zone = self.zones[int(target.removeprefix("z"))]
        self.drifts.append((time.time(), zone))
        patch = {"spec": {"template": {"metadata": {"labels": {"bench.rebalancer/rev": "2"}}}}}
        self.cp.kubectl(
            "patch", "nodepool", self.pool_name(zone), "--type", "merge", "-p", json.dumps(patch),
            check=False,
        )  # fmt: skip

    # -- sampling ------------------------------------------------------------------------------
    def observe(self, kube: Any, at: float) -> None:
        """The contestant's nodes: when each was created and went (deletion requested, or gone
        from the LIST), and how many are alive now."""
        now = time.time()
        if self.t0 is None:
            self.t0 = now - at
        body = kube.request(
            "GET", "/api/v1/nodes", query=[("labelSelector", f"{CONTESTANT_LABEL}={self.tag}")]
        ).json()
        alive = 0
        names = set()
        for node in body.get("items") or ():
            meta = node.get("metadata") or {}
            name = meta.get("name", "")
            names.add(name)
            self.nodes.setdefault(name, (meta.get("labels") or {}).get(ZONE, ""))
            life = self.node_life.setdefault(
                name, [_stamp(meta.get("creationTimestamp")) or now, None]
            )
            gone = _stamp(meta.get("deletionTimestamp"))
            if gone is not None and life[1] is None:
                life[1] = gone
            if gone is None:
                alive += 1
        for name, life in self.node_life.items():
            if name not in names and life[1] is None:
                life[1] = now
        self.node_count.append((at, alive))
        # the pods' first nodes, from the previous sample's layout
        if self.layouts:
            _, placed = self.layouts[-1]
            for pods in placed.values():
                for pod, node in pods:
                    self.first_node.setdefault(pod, (node, now))

    # -- figures -------------------------------------------------------------------------------
    def score_more(
        self,
        result: Result,
        events: Sequence[dict[str, Any]],
        matched: Sequence[tuple[float, str, str, str | None]],
        mine: set[str],
    ) -> None:
        if self.layouts:  # the last sample's layout too
            _, placed = self.layouts[-1]
            for pods in placed.values():
                for pod, node in pods:
                    self.first_node.setdefault(pod, (node, time.time()))
        theirs = {
            pod
            for _, pod in evictions_of(
                tool_requests(in_namespace(events, self.ns), user_of(KARPENTER))
            )
        }
        start = self.t0 or 0.0
        last = max(self.last_seen.values(), default=0.0)
        result.karpenter = karpenter_figures(
            matched=matched,
            mine=mine,
            theirs=theirs,
            node_life=self.node_life,
            first_node={pod: node for pod, (node, _) in self.first_node.items()},
            node_count=self.node_count,
            start=start,
            at_end={pod for pod, at in self.last_seen.items() if at >= last},
            drifts=self.drifts,
            zone_of=self.nodes,
        )
        result.karpenter.update(
            repair_figures(
                matched=matched,
                mine=mine,
                windows=result.tool_windows,
                first_seen={pod: at for pod, (_, at) in self.first_seen.items()},
                bound_at={pod: at for pod, (_, at) in self.first_node.items()},
                end=last or time.time(),
            )
        )
        nodes = {pod: node for pod, (node, _) in self.first_node.items()}
        for line in fight_lines(
            matched, mine, theirs, nodes, start, drifts=self.drifts, zone_of=self.nodes,
            node_life=self.node_life,
        ):  # fmt: skip
            print(f"  {result.contestant}: fight: {line}", file=sys.stderr, flush=True)


def fight_lines(
    matched: Sequence[tuple[float, str, str, str | None]],
    mine: set[str],
    theirs: set[str],
    first_node: Mapping[str, str],
    start: float,
    *,
    drifts: Sequence[tuple[float, str]] = (),
    zone_of: Mapping[str, str] | None = None,
    node_life: Mapping[str, Sequence[float | None]] | None = None,
) -> list[str]:
    """Each eviction fight in words (which side evicted which pod, where, and when, from the
    replay's start), for the log: what the figure counts, to be looked into. A fight before a
    drift (:func:`before_drift`) says so."""
    side = {**dict.fromkeys(theirs, "Karpenter"), **dict.fromkeys(mine, "the tool")}
    lines = []
    for f in eviction_fights(
        matched, mine, theirs, first_node, drifts=drifts, zone_of=zone_of, node_life=node_life
    ):
        drift = f.drift
        lines.append(
            f"{side[f.pod]} evicted {f.pod} (on {first_node.get(f.pod, '?')}) at "
            f"{f.at - start:.0f}s; its replacement {f.replacement} (on "
            f"{first_node.get(f.replacement, '?')}) was evicted by {side[f.replacement]} at "
            f"{f.taken - start:.0f}s"
            + (f", before the drift of {drift[1]} at {drift[0] - start:.0f}s" if drift else "")
        )
    return lines


@dataclass(frozen=True, slots=True)
class Fight:
    """One eviction fight: ``pod`` evicted at ``at`` by one side, its ``replacement`` by the
    other at ``taken``; ``drift`` the drift ``(time, zone)`` it came before, when the tool
    began it (:func:`before_drift`)."""

    at: float
    pod: str
    replacement: str
    taken: float
    drift: tuple[float, str] | None


def eviction_fights(
    matched: Sequence[tuple[float, str, str, str | None]],
    mine: set[str],
    theirs: set[str],
    first_node: Mapping[str, str],
    *,
    drifts: Sequence[tuple[float, str]] = (),
    zone_of: Mapping[str, str] | None = None,
    node_life: Mapping[str, Sequence[float | None]] | None = None,
) -> list[Fight]:
    """The eviction fights, in time order: a pod one side (``mine``, the tool's; ``theirs``,
    Karpenter's) evicted whose replacement the other evicted within :data:`THRASH_WINDOW`."""
    evicted_at = {pod: at for at, pod, _, _ in matched}
    found = []
    for at, pod, _, repl in sorted(matched):
        if repl is None or repl not in evicted_at or evicted_at[repl] - at > THRASH_WINDOW:
            continue
        if not ((pod in mine and repl in theirs) or (pod in theirs and repl in mine)):
            continue
        taken = evicted_at[repl]
        drift = (
            before_drift(
                at, taken, first_node.get(repl), drifts=drifts, zone_of=zone_of,
                node_life=node_life,
            )
            if pod in mine
            else None
        )  # fmt: skip
        found.append(Fight(at, pod, repl, taken, drift))
    return found


def before_drift(
    evicted: float,
    taken: float,
    node: str | None,
    *,
    drifts: Sequence[tuple[float, str]],
    zone_of: Mapping[str, str] | None,
    node_life: Mapping[str, Sequence[float | None]] | None,
) -> tuple[float, str] | None:
    """The drift ``(time, zone)`` that explains a fight the tool began: its eviction at
    ``evicted`` came before the drift, its replacement's ``node`` is in the drift's zone and
    was created before it (one of the pool's older nodes), and Karpenter took the replacement
    at ``taken``, after the drift. None when no drift does."""
    if node is None or zone_of is None or node_life is None:
        return None
    created = (node_life.get(node) or (None,))[0]
    for at, zone in drifts:
        if (
            evicted < at <= taken
            and zone_of.get(node) == zone
            and created is not None
            and created < at
        ):
            return at, zone
    return None


def karpenter_figures(
    *,
    matched: Sequence[tuple[float, str, str, str | None]],
    mine: set[str],
    theirs: set[str],
    node_life: Mapping[str, Sequence[float | None]],
    first_node: Mapping[str, str],
    node_count: Sequence[tuple[float, int]],
    start: float,
    at_end: set[str],
    drifts: Sequence[tuple[float, str]] = (),
    zone_of: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """The figures of one replay beside Karpenter (module docstring), from the matched
    evictions (``(time, pod, workload, replacement)``, every side's), the pods the tool
    (``mine``) and Karpenter (``theirs``) evicted, each node's ``[created, gone]``, each pod's
    first node, the nodes alive per sample, the replay's ``start`` (wall time) and the pods
    its last sample listed (``at_end``)."""
    launched = {n for n, (c, _) in node_life.items() if c is not None and c >= start}
    removed = {n for n, (_, g) in node_life.items() if g is not None and g >= start}
    # a node launched for a replacement of the tool's: the replacement was the first pod bound
    # to it and its eviction came before the node
    first_on: dict[str, str] = {}
    for at, pod, _, repl in sorted(matched):
        if pod in mine and repl is not None and repl in first_node:
            node = first_node[repl]
            created = node_life.get(node, (None, None))[0]
            if node in launched and created is not None and at <= created:
                first_on.setdefault(node, repl)
    node_fights = sum(
        1
        for node in first_on
        if (gone := node_life[node][1]) is not None
        and (created := node_life[node][0]) is not None
        and gone - created <= THRASH_WINDOW
    )
    fights = eviction_fights(
        matched, mine, theirs, first_node, drifts=drifts, zone_of=zone_of, node_life=node_life
    )
    never_placed = sum(
        1
        for _, pod, _, repl in matched
        if pod in mine and repl is not None and repl in at_end and repl not in first_node
    )
    return {
        "karpenter_evictions": len(theirs),
        "nodes_launched": len(launched),
        "nodes_removed": len(removed),
        "node_minutes": round(sum(n for _, n in node_count) * SAMPLE_SECONDS / 60, 1),
        "most_nodes": max((n for _, n in node_count), default=0),
        "node_fights": node_fights,
        "eviction_fights": len(fights),
        "fights_before_drift": sum(f.drift is not None for f in fights),
        "never_placed": never_placed,
    }


def repair_figures(
    *,
    matched: Sequence[tuple[float, str, str, str | None]],
    mine: set[str],
    windows: Mapping[str, Sequence[tuple[float, float, str]]],
    first_seen: Mapping[str, float],
    bound_at: Mapping[str, float],
    end: float,
) -> dict[str, float]:
    """The two figures of a repair's cost (module docstring): ``replica_seconds_below``, the
    summed length of the tool's eviction ``windows`` (per workload, ``(from, to, pod)``: the
    pod evicted until its replacement was Ready); ``replacement_pending_seconds``, for each of
    the tool's evictions (``mine``) with a replacement in ``matched``, from when the
    replacement was first seen (``first_seen``, wall time) until it was first seen bound
    (``bound_at``), or ``end``, summed."""
    below = sum(stop - start for ws in windows.values() for start, stop, pod in ws if pod in mine)
    pending = 0.0
    for _, pod, _, repl in matched:
        if pod not in mine or repl is None or repl not in first_seen:
            continue
        pending += max(0.0, bound_at.get(repl, end) - first_seen[repl])
    return {
        "replica_seconds_below": round(below, 1),
        "replacement_pending_seconds": round(pending, 1),
    }


def karpenter_user_kubeconfig(cp: Any) -> Path:
    """Karpenter's own credentials: the ServiceAccount ``churn-karpenter`` (cluster-admin)."""
    cp.kubectl("create", "namespace", TOOL_NAMESPACE, check=False)
    return tool_kubeconfig(cp, KARPENTER)


def start_karpenter(cp: Any) -> Any:
    """Karpenter's kwok provider beside ``cp`` with no NodePool of its own (each replay makes
    its pools), built first if it is not (about 8 minutes cold)."""
    from e2e.cluster.karpenter import Karpenter, karpenter_dir  # noqa: PLC0415

    directory = karpenter_dir(build=True)
    if directory is None:
        raise SystemExit("bench.churn --karpenter: Karpenter's kwok provider did not build")
    k = Karpenter(directory, cp, zones=(), kubeconfig=karpenter_user_kubeconfig(cp))
    try:
        k.start()
    except BaseException:
        print(k.diagnostics())
        k.stop()
        raise
    return k


COLUMNS = (
    ("skew-seconds", lambda r: r.skew_seconds),
    ("evictions", lambda r: r.evictions),
    ("Karpenter's evictions", lambda r: (r.karpenter or {}).get("karpenter_evictions", 0)),
    ("nodes launched", lambda r: (r.karpenter or {}).get("nodes_launched", 0)),
    ("nodes removed", lambda r: (r.karpenter or {}).get("nodes_removed", 0)),
    ("node-minutes", lambda r: (r.karpenter or {}).get("node_minutes", 0)),
    ("pending-pod-seconds", lambda r: r.pending_pod_seconds),
    ("fights: nodes", lambda r: (r.karpenter or {}).get("node_fights", 0)),
    ("fights: evictions", lambda r: (r.karpenter or {}).get("eviction_fights", 0)),
    ("of which before a drift", lambda r: (r.karpenter or {}).get("fights_before_drift", 0)),
    ("replacements never placed", lambda r: (r.karpenter or {}).get("never_placed", 0)),
    ("replica-seconds below", lambda r: (r.karpenter or {}).get("replica_seconds_below", 0)),
    (
        "replacements' Pending-seconds",
        lambda r: (r.karpenter or {}).get("replacement_pending_seconds", 0),
    ),
    ("429s", lambda r: r.http_429),
    ("DELETEs", lambda r: r.deletes),
    ("beyond a PDB", lambda r: int(r.beyond_pdb)),
)


def name_of(r: Result) -> str:
    return r.contestant


def karpenter_table(rows: Sequence[Result], run: int | None = None) -> str:
    head = ["contestant"] + (["run"] if run is not None else []) + [c for c, _ in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        if r.skipped:
            continue
        cells = [name_of(r)] + ([str(run)] if run is not None else [])
        cells += [f"{get(r):g}" for _, get in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def karpenter_summary(runs: Sequence[Sequence[Result]]) -> str:
    """Median [min-max] of every column over the runs, per contestant."""
    names = [r.contestant for r in runs[0] if not r.skipped]
    head = ["contestant", "runs"] + [c for c, _ in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in names:
        rs = [r for rows in runs for r in rows if r.contestant == name and not r.skipped]
        cells = [name, str(len(rs))]
        cells += [spread_of([float(get(r)) for r in rs]) for _, get in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def medians(runs: Sequence[Sequence[Result]], name: str) -> dict[str, float]:
    """The median of each column for one contestant (for the targets)."""
    rs = [r for rows in runs for r in rows if r.contestant == name and not r.skipped]
    return {c: statistics.median(float(get(r)) for r in rs) for c, get in COLUMNS} if rs else {}
