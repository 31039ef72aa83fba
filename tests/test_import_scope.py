"""Imported descheduler policies rebalance the pods the descheduler would consider, no more.

One kubectl-style snapshot holds five namespaces with a spread violation each (three pods of
one ReplicaSet in zone a, none in zone b, maxSkew 1), and their Namespace objects with labels:

=========== ============================== =====
namespace   labels                         pods
=========== ============================== =====
shop        rebalance=enabled, team=shop   3
blog        rebalance=enabled              3
kube-system rebalance=enabled              3
batch       (none)                         3
ops         team=ops                       3
=========== ============================== =====

Each descheduler policy below is imported through the command (as users run it: a file, a
ConfigMap as ``kubectl get cm -o yaml`` prints it, the descheduler chart's values), and the
pods the imported policy lets be evicted are compared with the set written by hand from the
descheduler's rules (its DefaultEvictor's namespaceLabelSelector filter, the plugin's
namespaces, its profiles run one after another), or the import must exit non-zero.
"""

from __future__ import annotations

import dataclasses
import io
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cli.main import main
from rebalancer.cluster.read.policyfile import load_policy, load_policy_file
from rebalancer.cluster.read.snapshot import load_snapshot
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_OK, InputError
from rebalancer.core.evictability import EvictionContext, skip_reason
from rebalancer.core.fromdescheduler import divide
from rebalancer.core.model import Snapshot
from rebalancer.core.planner import plan
from rebalancer.core.policy import Policy
from tests.packaging_tools import run, tool

ZONE = "topology.kubernetes.io/zone"
NOW = 1_900_000_000.0
NAMESPACES = {
    "shop": {"rebalance": "enabled", "team": "shop"},
    "blog": {"rebalance": "enabled"},
    "kube-system": {"rebalance": "enabled"},
    "batch": {},
    "ops": {"team": "ops"},
}


def _pods(namespace: str) -> set[tuple[str, str]]:
    return {(namespace, f"web-{i}") for i in range(3)}


def _node(name: str, zone: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}},
        "status": {
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"app": "web"},
            "ownerReferences": [
                {
                    "kind": "ReplicaSet",
                    "name": "web-rs",
                    "uid": f"rs-{namespace}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _snapshot_items(*, namespaces: bool = True) -> list[dict[str, Any]]:
    items = [_node("node-a", "a"), _node("node-b", "b")]
    if namespaces:
        items += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
            for ns, labels in NAMESPACES.items()
        ]
    items += [_pod(ns, name) for ns in NAMESPACES for _, name in sorted(_pods(ns))]
    return items


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    """The snapshot read from a file as ``kubectl get namespaces,nodes,pods -A -o yaml``
    writes it."""
    path = tmp_path_factory.mktemp("snap") / "cluster.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": _snapshot_items()})
    )
    return load_snapshot(path)


def candidates(snapshot: Snapshot, policy: Policy) -> set[tuple[str, str]]:
    """The pods the policy lets be evicted at all."""
    ctx = EvictionContext.build(snapshot, policy, NOW)
    return {(p.namespace, p.name) for p in snapshot.pods if skip_reason(p, ctx) is None}


def evicted_namespaces(snapshot: Snapshot, policy: Policy) -> set[str]:
    return {e.namespace for e in plan(snapshot, policy, NOW).evictions}


def _import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *flags: str
) -> tuple[int, str, str]:
    source = tmp_path / "in.yaml"
    source.write_text(text)
    code = main(["policy", "import", *flags, str(source)])
    out, err = capsys.readouterr()
    return code, out, err


def _policy_of(out: str) -> Policy:
    return load_policy(out, "imported")


LABELLED = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: labelled
    pluginConfig:
      - name: DefaultEvictor
        args:
          namespaceLabelSelector:
            matchLabels: {rebalance: enabled}
      - name: RemovePodsViolatingTopologySpreadConstraint
    plugins:
      balance:
        enabled: [RemovePodsViolatingTopologySpreadConstraint]
