"""rebalancer policy import: descheduler policies from its documentation, mapped field by field
(tests/data/descheduler_import_cases.yaml), the imported policies accepted by policy check, and
bad input refused with every problem named."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rebalancer.cli.main import main
from rebalancer.cluster.read.policyfile import load_policy, read_policy_document
from rebalancer.core import fromdescheduler
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_OK, InputError
from rebalancer.core.fromdescheduler import from_descheduler
from rebalancer.core.gosyntax import and_selectors, parse_go_duration, parse_label_selector
from rebalancer.core.model import LabelSelector, Requirement
from rebalancer.core.policy import API_VERSION, KEYS, KIND, policy_from_document, policy_to_dict
from tests.strategies import hostile_names

DATA = Path(__file__).parent / "data"
POLICIES = DATA / "descheduler"
CASES: dict[str, Any] = yaml.safe_load((DATA / "descheduler_import_cases.yaml").read_text())
IMPORTS: list[dict[str, Any]] = CASES["imports"]
REJECTS: list[dict[str, Any]] = CASES["rejects"]
FIELDS = [(case, key) for case in IMPORTS for key in case["policy"]]


def _imported(case: dict[str, Any]) -> Any:
    document, source = read_policy_document(POLICIES / case["file"])
    return from_descheduler(document, source, accept_wider=case.get("acceptWider", False))


def test_every_policy_file_has_a_case() -> None:
    """Each descheduler policy kept as test data is imported by a case, and the reverse."""
    assert sorted(c["file"] for c in IMPORTS) == sorted(p.name for p in POLICIES.glob("*.yaml"))


@pytest.mark.parametrize(("case", "key"), FIELDS, ids=[f"{c['file']}:{k}" for c, k in FIELDS])
def test_each_field_maps_as_the_table_says(case: dict[str, Any], key: str) -> None:
    """One field of an imported policy has the value derived by hand from the mapping."""
    assert _imported(case).document[key] == case["policy"][key]


@pytest.mark.parametrize("case", IMPORTS, ids=[c["file"] for c in IMPORTS])
def test_the_import_writes_exactly_the_expected_keys(case: dict[str, Any]) -> None:
    """No key beyond the expected ones (and the header) is written, and the right profile is
    the one imported."""
    imported = _imported(case)
    assert list(imported.document)[:2] == ["apiVersion", "kind"]
    assert imported.document["apiVersion"] == API_VERSION
    assert imported.document["kind"] == KIND
    assert set(imported.document) - {"apiVersion", "kind"} == set(case["policy"])
    assert imported.profile == case["profile"]


@pytest.mark.parametrize("case", IMPORTS, ids=[c["file"] for c in IMPORTS])
def test_every_setting_left_behind_has_one_note(case: dict[str, Any]) -> None:
    """The notes name, in order, the settings that do not carry over or change meaning."""
    notes = _imported(case).notes
    assert [f"{note.tag} {note.path}" for note in notes] == case["notes"]
    assert all(len(note.message) > 20 for note in notes)  # each says why


@pytest.mark.parametrize("case", IMPORTS, ids=[c["file"] for c in IMPORTS])
def test_every_note_names_a_policy_key(case: dict[str, Any]) -> None:
    """A note concerns one key of the rebalancer policy (the one it is written beside) or the
    policy as a whole: never a name the policy does not have."""
    keys = {key.name for key in KEYS}
    assert {note.field for note in _imported(case).notes} <= keys | {None}


@pytest.mark.parametrize("case", IMPORTS, ids=[c["file"] for c in IMPORTS])
def test_the_imported_policy_passes_policy_check(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy import` prints a policy that `policy check` accepts, and the notes on stderr;
    the checked policy is the one the import built."""
    wider = ["--accept-wider-scope"] if case.get("acceptWider") else []
    assert main(["policy", "import", *wider, str(POLICIES / case["file"])]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out.startswith("# Imported by rebalancer policy import from ")
    assert err.splitlines() == [f"{n.tag}: {n.path}: {n.message}" for n in _imported(case).notes]
    written = tmp_path / "imported.yaml"
    written.write_text(out)
    assert main(["policy", "check", str(written)]) == EXIT_OK
    assert capsys.readouterr().err == f"{written}: ok\n"
    assert load_policy(out, "imported") == _imported(case).policy
    effective = policy_to_dict(_imported(case).policy)
    for key, value in case["policy"].items():
        assert effective[key] == value, key


@pytest.mark.parametrize("case", REJECTS, ids=[c["name"] for c in REJECTS])
def test_bad_input_is_refused_naming_field_and_value(case: dict[str, Any]) -> None:
    """A file that is not a descheduler/v1alpha2 DeschedulerPolicy with one profile to import
    fails with exactly these problems."""
    with pytest.raises(InputError) as info:
        from_descheduler(yaml.safe_load(case["text"]), "in.yaml")
    assert list(info.value.problems) == case["problems"]
    assert info.value.source == "in.yaml"


def test_bad_input_exits_2_and_prints_nothing_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command exits 2 with the problems on stderr and no policy on stdout."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n")
    assert main(["policy", "import", str(bad)]) == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == ""
    assert "profiles: no profile enables RemovePodsViolatingTopologySpreadConstraint" in err


