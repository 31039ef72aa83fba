"""The limits and name rules of the Kubernetes API that several parts of rebalancer check, each
stated once (pure; imports nothing of rebalancer).
"""

from __future__ import annotations

import re
from typing import Final

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
"""An ``int32`` of the API (``maxSkew``, a priority, ``minReplicas``); the descheduler's
``priorityThreshold.value`` that lets every pod go (``evictSystemCriticalPods: true``)."""
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
"""An ``int64`` of the API (``DeleteOptions.gracePeriodSeconds``)."""

DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""An RFC 1123 label: a namespace's name."""
DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""An RFC 1123 subdomain: most objects' names (a PriorityClass), a label key's prefix."""

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
"""The phases of a finished pod: it runs nowhere, and nothing re-creates it for being evicted."""
