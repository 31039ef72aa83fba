"""bench.churn's own arithmetic and its trace (figures derived by hand): the trace is the same
for a seed, replacements are matched within 5 s, thrash and unavailability are counted as
documented (the tool's unavailability apart from the trace's), the median and range are
right, a 429 loop is three 429s in a row for one object, and scale-downs are told apart."""

from __future__ import annotations

import itertools
import math
import sys
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.churn import (
    eviction_windows,
    loops_429,
    most_at_once,
    most_unavailable,
    most_unavailable_overall,
    ready_time,
    replacements,
    scale_downs,
    spread_of,
    thrash,
)
from bench.trace import DRAIN, ROLLOUT, SCALE, UNCORDON, ZONE_DOWN, ZONE_UP, full_trace, short_trace


def test_the_trace_is_seeded_and_has_every_kind_of_event() -> None:
    one, again, other = full_trace(1), full_trace(1), full_trace(2)
    assert one == again
    assert one.events != other.events
    kinds = Counter(e.kind for e in one.events)
    assert {k: kinds[k] for k in (ROLLOUT, DRAIN, UNCORDON, ZONE_DOWN, ZONE_UP)} == dict.fromkeys(
        (ROLLOUT, DRAIN, UNCORDON, ZONE_DOWN, ZONE_UP), 1
    )
    for w in one.workloads:
        scales = [e for e in one.events if e.kind == SCALE and e.target == w.name]
        gaps = [b.at - a.at for a, b in itertools.pairwise(scales)]
        assert scales and all(19.9 <= g <= 60.1 for g in gaps)
        assert all(w.low <= e.value <= w.high for e in scales)
    assert [e.value for e in short_trace().events] == [15, 6, 12, 5, 11, 14, 7, 10, 4, 9]


SEEN = {
    "a": ("web", 0.0),
    "b": ("web", 0.0),
    "r1": ("web", 11.0),
    "r2": ("web", 13.0),
    "late": ("web", 30.0),
}


def test_replacements_are_the_first_new_pods_within_5_seconds() -> None:
    matched = replacements([(10.0, "a"), (12.0, "b"), (20.0, "r1")], SEEN)
    assert matched == [
        (10.0, "a", "web", "r1"),
        (12.0, "b", "web", "r2"),
        (20.0, "r1", "web", None),  # "late" came 10 s after: a scale-up's, not a replacement
    ]
    assert thrash(matched) == 1  # r1, a's replacement, evicted 10 s later


# A hand-built timeline of web (PDB maxUnavailable 1), times in seconds. The tool evicts a,
# c, d, e and f; the trace's drain evicts b; a pod is on a NotReady node around 12 s.
TIMELINE_SEEN = {
    **dict.fromkeys("abcdef", ("web", 0.0)),
    "r1": ("web", 10.4),  # a's replacement, Ready at 12.0
    "r2": ("web", 11.3),  # b's, Ready at 16.0
    "r3": ("web", 12.5),  # c's, Ready at 13.0
    "r4": ("web", 50.5),  # e's, never Ready, gone after 52.0
}
TOOL = {"a", "c", "d", "e", "f"}
ALL_EVICTIONS = [(10.0, "a"), (11.0, "b"), (12.0, "c"), (40.0, "d"), (50.0, "e"), (55.0, "f")]
READY = {"r1": 12.0, "r2": 16.0, "r3": 13.0}
LAST_SEEN = {"r1": 60.0, "r2": 60.0, "r3": 60.0, "r4": 52.0}
MOOT = [(19.0, "web"), (43.0, "web")]  # scale-downs
LOST = [(11.5, Counter(web=1)), (12.5, Counter(web=1)), (13.5, Counter())]


