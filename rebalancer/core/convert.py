"""Kubernetes API objects (plain dicts, as decoded from JSON or YAML) -> the frozen model.

This is the boundary: every field the planner reads is parsed, validated and defaulted here,
once, the way kube-apiserver and kube-scheduler do it, and nothing downstream re-checks it.
Problems are collected, never raised one by one: each names the object (``Kind ns/name``), the
field path and the bad value, and :class:`SnapshotBuilder` raises one :class:`InputError` with
all of them.

Pure: no I/O, no logging, no clock. Fast enough for 150,000 pods: no deep copies, paths are
only formatted when a problem is found, and quantities are parsed once per distinct string.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast

import orjson

from rebalancer.core.errors import InputError
from rebalancer.core.gcpause import gc_paused
from rebalancer.core.model import (
    HARD,
    HONOR,
    IGNORE,
    SOFT,
    Controller,
    LabelSelector,
    Node,
    NodeSelector,
    NodeSelectorOp,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    Requirement,
    SelectorOp,
    Service,
    Snapshot,
    SpreadConstraint,
    Taint,
    Toleration,
)

__all__ = [
    "CONTROLLER_KINDS",
    "KINDS",
    "SnapshotBuilder",
    "controller_from_api",
    "label_selector_from_api",
    "node_from_api",
    "node_selector_from_api",
    "parse_bytes",
    "parse_cpu_millis",
    "parse_quantity",
    "pdb_from_api",
    "pod_from_api",
    "priority_class_from_api",
    "pv_from_api",
    "pvc_from_api",
    "service_from_api",
    "snapshot_from_objects",
]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
_NO_VALUE: Final = object()

MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
CONTROLLER_KINDS: Final = ("ReplicaSet", "StatefulSet", "ReplicationController")

_SELECTOR_OPS: Final[frozenset[str]] = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_SELECTOR_OPS: Final[frozenset[str]] = _SELECTOR_OPS | {"Gt", "Lt"}
_TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_POD_LEVEL_RESOURCES: Final = ("cpu", "memory")  # plus every hugepages-* resource
_RESIZE: Final = "PodResizePending"


# --- problems -------------------------------------------------------------------------------


def _show(value: object) -> str:
    """A bad value as a person reads it in a problem: JSON, cut short."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except ValueError:  # a circular structure; cannot come from a decoder
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Checker:
    """Reads the fields of one object, recording each problem with the object's name.

    Every reader returns a usable default after a problem, so conversion goes on and finds the
    next one. Paths are formatted only when a problem is recorded.
    """

    __slots__ = ("problems", "subject")

    def __init__(self, subject: str, problems: list[str]) -> None:
        self.subject = subject
        self.problems = problems

    def bad(self, path: str, rule: str, value: object = _NO_VALUE) -> None:
        text = f"{self.subject}: {path}: {rule}" if self.subject else f"{path}: {rule}"
        if value is not _NO_VALUE:
            text = f"{text}, got {_show(value)}"
        self.problems.append(text)

    def as_obj(self, value: Any, path: str) -> Mapping[str, Any]:
        if value is None:
            return _EMPTY
        if type(value) is dict or isinstance(value, Mapping):
            return value
        self.bad(path, "must be an object", value)
        return _EMPTY

    def obj(self, parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = parent.get(key)
        if value is None:
            return _EMPTY
        if type(value) is dict or isinstance(value, Mapping):
            return value
        self.bad(_at(path, key), "must be an object", value)
        return _EMPTY

    def seq(self, parent: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
        value = parent.get(key)
        if value is None:
            return ()
        if type(value) is list or type(value) is tuple:
            return value
        self.bad(_at(path, key), "must be a list", value)
        return ()

    def text(self, parent: Mapping[str, Any], key: str, path: str) -> str:
        """A string field; absent is ``""``."""
        value = parent.get(key)
        if type(value) is str:
            return value
        if value is None:
            return ""
        self.bad(_at(path, key), "must be a string", value)
        return ""

    def required_text(self, parent: Mapping[str, Any], key: str, path: str) -> str:
        value = parent.get(key)
        if type(value) is str and value:
            return value
        self.bad(_at(path, key), "must be a non-empty string", value)
        return ""

    def integer(self, parent: Mapping[str, Any], key: str, path: str) -> int | None:
        value = parent.get(key)
        if type(value) is int or value is None:
            return value
        self.bad(_at(path, key), "must be an integer", value)
        return None

    def flag(self, parent: Mapping[str, Any], key: str, path: str) -> bool:
        value = parent.get(key)
        if type(value) is bool:
            return value
        if value is None:
            return False
        self.bad(_at(path, key), "must be true or false", value)
        return False

    def string_map(self, parent: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        """A map of strings (labels, annotations, nodeSelector), shallow-copied."""
        raw = self.obj(parent, key, path)
        if not raw:
            return {}
        result = dict(raw)
        try:  # str.join rejects anything but strings, at C speed
            "".join(result)
            "".join(result.values())
        except TypeError:
            pass
        else:
            return result
        for name, value in list(result.items()):
            if type(name) is not str or type(value) is not str:
                self.bad(f"{_at(path, key)}[{name}]", "must be a string", value)
                del result[name]
        return result

    def strings(self, parent: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
        items = self.seq(parent, key, path)
        try:  # str.join rejects anything but strings, at C speed
            "".join(items)
        except TypeError:
            pass
        else:
            return tuple(items)
        for i, item in enumerate(items):
            if type(item) is not str:
                self.bad(f"{_at(path, key)}[{i}]", "must be a string", item)
        return tuple(x for x in items if type(x) is str)


def _raise_if(problems: list[str], source: str) -> None:
    if problems:
        raise InputError(source, problems)


# --- memo -----------------------------------------------------------------------------------

_T = TypeVar("_T")


class _Memo:
    """Conversions of identical fragments, keyed by the fragment's JSON bytes.

    The pods of one ReplicaSet share their constraints, tolerations, affinity and resources,
    so each distinct fragment is parsed once. Only problem-free results are kept (a bad
    fragment is re-reported for every object that has it); results are immutable or never
    mutated, so pods share them. Bounded: cleared when full.
    """

    __slots__ = ("data",)
    LIMIT: Final = 8192

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}

    def get(self, chk: _Checker, key: object, compute: Callable[[], _T]) -> _T:
        if key is not None:
            found = self.data.get(key)
            if found is not None:
                return cast(_T, found)
        before = len(chk.problems)
        value = compute()
        if key is not None and len(chk.problems) == before:
            if len(self.data) >= self.LIMIT:
                self.data.clear()
            self.data[key] = value
        return value


def _fingerprint(value: object) -> bytes | None:
    """JSON bytes of a fragment as a memo key; None when it is not plain JSON (no memo)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: non-string keys, unusual types
        return None


_TOLERATIONS: Final = _Memo()
_AFFINITY: Final = _Memo()
_CONSTRAINTS: Final = _Memo()
_MERGED: Final = _Memo()
_REQUESTS: Final = _Memo()


# --- quantities -----------------------------------------------------------------------------

# resource.Quantity: <signedNumber><suffix>; suffix is a binary SI (Ki..Ei), a decimal SI
# (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2). "1E" is exa, "1E3" is 1000.
_QUANTITY: Final = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([KMGTPE]i)|([numkMGTPE])|[eE]([+-]?[0-9]+))?"
)
_BINARY_SUFFIX: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_NANO: Final = 1_000_000_000
_MILLI_IN_NANO: Final = 1_000_000
_MAX_UNITS: Final = 2**63 - 1  # resource.Quantity caps larger values at this many units
# Rounding away from zero at every step keeps the final ceiling exact (and matches inf.RoundUp).
_CTX: Final = Context(prec=100, rounding=ROUND_UP, Emax=MAX_EMAX, Emin=MIN_EMIN)
_QUANTITY_CACHE: dict[str, int | None] = {}
_QUANTITY_CACHE_LIMIT: Final = 100_000
_QUANTITY_RULE: Final = "must be a quantity such as 100m, 0.5, 2, 1Gi, 512M or 1e3"


def _parse_nanos(text: str) -> int | None:
    """``text`` in nano-units, rounded up away from zero as resource.Quantity does; or None."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return None
    number, binary, decimal, exponent = match.groups()
    value = Decimal(number)
    if binary is not None:
        value = _CTX.multiply(value, Decimal(2) ** _BINARY_SUFFIX[binary])
    elif decimal is not None:
        value = value.scaleb(_DECIMAL_SUFFIX[decimal], _CTX)
    elif exponent is not None:
        # Past +-10**15 the result is the same (capped, or one nano-unit): keeps ints small.
        shift = (
            int(exponent) if len(exponent) < 16 else (-(10**15) if exponent[0] == "-" else 10**15)
        )
        value = value.scaleb(shift, _CTX)
    if value > _MAX_UNITS:
        value = Decimal(_MAX_UNITS)
    elif value < -_MAX_UNITS:
        value = Decimal(-_MAX_UNITS)
    return int(value.scaleb(9, _CTX).to_integral_value(rounding=ROUND_UP, context=_CTX))


def _nanos(value: object) -> int | None:
    """A quantity (string, or a number written unquoted in YAML) in nano-units; None if bad."""
    if type(value) is str:
        text = value
    elif type(value) is int:
        text = str(value)
    elif type(value) is float:
        text = repr(value)
    else:
        return None
    try:
        return _QUANTITY_CACHE[text]
    except KeyError:
        pass
    nanos = _parse_nanos(text)
    if len(_QUANTITY_CACHE) >= _QUANTITY_CACHE_LIMIT:
        _QUANTITY_CACHE.clear()
    _QUANTITY_CACHE[text] = nanos
    return nanos


def _ceil_div(value: int, unit: int) -> int:
    return -(-value // unit)


def _units(resource: str, nanos: int) -> int:
    """What the scheduler reads: ``MilliValue()`` for cpu, ``Value()`` (ceil) for the rest."""
    return _ceil_div(nanos, _MILLI_IN_NANO if resource == "cpu" else _NANO)


def parse_quantity(value: object, path: str) -> int:
    """Parse a Kubernetes quantity into nano-units (1e-9), exactly as resource.Quantity does.

    Kubernetes rounds every quantity up (away from zero) to nano precision and caps it at
    2**63-1 units, so an int of nano-units is exact. Raises :class:`InputError` naming ``path``.
    """
    nanos = _nanos(value)
    if nanos is None:
        raise InputError(path, [f"{path}: {_QUANTITY_RULE}, got {_show(value)}"])
    return nanos


def _non_negative(value: object, path: str) -> int:
    nanos = parse_quantity(value, path)
    if nanos < 0:
        raise InputError(path, [f"{path}: must not be negative, got {_show(value)}"])
    return nanos


def parse_cpu_millis(value: object, path: str) -> int:
    """A non-negative cpu quantity in millicores, rounded up: ``"0.5"`` -> 500."""
    return _ceil_div(_non_negative(value, path), _MILLI_IN_NANO)


def parse_bytes(value: object, path: str) -> int:
    """A non-negative quantity in whole units, rounded up: ``"1Ki"`` -> 1024, ``"1e3"`` -> 1000."""
    return _ceil_div(_non_negative(value, path), _NANO)


def _resource_list(chk: _Checker, raw: Mapping[str, Any], path: str) -> dict[str, int]:
    """A ``ResourceList`` in nano-units; bad or negative quantities are reported and dropped."""
    result: dict[str, int] = {}
    for name, quantity in raw.items():
        nanos = _nanos(quantity)
        if type(name) is not str or not name:
            chk.bad(path, "resource names must be non-empty strings", name)
        elif nanos is None:
            chk.bad(f"{path}.{name}", _QUANTITY_RULE, quantity)
        elif nanos < 0:
            chk.bad(f"{path}.{name}", "must not be negative", quantity)
        else:
            result[name] = nanos
    return result


def _to_units(nanos: Mapping[str, int]) -> dict[str, int]:
    return {name: _units(name, value) for name, value in sorted(nanos.items())}


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _max(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        if value > total.get(name, -1):
            total[name] = value


# --- selectors ------------------------------------------------------------------------------


def _requirement_values(
    chk: _Checker, expr: Mapping[str, Any], op: str, path: str
) -> tuple[str, ...]:
    values = chk.strings(expr, "values", path)
    if op in ("In", "NotIn"):
        if not values:
            chk.bad(f"{path}.values", f"must be non-empty for operator {op}", list(values))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            chk.bad(f"{path}.values", f"must be empty for operator {op}", list(values))
    elif op in ("Gt", "Lt") and (len(values) != 1 or not _is_integer(values[0])):
        chk.bad(f"{path}.values", f"must be one integer for operator {op}", list(values))
    return values


def _is_integer(text: str) -> bool:
    digits = text[1:] if text[:1] in ("-", "+") else text
    return digits.isascii() and digits.isdigit()


def _label_requirement(chk: _Checker, raw: object, path: str) -> Requirement | None:
    expr = chk.as_obj(raw, path)
    key = chk.required_text(expr, "key", path)
    op = expr.get("operator")
    if op not in _SELECTOR_OPS:
        chk.bad(f"{path}.operator", "must be one of In, NotIn, Exists, DoesNotExist", op)
        return None
    values = _requirement_values(chk, expr, cast(str, op), path)
    return Requirement(key, cast(SelectorOp, op), values)


def _label_selector(chk: _Checker, raw: object, path: str) -> LabelSelector | None:
    if raw is None:
        return None
    obj = chk.as_obj(raw, path)
    match_labels = chk.string_map(obj, "matchLabels", path)
    expressions: list[Requirement] = []
    for i, expr in enumerate(chk.seq(obj, "matchExpressions", path)):
        requirement = _label_requirement(chk, expr, f"{path}.matchExpressions[{i}]")
        if requirement is not None:
            expressions.append(requirement)
    return LabelSelector(tuple(sorted(match_labels.items())), tuple(expressions))


def label_selector_from_api(
    obj: Mapping[str, Any] | None, path: str, problems: list[str] | None = None
) -> LabelSelector | None:
    """Parse a ``metav1.LabelSelector``; ``None`` (absent) stays ``None``, which matches nothing.

    ``{}`` is an empty selector, which matches everything. Problems are appended to
    ``problems`` when given, else raised as one :class:`InputError` named ``path``.
    """
    found: list[str] = [] if problems is None else problems
    selector = _label_selector(_Checker("", found), obj, path)
    if problems is None:
        _raise_if(found, path)
    return selector


def _node_requirement(
    chk: _Checker, raw: object, path: str, field: bool
) -> NodeSelectorRequirement | None:
    expr = chk.as_obj(raw, path)
    key = chk.required_text(expr, "key", path)
    op = expr.get("operator")
    if op not in (("In", "NotIn") if field else _NODE_SELECTOR_OPS):
        allowed = "In, NotIn" if field else "In, NotIn, Exists, DoesNotExist, Gt, Lt"
        chk.bad(f"{path}.operator", f"must be one of {allowed}", op)
        return None
    values = _requirement_values(chk, expr, cast(str, op), path)
    if field:
        if key and key != "metadata.name":
            chk.bad(f"{path}.key", "must be metadata.name (the only node field)", key)
        if len(values) > 1:
            chk.bad(f"{path}.values", "must hold one value for a node field", list(values))
    return NodeSelectorRequirement(key, cast(NodeSelectorOp, op), values)


def _node_selector_term(chk: _Checker, raw: object, path: str) -> NodeSelectorTerm:
    term = chk.as_obj(raw, path)
    parts: list[tuple[NodeSelectorRequirement, ...]] = []
    for key, is_field in (("matchExpressions", False), ("matchFields", True)):
        found = []
        for i, expr in enumerate(chk.seq(term, key, path)):
            requirement = _node_requirement(chk, expr, f"{path}.{key}[{i}]", is_field)
            if requirement is not None:
                found.append(requirement)
        parts.append(tuple(found))
    return NodeSelectorTerm(parts[0], parts[1])


def _node_selector(chk: _Checker, raw: object, path: str) -> NodeSelector | None:
    if raw is None:
        return None
    obj = chk.as_obj(raw, path)
    terms = chk.seq(obj, "nodeSelectorTerms", path)
    if not terms:
        chk.bad(
            f"{path}.nodeSelectorTerms", "must hold at least one term", obj.get("nodeSelectorTerms")
        )
    return NodeSelector(
        tuple(
            _node_selector_term(chk, term, f"{path}.nodeSelectorTerms[{i}]")
            for i, term in enumerate(terms)
        )
    )


def node_selector_from_api(
    obj: Mapping[str, Any] | None, path: str, problems: list[str] | None = None
) -> NodeSelector | None:
    """Parse a ``v1.NodeSelector`` (required node affinity, a PV's node affinity); terms are ORed.

    Problems are appended to ``problems`` when given, else raised as one :class:`InputError`.
    """
    found: list[str] = [] if problems is None else problems
    selector = _node_selector(_Checker("", found), obj, path)
    if problems is None:
        _raise_if(found, path)
    return selector


# --- metadata -------------------------------------------------------------------------------


def _identify(
    obj: Mapping[str, Any], kind: str, problems: list[str], namespaced: bool
) -> tuple[_Checker, Mapping[str, Any], str, str]:
    """The checker, metadata, namespace and name of an object; names it ``Kind ns/name``."""
    raw_meta = obj.get("metadata")
    meta = raw_meta if isinstance(raw_meta, Mapping) else _EMPTY
    name = meta.get("name")
    # kubectl's rule for an object without a namespace: "default".
    namespace = (meta.get("namespace") or "default") if namespaced else ""
    shown_name = name if type(name) is str and name else "<unnamed>"
    if namespaced and type(namespace) is str:
        subject = f"{kind} {namespace}/{shown_name}"
    else:
        subject = f"{kind} {shown_name}"
    chk = _Checker(subject, problems)
    if raw_meta is not None and meta is _EMPTY:
        chk.bad("metadata", "must be an object", raw_meta)
    if type(name) is not str or not name:
        chk.bad("metadata.name", "must be a non-empty string", name)
        name = ""
    if type(namespace) is not str:
        chk.bad("metadata.namespace", "must be a string", namespace)
        namespace = "default"
    return chk, meta, namespace, name


_OWNERS: dict[tuple[str, str, str], OwnerRef] = {}


def _owner_ref(chk: _Checker, ref: Mapping[str, Any], path: str) -> OwnerRef:
    """One OwnerRef per distinct owner: the pods of a ReplicaSet share it."""
    kind, name, uid = ref.get("kind"), ref.get("name"), ref.get("uid") or ""
    if not (type(kind) is str and kind and type(name) is str and name and type(uid) is str):
        return OwnerRef(
            kind=chk.required_text(ref, "kind", path),
            name=chk.required_text(ref, "name", path),
            uid=chk.text(ref, "uid", path),
        )
    key = (kind, name, uid)
    owner = _OWNERS.get(key)
    if owner is None:
        if len(_OWNERS) >= _Memo.LIMIT:
            _OWNERS.clear()
        owner = _OWNERS[key] = OwnerRef(kind, name, uid)
    return owner


def _controller_owner(chk: _Checker, meta: Mapping[str, Any]) -> OwnerRef | None:
    """The ownerReference with ``controller: true`` (the API allows at most one)."""
    refs = meta.get("ownerReferences")
    if type(refs) is list and len(refs) == 1 and type(refs[0]) is dict:
        only: dict[str, Any] = refs[0]  # the usual case: one reference, read without paths
        if only.get("controller") is not True:
            return None
        found = _OWNERS.get((only.get("kind"), only.get("name"), only.get("uid") or ""))  # type: ignore[arg-type]
        if found is not None:
            return found
    owner: OwnerRef | None = None
    for i, raw in enumerate(chk.seq(meta, "ownerReferences", "metadata")):
        ref = chk.as_obj(raw, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is not True:
            continue
        path = f"metadata.ownerReferences[{i}]"
        found = _owner_ref(chk, ref, path)
        if owner is not None:
            chk.bad(f"{path}.controller", "only one owner reference may be the controller", True)
        else:
            owner = found
    return owner


def _epoch(chk: _Checker, value: object, path: str) -> float:
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


# --- pods -----------------------------------------------------------------------------------


def _toleration(chk: _Checker, raw: object, path: str) -> Toleration:
    obj = chk.as_obj(raw, path)
    key = chk.text(obj, "key", path)
    operator = chk.text(obj, "operator", path) or "Equal"
    value = chk.text(obj, "value", path)
    effect = chk.text(obj, "effect", path)
    if operator not in ("Equal", "Exists"):
        chk.bad(f"{path}.operator", "must be Equal or Exists", operator)
    elif operator == "Exists" and value:
        chk.bad(f"{path}.value", "must be empty when operator is Exists", value)
    elif operator == "Equal" and not key:
        chk.bad(f"{path}.operator", "must be Exists when key is empty", operator)
    if effect and effect not in _TAINT_EFFECTS:
        chk.bad(
            f"{path}.effect", "must be empty, NoSchedule, PreferNoSchedule or NoExecute", effect
        )
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def _positive(chk: _Checker, obj: Mapping[str, Any], key: str, path: str, default: int) -> int:
    """An integer > 0 (``maxSkew``, ``minDomains``); ``default`` if bad (reported)."""
    value = obj.get(key)
    if type(value) is int and value > 0:
        return value
    chk.bad(f"{path}.{key}", "must be an integer > 0", value)
    return default


def _one_of(
    chk: _Checker, obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, str]
) -> str | None:
    value = obj.get(key)
    if value in allowed:
        return cast(str, value)
    chk.bad(f"{path}.{key}", f"must be {allowed[0]} or {allowed[1]}", value)
    return None


def _is_merged(requirement: Requirement) -> bool:
    """The shape kube-apiserver (1.34+) writes when it merges a matchLabelKeys key itself."""
    return requirement.operator == "In" and len(requirement.values) == 1


def _check_match_label_keys(
    chk: _Checker, selector: LabelSelector, keys: tuple[str, ...], path: str
) -> None:
    """Report a matchLabelKeys key that the labelSelector also names (an API error).

    Since 1.34 kube-apiserver stores each key the pod carries as an ``In [value]`` expression
    in the labelSelector (MatchLabelKeysInPodTopologySpreadSelectorMerge), so exactly one such
    expression per key is the server's own merge, not a conflict.
    """
    in_labels = {key for key, _ in selector.match_labels}
    for i, key in enumerate(keys):
        exprs = [r for r in selector.match_expressions if r.key == key]
        merged_only = len(exprs) == 1 and _is_merged(exprs[0])
        if key in in_labels or (exprs and not merged_only):
            chk.bad(f"{path}.matchLabelKeys[{i}]", "must not also be in labelSelector", key)


def _merge_match_label_keys(
    selector: LabelSelector | None, keys: tuple[str, ...], labels: Mapping[str, str]
) -> LabelSelector | None:
    """The effective selector: ``key In [pod's value]`` added for each key the pod carries.

    A nil labelSelector stays nil even if matchLabelKeys would add requirements: kube-scheduler
    turns a nil selector into ``labels.Nothing()``, and merging a label set into Nothing keeps
    Nothing (``mergeLabelSetWithSelector`` returns it unchanged), so the constraint matches no
    pod. (Recent API servers reject matchLabelKeys without a labelSelector; older ones did not.)
    Requirements the API server already merged are not added twice.
    """
    if selector is None or not keys:
        return selector
    added = []
    for key in keys:
        value = labels.get(key)
        if value is None:
            continue  # keys the pod lacks are ignored
        requirement = Requirement(key, "In", (value,))
        if requirement not in selector.match_expressions and requirement not in added:
            added.append(requirement)
    if not added:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + tuple(added))


def _spread_constraint(chk: _Checker, raw: object, path: str) -> SpreadConstraint:
    """One constraint, validated and defaulted; its selector is merged later, per pod."""
    obj = chk.as_obj(raw, path)
    max_skew = _positive(chk, obj, "maxSkew", path, 1)
    topology_key = chk.required_text(obj, "topologyKey", path)
    when = _one_of(chk, obj, "whenUnsatisfiable", path, (HARD, SOFT)) or HARD
    min_domains = 1
    if obj.get("minDomains") is not None:
        min_domains = _positive(chk, obj, "minDomains", path, 1)
        if when == SOFT:  # kube-apiserver rejects it
            chk.bad(
                f"{path}.minDomains",
                "may only be set when whenUnsatisfiable is DoNotSchedule",
                obj.get("minDomains"),
            )
    affinity_policy = HONOR
    if obj.get("nodeAffinityPolicy") is not None:
        affinity_policy = _one_of(chk, obj, "nodeAffinityPolicy", path, (HONOR, IGNORE)) or HONOR
    taints_policy = IGNORE
    if obj.get("nodeTaintsPolicy") is not None:
        taints_policy = _one_of(chk, obj, "nodeTaintsPolicy", path, (HONOR, IGNORE)) or IGNORE
    selector = _label_selector(chk, obj.get("labelSelector"), f"{path}.labelSelector")
    keys = chk.strings(obj, "matchLabelKeys", path)
    if selector is not None and keys:
        _check_match_label_keys(chk, selector, keys, path)
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        when_unsatisfiable=when,
        selector=selector,
        min_domains=min_domains,
        node_affinity_policy=affinity_policy,
        node_taints_policy=taints_policy,
        match_label_keys=keys,
    )


def _parse_spread_constraints(
    chk: _Checker, raw: Sequence[Any]
) -> tuple[tuple[SpreadConstraint, ...], tuple[str, ...]]:
    """The constraints with selectors not yet merged with matchLabelKeys, and all their keys."""
    result = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        path = f"spec.topologySpreadConstraints[{i}]"
        constraint = _spread_constraint(chk, item, path)
        pair = (constraint.topology_key, constraint.when_unsatisfiable)
        if pair in seen:
            chk.bad(path, "duplicate {topologyKey, whenUnsatisfiable} pair", list(pair))
        seen.add(pair)
        result.append(constraint)
    keys = sorted({key for c in result if c.selector is not None for key in c.match_label_keys})
    return tuple(result), tuple(keys)


def _with_label_keys(
    constraints: tuple[SpreadConstraint, ...], labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    return tuple(
        replace(c, selector=_merge_match_label_keys(c.selector, c.match_label_keys, labels))
        if c.match_label_keys
        else c
        for c in constraints
    )


def _spread_constraints(
    chk: _Checker, spec: Mapping[str, Any], labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    raw = chk.seq(spec, "topologySpreadConstraints", "spec")
    if not raw:
        return ()
    key = _fingerprint(raw)
    parsed, label_keys = _CONSTRAINTS.get(chk, key, lambda: _parse_spread_constraints(chk, raw))
    if not label_keys:
        return parsed
    values = tuple(labels.get(k) for k in label_keys)
    merged_key = None if key is None else (key, values)
    return _MERGED.get(chk, merged_key, lambda: _with_label_keys(parsed, labels))


def _container_requests(chk: _Checker, container: Mapping[str, Any], path: str) -> dict[str, int]:
    """A container's requests in nano-units, defaulted from its limits like kube-apiserver does."""
    resources = chk.obj(container, "resources", path)
    if not resources:
        return {}
    rpath = f"{path}.resources"
    requests = _resource_list(chk, chk.obj(resources, "requests", rpath), f"{rpath}.requests")
    limits = chk.obj(resources, "limits", rpath)
    if limits:
        for name, nanos in _resource_list(chk, limits, f"{rpath}.limits").items():
            requests.setdefault(name, nanos)  # SetDefaults_Pod: requests default to limits
    return requests


class _StatusResources:
    """In-place resize: the resources the kubelet reports per container (``status``).

    kube-scheduler (InPlacePodVerticalScaling) takes, per container that reports resources,
    max(spec requests, status requests, allocatedResources); if the resize is Infeasible,
    only the status values.
    """

    __slots__ = ("by_name", "infeasible")

    def __init__(self, chk: _Checker, status: Mapping[str, Any]) -> None:
        self.by_name: dict[str, tuple[Mapping[str, Any], str]] = {}
        for key in ("containerStatuses", "initContainerStatuses"):
            for i, raw in enumerate(chk.seq(status, key, "status")):
                path = f"status.{key}[{i}]"
                cs = chk.as_obj(raw, path)
                if cs.get("resources") is not None and type(cs.get("name")) is str:
                    self.by_name[cs["name"]] = (cs, path)
        self.infeasible = False
        if self.by_name:
            for cond in chk.seq(status, "conditions", "status"):
                if isinstance(cond, Mapping) and cond.get("type") == _RESIZE:
                    self.infeasible = cond.get("reason") == "Infeasible"
                    break

    def apply(self, chk: _Checker, name: object, spec_requests: dict[str, int]) -> dict[str, int]:
        found = self.by_name.get(name) if type(name) is str else None
        if found is None:
            return spec_requests
        cs, path = found
        resources = chk.obj(cs, "resources", path)
        reported = _resource_list(
            chk, chk.obj(resources, "requests", f"{path}.resources"), f"{path}.resources.requests"
        )
        allocated = _resource_list(
            chk, chk.obj(cs, "allocatedResources", path), f"{path}.allocatedResources"
        )
        result = {} if self.infeasible else dict(spec_requests)
        _max(result, reported)
        _max(result, allocated)
        return result


def _has_status_resources(status: Mapping[str, Any]) -> bool:
    for key in ("containerStatuses", "initContainerStatuses"):
        statuses = status.get(key)
        if type(statuses) is list:
            for cs in statuses:
                if isinstance(cs, Mapping) and cs.get("resources") is not None:
                    return True
    return False


def _resized(status: Mapping[str, Any], key: str) -> list[Any] | None:
    """The resource fields of the container statuses that report resources (in-place resize)."""
    statuses = status.get(key)
    if not statuses:
        return None
    return [
        (cs.get("name"), cs.get("resources"), cs.get("allocatedResources"))
        for cs in statuses
        if cs.get("resources") is not None
    ]


def _requests_key(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bytes | None:
    """Everything :func:`_compute_requests` reads, as a memo key; None for malformed input.

    Whole container specs go in (orjson is faster than picking their resources out); of the
    status, only the resource fields, since the rest differs from pod to pod.
    """
    try:
        resized = (_resized(status, "containerStatuses"), _resized(status, "initContainerStatuses"))
        reasons = None
        if resized[0] or resized[1]:
            conditions = status.get("conditions") or ()
            reasons = [c.get("reason") for c in conditions if c.get("type") == _RESIZE]
    except (AttributeError, TypeError):
        return None
    return _fingerprint(
        (
            spec.get("containers"),
            spec.get("initContainers"),
            spec.get("overhead"),
            spec.get("resources"),
            resized,
            reasons,
        )
    )


def _pod_requests(
    chk: _Checker, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> Mapping[str, int]:
    key = _requests_key(spec, status)
    return _REQUESTS.get(chk, key, lambda: _compute_requests(chk, spec, status))


def _compute_requests(
    chk: _Checker, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> dict[str, int]:
    """The effective request per resource, as kube-scheduler's ``PodRequests`` computes it.

    sum(containers) + sum(sidecars), raised to max over regular init containers of (its request
    + the sidecars declared before it); then pod-level requests (cpu, memory, hugepages-*)
    replace the aggregate; then ``spec.overhead`` is added. Summed exactly, rounded up once.
    """
    resized = _StatusResources(chk, status) if _has_status_resources(status) else None
    total: dict[str, int] = {}
    for i, raw in enumerate(chk.seq(spec, "containers", "spec")):
        path = f"spec.containers[{i}]"
        container = chk.as_obj(raw, path)
        requests = _container_requests(chk, container, path)
        if resized is not None:
            requests = resized.apply(chk, container.get("name"), requests)
        _add(total, requests)
    init_containers = chk.seq(spec, "initContainers", "spec")
    if init_containers:
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for i, raw in enumerate(init_containers):
            path = f"spec.initContainers[{i}]"
            container = chk.as_obj(raw, path)
            requests = _container_requests(chk, container, path)
            if container.get("restartPolicy") == "Always":  # a sidecar: runs for the pod's life
                if resized is not None:
                    requests = resized.apply(chk, container.get("name"), requests)
                _add(total, requests)
                _add(sidecars, requests)
                _max(init_peak, sidecars)
            else:
                using = dict(requests)
                _add(using, sidecars)
                _max(init_peak, using)
        _max(total, init_peak)
    pod_level = chk.obj(chk.obj(spec, "resources", "spec"), "requests", "spec.resources")
    if pod_level:
        for name, nanos in _resource_list(chk, pod_level, "spec.resources.requests").items():
            if name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
                total[name] = nanos
    overhead = chk.obj(spec, "overhead", "spec")
    if overhead:
        _add(total, _resource_list(chk, overhead, "spec.overhead"))
    return _to_units(total)


def _volumes(chk: _Checker, spec: Mapping[str, Any], pod_name: str) -> tuple[tuple[str, ...], bool]:
    """The pod's PVC names (ephemeral volumes claim ``<pod>-<volume>``) and emptyDir use."""
    claims: list[str] = []
    local = False
    for i, raw in enumerate(chk.seq(spec, "volumes", "spec")):
        path = f"spec.volumes[{i}]"
        volume = chk.as_obj(raw, path)
        if volume.get("emptyDir") is not None:
            local = True
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            claims.append(
                chk.required_text(
                    chk.as_obj(claim, path), "claimName", f"{path}.persistentVolumeClaim"
                )
            )
        elif volume.get("ephemeral") is not None:
            claims.append(f"{pod_name}-{chk.required_text(volume, 'name', path)}")
    return tuple(claims), local


def _tolerations(chk: _Checker, spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    raw = chk.seq(spec, "tolerations", "spec")
    if not raw:
        return ()
    return _TOLERATIONS.get(
        chk,
        _fingerprint(raw),
        lambda: tuple(_toleration(chk, t, f"spec.tolerations[{i}]") for i, t in enumerate(raw)),
    )


_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"


def _required_node_affinity(chk: _Checker, spec: Mapping[str, Any]) -> NodeSelector | None:
    affinity = chk.obj(spec, "affinity", "spec")
    if not affinity:
        return None
    raw = chk.obj(affinity, "nodeAffinity", "spec.affinity").get(_REQUIRED)
    if raw is None:
        return None
    return _AFFINITY.get(
        chk,
        _fingerprint(raw),
        lambda: _node_selector(chk, raw, f"spec.affinity.nodeAffinity.{_REQUIRED}"),
    )


class _SharedMaps:
    """One dict per distinct string map: a workload's pods carry equal labels and annotations,
    so 150,000 pods hold a few thousand dicts instead of 150,000 (nobody mutates them).
    Bounded: cleared when full."""

    __slots__ = ("data",)
    LIMIT: Final = 16384

    def __init__(self) -> None:
        self.data: dict[tuple[tuple[Any, Any], ...], dict[str, str]] = {}

    def get(
        self,
        chk: _Checker,
        parent: Mapping[str, Any],
        key: str,
        path: str,
        drop: str | None = None,
    ) -> dict[str, str]:
        raw = parent.get(key)
        items: tuple[tuple[Any, Any], ...] | None = None
        if type(raw) is dict and raw:
            try:
                items = tuple(raw.items())
                found = self.data.get(items)
            except TypeError:  # an unhashable value: string_map reports it
                items = found = None
            if found is not None:
                return found
        before = len(chk.problems)
        result = chk.string_map(parent, key, path)
        if drop is not None:
            result.pop(drop, None)
        if items is not None and len(chk.problems) == before:
            if len(self.data) >= self.LIMIT:
                self.data.clear()
            self.data[items] = result
        return result


_LABELS: Final = _SharedMaps()
_ANNOTATIONS: Final = _SharedMaps()
_NODE_SELECTORS: Final = _SharedMaps()


def _annotations(chk: _Checker, meta: Mapping[str, Any]) -> dict[str, str]:
    # The last-applied annotation is a copy of the whole spec: memory only.
    return _ANNOTATIONS.get(chk, meta, "annotations", "metadata", drop=LAST_APPLIED_ANNOTATION)


def _pod(obj: Mapping[str, Any], problems: list[str]) -> Pod:
    chk, meta, namespace, name = _identify(obj, "Pod", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    labels = _LABELS.get(chk, meta, "labels", "metadata")
    annotations = _annotations(chk, meta)
    pvc_names, local_storage = _volumes(chk, spec, name)
    return Pod(
        namespace=sys.intern(namespace),
        name=name,
        uid=chk.text(meta, "uid", "metadata"),
        labels=labels,
        node_name=sys.intern(chk.text(spec, "nodeName", "spec")) or None,
        created=_epoch(chk, meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        phase=chk.text(status, "phase", "status") or "Pending",
        terminating=meta.get("deletionTimestamp") is not None,
        priority=chk.integer(spec, "priority", "spec"),
        priority_class_name=chk.text(spec, "priorityClassName", "spec") or None,
        owner=_controller_owner(chk, meta),
        node_selector=_NODE_SELECTORS.get(chk, spec, "nodeSelector", "spec"),
        required_affinity=_required_node_affinity(chk, spec),
        tolerations=_tolerations(chk, spec),
        constraints=_spread_constraints(chk, spec, labels),
        requests=_pod_requests(chk, spec, status),
        pvc_names=pvc_names,
        local_storage=local_storage,
        mirror=MIRROR_ANNOTATION in annotations,
        grace_period_seconds=chk.integer(spec, "terminationGracePeriodSeconds", "spec"),
        annotations=annotations,
    )


# --- other kinds ----------------------------------------------------------------------------


def _taint(chk: _Checker, raw: object, path: str) -> Taint:
    obj = chk.as_obj(raw, path)
    key = chk.required_text(obj, "key", path)
    effect = chk.text(obj, "effect", path)
    if effect not in _TAINT_EFFECTS:
        chk.bad(f"{path}.effect", "must be NoSchedule, PreferNoSchedule or NoExecute", effect)
    return Taint(key=key, value=chk.text(obj, "value", path), effect=effect)


def _node_ready(chk: _Checker, status: Mapping[str, Any]) -> bool:
    """The Ready condition is "True"; False or Unknown, or no Ready condition, is not ready."""
    for i, raw in enumerate(chk.seq(status, "conditions", "status")):
        condition = chk.as_obj(raw, f"status.conditions[{i}]")
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _node(obj: Mapping[str, Any], problems: list[str]) -> Node:
    chk, meta, _, name = _identify(obj, "Node", problems, namespaced=False)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    allocatable = chk.obj(status, "allocatable", "status")
    return Node(
        name=name,
        labels=chk.string_map(meta, "labels", "metadata"),
        allocatable=_to_units(_resource_list(chk, allocatable, "status.allocatable")),
        taints=tuple(
            _taint(chk, t, f"spec.taints[{i}]")
            for i, t in enumerate(chk.seq(spec, "taints", "spec"))
        ),
        unschedulable=chk.flag(spec, "unschedulable", "spec"),
        ready=_node_ready(chk, status),
    )


def _int_or_string(chk: _Checker, obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is int or (type(value) is str and value):
        return str(value)
    chk.bad(f"{path}.{key}", "must be an integer or a percentage", value)
    return None


def _count(chk: _Checker, obj: Mapping[str, Any], key: str, path: str) -> int:
    return chk.integer(obj, key, path) or 0


def _pdb(obj: Mapping[str, Any], problems: list[str]) -> PodDisruptionBudget:
    chk, _, namespace, name = _identify(obj, "PodDisruptionBudget", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    status = chk.obj(obj, "status", "")
    return PodDisruptionBudget(
        namespace=namespace,
        name=name,
        selector=_label_selector(chk, spec.get("selector"), "spec.selector"),
        disruptions_allowed=_count(chk, status, "disruptionsAllowed", "status"),
        min_available=_int_or_string(chk, spec, "minAvailable", "spec"),
        max_unavailable=_int_or_string(chk, spec, "maxUnavailable", "spec"),
        current_healthy=_count(chk, status, "currentHealthy", "status"),
        desired_healthy=_count(chk, status, "desiredHealthy", "status"),
        expected_pods=_count(chk, status, "expectedPods", "status"),
    )


def _priority_class(obj: Mapping[str, Any], problems: list[str]) -> PriorityClass:
    chk, _, _, name = _identify(obj, "PriorityClass", problems, namespaced=False)
    value = obj.get("value")
    if type(value) is not int:
        chk.bad("value", "must be an integer", value)
        value = 0
    return PriorityClass(name=name, value=value, global_default=chk.flag(obj, "globalDefault", ""))


def _pvc(obj: Mapping[str, Any], problems: list[str]) -> PersistentVolumeClaim:
    chk, _, namespace, name = _identify(obj, "PersistentVolumeClaim", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    return PersistentVolumeClaim(
        namespace=namespace, name=name, volume_name=chk.text(spec, "volumeName", "spec") or None
    )


def _pv(obj: Mapping[str, Any], problems: list[str]) -> PersistentVolume:
    chk, _, _, name = _identify(obj, "PersistentVolume", problems, namespaced=False)
    affinity = chk.obj(chk.obj(obj, "spec", ""), "nodeAffinity", "spec")
    required = _node_selector(chk, affinity.get("required"), "spec.nodeAffinity.required")
    return PersistentVolume(name=name, node_affinity=required)


def _service(obj: Mapping[str, Any], problems: list[str]) -> Service:
    chk, _, namespace, name = _identify(obj, "Service", problems, namespaced=True)
    spec = chk.obj(obj, "spec", "")
    return Service(
        namespace=namespace, name=name, selector=chk.string_map(spec, "selector", "spec")
    )


def _controller(obj: Mapping[str, Any], problems: list[str]) -> Controller:
    kind = obj.get("kind")
    known = kind in CONTROLLER_KINDS
    chk, meta, namespace, name = _identify(
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
        selector = _label_selector(chk, spec.get("selector"), "spec.selector")
    return Controller(
        kind=cast(str, kind),
        namespace=namespace,
        name=name,
        selector=selector,
        owner=_controller_owner(chk, meta),
    )


# --- public single-object API ---------------------------------------------------------------


def _one(convert: Callable[[Mapping[str, Any], list[str]], _T], obj: Mapping[str, Any]) -> _T:
    problems: list[str] = []
    result = convert(obj, problems)
    _raise_if(problems, str(obj.get("kind") or "object"))
    return result


def node_from_api(obj: Mapping[str, Any]) -> Node:
    """Convert a Node; raises :class:`InputError` listing every problem."""
    return _one(_node, obj)


def pod_from_api(obj: Mapping[str, Any]) -> Pod:
    """Convert a Pod (effective requests, normalised constraints); raises :class:`InputError`."""
    return _one(_pod, obj)


def pdb_from_api(obj: Mapping[str, Any]) -> PodDisruptionBudget:
    """Convert a policy/v1 PodDisruptionBudget; raises :class:`InputError`."""
    return _one(_pdb, obj)


def priority_class_from_api(obj: Mapping[str, Any]) -> PriorityClass:
    """Convert a PriorityClass; raises :class:`InputError`."""
    return _one(_priority_class, obj)


def pvc_from_api(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    """Convert a PersistentVolumeClaim; raises :class:`InputError`."""
    return _one(_pvc, obj)


def pv_from_api(obj: Mapping[str, Any]) -> PersistentVolume:
    """Convert a PersistentVolume; raises :class:`InputError`."""
    return _one(_pv, obj)


def service_from_api(obj: Mapping[str, Any]) -> Service:
    """Convert a Service; raises :class:`InputError`."""
    return _one(_service, obj)


def controller_from_api(obj: Mapping[str, Any]) -> Controller:
    """Convert a ReplicaSet, StatefulSet or ReplicationController; raises :class:`InputError`."""
    return _one(_controller, obj)


# --- snapshots ------------------------------------------------------------------------------

_Converter = Callable[[Mapping[str, Any], list[str]], Any]

_CONVERTERS: Final[Mapping[str, _Converter]] = MappingProxyType(
    {
        "Node": _node,
        "Pod": _pod,
        "PodDisruptionBudget": _pdb,
        "PriorityClass": _priority_class,
        "PersistentVolumeClaim": _pvc,
        "PersistentVolume": _pv,
        "Service": _service,
        "ReplicaSet": _controller,
        "StatefulSet": _controller,
        "ReplicationController": _controller,
    }
)
KINDS: Final = frozenset(_CONVERTERS)
"""The kinds a snapshot is built from; every other kind is counted and ignored."""


_BUCKETS: Final = {kind: "controllers" if kind in CONTROLLER_KINDS else kind for kind in KINDS}


def _sort_key(kind: str, item: Any) -> tuple[str, ...]:
    """Cluster-scoped objects sort by name, namespaced ones by namespace/name (controllers
    by kind first)."""
    if kind in ("Node", "PriorityClass", "PersistentVolume"):
        return (item.name,)
    if kind in CONTROLLER_KINDS:
        return (kind, item.namespace, item.name)
    return (item.namespace, item.name)


class SnapshotBuilder:
    """Builds a :class:`Snapshot` from API objects fed one at a time (or page by page).

    Each object is converted as it is added, so a paginated reader can drop every page once
    added. Problems are collected across all objects; :meth:`build` raises them together.
    """

    def __init__(self, source: str = "snapshot") -> None:
        self.source = source
        self._buckets: dict[str, dict[tuple[str, ...], Any]] = {
            bucket: {} for bucket in _BUCKETS.values()
        }
        self._problems: list[str] = []
        self._counts: dict[str, int] = {}
        self._ignored: dict[str, int] = {}
        self._added = 0

    @property
    def problems(self) -> tuple[str, ...]:
        """Every problem found so far."""
        return tuple(self._problems)

    @property
    def counts(self) -> Mapping[str, int]:
        """How many objects of each used kind were added (problems included)."""
        return dict(sorted(self._counts.items()))

    @property
    def ignored(self) -> Mapping[str, int]:
        """How many objects of each unused kind were skipped (Deployment, Event, ...)."""
        return dict(sorted(self._ignored.items()))

    def add(self, obj: Mapping[str, Any]) -> None:
        """Convert one API object; an object of a kind the snapshot does not use is counted."""
        index = self._added
        self._added += 1
        if not isinstance(obj, Mapping):
            self._problems.append(f"item {index}: must be an object, got {_show(obj)}")
            return
        kind = obj.get("kind")
        if type(kind) is not str or not kind:
            self._problems.append(f"item {index}: kind must be a string, got {_show(kind)}")
            return
        convert = _CONVERTERS.get(kind)
        if convert is None:
            self._ignored[kind] = self._ignored.get(kind, 0) + 1
            return
        self._counts[kind] = self._counts.get(kind, 0) + 1
        before = len(self._problems)
        item = convert(obj, self._problems)
        if len(self._problems) > before:
            return  # build() raises; the half-converted object is of no use
        bucket = self._buckets[_BUCKETS[kind]]
        key = _sort_key(kind, item)
        if key in bucket:
            shown = "/".join(key[1:] if kind in CONTROLLER_KINDS else key)
            self._problems.append(f"{kind} {shown}: appears more than once")
        bucket[key] = item

    def add_all(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Add every object of one page (or of a whole file)."""
        with gc_paused():
            for obj in objects:
                self.add(obj)

    def build(self) -> Snapshot:
        """The snapshot, sorted deterministically; raises :class:`InputError` with all problems."""
        _raise_if(self._problems, self.source)

        def ordered(bucket_name: str) -> tuple[Any, ...]:
            bucket = self._buckets[bucket_name]
            return tuple(bucket[key] for key in sorted(bucket))

        return Snapshot(
            nodes=ordered("Node"),
            pods=ordered("Pod"),
            pdbs=ordered("PodDisruptionBudget"),
            priority_classes=ordered("PriorityClass"),
            pvcs=ordered("PersistentVolumeClaim"),
            pvs=ordered("PersistentVolume"),
            services=ordered("Service"),
            controllers=ordered("controllers"),
        )


def snapshot_from_objects(
    objects: Iterable[Mapping[str, Any]], source: str = "snapshot"
) -> Snapshot:
    """Convert API objects of any kinds into one sorted :class:`Snapshot`.

    Raises one :class:`InputError` (named ``source``) listing every problem in every object.
    """
    builder = SnapshotBuilder(source)
    builder.add_all(objects)
    return builder.build()
