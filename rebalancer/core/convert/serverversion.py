"""The API server's version in a snapshot file: one item of kind ``ServerVersion`` that
``rebalancer snapshot`` writes first, so that a plan of the file follows the scheduler rules of
the release it was taken from (:func:`rebalancer.core.spread.empty_selector_counts`). A file
without it (``kubectl get -o yaml``, the bundled examples) plans by the newest rules, as before.

    apiVersion: rebalancer/v1alpha1
    kind: ServerVersion
    metadata: {name: server}
    major: "1"
    minor: "37"

``minor`` as ``GET /version`` answers it: digits, with a ``+`` some providers add.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from rebalancer.core.convert.checker import show

KIND: Final = "ServerVersion"
API_VERSION: Final = "rebalancer/v1alpha1"
_MINOR: Final = re.compile(r"(0|[1-9][0-9]{0,3})\+?")


def server_version_item(minor: int) -> dict[str, Any]:
    """The item that records a server of 1.``minor``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "server"},
        "major": "1",
        "minor": str(minor),
    }


def server_minor(obj: Mapping[str, Any], problems: list[str]) -> int | None:
    """The minor of 1.x a ServerVersion item records; None with a problem appended when the
    item is not one (naming the field and the value)."""
    where = f"{KIND} item"
    found = len(problems)
    if obj.get("apiVersion") != API_VERSION:
        problems.append(
            f"{where}: apiVersion must be {API_VERSION}, got {show(obj.get('apiVersion'))}"
        )
    major = obj.get("major")
    if major != "1":
        problems.append(f'{where}: major must be "1", got {show(major)}')
    minor = obj.get("minor")
    matched = _MINOR.fullmatch(minor) if isinstance(minor, str) else None
    if matched is None:
        problems.append(
            f'{where}: minor must be the minor as GET /version says it ("37"), got {show(minor)}'
        )
    if len(problems) > found or matched is None:
        return None
    return int(matched.group(1))
