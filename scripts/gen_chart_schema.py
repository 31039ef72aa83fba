"""Write the policy part of charts/rebalancer/values.schema.json from the policy's declared keys.

    python scripts/gen_chart_schema.py          rewrite the file (only ``properties.policy``)
    python scripts/gen_chart_schema.py --check  exit 1 if the file is not what it would write

The rest of the file (image, kind, schedule, ...) is edited by hand; the policy part comes from
:func:`rebalancer.core.policy_schema.policy_values_schema`. Run it after changing the policy's
keys (a new key, a new bound); tests/test_policy_schema.py fails until then.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rebalancer.core.policy_schema import policy_values_schema

SCHEMA_FILE = (
    Path(__file__).resolve().parent.parent / "charts" / "rebalancer" / "values.schema.json"
)


def generated(current: dict[str, Any]) -> str:
    """The file's text with its policy part replaced by the generated one."""
    current["properties"]["policy"] = policy_values_schema()
    return json.dumps(current, indent=2) + "\n"


def main(argv: list[str]) -> int:
    text = SCHEMA_FILE.read_text()
    wanted = generated(json.loads(text))
    if argv == ["--check"]:
        if text != wanted:
            print(f"{SCHEMA_FILE}: out of date; run python scripts/gen_chart_schema.py")
            return 1
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    SCHEMA_FILE.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
