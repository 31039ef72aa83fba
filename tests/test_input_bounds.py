"""Every malformed input exits 2 with a line naming the field or flag and the value: nesting
depth, integer and duration ranges, kubeconfigs, binary input. Nothing is sent to a cluster."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from hypothesis import given
from hypothesis import strategies as st

from rebalancer.cli.main import main
from rebalancer.cluster.api import kubeclient
from rebalancer.cluster.inputs import MAX_FLOW_DEPTH, MAX_YAML_BYTES, _flow_depth_problem
from rebalancer.cluster.read.nesting import MAX_JSON_DEPTH, json_depth, too_deep
from rebalancer.cluster.read.snapshot import dump_objects, load_snapshot
from rebalancer.core import spread
from rebalancer.core.errors import EXIT_BAD_INPUT, EXIT_OK, InputError
from rebalancer.core.model import Snapshot
from rebalancer.core.policy import Policy, policy_from_document
from rebalancer.core.scope import NamespaceScope
from tests.builders import web_pod, zone_node
from tests.hostile import (
    bracketed_policy,
    bracketed_snapshot,
    service,
    skewed_cluster,
)
from tests.hostile import namespaces as hostile_namespaces

INT32_MAX = 2**31 - 1


@pytest.fixture(autouse=True)
def _logging_back_to_defaults() -> Iterator[None]:
    """A live command configures logging onto the captured stderr, which closes when the test
    ends: later tests must not log there."""
    yield
    structlog.reset_defaults()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything tries to connect to a cluster."""
    monkeypatch.setattr(kubeclient, "connect", lambda *a, **k: pytest.fail("connected"))


# --- how deep JSON nests ---------------------------------------------------------------------


def _depth(value: Any) -> int:
    """The oracle: nesting depth of a parsed value, by plain recursion."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_TEXT = st.text(alphabet='[]{}"\\ab\n', max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=30,
)


@given(_JSON, st.integers(min_value=0, max_value=8))
def test_too_deep_refuses_exactly_what_nests_past_the_limit(value: Any, limit: int) -> None:
    """The byte-level measure refuses a JSON text iff its parsed value nests deeper than the
    limit, and gives its exact depth, whatever brackets, quotes and backslashes its strings
    hold."""
    text = json.dumps(value).encode()
    depth = _depth(value)
    assert (too_deep(text, limit) is not None) == (depth > limit)
    assert json_depth(text, 64) == depth


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        (b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, False),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), True),
        (b'{"a":"' + b"[" * 1000 + b'"}', False),  # brackets in a string are text
        # closing brackets in a string do not hide the depth that follows
        (b'["' + b"]" * 500 + b'",' + b"[" * 200 + b"]" * 200 + b"]", True),
        (b'["\\\\", "\\"]", ' + b"[" * 200 + b"]" * 200 + b"]", True),
        (b"[{" * 65 + b"}]" * 65, True),  # 130 levels, two kinds alternating
        (b"[" * 100_000, True),  # never closed
    ],
    ids=[
        "at-the-limit",
        "one-over",
        "in-a-string",
        "closers-in-a-string",
        "escapes",
        "alternating",
        "unclosed",
    ],
)
def test_too_deep_is_exact_at_the_limit(text: bytes, deep: bool) -> None:
    """Exactly MAX_JSON_DEPTH levels pass, one more is refused, however the brackets mix."""
    assert (too_deep(text) is not None) == deep


def _snapshot(tmp_path: Path, objects: list[dict[str, Any]], fmt: str = "list") -> Path:
    path = tmp_path / "snapshot.json"
    if fmt == "lines":  # rebalancer snapshot's layout, written by hand (any integer fits)
        head, tail = dump_objects([], "json").splitlines()
        items = ",\n".join(json.dumps(o, sort_keys=True, separators=(",", ":")) for o in objects)
        path.write_text(f"{head.decode()}\n{items}\n{tail.decode()}\n")
    else:
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def _cluster() -> list[dict[str, Any]]:
    return [
        zone_node("n1", "a"),
        zone_node("n2", "b"),
        web_pod("w1", "n1", "u1"),
        web_pod("w2", "n1", "u2"),
    ]


@pytest.mark.parametrize("fmt", ["list", "lines"])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 100_000])
def test_deep_json_in_a_field_nobody_reads_exits_2(
    fmt: str, depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON nested too deep, even in a field rebalancer never reads, is refused before it is
    parsed: exit 2 naming the file and the limit, in both snapshot layouts, never a
    RecursionError."""
    objects = _cluster()
    objects[2]["metadata"]["annotations"] = {"x": "y"}
    path = _snapshot(tmp_path, objects, fmt)
    text = path.read_text().replace(
        '"annotations"', '"junk": ' + "[" * depth + "]" * depth + ', "annotations"'
    )
    path.write_text(text)
    code, err = _run(["plan", "--snapshot", str(path)], capsys)
    assert code == EXIT_BAD_INPUT
    assert str(path) in err and f"JSON nested more than {MAX_JSON_DEPTH} deep" in err
    assert "RecursionError" not in err


