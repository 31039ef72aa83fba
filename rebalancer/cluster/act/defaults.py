"""Defaults of a run that the command line shows in its help: kept apart from the runner, so
that building the parser (every command, offline ones included) does not load the runner,
the executor and their retry machinery."""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_WAVES: Final = 5
"""Waves of evictions one run makes at most (``run --max-waves``)."""
DEFAULT_WAVE_TIMEOUT: Final = "10m"
"""How long one wave waits for its replacements at most (``run --wave-timeout``)."""
