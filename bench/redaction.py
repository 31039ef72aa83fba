"""Redaction against hostile text: the time per repeat should not grow with the repeats.

    python -m bench.redaction [--repeats 1000,10000,100000] [--module FILE]

Each case is one piece of text repeated (a quote never closed, a secret key's colon, a scheme
with no userinfo end, ...), passed to ``redact()`` of rebalancer's redaction module, or of the
module file given with ``--module`` (an earlier version, to compare). Printed: the case, the
repeats, the input's size, seconds, microseconds per repeat and its ratio to the smallest
size's (about 1 when redaction is linear, about N/N0 when it is quadratic). A case that passes
``--give-up`` seconds is not run at the larger sizes.

Figures are printed, never asserted. The machine is shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from types import ModuleType

from rebalancer.cluster.api import redact as current

CASES = {
    "quotes never closed": 'token="',
    "keys with no separator": "secret_token_key_",
    "colons after a secret key": "password:",
    "scheme without userinfo end": "a://x",
    "bearer tokens without punctuation": "Bearer abcdefgh ",
    "spaces before no separator": "token" + " " * 20 + "x",
    "flags without values": "--token ",
    "dots in a scheme": "a.",
    "backslashes in a quote": 'apikey="\\\\\\\\',
}


def _module(path: str | None) -> ModuleType:
    if path is None:
        return current
    spec = importlib.util.spec_from_file_location("redact_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", default="1000,10000,100000")
    parser.add_argument("--module", help="a redact.py to time instead of this tree's")
    parser.add_argument("--give-up", type=float, default=20.0, metavar="SECONDS")
    args = parser.parse_args()
    redact: Callable[[str], str] = _module(args.module).redact
    sizes = [int(s) for s in args.repeats.split(",")]
    print(f"{'case':36} {'repeats':>8} {'bytes':>9} {'seconds':>8} {'us/rep':>8} {'ratio':>6}")
    for name, piece in CASES.items():
        first: float | None = None
        for n in sizes:
            text = piece * n
            start = time.perf_counter()
            redact(text)
            took = time.perf_counter() - start
            per = took / n * 1e6
            first = per if first is None else first
            ratio = per / first if first else 0.0
            print(f"{name:36} {n:8} {len(text):9} {took:8.3f} {per:8.2f} {ratio:6.1f}")
            if took > args.give_up:
                break


if __name__ == "__main__":
    main()
