"""scripts/push-image.sh's own logic: which build tool it picks, what it passes to it, what it
refuses, and what it prints for the chart.

The script runs with a PATH holding only the system commands it needs and stand-ins for
docker, podman, buildah and curl that record their argv (one line each, tab-separated) and
answer as the real tools do (docker push's "digest:" line, podman/buildah's --digestfile). What
is tested is the script's choices, not the tools: the e2e (e2e/test_release.py) pushes a real
image to a real registry."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Protocol

import pytest
import yaml

from tests.packaging_tools import ROOT, run, tool

SCRIPT = ROOT / "scripts" / "push-image.sh"
SYSTEM = ("bash", "sed", "head", "tail", "cat", "mktemp", "rm", "dirname", "realpath", "git")

# A stand-in: logs "name<TAB>arg<TAB>arg..." and answers like the real tool. Behaviour is set
# by environment variables the test gives: FAKE_DIGEST, FAKE_DOCKER_INFO (exit of `docker
# info`), FAKE_PUSH (exit of push), FAKE_CURL (exit of curl).
STUB = r"""#!BASH
name="${0##*/}"
{ printf '%s' "$name"; printf '\t%s' "$@"; echo; } >>"$FAKE_LOG"
args=("$@")
# buildah's global storage options come before its command
while [[ "${args[0]:-}" =~ ^--(root|runroot|storage-driver)$ ]]; do
  args=("${args[@]:2}")
done
cmd="${args[0]:-}"
if [[ $name == curl ]]; then
  rc="${FAKE_CURL:-0}"
  [[ $rc == 0 ]] || echo "curl: ($rc) Failed to connect to the host: Connection refused" >&2
  exit "$rc"
fi
case "$cmd" in
  info) exit "${FAKE_DOCKER_INFO:-0}" ;;
  build|bud) echo "STEP 1/9: FROM base"; exit 0 ;;
  load) echo "Loaded image: example.test/base:1"; exit 0 ;;
  pull) echo "0123456789abcdef"; exit 0 ;;
  push)
    if [[ "${FAKE_PUSH:-0}" != 0 ]]; then
      echo "denied: requested access to the resource is denied" >&2; exit "$FAKE_PUSH"
    fi
    prev=""
    for a in "${args[@]}"; do
      [[ $prev == --digestfile ]] && printf '%s' "$FAKE_DIGEST" >"$a"
      prev="$a"
    done
    [[ $name == docker ]] && echo "0.1.0: digest: $FAKE_DIGEST size: 1784"
    exit 0 ;;
