"""``kubectl rebalance``: kubectl's flags anywhere, the same output as the rebalancer command,
the executable installed by pip, and the krew package (deploy/krew)."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.cli.kubectl_plugin import (
    KubectlArgs,
    UsageError,
    context_namespace,
    main,
    parse,
    to_rebalancer,
)
from rebalancer.cli.main import build_parser
from rebalancer.cli.main import main as rebalancer_main

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = str(ROOT / "examples" / "skewed-cluster.yaml")
POD = "web-vchvtjw47k-j5f5v"  # in namespace shop of the example snapshot


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["plan"], KubectlArgs(command="plan")),
        (
            ["--kubeconfig", "/k", "--context", "c", "-n", "shop", "plan", "-o", "json"],
            KubectlArgs(
                kubeconfig="/k", context="c", namespace="shop", command="plan", rest=["-o", "json"]
            ),
        ),
        (
            ["run", "--dry-run", "--kubeconfig=/k", "--namespace=shop", "--context=c"],
            KubectlArgs(
                kubeconfig="/k", context="c", namespace="shop", command="run", rest=["--dry-run"]
            ),
        ),
        (["-nshop", "snapshot"], KubectlArgs(namespace="shop", command="snapshot")),
        (["plan", "-A"], KubectlArgs(all_namespaces=True, command="plan")),
        (
            ["explain", "pod-1", "-n", "shop", "--", "-n"],
            KubectlArgs(namespace="shop", command="explain", rest=["pod-1", "--", "-n"]),
        ),
        (["--help"], KubectlArgs(rest=["--help"])),
    ],
)
def test_kubectl_flags_are_taken_from_anywhere(argv: list[str], expected: KubectlArgs) -> None:
    """--kubeconfig, --context, -n (any spelling) and -A are found before or after the command."""
    assert parse(argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "-n"], "-n needs a value"),
        (["plan", "--context="], "--context needs a value"),
        (["plan", "-n", "shop", "-A"], "exclude each other"),
        (["apply"], "unknown command 'apply'"),
    ],
)
def test_bad_kubectl_flags_are_named(argv: list[str], message: str) -> None:
    """A flag without value, -n with -A, or an unknown command is a usage error naming it."""
    with pytest.raises(UsageError, match=message):
        parse(argv)


def test_rebalancer_gets_the_connection_flags() -> None:
    """plan/run/snapshot get --kubeconfig, --context and --namespace as rebalancer spells them."""
    for command in ("plan", "run", "snapshot"):
        args = parse(["--context", "c", command, "--kubeconfig", "/k", "-n", "shop"])
        parsed = build_parser().parse_args(to_rebalancer(args))
        assert (parsed.command, parsed.kubeconfig, parsed.context, parsed.namespace) == (
            command,
            "/k",
            "c",
            "shop",
        )


def test_plan_prints_what_rebalancer_plan_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """`kubectl rebalance plan ...` and `rebalancer plan ...` print the same, with the same code."""
    assert rebalancer_main(["plan", "--snapshot", SNAPSHOT, "-n", "shop"]) == 0
    direct = capsys.readouterr().out
    assert main(["-n", "shop", "plan", "--snapshot", SNAPSHOT]) == 0
    assert capsys.readouterr().out == direct
    assert "shop/web-" in direct


def test_explain_takes_the_pod_as_kubectl_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`explain POD -n NS`, `explain NS/POD` and `explain POD` in the context's namespace all
    explain the same pod as `rebalancer explain --pod NS/POD`."""
    assert rebalancer_main(["explain", "--snapshot", SNAPSHOT, "--pod", f"shop/{POD}"]) == 0
    direct = capsys.readouterr().out
    assert main(["explain", POD, "-n", "shop", "--snapshot", SNAPSHOT]) == 0
    assert capsys.readouterr().out == direct
    assert main(["explain", f"--snapshot={SNAPSHOT}", f"shop/{POD}"]) == 0
    assert capsys.readouterr().out == direct
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {"current-context": "a", "contexts": [{"name": "a", "context": {"namespace": "shop"}}]}
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert main(["explain", POD, "--snapshot", SNAPSHOT]) == 0
    assert capsys.readouterr().out == direct
    assert f"Pod shop/{POD}" in direct


def test_explain_without_a_pod_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """explain needs exactly one pod: none, or POD and --pod both, exit 2 with the reason."""
    assert main(["explain", "--snapshot", SNAPSHOT]) == 2
    assert "which pod?" in capsys.readouterr().err
    assert main(["explain", POD, "--pod", f"shop/{POD}", "--snapshot", SNAPSHOT]) == 2
    assert "not both" in capsys.readouterr().err


def test_usage_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints the usage (exit 0); no command is a usage error (exit 2)."""
    assert main(["--help"]) == 0
    assert "kubectl rebalance" in capsys.readouterr().out
    assert main([]) == 2
    assert "a command is required" in capsys.readouterr().err
    assert main(["plan", "--snapshot", str(ROOT / "no-such-file.yaml")]) == 2


def write_kubeconfig(path: Path, current: str, contexts: dict[str, str | None]) -> Path:
    doc: dict[str, Any] = {
        "current-context": current,
        "contexts": [
            {"name": n, "context": {"cluster": "c", **({"namespace": ns} if ns else {})}}
            for n, ns in contexts.items()
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_context_namespace_follows_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The namespace of --context, else of current-context, from --kubeconfig or the first
    $KUBECONFIG file naming it; "default" when the context has none or nothing is readable."""
    one = write_kubeconfig(tmp_path / "one", "a", {"a": "alpha", "b": None})
    two = write_kubeconfig(tmp_path / "two", "", {"c": "gamma"})
    assert context_namespace(str(one), None) == "alpha"
    assert context_namespace(str(one), "b") == "default"
    assert context_namespace(str(one), "missing") == "default"
    monkeypatch.setenv(
        "KUBECONFIG", os.pathsep.join([str(tmp_path / "absent"), str(two), str(one)])
    )
    assert context_namespace(None, None) == "alpha"  # current-context comes from file one
    assert context_namespace(None, "c") == "gamma"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    assert context_namespace(None, None) == "default"


