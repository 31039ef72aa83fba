"""The Lease: one rebalancer evicting at a time, and the eviction record that survives a crash
(SPEC §5, issue 11 §1-2). Against a fake Lease API with the API server's optimistic
concurrency (a PUT with a stale resourceVersion gets 409)."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from rebalancer.cluster.act.executor import ExecutorSettings
from rebalancer.cluster.act.lease import (
    RECORD_ANNOTATION,
    EvictionRecord,
    Lease,
    LeaseSettings,
    holder_of,
    micro_time,
    parse_records,
)
from rebalancer.cluster.act.outcome import Outcome, RunEnd
from rebalancer.cluster.act.runner import Cluster, Runner, RunSettings
from rebalancer.cluster.api import errors
from rebalancer.core.errors import EXIT_CLUSTER, EXIT_OK
from rebalancer.core.model import LabelSelector
from rebalancer.core.policy import Limits, Policy
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


def test_malformed_records_are_ignored() -> None:
    """A hand-edited annotation never stops a run: bad entries are left out."""
    good = record("u1", NOW).to_json()
    text = f'[{{"uid": 3}}, "x", {str(good).replace(chr(39), chr(34))}]'
    assert [r.uid for r in parse_records({RECORD_ANNOTATION: text})] == ["u1"]
    assert parse_records({RECORD_ANNOTATION: "not json"}) == ()
    assert parse_records(None) == ()


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
    return Runner(
        Cluster(read=fake.read, transport=fake, create_event=None, lease=api),
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
    fake.namespaces = [
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
    runner = Runner(
        Cluster(read=fake.read, transport=fake, lease=api),
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
