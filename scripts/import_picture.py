"""The package's import picture in text: which part imports which, and any import cycles.

Parts are the folders (``core``, ``core.convert``, ``cluster.api``, ``cluster.read``,
``cluster.read.protodecode``, ``cluster.act``, ``cli``) and the base modules of ``cluster``.
Each line is one part, its size in modules and lines, and the parts it imports with the number
of module-to-module imports. Then every cycle of modules that import each other (strongly
connected groups), which should be none. Reads the code's imports with grimp (import-linter's
graph library); runs nothing.

Usage: ``python scripts/import_picture.py``
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("rebalancer.core.convert", "rebalancer.cluster.read.protodecode")


def part_of(module: str) -> str:
    """The folder a module belongs to (a package's own ``__init__`` belongs to the package)."""
    for folder in FOLDERS:
        if module == folder or module.startswith(folder + "."):
            return folder.removeprefix("rebalancer.")
    pieces = module.split(".")
    if len(pieces) <= 2 or pieces[1] != "cluster":
        return ".".join(pieces[1:2]) or "rebalancer"
    if len(pieces) == 3:
        return "cluster." + pieces[2] if _is_package(module) else "cluster (base)"
    return ".".join(pieces[1:3])


def _is_package(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").exists()


def _lines(module: str) -> int:
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    return len(path.read_text().splitlines()) if path.exists() else 0


def cycles(graph: grimp.ImportGraph, modules: list[str]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(modules)) for m in modules}
    for start in modules:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def main() -> int:
    graph = grimp.build_graph("rebalancer")
    modules = sorted(m for m in graph.modules if m.startswith("rebalancer"))
    size: Counter[str] = Counter()
    count: Counter[str] = Counter()
    uses: dict[str, Counter[str]] = defaultdict(Counter)
    for module in modules:
        part = part_of(module)
        count[part] += 1
        size[part] += _lines(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other.startswith("rebalancer") and part_of(other) != part:
                uses[part][part_of(other)] += 1
    for part in sorted(count):
        used = ", ".join(f"{p} ({n})" for p, n in sorted(uses[part].items())) or "-"
        print(f"{part:<28} {count[part]:>3} modules {size[part]:>6} lines  uses: {used}")
    groups = cycles(graph, modules)
    print(f"\nimport cycles between modules: {len(groups)}")
    for group in groups:
        print("  " + " <-> ".join(m.removeprefix("rebalancer.") for m in group))
    return 0


if __name__ == "__main__":
    sys.exit(main())