def test_eviction_windows_run_until_the_replacement_is_ready() -> None:
    """a until r1 Ready (12); b until r2 (16); c until r3 (13); d had no replacement: until the
    scale-down at 43 (the one at 19 came before it); e's replacement was never Ready: until it
    was last seen (52); f: no replacement and nothing after it: until the end (60)."""
    matched = replacements(ALL_EVICTIONS, TIMELINE_SEEN)
    assert [(pod, repl) for _, pod, _, repl in matched] == [
        ("a", "r1"), ("b", "r2"), ("c", "r3"), ("d", None), ("e", "r4"), ("f", None),
    ]  # fmt: skip
    windows = eviction_windows(matched, READY, LAST_SEEN, MOOT, 60.0)
    assert windows == {
        "web": [
            (10.0, 12.0, "a"), (11.0, 16.0, "b"), (12.0, 13.0, "c"),
            (40.0, 43.0, "d"), (50.0, 52.0, "e"), (55.0, 60.0, "f"),
        ]
    }  # fmt: skip


def test_the_tools_unavailability_is_told_apart_from_the_traces() -> None:
    """The tool evicted one at a time (c at 12.0, just as a's replacement became Ready:
    windows [10, 12) and [12, 13) do not overlap): 1, within the PDB. Any cause: at 11.5 to
    12.5, the drain's b, one of the tool's and the pod on the NotReady node: 3."""
    windows = eviction_windows(
        replacements(ALL_EVICTIONS, TIMELINE_SEEN), READY, LAST_SEEN, MOOT, 60.0
    )
    assert most_unavailable(windows, TOOL) == {"web": 1}
    assert most_unavailable_overall(windows, LOST) == {"web": 3}
    assert most_unavailable_overall(windows, []) == {"web": 2}  # a+b, then b+c
    assert most_unavailable(windows, {"b"}) == {"web": 1}
    assert most_unavailable(windows, set()) == {}
    # r1 Ready only at 12.5: c was evicted while a's replacement was not Ready yet -> 2.
    late = eviction_windows(
        replacements(ALL_EVICTIONS, TIMELINE_SEEN),
        {**READY, "r1": 12.5},
        LAST_SEEN,
        MOOT,
        60.0,
    )
    assert most_unavailable(late, TOOL) == {"web": 2}


def test_most_at_once_counts_half_open_windows() -> None:
    assert most_at_once([]) == 0
    assert most_at_once([(0.0, 0.0, "x")]) == 0  # closed as it opened: never unavailable
    assert most_at_once([(0.0, 2.0, "x"), (2.0, 3.0, "y")]) == 1
    assert most_at_once([(0.0, 2.0, "x"), (1.9, 3.0, "y"), (1.0, 1.5, "z")]) == 2
    assert most_at_once([(0.0, 5.0, "x"), (1.0, 4.0, "y"), (2.0, 3.0, "z")]) == 3


def test_thrash_counts_only_the_tools_own_evictions_again() -> None:
    """The drain evicted b; the tool then evicted b's replacement r2: not the tool's thrash."""
    matched = [(10.0, "b", "web", "r2"), (30.0, "r2", "web", "r5"), (700.0, "r5", "web", None)]
    assert thrash(matched, {"r2"}) == 0
    assert thrash(matched) == 1  # r2 within 10 minutes of b; r5 670 s after r2: not thrash
    assert thrash(matched, {"b", "r2"}) == 1


def test_ready_time_is_the_transition_rounded_up_but_not_after_it_was_seen() -> None:
    stamp = "2026-11-25T10:00:05Z"
    t = datetime(2026, 11, 25, 10, 0, 5, tzinfo=UTC).timestamp()
    assert ready_time({"lastTransitionTime": stamp}, t + 1.7) == t + 1.0
    assert ready_time({"lastTransitionTime": stamp}, t + 0.4) == t + 0.4
    assert ready_time({}, t + 3.0) == t + 3.0
    assert ready_time({"lastTransitionTime": "soon"}, t + 3.0) == t + 3.0


def _answer(name: str, code: int) -> dict[str, Any]:
    ref = {"namespace": "ns", "name": name, "subresource": "eviction"}
    return {"objectRef": ref, "responseStatus": {"code": code}}


def test_a_429_loop_is_three_in_a_row_for_one_object() -> None:
    answers = [_answer("p", 429), _answer("q", 429), _answer("p", 429), _answer("p", 201)]
    assert loops_429(answers) == 0
    answers += [_answer("q", 429), _answer("q", 429)]
    assert loops_429(answers) == 1


