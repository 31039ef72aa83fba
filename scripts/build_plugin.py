"""Build ``kubectl-rebalance`` as one file per krew platform: a shiv zipapp that runs with the
system's ``python3`` (CPython 3.11 or newer) and nothing installed.

    python scripts/build_plugin.py [--platform linux/amd64 ...] [--python 3.11 ...] [-o dist/plugin]
    python scripts/build_plugin.py --krew BASE_URL [--homepage URL] [--prebuilt] [-o dist/plugin]

writes ``OUT/<os>-<arch>/kubectl-rebalance`` for each platform (default: all of
:data:`PLATFORMS`). With ``--krew`` it then writes ``OUT/krew/``: one reproducible archive per
platform built (``--prebuilt``: those already in OUT, nothing rebuilt) and ``rebalance.yaml``,
deploy/krew/rebalance.yaml with a platform entry (uri BASE_URL/ARCHIVE, sha256) for each.

Each file holds rebalancer and its dependencies from pyproject.toml, as
wheels for that platform: the pure-Python ones once, the compiled ones (orjson, msgspec,
protobuf's upb, PyYAML's C loader, charset-normalizer) for every CPython of ``--python``
side by side (their extension modules are named per interpreter, ``*.cpython-312-*.so``, so
each Python loads its own). shiv unpacks the archive to ``~/.shiv`` on first run, as compiled
modules cannot load from inside a zip. The versions are resolved once, for the newest Python,
and pinned for the others, so every interpreter runs the same code.

Limits: CPython only (no PyPy); Linux needs glibc (manylinux wheels, no musl/Alpine) and
macOS 11 or newer on arm64; another Python version than those built for stops with a message
naming the ones it has (scripts/plugin_preamble.py).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Final

import yaml

ROOT: Final = Path(__file__).resolve().parent.parent
PREAMBLE: Final = ROOT / "scripts" / "plugin_preamble.py"
MANIFEST: Final = ROOT / "deploy" / "krew" / "rebalance.yaml"
BIN: Final = "kubectl-rebalance"
PYTHONS: Final = ("3.11", "3.12", "3.13", "3.14")
"""CPython versions whose compiled modules each file carries."""

PLATFORMS: Final[dict[str, tuple[str, ...]]] = {
    # krew os/arch -> the wheel platform tags pip may take for it (pip does not widen them).
    "linux/amd64": tuple(
        f"manylinux{tag}_x86_64" for tag in ("_2_28", "_2_17", "2014", "_2_12", "2010", "_2_5", "1")
    ),
    "linux/arm64": tuple(f"manylinux{tag}_aarch64" for tag in ("_2_28", "_2_17", "2014")),
    "darwin/amd64": tuple(
        f"macosx_{version}_{arch}"
        for version in ("11_0", "10_15", "10_14", "10_13", "10_12", "10_9")
        for arch in ("x86_64", "universal2", "intel")
    ),
    "darwin/arm64": tuple(
        f"macosx_{version}_{arch}"
        for version in ("11_0", "10_15", "10_9")
        for arch in ("arm64", "universal2")
    ),
}


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True)


def requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [str(r).split(";")[0].split("#")[0].strip() for r in project["dependencies"]]


def install(target: Path, platform: str, python: str, reqs: list[str], report: Path) -> None:
    """pip install ``reqs`` for that platform and CPython into ``target`` (wheels only)."""
    tags = [arg for tag in PLATFORMS[platform] for arg in ("--platform", tag)]
    pip(
        "install", "--target", str(target), "--only-binary=:all:", "--implementation", "cp",
        "--python-version", python, *tags, "--report", str(report), "--no-compile", *reqs,
    )  # fmt: skip


def merge(source: Path, target: Path) -> None:
    """Copy files of ``source`` missing from ``target`` (the other Pythons' extension modules)."""
    for path in sorted(source.rglob("*")):
        dest = target / path.relative_to(source)
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        elif not dest.exists():
            shutil.copy2(path, dest)


def build(platform: str, pythons: list[str], out: Path, work: Path) -> Path:
    site = work / platform.replace("/", "-") / "site-packages"
    newest, *others = sorted(pythons, key=lambda v: tuple(int(p) for p in v.split(".")))[::-1]
    report = work / f"{platform.replace('/', '-')}.json"
    install(site, platform, newest, requirements(), report)
    pins = [
        f"{item['metadata']['name']}=={item['metadata']['version']}"
        for item in json.loads(report.read_text())["install"]
    ]
    for python in others:
        extra = work / f"{platform.replace('/', '-')}-{python}"
        install(extra, platform, python, pins, work / "ignored.json")
        merge(extra, site)
    # rebalancer itself, pure Python, without dependencies (they are all above).
    pip("install", "--target", str(site), "--no-deps", "--no-compile", str(ROOT))
    (site / "rebalancer_plugin_pythons.txt").write_text(" ".join(sorted(pythons)) + "\n")
    dest = out / platform.replace("/", "-") / "kubectl-rebalance"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shiv = Path(sys.executable).parent / "shiv"
    subprocess.run(
        [str(shiv), "--site-packages", str(site), "--compressed", "--reproducible",
         "--python", "/usr/bin/env python3", "--entry-point",
         "rebalancer.cli.kubectl_plugin:main", "--preamble", str(PREAMBLE),
         "--output-file", str(dest)],
        check=True, env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"},
    )  # fmt: skip
    return dest


def archive(single_file: Path, dest: Path) -> str:
    """A tar.gz holding ``single_file`` as an executable ``kubectl-rebalance``, the same bytes
    for the same file (no times, owners or names of this machine); returns its sha256."""
    data = single_file.read_bytes()
    info = tarfile.TarInfo(BIN)
    info.size, info.mode, info.mtime = len(data), 0o755, 0
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    dest.write_bytes(packed.getvalue())
    return hashlib.sha256(dest.read_bytes()).hexdigest()


def krew(out: Path, base_url: str, homepage: str) -> Path:
    """Archive each platform built in ``out`` and write the manifest naming them."""
    manifest: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    version = manifest["spec"]["version"]
    dest = out / "krew"
    dest.mkdir(parents=True, exist_ok=True)
    platforms = []
    for platform in sorted(PLATFORMS):
        os_name, arch = platform.split("/")
        single = out / f"{os_name}-{arch}" / BIN
        if not single.is_file():
            continue
        name = f"{BIN}-{version}-{os_name}-{arch}.tar.gz"
        sha256 = archive(single, dest / name)
        platforms.append(
            {
                "selector": {"matchLabels": {"os": os_name, "arch": arch}},
                "uri": f"{base_url.rstrip('/')}/{name}",
                "sha256": sha256,
                "bin": BIN,
                "files": [{"from": BIN, "to": "."}],
            }
        )
    if not platforms:
        raise SystemExit(f"build_plugin.py: nothing built in {out}")
    manifest["spec"]["homepage"] = homepage
    manifest["spec"]["platforms"] = platforms
    path = dest / "rebalance.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False, width=100))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--platform", action="append", choices=sorted(PLATFORMS))
    parser.add_argument("--python", action="append", help=f"default: {' '.join(PYTHONS)}")
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "dist" / "plugin")
    parser.add_argument("--krew", metavar="BASE_URL", help="also write the krew archives")
    parser.add_argument("--homepage", help="the manifest's homepage (default: BASE_URL)")
    parser.add_argument("--prebuilt", action="store_true", help="with --krew: build nothing")
    args = parser.parse_args(argv)
    pythons = args.python or list(PYTHONS)
    if not args.prebuilt:
        with tempfile.TemporaryDirectory(prefix="rebalancer-plugin-") as tmp:
            for platform in args.platform or sorted(PLATFORMS):
                print(build(platform, pythons, args.out, Path(tmp)))
    if args.krew:
        print(krew(args.out, args.krew, args.homepage or args.krew))
    return 0


if __name__ == "__main__":
    sys.exit(main())
