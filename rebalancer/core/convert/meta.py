"""Object metadata: the name a problem is reported under, owner references, timestamps."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from rebalancer.core.convert.checker import EMPTY, Checker
from rebalancer.core.model import OwnerRef

__all__ = ["controller_owner", "epoch", "identify"]

_OWNERS_LIMIT: Final = 8192


def identify(
    obj: Mapping[str, Any], kind: str, problems: list[str], namespaced: bool
) -> tuple[Checker, Mapping[str, Any], str, str]:
    """The checker, metadata, namespace and name of an object; names it ``Kind ns/name``."""
    raw_meta = obj.get("metadata")
    meta = raw_meta if isinstance(raw_meta, Mapping) else EMPTY
    name = meta.get("name")
    # kubectl's rule for an object without a namespace: "default".
    namespace = (meta.get("namespace") or "default") if namespaced else ""
    shown_name = name if type(name) is str and name else "<unnamed>"
    if namespaced and type(namespace) is str:
        subject = f"{kind} {namespace}/{shown_name}"
    else:
        subject = f"{kind} {shown_name}"
    chk = Checker(subject, problems)
    if raw_meta is not None and meta is EMPTY:
        chk.bad("metadata", "must be an object", raw_meta)
    if type(name) is not str or not name:
        chk.bad("metadata.name", "must be a non-empty string", name)
        name = ""
    if type(namespace) is not str:
        chk.bad("metadata.namespace", "must be a string", namespace)
        namespace = "default"
    return chk, meta, namespace, name


def _owner_ref(
    chk: Checker, ref: Mapping[str, Any], path: str, owners: dict[tuple[str, str, str], OwnerRef]
) -> OwnerRef:
    """One OwnerRef per distinct owner: the pods of a ReplicaSet share it."""
    kind, name, uid = ref.get("kind"), ref.get("name"), ref.get("uid") or ""
    if not (type(kind) is str and kind and type(name) is str and name and type(uid) is str):
        return OwnerRef(
            kind=chk.required_text(ref, "kind", path),
            name=chk.required_text(ref, "name", path),
            uid=chk.text(ref, "uid", path),
        )
    key = (kind, name, uid)
    owner = owners.get(key)
    if owner is None:
        if len(owners) >= _OWNERS_LIMIT:
            owners.clear()
        owner = owners[key] = OwnerRef(kind, name, uid)
    return owner


def controller_owner(
    chk: Checker, meta: Mapping[str, Any], owners: dict[tuple[str, str, str], OwnerRef]
) -> OwnerRef | None:
    """The ownerReference with ``controller: true`` (the API allows at most one).

    ``owners`` (one per snapshot) shares equal references between objects.
    """
    refs = meta.get("ownerReferences")
    if type(refs) is list and len(refs) == 1 and type(refs[0]) is dict:
        only: dict[str, Any] = refs[0]  # the usual case: one reference, read without paths
        if only.get("controller") is not True:
            return None
        kind, name, uid = only.get("kind"), only.get("name"), only.get("uid") or ""
        if type(kind) is str and type(name) is str and type(uid) is str:
            found = owners.get((kind, name, uid))
            if found is not None:
                return found
    owner: OwnerRef | None = None
    for i, raw in enumerate(chk.seq(meta, "ownerReferences", "metadata")):
        ref = chk.as_obj(raw, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is not True:
            continue
        path = f"metadata.ownerReferences[{i}]"
        found = _owner_ref(chk, ref, path, owners)
        if owner is not None:
            chk.bad(f"{path}.controller", "only one owner reference may be the controller", True)
        else:
            owner = found
    return owner


def epoch(chk: Checker, value: object, path: str) -> float:
    """An RFC 3339 timestamp (``2024-05-01T12:00:00Z``) in epoch seconds; 0.0 if absent."""
    if value is None:
        return 0.0
    moment: datetime | None = None
    if type(value) is str:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
    elif isinstance(value, datetime):  # an unquoted timestamp in hand-written YAML
        moment = value
    if moment is None:
        chk.bad(path, "must be an RFC 3339 timestamp such as 2024-05-01T12:00:00Z", value)
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
