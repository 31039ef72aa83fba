"""``rebalancer policy import --all-profiles`` on a policy of N spread profiles.

    python -m bench.import_profiles [--profiles 100,300,1000] [--source DIR]
                                    [--out bench/results/import_profiles.json]

The policy (:func:`policy`): ``maxNoOfPodsToEvictTotal: 2N`` and N profiles, each enabling
``RemovePodsViolatingTopologySpreadConstraint`` with ``namespaces.include: [ns-I]``. For each
size ``rebalancer policy import --all-profiles DIR`` runs in a subprocess (``python -P``, so
that the working directory is not on the path, importing ``rebalancer`` from ``--source``: to
measure another checkout side by side): exit code, wall time, peak RSS, bytes on stdout and
stderr, files written and their bytes. Figures
are printed and written, never asserted; the machine is shared, timings are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.plan import RESULTS, machine, run_child

TOPOLOGY = "RemovePodsViolatingTopologySpreadConstraint"


def policy(profiles: int) -> dict[str, Any]:
    """A DeschedulerPolicy of ``profiles`` spread profiles, one namespace each."""
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictTotal": 2 * profiles,
        "profiles": [
            {
                "name": f"spread-{i}",
                "pluginConfig": [
                    {"name": TOPOLOGY, "args": {"namespaces": {"include": [f"ns-{i}"]}}}
                ],
                "plugins": {"balance": {"enabled": [TOPOLOGY]}},
            }
            for i in range(profiles)
        ],
    }


def measure(profiles: int, source: Path) -> dict[str, Any]:
    """One import of ``profiles`` profiles, in a subprocess importing from ``source``."""
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        folder = Path(tmp)
        given = folder / "policy.yaml"
        given.write_text(yaml.safe_dump(policy(profiles)))
        out_dir = folder / "out"
        stdout, stderr = folder / "stdout", folder / "stderr"
        env_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = str(source)
        try:
            with stdout.open("wb") as out, stderr.open("wb") as err:
                argv = [sys.executable, "-P", "-m", "rebalancer", "policy", "import"]
                argv += ["--all-profiles", str(out_dir), str(given)]
                wall, rss, code = run_child(argv, out, err)
        finally:
            if env_path is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = env_path
        written = sorted(out_dir.glob("*.yaml")) if out_dir.is_dir() else []
        return {
            "profiles": profiles,
            "exit": code,
            "wall_s": round(wall, 2),
            "peak_rss_mib": round(rss / 2**20, 1),
            "stdout_bytes": stdout.stat().st_size,
            "stderr_bytes": stderr.stat().st_size,
            "files": len(written),
            "files_bytes": sum(p.stat().st_size for p in written),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--profiles", default="100,300,1000")
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--out", type=Path, default=RESULTS / "import_profiles.json")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.profiles.split(",")):
        row = measure(size, args.source.resolve())
        print(json.dumps(row), flush=True)
        rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine(), "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