@pytest.mark.parametrize("fmt", ["list", "lines"])
def test_json_nested_up_to_the_limit_still_plans(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A field nested within the limit is read past as before (exit 0)."""
    objects = _cluster()
    objects[2]["metadata"]["annotations"] = {"x": "y"}
    path = _snapshot(tmp_path, objects, fmt)
    junk = "[" * (MAX_JSON_DEPTH - 10) + "]" * (MAX_JSON_DEPTH - 10)
    path.write_text(path.read_text().replace('"annotations"', f'"junk": {junk}, "annotations"'))
    code, err = _run(["plan", "--snapshot", str(path)], capsys)
    assert code == EXIT_OK, err


# --- int32 and int64 API fields ----------------------------------------------------------------


def _constraint(pod: dict[str, Any]) -> dict[str, Any]:
    constraint: dict[str, Any] = pod["spec"]["topologySpreadConstraints"][0]
    return constraint


@pytest.mark.parametrize(
    ("change", "field", "value"),
    [
        (lambda o: _constraint(o[2]).update(maxSkew=INT32_MAX + 1), "maxSkew", INT32_MAX + 1),
        # orjson reads integers past 64 bits as floats: the converter names the float.
        (lambda o: _constraint(o[2]).update(maxSkew=2**70), "maxSkew", float(2**70)),
        (lambda o: _constraint(o[2]).update(minDomains=INT32_MAX + 1), "minDomains", 2**31),
        (lambda o: o[2]["spec"].update(priority=INT32_MAX + 1), "spec.priority", 2**31),
        (lambda o: o[2]["spec"].update(priority=-(2**31) - 1), "spec.priority", -(2**31) - 1),
        (
            lambda o: o[2]["spec"].update(terminationGracePeriodSeconds=2**63),
            "spec.terminationGracePeriodSeconds",
            2**63,
        ),
        (
            lambda o: o.append(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "huge"},
                    "value": INT32_MAX + 1,
                }
            ),
            "value",
            INT32_MAX + 1,
        ),
        (
            lambda o: o.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": "b", "namespace": "shop"},
                    "spec": {"selector": {"matchLabels": {"app": "web"}}},
                    "status": {"disruptionsAllowed": INT32_MAX + 1},
                }
            ),
            "status.disruptionsAllowed",
            INT32_MAX + 1,
        ),
    ],
    ids=[
        "maxSkew-int32",
        "maxSkew-huge",
        "minDomains",
        "priority-high",
        "priority-low",
        "grace-int64",
        "priorityclass",
        "pdb",
    ],
)
@pytest.mark.parametrize("fmt", ["list", "lines"])
def test_api_integers_out_of_their_range_exit_2(
    change: Any, field: str, value: float, fmt: str, tmp_path: Path
) -> None:
    """An int32 (or int64) field the API server could never have stored is refused, naming
    the field and the value, through either decoder."""
    objects = copy.deepcopy(_cluster())
    change(objects)
    path = _snapshot(tmp_path, objects, fmt)
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert caught.value.exit_code == EXIT_BAD_INPUT
    problem = "\n".join(caught.value.problems)
    assert field in problem and str(value) in problem


def test_the_largest_int32_values_still_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """maxSkew and minDomains at the int32 maximum are valid (exit 0)."""
    objects = _cluster()
    for pod in objects[2:]:
        _constraint(pod).update(maxSkew=INT32_MAX, minDomains=INT32_MAX)
    code, err = _run(["plan", "--snapshot", str(_snapshot(tmp_path, objects))], capsys)
    assert code == EXIT_OK, err


# --- binary input ----------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["/dev/zero", "file"])
def test_binary_input_is_refused_before_it_is_read(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/zero, or a large file of NULs, is refused at its first bytes (exit 2, naming the
    file and the offset of the NUL), not read up to the size cap first."""
    path = source
    if source == "file":
        sparse = tmp_path / "zeros.json"
        with sparse.open("wb") as fh:
            fh.truncate(512 * 1024**2)  # sparse: no disk used
        path = str(sparse)
    code, err = _run(["plan", "--snapshot", path], capsys)
    assert code == EXIT_BAD_INPUT
    if source == "/dev/zero":  # refused for what it is, before a byte is read
        assert "/dev/zero: 1 problem(s):\n  - is a character device, not a file" in err
    else:
        assert path in err and "not text: a NUL byte at offset 0" in err


def test_utf16_text_is_not_taken_for_binary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A UTF-16 snapshot with its byte-order mark (PowerShell's redirection) still loads."""
    path = tmp_path / "utf16.yaml"
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": _cluster()})
    path.write_bytes(text.encode("utf-16"))
    code, err = _run(["plan", "--snapshot", str(path)], capsys)
    assert code == EXIT_OK, err


# --- kubeconfig ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("apiVersion: v1\nclusters: [\n  - {", "line 3, column 3: invalid YAML"),
        ("clusters:\n  " + "- " * 20_000 + "x\n", "invalid YAML"),
        ("[" * 5000 + "]" * 5000, "nested more than"),
        ("- just\n- a list\n", "is not a kubeconfig"),
        ("apiVersion: v1\nclusters: 5\n", "cannot load cluster credentials"),
    ],
    ids=["unclosed", "deep-block", "deep-flow", "a-list", "clusters-not-a-list"],
)
def test_a_malformed_kubeconfig_exits_2_naming_it(
    text: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kubeconfig that does not parse, or is no kubeconfig, is bad input (exit 2) naming the
    file, not an unexpected error: the client library is never handed it unchecked."""
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    code, err = _run(["plan", "--kubeconfig", str(path)], capsys)
    assert code == EXIT_BAD_INPUT, err
    assert str(path) in err and problem in err


def test_a_binary_kubeconfig_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/zero as the kubeconfig is refused at its first chunk."""
    code, err = _run(["plan", "--kubeconfig", "/dev/zero"], capsys)
    assert code == EXIT_BAD_INPUT
    assert "/dev/zero" in err and "is a character device, not a file" in err


# --- flags -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag", "value"),
    [
        (["run", "--max-waves", "99999999999999999999"], "--max-waves", "99999999999999999999"),
        (["run", "--max-waves", "0"], "--max-waves", "0"),
        (["run", "--max-waves", "1001"], "--max-waves", "1001"),
        (["run", "--lease-duration", "99999999999999999999h"], "--lease-duration", "9999999999"),
        (["run", "--lease-duration", "2s"], "--lease-duration", "2s"),
        (["run", "--lease-duration", "25h"], "--lease-duration", "25h"),
        (["run", "--wave-timeout", "0s"], "--wave-timeout", "0s"),
        (["run", "--wave-timeout", "500ms"], "--wave-timeout", "500ms"),
        (["run", "--wave-timeout", "25h"], "--wave-timeout", "25h"),
        (["run", "--interval", "0s"], "--interval", "0s"),
        (["run", "--interval", "721h"], "--interval", "721h"),
        (["run", "--cooldown", "721h"], "--cooldown", "721h"),
        (["run", "--connect-timeout", "0s"], "--connect-timeout", "0s"),
        (["run", "--connect-timeout", "11m"], "--connect-timeout", "11m"),
        (["plan", "--request-timeout", "2h"], "--request-timeout", "2h"),
        (["snapshot", "--read-deadline", "25h"], "--read-deadline", "25h"),
        (["plan", "--max-objects", "0"], "--max-objects", "0"),
        (["plan", "--max-objects", "100000001"], "--max-objects", "100000001"),
        (
            ["--max-input-bytes", "99999999999999999999", "policy", "check", "-"],
            "--max-input-bytes",
            "99999999999999999999",
        ),
    ],
)
def test_every_flag_has_a_range(
    argv: list[str],
    flag: str,
    value: str,
    no_cluster: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A number or duration out of its flag's range exits 2 before any request, naming the
    flag and the value given."""
    code, err = _run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert flag in err and value in err


def test_a_zero_cooldown_is_allowed(no_cluster: None, capsys: pytest.CaptureFixture[str]) -> None:
    """--cooldown 0s (count no earlier evictions) is in range: the run goes on to connect."""
    with pytest.raises(pytest.fail.Exception, match="connected"):
        main(["run", "--cooldown", "0s"])


# --- what is not a file ----------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "data" / "cli_snapshot.yaml"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real command in its own process: a hang ends the test at the timeout, not never."""
    return subprocess.run(
        [sys.executable, "-m", "rebalancer", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--snapshot", "{fifo}"],
        ["plan", "--snapshot", str(SNAPSHOT), "--policy", "{fifo}"],
        ["policy", "check", "{fifo}"],
    ],
)
def test_a_fifo_nobody_writes_is_refused_without_waiting(tmp_path: Path, argv: list[str]) -> None:
    """A FIFO as snapshot or policy, with no writer: opening it used to wait for one for ever.
    Now the open does not wait, nothing is read, and the command exits 2 naming it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = _cli(*(a.format(fifo=fifo) for a in argv))
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert f"{fifo}: 1 problem(s):\n  - is a pipe and nothing was written to it" in done.stderr


def test_a_pipe_with_a_writer_is_read_as_standard_input_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A pipe a writer holds open, named by path (``--snapshot <(kubectl get ... -o json)``
    gives ``/dev/fd/63``), is read like standard input: the plan is the one the file gives."""
    data = SNAPSHOT.read_bytes()
    read_end, write_end = os.pipe()

    def write() -> None:
        with os.fdopen(write_end, "wb") as out:
            out.write(data)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        code = main(["plan", "--snapshot", f"/dev/fd/{read_end}", "-o", "json"])
        piped, err = capsys.readouterr()
    finally:
        thread.join(10)
        os.close(read_end)
    assert code == EXIT_OK, err
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-o", "json"]) == EXIT_OK
    assert capsys.readouterr().out == piped


@pytest.mark.parametrize(
    ("path", "what"),
    [("{tmp}", "a directory"), ("/dev/zero", "a character device"), ("/dev/null", None)],
)
@pytest.mark.parametrize("flag", ["--snapshot", "--policy"])
def test_what_is_not_a_file_is_refused_for_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, what: str | None, flag: str
) -> None:
    """A directory or a device as snapshot or policy: exit 2 naming it and what it is."""
    path = path.format(tmp=tmp_path)
    extra = [] if flag == "--snapshot" else ["--snapshot", str(SNAPSHOT)]
    code, err = _run(["plan", flag, path, *extra], capsys)
    assert code == EXIT_BAD_INPUT
    what = what or "a character device"
    assert f"{path}: 1 problem(s):\n  - is {what}, not a file; give a file, or - to read" in err


