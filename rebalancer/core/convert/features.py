"""Node features a pod needs, as kube-scheduler's NodeDeclaredFeatures filter infers them.

Kubernetes 1.36 (beta, on) and 1.37 (GA): a node lists the features its kubelet supports in
``status.declaredFeatures``; a pod that needs one fits only nodes declaring it. The scheduler
infers a pod's needs from its spec alone (component-helpers' ``nodedeclaredfeatures``, v0.37):

- ``RestartAllContainersOnContainerExits``: a container or init container has a
  ``restartPolicyRules`` entry whose ``action`` is ``RestartAllContainers``;
- ``UserNamespacesHostNetworkSupport``: ``hostNetwork`` is true and ``hostUsers`` is false;
- ``VolumeBindMountOptions``: a volume mount of a container, init container or ephemeral
  container has ``bindMountOptions``.

The other registered features (in-place resize variants, DRA, websockets) are inferred only for
updates, never for scheduling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from rebalancer.core.convert.checker import Checker

RESTART_ALL: Final = "RestartAllContainersOnContainerExits"
USERNS_HOST_NETWORK: Final = "UserNamespacesHostNetworkSupport"
BIND_MOUNT_OPTIONS: Final = "VolumeBindMountOptions"
NO_FEATURES: Final[frozenset[str]] = frozenset()


def _containers(chk: Checker, spec: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    return [chk.as_obj(c, f"spec.{key}[{i}]") for i, c in enumerate(chk.seq(spec, key, "spec"))]


def pod_features(chk: Checker, spec: Mapping[str, Any]) -> frozenset[str]:
    """The node features ``spec`` needs to be scheduled (empty for nearly every pod)."""
    found: set[str] = set()
    ephemeral = [
        chk.as_obj(c, f"spec.ephemeralContainers[{i}]")
        for i, c in enumerate(chk.seq(spec, "ephemeralContainers", "spec"))
    ]
    for key, containers in (
        ("containers", _containers(chk, spec, "containers")),
        ("initContainers", _containers(chk, spec, "initContainers")),
        ("ephemeralContainers", ephemeral),
    ):
        for i, container in enumerate(containers):
            path = f"spec.{key}[{i}]"
            if key != "ephemeralContainers":
                for j, rule in enumerate(chk.seq(container, "restartPolicyRules", path)):
                    rule_path = f"{path}.restartPolicyRules[{j}]"
                    action = chk.text(chk.as_obj(rule, rule_path), "action", rule_path)
                    if action == "RestartAllContainers":
                        found.add(RESTART_ALL)
            for j, mount in enumerate(chk.seq(container, "volumeMounts", path)):
                mount_path = f"{path}.volumeMounts[{j}]"
                if chk.strings(chk.as_obj(mount, mount_path), "bindMountOptions", mount_path):
                    found.add(BIND_MOUNT_OPTIONS)
    if chk.flag(spec, "hostNetwork", "spec") and spec.get("hostUsers") is False:
        found.add(USERNS_HOST_NETWORK)
    return frozenset(found) if found else NO_FEATURES


def node_features(chk: Checker, status: Mapping[str, Any]) -> frozenset[str]:
    """``status.declaredFeatures`` of a node (empty when it declares none)."""
    declared = chk.strings(status, "declaredFeatures", "status")
    return frozenset(declared) if declared else NO_FEATURES
