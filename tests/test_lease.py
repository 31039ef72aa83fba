"""The Lease: one rebalancer evicting at a time, and the eviction record that survives a crash
(SPEC §5.7, issue 11 §1-2). Against a fake Lease API with the API server's optimistic
concurrency (a PUT with a stale resourceVersion gets 409)."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from rebalancer.cli.logconfig import configure as configure_logging
from rebalancer.cli.main import main
from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.lease import (
    RECORD_ANNOTATION,
    EvictionRecord,
    Lease,
    LeaseSettings,
    RecordError,
    holder_of,
    micro_time,
    parse_records,
)
from rebalancer.cluster.act.outcome import Outcome, RunEnd
from rebalancer.cluster.act.runner import Runner, RunSettings
from rebalancer.cluster.api import errors
from rebalancer.core.errors import EXIT_CLUSTER, EXIT_OK
from rebalancer.core.model import LabelSelector
from rebalancer.core.policy import Limits, Policy
from tests import hostile
from tests.builders import NS, web_pod
from tests.fakes import NOW, FakeClock, FakeCluster

NAMESPACE = "rebalancer"
NAME = "rebalancer"


class FakeLeaseApi:
    """One Lease as the API server keeps it: resourceVersion bumps on each write, a stale one
    gets 409, a create of an existing Lease gets 409. ``before_update`` runs once, just before
    the next PUT is judged (another process writing in between)."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.version = 0
        self.writes: list[dict[str, Any]] = []
        self.before_update: Callable[[], None] | None = None

    def _store(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj = copy.deepcopy(dict(body))
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.obj = obj
        self.writes.append(copy.deepcopy(obj))
        return copy.deepcopy(obj)

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        assert (namespace, name) == (NAMESPACE, NAME)
        return copy.deepcopy(self.obj) if self.obj is not None else None

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        assert namespace == NAMESPACE
        if self.obj is not None:
            raise errors.Conflict(409, "leases.coordination.k8s.io rebalancer already exists")
        return self._store(body)

    def update_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        assert (namespace, name) == (NAMESPACE, NAME)
        hook, self.before_update = self.before_update, None
        if hook is not None:
            hook()
        if self.obj is None:
            raise errors.NotFound(404, "not found")
        if body["metadata"].get("resourceVersion") != self.obj["metadata"]["resourceVersion"]:
            raise errors.Conflict(409, "the object has been modified")
        return self._store(body)

    def force(self, holder: str, renewed: float, duration: int = 60) -> None:
        """Another rebalancer writes the Lease (it took it over)."""
        obj = copy.deepcopy(self.obj) if self.obj is not None else {"metadata": {}}
        obj["spec"] = {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": micro_time(renewed),
            "renewTime": micro_time(renewed),
        }
        self._store(obj)

    @property
    def holder(self) -> str | None:
        assert self.obj is not None
        value: str | None = self.obj["spec"].get("holderIdentity")
        return value

    @property
    def records(self) -> tuple[EvictionRecord, ...]:
        assert self.obj is not None
        return parse_records(self.obj["metadata"].get("annotations"))


class Wall:
    """A settable wall clock."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def lease(api: FakeLeaseApi, identity: str, wall: Wall, **settings: Any) -> Lease:
    return Lease(api, LeaseSettings(namespace=NAMESPACE, name=NAME, **settings), identity,
                 wall_clock=wall)  # fmt: skip


def record(uid: str, at: float, *, workload: str = "ReplicaSet/web-rs", ready: int = 4,
           node: str = "node-a", run: str = "old") -> EvictionRecord:  # fmt: skip
    return EvictionRecord(NS, f"pod-{uid}", uid, node, workload, "ReplicaSet", "web-rs",
                          "uid-rs", ready, at, run)  # fmt: skip


# -- the Lease alone ----------------------------------------------------------------------------


def test_the_first_run_creates_the_lease_and_a_second_finds_it_held() -> None:
    """A missing Lease is created with our holderIdentity; another run sees who and since when,
    and writes nothing."""
    api, wall = FakeLeaseApi(), Wall()
    first = lease(api, "pod-a/run1", wall)
    assert first.acquire() is None
    assert api.holder == "pod-a/run1"
    assert api.obj is not None
    assert api.obj["spec"]["leaseDurationSeconds"] == 60
    writes = len(api.writes)
    wall.now += 30
    held = lease(api, "laptop/run2", wall).acquire()
    assert held is not None
    assert held.identity == "pod-a/run1"
    assert held.acquired == micro_time(NOW)
    assert held.expires_in == pytest.approx(30)
    assert len(api.writes) == writes


def test_an_expired_lease_is_taken_over() -> None:
    """A holder silent for longer than leaseDurationSeconds (it crashed) is taken over."""
    api, wall = FakeLeaseApi(), Wall()
    api.force("crashed/run0", renewed=NOW - 61)
    taker = lease(api, "pod-b/run1", wall)
    assert taker.acquire() is None
    assert api.holder == "pod-b/run1"
    assert api.obj is not None
    assert api.obj["spec"]["leaseTransitions"] == 1


def test_of_two_runs_racing_for_a_free_lease_exactly_one_wins() -> None:
    """Both read the Lease free; the second PUT carries a stale resourceVersion: 409, held."""
    api, wall = FakeLeaseApi(), Wall()
    api.force("", renewed=NOW - 600)  # released long ago
    b = lease(api, "b/run", wall)
    # a's PUT is judged only after b has taken the Lease.
    api.before_update = lambda: (b.acquire(), None)[1]
    held = lease(api, "a/run", wall).acquire()
    assert held is not None
    assert held.identity == "b/run"
    assert api.holder == "b/run"


def test_a_taken_over_lease_stops_recording() -> None:
    """Once another holder wrote the Lease, the next write fails: LeaseLost, and it stays lost."""
    api, wall = FakeLeaseApi(), Wall()
    mine = lease(api, "a/run", wall)
    assert mine.acquire() is None
    api.force("b/run", renewed=NOW)
    with pytest.raises(errors.LeaseLost, match="held by b/run"):
        mine.record(record("u1", NOW))
    assert mine.lost.is_set()
    assert api.holder == "b/run"
    assert api.records == ()
    with pytest.raises(errors.LeaseLost):
        mine.renew()


def test_records_are_kept_within_the_cooldown_and_released_with_the_lease() -> None:
    """Records older than the cooldown are dropped; release clears the holder, keeps the rest;
    the next holder reads them as earlier evictions."""
    api, wall = FakeLeaseApi(), Wall()
    first = lease(api, "a/run", wall, cooldown_seconds=600)
    assert first.acquire() is None
    first.record(record("old", NOW - 700))
    first.record(record("u1", NOW - 10))
    first.record(record("u2", NOW - 5))
    first.not_evicted("u2")  # refused by a PDB: not an eviction after all
    first.release()
    assert api.holder is None
    assert [r.uid for r in api.records] == ["u1"]
    second = lease(api, "b/run", wall, cooldown_seconds=600)
    assert second.acquire() is None
    assert [r.uid for r in second.earlier] == ["u1"]


def test_the_record_is_bounded() -> None:
    """At most max_records evictions are kept, the newest."""
    api, wall = FakeLeaseApi(), Wall()
    mine = lease(api, "a/run", wall, max_records=3)
    assert mine.acquire() is None
    for i in range(5):
        mine.record(record(f"u{i}", NOW - 5 + i))
    assert [r.uid for r in api.records] == ["u2", "u3", "u4"]


def test_malformed_entries_of_the_record_are_left_out() -> None:
    """A bad entry (wrong types, a time that is no finite number) is left out; the others
    count. No annotation, or an empty one, is no record."""
    good = json.dumps(record("u1", NOW).to_json())
    assert f'"at": {NOW}' in good

    def dated(at: str) -> str:  # the good entry with another time, as text
        return good.replace(f'"at": {NOW}', f'"at": {at}').replace('"u1"', '"bad"')

    times = ("NaN", "Infinity", "-Infinity", "1e999", "1" + "0" * 400, '"1750000000"', "true")
    text = "[" + ", ".join(['{"uid": 3}', '"x"', good, *map(dated, times)]) + "]"
    assert [r.uid for r in parse_records({RECORD_ANNOTATION: text})] == ["u1"]
    assert parse_records(None) == ()
    assert parse_records({RECORD_ANNOTATION: ""}) == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not JSON"),
        ('{"ns": "x"}', "not a JSON array but an object of 1 keys"),
        ("[" * 100_000 + "]" * 100_000, "nested more than 128 deep"),
        ('["' + "x" * (256 * 1024) + '"]', "more than the 262144 allowed"),
    ],
)
def test_a_record_that_cannot_be_read_is_an_error(text: str, problem: str) -> None:
    """The record as a whole unreadable: an error, never an empty record (the evictions in it
    count against the limits)."""
    with pytest.raises(RecordError, match=problem):
        parse_records({RECORD_ANNOTATION: text})


def test_holder_of_reads_expiry_by_renew_time() -> None:
    """Held until renewTime + leaseDurationSeconds; no holder or no renewTime: free."""
    spec = {"holderIdentity": "x", "leaseDurationSeconds": 60, "renewTime": micro_time(NOW)}
    held = holder_of({"spec": spec}, NOW + 59)
    assert held is not None
    assert held.identity == "x"
    assert holder_of({"spec": spec}, NOW + 61) is None
    assert holder_of({"spec": {**spec, "holderIdentity": ""}}, NOW) is None
    assert holder_of({"spec": {"holderIdentity": "x", "leaseDurationSeconds": 60}}, NOW) is None


def test_the_renewing_thread_moves_renew_time() -> None:
    """While held, a thread renews the Lease every renew_seconds."""
    api, wall = FakeLeaseApi(), Wall()
    mine = lease(api, "a/run", wall, renew_seconds=0.02)
    assert mine.acquire() is None
    mine.start_renewing()
    wall.now += 5
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert api.obj is not None
        if api.obj["spec"]["renewTime"] == micro_time(NOW + 5):
            break
        time.sleep(0.01)
    mine.release()
    assert api.obj is not None
    assert api.obj["spec"]["renewTime"] == micro_time(NOW + 5)
    assert api.holder is None


# -- the run loop with a Lease ------------------------------------------------------------------


def lease_runner(
    fake: FakeCluster,
    api: FakeLeaseApi,
    policy: Policy | None = None,
    *,
    cooldown: float = 600.0,
    wave_timeout: float = 60.0,
) -> Runner:
    clock = FakeClock()
    fake.leases = api
    return Runner(
        fake,
        fake,
        policy or Policy(),
        RunSettings(
            executor=ExecutorSettings(pdb_retries=1, wave_timeout_seconds=wave_timeout),
            instance="test",
            lease=LeaseSettings(namespace=NAMESPACE, name=NAME, cooldown_seconds=cooldown),
        ),
        clock=clock,
        wall_clock=lambda: NOW,
        sleep=clock.sleep,
    )


def test_a_run_finding_the_lease_held_reads_nothing_and_evicts_nothing() -> None:
    """Exit 0, end lease-held, the holder named; not even a read."""
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    api.force("cronjob-pod/abc", renewed=NOW - 5)
    report = lease_runner(fake, api).run_once("r2")
    assert report.end is RunEnd.LEASE_HELD
    assert report.exit_code == EXIT_OK
    assert report.lease_holder is not None
    assert report.lease_holder.identity == "cronjob-pod/abc"
    assert report.summary()["lease_held_by"] == "cronjob-pod/abc"
    assert fake.reads == 0
    assert fake.posts == []


def test_every_eviction_is_recorded_in_the_lease_before_it_is_sent() -> None:
    """At each eviction POST the Lease already names that pod; at the end it is released."""
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    recorded_at_post: list[bool] = []
    post = fake.post_eviction

    def checking_post(namespace: str, name: str, body: Mapping[str, Any]) -> Any:
        uid = body["deleteOptions"]["preconditions"]["uid"]
        recorded_at_post.append(uid in {r.uid for r in api.records} and api.holder is not None)
        return post(namespace, name, body)

    fake.post_eviction = checking_post  # type: ignore[method-assign]
    report = lease_runner(fake, api).run_once("r1")
    assert report.end is RunEnd.BALANCED
    assert report.evicted == 2
    assert recorded_at_post == [True, True]
    assert api.holder is None  # released
    assert sorted(r.run for r in api.records) == ["r1", "r1"]
    evicted = {r.eviction.uid for r in report.results if r.outcome is Outcome.EVICTED}
    assert {r.uid for r in api.records} == evicted


def test_limits_count_the_evictions_of_earlier_runs_within_the_cooldown() -> None:
    """limits.total 2, and a crashed run evicted 2 pods 5 minutes ago: nothing more now; the
    same record 11 minutes old counts no more."""
    policy = Policy(limits=Limits(total=2))
    for age, expected in ((300, 0), (660, 2)):
        fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
        api.force("crashed/run0", renewed=NOW - 120)  # expired: taken over
        assert api.obj is not None
        gone = [record(f"gone-{i}", NOW - age, ready=0) for i in range(2)]
        api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: _dump(gone)}
        report = lease_runner(fake, api, policy).run_once()
        assert report.evicted == expected, (age, report.summary())
        assert report.earlier_evictions == (2 if age < 600 else 0)


def test_a_recorded_eviction_whose_pod_is_still_there_did_not_happen() -> None:
    """The crashed run recorded web-1 but died before sending: web-1 is alive and not counted."""
    policy = Policy(limits=Limits(total=2))
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    alive = fake.pods["web-1"]["metadata"]["uid"]
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: _dump([record(alive, NOW - 30)])}
    report = lease_runner(fake, api, policy).run_once()
    assert report.earlier_evictions == 0
    assert report.evicted == 2


def test_a_workload_waits_for_the_replacement_of_an_earlier_eviction() -> None:
    """An earlier run evicted a pod of web-rs when it had 5 Ready pods; only 4 are Ready now
    and the replacement is still on its way (not Ready): none of its pods is evicted in this
    run."""
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    on_the_way = web_pod("web-new", "node-b", "uid-new")
    on_the_way["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    fake.pods["web-new"] = on_the_way
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    earlier = record("gone-1", NOW - 30, workload="ReplicaSet/web-rs", ready=5)
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: _dump([earlier])}
    report = lease_runner(fake, api, wave_timeout=20).run_once()
    assert fake.posts == []
    skipped = [r for r in report.results if r.outcome is Outcome.SKIPPED]
    assert skipped
    assert all(r.skip is not None and r.skip.code == "replacement-not-ready" for r in skipped)
    assert "evicted by run old" in skipped[0].detail


def test_an_earlier_eviction_made_moot_by_a_scale_down_does_not_hold_the_workload() -> None:
    """The same record (5 Ready before), 4 Ready now and nothing on the way: a scale-down
    removed the replacement, so there is nothing to wait for: evictions proceed at once."""
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    earlier = record("gone-1", NOW - 30, workload="ReplicaSet/web-rs", ready=5)
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: _dump([earlier])}
    report = lease_runner(fake, api, wave_timeout=20).run_once()
    assert report.evicted == 2
    assert not [r for r in report.results if r.skip is not None]


def test_a_settled_earlier_eviction_lets_the_workload_go_on() -> None:
    """The same record with ready_before 4 (the replacement is Ready): evictions proceed."""
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    earlier = record("gone-1", NOW - 30, workload="ReplicaSet/web-rs", ready=4)
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: _dump([earlier])}
    report = lease_runner(fake, api).run_once()
    assert report.evicted == 2


def test_a_lease_taken_over_mid_run_stops_the_evictions_exit_3() -> None:
    """After the first eviction another rebalancer takes the Lease: the next eviction is not
    sent, the run ends lease-lost, exit 3."""
    fake, api = FakeCluster({"a": 6, "b": 0, "c": 0}), FakeLeaseApi()
    fake.on_post = lambda: api.force("intruder/run", renewed=NOW) if len(fake.posts) == 1 else None
    report = lease_runner(fake, api).run_once()
    assert len(fake.posts) == 1
    assert report.end is RunEnd.LEASE_LOST
    assert report.exit_code == EXIT_CLUSTER
    lost = [r for r in report.results if r.skip is not None and r.skip.code == "lease-lost"]
    assert lost
    assert api.holder == "intruder/run"  # never released over the new holder


def _dump(records: list[EvictionRecord]) -> str:
    from rebalancer.cluster.act.lease import dump_records  # noqa: PLC0415

    return dump_records(records)


def test_earlier_evictions_outside_the_policys_namespaces_do_not_count() -> None:
    """Evictions recorded in another namespace (another policy, or another -n) leave this
    run's limits alone."""
    policy = Policy(limits=Limits(total=2), namespaces_include=(NS,))
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    elsewhere = [
        dataclasses.replace(record(f"x{i}", NOW - 30), namespace="other") for i in range(2)
    ]
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: _dump(elsewhere)}
    report = lease_runner(fake, api, policy).run_once()
    assert report.earlier_evictions == 0
    assert report.evicted == 2