def test_not_yaml_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Invalid YAML and a key written twice are refused with their line."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [DeschedulerPolicy\n")
    assert main(["policy", "import", str(bad)]) == EXIT_BAD_INPUT
    assert "line 2" in capsys.readouterr().err
    bad.write_text("kind: a\nkind: b\n")
    assert main(["policy", "import", str(bad)]) == EXIT_BAD_INPUT
    assert "line 2, column 1: duplicate key kind" in capsys.readouterr().err


SEVERAL = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: shop
    pluginConfig:
      - {name: RemovePodsViolatingTopologySpreadConstraint, args: {namespaces: {include: [shop]}}}
    plugins: {balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}}
  - name: batch
    pluginConfig:
      - {name: RemovePodsViolatingTopologySpreadConstraint, args: {constraints: [ScheduleAnyway]}}
    plugins: {balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}}
"""


def test_profile_chooses_among_several(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--profile picks one of several profiles that enable the plugin; the other is noted;
    a profile that does not exist or does not enable the plugin is refused."""
    path = tmp_path / "several.yaml"
    path.write_text(SEVERAL)
    assert main(["policy", "import", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "2 profiles enable RemovePodsViolatingTopologySpreadConstraint, each with its own" in err
    assert '"shop": namespaces in [shop]; "batch": every namespace' in err
    assert main(["policy", "import", "--profile", "batch", str(path)]) == EXIT_OK
    out, err = capsys.readouterr()
    assert yaml.safe_load(out)["constraints"] == ["ScheduleAnyway"]
    assert err.splitlines()[0].startswith(
        'SCOPE: profiles[0]: profile "shop" also enables '
        "RemovePodsViolatingTopologySpreadConstraint (namespaces in [shop]): its pods are not "
        "rebalanced by this policy"
    )
    assert '# SCOPE: narrower, profiles[0]: profile "shop" also enables' in out
    document = yaml.safe_load(SEVERAL)
    assert from_descheduler(document, "s", "shop").policy.namespaces_include == ("shop",)
    with pytest.raises(InputError) as info:
        from_descheduler(document, "s", "nightly")
    assert info.value.problems == (
        '--profile: no profile is named "nightly" (profiles: shop, batch)',
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("90s", 90.0),
        ("5m", 300.0),
        ("1h30m0s", 5400.0),
        ("1.5h", 5400.0),
        ("500ms", 0.5),
        ("2h45m30.5s", 9930.5),
        ("+1m", 60.0),
        ("1500us", 0.0015),
        ("1000000ns", 0.001),
        ("3µs", 3e-6),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    """metav1.Duration strings read as Go's time.ParseDuration reads them."""
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "-1m", "1d", "5 m", "m", "1h-5m", "1.2.3s"])
def test_go_durations_refused(text: str) -> None:
    """Negative, unitless (but 0), unknown units and stray characters are refused."""
    with pytest.raises(ValueError, match=r"duration|negative"):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("text", "labels", "expressions"),
    [
        ("", {}, []),
        ("node=node1", {"node": "node1"}, []),
        ("node==node1, tier=web", {"node": "node1", "tier": "web"}, []),
        ("role=", {"role": ""}, []),
        ("pool!=spot", {}, [("pool", "NotIn", ("spot",))]),
        ("gpu", {}, [("gpu", "Exists", ())]),
        ("!gpu", {}, [("gpu", "DoesNotExist", ())]),
        (
            "zone in (a, b),tier notin (x)",
            {},
            [("zone", "In", ("a", "b")), ("tier", "NotIn", ("x",))],
        ),
        ("a=1,a=2", {"a": "1"}, [("a", "In", ("2",))]),
        ("example.com/x in (a)", {}, [("example.com/x", "In", ("a",))]),
    ],
)
def test_string_node_selectors(
    text: str, labels: dict[str, str], expressions: list[tuple[str, str, tuple[str, ...]]]
) -> None:
    """The descheduler's string selectors (labels.Parse syntax) as label selectors."""
    expected = LabelSelector(
        tuple(sorted(labels.items())),
        tuple(Requirement(k, op, v) for k, op, v in expressions),  # type: ignore[arg-type]
    )
    assert parse_label_selector(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cpu>4", "numeric comparison"),
        ("cpu<4", "numeric comparison"),
        ("zone in ()", "needs at least one value"),
        ("bad key!=x", "does not parse"),
        ("zone=a b", "does not parse"),
        ("-x=1", "not a label key"),
        ("x=not valid!", "does not parse"),
        ("x=-a", "not a label value"),
    ],
)
def test_string_node_selectors_refused(text: str, message: str) -> None:
    """Selectors with no label selector counterpart, or that do not parse, are refused."""
    with pytest.raises(ValueError, match=message):
        parse_label_selector(text)


