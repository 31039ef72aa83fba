"""Check that the lock files match pyproject.toml (and, with --installed, this environment).

    python scripts/check_lock.py              # the locks against pyproject.toml
    python scripts/check_lock.py --installed  # also: every locked package installed as locked

The locks (``requirements.lock``, ``requirements-build.lock``) are written by
``scripts/lock.sh`` with pip-tools. They match when every dependency of ``[project]`` (and
every build requirement) is pinned, at a version its specifier admits, with hashes; and when
the lock is closed: every requirement of every locked package that is installed at its locked
version names a locked package at an admitted version. A dependency added to pyproject.toml
without running ``scripts/lock.sh`` fails here, naming it. Exit 0 when all holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ \\;]+)")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Pin:
    name: str  # canonical
    version: str
    hashes: int


def parse_lock(text: str) -> dict[str, Pin]:
    """The pins of a pip-compile lock, by canonical name, with their count of sha256 hashes."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in text.splitlines():
        stripped = line.strip()
        match = _PIN.match(line)
        if match:
            current = Pin(canonicalize_name(match[1]), match[2], len(_HASH.findall(line)))
            pins[current.name] = current
        elif current is not None and stripped.startswith("--hash="):
            current = Pin(current.name, current.version, current.hashes + len(_HASH.findall(line)))
            pins[current.name] = current
        elif stripped and not stripped.startswith("#"):
            current = None
    return pins


def _misses(
    requirements: Iterable[str], pins: Mapping[str, Pin]
) -> Iterator[tuple[str, Pin | None]]:
    """Each requirement (that applies without extras) that ``pins`` does not meet: with the pin
    at a version outside its specifier, or None when it is not locked at all."""
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        pin = pins.get(canonicalize_name(req.name))
        if pin is None or not req.specifier.contains(Version(pin.version), prereleases=True):
            yield text, pin


def check_pins(requirements: Iterable[str], pins: Mapping[str, Pin], lock: str) -> list[str]:
    """Problems with ``requirements`` against ``pins``: missing, outside the specifier, or
    without a hash; and pins without a hash at all."""
    problems = []
    for text, pin in _misses(requirements, pins):
        name = Requirement(text).name
        wrong = (
            f"{name} ({text}) is not locked"
            if pin is None
            else f"{name}=={pin.version} is outside {text!r}"
        )
        problems.append(f"{lock}: {wrong}: run scripts/lock.sh")
    problems.extend(
        f"{lock}: {p.name}=={p.version} has no hash" for p in pins.values() if not p.hashes
    )
    return problems


def check_closed(pins: Mapping[str, Pin], lock: str) -> tuple[list[str], int]:
    """Problems with the lock's closure, from the metadata of the packages installed at their
    locked version; and how many locked packages were checked that way."""
    problems: list[str] = []
    checked = 0
    for pin in pins.values():
        try:
            dist = metadata.distribution(pin.name)
        except metadata.PackageNotFoundError:
            continue
        if Version(dist.version) != Version(pin.version):
            continue
        checked += 1
        problems.extend(
            f"{lock}: {pin.name} needs {text!r}, which is not locked"
            if dep is None
            else f"{lock}: {pin.name} needs {text!r}, locked at {dep.name}=={dep.version}"
            for text, dep in _misses(dist.requires or (), pins)
        )
    return problems, checked


def check_installed(pins: Mapping[str, Pin], lock: str) -> list[str]:
    """Locked packages missing from this environment or installed at another version."""
    problems: list[str] = []
    for pin in pins.values():
        try:
            version = metadata.version(pin.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{lock}: {pin.name}=={pin.version} is not installed")
            continue
        if Version(version) != Version(pin.version):
            problems.append(
                f"{lock}: {pin.name} is installed at {version}, locked at {pin.version}"
            )
    return problems


def check(root: Path, *, installed: bool) -> list[str]:
    with (root / "pyproject.toml").open("rb") as f:
        pyproject = tomllib.load(f)
    runtime = parse_lock((root / "requirements.lock").read_text())
    build = parse_lock((root / "requirements-build.lock").read_text())
    problems = check_pins(pyproject["project"]["dependencies"], runtime, "requirements.lock")
    problems += check_pins(pyproject["build-system"]["requires"], build, "requirements-build.lock")
    closure, _ = check_closed(runtime, "requirements.lock")
    problems += closure
    if installed:
        problems += check_installed(runtime, "requirements.lock")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--installed",
        action="store_true",
        help="also require every package of requirements.lock installed at its locked version",
    )
    args = parser.parse_args(argv)
    problems = check(ROOT, installed=args.installed)
    for problem in problems:
        print(f"check_lock: {problem}", file=sys.stderr)
    if not problems:
        print("check_lock: requirements.lock and requirements-build.lock match pyproject.toml")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
