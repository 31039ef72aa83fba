"""The release, built as a user would build it (opt-in: --e2e; needs root for buildah).

``scripts/release.sh --registry`` against a registry started here on 127.0.0.1 (Debian's
docker-registry): the image is built twice with one image id, its SBOM lists every package of
requirements.lock at its locked version and the base's Debian packages, SHA256SUMS holds, the
image and the chart are in the registry, the printed ``helm install`` line pins the image by the
digest the registry serves, and ``rebalancer version`` in the image names this commit.

Then on real nodes (e2e/cluster/realnodes.py, containerd told the registry is plain HTTP): the
printed ``helm install`` line, run with the docs' descheduler values imported by ``rebalancer
policy import --output helm-values``, makes the kubelets pull the image by digest from the
registry; a Job from the CronJob Succeeds and evicts only in the imported scope; a PDB refusing
an eviction mid-run (429) leaves the Job Succeeded and the pod running.

The base image is the e2e's Debian base (e2e/image/build-rebalancer-image.sh): the Dockerfile's
own base, pinned by digest, lives in a registry this machine cannot reach.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.utils import canonicalize_name

from e2e.cluster.controlplane import build
from e2e.cluster.realnodes import RealNodeCluster, build_nodes, host_support
from e2e.test_live import audit_mark, wait_audit
from e2e.test_realnodes import APP, build_skew, counts, deployment, pdb, settle

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
IMAGE_SH = ROOT / "e2e" / "image" / "build-rebalancer-image.sh"
REGISTRY_SH = ROOT / "e2e" / "image" / "install-registry.sh"


def _load_check_lock() -> Any:
    """scripts/check_lock.py, imported (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("check_lock", ROOT / "scripts" / "check_lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_lock"] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


parse_lock = _load_check_lock().parse_lock
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)


