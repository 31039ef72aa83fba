"""The grace period an eviction carries: the policy's is a floor, never an override (SPEC §5.2).

A pod's own ``terminationGracePeriodSeconds`` (30 when unset, as the API server defaults it) is
how long its shutdown may take. An eviction that carries ``deleteOptions.gracePeriodSeconds``
replaces that value, so a policy value below the pod's own would cut its shutdown short. The
policy's ``gracePeriodSeconds`` therefore travels only when it is longer than the pod's own;
otherwise the eviction carries none and the kubelet uses the pod's own.

======  ============  ==========================
policy  pod's own     eviction carries
======  ============  ==========================
None    any           nothing
120     600           nothing (600 applies)
120     unset (30)    120
30      unset (30)    nothing (equal: 30 applies)
5       12            nothing (12 applies)
======  ============  ==========================
"""

from __future__ import annotations

from typing import Final

DEFAULT_TERMINATION_GRACE_SECONDS: Final = 30
"""What the API server fills in for a pod without ``terminationGracePeriodSeconds``."""


def eviction_grace(policy_floor: int | None, pod_own: int | None) -> int | None:
    """The ``gracePeriodSeconds`` to send, or None to let the pod's own apply."""
    if policy_floor is None:
        return None
    own = DEFAULT_TERMINATION_GRACE_SECONDS if pod_own is None else pod_own
    return policy_floor if policy_floor > own else None
