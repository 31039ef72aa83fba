"""Policy validation against the size of its lists: the time per item should not grow with N.

    python -m bench.validation [--sizes 10000,20000,40000,100000] [--out FILE]

Each case is a policy with one long list (an ``In`` expression's values, ``namespaces.exclude``,
``namespaces.include``, ``defaultConstraints``, ``matchExpressions``), every item distinct, and
the same list with every item written twice (each second one is a problem). For each size the
decoded document is validated by ``rebalancer.core.policy.policy_from_document`` (the YAML parse
is left out: it is the same for any validator) and the whole ``load_policy`` on the YAML text
is timed once more. Printed: seconds, microseconds per item and the ratio of that to the
smallest size's (about 1 when validation is linear, about N/N0 when it is quadratic).

Figures are printed and written, never asserted. The machine is shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from rebalancer.cluster.read.policyfile import load_policy
from rebalancer.core.errors import InputError
from rebalancer.core.policy import policy_from_document

_HEADER = {"apiVersion": "rebalancer/v1alpha1", "kind": "RebalancerPolicy"}


def _in_values(n: int, twice: bool) -> dict[str, Any]:
    values = [f"v{i}" for i in range(n)]
    expression = {"key": "app", "operator": "In", "values": values * 2 if twice else values}
    return {**_HEADER, "labelSelector": {"matchExpressions": [expression]}}


def _namespaces(key: str) -> Callable[[int, bool], dict[str, Any]]:
    def make(n: int, twice: bool) -> dict[str, Any]:
        names = [f"ns-{i}" for i in range(n)]
        return {**_HEADER, "namespaces": {key: names * 2 if twice else names}}

    return make


def _default_constraints(n: int, twice: bool) -> dict[str, Any]:
    items = [{"maxSkew": 1, "topologyKey": f"example.com/k{i}"} for i in range(n)]
    return {**_HEADER, "defaultConstraints": items * 2 if twice else items}


def _expressions(n: int, twice: bool) -> dict[str, Any]:
    items = [{"key": f"k{i}", "operator": "Exists"} for i in range(n)]
    return {**_HEADER, "labelSelector": {"matchExpressions": items * 2 if twice else items}}


CASES: dict[str, Callable[[int, bool], dict[str, Any]]] = {
    "In values": _in_values,
    "namespaces.exclude": _namespaces("exclude"),
    "namespaces.include": _namespaces("include"),
    "defaultConstraints": _default_constraints,
    "matchExpressions": _expressions,
}


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    with contextlib.suppress(InputError):  # the lists written twice are refused, every problem
        work()
    return time.perf_counter() - start


def measure(sizes: list[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, make in CASES.items():
        for twice in (False, True):
            base: float | None = None
            for n in sizes:
                document = make(n, twice)
                seconds = _timed(partial(policy_from_document, document, "bench"))
                text = yaml.safe_dump(document)
                loaded = _timed(partial(load_policy, text, "bench"))
                per_item = seconds / n * 1e6
                base = per_item if base is None else base
                row = {
                    "case": name + (" (each twice)" if twice else ""),
                    "n": n,
                    "yaml_bytes": len(text.encode()),
                    "validate_s": round(seconds, 4),
                    "us_per_item": round(per_item, 2),
                    "ratio_to_smallest": round(per_item / base, 2) if base else None,
                    "load_policy_s": round(loaded, 3),
                }
                rows.append(row)
                print(
                    f"{row['case']:<34} n={n:>7} {row['yaml_bytes']:>9} B  "
                    f"validate {seconds:8.3f} s  {per_item:7.2f} us/item  "
                    f"x{row['ratio_to_smallest']}  load_policy {loaded:7.3f} s",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,20000,40000,100000")
    ap.add_argument("--out", default="bench/results/validation.json")
    args = ap.parse_args(argv)
    rows = measure([int(s) for s in args.sizes.split(",")])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
