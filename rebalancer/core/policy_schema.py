"""The policy's rules as a JSON Schema (draft 07), for the chart's values.schema.json.

Derived from the one declaration of the policy's keys (:data:`rebalancer.core.policy.KEYS`):
each key's :class:`~rebalancer.core.policy.Kind` (type and bounds) has its rule here, so a new
key appears in the chart's schema the next time ``scripts/gen_chart_schema.py`` runs, and
``tests/test_policy_schema.py`` draws random policies to show that the schema and the validator
accept and refuse the same ones. A kind this module has no rule for gets an open schema that
lets any value through to the validator (:data:`OPEN_KEYS` lists its keys, so the test can
tell), never making the chart reject a good policy.

The patterns reuse the validator's regular expressions where they are the same rule, and are
written for RE2 (Helm's Go checker) and Python alike: no look-around, no back-references.

What JSON Schema cannot say, and so the schema accepts while the validator refuses:

* two ``defaultConstraints`` with the same ``topologyKey`` and ``whenUnsatisfiable``;
* a ``cron`` expression of 5 well-formed fields that is out of range (``61 * * * *``) or never
  fires (``0 0 31 2 *``);
* a ``timeZone`` that is shaped like a zone name but not in the tz database;
* a ``priorityThreshold.name`` or prefix of a label key longer than 253 characters;
* a ``minPodAge`` or a window's ``duration`` longer than 8760h: a regular expression can shape
  a duration, not add up its parts.
"""

from __future__ import annotations

import re
from typing import Any, Final

from rebalancer.core.constants import DNS_LABEL, DNS_SUBDOMAIN, INT32_MAX, INT32_MIN
from rebalancer.core.convert.selectors import LABEL_NAME, LABEL_VALUE, SELECTOR_OPS
from rebalancer.core.model import SOFT
from rebalancer.core.policy import (
    DEFAULT_CONSTRAINT,
    KEYS,
    WHEN_UNSATISFIABLE,
    WINDOW_KEYS,
    ConstraintKinds,
    Count,
    DefaultConstraint,
    DefaultConstraints,
    Duration,
    Flag,
    Kind,
    LabelKey,
    Namespaces,
    OneOf,
    Selector,
    Struct,
    Threshold,
    Windows,
    keys_of,
)

Schema = dict[str, Any]


def _bare(pattern: re.Pattern[str]) -> str:
    return pattern.pattern.removeprefix("^").removesuffix("$")


LABEL_KEY: Final = f"^({_bare(DNS_SUBDOMAIN)}/)?{_bare(LABEL_NAME)}$"
"""``name`` or ``prefix/name``, as :func:`~rebalancer.core.convert.selectors.is_label_key`."""
_NUMBER: Final = r"([0-9]+(\.[0-9]+)?|\.[0-9]+)"
_POSITIVE_NUMBER: Final = (
    r"([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*|\.[0-9]*[1-9][0-9]*)"
)
_UNIT: Final = "(ms|s|m|h)"
DURATION: Final = rf"^ *({_NUMBER}{_UNIT})+ *$"
""":func:`~rebalancer.core.policy.parse_duration`: units h, m, s, ms; no sign, no bare number."""
POSITIVE_DURATION: Final = rf"^ *({_NUMBER}{_UNIT})*{_POSITIVE_NUMBER}{_UNIT}({_NUMBER}{_UNIT})* *$"
CRON: Final = r"^ *[-0-9A-Za-z*/,?#]+( +[-0-9A-Za-z*/,?#]+){4} *$"
"""Five fields of cron characters; their ranges are checked when rebalancer starts."""
TIME_ZONE: Final = "^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"


def _nullable(schema: Schema) -> Schema:
    """``schema`` that also accepts null (its type widened)."""
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*kinds, "null"]}


def _integer(minimum: int, maximum: int = INT32_MAX) -> Schema:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def _object(properties: dict[str, Schema], **more: Any) -> Schema:
    return {"type": "object", "additionalProperties": False, "properties": properties, **more}


def _set(key: str) -> Schema:
    """The object sets ``key`` to something other than null."""
    return {"required": [key], "properties": {key: {"not": {"type": "null"}}}}