def test_two_selectors_together() -> None:
    """ANDing selectors: labels and expressions of both; a key pinned to two values becomes
    an In per value (nothing matches both, as nothing matches the two selectors); None is
    everything."""
    web = LabelSelector((("app", "web"),), (Requirement("tier", "Exists"),))
    shop = LabelSelector((("app", "shop"), ("team", "a")))
    assert and_selectors(None, web) == web
    assert and_selectors(web, None) == web
    assert and_selectors(None, None) is None
    assert and_selectors(web, shop) == LabelSelector(
        (("app", "web"), ("team", "a")),
        (Requirement("tier", "Exists"), Requirement("app", "In", ("shop",))),
    )


# --- hostile names: nothing in a name reaches the policy ---------------------------------------

TOPOLOGY = "RemovePodsViolatingTopologySpreadConstraint"


def _spread_profile(name: str, namespace: str, other_plugin: str | None = None) -> dict[str, Any]:
    configs: list[dict[str, Any]] = [{"name": other_plugin, "args": {}}] if other_plugin else []
    configs.append({"name": TOPOLOGY, "args": {"namespaces": {"include": [namespace]}}})
    return {"name": name, "pluginConfig": configs, "plugins": {"balance": {"enabled": [TOPOLOGY]}}}


def _hostile_policy(
    spread: list[tuple[str, str]], idle: str, plugin: str, key: str, total: int
) -> dict[str, Any]:
    """A DeschedulerPolicy whose names are hostile: the profiles ``spread`` (name, namespace)
    enable the plugin (the first also configures ``plugin``), ``idle`` does not, ``key`` is a
    top-level key the descheduler ignores."""
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictTotal": total,
        key: 1,
        "profiles": [
            _spread_profile(spread[0][0], spread[0][1], plugin),
            {"name": idle, "plugins": {}},
            *(_spread_profile(name, namespace) for name, namespace in spread[1:]),
        ],
    }


