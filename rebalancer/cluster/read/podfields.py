"""The fields of a Pod that rebalancer reads, declared once (the API's JSON names).

Everything that picks fields out of a pod follows this list: the trimmed snapshot
(:mod:`rebalancer.cluster.read.slim`) keeps exactly these; the typed decoders declare them
(the msgspec Structs of :mod:`rebalancer.cluster.read.fastdecode`, the messages of
``protodecode/schema.proto``), which tests/test_podfields.py checks against this module. A field
the converter starts to read goes here first.
"""

from __future__ import annotations

from typing import Final

METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
    "resourceVersion",
)
SPEC: Final = (
    "nodeName",
    "overhead",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priority",
    "priorityClassName",
    "terminationGracePeriodSeconds",
    "resources",
    "resourceClaims",
    "schedulingGroup",
    # Read only for the node features a pod may need (rebalancer.core.convert.features).
    "hostNetwork",
    "hostUsers",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "volumes",
)
CONTAINER_LISTS: Final = ("containers", "initContainers", "ephemeralContainers")
"""The spec fields that are lists of containers (:data:`CONTAINER`); ``volumes`` is a list of
:data:`VOLUME`."""
CONTAINER: Final = ("name", "resources", "restartPolicy", "restartPolicyRules", "volumeMounts")
VOLUME_MOUNT: Final = ("bindMountOptions",)
VOLUME_SOURCES: Final = ("emptyDir", "persistentVolumeClaim", "ephemeral")
VOLUME: Final = ("name", *VOLUME_SOURCES)
SCHEDULING_GROUP: Final = ("podGroupName",)
STATUS: Final = ("phase", "startTime", "conditions", "containerStatuses", "initContainerStatuses")
CONDITION: Final = ("type", "status", "reason")
CONDITION_TYPES: Final = frozenset({"Ready", "DisruptionTarget", "PodResizePending"})
"""Readiness (for PDBs), leaving pods, and an in-place resize the kubelet cannot make."""
CONTAINER_STATUS: Final = ("name", "allocatedResources", "resources")
