"""The root of rebalancer's error tree and the exit codes (part of the CLI contract, see README).

Errors about the cluster (unreachable, RBAC, API statuses) live in
:mod:`rebalancer.cluster.api.errors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

EXIT_OK = 0
EXIT_EVICTIONS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CLUSTER = 3
EXIT_INTERNAL = 4
"""An unexpected error (a bug): one line on stderr, the traceback with ``--debug``."""


class RebalancerError(Exception):
    """Base of every error rebalancer raises on purpose."""

    exit_code = EXIT_BAD_INPUT


MAX_PROBLEMS_SHOWN: Final = 1000
"""An :class:`InputError` lists at most this many problems (and how many more there are): a
file of many bad items must not print a line, many times its size, for each."""


class InputError(RebalancerError):
    """Bad input: a policy, snapshot or API object. Reports every problem found, each with a path.

    Nothing is ever written to the cluster after one of these.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        shown = self.problems
        if len(shown) > MAX_PROBLEMS_SHOWN + 1:  # one more is shown rather than summed up
            more = len(shown) - MAX_PROBLEMS_SHOWN
            shown = (*shown[:MAX_PROBLEMS_SHOWN], f"{more} more problem(s), not listed")
        lines = "\n".join(f"  - {p}" for p in shown)
        super().__init__(f"{source}: {len(self.problems)} problem(s):\n{lines}")