"""


def test_a_namespace_label_selector_keeps_its_namespaces(
    snapshot: Snapshot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The descheduler considers the pods of shop, blog and kube-system (labelled
    rebalance=enabled; the plugin's namespaces unset: every namespace); so does the import."""
    code, out, _ = _import(tmp_path, capsys, LABELLED)
    assert code == EXIT_OK
    policy = _policy_of(out)
    expected = _pods("shop") | _pods("blog") | _pods("kube-system")
    assert candidates(snapshot, policy) == expected
    assert evicted_namespaces(snapshot, policy) == {"shop", "blog", "kube-system"}


def test_the_selector_with_no_namespaces_in_the_snapshot_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot without Namespace objects cannot say which namespaces match: `plan` exits 2
    naming the field, instead of treating every namespace as in scope."""
    code, out, _ = _import(tmp_path, capsys, LABELLED)
    assert code == EXIT_OK
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(out)
    bare = tmp_path / "bare.yaml"
    items = _snapshot_items(namespaces=False)
    bare.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["plan", "--snapshot", str(bare), "--policy", str(policy_file)]) == EXIT_BAD_INPUT
    assert "namespaceLabelSelector: set, but the snapshot holds no Namespace objects" in (
        capsys.readouterr().err
    )
    with pytest.raises(InputError):
        candidates(load_snapshot(bare), load_policy_file(policy_file))


TWO_PROFILES = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictTotal: 4
profiles:
  - name: by-team
    pluginConfig:
      - name: DefaultEvictor
        args:
          namespaceLabelSelector:
            matchExpressions: [{key: team, operator: In, values: [shop, ops]}]
      - name: RemovePodsViolatingTopologySpreadConstraint
    plugins:
      balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}
  - name: blog
    pluginConfig:
      - name: RemovePodsViolatingTopologySpreadConstraint
        args: {namespaces: {include: [blog]}}
    plugins:
      balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}
"""


def test_two_scoped_profiles_are_refused_as_one_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --profile, two profiles that each enable the plugin are refused, each named
    with its scope; nothing is written."""
    code, out, err = _import(tmp_path, capsys, TWO_PROFILES)
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert '"by-team": every namespace, namespaceLabelSelector team in (shop,ops)' in err
    assert '"blog": namespaces in [blog]' in err


def test_two_scoped_profiles_keep_their_own_scope_and_limits(
    snapshot: Snapshot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--all-profiles writes one policy per profile; each considers exactly its profile's
    pods (by-team: shop and ops; blog: blog), together what the descheduler considers, and
    the shared limit (4) is divided between them (2 and 2: together 4, as the descheduler
    counts it across its profiles). --profile imports one, keeps the whole limit and names
    the other as a SCOPE comment."""
    folder = tmp_path / "out"
    code, out, _ = _import(tmp_path, capsys, TWO_PROFILES, "--all-profiles", str(folder))
    assert code == EXIT_OK
    assert out.splitlines() == [str(folder / "by-team.yaml"), str(folder / "blog.yaml")]
    by_team = load_policy_file(folder / "by-team.yaml")
    blog = load_policy_file(folder / "blog.yaml")
    assert candidates(snapshot, by_team) == _pods("shop") | _pods("ops")
    assert candidates(snapshot, blog) == _pods("blog")
    assert evicted_namespaces(snapshot, by_team) == {"shop", "ops"}
    assert evicted_namespaces(snapshot, blog) == {"blog"}
    assert by_team.limits.total == blog.limits.total == 2
    code, out, err = _import(tmp_path, capsys, TWO_PROFILES, "--profile", "blog")
    assert code == EXIT_OK
    assert candidates(snapshot, _policy_of(out)) == _pods("blog")
    assert _policy_of(out).limits.total == 4
    assert '# SCOPE: narrower, profiles[0]: profile "by-team" also enables' in out
    assert err.startswith('SCOPE: profiles[0]: profile "by-team" also enables')


CAMEL = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
MaxNoOfPodsToEvictTotal: 1
profiles:
  - name: camel
    pluginConfig:
      - name: DefaultEvictor
        args:
          namespaceLabelSelector:
            matchLabels: {team: shop}
      - name: RemovePodsViolatingTopologySpreadConstraint
        args: {namespaces: {exclude: [ops]}}
    plugins:
      balance:
        enabled: [RemovePodsViolatingTopologySpreadConstraint]
      filter:
        enabled: [DefaultEvictor]
      preEvictionFilter:
        enabled: [DefaultEvictor]