# --- YAML costs its size many times over: refused above MAX_YAML_BYTES ------------------------


def test_yaml_above_its_cap_is_refused_with_the_command_that_converts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A YAML snapshot one byte over MAX_YAML_BYTES (16 MiB; a comment pads it) exits 2 with
    the command that converts it to JSON; the same objects as JSON plan."""
    text = SNAPSHOT.read_text()
    big = tmp_path / "big.yaml"
    big.write_text(text + "#" * (MAX_YAML_BYTES + 1 - len(text.encode()) - 1) + "\n")
    assert big.stat().st_size == MAX_YAML_BYTES + 1
    code, err = _run(["plan", "--snapshot", str(big)], capsys)
    assert code == EXIT_BAD_INPUT
    assert f"YAML larger than {MAX_YAML_BYTES} bytes ({MAX_YAML_BYTES + 1})" in err
    assert (
        f"convert it to JSON, which costs about twice its size: yq . {big} > snapshot.json" in err
    )
    converted = tmp_path / "big.json"
    converted.write_text(json.dumps(yaml_load(text)))
    code, err = _run(["plan", "--snapshot", str(converted)], capsys)
    assert code == EXIT_OK, err


def test_yaml_at_its_cap_still_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exactly MAX_YAML_BYTES of YAML is read as ever."""
    text = SNAPSHOT.read_text()
    at_cap = tmp_path / "at-cap.yaml"
    at_cap.write_text(text + "#" * (MAX_YAML_BYTES - len(text.encode()) - 1) + "\n")
    assert at_cap.stat().st_size == MAX_YAML_BYTES
    code, err = _run(["plan", "--snapshot", str(at_cap)], capsys)
    assert code == EXIT_OK, err