def test_earlier_evictions_outside_the_namespace_label_selector_do_not_count() -> None:
    """With namespaceLabelSelector, evictions recorded in a namespace whose labels do not
    match are another policy's; those in a matching one count against this run's limits."""
    policy = Policy(
        limits=Limits(total=3),
        namespace_label_selector=LabelSelector((("rebalance", "enabled"),)),
    )
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    fake.others = [
        {"kind": "Namespace", "metadata": {"name": NS, "labels": {"rebalance": "enabled"}}},
        {"kind": "Namespace", "metadata": {"name": "other", "labels": {}}},
    ]
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    records = [
        dataclasses.replace(record(f"x{i}", NOW - 30), namespace="other") for i in range(2)
    ] + [record("y0", NOW - 30)]
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: _dump(records)}
    report = lease_runner(fake, api, policy).run_once()
    assert report.earlier_evictions == 1
    assert report.evicted == 2


def test_the_preflight_asks_for_the_lease_in_its_namespace_and_by_name() -> None:
    """get/update are asked about the one Lease (a Role may name it), create without a name,
    all in the Lease's namespace, not the run's."""
    from rebalancer.cluster.api.preflight import LEASE_CHECKS, RUN_CHECKS, preflight  # noqa: PLC0415

    asked: list[tuple[str, str, str | None, str]] = []

    class Access:
        def can_i(self, verb: str, resource: str, *, group: str = "", subresource: str = "",
                  namespace: str | None = None, name: str = "") -> tuple[bool, str]:  # fmt: skip
            asked.append((verb, resource, namespace, name))
            return True, ""

    preflight(Access(), "shop", (*RUN_CHECKS, *LEASE_CHECKS),
              lease_namespace="ops", lease_name="spread-lock")  # fmt: skip
    leases = [a for a in asked if a[1] == "leases"]
    assert leases == [
        ("get", "leases", "ops", "spread-lock"),
        ("create", "leases", "ops", ""),
        ("update", "leases", "ops", "spread-lock"),
    ]
    assert ("create", "pods", "shop", "") in asked


