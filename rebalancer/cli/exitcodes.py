"""The exit codes of every command: one table, shown by ``rebalancer --help``, ``kubectl rebalance
--help`` and, copied word for word, the chart's NOTES.txt, README.md and docs/reference.md
(tests/test_exit_codes.py holds them equal to this one).

An eviction a PodDisruptionBudget refuses (HTTP 429) is an outcome of the run, not a failure:
it is reported in the summary (``blocked_by_pdb``), the metrics (``result="blocked-by-pdb"``)
and an Event on the pod, and the run exits 0, so a CronJob's Job succeeds and its next run
tries again.
"""

from __future__ import annotations

import textwrap
from typing import Final

from rebalancer.core.api import (
    EXIT_BAD_INPUT,
    EXIT_CLUSTER,
    EXIT_EVICTIONS_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
)

EXIT_SIGINT: Final = 130  # 128 + SIGINT, as a shell reports it
EXIT_SIGTERM: Final = 143  # 128 + SIGTERM

EXIT_CODES: Final[tuple[tuple[int, str], ...]] = (
    (
        EXIT_OK,
        "ok: the run or command finished. Evictions refused by a PodDisruptionBudget, another "
        "rebalancer holding the Lease and a run stopped by SIGTERM or SIGINT with nothing "
        "failed are ok too (the summary, metrics and Events report them)",
    ),
    (
        EXIT_EVICTIONS_FAILED,
        "some evictions failed for another reason than a PodDisruptionBudget (one abandoned "
        "in flight by a signal included), or an object could not be read and its namespace "
        "was left out",
    ),
    (
        EXIT_BAD_INPUT,
        "bad input: policy, arguments or snapshot file; nothing was written to the cluster",
    ),
    (
        EXIT_CLUSTER,
        "cluster error: unreachable, credentials refused or not loadable (an exec credential "
        "plugin that fails or hangs, a client certificate that is not PEM, a TLS failure), "
        "RBAC denied a request (the message names the verb and resource), a deadline passed, "
        "or the Lease was lost mid-run",
    ),
    (
        EXIT_INTERNAL,
        "unexpected error (a bug): one line on stderr naming it; --debug prints the traceback",
    ),
    (
        EXIT_SIGINT,
        "a command other than run interrupted by SIGINT (Ctrl-C): one line on stderr, its "
        "output incomplete or empty",
    ),
    (
        EXIT_SIGTERM,
        "a command other than run interrupted by SIGTERM: the same",
    ),
)
"""(code, meaning), in the order shown everywhere."""


def exit_codes_text(indent: int = 2, width: int = 79) -> str:
    """The table as plain text lines (``--help``, NOTES.txt): ``  0  meaning`` with the meaning
    wrapped under itself; ends with a newline."""
    lines: list[str] = []
    for code, meaning in EXIT_CODES:
        head = " " * indent + f"{code}  "
        lines += textwrap.wrap(
            meaning,
            width=width,
            initial_indent=head,
            subsequent_indent=" " * len(head),
            break_on_hyphens=False,
        )
    return "\n".join(lines) + "\n"