def _version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def _last_lines(cmd: list[str], timeout: float) -> dict[str, str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        pytest.fail(f"{cmd[1] if len(cmd) > 1 else cmd[0]} failed:\n{proc.stdout}\n{proc.stderr}")
    print(proc.stdout)
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line[:40])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry on 127.0.0.1 (plain HTTP), storing into a temporary directory."""
    reason = host_support()
    if reason:
        pytest.skip(f"the release needs buildah as root: {reason}")
    binary = _last_lines(["bash", str(REGISTRY_SH)], timeout=1800)["REGISTRY"]
    port = _free_port()
    work = tmp_path_factory.mktemp("registry")
    config = work / "config.yml"
    config.write_text(
        json.dumps(
            {
                "version": 0.1,
                "storage": {"filesystem": {"rootdirectory": str(work / "data")}},
                "http": {"addr": f"127.0.0.1:{port}"},
                "log": {"level": "warn"},
            }
        )
    )
    proc = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the registry did not start")
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def release(registry: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """scripts/release.sh run once: its folder and the KEY=VALUE lines it printed."""
    if subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip():
        pytest.skip("the work tree has uncommitted changes: a release is built from a commit")
    syft = _last_lines(
        ["bash", str(ROOT / "scripts" / "build-gotool.sh"), "syft", "--path"], timeout=60
    )
    if not Path(syft["SYFT"]).is_file():
        pytest.skip(
            "syft is not built yet (scripts/build-gotool.sh syft; CI builds it in the background)"
        )
    base = _last_lines(["bash", str(IMAGE_SH)], timeout=3600)["BASE_TAR"]
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    out = tmp_path_factory.mktemp("release")
    env = {**os.environ, "PYTHON": sys.executable}
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "release.sh"),
            "--out",
            str(out),
            "--base-archive",
            base,
            "--registry",
            registry,
            "--plain-http",
            "--skip-plugin",
        ],
        capture_output=True,
        text=True,
        timeout=3600,
        env=env,
        check=False,
    )
    print(proc.stdout)
    print(f"release.sh took {time.monotonic() - t0:.0f}s")
    assert proc.returncode == 0, proc.stderr
    printed = dict(
        line.split("=", 1)
        for line in proc.stdout.splitlines()
        if line[:1].isupper() and "=" in line
    )
    printed["COMMIT"] = head  # the commit released, whatever is checked out later
    return out, printed


def test_release_folder_is_complete_and_checksummed(release: tuple[Path, dict[str, str]]) -> None:
    """Image, wheel, sdist, chart, SBOM and IMAGE_ID are there, and SHA256SUMS holds for each."""
    out, _ = release
    version = _version()
    expected = {
        f"rebalancer-{version}.oci.tar",
        f"rebalancer-{version}-py3-none-any.whl",
        f"rebalancer-{version}.tar.gz",
        f"rebalancer-{version}.tgz",
        "sbom.cdx.json",
        "IMAGE_ID",
    }
    sums = {}
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name] = digest
    assert expected <= set(sums), sorted(sums)
    for name, digest in sums.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name


def test_sbom_lists_every_locked_package_and_the_os_packages(
    release: tuple[Path, dict[str, str]],
) -> None:
    """The CycloneDX SBOM names every package of requirements.lock at its locked version, and
    the base's Debian packages (python3 among them)."""
    out, _ = release
    sbom: dict[str, Any] = json.loads((out / "sbom.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX"
    components = sbom.get("components", [])
    python = {
        (canonicalize_name(c["name"]), c.get("version"))
        for c in components
        if str(c.get("purl", "")).startswith("pkg:pypi/")
    }
    locked = parse_lock((ROOT / "requirements.lock").read_text())
    missing = sorted(
        f"{p.name}=={p.version}" for p in locked.values() if (p.name, p.version) not in python
    )
    assert missing == []
    assert (canonicalize_name("rebalancer"), _version()) in python
    debs = {c["name"] for c in components if str(c.get("purl", "")).startswith("pkg:deb/")}
    assert "python3" in debs or "python3.11" in debs, sorted(debs)[:20]


def test_registry_serves_the_digest_the_install_line_pins(
    release: tuple[Path, dict[str, str]], registry: str
) -> None:
    """The image's manifest digest in the registry is the one in the printed helm install line,
    and the chart is there under its version."""
    out, printed = release
    version = _version()
    request = urllib.request.Request(
        f"http://{registry}/v2/rebalancer/manifests/{version}",
        headers={"Accept": MANIFEST_TYPES},
        method="HEAD",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        served = response.headers["Docker-Content-Digest"]
    assert served == (out / "IMAGE_DIGEST").read_text().strip()
    line = printed["HELM_INSTALL"]
    assert f"oci://{registry}/charts/rebalancer --version {version}" in line
    assert f"--set image.repository={registry}/rebalancer --set image.digest={served}" in line
    with urllib.request.urlopen(f"http://{registry}/v2/charts/rebalancer/tags/list") as r:
        assert version in json.load(r)["tags"]
    # the released chart's default image is the one pushed, pinned by its digest
    with tarfile.open(out / f"rebalancer-{version}.tgz") as chart:
        member = chart.extractfile("rebalancer/values.yaml")
        assert member is not None
        image = yaml.safe_load(member.read())["image"]
    assert (image["repository"], image["digest"]) == (f"{registry}/rebalancer", served)
    assert image["tag"] == ""  # the chart's appVersion


def test_the_image_says_which_commit_it_is(
    release: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """`rebalancer version --client -o json` in the released image gives this commit and the
    project's version."""
    out, printed = release
    head = printed["COMMIT"]
    buildah = [
        shutil.which("buildah") or "buildah",
        "--root",
        str(tmp_path / "root"),
        "--runroot",
        str(tmp_path / "run"),
        "--storage-driver",
        "vfs",
    ]
    ctr = subprocess.run(
        [*buildah, "from", "-q", f"oci-archive:{out}/rebalancer-{_version()}.oci.tar"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout.strip()
    try:
        answer = subprocess.run(
            [
                *buildah,
                "run",
                "--isolation",
                "chroot",
                ctr,
                "--",
                "rebalancer",
                "version",
                "--client",
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    finally:
        subprocess.run([*buildah, "rm", ctr], capture_output=True, check=False)
    client = json.loads(answer)["clientVersion"]
    assert client == {"version": _version(), "commit": head, "python": client["python"]}


# -- the release installed on real nodes ----------------------------------------------------------
#
# The real-node cluster of e2e/cluster/realnodes.py, its containerd told that the registry above
# speaks plain HTTP (hosts.toml). The chart is installed with the `helm install` line
# release.sh printed, from the registry: no image is loaded into the nodes, each pulls the
# released image by digest. One install serves the scenarios below; each runs a Job from the
# CronJob (`kubectl create job --from`), the CronJob itself suspended.

RELEASE_NS = "rebalancer"
SA_USER = f"system:serviceaccount:{RELEASE_NS}:rebalancer"
SWITCH_LABEL = {"rebalance": "enabled"}  # the scope of the docs' worked switch


@pytest.fixture(scope="module")
def real(registry: str) -> Iterator[RealNodeCluster]:
    """Three real nodes whose containerd may pull from the release registry."""
    c = RealNodeCluster(build(quiet=True), build_nodes(quiet=True), real_nodes=3)
    c.start()
    print(f"\nrebalancer-e2e: real-node cluster up in {c.startup_seconds}s {c.startup_phases}")
    try:
        hosts = c.trust_registry(registry)
        print(f"containerd registry host config {hosts}:\n{hosts.read_text()}")
        yield c
    finally:
        c.stop()


def _helm(real: RealNodeCluster, *args: str, timeout: float = 300) -> str:
    helm = Path(_last_lines(["bash", str(ROOT / "scripts" / "build-tools.sh")], 3600)["BIN_DIR"])
    home = real.run_dir / "helm"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    proc = subprocess.run(
        [str(helm / "helm"), *args, "--kubeconfig", str(real.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _docs_switch_values() -> str:
    """The descheduler chart values of docs/descheduler.md's worked switch (its first YAML
    block under that heading)."""
    text = (ROOT / "docs" / "descheduler.md").read_text()
    section = text[text.index("## Worked switch") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    return section[start : section.index("```", start)]


@pytest.fixture(scope="module")
def installed(
    real: RealNodeCluster,
    release: tuple[Path, dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """The docs' descheduler values imported with `rebalancer policy import --output
    helm-values`, then the printed `helm install` line run with them (evicting, suspended)."""
    out, printed = release
    work = tmp_path_factory.mktemp("install")
    (work / "descheduler-values.yaml").write_text(_docs_switch_values())
    imported = subprocess.run(
        [sys.executable, "-m", "rebalancer", "policy", "import", "--output", "helm-values",
         str(work / "descheduler-values.yaml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    values = work / "rebalancer-values.yaml"
    values.write_text(imported.stdout)
    policy = yaml.safe_load(imported.stdout)["policy"]
    assert policy["namespaceLabelSelector"]["matchLabels"] == SWITCH_LABEL, policy
    run = work / "run.yaml"
    run.write_text(yaml.safe_dump({"dryRun": "none", "suspend": True,
                                   "extraArgs": ["--wave-timeout", "120s"]}))  # fmt: skip
    line = shlex.split(printed["HELM_INSTALL"])
    assert line[:2] == ["helm", "install"], line
    t0 = time.monotonic()
    _helm(real, *line[1:], "-n", RELEASE_NS, "--create-namespace", "-f", str(values),
          "-f", str(run), "--wait")  # fmt: skip
    print(f"\n{printed['HELM_INSTALL']} -n {RELEASE_NS} -f {values.name} -f {run.name}: "
          f"{time.monotonic() - t0:.1f}s")  # fmt: skip
    digest = (out / "IMAGE_DIGEST").read_text().strip()
    yield {"digest": digest, "policy": policy, "values": values}
    _helm(real, "uninstall", "rebalancer", "-n", RELEASE_NS, "--wait")


# -- the guide's worked switch, followed as written ----------------------------------------------
#
# docs/descheduler.md's worked switch, its commands taken from the page (so the two cannot
# drift) and run by bash in a folder like a user's: the descheduler chart's values, the import,
# scripts/push-image.sh to the registry above, `helm install` from the clone's chart, a Job from
# the CronJob. Only the registry's address is replaced; `rebalancer`, `helm` and `kubectl` on
# the PATH are this checkout's and the real-node cluster's.

GUIDE_REGISTRY = "registry.example.com/platform"


def _switch_commands() -> list[str]:
    """The shell commands of docs/descheduler.md's worked switch, in order: each line of its
    fenced blocks that name no language, without a leading ``$ ``."""
    text = (ROOT / "docs" / "descheduler.md").read_text()
    start = text.index("## Worked switch")
    section = text[start : text.index("\n## ", start + 1)]
    commands: list[str] = []
    fence: str | None = None  # the info string of the open fence, None outside one
    for line in section.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = stripped[3:] if fence is None else None
        elif fence == "" and stripped:
            commands.append(stripped.removeprefix("$ "))
    assert fence is None, "a fence of the worked switch is not closed"
    return commands


def _wrapper(path: Path, argv: list[str], env: dict[str, str]) -> None:
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    path.write_text(f'#!/bin/bash\n{exports}exec {shlex.join(argv)} "$@"\n')
    path.chmod(0o755)


def test_the_guide_s_switch_runs_as_written_on_real_nodes(
    real: RealNodeCluster, registry: str, tmp_path: Path
) -> None:
    """The worked switch of docs/descheduler.md, command by command: push-image.sh builds the
    image from the Dockerfile (buildah here: no docker daemon, no podman) and pushes it to the
    registry; the values file it writes pins the digest the registry serves; `helm install`
    with the imported values and that file makes a CronJob whose Job Succeeds on a real node,
    the kubelet having pulled the image by that digest (pod status imageID, containerd's
    images). The push gets three things the guide does not show: `--plain-http` (the registry
    here has no TLS), `--base-archive` (the e2e's Debian base: the Dockerfile's own base lives
    in a registry this machine cannot reach) and, after `--`, the host's CA bundle and a
    pip.conf naming it for the build's pip, as e2e/image/build-rebalancer-image.sh gives them."""
    commands = _switch_commands()
    order = [c.split()[0] + " " + c.split()[1] for c in commands]
    print("the guide's commands:\n  " + "\n  ".join(commands))
    assert order[:3] == ["rebalancer policy", "scripts/push-image.sh --registry", "helm install"]
    assert "kubectl -n" in order and order[-1] == "helm upgrade", order
    (push,) = [c for c in commands if c.startswith("scripts/push-image.sh ")]
    assert f"--registry {GUIDE_REGISTRY} --values image-values.yaml" in push
    install = next(c for c in commands if c.startswith("helm install "))
    assert install.endswith("-f rebalancer-values.yaml -f image-values.yaml"), install

    base = _last_lines(["bash", str(IMAGE_SH)], timeout=3600)["BASE_TAR"]
    helm = Path(_last_lines(["bash", str(ROOT / "scripts" / "build-tools.sh")], 3600)["BIN_DIR"])
    user = tmp_path / "user"
    user.mkdir()
    (user / "descheduler-values.yaml").write_text(_docs_switch_values())
    (user / "charts").symlink_to(ROOT / "charts")  # a clone of the repository, as the guide's
    (user / "scripts").symlink_to(ROOT / "scripts")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    home = tmp_path / "helm"
    _wrapper(bin_dir / "rebalancer", [sys.executable, "-m", "rebalancer"],
             {"PYTHONPATH": str(ROOT)})  # fmt: skip
    homes = {f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}
    _wrapper(bin_dir / "helm", [str(helm / "helm"), "--kubeconfig", str(real.kubeconfig)], homes)
    _wrapper(bin_dir / "kubectl", [real.kubectl_bin, f"--kubeconfig={real.kubeconfig}"], {})
    pip_conf = tmp_path / "pip.conf"
    pip_conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
    ca = "/etc/ssl/certs/ca-certificates.crt"
    here_only = ["--plain-http", "--base-archive", base, "--",
                 "-v", f"{ca}:{ca}:ro", "-v", f"{pip_conf}:/etc/pip.conf:ro"]  # fmt: skip
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    try:
        for command in commands:
            line = command.replace(GUIDE_REGISTRY, f"{registry}/guide")
            if command == push:
                line += " " + shlex.join(here_only)
            t0 = time.monotonic()
            proc = subprocess.run(["bash", "-c", line], cwd=user, env=env, capture_output=True,
                                  text=True, timeout=3600, check=False)  # fmt: skip
            print(f"\n$ {line}\n[exit {proc.returncode}, {time.monotonic() - t0:.0f}s]")
            print(proc.stdout[-3000:] + proc.stderr[-3000:])
            assert proc.returncode == 0, f"{line}: exit {proc.returncode}"

        image = yaml.safe_load((user / "image-values.yaml").read_text())["image"]
        repository, digest = image["repository"], image["digest"]
        assert repository == f"{registry}/guide/rebalancer"
        request = urllib.request.Request(
            f"http://{registry}/v2/guide/rebalancer/manifests/{_version()}",
            headers={"Accept": MANIFEST_TYPES},
            method="HEAD",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Docker-Content-Digest"] == digest
        cron = real.get_json("cronjob", "rebalancer", "-n", RELEASE_NS)
        (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"{repository}:{_version()}@{digest}", container
        job = real.get_json("job", "first-run", "-n", RELEASE_NS)
        assert job["status"].get("succeeded") == 1, job["status"]
        (pod,) = real.pods(RELEASE_NS, "job-name=first-run")
        (status,) = pod["status"]["containerStatuses"]
        node = real.real_node(pod["spec"]["nodeName"])
        on_node = {r: d for r, d in real.image_digests(node).items() if r.startswith(registry)}
        print(f"pushed digest:  {digest}\npod imageID:    {status['imageID']}\n"
              f"containerd of {node.name}: {on_node}")  # fmt: skip
        assert status["imageID"] == f"{repository}@{digest}", status
        assert f"{repository}@{digest}" in on_node, on_node
        assert status["state"]["terminated"]["exitCode"] == 0, status
        values = yaml.safe_load(_helm(real, "get", "values", "rebalancer", "-n", RELEASE_NS,
                                      "-o", "yaml"))  # fmt: skip
        assert values["dryRun"] == "none" and values["image"] == image, values
    finally:
        _helm(real, "uninstall", "rebalancer", "-n", RELEASE_NS, "--wait", "--ignore-not-found")


def _namespace(real: RealNodeCluster, prefix: str, labels: dict[str, str] | None = None) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    real.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": labels or {}}})  # fmt: skip
    real.wait_for(
        f"default ServiceAccount in {name}",
        lambda: real.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
        timeout=60,
    )
    return name


@pytest.fixture
def namespaces(real: RealNodeCluster) -> Iterator[Callable[..., str]]:
    """Makes namespaces (a prefix, labels) for one test; deletes them after it, pass or fail,
    so that no pod is left on the real nodes when they stop."""
    made: list[str] = []

    def make(prefix: str, labels: dict[str, str] | None = None) -> str:
        made.append(_namespace(real, prefix, labels))
        return made[-1]

    yield make
    for name in made:
        real.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _run_job(real: RealNodeCluster, name: str, *, wait: bool = True) -> dict[str, Any]:
    """A Job from the CronJob; with ``wait``, waited for (see :func:`_job_result`)."""
    real.kubectl("create", "job", "--from=cronjob/rebalancer", name, "-n", RELEASE_NS)
    return _job_result(real, name) if wait else {}


def _job_result(real: RealNodeCluster, name: str, timeout: float = 300) -> dict[str, Any]:
    """The Job once finished: its status, logs, summary line (None if none) and pod."""
    t0 = time.monotonic()

    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = real.get_json("job", name, "-n", RELEASE_NS)
        s = job.get("status", {})
        return job if s.get("succeeded") or s.get("failed") else None

    job = real.wait_for(f"the Job {name} to finish", finished, timeout=timeout)
    logs = real.kubectl("logs", f"job/{name}", "-n", RELEASE_NS).stdout
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    summaries = [line for line in lines if line.get("event") == "run.summary"]
    (pod,) = real.pods(RELEASE_NS, f"job-name={name}")
    conditions = {c["type"]: c["status"] for c in job["status"].get("conditions", [])}
    print(f"\nJob {name}: finished {time.monotonic() - t0:.0f}s after the wait began, "
          f"succeeded={job['status'].get('succeeded')} failed={job['status'].get('failed')} "
          f"conditions={conditions}")  # fmt: skip
    if summaries:
        print(f"Job {name} summary line: {json.dumps(summaries[0], sort_keys=True)}")
    return {"job": job, "logs": logs, "summary": summaries[0] if summaries else None, "pod": pod}


def _sa_evictions(real: RealNodeCluster, mark: int, ns: str) -> list[dict[str, Any]]:
    return [
        e
        for e in real.audit_events()[mark:]
        if e.get("stage") == "ResponseComplete"
        and e.get("objectRef", {}).get("subresource") == "eviction"
        and e.get("objectRef", {}).get("namespace") == ns
        and e.get("user", {}).get("username") == SA_USER
    ]


def test_the_released_chart_pulls_the_image_by_digest_onto_real_nodes(
    real: RealNodeCluster, installed: dict[str, Any], registry: str
) -> None:
    """The chart from the registry pins the image by digest; the kubelet's containerd pulls it
    from the registry (no image was loaded) and the Job Succeeds: the pulled digest is the one
    the release pushed."""
    digest = installed["digest"]
    cron = real.get_json("cronjob", "rebalancer", "-n", RELEASE_NS)
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{registry}/rebalancer:{_version()}@{digest}", container
    ran = _run_job(real, "by-digest")
    pod = ran["pod"]
    assert ran["job"]["status"].get("succeeded") == 1, (ran["job"]["status"], ran["logs"][-3000:])
    assert ran["summary"] is not None and ran["summary"]["failed"] == 0, ran["logs"][-2000:]
    (status,) = pod["status"]["containerStatuses"]
    node = real.real_node(pod["spec"]["nodeName"])
    on_node = {ref: d for ref, d in real.image_digests(node).items() if ref.startswith(registry)}
    pulled = [
        ev["message"]
        for ev in real.get_json(
            "events",
            "-n",
            RELEASE_NS,
            "--field-selector",
            f"involvedObject.name={pod['metadata']['name']}",
        )["items"]
        if ev["reason"] in ("Pulling", "Pulled")
    ]
    print(f"released digest:     {digest}")
    print(f"pod imageID:         {status['imageID']}")
    print(f"containerd of {node.name}: {on_node}")
    print("kubelet events: " + " | ".join(pulled))
    assert status["imageID"] == f"{registry}/rebalancer@{digest}", status
    assert f"{registry}/rebalancer@{digest}" in on_node, on_node
    assert any(m.startswith("Successfully pulled image") for m in pulled), pulled


def test_the_imported_policy_evicts_only_in_its_scope_on_real_nodes(
    real: RealNodeCluster, installed: dict[str, Any], namespaces: Callable[..., str]
) -> None:
    """The docs' descheduler values (namespaceLabelSelector rebalance=enabled,
    maxNoOfPodsToEvictPerNamespace 2), imported and installed with the chart: of two namespaces
    skewed alike, [0, 3, 3], the Job evicts 2 in the labelled one (hand count: one out of each
    full zone) and none in the other, whose spread stays as it was."""
    inside = namespaces("rn-in", SWITCH_LABEL)
    outside = namespaces("rn-out")
    for ns in (inside, outside):
        real.apply(deployment(real, ns, 6, grace=2, env={"TERM_DELAY": "0.5"}))
        assert build_skew(real, ns, 2) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}
    mark = audit_mark(real)
    ran = _run_job(real, "imported")
    assert ran["job"]["status"].get("succeeded") == 1, (ran["job"]["status"], ran["logs"][-3000:])
    assert ran["summary"]["evicted"] == 2, ran["summary"]
    sent = wait_audit(real, "2 evictions", lambda: len(_sa_evictions(real, mark, inside)) >= 2
                      and _sa_evictions(real, mark, inside))  # fmt: skip
    assert [e["responseStatus"]["code"] for e in sent] == [201, 201], sent
    time.sleep(2)
    assert _sa_evictions(real, mark, outside) == []
    every = [
        e["objectRef"]["namespace"]
        for e in real.audit_events()[mark:]
        if e.get("objectRef", {}).get("subresource") == "eviction"
        and e.get("user", {}).get("username") == SA_USER
        and e.get("stage") == "ResponseComplete"
    ]
    print(f"evictions by namespace: {dict(Counter(every))} (in scope: {inside})")
    assert set(every) == {inside}, every
    settle(real, inside, 6)
    assert counts(real, inside) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
    assert counts(real, outside) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}
    events = real.get_json("events", "-n", inside, "--field-selector", "reason=Rebalanced")
    assert {ev["involvedObject"]["name"] for ev in events["items"]} == {
        e["objectRef"]["name"] for e in sent
    }


def test_a_pdb_refusal_leaves_the_job_succeeded_and_the_pod_running(
    real: RealNodeCluster, installed: dict[str, Any], namespaces: Callable[..., str]
) -> None:
    """[0, 3, 3] under a PDB allowing 2: the plan evicts 2 in one wave, one at a time (the
    second once the first's replacement is Ready, 10 s after it starts). Right after the first
    eviction the PDB goes to maxUnavailable 0: the second gets 429 from the API server. The Job
    Succeeds, the summary says 1 evicted and 1 blocked by PDB, a RebalanceBlocked Event names
    the pod, and that pod is still running."""
    ns = namespaces("rn-pdb", SWITCH_LABEL)
    real.apply([
        deployment(real, ns, 6, grace=2, env={"TERM_DELAY": "0.5", "READY_AFTER": "10",
                                              "READY_FILE": "/tmp/ready"}, readiness_file=True),
        pdb(ns, maxUnavailable=2),
    ])  # fmt: skip
    assert build_skew(real, ns, 2) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}

    def allows(n: int) -> bool:
        status = real.get_json("pdb", APP, "-n", ns).get("status", {})
        return bool(status.get("disruptionsAllowed") == n)

    real.wait_for("the PDB to allow 2", lambda: allows(2), timeout=60)
    mark = audit_mark(real)
    _run_job(real, "pdb-refuses", wait=False)
    (first,) = wait_audit(
        real, "the first eviction", lambda: _sa_evictions(real, mark, ns), timeout=120
    )
    assert first["responseStatus"]["code"] == 201, first
    real.kubectl("patch", "pdb", APP, "-n", ns, "--type=merge",
                 "-p", '{"spec":{"maxUnavailable":0}}')  # fmt: skip
    real.wait_for("the PDB to allow 0", lambda: allows(0), timeout=30)
    ran = _job_result(real, "pdb-refuses")
    summary = ran["summary"]
    assert ran["job"]["status"].get("succeeded") == 1, (ran["job"]["status"], ran["logs"][-3000:])
    assert (summary["evicted"], summary["blocked_by_pdb"], summary["failed"]) == (1, 1, 0)
    sent = _sa_evictions(real, mark, ns)
    codes = [(e["objectRef"]["name"], e["responseStatus"]["code"]) for e in sent]
    print(f"evictions sent: {codes}")
    refused = {name for name, code in codes if code == 429}
    assert len(refused) == 1 and [c for _, c in codes].count(201) == 1, codes
    (victim,) = refused
    blocked = real.get_json("events", "-n", ns, "--field-selector", "reason=RebalanceBlocked")
    assert {ev["involvedObject"]["name"] for ev in blocked["items"]} == {victim}, blocked
    pod = real.get_json("pod", victim, "-n", ns)
    assert pod["status"]["phase"] == "Running" and not pod["metadata"].get("deletionTimestamp")


def _run_plan(logs: str) -> dict[str, Any]:
    """The run's plan out of the Job's logs (output json, pretty-printed on stdout: the plan of
    a dry run, or the report of a run with its ``plan``), where stderr's one-line JSON log
    records come too (between its lines, maybe)."""
    lines = [
        line
        for line in logs.splitlines()
        if not (line.startswith("{") and line.endswith("}") and '"event"' in line)
    ]
    blocks = []
    for start, line in enumerate(lines):
        if line == "{":
            end = lines.index("}", start)
            blocks.append(json.loads("\n".join(lines[start : end + 1])))
    plans = [b.get("plan", b) for b in blocks if "plan" in b or "evictions" in b]
    assert len(plans) == 1, f"no single plan in the logs:\n{logs[-4000:]}"
    plan: dict[str, Any] = plans[0]
    return plan


def test_helm_upgrade_from_the_previous_chart_keeps_the_values_and_the_plan(
    real: RealNodeCluster,
    installed: dict[str, Any],
    registry: str,
    tmp_path: Path,
    namespaces: Callable[..., str],
) -> None:
    """The chart of the previous commit, packaged as version 0.0.1 (a previous release),
    installed with a user's values (the imported policy, a schedule, a label, dry run, JSON
    output); `helm upgrade --reuse-values` to the released chart from the registry: the values
    are kept, the CronJob keeps its schedule and label, the policy ConfigMap is unchanged, and
    a Job after the upgrade plans what a Job before it planned (dry run, nothing evicted)."""
    version = _version()
    subprocess.run(
        f"git -C {shlex.quote(str(ROOT))} archive HEAD~1 charts/rebalancer | tar -x -C "
        f"{shlex.quote(str(tmp_path))}",
        shell=True,
        check=True,
        timeout=60,
    )
    _helm(real, "package", str(tmp_path / "charts" / "rebalancer"), "--version", "0.0.1",
          "--destination", str(tmp_path))  # fmt: skip
    previous = tmp_path / "rebalancer-0.0.1.tgz"
    user = tmp_path / "user.yaml"
    user.write_text(
        yaml.safe_dump(
            {
                "image": {"repository": f"{registry}/rebalancer", "digest": installed["digest"]},
                "schedule": "*/30 * * * *",
                "suspend": True,
                "dryRun": "client",
                "output": "json",
                "commonLabels": {"team": "platform"},
            }
        )
    )
    ns = namespaces("rn-up", SWITCH_LABEL)
    real.apply(deployment(real, ns, 6, grace=2, env={"TERM_DELAY": "0.5"}))
    assert build_skew(real, ns, 2) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}
    target = "rb-upgrade"

    def state() -> tuple[Any, ...]:
        cron = real.get_json("cronjob", "up-rebalancer", "-n", target)
        cm = real.get_json("configmap", "up-rebalancer-policy", "-n", target)
        values = yaml.safe_load(_helm(real, "get", "values", "up", "-n", target, "-o", "yaml"))
        return values, cron["spec"]["schedule"], cron["metadata"]["labels"]["team"], cm["data"]

    def planned(job: str) -> list[tuple[str, str, str | None]]:
        real.kubectl("create", "job", "--from=cronjob/up-rebalancer", job, "-n", target)
        got: dict[str, Any] = real.wait_for(
            f"the Job {job} to succeed",
            lambda: (
                real.get_json("job", job, "-n", target)
                if real.get_json("job", job, "-n", target).get("status", {}).get("succeeded")
                else None
            ),
            timeout=240,
        )
        assert got["status"]["succeeded"] == 1
        plan = _run_plan(real.kubectl("logs", f"job/{job}", "-n", target).stdout)
        return [(e["namespace"], e["name"], e.get("targetDomain"))
                for e in plan["evictions"]]  # fmt: skip

    _helm(real, "install", "up", str(previous), "-n", target, "--create-namespace",
          "-f", str(installed["values"]), "-f", str(user))  # fmt: skip
    try:
        before = state()
        plan_before = planned("before")
        t0 = time.monotonic()
        _helm(real, "upgrade", "up", f"oci://{registry}/charts/rebalancer", "--version", version,
              "--plain-http", "-n", target, "--reuse-values")  # fmt: skip
        upgraded = time.monotonic() - t0
        history = yaml.safe_load(_helm(real, "history", "up", "-n", target, "-o", "yaml"))
        charts = [h["chart"] for h in history]
        print(f"\nhelm upgrade 0.0.1 -> {version}: {upgraded:.1f}s, history {charts}")
        assert charts == ["rebalancer-0.0.1", f"rebalancer-{version}"], history
        after = state()
        assert after == before
        plan_after = planned("after")
        print(f"plan before the upgrade: {plan_before}\nplan after:              {plan_after}")
        assert len(plan_before) == 2 and {e[0] for e in plan_before} == {ns}, plan_before
        assert plan_after == plan_before
        assert counts(real, ns) == {"zone-a": 0, "zone-b": 3, "zone-c": 3}  # a dry run
    finally:
        _helm(real, "uninstall", "up", "-n", target, "--wait")
