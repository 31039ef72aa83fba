"""Typed indices of the planning core: which number names a pod or a view, and
which string a domain.

The analysis (:func:`rebalancer.core.spread.analyze`) numbers the snapshot's pods and its views
once; every later structure refers to them by these numbers. The types keep a pod's number from
being passed where a view's is expected. They are for the type checker only: the analysis casts
its maps once, and an id is a plain ``int`` at run time.
"""

from __future__ import annotations

from typing import NamedTuple, NewType, TypeAlias

PodId = NewType("PodId", int)
"""A pod: its index in the snapshot's pods (``Analysis.pods``)."""

ViewId = NewType("ViewId", int)
"""A view: its index in the analysis's views (``Analysis.views``)."""

Domain: TypeAlias = str
"""A domain of a view: a value of its topology key (``topology.kubernetes.io/zone=eu-1a``
is domain ``eu-1a`` of a zone view). The value itself, not a number: it is read from node
labels, compared and printed as it is, so the name documents it and the type stays ``str``."""


class ViewKey(NamedTuple):
    """What tells a run's views apart from plan to plan (and in the metrics): a view's
    namespace and the fields of its constraint that name it. Made from a constraint by
    :attr:`rebalancer.core.spread.ViewSpec.key`, from a report by
    :attr:`rebalancer.core.plan.ViewReport.key`."""

    namespace: str
    topology_key: str
    selector: str  # as rebalancer.core.selectors.selector_string writes it
    max_skew: int
    when_unsatisfiable: str