def test_spread_of_gives_the_median_and_range() -> None:
    assert spread_of([]) == "-"
    assert spread_of([4]) == "4"
    assert spread_of([3, 3]) == "3"
    assert spread_of([10, 2, 7]) == "7 [2-10]"
    assert spread_of([1.5, 2.5]) == "2 [1.5-2.5]"
    assert spread_of([236.0, 330.0]) == "283 [236-330]"


def test_a_variant_is_rebalancer_with_its_flags_added(tmp_path: Path) -> None:
    """--variant NAME=FLAGS: an evict-mode contestant whose argv is rebalancer's plus FLAGS;
    a bad name is refused before anything starts."""
    from bench import churn  # noqa: PLC0415

    class FakeReplay:
        ns = "churn-x"
        tag = "wc0-1-1"

    churn.VARIANTS.clear()
    try:
        with pytest.raises(SystemExit):
            churn.main(["--contestants", "Bad_Name", "--variant", "Bad_Name=--x"])
        churn.VARIANTS["wc0"] = ["--workload-cooldown", "0s"]
        kubeconfig = tmp_path / "kc"
        base = churn.tool_argv("rebalancer", FakeReplay(), kubeconfig, "5s", None)  # type: ignore[arg-type]
        variant = churn.tool_argv("wc0", FakeReplay(), kubeconfig, "5s", None)  # type: ignore[arg-type]
        assert base is not None and variant is not None
        assert variant == [*base, "--workload-cooldown", "0s"]
    finally:
        churn.VARIANTS.clear()


def _layout(**by_node: str) -> list[tuple[str, str]]:
    """pods as ``node="pod pod ..."`` -> [(pod, node)]."""
    return [(pod, node.replace("_", "-")) for node, pods in by_node.items() for pod in pods.split()]


ZONE_OF = {f"z{z}-{n}": f"z{z}" for z in range(3) for n in "ab"}


def test_scale_downs_counted_by_hand() -> None:
    """web: [3 on z0-a | 1, 1 | 1, 1] loses the three pods of z0-a: a scale-down, only from the
    most crowded node, and it made skew ([0, 2, 2], maxSkew 1). Then one pod goes (not counted:
    fewer than two), then two go while one comes (not a scale-down). api: [1, 1 | 2 on z1-a |
    1, 1] loses a pod of z0-a and one of z2-a: counted, not from its most crowded node (z1-a
    has 2), and [1, 2, 1] is within maxSkew. Then api, already beyond ([0, 4, 1]: skew 4),
    loses two more: counted, not "made" skew (it was beyond before)."""
    web0 = _layout(z0_a="w1 w2 w3", z1_a="w4", z1_b="w5", z2_a="w6", z2_b="w7")
    web1 = _layout(z1_a="w4", z1_b="w5", z2_a="w6", z2_b="w7")
    web2 = _layout(z1_b="w5", z2_a="w6", z2_b="w7")
    web3 = _layout(z2_b="w7 w8")
    api0 = _layout(z0_a="a1", z0_b="a2", z1_a="a3 a4", z2_a="a5", z2_b="a6")
    api1 = _layout(z0_b="a2", z1_a="a3 a4", z2_b="a6")
    api2 = _layout(z1_a="a3 a4 a7 a8", z2_b="a6")  # a2 went and two came: not counted
    api3 = _layout(z1_a="a3 a4", z2_b="a6")
    layouts = [
        (0.0, {"web": web0, "api": api0}),
        (1.0, {"web": web1, "api": api1}),
        (2.0, {"web": web2, "api": api2}),
        (3.0, {"web": web3, "api": api3}),
    ]
    limits = {"web": 1, "api": 1}
    assert scale_downs(layouts, ZONE_OF, limits) == {"seen": 3, "most_crowded": 2, "made_skew": 1}
    # renaming zones and nodes changes nothing
    rename = {node: f"n{i}" for i, node in enumerate(sorted(ZONE_OF, reverse=True))}
    zones = {rename[node]: "zone-" + zone[::-1] for node, zone in ZONE_OF.items()}
    renamed = [
        (t, {app: [(pod, rename[node]) for pod, node in pods] for app, pods in lay.items()})
        for t, lay in layouts
    ]
    assert scale_downs(renamed, zones, limits) == {"seen": 3, "most_crowded": 2, "made_skew": 1}
    # a larger maxSkew: none of them made skew
    assert scale_downs(layouts, ZONE_OF, {"web": 2, "api": 3})["made_skew"] == 0