def _expected(namespace: str, total: int) -> dict[str, Any]:
    """The policy the import decides for one profile of :func:`_hostile_policy`, written by hand
    from the mapping (module docstring of rebalancer.core.fromdescheduler): the plugin's
    default constraints and topologyBalanceNodeFit, its namespaces, the DefaultEvictor's
    defaults stated, and the limit."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "constraints": ["DoNotSchedule"],
        "nodeFit": True,
        "namespaces": {"include": [namespace], "exclude": []},
        "evictLocalStoragePods": False,
        "evictPodsWithPVC": True,
        "evictPodsWithResourceClaims": True,
        "limits": {"total": total, "perNode": None, "perNamespace": None, "perWorkload": None},
        "ignorePodsWithoutPDB": False,
    }


_LINE_BREAKS = re.compile("[\r\x85\u2028\u2029\v\f]")


def _assert_exactly(text: str, expected: dict[str, Any], output: str, check: Path) -> None:
    """``text`` holds ``expected`` and nothing else, every comment stays one line, and
    `policy check` of it passes with that policy."""
    assert not _LINE_BREAKS.search(text)  # YAML ends a comment at these too
    if output == "helm-values":
        inner = {k: v for k, v in expected.items() if k not in ("apiVersion", "kind")}
        assert yaml.safe_load(text) == {"policy": inner}
        return
    assert yaml.safe_load(text) == expected
    check.write_text(text, encoding="utf-8")
    assert main(["policy", "check", str(check)]) == EXIT_OK
    assert load_policy(text, "imported") == policy_from_document(expected, "expected")


_IGNORED = {"apiVersion", "kind", "profiles", "maxNoOfPodsToEvictTotal"}


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(hostile_names(), min_size=5, max_size=5),
    held=st.lists(hostile_names(), min_size=2, max_size=2),
    file=hostile_names(5, any_text=False),
    output=st.sampled_from(["policy", "helm-values"]),
)
def test_hostile_names_cannot_add_a_key(
    names: list[str],
    held: list[str],
    file: str,
    output: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Profile, plugin, key, ConfigMap, data key and file names holding line breaks (LF, CR,
    NEL, U+2028, U+2029), comment and document markers, bidi overrides and policy keys
    (`evictBarePods: true`, ...) are written inert: the output, read back and through
    `policy check`, holds exactly the policy the import decides (written by hand), for one
    profile on stdout and for --all-profiles in files."""
    spread, idle, plugin, key = names[0], names[2], names[3], names[4]
    assume(key not in _IGNORED and plugin not in (TOPOLOGY, "DefaultEvictor"))
    capsys.readouterr()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        policy = _hostile_policy([(spread, "shop")], idle, plugin, key, 7)
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": held[0]},
            "data": {held[1]: yaml.safe_dump(policy)},
        }
        source = folder / ("in" + file.replace("/", "_"))
        source.write_text(yaml.safe_dump(configmap), encoding="utf-8")
        assert main(["policy", "import", "--output", output, str(source)]) == EXIT_OK
        out, err = capsys.readouterr()
        _assert_exactly(out, _expected("shop", 7), output, folder / "check.yaml")
        assert len(err.splitlines()) == 6  # one line per note: the ignored key, the idle
        # profile, the plugin, PVC, resourceClaims, limits

        two = _hostile_policy(
            [("a" + spread, "shop"), ("b" + names[1], "blog")], idle, plugin, key, 7
        )
        source.write_text(yaml.safe_dump(two), encoding="utf-8")
        target = folder / "out"
        code = main(
            ["policy", "import", "--output", output, "--all-profiles", str(target), str(source)]
        )
        assert code == EXIT_OK
        out, err = capsys.readouterr()
        written = [Path(line) for line in out.splitlines()]
        assert len(written) == 2
        assert all(path.parent == target for path in written)
        for path, namespace, total in zip(written, ("shop", "blog"), (4, 3), strict=True):
            text = path.read_text(encoding="utf-8")
            _assert_exactly(text, _expected(namespace, total), output, folder / "check.yaml")


# --- --all-profiles: linear, and all files or none ----------------------------------------------


def _many(profiles: int) -> dict[str, Any]:
    """N spread profiles, one namespace each, and a limit of 2N (as bench/import_profiles.py)."""
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictTotal": 2 * profiles,
        "profiles": [_spread_profile(f"spread-{i}", f"ns-{i}") for i in range(profiles)],
    }