def test_a_missing_lease_namespace_is_one_clear_error() -> None:
    """No namespace for the Lease: exit 3, saying which and what to do; nothing evicted."""

    class NoNamespace(FakeLeaseApi):
        def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
            raise errors.NotFound(404, 'namespaces "rebalancer" not found')

    with pytest.raises(errors.LeaseError, match="namespace rebalancer does not exist") as caught:
        lease(NoNamespace(), "a/run", Wall()).acquire()
    assert caught.value.exit_code == EXIT_CLUSTER


@pytest.mark.parametrize("mode", ["dry-run", "server-dry-run"])
def test_dry_runs_take_no_lease(mode: str) -> None:
    """run --dry-run and --server-dry-run never touch the Lease, even one held by another."""
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    api.force("cronjob-pod/abc", renewed=NOW)
    writes = len(api.writes)
    fake.leases = api
    runner = Runner(
        fake,
        fake,
        Policy(),
        RunSettings(
            plan_only=mode == "dry-run",
            executor=ExecutorSettings(server_dry_run=mode == "server-dry-run"),
            instance="t",
            lease=LeaseSettings(namespace=NAMESPACE, name=NAME),
        ),
        wall_clock=lambda: NOW,
    )
    report = runner.run_once()
    assert report.end is not RunEnd.LEASE_HELD
    assert report.planned == 2
    assert len(api.writes) == writes
    assert api.holder == "cronjob-pod/abc"


