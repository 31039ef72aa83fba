"""``resource.Quantity`` strings (``100m``, ``1Gi``, ``1e3``) in exact integer nano-units."""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal
from typing import Any, Final

from rebalancer.core.convert.checker import Checker, show
from rebalancer.core.errors import InputError

__all__ = [
    "QUANTITY_RULE",
    "add",
    "maximum",
    "nanos",
    "parse_bytes",
    "parse_cpu_millis",
    "parse_quantity",
    "resource_list",
    "to_units",
]

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
_CACHE_LIMIT: Final = 100_000
QUANTITY_RULE: Final = "must be a quantity such as 100m, 0.5, 2, 1Gi, 512M or 1e3"


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


def nanos(value: object, cache: dict[str, int | None] | None = None) -> int | None:
    """A quantity (string, or a number written unquoted in YAML) in nano-units; None if bad.

    ``cache`` (owned by the caller: one per snapshot) remembers each distinct string.
    """
    if type(value) is str:
        text = value
    elif type(value) is int:
        text = str(value)
    elif type(value) is float:
        text = repr(value)
    else:
        return None
    if cache is None:
        return _parse_nanos(text)
    try:
        return cache[text]
    except KeyError:
        pass
    found = _parse_nanos(text)
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[text] = found
    return found


def _ceil_div(value: int, unit: int) -> int:
    return -(-value // unit)


def _units(resource: str, amount: int) -> int:
    """What the scheduler reads: ``MilliValue()`` for cpu, ``Value()`` (ceil) for the rest."""
    return _ceil_div(amount, _MILLI_IN_NANO if resource == "cpu" else _NANO)


def parse_quantity(value: object, path: str) -> int:
    """Parse a Kubernetes quantity into nano-units (1e-9), exactly as resource.Quantity does.

    Kubernetes rounds every quantity up (away from zero) to nano precision and caps it at
    2**63-1 units, so an int of nano-units is exact. Raises :class:`InputError` naming ``path``.
    """
    found = nanos(value)
    if found is None:
        raise InputError(path, [f"{path}: {QUANTITY_RULE}, got {show(value)}"])
    return found


def _non_negative(value: object, path: str) -> int:
    found = parse_quantity(value, path)
    if found < 0:
        raise InputError(path, [f"{path}: must not be negative, got {show(value)}"])
    return found


def parse_cpu_millis(value: object, path: str) -> int:
    """A non-negative cpu quantity in millicores, rounded up: ``"0.5"`` -> 500."""
    return _ceil_div(_non_negative(value, path), _MILLI_IN_NANO)


def parse_bytes(value: object, path: str) -> int:
    """A non-negative quantity in whole units, rounded up: ``"1Ki"`` -> 1024, ``"1e3"`` -> 1000."""
    return _ceil_div(_non_negative(value, path), _NANO)


def resource_list(
    chk: Checker, raw: Mapping[str, Any], path: str, cache: dict[str, int | None]
) -> dict[str, int]:
    """A ``ResourceList`` in nano-units; bad or negative quantities are reported and dropped."""
    result: dict[str, int] = {}
    for name, quantity in raw.items():
        amount = nanos(quantity, cache)
        if type(name) is not str or not name:
            chk.bad(path, "resource names must be non-empty strings", name)
        elif amount is None:
            chk.bad(f"{path}.{name}", QUANTITY_RULE, quantity)
        elif amount < 0:
            chk.bad(f"{path}.{name}", "must not be negative", quantity)
        else:
            result[name] = amount
    return result


def to_units(amounts: Mapping[str, int]) -> dict[str, int]:
    """Nano-units -> the units the scheduler compares (millicores for cpu), sorted by name."""
    return {name: _units(name, value) for name, value in sorted(amounts.items())}


def add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def maximum(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        if value > total.get(name, -1):
            total[name] = value