def test_pip_installs_the_kubectl_rebalance_executable() -> None:
    """pyproject's [project.scripts] names kubectl-rebalance; the installed one runs."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-rebalance"] == "rebalancer.cli.kubectl_plugin:main"
    executable = Path(sys.executable).parent / "kubectl-rebalance"
    assert executable.is_file(), "pip install -e . did not install kubectl-rebalance"
    proc = subprocess.run(
        [str(executable), "--help"], capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: kubectl rebalance")


def _build_plugin_module() -> Any:
    """scripts/build_plugin.py, imported (scripts/ is no package)."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location(
        "build_plugin", ROOT / "scripts" / "build_plugin.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_krew_manifest_template() -> None:
    """deploy/krew/rebalance.yaml names the plugin, its version, a homepage to fill and the
    caveat of the single file; its platforms are written per archive."""
    manifest = yaml.safe_load((ROOT / "deploy" / "krew" / "rebalance.yaml").read_text())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"]["name"] == "rebalance"
    assert manifest["spec"]["version"] == f"v{version}"
    assert manifest["spec"]["homepage"] == "@HOMEPAGE@"
    assert manifest["spec"]["platforms"] == []
    assert "python3" in manifest["spec"]["caveats"]


def test_krew_archives_and_manifest(tmp_path: Path) -> None:
    """scripts/build_plugin.py --krew: one reproducible archive per platform built, holding the
    executable single file, and a manifest entry per archive (os/arch selector, uri, sha256);
    platforms not built are left out."""
    build_plugin = _build_plugin_module()
    base = "https://downloads.example.org/rebalancer/v0.1.0"
    built = {"linux/amd64": b"#!/usr/bin/env python3\namd64", "darwin/arm64": b"arm64"}
    for out in ("a", "b"):
        for platform, content in built.items():
            single = tmp_path / out / platform.replace("/", "-") / "kubectl-rebalance"
            single.parent.mkdir(parents=True)
            single.write_bytes(content)
        build_plugin.krew(tmp_path / out, base, "https://rebalancer.example.org")
    manifest = yaml.safe_load((tmp_path / "a" / "krew" / "rebalance.yaml").read_text())
    assert manifest["spec"]["homepage"] == "https://rebalancer.example.org"
    version = manifest["spec"]["version"]
    platforms = manifest["spec"]["platforms"]
    assert [p["selector"]["matchLabels"] for p in platforms] == [
        {"os": "darwin", "arch": "arm64"},
        {"os": "linux", "arch": "amd64"},
    ]
    for entry in platforms:
        labels = entry["selector"]["matchLabels"]
        name = f"kubectl-rebalance-{version}-{labels['os']}-{labels['arch']}.tar.gz"
        archive = tmp_path / "a" / "krew" / name
        assert archive.read_bytes() == (tmp_path / "b" / "krew" / name).read_bytes()
        assert entry["uri"] == f"{base}/{name}"
        assert entry["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
        assert entry["bin"] == "kubectl-rebalance"
        assert entry["files"] == [{"from": "kubectl-rebalance", "to": "."}]
        with tarfile.open(archive) as tar:
            (member,) = tar.getmembers()
            assert member.name == "kubectl-rebalance"
            assert member.mode & stat.S_IXUSR
            extracted = tar.extractfile(member)
            assert extracted is not None
            assert extracted.read() == built[f"{labels['os']}/{labels['arch']}"]


@pytest.mark.parametrize(("pythons", "ok"), [("3.11 3.12 3.13 3.14", True), ("2.7 9.9", False)])
def test_single_file_preamble_names_the_pythons_it_runs_on(
    pythons: str, ok: bool, tmp_path: Path
) -> None:
    """Before anything is imported, the single file's preamble stops (exit 2) on a Python it
    has no compiled modules for, naming the ones it has."""
    (tmp_path / "rebalancer_plugin_pythons.txt").write_text(pythons + "\n")
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1], "
        "init_globals={'site_packages': sys.argv[2]}, run_name='__main__'); print('went on')"
    )
    preamble = ROOT / "scripts" / "plugin_preamble.py"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(preamble), str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    if ok:
        assert (proc.returncode, proc.stdout) == (0, "went on\n"), proc.stderr
    else:
        assert proc.returncode == 2
        assert "runs on CPython 2.7, 9.9" in proc.stderr
        assert proc.stdout == ""


def test_explain_without_a_snapshot_asks_the_live_explain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`kubectl rebalance explain POD -n NS` without --snapshot runs the rebalancer's explain on
    the cluster, with kubectl's connection flags, and writes no snapshot first."""
    import rebalancer.cli.kubectl_plugin as plugin  # noqa: PLC0415

    calls: list[list[str]] = []

    def record(argv: list[str]) -> int:
        calls.append(argv)
        return 0

    monkeypatch.setattr(plugin, "rebalancer_main", record)
    assert plugin.main(["explain", POD, "-n", "shop", "--context", "prod", "-o", "json"]) == 0
    assert calls == [["explain", "--pod", f"shop/{POD}", "-o", "json", "--context", "prod"]]
