"""Pods (JSON objects) encoded as kube-apiserver encodes them in protobuf, for the tests of
rebalancer.cluster.read.protodecode: the encode side, with the classes generated from our schema.

Written from the Go encoder's rules (k8s.io/api generated.pb.go): a string or integer that is
not a pointer is always written, even empty; a pointer, a slice or a map only when set; a
map's entries sorted by key; a Time as its Unix seconds (no nanos), nothing for the zero time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rebalancer.cluster.read.protodecode import MAGIC
from rebalancer.cluster.read.protodecode import schema_pb2 as pb


def _entries(value: Mapping[str, str] | None) -> list[bytes]:
    return [
        pb.StringEntry(key=k, value=v).SerializeToString() for k, v in sorted((value or {}).items())
    ]


def _quantity_entries(value: Mapping[str, str] | None) -> list[pb.QuantityEntry]:
    return [
        pb.QuantityEntry(key=k, value=pb.Quantity(string=v))
        for k, v in sorted((value or {}).items())
    ]


def _requirements_message(value: Mapping[str, Any]) -> pb.ResourceRequirements:
    return pb.ResourceRequirements(
        limits=_quantity_entries(value.get("limits")),
        requests=_quantity_entries(value.get("requests")),
    )


def _requirement(value: Mapping[str, Any]) -> pb.Requirement:
    return pb.Requirement(
        key=value.get("key", ""), operator=value.get("operator", ""), values=value.get("values", [])
    )


def _seconds(value: str | None) -> pb.Time:
    if value is None:
        return pb.Time()
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = int(moment.timestamp())
    return pb.Time(seconds=seconds) if seconds else pb.Time()


def _container(value: Mapping[str, Any]) -> bytes:
    message = pb.Container(
        name=value.get("name", ""), resources=_requirements_message(value.get("resources") or {})
    )
    if value.get("restartPolicy") is not None:
        message.restartPolicy = value["restartPolicy"]
    # The schema keeps the rules as bytes (presence only): any non-empty message stands for one.
    message.restartPolicyRules.extend(b"\n\x01x" for _ in value.get("restartPolicyRules") or ())
    for mount in value.get("volumeMounts") or ():
        message.volumeMounts.add().bindMountOptions.extend(mount.get("bindMountOptions") or ())
    return message.SerializeToString()


def _toleration(value: Mapping[str, Any]) -> bytes:
    message = pb.Toleration(
        key=value.get("key", ""),
        operator=value.get("operator", ""),
        value=value.get("value", ""),
        effect=value.get("effect", ""),
    )
    if value.get("tolerationSeconds") is not None:
        message.tolerationSeconds = value["tolerationSeconds"]
    return message.SerializeToString()


def _affinity(value: Mapping[str, Any]) -> bytes:
    message = pb.Affinity()
    node_affinity = value.get("nodeAffinity")
    if node_affinity is not None:
        message.nodeAffinity.SetInParent()
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            selector = message.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
            selector.SetInParent()
            for term in required.get("nodeSelectorTerms") or ():
                selector.nodeSelectorTerms.append(
                    pb.NodeSelectorTerm(
                        matchExpressions=[
                            _requirement(r) for r in term.get("matchExpressions", ())
                        ],
                        matchFields=[_requirement(r) for r in term.get("matchFields", ())],
                    )
                )
    return message.SerializeToString()


def _constraint(value: Mapping[str, Any]) -> bytes:
    message = pb.TopologySpreadConstraint(
        maxSkew=value.get("maxSkew", 0),
        topologyKey=value.get("topologyKey", ""),
        whenUnsatisfiable=value.get("whenUnsatisfiable", ""),
        matchLabelKeys=value.get("matchLabelKeys", []),
    )
    selector = value.get("labelSelector")
    if selector is not None:
        message.labelSelector.SetInParent()
        message.labelSelector.matchLabels.extend(
            pb.StringEntry(key=k, value=v)
            for k, v in sorted(selector.get("matchLabels", {}).items())
        )
        message.labelSelector.matchExpressions.extend(
            _requirement(r) for r in selector.get("matchExpressions", ())
        )
    for field in ("minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy"):
        if value.get(field) is not None:
            setattr(message, field, value[field])
    return message.SerializeToString()


def _owner(value: Mapping[str, Any]) -> bytes:
    message = pb.OwnerReference(
        kind=value.get("kind", ""),
        name=value.get("name", ""),
        uid=value.get("uid", ""),
        apiVersion=value.get("apiVersion", ""),
    )
    if value.get("controller") is not None:
        message.controller = value["controller"]
    return message.SerializeToString()


def _claim(value: Mapping[str, Any]) -> bytes:
    message = pb.PodResourceClaim(name=value.get("name", ""))
    for field in ("resourceClaimName", "resourceClaimTemplateName"):
        if value.get(field) is not None:
            setattr(message, field, value[field])
    return message.SerializeToString()


def _volume(value: Mapping[str, Any]) -> pb.Volume:
    message = pb.Volume(name=value.get("name", ""))
    source = message.volumeSource
    source.SetInParent()
    if value.get("emptyDir") is not None:
        source.emptyDir = b""
    if value.get("persistentVolumeClaim") is not None:
        source.persistentVolumeClaim.claimName = value["persistentVolumeClaim"].get("claimName", "")
    if value.get("ephemeral") is not None:
        source.ephemeral = b"\n\x00"  # volumeClaimTemplate: {} (not read)
    return message


def _status(value: Mapping[str, Any]) -> pb.ContainerStatus:
    message = pb.ContainerStatus(
        name=value.get("name", ""),
        allocatedResources=[
            e.SerializeToString() for e in _quantity_entries(value.get("allocatedResources"))
        ],
    )
    if value.get("resources") is not None:
        message.resources = _requirements_message(value["resources"]).SerializeToString()
    return message


def encode_pod(obj: Mapping[str, Any]) -> pb.Pod:
    """A pod as JSON (in the shape kube-apiserver writes it) as kube-apiserver encodes it."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    pod = pb.Pod()
    m = pod.metadata
    m.name = meta.get("name", "")
    m.namespace = meta.get("namespace", "")
    m.uid = meta.get("uid", "")
    if meta.get("resourceVersion"):
        m.resourceVersion = meta["resourceVersion"]
    m.creationTimestamp.CopyFrom(_seconds(meta.get("creationTimestamp")))
    if meta.get("deletionTimestamp") is not None:
        m.deletionTimestamp.CopyFrom(_seconds(meta["deletionTimestamp"]))
    m.labels.extend(_entries(meta.get("labels")))
    m.annotations.extend(
        pb.StringEntry(key=k, value=v) for k, v in sorted((meta.get("annotations") or {}).items())
    )
    m.ownerReferences.extend(_owner(r) for r in meta.get("ownerReferences") or ())
    s = pod.spec
    s.volumes.extend(_volume(v) for v in spec.get("volumes") or ())
    s.containers.extend(_container(c) for c in spec.get("containers") or ())
    if spec.get("terminationGracePeriodSeconds") is not None:
        s.terminationGracePeriodSeconds = spec["terminationGracePeriodSeconds"]
    s.nodeSelector.extend(_entries(spec.get("nodeSelector")))
    s.nodeName = spec.get("nodeName", "")
    if spec.get("affinity") is not None:
        s.affinity = _affinity(spec["affinity"])
    s.initContainers.extend(_container(c) for c in spec.get("initContainers") or ())
    s.tolerations.extend(_toleration(t) for t in spec.get("tolerations") or ())
    s.priorityClassName = spec.get("priorityClassName", "")
    if spec.get("priority") is not None:
        s.priority = spec["priority"]
    s.overhead.extend(e.SerializeToString() for e in _quantity_entries(spec.get("overhead")))
    s.topologySpreadConstraints.extend(
        _constraint(c) for c in spec.get("topologySpreadConstraints") or ()
    )
    s.resourceClaims.extend(_claim(c) for c in spec.get("resourceClaims") or ())
    if spec.get("resources") is not None:
        s.resources = _requirements_message(spec["resources"]).SerializeToString()
    if spec.get("hostNetwork") is not None:
        s.hostNetwork = spec["hostNetwork"]
    if spec.get("hostUsers") is not None:
        s.hostUsers = spec["hostUsers"]
    s.ephemeralContainers.extend(b"\n\x03dbg" for _ in spec.get("ephemeralContainers") or ())
    if spec.get("schedulingGroup") is not None:
        s.schedulingGroup.SetInParent()
        if "podGroupName" in spec["schedulingGroup"]:
            s.schedulingGroup.podGroupName = spec["schedulingGroup"]["podGroupName"]
    st = pod.status
    st.phase = status.get("phase", "")
    if status.get("startTime") is not None:
        st.startTime.CopyFrom(_seconds(status["startTime"]))
    st.conditions.extend(
        pb.PodCondition(
            type=c.get("type", ""), status=c.get("status", ""), reason=c.get("reason", "")
        )
        for c in status.get("conditions") or ()
    )
    st.containerStatuses.extend(_status(c) for c in status.get("containerStatuses") or ())
    st.initContainerStatuses.extend(_status(c) for c in status.get("initContainerStatuses") or ())
    return pod


def envelope(kind: str, raw: bytes) -> bytes:
    """An answer of kube-apiserver in protobuf: the magic, then a runtime.Unknown."""
    unknown = pb.Unknown(
        typeMeta=pb.TypeMeta(apiVersion="v1", kind=kind),
        raw=raw,
        contentEncoding="",
        contentType="",
    )
    return MAGIC + unknown.SerializeToString()


def pod_page(
    objects: Sequence[Mapping[str, Any]], continue_token: str = "", resource_version: str = "7"
) -> bytes:
    """A PodList page of ``objects`` as kube-apiserver answers it."""
    page = pb.PodList(items=[encode_pod(o) for o in objects])
    page.metadata.resourceVersion = resource_version
    setattr(page.metadata, "continue", continue_token)
    return envelope("PodList", page.SerializeToString())