def _reset_contestants() -> None:
    from bench import churn  # noqa: PLC0415

    churn.VARIANTS.clear()
    churn.STEER_VARIANTS.clear()
    churn.CRONS.clear()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--steer-variant", "Steer60=--interval 60s"], "'Steer60=--interval 60s'"),
        (["--steer-variant", "steer60"], "'steer60'"),
        (["--steer-variant", "steer-=--x"], "'steer-=--x'"),
        (["--steer-variant", "a23456789abcd=--x"], "'a23456789abcd=--x'"),
        (["--steer-variant", "steer=--x"], "the name 'steer' is taken"),
        (["--variant", "twin=", "--steer-variant", "twin=--x"], "the name 'twin' is taken"),
        (["--cron", "cr=5x"], "PERIOD '5x'"),
        (["--cron", "cr=0"], "PERIOD '0'"),
        (["--cron", "cr=-300"], "PERIOD '-300'"),
        (["--cron", "cr="], "PERIOD ''"),
        (["--cron", "cr=300:evict"], "'evict' after the period"),
        (["--cron", "cr=300", "--cron", "cr=900"], "the name 'cr' is taken"),
    ],
)
def test_a_bad_contestant_spec_is_refused_naming_it(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each refusal exits 2 (argparse) before anything starts, naming the flag's value."""
    from bench import churn  # noqa: PLC0415

    _reset_contestants()
    try:
        with pytest.raises(SystemExit) as exc:
            churn.main(["--contestants", "nothing", *args])
        assert exc.value.code == 2
        assert named in capsys.readouterr().err
    finally:
        _reset_contestants()


def test_contestant_specs_parsed_by_hand() -> None:
    from bench import churn  # noqa: PLC0415

    _reset_contestants()
    try:
        churn.add_contestants(
            ["wc0=--workload-cooldown 0s"],
            ["steer60=--interval 60s", "a23456789abc="],
            ["cron5m=300:steer", "cron15m=15m", "half=1.5m"],
        )
        assert churn.VARIANTS == {"wc0": ["--workload-cooldown", "0s"]}
        assert churn.STEER_VARIANTS == {"steer60": ["--interval", "60s"], "a23456789abc": []}
        crons = {
            "cron5m": churn.Cron(300.0, True),
            "cron15m": churn.Cron(900.0, False),
            "half": churn.Cron(90.0, False),
        }
        assert crons == churn.CRONS
        assert [c for c in ("steer", "steer60", "cron5m", "cron15m", "wc0") if churn.steers(c)] == [
            "steer",
            "steer60",
            "cron5m",
        ]
    finally:
        _reset_contestants()


class _Replay:
    ns = "churn-x"
    tag = "x-1-1"


def test_steer_variant_and_cron_command_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A steering variant is steer's argv plus its flags (so its --interval comes last and is
    the one argparse keeps); a cron contestant's run is one-shot: no --interval, no state
    check, the steering policy only with ':steer'."""
    from bench import churn  # noqa: PLC0415

    monkeypatch.setattr(churn, "OUT", tmp_path)
    kubeconfig = tmp_path / "kc"
    _reset_contestants()
    try:
        churn.add_contestants([], ["steer60=--interval 60s"], ["cs=300:steer", "ce=900"])
        steer = churn.tool_argv("steer", _Replay(), kubeconfig, "5s", None)  # type: ignore[arg-type]
        variant = churn.tool_argv("steer60", _Replay(), kubeconfig, "5s", None)  # type: ignore[arg-type]
        cs = churn.tool_argv("cs", _Replay(), kubeconfig, "5s", None)  # type: ignore[arg-type]
        ce = churn.tool_argv("ce", _Replay(), kubeconfig, "5s", None)  # type: ignore[arg-type]
        assert steer is not None and variant is not None and cs is not None and ce is not None
        assert variant == [*steer, "--interval", "60s"]
        policy = str(tmp_path / "x-1-1.steer.yaml")
        assert steer[steer.index("--policy") + 1] == policy
        assert cs == [
            sys.executable, "-m", "rebalancer", "run", "-n", "churn-x",
            "--kubeconfig", str(kubeconfig), "-o", "json",
            "--lease-name", "churn-x-1-1", "--policy", policy,
        ]  # fmt: skip
        assert ce == cs[:-2]
        # argparse keeps the last --interval: what `rebalancer run` is given by steer60
        from rebalancer.cli.main import build_parser  # noqa: PLC0415

        args = build_parser().parse_args(variant[3:])
        assert args.interval == "60s"
    finally:
        _reset_contestants()


def test_cron_runs_are_due_every_period_divided_by_the_speed_up() -> None:
    """Trace times 0, P, 2P, ... before the trace's end, in real seconds (/ speed-up)."""
    from bench.churn import cron_due  # noqa: PLC0415

    assert cron_due(300, 3, 900) == [0, 100, 200]  # trace 0, 300, 600 (900 is the end)
    assert cron_due(900, 3, 900) == [0]  # the chart's 15 minutes: one run in the trace
    assert cron_due(60, 2, 220) == [0, 30, 60, 90]  # trace 0, 60, 120, 180
    assert cron_due(400, 4, 900) == [0, 100, 200]  # trace 0, 400, 800
    assert cron_due(1000, 3, 900) == [0]


