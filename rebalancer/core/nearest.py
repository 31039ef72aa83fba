"""The names nearest a name that is not there, for an error to suggest (pure).

``explain`` of a pod the snapshot does not hold says which pods it may have meant: a name
copied with a typo, from another namespace, or cut in its middle by some other tool
(``ads/ads-s…m96v-557bm``). The comparison is :func:`difflib.get_close_matches`, whose cost
grows with the number of names times the square of their length; so that a typo costs the
same on a 150,000-pod cluster as on a small one, only :data:`SHORTLIST` names are compared in
full: the pods of the namespace given (or of the namespaces nearest it) that share the longest
start or the longest end with the name, which a cut in its middle or a typo keeps.
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Iterable, Sequence
from typing import Final

from rebalancer.core.model import Snapshot

SUGGESTIONS: Final = 3
"""Names suggested at most."""
SHORTLIST: Final = 500
"""Names compared in full (:mod:`difflib`) per lookup, whatever the cluster's size."""
LONGEST: Final = 253
"""A name longer than any Kubernetes allows (253 characters) is compared by its first 253."""
CUTOFF: Final = 0.6
"""difflib's default: how alike (0-1) a name must be to be suggested."""


def _around(names: Sequence[str], word: str, count: int) -> list[str]:
    """The ``count`` names that would sort next to ``word``, half before it and the rest after:
    among them, those sharing the longest start with it. One pass, no sort of the whole."""
    below = heapq.nlargest(count // 2, (name for name in names if name < word))
    above = heapq.nsmallest(count - len(below), (name for name in names if name >= word))
    return below + above


def shortlist(word: str, choices: Iterable[str], limit: int = SHORTLIST) -> list[str]:
    """At most ``limit`` of ``choices``: all of them when there are no more, else half from
    those sharing the longest start with ``word`` and half from those sharing the longest end
    (:func:`_around` the names, and the names read backwards). Linear in the choices."""
    names = list(choices)
    if len(names) <= limit:
        return names
    word = word[:LONGEST]
    starts = _around(names, word, limit // 2)
    backwards = [name[::-1] for name in names]
    ends = [name[::-1] for name in _around(backwards, word[::-1], limit - limit // 2)]
    return list(dict.fromkeys(starts + ends))


def nearest(word: str, choices: Iterable[str], count: int = SUGGESTIONS) -> list[str]:
    """The ``count`` choices closest to ``word`` (difflib's ratio at least :data:`CUTOFF`),
    closest first, compared among its :func:`shortlist` only."""
    word = word[:LONGEST]
    short = {name[:LONGEST]: name for name in reversed(shortlist(word, choices))}
    return [short[n] for n in difflib.get_close_matches(word, short, n=count, cutoff=CUTOFF)]


def nearest_pods(snapshot: Snapshot, namespace: str, name: str) -> list[str]:
    """``namespace/name`` of the pods ``explain`` may have meant, nearest first: the same name
    in another namespace, then the closest names in the namespace (in the namespaces closest
    to it when it holds no pod)."""
    by_namespace: dict[str, list[str]] = {}
    for pod in snapshot.pods:
        by_namespace.setdefault(pod.namespace, []).append(pod.name)
    found = [f"{ns}/{name}" for ns, names in by_namespace.items() if name in names]
    spaces: Sequence[str] = (
        [namespace] if namespace in by_namespace else nearest(namespace, by_namespace)
    )
    keys = [f"{ns}/{n}" for ns in spaces for n in by_namespace[ns]]
    found += nearest(f"{namespace}/{name}", keys, SUGGESTIONS)
    return list(dict.fromkeys(found))[:SUGGESTIONS]