def test_interval_mode_takes_and_gives_back_the_lease_around_each_run() -> None:
    """run --interval: each run holds the Lease under its own run id and releases it."""
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    runner = lease_runner(fake, api)
    runs = 0

    def count(_report: object) -> None:
        nonlocal runs
        runs += 1
        if runs == 2:
            runner.stop.set()

    assert runner.run_forever(0.01, on_report=count) == EXIT_OK
    holders = [w["spec"].get("holderIdentity") for w in api.writes]
    taken = [h for h in holders if h]
    assert len(set(taken)) == 2  # two runs, two holder identities
    assert holders[-1] is None  # released after the last run


# -- a Lease that cannot be believed ------------------------------------------------------------

DAY = 86_400


def put_lease(api: FakeLeaseApi, **spec: Any) -> None:
    """The Lease as another writer left it: ``spec`` as given (times as numbers are written as
    MicroTime), resourceVersion bumped."""
    for field in ("acquireTime", "renewTime"):
        if isinstance(spec.get(field), float):
            spec[field] = micro_time(spec[field])
    api._store({"metadata": {}, "spec": spec})


def logged(action: Callable[[], Any]) -> tuple[Any, list[dict[str, Any]]]:
    """``action()`` with the command's log configuration (JSON lines, scrubbed) on a buffer:
    its result and the lines it logged."""
    stream = io.StringIO()
    configure_logging(json_output=True, stream=stream)
    try:
        result = action()
    finally:
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
    text = stream.getvalue()
    return result, [json.loads(line) for line in text.splitlines()] + [{"raw": text}]


