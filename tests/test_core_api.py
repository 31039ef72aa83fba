"""The core's one way in for the shells (rebalancer.core.api): every name it lists resolves to
the very object its module defines, its list and its table agree, and an unknown name is an
AttributeError, as for any module."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from rebalancer.core import api

SOURCE = Path(api.__file__).read_text()


def test_every_name_is_its_modules_own_object() -> None:
    where = vars(api)["_WHERE"]
    assert sorted(api.__all__) == sorted(where)
    assert len(set(api.__all__)) == len(api.__all__)
    for name, module in where.items():
        assert getattr(api, name) is getattr(importlib.import_module(module), name), name


def test_the_type_checking_imports_are_the_table() -> None:
    """What mypy sees (the TYPE_CHECKING imports) is what runs (the table)."""
    seen: dict[str, str] = {}
    for node in ast.walk(ast.parse(SOURCE)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rebalancer."):
            for alias in node.names:
                seen[alias.name] = str(node.module)
    assert seen == vars(api)["_WHERE"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = api.nothing_here
