"""scripts/build-tools.sh: versions from the wrapper go.mod files, cached, stamped binaries."""

from __future__ import annotations

import re

import pytest

from tests.packaging_tools import BUILD_TOOLS, ROOT, bin_dir, run

GOMOD = ROOT / "e2e" / "cluster" / "gomod"


def required(module_dir: str, module: str) -> str:
    """The version of ``module`` required by a wrapper go.mod (read here independently)."""
    text = (GOMOD / module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", text, re.MULTILINE)
    assert match, f"{module} not required in {module_dir}/go.mod"
    return match.group(1)


def built(name: str) -> str:
    """The binary build-tools.sh built (not one found on PATH); skip when not built yet."""
    path = bin_dir() / name
    if not path.is_file():
        pytest.skip(f"{name} is not built: run `bash scripts/build-tools.sh`")
    return str(path)


def test_wrapper_modules_pin_the_requested_versions() -> None:
    """helm v3.22.0 and prometheus v0.316.0, each wrapper building only its tool."""
    assert required("helm", "helm.sh/helm/v3") == "v3.22.0"
    assert required("promtool", "github.com/prometheus/prometheus") == "v0.316.0"
    assert "tool helm.sh/helm/v3/cmd/helm" in (GOMOD / "helm" / "go.mod").read_text()
    promtool_mod = (GOMOD / "promtool" / "go.mod").read_text()
    assert "tool github.com/prometheus/prometheus/cmd/promtool" in promtool_mod


def test_cache_dir_names_the_versions() -> None:
    """The cache key is the two versions: a version bump builds into a new directory."""
    assert bin_dir().parent.name == "tools-helm-v3.22.0_promtool-v0.316.0"
    assert bin_dir().name == "bin"


def test_built_tools_report_their_versions() -> None:
    """The binaries carry the versions they were built from (release ldflags)."""
    helm = run(built("helm"), "version", "--short")
    assert helm.stdout.strip() == required("helm", "helm.sh/helm/v3")
    promtool = run(built("promtool"), "--version")
    assert promtool.stdout.startswith("promtool, version 0.316.0 ")


def test_second_build_is_a_cache_hit() -> None:
    """Once built, build-tools.sh does nothing and ends with BIN_DIR=<the cache dir>."""
    built("helm")
    built("promtool")
    proc = run("bash", str(BUILD_TOOLS), timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert "nothing to do" in lines[0]
    assert lines[-1] == f"BIN_DIR={bin_dir()}"