@pytest.mark.parametrize(
    ("ahead", "taken"),
    [
        (DAY, True),  # the reported case: every run turned away for a day
        (31.0, True),  # just past the 30 s allowed for clock skew
        (30.0, False),  # a clock 30 s ahead: believed, held for another 90 s
        (5.0, False),
    ],
)
def test_a_renew_time_in_the_future_is_believed_only_within_the_skew_allowed(
    ahead: float, taken: bool
) -> None:
    """renewTime ahead of this machine's clock by more than 30 s: treated as expired and taken
    over (with the resourceVersion read, as any expired Lease), leaseTransitions counted;
    within 30 s it is a clock a little ahead, and the holder keeps the Lease until renewTime +
    leaseDurationSeconds."""
    api, wall = FakeLeaseApi(), Wall()
    put_lease(api, holderIdentity="skewed/run0", leaseDurationSeconds=60,
              acquireTime=NOW - 100, renewTime=NOW + ahead, leaseTransitions=4)  # fmt: skip
    writes = len(api.writes)
    held, lines = logged(lease(api, "b/run1", wall).acquire)
    if taken:
        assert held is None
        assert api.holder == "b/run1"
        assert api.obj is not None
        assert api.obj["spec"]["leaseTransitions"] == 5
        assert api.obj["spec"]["renewTime"] == micro_time(NOW)
        assert api.writes[-1]["metadata"]["resourceVersion"] == str(writes + 1)  # one PUT
        (untrusted,) = [line for line in lines if line.get("event") == "lease.untrusted"]
        assert untrusted["holder"] == "skewed/run0"
        assert untrusted["reason"] == (
            f"renewTime {micro_time(NOW + ahead)} is {ahead:.0f}s ahead of this machine's "
            "clock (more than the 30s allowed for clock skew)"
        )
    else:
        assert held is not None
        assert held.identity == "skewed/run0"
        assert held.expires_in == pytest.approx(ahead + 60)
        assert len(api.writes) == writes
        assert not [line for line in lines if line.get("event") == "lease.untrusted"]


