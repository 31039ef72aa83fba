"""Print one line per plan the repository can produce offline: its input and the SHA-256 of the
plan as ``-o json`` renders it. Two checkouts print the same lines when their plans are
byte-identical, so a change that must not alter behaviour is checked by diffing the output.

Inputs: every snapshot under ``examples/`` and ``tests/data/``, the clusters ``bench.gen``
generates (small and medium; ``--large`` adds the 150,000-pod one), and every case of
``tests/data/planner_cases.yaml``.

Usage: ``python scripts/plan_digest.py [--large] > digests.txt``
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_000_000.0


def _cli_plan(path: Path) -> bytes:
    out = subprocess.run(
        [sys.executable, "-m", "rebalancer", "plan", "--snapshot", str(path), "-o", "json"],
        capture_output=True,
        check=False,
        cwd=ROOT,
    )
    return out.stdout + f"\nexit {out.returncode}\n".encode() + out.stderr


def _case_plans() -> list[tuple[str, bytes]]:
    sys.path.insert(0, str(ROOT))
    from rebalancer.cli.render import render_plan  # noqa: PLC0415  # after sys.path is set
    from rebalancer.cluster.read.policyfile import load_policy  # noqa: PLC0415
    from rebalancer.core.planner import plan  # noqa: PLC0415
    from tests.casedsl import build_snapshot  # noqa: PLC0415

    cases: list[dict[str, Any]] = yaml.safe_load(
        (ROOT / "tests" / "data" / "planner_cases.yaml").read_text()
    )["cases"]
    rows = []
    for case in cases:
        doc = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy"}
        doc.update(case.get("policy") or {})
        policy = load_policy(yaml.safe_dump(doc), "case")
        result = plan(build_snapshot(case), policy, NOW)
        rows.append((f"case:{case['name']}", render_plan(result, "json").encode()))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true", help="also the 5,000-node cluster")
    args = ap.parse_args()
    files = sorted(ROOT.glob("examples/*.yaml")) + sorted(ROOT.glob("tests/data/*snapshot*"))
    files += sorted((ROOT / "tests" / "data" / "snapshot").glob("*"))
    rows = [(str(p.relative_to(ROOT)), _cli_plan(p)) for p in files if p.is_file()]
    with tempfile.TemporaryDirectory() as tmp:
        for size in ["small", "medium"] + (["large"] if args.large else []):
            out = Path(tmp) / f"{size}.json"
            subprocess.run(
                [sys.executable, "-m", "bench.gen", "--size", size, "-o", str(out)],
                check=True,
                cwd=ROOT,
                capture_output=True,
            )
            rows.append((f"bench.gen:{size}", _cli_plan(out)))
    rows += _case_plans()
    for name, data in rows:
        print(f"{hashlib.sha256(data).hexdigest()[:16]}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