@pytest.mark.parametrize("sizes", [(10, 30, 90)])
def test_all_profiles_costs_grow_with_the_profiles_not_their_square(
    sizes: tuple[int, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--all-profiles imports each profile once and writes per profile a bounded number of
    bytes (files and stderr), at 10, 30 and 90 profiles.

    Before, each policy re-imported every other profile to name its scope in a note, and its
    header named them all: `python -m bench.import_profiles` (N spread profiles, one
    namespace each) measured 100 profiles 7.9 s, 28 MiB peak RSS, 3.5 MB on stderr and 3.5 MB
    of files; 300: 69 s, 65 MiB, 31.8 MB, 30.9 MB; 1,000: 1,827 s, 484 MiB, 353 MB,
    342 MB.
    After: 100: 4.8 s, 25 MiB, 0.12 MB, 0.17 MB;
    300: 10 s, 29 MiB, 0.36 MB, 0.50 MB; 1,000: 30 s, 40 MiB, 1.2 MB, 1.7 MB (exit 0
    throughout; a loaded 2-core machine).
    """
    calls: list[int] = []
    real = fromdescheduler._import_profile

    def counted(walk: Any, raw: Any, chosen: Any) -> None:
        calls.append(chosen[0])
        real(walk, raw, chosen)

    monkeypatch.setattr(fromdescheduler, "_import_profile", counted)
    per_profile = []
    for size in sizes:
        source = tmp_path / f"many-{size}.yaml"
        source.write_text(yaml.safe_dump(_many(size)))
        folder = tmp_path / f"out-{size}"
        calls.clear()
        assert main(["policy", "import", "--all-profiles", str(folder), str(source)]) == EXIT_OK
        out, err = capsys.readouterr()
        assert sorted(calls) == list(range(size))  # each profile imported once
        assert len(out.splitlines()) == size
        files = sorted(folder.iterdir())
        assert len(files) == size
        written = sum(len(path.read_bytes()) for path in files)
        per_profile.append((written + len(err)) / size)
    assert max(per_profile) <= 1.2 * min(per_profile), per_profile


def _two(tmp_path: Path) -> Path:
    source = tmp_path / "two.yaml"
    source.write_text(SEVERAL)
    return source


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


def test_a_target_that_cannot_be_written_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target that is a folder, a DIR that is a file, and a profile name too long for a file
    name: exit 2 naming the path, and no file written (nor a temporary one left)."""
    source = _two(tmp_path)
    folder = tmp_path / "out"
    (folder / "batch.yaml").mkdir(parents=True)
    assert main(["policy", "import", "--all-profiles", str(folder), str(source)]) == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{folder / 'batch.yaml'}: exists and is not a file; nothing was written" in err
    assert _left(folder) == ["batch.yaml"]

    plain = tmp_path / "plain"
    plain.write_text("keep\n")
    assert main(["policy", "import", "--all-profiles", str(plain), str(source)]) == EXIT_BAD_INPUT
    assert f"{plain}: exists and is not a folder; nothing was written" in capsys.readouterr().err
    assert plain.read_text() == "keep\n"

    long = tmp_path / "long.yaml"
    long.write_text(SEVERAL.replace("name: batch", "name: " + "b" * 300))
    fresh = tmp_path / "fresh" / "policies"
    assert main(["policy", "import", "--all-profiles", str(fresh), str(long)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{fresh / ('b' * 300 + '.yaml')}: cannot be written: File name too long; nothing" in err
    assert not (tmp_path / "fresh").exists()  # the folders it made are gone too


def test_all_profiles_replaces_earlier_files_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files already there are replaced, and nothing else is left in the folder."""
    source = _two(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "shop.yaml").write_text("old\n")
    assert main(["policy", "import", "--all-profiles", str(folder), str(source)]) == EXIT_OK
    capsys.readouterr()
    assert _left(folder) == ["batch.yaml", "shop.yaml"]
    assert yaml.safe_load((folder / "shop.yaml").read_text())["namespaces"]["include"] == ["shop"]