def test_an_acquire_time_in_the_future_is_not_believed() -> None:
    """acquireTime a day ahead (renewTime fine): taken over as well."""
    api = FakeLeaseApi()
    put_lease(api, holderIdentity="x/run0", leaseDurationSeconds=60,
              acquireTime=NOW + DAY, renewTime=NOW)  # fmt: skip
    held, lines = logged(lease(api, "b/run1", Wall()).acquire)
    assert held is None
    assert api.holder == "b/run1"
    (untrusted,) = [line for line in lines if line.get("event") == "lease.untrusted"]
    assert untrusted["reason"].startswith(f"acquireTime {micro_time(NOW + DAY)} is 86400s ahead")


@pytest.mark.parametrize(
    ("duration", "taken"),
    [(-60, True), (0, True), (DAY + 1, True), (10**30, True), (1, False), (3, False), (DAY, False)],
)
def test_a_lease_duration_outside_one_second_to_a_day_is_not_believed(
    duration: int, taken: bool
) -> None:
    """A Lease renewed just now by another holder: held for its leaseDurationSeconds when that
    is 1 s to one day (what --lease-duration allows is inside), taken over otherwise."""
    api = FakeLeaseApi()
    put_lease(api, holderIdentity="x/run0", leaseDurationSeconds=duration,
              acquireTime=NOW, renewTime=NOW)  # fmt: skip
    held, lines = logged(lease(api, "b/run1", Wall()).acquire)
    reasons = [line["reason"] for line in lines if line.get("event") == "lease.untrusted"]
    if taken:
        assert held is None
        assert api.holder == "b/run1"
        assert reasons == [f"leaseDurationSeconds {duration} is outside 1..86400"]
    else:
        assert held is not None
        assert held.expires_in == pytest.approx(duration)
        assert reasons == []


def test_a_free_or_expired_lease_is_taken_without_a_word_of_distrust() -> None:
    """A released Lease (no holder) with odd times, or a holder long expired: taken, and no
    lease.untrusted line (there is no claim to disbelieve)."""
    for spec in (
        {"leaseDurationSeconds": 60, "renewTime": NOW + DAY},  # released, clock was off
        {"holderIdentity": "x/run0", "leaseDurationSeconds": 60, "renewTime": NOW - 61},
    ):
        api = FakeLeaseApi()
        put_lease(api, **spec)
        held, lines = logged(lease(api, "b/run1", Wall()).acquire)
        assert held is None
        assert api.holder == "b/run1"
        assert not [line for line in lines if line.get("event") == "lease.untrusted"]


def test_a_takeover_of_an_untrusted_lease_loses_a_race_like_any_other() -> None:
    """Another run writes the Lease between our read and our PUT: 409, and the run is turned
    away by the new holder (the resourceVersion precondition holds for untrusted Leases too)."""
    api, wall = FakeLeaseApi(), Wall()
    put_lease(api, holderIdentity="skewed/run0", leaseDurationSeconds=60, renewTime=NOW + DAY)
    api.before_update = lambda: api.force("c/run2", renewed=NOW)
    held = lease(api, "b/run1", wall).acquire()
    assert held is not None
    assert held.identity == "c/run2"
    assert api.holder == "c/run2"