def label_selector_schema() -> Schema:
    """A ``metav1.LabelSelector`` as the validator's strict selector parser takes it."""
    requirement = _object(
        {
            "key": {"type": "string", "pattern": LABEL_KEY},
            "operator": {"enum": list(SELECTOR_OPS)},
            "values": {
                "type": ["array", "null"],
                "items": {"type": "string", "pattern": LABEL_VALUE.pattern},
                "uniqueItems": True,
            },
        },
        required=["key", "operator"],
        allOf=[
            {
                "if": {"properties": {"operator": {"enum": ["In", "NotIn"]}}},
                "then": {
                    "required": ["values"],
                    "properties": {"values": {"type": "array", "minItems": 1}},
                },
            },
            {
                "if": {"properties": {"operator": {"enum": ["Exists", "DoesNotExist"]}}},
                "then": {"properties": {"values": {"maxItems": 0}}},
            },
        ],
    )
    return _object(
        {
            "matchLabels": {
                "type": ["object", "null"],
                "propertyNames": {"pattern": LABEL_KEY},
                "additionalProperties": {
                    "type": "string",
                    "pattern": LABEL_VALUE.pattern,
                },
            },
            "matchExpressions": {"type": ["array", "null"], "items": requirement},
        },
    )


def _kind_schema(kind: Kind) -> Schema | None:
    """The rule of a kind of value; None for a kind this module has no rule for."""
    match kind:
        case Flag():
            return {"type": "boolean"}
        case Count(minimum=low, maximum=high, nullable=nullable):
            number = _integer(low, high)
            return _nullable(number) if nullable else number
        case OneOf(choices=choices):
            return {"enum": list(choices)}
        case LabelKey():
            return {"type": "string", "pattern": LABEL_KEY}
        case Duration():
            return {"type": "string", "pattern": DURATION}
        case Selector():
            return _nullable(label_selector_schema())
        case Struct(cls=cls, required=required, nullable=nullable):
            properties = {key.name: _kind_schema(key.kind) or _OPEN for key in keys_of(cls)}
            more: Schema = {"required": list(required)} if required else {}
            found = _object(properties, **more, **_STRUCT_RULES.get(cls, {}))
            return _nullable(found) if nullable else found
        case ConstraintKinds():
            return {
                "type": "array",
                "items": {"enum": list(WHEN_UNSATISFIABLE)},
                "minItems": 1,
                "uniqueItems": True,
            }
        case DefaultConstraints():
            return {"type": ["array", "null"], "items": _kind_schema(DEFAULT_CONSTRAINT)}
        case Namespaces():
            return _namespaces()
        case Threshold():
            return _priority_threshold()
        case Windows():
            return _schedule()
    return None


_STRUCT_RULES: Final[dict[type, Schema]] = {
    # minDomains applies only to DoNotSchedule.
    DefaultConstraint: {
        "if": {
            "required": ["whenUnsatisfiable"],
            "properties": {"whenUnsatisfiable": {"const": SOFT}},
        },
        "then": {"properties": {"minDomains": {"const": 1}}},
    },
}
"""What a struct's ``rule`` checks, as JSON Schema says it."""

_OPEN: Final[Schema] = {"description": "checked by rebalancer when it starts"}


def _namespaces() -> Schema:
    names: Schema = {
        "type": ["array", "null"],
        "items": {"type": "string", "pattern": DNS_LABEL.pattern},
        "uniqueItems": True,
    }
    return _object(
        {"include": names, "exclude": names},
        description="include or exclude, not both",
        # include and exclude are mutually exclusive: with include listed, exclude is empty.
        **{
            "if": {
                "required": ["include"],
                "properties": {"include": {"type": "array", "minItems": 1}},
            },
            "then": {"properties": {"exclude": {"maxItems": 0}}},
        },
    )


def _priority_threshold() -> Schema:
    return _object(
        {
            "value": _nullable(_integer(INT32_MIN)),
            "name": {"type": ["string", "null"], "pattern": DNS_SUBDOMAIN.pattern},
        },
        description="{value: N} or {name: PriorityClass}, exactly one",
        oneOf=[_set("value"), _set("name")],
    )


def _schedule() -> Schema:
    window = {
        "cron": {"type": "string", "pattern": CRON},
        "duration": {"type": "string", "pattern": POSITIVE_DURATION},
        "timeZone": {"type": "string", "pattern": TIME_ZONE},
    }
    assert tuple(window) == WINDOW_KEYS, "schedule window keys changed"
    return _nullable(
        _object(
            {
                "windows": {
                    "type": "array",
                    "minItems": 1,
                    "items": _object(window, required=["cron", "duration"]),
                }
            },
            required=["windows"],
        )
    )


OPEN_KEYS: Final = tuple(key.name for key in KEYS if _kind_schema(key.kind) is None)
"""Policy keys whose schema lets every value through (the validator alone checks them)."""


def policy_values_schema() -> Schema:
    """The schema of the chart's ``policy`` value: a RebalancerPolicy without its header."""
    properties = {key.name: _kind_schema(key.kind) or _OPEN for key in KEYS}
    return _object(
        properties,
        description="The RebalancerPolicy without apiVersion and kind, checked as "
        "`rebalancer policy check` checks it (generated by scripts/gen_chart_schema.py)",
    )
