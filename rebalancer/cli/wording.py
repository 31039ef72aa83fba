"""What a plan and a run say in words, the same in the table (:mod:`rebalancer.cli.render`)
and on the HTML page (:mod:`rebalancer.cli.htmlreport`): the plan at a glance, the run's
closing line, the order of views, domains and skip reasons."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from rebalancer.cluster.act.defaults import DEFAULT_MAX_WAVES
from rebalancer.core.api import Eviction, Hold, HoldRules, Plan, Skip, ViewReport, format_duration

if TYPE_CHECKING:
    from rebalancer.cluster.act.runner import RunReport

MIN_WIDTH: Final = 40
"""No table or paragraph is narrower, whatever the terminal."""
_KEEP: Final = "\u00a0"  # a space that textwrap does not break at; written as a space


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def ranked_domains(before: Mapping[str, int], after: Mapping[str, int] | None) -> list[str]:
    """Every domain of a view, most-populated first (before the plan), ties by name."""
    names = set(before) | set(after or {})
    return sorted(names, key=lambda d: (-before.get(d, 0), d))


def worst_first(plan: Plan) -> list[tuple[ViewReport, ViewReport | None]]:
    """The violated views with their state after the plan, the most above maxSkew first
    (then in the planner's order)."""
    after = {(v.key, v.min_domains): v for v in plan.after}
    pairs = [(v, after.get((v.key, v.min_domains))) for v in plan.violations]
    return sorted(pairs, key=lambda pair: -pair[0].excess)


def target_cell(eviction: Eviction) -> str:
    """``node (domain)`` of the expected replacement, or where it waits."""
    if eviction.target_node is None:
        return "pending (nodeFit: false)"
    if eviction.target_domain is None:
        return eviction.target_node
    return f"{eviction.target_node} ({eviction.target_domain})"


def skips_by_reason(skipped: Iterable[Skip]) -> list[tuple[str, list[Skip]]]:
    """(code, skips) pairs, the most common code first, ties by code."""
    groups: dict[str, list[Skip]] = {}
    for skip in skipped:
        groups.setdefault(skip.reason.code, []).append(skip)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


def held_summary(reasons: Iterable[Hold], *, pods: bool = False) -> str:
    """``pdb 3, has-pvc 2`` (with ``pods``: ``pdb (3 pods), has-pvc (2 pods)``): reason codes
    with their pods, the most pods first."""
    totals: dict[str, int] = {}
    for r in reasons:
        totals[r.code] = totals.get(r.code, 0) + r.pods
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    if pods:  # "(3 pods)" stays on one line when the paragraph is wrapped
        return ", ".join(
            f"{code}{_KEEP}({count}{_KEEP}pod{'' if count == 1 else 's'})" for code, count in ranked
        )
    return ", ".join(f"{code} {count}" for code, count in ranked)


def runs_needed(waves: int, max_waves: int = DEFAULT_MAX_WAVES) -> int:
    """Runs of ``run --max-waves max_waves`` that execute ``waves`` waves."""
    return -(-waves // max_waves)


def _head(plan: Plan) -> str:
    if not plan.evictions:
        return "No eviction"
    count = plural(len(plan.evictions), "eviction")
    if plan.minimal:
        return f"{count}, proven minimal"
    return f"{count}, not proven minimal (lower bound {plan.lower_bound})"


def plan_paragraph(plan: Plan, width: int | None = None) -> list[str]:
    """The plan at a glance, wrapped to ``width`` (100 without one): evictions and whether
    they are proven minimal, waves, the views repaired and those left, with what holds them
    (what the next run does: :func:`next_run_lines`). What holds the views left counts, per
    view, the pods of its over-full domains, as that section's HELD BY column does; Skipped
    counts every skipped pod once, wherever it stands, so the two figures can differ."""
    if not plan.violations and not plan.evictions:
        return ["No violations: nothing to evict."]
    text = _head(plan)
    if plan.evictions:
        waves = len(plan.waves)
        text += f", in {plural(waves, 'wave')} (a run re-plans after every wave)."
        if not plan.minimal:
            text += (
                f" No plan reaching the same skews evicts fewer than {plan.lower_bound} pods;"
                " this one was found move by move."
            )
    else:
        text += "."
    views = plural(len(plan.violations), "violated view")
    if plan.unrepaired:
        held = held_summary((r for u in plan.unrepaired for r in u.reasons), pods=True)
        repaired = f"{plan.repaired} repaired, " if plan.repaired else "none repaired, "
        text += (
            f" {views}: {repaired}{len(plan.unrepaired)} left above maxSkew, their over-full"
            f" domains held by {held}; see Left above maxSkew."
        )
    else:
        text += f" {views}: all repaired."
    lines = textwrap.wrap(text, width=max(width or 100, MIN_WIDTH), break_on_hyphens=False)
    return [line.replace(_KEEP, " ") for line in lines]


def run_summary(report: RunReport) -> str:
    """The closing line of a run: ``Run r-1: 2 evicted, 0 blocked by PDB, ...; end: balanced``."""
    s = report.summary()
    line = (
        f"Run {report.run_id}: {s['evicted']} evicted, {s['blocked_by_pdb']} blocked by PDB, "
        f"{s['failed']} failed, {s['skipped']} skipped in {s['waves']} wave(s); end: {s['end']}"
    )
    if report.server_dry_run:
        line += f"; server dry run: {s['would_evict']} would be evicted"
    if report.costs:
        line += f"; deletion costs: {s['costs_written']} written, {s['costs_not_written']} not"
    return line


# --------------------------------------------------------------------------------------------
# Short cells: what a narrow table says in a few characters (the full sentences are in
# ``explain``, ``-o wide`` and ``-o json``)

_KINDS: Final = {
    "Deployment": "deploy",
    "StatefulSet": "sts",
    "DaemonSet": "ds",
    "ReplicaSet": "rs",
    "ReplicationController": "rc",
    "Job": "job",
    "CronJob": "cj",
}
"""kubectl's short names of the usual workload kinds."""
_KEYS: Final = {
    "topology.kubernetes.io/zone": "zone",
    "topology.kubernetes.io/region": "region",
    "kubernetes.io/hostname": "hostname",
}
_PDB: Final = re.compile(r"PodDisruptionBudget (\S+)")
_SKEW: Final = re.compile(r"skew (\d+) > maxSkew (\d+)")


def short_workload(workload: str) -> str:
    """``deploy/web`` for ``Deployment/web`` (kubectl's short names); other kinds lowercased."""
    kind, slash, name = workload.partition("/")
    if not slash:
        return workload
    return f"{_KINDS.get(kind, kind.lower())}/{name}"


def short_key(topology_key: str) -> str:
    """``zone``, ``region``, ``hostname`` for the well-known topology keys, others as given."""
    return _KEYS.get(topology_key, topology_key)


def view_subject(view: ViewReport) -> str:
    """Whose pods a view counts: ``deploy/web`` when every pod declaring it belongs to one
    workload, else ``selector app=web`` (``selector <none>`` for an empty one)."""
    if len(view.workloads) == 1 and view.workloads[0]:
        return short_workload(view.workloads[0])
    return f"selector {view.selector or '<none>'}"


def pdb_name(detail: str) -> str | None:
    """The PodDisruptionBudget a skip or hold detail names, if any."""
    found = _PDB.search(detail)
    return found.group(1) if found else None


def held_cell(reasons: Iterable[Hold]) -> str:
    """``pdb web 3, has-pvc 2``: what holds a view, the PodDisruptionBudget named, the most
    pods first."""
    parts = []
    for code, count, detail in _held_totals(reasons):
        name = pdb_name(detail) if code == "pdb" else None
        parts.append(f"{code} {name} {count}" if name else f"{code} {count}")
    return ", ".join(parts)


def _held_totals(reasons: Iterable[Hold]) -> list[tuple[str, int, str]]:
    totals: dict[str, int] = {}
    details: dict[str, str] = {}
    for r in reasons:
        totals[r.code] = totals.get(r.code, 0) + r.pods
        details.setdefault(r.code, r.detail)
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return [(code, count, details[code]) for code, count in ranked]


def short_reason(eviction: Eviction) -> str:
    """What the plan row's other columns do not say: the key, the skew it repairs (``zone skew
    5>1``) and the PodDisruptionBudget whose per-wave budget it spends."""
    found = _SKEW.search(eviction.reason)
    if found is None:  # not the planner's sentence: all of it
        return eviction.reason
    text = f"{short_key(eviction.topology_key)} skew {found.group(1)}>{found.group(2)}"
    if eviction.pdb:
        text += f", pdb {eviction.pdb}"
    return text


# --------------------------------------------------------------------------------------------
# What the next run does


@dataclass(frozen=True, slots=True)
class RunShape:
    """What the next ``run`` is given besides the plan: its flags, the policy's limits in
    words, and the maintenance window now ((open, sentence); None without a schedule)."""

    max_waves: int = DEFAULT_MAX_WAVES
    wave_timeout: float = 600.0
    limits: str = "no limits"
    window: tuple[bool, str] | None = None
    holds: HoldRules | None = None  # what the run holds (SPEC §3.12); None: not said
    applied: tuple[str, ...] | None = None  # the holds the plan applied (Plan.holds), if known


@dataclass(frozen=True, slots=True)
class NextRun:
    """The next ``run`` of a plan: the waves and evictions it makes, the longest it waits for
    replacements (each wave up to --wave-timeout), and the runs the whole plan takes."""

    shape: RunShape
    waves: int  # 0 when the window is closed
    evictions: int
    plan_waves: int
    runs: int

    @property
    def max_seconds(self) -> float:
        return self.waves * self.shape.wave_timeout


def next_run(plan: Plan, shape: RunShape) -> NextRun:
    """What the next ``run`` with ``shape`` does with ``plan``: its first --max-waves waves,
    none while the maintenance window is closed. A run re-plans after every wave, so the later
    waves are what the cluster then needs; the first wave is exact."""
    total = len(plan.waves)
    closed = shape.window is not None and not shape.window[0]
    waves = 0 if closed else min(total, shape.max_waves)
    evictions = sum(1 for e in plan.evictions if e.wave <= waves)
    if shape.holds is not None:
        shape = replace(shape, applied=plan.holds)
    return NextRun(shape, waves, evictions, total, runs_needed(total, shape.max_waves))


def next_run_lines(run: NextRun, width: int | None = None) -> list[str]:
    """``Next run (--max-waves 5, --wave-timeout 10m, no limits): waves 1-5 of 18, 201
    evictions, at most 50m waiting for replacements; the whole plan takes 4 runs.``"""
    shape = run.shape
    flags = (
        f"--max-waves {shape.max_waves}, --wave-timeout {format_duration(shape.wave_timeout)}, "
        f"{shape.limits}"
    )
    if run.plan_waves == 0:
        text = f"Next run ({flags}): evicts nothing."
    elif run.waves == 0:
        text = f"Next run ({flags}): evicts nothing while the maintenance window is closed."
    else:
        span = "wave 1" if run.waves == 1 else f"waves 1-{run.waves}"
        text = (
            f"Next run ({flags}): {span} of {run.plan_waves}, "
            f"{plural(run.evictions, 'eviction')}, at most "
            f"{format_duration(run.max_seconds)} waiting for replacements; the whole plan takes "
            f"{'one run' if run.runs == 1 else f'{run.runs} runs'}."
        )
    if shape.holds is not None:
        text += " " + holds_sentence(shape.holds, shape.applied)
    if shape.window is not None:
        text += f" Maintenance window: {shape.window[1]}."
    return textwrap.wrap(text, width=max(width or 100, MIN_WIDTH), break_on_hyphens=False)


def next_run_data(run: NextRun) -> dict[str, object]:
    """The same figures for ``-o json|yaml`` (``nextRun``)."""
    window = run.shape.window
    return {
        "maxWaves": run.shape.max_waves,
        "waveTimeoutSeconds": math.ceil(run.shape.wave_timeout),
        "limits": run.shape.limits,
        "waves": run.waves,
        "evictions": run.evictions,
        "maxSeconds": math.ceil(run.max_seconds),
        "planWaves": run.plan_waves,
        "runs": run.runs,
        "window": None if window is None else {"open": window[0], "detail": window[1]},
        **(
            {}
            if run.shape.holds is None
            else {"holds": holds_data(run.shape.holds, run.shape.applied)}
        ),
        **({} if run.shape.holds is None else {"capacity": capacity_data(run.shape.holds)}),
    }


def _hold_names(rules: HoldRules, names: Iterable[str]) -> list[str]:
    lengths = {
        "pods-unplaced": rules.unplaced_grace_seconds,
        "cooldown": rules.workload_cooldown_seconds,
        "thrash-guard": rules.thrash_guard_seconds,
        "launch-deferred": rules.wait_for_nodes_after_seconds,
        "capacity-not-added": rules.capacity.backoff_seconds,
    }
    return [
        f"{name} {format_duration(lengths[name])}" if name in lengths else name for name in names
    ]


def _applied(rules: HoldRules, applied: tuple[str, ...] | None) -> tuple[list[str], list[str]]:
    """The holds applied (the plan's own list when known, else those needing no memory) and
    those only a loop's memory would add."""
    done = list(applied) if applied is not None else list(rules.names(None))
    return done, [n for n in rules.memory_only() if n not in done]


def holds_sentence(rules: HoldRules, applied: tuple[str, ...] | None = None) -> str:
    """``Holds: pods-unplaced 2m, node-drifting; with --interval also cooldown 10s,
    thrash-guard 1h.`` What this plan went around (SPEC §3.12; ``applied``: the plan's own
    list), and what a loop's memory would add."""
    done, loop = _applied(rules, applied)
    text = f"Holds: {', '.join(_hold_names(rules, done) or ['none'])}"
    if loop:
        text += f"; with --interval also {', '.join(_hold_names(rules, loop))}"
    return text + "."


def capacity_lines(plan: Plan, rules: HoldRules | None, width: int | None = None) -> list[str]:
    """``Replacements waiting for a new node: 2, reserved first (...)``: which way the plan's
    waiting replacements go (SPEC §5.10); nothing when none waits for a new node."""
    waiting = sum(1 for e in plan.evictions if e.waits_for)
    if not waiting:
        return []
    capacity = (rules or HoldRules()).capacity
    if capacity.reserve:
        way = (
            f"reserved first ({capacity.why}): a run asks for each node (a CapacityBuffer) and "
            "evicts once it is Ready there, and evicts nothing for a node that does not come"
        )
    else:
        way = (
            f"evicted first ({capacity.why}): each replacement waits, Pending, for the node "
            "its NodePool adds"
        )
    text = f"Replacements waiting for a new node: {waiting}, {way}."
    return textwrap.wrap(text, width=max(width or 100, MIN_WIDTH), break_on_hyphens=False)


def capacity_data(rules: HoldRules) -> dict[str, object]:
    """The same for ``-o json|yaml`` (``nextRun.capacity``): ``reserve``. Why is the server's
    to say (a live plan's ``server.capacity``): a plan from a snapshot of the cluster is the
    live plan, byte for byte, up to ``server``."""
    return {"reserve": rules.capacity.reserve}


def holds_data(rules: HoldRules, applied: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """The same for ``-o json|yaml``: ``applied`` and ``loopOnly``, as skip codes."""
    done, loop = _applied(rules, applied)
    return {"applied": done, "loopOnly": loop}
