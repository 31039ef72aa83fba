"""Reading a policy file: the only I/O around :mod:`rebalancer.core.policy`, which stays pure."""

from __future__ import annotations

import os

from rebalancer.core.errors import InputError
from rebalancer.core.policy import Policy, load_policy


def load_policy_file(path: str | os.PathLike[str]) -> Policy:
    """Read and validate the policy at ``path``; raise :class:`InputError` naming the file."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as exc:
        raise InputError(source, [f"cannot read the policy file: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise InputError(source, [f"not UTF-8 text: {exc.reason} at byte {exc.start}"]) from exc
    return load_policy(text, source)
