"""Runs first in the single-file ``kubectl-rebalance`` (scripts/build_plugin.py), before any of
rebalancer is imported: stops with a clear message on an interpreter the file was not built for
(its compiled modules would fail later with an obscure ImportError)."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

site_packages = Path(globals().get("site_packages") or ".")
built = (site_packages / "rebalancer_plugin_pythons.txt").read_text().split()
running = f"{sys.version_info.major}.{sys.version_info.minor}"
if platform.python_implementation() != "CPython" or running not in built:
    sys.stderr.write(
        f"kubectl-rebalance: this file runs on CPython {', '.join(built)}; "
        f"python3 here is {platform.python_implementation()} {platform.python_version()}. "
        "Put one of those first on PATH as python3, or `pip install` rebalancer in a "
        "virtualenv of your Python instead.\n"
    )
    sys.exit(2)
