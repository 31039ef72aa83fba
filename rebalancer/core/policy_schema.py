"""The policy validator's rules as a JSON Schema (draft 07), for the chart's values.schema.json.

:mod:`rebalancer.core.policy` is the authority: this module restates its rules in a form Helm
checks before anything is installed, and ``tests/test_policy_schema.py`` draws random policies
to show that both accept and reject the same ones. ``scripts/gen_chart_schema.py`` writes
:func:`policy_values_schema` into ``charts/rebalancer/values.schema.json``.

The patterns reuse the validator's regular expressions where they are the same rule, and are
written for RE2 (Helm's Go checker) and Python alike: no look-around, no back-references.

A key the validator accepts but this module has no rule for yet gets one from its default
(a boolean default: a boolean), else an open schema that lets any value through to the
validator (:data:`OPEN_KEYS` lists them, so the test can tell): new policy fields appear in the
chart's schema the next time the script runs, never making it reject a good policy.

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

from typing import Any, Final

from rebalancer.core.constants import DNS_LABEL, DNS_SUBDOMAIN, INT32_MAX, INT32_MIN, INT64_MAX
from rebalancer.core.convert.selectors import LABEL_VALUE, SELECTOR_OPS
from rebalancer.core.model import HARD, HONOR, IGNORE, SOFT
from rebalancer.core.policy import (
    _DEFAULT_CONSTRAINT_KEYS,
    _LIMIT_KEYS,
    _TOP_KEYS,  # the keys the validator accepts: new ones flow in from there
    _WINDOW_KEYS,
    API_VERSION,
    KIND,
    NO_EVICTION_POLICIES,
    Policy,
    policy_to_dict,
)

Schema = dict[str, Any]

HEADER_KEYS: Final = ("apiVersion", "kind")
"""Keys the chart writes itself; the values' policy must not set them."""


def _anchored(pattern: str) -> str:
    return "^" + pattern.removeprefix("^").removesuffix("$") + "$"


_DNS_SUBDOMAIN: Final = DNS_SUBDOMAIN.pattern.removeprefix("^").removesuffix("$")
_LABEL_NAME: Final = "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY: Final = f"^({_DNS_SUBDOMAIN}/)?{_LABEL_NAME}$"
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
                "items": {"type": "string", "pattern": _anchored(LABEL_VALUE.pattern)},
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
                    "pattern": _anchored(LABEL_VALUE.pattern),
                },
            },
            "matchExpressions": {"type": ["array", "null"], "items": requirement},
        },
    )


def _default_constraint() -> Schema:
    properties = {
        "maxSkew": _integer(1),
        "topologyKey": {"type": "string", "pattern": LABEL_KEY},
        "whenUnsatisfiable": {"enum": [HARD, SOFT]},
        "minDomains": _integer(1),
        "nodeAffinityPolicy": {"enum": [HONOR, IGNORE]},
        "nodeTaintsPolicy": {"enum": [HONOR, IGNORE]},
    }
    assert tuple(properties) == _DEFAULT_CONSTRAINT_KEYS, "defaultConstraints keys changed"
    return _object(
        properties,
        required=["maxSkew", "topologyKey"],
        # minDomains applies only to DoNotSchedule.
        **{
            "if": {
                "required": ["whenUnsatisfiable"],
                "properties": {"whenUnsatisfiable": {"const": SOFT}},
            },
            "then": {"properties": {"minDomains": {"const": 1}}},
        },
    )


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


def _limits() -> Schema:
    return _nullable(
        _object({key: _nullable(_integer(0)) for key in _LIMIT_KEYS}),
    )


def _schedule() -> Schema:
    window = {
        "cron": {"type": "string", "pattern": CRON},
        "duration": {"type": "string", "pattern": POSITIVE_DURATION},
        "timeZone": {"type": "string", "pattern": TIME_ZONE},
    }
    assert tuple(window) == _WINDOW_KEYS, "schedule window keys changed"
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


def _known() -> dict[str, Schema]:
    """The rule of every key this module knows."""
    boolean: Schema = {"type": "boolean"}
    return {
        "constraints": {
            "type": "array",
            "items": {"enum": [HARD, SOFT]},
            "minItems": 1,
            "uniqueItems": True,
        },
        "nodeFit": boolean,
        "defaultConstraints": {"type": ["array", "null"], "items": _default_constraint()},
        "namespaces": _namespaces(),
        "labelSelector": _nullable(label_selector_schema()),
        "namespaceLabelSelector": _nullable(label_selector_schema()),
        "priorityThreshold": _priority_threshold(),
        "evictLocalStoragePods": boolean,
        "evictPodsWithPVC": boolean,
        "evictPodsWithResourceClaims": boolean,
        "evictBarePods": boolean,
        "minPodAge": {"type": "string", "pattern": DURATION},
        "limits": _limits(),
        "gracePeriodSeconds": _nullable(_integer(1, INT64_MAX)),
        "schedule": _schedule(),
        "minReplicas": _integer(0),
        "nodeSelector": _nullable(label_selector_schema()),
        "ignorePodsWithoutPDB": boolean,
        "noEvictionPolicy": {"enum": list(NO_EVICTION_POLICIES)},
    }


def _policy_keys() -> tuple[str, ...]:
    return tuple(key for key in _TOP_KEYS if key not in HEADER_KEYS)


def _from_default(key: str) -> Schema:
    """The rule of a key this module does not know yet, from its default value."""
    default = policy_to_dict(Policy()).get(key)
    if isinstance(default, bool):
        return {"type": "boolean"}
    return {"description": "checked by rebalancer when it starts"}


OPEN_KEYS: Final = tuple(
    key for key in _policy_keys() if key not in _known() and "type" not in _from_default(key)
)
"""Policy keys whose schema lets every value through (the validator alone checks them)."""


def policy_values_schema() -> Schema:
    """The schema of the chart's ``policy`` value: a RebalancerPolicy without its header."""
    known = _known()
    properties = {key: known.get(key) or _from_default(key) for key in _policy_keys()}
    return _object(
        properties,
        description="The RebalancerPolicy without apiVersion and kind, checked as "
        "`rebalancer policy check` checks it (generated by scripts/gen_chart_schema.py)",
    )


def policy_document_schema() -> Schema:
    """The schema of a whole policy file: the values' policy with its header."""
    body = policy_values_schema()
    return {
        **body,
        "required": list(HEADER_KEYS),
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": KIND},
            **body["properties"],
        },
    }