@pytest.mark.parametrize(
    ("spec", "field", "shown"),
    [
        (["holderIdentity", "x"], "spec", "an array of 2 items"),
        ("held", "spec", 'a string "held"'),
        ({"holderIdentity": 7}, "spec.holderIdentity", "a number 7"),
        (
            {"holderIdentity": "x", "leaseDurationSeconds": "60"},
            "spec.leaseDurationSeconds",
            'a string "60"',
        ),
        (
            {"holderIdentity": "x", "leaseDurationSeconds": True},
            "spec.leaseDurationSeconds",
            "a boolean true",
        ),
        (
            {"holderIdentity": "x", "leaseDurationSeconds": 60.5},
            "spec.leaseDurationSeconds",
            "a number 60.5",
        ),
        (
            {"holderIdentity": "x", "renewTime": "yesterday"},
            "spec.renewTime",
            'a string "yesterday"',
        ),
        (
            {"holderIdentity": "x", "renewTime": "2025-06-15T15:06:40"},
            "spec.renewTime",
            'a string "2025-06-15T15:06:40"',
        ),  # no zone: whose clock?
        (
            {"holderIdentity": "x", "acquireTime": {"s": 1}},
            "spec.acquireTime",
            "an object of 1 keys",
        ),
        ({"leaseTransitions": "1"}, "spec.leaseTransitions", 'a string "1"'),
    ],
)
def test_a_malformed_lease_is_an_error_naming_the_field(spec: Any, field: str, shown: str) -> None:
    """A Lease no API server would serve: exit 3 naming the Lease, the field and its value;
    nothing is written over it."""
    api = FakeLeaseApi()
    api._store({"metadata": {}, "spec": spec})
    writes = len(api.writes)
    with pytest.raises(errors.LeaseError) as caught:
        lease(api, "b/run1", Wall()).acquire()
    assert str(caught.value).startswith(
        f"the Lease rebalancer/rebalancer as read is malformed: {field} is {shown}, not "
    )
    assert caught.value.exit_code == EXIT_CLUSTER
    assert len(api.writes) == writes


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"resourceVersion": ""}, "metadata.resourceVersion"),
        ({"resourceVersion": 7}, "metadata.resourceVersion"),
        ({"resourceVersion": "3", "annotations": ["a"]}, "metadata.annotations"),
    ],
)
def test_a_lease_without_what_makes_the_write_conditional_is_not_written(
    metadata: dict[str, Any], field: str
) -> None:
    """A free Lease without a resourceVersion (a PUT without one would win any race) or with
    annotations that are no object: exit 3 naming it, no write."""
    api = FakeLeaseApi()
    api.obj = {"metadata": metadata, "spec": {}}

    def no_write(namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        raise AssertionError("written")

    api.update_lease = no_write  # type: ignore[method-assign]
    with pytest.raises(errors.LeaseError, match=f"malformed: {field} is "):
        lease(api, "b/run1", Wall()).acquire()


def test_a_lease_read_back_malformed_after_a_conflict_is_an_error_not_a_crash() -> None:
    """A write answered 409, and the Lease read again names us but its metadata is no object:
    a LeaseError (the run stops evicting, exit 3), not a crash while writing it again."""
    api, wall = FakeLeaseApi(), Wall()
    mine = lease(api, "a/run", wall)
    assert mine.acquire() is None

    def conflict(namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        api.obj = {"metadata": ["x"], "spec": {"holderIdentity": "a/run"}}
        raise errors.Conflict(409, "the object has been modified")

    api.update_lease = conflict  # type: ignore[method-assign]
    with pytest.raises(errors.LeaseError, match="malformed: metadata is an array of 1 items"):
        mine.record(record("u1", NOW))
    assert mine.held  # not lost: it is still ours, and said so


def test_an_unreadable_record_stops_the_run_before_anything_is_written() -> None:
    """The record annotation nested 100,000 deep on an expired Lease: exit 3 naming the Lease
    and the annotation, with the command that removes it; the Lease is not taken."""
    api = FakeLeaseApi()
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: "[" * 100_000 + "]" * 100_000}
    writes = len(api.writes)
    with pytest.raises(errors.LeaseError) as caught:
        lease(api, "b/run1", Wall()).acquire()
    message = str(caught.value)
    assert message.startswith(
        "the Lease rebalancer/rebalancer has an eviction record that cannot be read "
        "(annotation rebalancer/evictions: JSON nested more than 128 deep"
    )
    assert message.endswith("kubectl annotate lease -n rebalancer rebalancer rebalancer/evictions-")
    assert caught.value.exit_code == EXIT_CLUSTER
    assert len(api.writes) == writes
    assert api.holder == "crashed/run0"


def test_a_held_lease_turns_the_run_away_whatever_its_record() -> None:
    """The record is read only by the run that takes the Lease: a live holder turns the run
    away (lease-held, exit 0) even when the record could not be read."""
    api = FakeLeaseApi()
    api.force("live/run0", renewed=NOW - 5)
    assert api.obj is not None
    api.obj["metadata"]["annotations"] = {RECORD_ANNOTATION: "not json"}
    held = lease(api, "b/run1", Wall()).acquire()
    assert held is not None
    assert held.identity == "live/run0"


def test_a_record_dated_in_the_future_counts_as_made_now() -> None:
    """An eviction recorded a day ahead (a clock ahead, or an edit) counts from now: for one
    cooldown, not for a day and a cooldown."""
    api, wall = FakeLeaseApi(), Wall()
    api.force("crashed/run0", renewed=NOW - 120)
    assert api.obj is not None
    api.obj["metadata"]["annotations"] = {
        RECORD_ANNOTATION: _dump([record("ahead", NOW + DAY), record("past", NOW - 30)])
    }
    mine = lease(api, "b/run1", wall, cooldown_seconds=600)
    assert mine.acquire() is None
    assert [(r.uid, r.at) for r in mine.earlier] == [("ahead", NOW), ("past", NOW - 30)]
    wall.now += 601  # one cooldown later
    mine.renew()
    assert api.records == ()
    mine.release()


def test_the_holder_is_escaped_in_every_log_line() -> None:
    """A holderIdentity with a right-to-left override, ESC and an OSC title sequence, BEL and a
    zero-width space: in the lease.held, run.summary and lease.untrusted lines each is written
    as a JSON escape (as jq shows it), never raw; the lines still read back as the identity."""
    evil = "pod-\u202egnp.exe\x1b]0;PWN\x07\u200b"
    escaped = "pod-\\u202egnp.exe\\u001b]0;PWN\\u0007\\u200b"  # as the line's text has it
    fake, api = FakeCluster({"a": 4, "b": 0, "c": 0}), FakeLeaseApi()
    api.force(evil, renewed=NOW - 5)
    report, lines = logged(lease_runner(fake, api).run_once)
    assert report.end is RunEnd.LEASE_HELD
    api.force(evil, renewed=NOW + DAY)
    _, more = logged(lease(api, "b/run1", Wall()).acquire)
    raw = lines[-1]["raw"] + more[-1]["raw"]
    for char in ("\u202e", "\x1b", "\x07", "\u200b"):
        assert char not in raw
    assert raw.count(f'"holder":"{escaped}"') == 2  # lease.held, lease.untrusted
    assert raw.count(f'"lease_held_by":"{escaped}"') == 1  # run.summary
    held = [line for line in lines if line.get("event") == "lease.held"]
    untrusted = [line for line in more if line.get("event") == "lease.untrusted"]
    assert [held[0]["holder"], untrusted[0]["holder"]] == [evil, evil]


# -- the command against a server serving such a Lease ------------------------------------------


def lease_server(lease_obj: dict[str, Any]) -> hostile.Scenario:
    """An API server that allows everything, serves one node and no pods, and ``lease_obj``
    as the Lease; a PUT of the Lease is accepted (answered as holder "accepted")."""

    def answer(request: hostile.Request) -> None:
        if request.method == "POST" and request.path.endswith("/selfsubjectaccessreviews"):
            review = {"kind": "SelfSubjectAccessReview", "status": {"allowed": True}}
            request.send(201, json.dumps(review).encode())
        elif request.path.endswith("/leases/rebalancer"):
            if request.method == "GET":
                request.send(200, json.dumps(lease_obj).encode())
            else:
                held = {**lease_obj, "spec": {"holderIdentity": "accepted"}}
                held["metadata"] = {**lease_obj["metadata"], "resourceVersion": "8"}
                request.send(200, json.dumps(held).encode())
        elif request.path == "/version":
            request.send(200, b'{"major": "1", "minor": "32", "gitVersion": "v1.32.0"}')
        else:
            items = [hostile.node("node-1")] if request.resource == "nodes" else []
            request.send(200, hostile.list_body(request.resource, items))

    return answer


def served_lease(spec: Any, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NAME, "namespace": NAMESPACE, "resourceVersion": "7"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def run_against(
    lease_obj: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, list[hostile.Request]]:
    """``rebalancer run`` against :func:`lease_server`: exit code, stderr, the Lease writes."""
    with hostile.hostile_server(lease_server(lease_obj)) as server:
        try:
            code = main(["run", "--kubeconfig", str(server.kubeconfig(tmp_path))])
        finally:
            structlog.reset_defaults()
            structlog.contextvars.clear_contextvars()
    writes = [r for r in server.requests if r.method == "PUT" and "/leases/" in r.path]
    return code, capsys.readouterr().err, writes


def _expired_spec() -> dict[str, Any]:
    ago = micro_time(time.time() - 3600)
    return {"holderIdentity": "crashed/run0", "leaseDurationSeconds": 60, "renewTime": ago}


@pytest.mark.parametrize(
    ("lease_obj", "message"),
    [
        (
            served_lease(["holderIdentity", "x"]),
            "the Lease rebalancer/rebalancer as read is malformed: spec is an array of 2 items",
        ),
        (
            served_lease(_expired_spec(), {RECORD_ANNOTATION: "[" * 100_000 + "]" * 100_000}),
            "the Lease rebalancer/rebalancer has an eviction record that cannot be read "
            "(annotation rebalancer/evictions: JSON nested more than 128 deep",
        ),
    ],
    ids=["spec-array", "record-100k-deep"],
)
def test_the_command_exits_3_on_a_malformed_lease_and_writes_nothing(
    lease_obj: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both were exit 4 (a bug); now one error line naming the Lease and what is wrong, exit 3,
    and the Lease is not written."""
    code, err, writes = run_against(lease_obj, tmp_path, capsys)
    errors_said = [line for line in err.splitlines() if line.startswith("rebalancer: ")]
    assert code == EXIT_CLUSTER, err[-2000:]
    assert len(errors_said) == 1
    assert errors_said[0].startswith(f"rebalancer: cluster error: {message}")
    assert writes == []


def test_the_command_takes_over_a_lease_renewed_a_day_ahead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """renewTime one day ahead of the clock: was lease-held on every run for a day; now the run
    takes the Lease (PUT), logs lease.untrusted with the holder escaped, and goes on (exit 0)."""
    ahead = micro_time(time.time() + DAY)
    spec = {"holderIdentity": "x\u202ey\x1b[2J", "leaseDurationSeconds": 60, "renewTime": ahead}
    code, err, writes = run_against(served_lease(spec), tmp_path, capsys)
    assert code == EXIT_OK, err[-2000:]
    assert len(writes) >= 2  # taken, then given back
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    (untrusted,) = [line for line in lines if line["event"] == "lease.untrusted"]
    assert untrusted["holder"] == "x\u202ey\x1b[2J"
    assert untrusted["reason"].startswith(f"renewTime {ahead} is 86400s ahead")
    assert "\u202e" not in err and "\x1b" not in err
    (summary,) = [line for line in lines if line["event"] == "run.summary"]
    assert summary["end"] != "lease-held"