"""


def test_keys_as_users_write_them(
    snapshot: Snapshot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`preEvictionFilter` (the README's spelling) and `MaxNoOfPodsToEvictTotal` are keys the
    descheduler's decoder does not match (it matches exactly, and ignores what it does not
    know): the import ignores them too, with a note, and the pods are the descheduler's (shop
    only, and no limit)."""
    code, out, err = _import(tmp_path, capsys, CAMEL)
    assert code == EXIT_OK
    policy = _policy_of(out)
    assert candidates(snapshot, policy) == _pods("shop")
    assert evicted_namespaces(snapshot, policy) == {"shop"}
    assert policy.limits.total is None
    assert "note: profiles[0].plugins.preEvictionFilter: ignored, as the descheduler" in err
    assert "(it reads preevictionfilter)" in err
    assert "note: MaxNoOfPodsToEvictTotal: ignored" in err


def test_a_miscased_plugin_arg_is_refused_as_the_descheduler_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plugin args are decoded strictly: `NamespaceLabelSelector` fails the descheduler's
    start, and the import (exit 2), rather than dropping the scope."""
    text = LABELLED.replace("namespaceLabelSelector:", "NamespaceLabelSelector:")
    code, out, err = _import(tmp_path, capsys, text)
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert "args.NamespaceLabelSelector: unknown key; did you mean namespaceLabelSelector?" in err


def _configmap(policy: str, key: str = "policy.yaml") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "descheduler", "namespace": "kube-system"},
            "data": {key: policy},
        }
    )


def test_a_configmap_holding_the_policy(
    snapshot: Snapshot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubectl get cm descheduler -o yaml` as the input: the policy in data policy.yaml (or
    the only key) is imported as the file itself would be."""
    code, out, _ = _import(tmp_path, capsys, _configmap(LABELLED))
    assert code == EXIT_OK
    assert "(ConfigMap descheduler, data policy.yaml)" in out.splitlines()[0]
    expected = _pods("shop") | _pods("blog") | _pods("kube-system")
    assert candidates(snapshot, _policy_of(out)) == expected
    assert evicted_namespaces(snapshot, _policy_of(out)) == {"shop", "blog", "kube-system"}
    code, out, _ = _import(tmp_path, capsys, _configmap(LABELLED, "config"))
    assert code == EXIT_OK
    assert candidates(snapshot, _policy_of(out)) == expected
    listed = {"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(_configmap(LABELLED))]}
    code, out, _ = _import(tmp_path, capsys, yaml.safe_dump(listed))
    assert code == EXIT_OK
    assert candidates(snapshot, _policy_of(out)) == expected
    two = yaml.safe_load(_configmap(LABELLED))
    two["data"]["other"] = "x"
    del two["data"]["policy.yaml"]
    two["data"]["more"] = "y"
    code, out, err = _import(tmp_path, capsys, yaml.safe_dump(two))
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert "needs the key policy.yaml or a single key, found more, other" in err


def test_kubectl_piped_into_the_import(
    snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubectl get cm descheduler -o yaml | rebalancer policy import -`."""
    piped = io.TextIOWrapper(io.BytesIO(_configmap(LABELLED).encode()))
    monkeypatch.setattr(sys, "stdin", piped)
    assert main(["policy", "import", "-"]) == EXIT_OK
    out, _ = capsys.readouterr()
    assert "from standard input (ConfigMap descheduler, data policy.yaml)" in out.splitlines()[0]
    expected = _pods("shop") | _pods("blog") | _pods("kube-system")
    assert candidates(snapshot, _policy_of(out)) == expected


VALUES = """\
# the descheduler chart's values, as a user keeps them
kind: CronJob
schedule: "*/2 * * * *"
cmdOptions:
  v: 3
deschedulerPolicy:
  maxNoOfPodsToEvictPerNamespace: 1
  profiles:
    - name: default
      pluginConfig:
        - name: DefaultEvictor
          args:
            namespaceLabelSelector:
              matchExpressions: [{key: rebalance, operator: Exists}]
            podProtections:
              defaultDisabled: [PodsWithLocalStorage]
              extraEnabled: [PodsWithPVC]
        - name: RemoveDuplicates
        - name: RemovePodsViolatingTopologySpreadConstraint
          args:
            namespaces: {exclude: [kube-system]}
      plugins:
        balance:
          enabled: [RemoveDuplicates, RemovePodsViolatingTopologySpreadConstraint]
"""


def test_the_descheduler_charts_values(
    snapshot: Snapshot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A values file with deschedulerPolicy: imported as the chart renders it (apiVersion
    descheduler/v1alpha2 added): shop and blog (labelled, kube-system excluded by the plugin)."""
    code, out, _ = _import(tmp_path, capsys, VALUES)
    assert code == EXIT_OK
    policy = _policy_of(out)
    assert candidates(snapshot, policy) == _pods("shop") | _pods("blog")
    assert evicted_namespaces(snapshot, policy) == {"shop", "blog"}
    assert policy.limits.per_namespace == 1
    assert policy.evict_local_storage_pods and not policy.evict_pods_with_pvc
    templated = VALUES.replace("values: [shop, ops]", "").replace(
        "operator: Exists", 'operator: "{{ .Values.op }}"'
    )
    code, out, err = _import(tmp_path, capsys, templated)
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert "a Helm template" in err


AGES = {
    # pod: (seconds since creation, seconds since status.startTime or None) at NOW
    "settled": (3600, 3500),
    "waited": (600, 120),  # old enough counted from creation, not from its start
    "unstarted": (600, None),  # no startTime yet: age 0 from its start
    "fresh": (100, 50),
}


def _aged_snapshot(tmp_path: Path) -> Snapshot:
    """Four pods of one ReplicaSet in namespace shop (labelled rebalance=enabled), all on
    node-a, with the ages of :data:`AGES`."""
    items = [_node("node-a", "a"), _node("node-b", "b")]
    items.append(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "shop", "labels": NAMESPACES["shop"]},
        }
    )
    for name, (created, started) in AGES.items():
        pod = _pod("shop", name)
        pod["metadata"]["creationTimestamp"] = _stamp(NOW - created)
        if started is not None:
            pod["status"]["startTime"] = _stamp(NOW - started)
        items.append(pod)
    path = tmp_path / "aged.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return load_snapshot(path)


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_min_pod_age_imports_with_the_descheduler_meaning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy whose only difference is minPodAge: 5m imports with exit 0, no SCOPE note, and
    minPodAgeFrom: startTime, so the pods it lets be evicted are those the descheduler
    would (age from status.startTime >= 300 s; a pod not started is age 0): worked out by
    hand from AGES, only "settled". Counted from creation instead, "waited" and "unstarted"
    would be let in too."""
    text = LABELLED.replace(
        "matchLabels: {rebalance: enabled}",
        "{matchLabels: {rebalance: enabled}}\n          minPodAge: 5m",
    )
    code, out, err = _import(tmp_path, capsys, text)
    assert code == EXIT_OK, err
    assert "SCOPE" not in out + err
    policy = _policy_of(out)
    assert (policy.min_pod_age_seconds, policy.min_pod_age_from) == (300.0, "startTime")
    code, plain, _ = _import(tmp_path, capsys, LABELLED)
    assert code == EXIT_OK
    without = _policy_of(plain)
    assert (
        dataclasses.replace(without, min_pod_age_seconds=300.0, min_pod_age_from="startTime")
        == policy
    )
    aged = _aged_snapshot(tmp_path)
    assert candidates(aged, without) == {("shop", name) for name in AGES}
    assert candidates(aged, policy) == {("shop", "settled")}
    from_creation = dataclasses.replace(policy, min_pod_age_from="creationTimestamp")
    assert candidates(aged, from_creation) == {
        ("shop", n) for n in ("settled", "waited", "unstarted")
    }
    lines = out.splitlines()
    at = lines.index("minPodAge: 5m")
    assert lines[at + 1] == "minPodAgeFrom: startTime"
    comment = [line for line in lines[:at] if line.startswith("#")][-3:]
    assert any("carried with minPodAgeFrom: startTime" in line for line in comment)


def test_helm_values_output_renders_in_the_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output helm-values puts the policy under policy: without apiVersion and kind; the
    chart takes it (its schema included) and the ConfigMap it renders holds the same policy."""
    code, out, _ = _import(tmp_path, capsys, VALUES, "--output", "helm-values")
    assert code == EXIT_OK
    values = yaml.safe_load(out)
    assert list(values) == ["kind", "schedule", "cmdOptions", "policy"]
    assert "apiVersion" not in values["policy"]
    code, plain, _ = _import(tmp_path, capsys, VALUES)
    expected = _policy_of(plain)
    values_file = tmp_path / "values.yaml"
    values_file.write_text(out)
    chart = Path(__file__).resolve().parent.parent / "charts" / "rebalancer"
    proc = run(tool("helm"), "template", "r", str(chart), "-f", str(values_file))
    assert proc.returncode == 0, proc.stderr
    rendered = proc.stdout
    configmap = next(
        d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "ConfigMap" and "policy.yaml" in d.get("data", {})
    )
    assert load_policy(configmap["data"]["policy.yaml"], "chart") == expected


def _limits_of(path: Path) -> tuple[int | None, int | None, int | None]:
    limits = load_policy_file(path).limits
    return limits.total, limits.per_node, limits.per_namespace


@pytest.mark.parametrize(
    ("budgets", "profiles", "expected"),
    [
        # (total, perNode, perNamespace) -> each policy's, worked out by hand: the floor each,
        # the remainder one each to the first policies
        ((4, 3, 2), 2, [(2, 2, 1), (2, 1, 1)]),
        ((20, None, None), 2, [(10, None, None), (10, None, None)]),
        ((20, 5, None), 3, [(7, 2, None), (7, 2, None), (6, 1, None)]),
        ((0, None, 3), 3, [(0, None, 1), (0, None, 1), (0, None, 1)]),
    ],
)
def test_all_profiles_divides_the_shared_budgets(
    budgets: tuple[int | None, int | None, int | None],
    profiles: int,
    expected: list[tuple[int | None, int | None, int | None]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The descheduler counts maxNoOfPodsToEvictTotal, PerNode and PerNamespace across all its
    profiles (one evictor per cycle): --all-profiles divides each between the policies it
    writes, so together they allow what the descheduler allowed, and says so beside limits
    and on stderr."""
    keys = (
        "maxNoOfPodsToEvictTotal",
        "maxNoOfPodsToEvictPerNode",
        "maxNoOfPodsToEvictPerNamespace",
    )
    policy: dict[str, Any] = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy"}
    policy.update({k: v for k, v in zip(keys, budgets, strict=True) if v is not None})
    policy["profiles"] = [
        {
            "name": f"p{i}",
            "pluginConfig": [
                {
                    "name": "RemovePodsViolatingTopologySpreadConstraint",
                    "args": {"namespaces": {"include": [f"ns{i}"]}},
                }
            ],
            "plugins": {"balance": {"enabled": ["RemovePodsViolatingTopologySpreadConstraint"]}},
        }
        for i in range(profiles)
    ]
    folder = tmp_path / "out"
    code, out, err = _import(
        tmp_path, capsys, yaml.safe_dump(policy), "--all-profiles", str(folder)
    )
    assert code == EXIT_OK, err
    paths = [Path(line) for line in out.splitlines()]
    assert [_limits_of(path) for path in paths] == expected
    for path in paths:
        text = path.read_text()
        before_limits = text.split("\nlimits:")[0].split("\n")[-4:]
        assert any(f"divided between the {profiles} policies" in line for line in before_limits)
    assert err.count(f"divided between the {profiles} policies") == profiles


def test_a_budget_too_small_to_divide_is_refused_unless_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """maxNoOfPodsToEvictPerNode: 1 cannot give each of two policies one: exit 2 naming it,
    nothing written; --budget-per-policy gives each policy the whole budget and says what the
    two then allow together."""
    text = TWO_PROFILES.replace("maxNoOfPodsToEvictTotal: 4", "maxNoOfPodsToEvictPerNode: 1")
    folder = tmp_path / "out"
    code, out, err = _import(tmp_path, capsys, text, "--all-profiles", str(folder))
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert "maxNoOfPodsToEvictPerNode: 1 cannot be divided between the 2 policies" in err
    assert "--budget-per-policy" in err
    assert not folder.exists()
    code, out, err = _import(
        tmp_path, capsys, text, "--all-profiles", str(folder), "--budget-per-policy"
    )
    assert code == EXIT_OK
    assert [_limits_of(Path(p)) for p in out.splitlines()] == [(None, 1, None)] * 2
    assert "may evict up to 2 times as many (maxNoOfPodsToEvictPerNode 2)" in err
    code, _, err = _import(tmp_path, capsys, text, "--budget-per-policy")
    assert code == EXIT_BAD_INPUT
    assert "--budget-per-policy: 1 problem(s):\n  - goes with --all-profiles" in err


def test_divide_gives_everything_evenly() -> None:
    """Every budget 0-40 in 1-7 parts: the shares add up to the budget, differ by at most one,
    the larger first, and none is 0 when the budget is at least the parts (brute force)."""
    for budget in range(41):
        for parts in range(1, 8):
            shares = divide(budget, parts)
            assert len(shares) == parts
            assert sum(shares) == budget
            assert max(shares) - min(shares) <= 1
            assert shares == sorted(shares, reverse=True)
            assert budget < parts or min(shares) >= 1


CHART_VALUES = """\
kind: Deployment
deschedulingInterval: 3m
image: {repository: registry.k8s.io/descheduler/descheduler, tag: v0.36.0}
resources: {requests: {cpu: 500m, memory: 256Mi}}
priorityClassName: ops-critical
tolerations: [{key: management, operator: Equal, value: tool, effect: NoSchedule}]
nodeSelector: {kubernetes.io/os: linux}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [ops]}]}]
podAnnotations: {example.com/owner: platform}
serviceMonitor: {enabled: true, interval: 30s, insecureSkipVerify: true}
cmdOptions: {dry-run: true, v: 3, descheduling-interval: 5m}
livenessProbe: {httpGet: {path: /healthz, port: 10258}}
ports: [{containerPort: 10258}]
deschedulerPolicy:
  profiles:
    - name: spread
      pluginConfig:
        - name: RemovePodsViolatingTopologySpreadConstraint
          args: {namespaces: {include: [shop]}}
      plugins:
        balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}
"""


def test_the_descheduler_charts_settings_are_carried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output helm-values of the descheduler chart's values carries every value this chart
    has (as written, but for the keys it lacks), names each left behind on stderr and as a
    comment, and renders a Deployment that runs every 3m in dry run with the pods' settings and
    a ServiceMonitor. The carried values are written out by hand from docs/helm.md's table."""
    code, out, err = _import(tmp_path, capsys, CHART_VALUES, "--output", "helm-values")
    assert code == EXIT_OK, err
    values = yaml.safe_load(out)
    source = yaml.safe_load(CHART_VALUES)
    carried = {
        key: source[key]
        for key in (
            "kind",
            "deschedulingInterval",
            "resources",
            "priorityClassName",
            "tolerations",
            "nodeSelector",
            "affinity",
            "podAnnotations",
        )
    }
    carried["resources"] = {**source["resources"], "limits": None}  # none, as there
    carried["serviceMonitor"] = {"enabled": True, "interval": "30s"}
    carried["cmdOptions"] = {"dry-run": True, "v": 3}
    assert {k: v for k, v in values.items() if k != "policy"} == carried
    assert list(values)[-1] == "policy"
    left = ["image", "livenessProbe", "ports"]
    left += ["serviceMonitor.insecureSkipVerify", "cmdOptions.descheduling-interval"]
    for name in left:
        assert f"note: {name}: not carried: " in err, name
        assert f"# note: {name}: not carried: " in out, name
    values_file = tmp_path / "values.yaml"
    values_file.write_text(out)
    chart = Path(__file__).resolve().parent.parent / "charts" / "rebalancer"
    proc = run(tool("helm"), "template", "r", str(chart), "-f", str(values_file))
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--interval") + 1] == "3m"
    assert "--dry-run" in args
    assert container["resources"] == source["resources"]
    for key in ("priorityClassName", "tolerations", "nodeSelector", "affinity"):
        assert pod["spec"][key] == carried[key], key
    assert pod["metadata"]["annotations"]["example.com/owner"] == "platform"
    assert "livenessProbe" not in container
    assert "descheduler" not in container["image"]
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["interval"] == "30s"