class _FakeRuns:
    """A clock and one-shot runs of given lengths, for :func:`cron_loop`."""

    def __init__(self, lengths: list[float], stop_at: float = math.inf) -> None:
        self.now = 0.0
        self.lengths = lengths
        self.stop_at = stop_at
        self.started: list[float] = []
        self.ends: list[float] = []

    def wait_until(self, at: float) -> bool:
        self.now = max(self.now, at)
        return self.now >= self.stop_at

    def running(self) -> bool:
        return bool(self.ends) and self.now < self.ends[-1]

    def start(self, at: float) -> None:
        self.started.append(at)
        self.ends.append(at + self.lengths[len(self.started) - 1])


def test_a_run_due_while_the_last_one_runs_is_skipped_not_queued() -> None:
    from bench.churn import cron_loop  # noqa: PLC0415

    # run 1 lasts 150 s: due at 100 it is still running (skipped); at 200 it has ended
    runs = _FakeRuns([150, 20, 20])
    assert cron_loop([0, 100, 200, 300], runs.wait_until, runs.running, runs.start) == [100]
    assert runs.started == [0, 200, 300]
    # a run ending exactly when the next is due lets that one start
    runs = _FakeRuns([100, 250, 5])
    assert cron_loop([0, 100, 200, 300, 400], runs.wait_until, runs.running, runs.start) == [
        200,
        300,
    ]
    assert runs.started == [0, 100, 400]
    # stopped (the trace over): nothing after it starts or is counted skipped
    runs = _FakeRuns([10, 10, 10], stop_at=200)
    assert cron_loop([0, 100, 200], runs.wait_until, runs.running, runs.start) == []
    assert runs.started == [0, 100]


def test_a_results_file_without_the_cron_fields_still_reports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Results written before cost PATCHes and cron runs were recorded load with none of them,
    and the tables print; a cron contestant's runs are listed after them."""
    from bench.churn import Result, report, result_of  # noqa: PLC0415

    old = {"contestant": "steer", "skew_seconds": 2.0, "evictions": 1, "pdb": {"web": 1}}
    r = result_of(old)
    assert (r.cost_patches, r.runs, r.exit_codes, r.skipped_runs) == (0, [], [], [])
    cron = Result("cr5m", skew_seconds=40.0, cost_patches=12, runs=[0.0, 100.2, 200.1])
    cron.exit_codes, cron.skipped_runs = [0, 0, 143], []
    doc = {
        "trace": "full-seed1",
        "speedup": 3.0,
        "interval": "5s",
        "parallel": True,
        "machine": "test",
        "runs": [[old, asdict(cron)], [old, asdict(cron)]],
    }
    report(doc, None)
    out = capsys.readouterr().out
    assert "median [min-max] over the runs" in out
    assert "run 2, cr5m; cron runs 3 started at +0, +100.2, +200.1 s, 0 skipped" in out
    assert "exit codes 0 x2, 143 x1" in out
