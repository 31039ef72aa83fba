"""What ``explain`` of an unknown pod costs to name the nearest pods, at three sizes.

    python -m bench.nearest [--sizes 15000,50000,150000]

Two namespaces per size: a hostile one, every name the same 200 characters, a six-digit number
and six random characters (218 in all), the typo in its last character (as
tests/test_nearest.py); and names as a ReplicaSet writes them,
cut in their middle as a narrow table once cut them. Prints seconds, the names compared in full
(difflib) and whether the name meant came first, then the peak RSS. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import resource
import time

from rebalancer.core.nearest import nearest, shortlist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="15000,50000,150000")
    args = parser.parse_args()
    for count in (int(s) for s in args.sizes.split(",")):
        rng = random.Random(count)
        tails = [
            "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(6))
            for _ in range(count)
        ]
        hostile = [f"web-{'x' * 200}-{i:06d}-{tails[i]}" for i in range(count)]
        cut = [f"ads-svc-{i % 2000}-{i:09d}-{i * 7 % 99999:05d}" for i in range(count)]
        for kind, names, meant, word in (
            ("alike", hostile, hostile[count // 2], hostile[count // 2][:-1] + "A"),
            ("cut", cut, cut[count // 3], cut[count // 3][:5] + "\u2026" + cut[count // 3][-10:]),
        ):
            start = time.perf_counter()
            found = nearest(word, names)
            seconds = time.perf_counter() - start
            compared = len(shortlist(word, names))
            first = "yes" if found[:1] == [meant] else f"no ({found[:1]})"
            print(f"{count:>7} names, {kind:5}: {seconds:.2f} s, {compared} compared in full, "
                  f"meant first: {first}")  # fmt: skip
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB")


if __name__ == "__main__":
    main()
