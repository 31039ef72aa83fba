"""Controllers and Services (for default-constraint selectors) and the storage pods use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

from rebalancer.core.convert.disruption import revision, stateful_set_revisions
from rebalancer.core.convert.memo import Caches
from rebalancer.core.convert.meta import controller_owner, identify
from rebalancer.core.convert.selectors import label_selector, node_selector
from rebalancer.core.model import (
    Controller,
    LabelSelector,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    Service,
)

__all__ = ["CONTROLLER_KINDS", "controller", "namespace", "pv", "pvc", "service"]

CONTROLLER_KINDS: Final = ("ReplicaSet", "StatefulSet", "ReplicationController")


def pvc(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> PersistentVolumeClaim:
    """A PersistentVolumeClaim; problems are appended to ``problems``."""
    chk, _, namespace, name = identify(obj, "PersistentVolumeClaim", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    return PersistentVolumeClaim(
        namespace=namespace, name=name, volume_name=chk.text(spec, "volumeName", "spec") or None
    )


def pv(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> PersistentVolume:
    """A PersistentVolume (its node affinity); problems are appended to ``problems``."""
    chk, _, _, name = identify(obj, "PersistentVolume", problems, namespaced=False)
    affinity = chk.obj(chk.obj(obj, "spec", ""), "nodeAffinity", "spec")
    required = node_selector(chk, affinity.get("required"), "spec.nodeAffinity.required")
    return PersistentVolume(name=name, node_affinity=required)


def service(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> Service:
    """A Service (its selector); problems are appended to ``problems``."""
    chk, _, namespace, name = identify(obj, "Service", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    return Service(
        namespace=namespace, name=name, selector=chk.string_map(spec, "selector", "spec")
    )


def namespace(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> Namespace:
    """A Namespace (its labels); problems are appended to ``problems``."""
    chk, meta, _, name = identify(obj, "Namespace", problems, namespaced=False)
    return Namespace(name=name, labels=chk.string_map(meta, "labels", "metadata"))


def controller(obj: Mapping[str, Any], problems: list[str], caches: Caches) -> Controller:
    """A ReplicaSet, StatefulSet or ReplicationController; problems go to ``problems``."""
    kind = obj.get("kind")
    known = kind in CONTROLLER_KINDS
    chk, meta, namespace, name = identify(
        obj, cast(str, kind) if known else "Controller", problems, namespaced=True
    )
    if not known:
        chk.bad("kind", f"must be one of {', '.join(CONTROLLER_KINDS)}", kind)
        kind = "ReplicaSet"
    spec = chk.obj(obj, "spec", "")
    selector: LabelSelector | None
    if kind == "ReplicationController":
        # A plain map; kube-apiserver defaults an absent one to the pod template's labels.
        labels = chk.string_map(spec, "selector", "spec")
        if not labels:
            template = chk.obj(chk.obj(spec, "template", "spec"), "metadata", "spec.template")
            labels = chk.string_map(template, "labels", "spec.template.metadata")
        selector = LabelSelector(tuple(sorted(labels.items()))) if labels else None
    else:
        selector = label_selector(chk, spec.get("selector"), "spec.selector")
    owner = controller_owner(chk, meta, caches.owners)
    current_revision = update_revision = ""
    if kind == "StatefulSet":
        status = chk.obj(obj, "status", "")
        current_revision, update_revision = stateful_set_revisions(chk, status)
    return Controller(
        kind=cast(str, kind),
        namespace=namespace,
        name=name,
        selector=selector,
        owner=owner,
        revision=revision(chk, meta) if kind == "ReplicaSet" else None,
        current_revision=current_revision,
        update_revision=update_revision,
    )
