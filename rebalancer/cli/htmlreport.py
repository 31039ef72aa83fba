"""placeholder"""

from __future__ import annotations

from typing import Any


def plan_html(plan: Any) -> str:
    return ""


def run_html(report: Any) -> str:
    return ""
