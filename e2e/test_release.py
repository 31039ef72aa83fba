"""The release, built as a user would build it (opt-in: --e2e; needs root for buildah).

``scripts/release.sh --registry`` against a registry started here on 127.0.0.1 (Debian's
docker-registry): the image is built twice with one image id, its SBOM lists every package of
requirements.lock at its locked version and the base's Debian packages, SHA256SUMS holds, the
image and the chart are in the registry, the printed ``helm install`` line pins the image by the
digest the registry serves, and ``rebalancer version`` in the image names this commit.

The base image is the e2e's Debian base (e2e/image/build-rebalancer-image.sh): the Dockerfile's
own base, pinned by digest, lives in a registry this machine cannot reach.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name

from e2e.cluster.realnodes import host_support

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
