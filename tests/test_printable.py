"""Control characters are shown escaped, the way a JSON string (and jq) shows them."""

from __future__ import annotations

import json

import pytest

from rebalancer.cli.printable import printable, printable_fields
from rebalancer.core.plan import Skip, SkipCode, SkipReason

# Hand-written: what each hostile string looks like on the terminal.
CASES = [
    ("web-1", "web-1"),
    ("\x1b]0;PWNED\x07", "\\u001b]0;PWNED\\u0007"),
    ("a\rb", "a\\rb"),
    ("a\tb", "a\\tb"),
    ("a\nb", "a\\nb"),
    ("\x00\x08\x0c\x7f", "\\u0000\\b\\f\\u007f"),
    ("\x85\x9b31m\x9d", "\\u0085\\u009b31m\\u009d"),
    ("zone\u2028b\u2029", "zone\\u2028b\\u2029"),
    ("lone \ud800", "lone \\ud800"),
    ("é ü 中 \u00a0", "é ü 中 \u00a0"),
]


@pytest.mark.parametrize(("raw", "shown"), CASES)
def test_printable(raw: str, shown: str) -> None:
    """Each control character becomes its JSON escape; everything else stays as it is."""
    assert printable(raw) == shown


# A lone surrogate cannot be JSON text in the first place.
@pytest.mark.parametrize("raw", [raw for raw, _ in CASES if "\ud800" not in raw])
def test_printable_keeps_json_valid(raw: str) -> None:
    """Escaping what orjson leaves raw (DEL, C1, separators) keeps a JSON document valid."""
    document = json.dumps({"k": raw}, ensure_ascii=False)
    assert json.loads(printable(document, newlines=True)) == {"k": raw}


def test_newlines_kept_only_when_asked() -> None:
    """A layout's newlines survive ``newlines=True``; a CR next to them does not."""
    assert printable("a\nb\r\n", newlines=True) == "a\nb\\r\n"


def test_printable_fields_rebuilds_only_what_changes() -> None:
    """Every string inside a frozen dataclass is escaped; a clean object is not copied."""
    clean = Skip("shop", "web-1", "u1", "n1", SkipReason(SkipCode.PDB, "budget 0"))
    assert printable_fields(clean) is clean
    dirty = Skip("shop", "web\x1b[2J", "u1", None, SkipReason(SkipCode.PDB, "denied\x07"))
    assert printable_fields(dirty) == Skip(
        "shop", "web\\u001b[2J", "u1", None, SkipReason(SkipCode.PDB, "denied\\u0007")
    )
    assert printable_fields(({"k\r": ("v\x07",)},)) == ({"k\\r": ("v\\u0007",)},)
