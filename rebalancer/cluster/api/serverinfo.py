"""The API server's version and the feature gates that change what rebalancer plans, read once.

``GET /version`` gives the version. The gates come from kube-apiserver's own
``kubernetes_feature_enabled`` metric when the caller may read ``/metrics``; otherwise they are
each release's defaults (a cluster may have changed them: ``featureGatesFrom`` says which).
Discovery says whether the workload API's PodGroups are served (gang scheduling).

What each gate changes (README, "Supported Kubernetes versions"):

- ``MatchLabelKeysInPodTopologySpreadSelectorMerge`` (on from 1.34): the API server merges a
  constraint's ``matchLabelKeys`` into its ``labelSelector``; before, rebalancer merges them,
  as kube-scheduler does.
- ``PodLevelResources`` (on from 1.34): a pod's ``spec.resources`` is what the scheduler fits.
- ``NodeDeclaredFeatures`` (on from 1.36, GA in 1.37): pods needing a node feature fit only
  nodes declaring it in ``status.declaredFeatures``.
- ``GenericWorkload`` (beta in 1.37, off by default): pods in a PodGroup
  (``spec.schedulingGroup``) are scheduled as a gang: rebalancer never evicts one alone.
- ``InPlacePodVerticalScaling`` (on from 1.33): a resized pod's allocated resources count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

GATES: tuple[str, ...] = (
    "MatchLabelKeysInPodTopologySpreadSelectorMerge",
    "PodLevelResources",
    "NodeDeclaredFeatures",
    "GenericWorkload",
    "InPlacePodVerticalScaling",
)

# (gate, the first minor of 1.x where it is on by default); GenericWorkload is off in all.
_DEFAULT_ON_FROM: Mapping[str, int | None] = {
    "MatchLabelKeysInPodTopologySpreadSelectorMerge": 34,
    "PodLevelResources": 34,
    "NodeDeclaredFeatures": 36,
    "GenericWorkload": None,
    "InPlacePodVerticalScaling": 33,
}

_METRIC = re.compile(r"^kubernetes_feature_enabled\{([^}]*)\}\s+([0-9.eE+-]+)\s*$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_MINOR = re.compile(r"^(\d+)")


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``/version``, ``/metrics`` and discovery said (``None``: not known)."""

    version: str | None = None  # gitVersion, e.g. "v1.37.2"
    minor: int | None = None  # of 1.x
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    gates_from: str = "unknown"  # "metrics", "defaults" or "unknown"
    workload_api: str | None = None  # the group/version serving podgroups, when one does

    def data(self) -> dict[str, Any]:
        """The ``server`` field of ``plan -o json`` and of the run summary line."""
        return {
            "version": self.version,
            "featureGates": dict(self.feature_gates),
            "featureGatesFrom": self.gates_from,
            "workloadApi": self.workload_api,
        }


def default_gates(minor: int) -> dict[str, bool]:
    """Each gate of :data:`GATES` as release 1.``minor`` sets it by default."""
    return {gate: since is not None and minor >= since for gate, since in _DEFAULT_ON_FROM.items()}


def gates_from_metrics(text: str) -> dict[str, bool]:
    """The :data:`GATES` that a ``/metrics`` page's ``kubernetes_feature_enabled`` samples
    name (1 on, 0 off); gates it does not name are left out."""
    found: dict[str, bool] = {}
    for match in _METRIC.finditer(text):
        labels = dict(_LABEL.findall(match.group(1)))
        name = labels.get("name", "")
        if name in GATES:
            found[name] = float(match.group(2)) == 1.0
    return found


def minor_of(version: Mapping[str, Any]) -> int | None:
    """The minor of a ``/version`` answer ("37", or "37+" on some providers)."""
    minor = _MINOR.match(str(version.get("minor", "")))
    return int(minor.group(1)) if minor else None


# A GET: path -> (HTTP status, body); any exception means "no answer".
Get = Callable[[str], tuple[int, bytes]]


def read_server_info(get: Get) -> ServerInfo:
    """Ask the API server once. Every request may fail (403, 404, no answer): what it would
    have said is then unknown or the release's default, never an error."""

    def fetch(path: str) -> tuple[int, bytes]:
        try:
            return get(path)
        except Exception:  # best effort: the plan does not depend on it
            return 0, b""

    version = _json_object(fetch, "/version") or {}
    git = version.get("gitVersion")
    minor = minor_of(version)
    gates: dict[str, bool] = default_gates(minor) if minor is not None else {}
    gates_from = "defaults" if minor is not None else "unknown"
    status, body = fetch("/metrics")
    if status == 200:
        measured = gates_from_metrics(body.decode("utf-8", "replace"))
        if measured:
            gates.update(measured)
            gates_from = "metrics"
    return ServerInfo(
        version=git if isinstance(git, str) else None,
        minor=minor,
        feature_gates=gates,
        gates_from=gates_from,
        workload_api=_workload_api(fetch),
    )


def read_server_minor(get: Get) -> int | None:
    """The minor of 1.x that ``GET /version`` answers; None when it does not (best effort)."""
    try:
        version = _json_object(get, "/version")
    except Exception:  # the plan then follows the newest release's rules
        return None
    return minor_of(version) if version is not None else None


def _workload_api(fetch: Get) -> str | None:
    """The scheduling.k8s.io version that serves ``podgroups``, newest listed first."""
    group = _json_object(fetch, "/apis/scheduling.k8s.io")
    if group is None:
        return None
    versions = [v.get("groupVersion") for v in group.get("versions", []) if isinstance(v, dict)]
    for gv in versions:
        if not isinstance(gv, str) or gv == "scheduling.k8s.io/v1":
            continue
        resources = (_json_object(fetch, f"/apis/{gv}") or {}).get("resources", [])
        if any(isinstance(r, dict) and r.get("name") == "podgroups" for r in resources):
            return gv
    return None


def _json_object(fetch: Get, path: str) -> dict[str, Any] | None:
    """The JSON object ``path`` answers with (status 200); None for any other answer."""
    status, body = fetch(path)
    if status != 200:
        return None
    try:
        loaded = json.loads(body)
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None
