"""scripts/lib/gobuild.sh: the cached build every Go build script shares (cache key, lock, the
"cached" line, timings), run here on a scratch cache with a stand-in ``go`` (nothing built)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [
    "e2e/cluster/build.sh",
    "e2e/cluster/build-nodes.sh",
    "e2e/cluster/build-karpenter.sh",
    "scripts/build-tools.sh",
    "scripts/build-gotool.sh",
    "scripts/build-krew.sh",
]
STAND_IN_GO = """#!/usr/bin/env bash
case "$1" in
  version) echo "go version go0.0 stand-in" ;;
  env) echo go0.0 ;;
  build) shift; out=""; pkgs=()
    while [[ $# -gt 0 ]]; do
      case "$1" in -o) out="$2"; shift 2 ;; -ldflags|-tags) shift 2 ;; -*) shift ;;
        *) pkgs+=("$1"); shift ;; esac
    done
    printf stand-in > "$out"; chmod +x "$out" ;;
esac
"""


def _run(argv: list[str], cache: Path, path: Path | None = None) -> list[str]:
    env = {**os.environ, "REBALANCER_E2E_CACHE": str(cache)}
    if path is not None:
        env["PATH"] = f"{path}:{env['PATH']}"
    proc = subprocess.run(
        ["bash", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_go_build_script_takes_the_shared_cached_build(script: str) -> None:
    """Each script sources the library and keeps no lock, "cached" line or timer of its own."""
    text = (ROOT / script).read_text()
    assert re.search(r'^source "\$\w+/(\.\./\.\./)?scripts/lib/gobuild\.sh"$', text, re.MULTILINE)
    assert "gb_cached_or_lock" in text
    assert "exec 9>" not in text
    assert "cached:" not in text
    assert "SECONDS - T0" not in text


@pytest.mark.parametrize(
    ("argv", "where", "files", "last"),
    [
        (["scripts/build-tools.sh"], "--bin-dir", ["helm", "promtool"], "BIN_DIR={bin}"),
        (["scripts/build-gotool.sh", "syft"], "--path", ["syft"], "SYFT={bin}/syft"),
        (
            ["e2e/cluster/build.sh"],
            "--bin-dir",
            [
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubectl",
                "etcd",
                "kwok",
            ],
            "BIN_DIR={bin}",
        ),
    ],
)
def test_a_cached_build_says_so_and_ends_with_its_line(
    argv: list[str], where: str, files: list[str], last: str, tmp_path: Path
) -> None:
    """With everything in the cache the script builds nothing (go is never called): "NAME:
    cached: KEY (nothing to do)", then the line callers read, naming the directory its
    ``--bin-dir`` or ``--path`` names (the key is the versions)."""
    cache = tmp_path / "cache"
    shown = _run([*argv, where], cache)[-1]  # a bare path, or NAME=path
    named = Path(shown.partition("=")[2] or shown)
    bin_dir = named.parent if named.name == "syft" else named
    bin_dir.mkdir(parents=True)
    for name in files:
        (bin_dir / name).write_text("x")
        (bin_dir / name).chmod(0o755)
    lines = _run(argv, cache, _no_go(tmp_path))
    assert lines[0] == f"{lines[0].partition(':')[0]}: cached: {_key(bin_dir)} (nothing to do)"
    assert lines[-1] == last.format(bin=bin_dir)


def _key(bin_dir: Path) -> str:
    """The cache key a script names: its directory's name (syft: the tool and its version)."""
    name = bin_dir.parent.name
    return " ".join(name.split("-")[1:]) if name.startswith("tools-syft-") else name


def _no_go(tmp_path: Path) -> Path:
    """A PATH entry whose ``go`` fails the test if a cached build calls it."""
    folder = tmp_path / "nogo"
    folder.mkdir(exist_ok=True)
    go = folder / "go"
    go.write_text("#!/bin/sh\necho 'go called' >&2\nexit 97\n")
    go.chmod(0o755)
    return folder


def test_a_cold_build_times_its_phases_and_leaves_only_its_output(tmp_path: Path) -> None:
    """build-tools.sh on an empty cache with a stand-in go: the build line, a start and a done
    line per tool with the elapsed seconds, the binaries moved in, the scratch directory gone,
    and the same last line as a cached run; a second run is then cached."""
    stand_in = tmp_path / "go-bin"
    stand_in.mkdir()
    (stand_in / "go").write_text(STAND_IN_GO)
    (stand_in / "go").chmod(0o755)
    cache = tmp_path / "cache"
    lines = _run(["scripts/build-tools.sh"], cache, stand_in)
    (out,) = cache.iterdir()
    assert lines[0].startswith("build-tools.sh: go version go0.0 stand-in; building tools-helm-")
    assert [re.sub(r"\[\d+s\]", "[Ns]", line) for line in lines[1:5]] == [
        f"build-tools.sh: [Ns] build helm {out.name.split('_')[0].removeprefix('tools-helm-')}",
        "build-tools.sh: [Ns]   done in 0s: helm",
        f"build-tools.sh: [Ns] build promtool {out.name.split('_promtool-')[1]}",
        "build-tools.sh: [Ns]   done in 0s: promtool",
    ]
    assert lines[-1] == f"BIN_DIR={out}/bin"
    assert sorted(p.name for p in out.iterdir()) == [".lock", "VERSIONS", "bin"]
    assert (out / "bin" / "helm").read_text() == "stand-in"
    again = _run(["scripts/build-tools.sh"], cache, _no_go(tmp_path))
    assert again == [f"build-tools.sh: cached: {out.name} (nothing to do)", f"BIN_DIR={out}/bin"]