esac
echo "$name: unexpected command $cmd" >&2
exit 99
"""


class Push(Protocol):
    def __call__(self, *args: str, tools: tuple[str, ...] = ..., **env: str) -> Run: ...


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[str], log: Path, digest: str) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr
        self.digest = digest
        text = log.read_text() if log.exists() else ""
        self.calls = [line.split("\t") for line in text.splitlines()]

    def of(self, name: str) -> list[list[str]]:
        return [c[1:] for c in self.calls if c[0] == name]


@pytest.fixture
def push(tmp_path: Path) -> Push:
    """push(*args, tools=("docker", ...), **env) runs the script with those stand-ins only."""

    def go(*args: str, tools: tuple[str, ...] = ("docker", "podman", "buildah"),
           **env: str) -> Run:  # fmt: skip
        bin_dir = tmp_path / f"bin-{secrets.token_hex(4)}"
        bin_dir.mkdir()
        for name in SYSTEM:
            found = shutil.which(name)
            assert found, name
            (bin_dir / name).symlink_to(found)
        bash = shutil.which("bash")
        assert bash
        for name in (*tools, "curl"):
            stub = bin_dir / name
            stub.write_text(STUB.replace("#!BASH", f"#!{bash}"))
            stub.chmod(0o755)
        log = bin_dir / "calls.log"
        digest = "sha256:" + secrets.token_hex(32)
        full = {"PATH": str(bin_dir), "HOME": str(tmp_path), "FAKE_LOG": str(log),
                "FAKE_DIGEST": digest, "TMPDIR": str(tmp_path), **env}  # fmt: skip
        proc = subprocess.run(
            [bash, str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=60,
            check=False, cwd=tmp_path,
        )  # fmt: skip
        return Run(proc, log, digest)

    return go


def _builder(r: Run) -> str:
    """The one tool that was asked to build."""
    built = {c[0] for c in r.calls if {"build", "bud"} & set(c[1:])}
    assert len(built) == 1, r.calls
    return built.pop()


@pytest.mark.parametrize(
    ("tools", "env", "expected"),
    [
        (("docker", "podman", "buildah"), {}, "docker"),
        (("podman", "buildah"), {}, "podman"),
        (("buildah",), {}, "buildah"),
        (("docker", "buildah"), {"FAKE_DOCKER_INFO": "1"}, "buildah"),  # no docker daemon
        (("docker", "podman", "buildah"), {"FAKE_DOCKER_INFO": "1"}, "podman"),
    ],
)
def test_picks_docker_then_podman_then_buildah(
    push: Push, tools: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    r = push("--registry", "reg.example/platform", tools=tools, **env)
    assert r.code == 0, r.err
    assert _builder(r) == expected
    assert "push" in r.of(expected)[-1], r.calls  # the same tool pushes


def test_tool_flag_wins_over_the_preference(push: Push) -> None:
    r = push("--registry", "reg.example", "--tool", "buildah")
    assert r.code == 0, r.err
    assert _builder(r) == "buildah"
    assert r.of("docker") == [] and r.of("podman") == []


def test_tool_flag_naming_a_missing_tool_fails_and_builds_nothing(push: Push) -> None:
    r = push("--registry", "reg.example", "--tool", "podman", tools=("docker",))
    assert r.code == 1
    assert "--tool podman: podman is not on PATH" in r.err
    assert r.calls == []


def test_no_tool_names_every_tool_looked_for(push: Push) -> None:
    r = push("--registry", "reg.example", tools=())
    assert r.code == 1
    assert "no image build tool found: looked for docker, podman and buildah on PATH" in r.err
    assert r.calls == []
    r = push("--registry", "reg.example", tools=("docker",), FAKE_DOCKER_INFO="1")
    assert r.code == 1
    assert "docker is on PATH but its daemon does not answer" in r.err
    assert [c[0] for c in r.calls] == ["docker"] and r.calls[0][1:] == ["info"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--registry is required"),
        (("--registry",), "--registry needs a value"),
        (("--registry", "--plain-http"), "--registry needs a value"),
        (("--registry", "https://reg.example"), "--registry https://reg.example: give HOST"),
        (("--registry", "reg.example/"), "--registry reg.example/: give HOST"),
        (("--registry", "r.example", "--tool", "kaniko"), "--tool kaniko: one of docker podman"),
        (("--registry", "r.example", "--push"), "unknown argument --push"),
        (("--registry", "r.example", "--base", "a", "--base-archive", "b"), "give one"),
        (("--registry", "r.example", "--base-archive", "/no.tar"), "--base-archive /no.tar: no"),
        (("--registry", "r.example", "--values", "/no/v.yaml"), "--values /no/v.yaml: no dir"),
    ],
)  # fmt: skip
def test_bad_arguments_exit_2_naming_the_argument(
    push: Push, args: tuple[str, ...], message: str
) -> None:
    r = push(*args)
    assert r.code == 2, (r.code, r.err)
    assert message in r.err
    assert r.calls == []  # nothing built, nothing asked of the registry


def test_unreachable_registry_fails_before_building(push: Push) -> None:
    r = push("--registry", "reg.example:5000/platform", "--tool", "podman", FAKE_CURL="7")
    assert r.code == 1
    assert "registry reg.example:5000 unreachable (https://reg.example:5000/v2/)" in r.err
    assert "Connection refused" in r.err
    assert r.of("podman") == []


def test_an_answer_other_than_unreachable_is_not_fatal(push: Push) -> None:
    """A TLS complaint of curl (60: a CA only the build tool knows) does not stop the push."""
    r = push("--registry", "reg.example", "--tool", "podman", FAKE_CURL="60")
    assert r.code == 0, r.err
    assert "pushing anyway" in r.err


@pytest.mark.parametrize("name", ["docker", "podman", "buildah"])
def test_refused_push_fails_with_the_registry_s_answer(push: Push, name: str) -> None:
    r = push("--registry", "reg.example/team", "--tool", name, FAKE_PUSH="1")
    assert r.code == 1
    assert "reg.example/team refused the push of reg.example/team/rebalancer:" in r.err
    assert "denied: requested access to the resource is denied" in r.err
    assert f"{name} login reg.example" in r.err
    assert "IMAGE_DIGEST" not in r.out


def _version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("no version")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize("name", ["docker", "podman", "buildah"])
def test_build_and_push_arguments(push: Push, name: str) -> None:
    """The Dockerfile of the clone, the commit and its time as build args, the tag
    REGISTRY/rebalancer:<version>, the extra options after --, the plain-HTTP flags."""
    registry = "127.0.0.1:5000/guide"
    ref = f"{registry}/rebalancer:{_version()}"
    r = push("--registry", registry, "--tool", name, "--plain-http", "--", "--build-arg", "X=1")
    assert r.code == 0, r.err
    (build,) = [c for c in r.of(name) if "build" in c or "bud" in c]
    assert build[-5:] == ["-t", ref, "-f", str(ROOT / "Dockerfile"), str(ROOT)], build
    assert f"REBALANCER_COMMIT={_git('rev-parse', 'HEAD')}" in build
    epoch = max(int(_git("log", "-1", "--format=%ct")), 315532800)
    assert f"SOURCE_DATE_EPOCH={epoch}" in build
    assert build[build.index("X=1") - 1] == "--build-arg"
    assert not any(a.startswith("PYTHON_IMAGE=") for a in build)  # the Dockerfile's base
    (pushed,) = [c for c in r.of(name) if "push" in c]
    if name == "docker":
        assert pushed == ["push", ref]  # docker's daemon decides plain HTTP
    else:
        assert "--tls-verify=false" in pushed and ref in pushed
    if name == "buildah":
        assert pushed[-1] == f"docker://{ref}"
        assert build[:6] == ["--root", build[1], "--runroot", build[3], "--storage-driver", "vfs"]
    if name == "podman":
        assert ["--timestamp", str(epoch)] == build[1:3]
    (curl,) = r.of("curl")
    assert curl[-1] == "http://127.0.0.1:5000/v2/"


def test_https_is_the_default(push: Push) -> None:
    r = push("--registry", "reg.example", "--tool", "buildah")
    assert r.code == 0, r.err
    assert r.of("curl")[0][-1] == "https://reg.example/v2/"
    assert not any("--tls-verify=false" in c for c in r.of("buildah"))


@pytest.mark.parametrize(("name", "base"), [("buildah", "0123456789abcdef"),
                                            ("podman", "example.test/base:1")])  # fmt: skip
def test_base_archive_is_loaded_and_becomes_the_base(
    push: Push, tmp_path: Path, name: str, base: str
) -> None:
    archive = tmp_path / "base.tar"
    archive.write_bytes(b"not read by the stand-ins")
    r = push("--registry", "reg.example", "--tool", name, "--base-archive", str(archive))
    assert r.code == 0, r.err
    (build,) = [c for c in r.of(name) if "build" in c or "bud" in c]
    assert f"PYTHON_IMAGE={base}" in build


def test_docker_push_without_a_digest_fails(push: Push) -> None:
    r = push("--registry", "reg.example", "--tool", "docker", FAKE_DIGEST="none")
    assert r.code == 1
    assert "gave no digest" in r.err


@pytest.mark.parametrize("name", ["docker", "podman", "buildah"])
def test_prints_the_values_that_install_the_pushed_digest(
    push: Push, tmp_path: Path, name: str
) -> None:
    """The digest the tool reported reaches the values file, the printed YAML and the --set
    flags; the chart renders those values as the image pinned by that digest."""
    values = tmp_path / "image-values.yaml"
    r = push("--registry", "reg.example/platform", "--tool", name, "--values", str(values))
    assert r.code == 0, r.err
    want = {"image": {"repository": "reg.example/platform/rebalancer", "digest": r.digest}}
    assert yaml.safe_load(values.read_text()) == want
    printed = r.out.split("\n\n")
    assert yaml.safe_load(printed[1]) == want, r.out
    assert (
        f"--set image.repository=reg.example/platform/rebalancer --set image.digest={r.digest}"
        in r.out.splitlines()
    )
    assert r.out.splitlines()[-2:] == [
        "IMAGE_REPOSITORY=reg.example/platform/rebalancer",
        f"IMAGE_DIGEST={r.digest}",
    ]
    helm = tool("helm")
    rendered = run(helm, "template", "rebalancer", str(ROOT / "charts" / "rebalancer"),
                   "-f", str(values))  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    images = {
        c["image"]
        for doc in yaml.safe_load_all(rendered.stdout)
        if doc and doc.get("kind") == "CronJob"
        for c in doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    }
    assert images == {f"reg.example/platform/rebalancer:{_version()}@{r.digest}"}
