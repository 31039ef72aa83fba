"""The resource types rebalancer reads: names, kinds and LIST paths (shared by the reader, the
API adapter and the RBAC pre-flight)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource type rebalancer reads, with what list items lack (``kind``, ``apiVersion``)."""

    name: str  # plural, as in the URL and in RBAC rules
    kind: str
    api_version: str  # "v1" or "group/version"
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def rbac_name(self) -> str:
        """The resource as ``kubectl auth can-i`` names it: ``pods``, ``replicasets.apps``."""
        return f"{self.name}.{self.group}" if self.group else self.name

    def path(self, namespace: str | None) -> str:
        """The LIST URL path, namespace-scoped when a namespace is given and the kind has one."""
        prefix = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.name}"
        return f"{prefix}/{self.name}"


RESOURCES: Final = (
    Resource("nodes", "Node", "v1", namespaced=False),
    Resource("pods", "Pod", "v1", namespaced=True),
    Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", namespaced=True),
    Resource("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1", namespaced=False),
    Resource("persistentvolumeclaims", "PersistentVolumeClaim", "v1", namespaced=True),
    Resource("persistentvolumes", "PersistentVolume", "v1", namespaced=False),
    Resource("services", "Service", "v1", namespaced=True),
    Resource("replicasets", "ReplicaSet", "apps/v1", namespaced=True),
    Resource("statefulsets", "StatefulSet", "apps/v1", namespaced=True),
    Resource("deployments", "Deployment", "apps/v1", namespaced=True),
    Resource("replicationcontrollers", "ReplicationController", "v1", namespaced=True),
    Resource("namespaces", "Namespace", "v1", namespaced=False),
)
"""What rebalancer reads, in read order (the order of a written snapshot)."""

NODEPOOLS: Final = Resource("nodepools", "NodePool", "karpenter.sh/v1", namespaced=False)
"""Karpenter's NodePools: where a node can be added (read where served)."""

OPTIONAL_RESOURCES: Final = (NODEPOOLS,)
"""What rebalancer reads where the API server serves it and RBAC allows it, after
:data:`RESOURCES`; a kind that is not served (404) or not allowed (403) is read as none."""

RESOURCES_BY_NAME: Final = {r.name: r for r in (*RESOURCES, *OPTIONAL_RESOURCES)}