def test_a_policy_above_the_yaml_cap_is_refused_whatever_the_input_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-input-bytes raises the policy's cap too, but never above the YAML cap."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("#" * (MAX_YAML_BYTES + 10) + "\n")
    flags = ["--max-input-bytes", str(2 * MAX_YAML_BYTES)]
    code, err = _run([*flags, "policy", "check", str(policy)], capsys)
    assert code == EXIT_BAD_INPUT
    assert f"{policy}: 1 problem(s):\n  - YAML larger than {MAX_YAML_BYTES} bytes" in err


def yaml_load(text: str) -> Any:
    return yaml.safe_load(text)


# --- brackets that are no flow collection -----------------------------------------------------


@pytest.mark.parametrize("brackets", [1001, 20_000, 200_000])
def test_brackets_in_comments_and_strings_are_not_nesting(
    tmp_path: Path, brackets: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``[`` in a comment, a quoted or a plain string opens no flow collection: a policy
    and a YAML snapshot holding 1,001 to 200,000 of them load. They were refused, exit 2,
    "nested more than 1000 deep" (1,001 ``[``: 1.7 s); now `policy check` of a 1 MB policy
    with a 1,000,000-``[`` comment exits 0 in 6.8 s, 28 MB (a 1 MB comment of ``#`` takes
    4.9 s), `plan` of a 3 MB snapshot holding three such runs 4.9 s, 35 MB."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(bracketed_policy(brackets))
    code, err = _run(["policy", "check", str(policy)], capsys)
    assert (code, err) == (EXIT_OK, f"{policy}: ok\n")
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(bracketed_snapshot(brackets))
    code = main(["plan", "--snapshot", str(snapshot), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert len(json.loads(out)["evictions"]) == 2


@pytest.mark.parametrize("depth", [MAX_FLOW_DEPTH + 1, 3_000, 20_000])
def test_real_nesting_is_refused_reading_only_up_to_the_limit(
    tmp_path: Path, depth: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Flow collections nested past the limit are refused (exit 2), comment or not, and
    telling them from brackets in comments reads tokens only up to the first collection past
    the limit: YAML's scanner costs the depth per token, so reading on would be quadratic."""
    read: list[object] = []

    class Counting(yaml.SafeLoader):
        def get_token(self) -> Any:
            token = super().get_token()  # type: ignore[no-untyped-call]  # untyped in the stubs
            read.append(token)
            return token

    text = bracketed_policy(MAX_FLOW_DEPTH + 1) + "x: " + "[" * depth + "]" * depth + "\n"
    problem = _flow_depth_problem(text.encode(), lambda: Counting(text))
    assert problem == f"flow collections ([ or {{) nested more than {MAX_FLOW_DEPTH} deep"
    # stream start, block mapping start, then three keys and values (two scalars each), the
    # fourth key and its value indicator, then the openers
    assert len(read) == 2 + 3 * 4 + 3 + MAX_FLOW_DEPTH + 1
    if depth > MAX_FLOW_DEPTH + 1:
        return  # the command line reads the same way
    deep = tmp_path / "deep.yaml"
    deep.write_text(text)
    code, err = _run(["policy", "check", str(deep)], capsys)
    assert code == EXIT_BAD_INPUT
    assert f"{deep}: 1 problem(s):\n  - {problem}\n" == err


# --- policies whose lists multiplied ----------------------------------------------------------


def _loaded(tmp_path: Path, objects: list[dict[str, Any]]) -> Snapshot:
    return load_snapshot(_snapshot(tmp_path, objects))


def _policy(**fields: Any) -> Policy:
    head = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy"}
    return policy_from_document({**head, **fields}, "policy")


@pytest.mark.parametrize("count", [50, 400, 2000])
def test_default_constraints_cost_linear_work(
    tmp_path: Path, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of 13 pods gets every one of ``count`` defaultConstraints, each a view that needs
    all ``count`` keys on a node; the keys and each eligibility are built once per pod, not
    once per constraint (it was 13 x count rebuilds of count keys: `plan` 27 s at 1,000 and
    147 s at 2,000 on a loaded machine, 72 s at 5,000 idle; now 4.3 s, 8.0 s and 15 s, of
    which the policy's YAML parse is 10.5 s at 5,000, 55 MB)."""
    keys = [f"example.com/k{i}" for i in range(count)]
    objects = [*skewed_cluster(13, constrained=False), service("web", {"app": "web"})]
    for node, zone in ((objects[0], "a"), (objects[1], "b")):
        node["metadata"]["labels"].update(dict.fromkeys(keys, zone))
    defaults = [
        {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway"} for key in keys
    ]
    built: list[object] = []
    eligibility_for = spread.eligibility_for

    def counted(*args: Any) -> spread.Eligibility:
        built.append(args)
        return eligibility_for(*args)

    monkeypatch.setattr(spread, "eligibility_for", counted)
    analysis = spread.analyze(_loaded(tmp_path, objects), _policy(defaultConstraints=defaults))
    assert len(built) == 13  # one soft eligibility per pod, whatever the count
    assert sorted(v.spec.topology_key for v in analysis.views) == sorted(keys)
    for view in analysis.views:
        assert view.spec.eligibility.keys == tuple(sorted(keys))
        assert view.counts == {"a": 13}
        assert view.domains == ["a", "b"]


@pytest.mark.parametrize(
    ("values", "namespaces"), [(2_000, 1_000), (20_000, 5_000), (200_000, 20_000)]
)
def test_a_namespace_selector_costs_its_values_plus_the_namespaces(
    tmp_path: Path, values: int, namespaces: int
) -> None:
    """``namespaceLabelSelector`` ``team In [200,000 values]`` over 20,000 Namespace objects
    selects exactly the two whose team is listed, each namespace a set lookup. It was a scan
    of the list per namespace: 70,000 values over 10,000 namespaces took `plan` 108 s on a
    loaded machine (30 s idle), these sizes would take minutes; now 17 s and 77 MB, of which
    16 s are the YAML parse of the 0.6 MB policy."""
    objects = skewed_cluster() + hostile_namespaces(namespaces)
    listed = [f"v{i}" for i in range(values - 1)] + ["t0", f"t{namespaces - 1}"]
    selector = {"matchExpressions": [{"key": "team", "operator": "In", "values": listed}]}
    snapshot = _loaded(tmp_path, objects)
    scope = NamespaceScope.of(_policy(namespaceLabelSelector=selector), snapshot)
    assert scope.selected == {"shop", f"ns-{namespaces - 1}"}
    assert "shop" in scope
    assert "ns-1" not in scope
