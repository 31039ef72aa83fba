"""Session hooks for the unit tests.

The tests that need a packaging tool built from Go modules (helm, promtool, actionlint:
:mod:`tests.packaging_tools`) run last, in their usual order: on a machine where nothing is
cached yet, scripts/test.sh builds those tools in the background while the other tests run.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest


@cache
def _needs_tools(path: Path) -> bool:
    return "packaging_tools" in path.read_text(encoding="utf-8")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _needs_tools(item.path) and item.path.name != "packaging_tools.py")
