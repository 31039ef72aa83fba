"""Which namespaces a policy rebalances: the one rule the planner, ``explain``, steering and a
run's limits all ask (pure).

A namespace is in scope when ``namespaces.include`` lists it (or is empty), ``namespaces.exclude``
does not, and, when the policy sets ``namespaceLabelSelector``, the namespace's labels match it.
The labels come from the snapshot's Namespace objects; a namespace the snapshot has no object
for matches no selector (as in the descheduler, whose namespace index has no entry for it).
A selector with no Namespace objects at all is an error, never "every namespace": a snapshot
written before namespaces were kept, or by ``kubectl get`` without ``namespaces``, cannot say
which namespaces are meant. Worked example: ``namespaceLabelSelector: {matchLabels: {rebalance:
enabled}}`` over namespaces ``shop`` (``rebalance: enabled``) and ``blog`` (no label) keeps
``shop`` and leaves ``blog`` out, whatever the pods' own labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.core.errors import InputError
from rebalancer.core.model import LabelSelector, Snapshot
from rebalancer.core.policy import Policy
from rebalancer.core.selectors import selector_matcher

__all__ = ["NamespaceScope"]


@dataclass(frozen=True, slots=True)
class NamespaceScope:
    """The policy's namespace rules, with the namespaces its label selector matches."""

    include: frozenset[str]
    exclude: frozenset[str]
    selector: LabelSelector | None
    selected: frozenset[str]
    """The namespaces whose labels match ``selector`` (empty when there is none)."""
    known: frozenset[str]
    """Every namespace the snapshot has an object for."""

    @classmethod
    def of(cls, policy: Policy, snapshot: Snapshot) -> NamespaceScope:
        """The scope of ``policy`` over ``snapshot``'s namespaces; raises :class:`InputError`
        when the policy selects namespaces by label and the snapshot holds none."""
        selector = policy.namespace_label_selector
        if selector is not None and not snapshot.namespaces:
            raise InputError(
                "policy",
                [
                    "namespaceLabelSelector: set, but the snapshot holds no Namespace objects, "
                    "so no namespace's labels are known (rebalancer snapshot writes them; with "
                    "kubectl, add namespaces: kubectl get namespaces,nodes,pods,... -A -o yaml)"
                ],
            )
        selected: frozenset[str] = frozenset()
        if selector is not None:
            matches = selector_matcher(selector)
            selected = frozenset(n.name for n in snapshot.namespaces if matches(n.labels))
        return cls(
            include=frozenset(policy.namespaces_include),
            exclude=frozenset(policy.namespaces_exclude),
            selector=selector,
            selected=selected,
            known=frozenset(n.name for n in snapshot.namespaces),
        )

    def why_not(self, namespace: str) -> str | None:
        """Why ``namespace`` is out of scope, or None when it is in."""
        if self.include and namespace not in self.include:
            return f"namespace {namespace} is not included"
        if namespace in self.exclude:
            return f"namespace {namespace} is excluded"
        if self.selector is not None and namespace not in self.selected:
            if namespace not in self.known:
                return (
                    f"namespace {namespace} has no Namespace object to match namespaceLabelSelector"
                )
            return f"namespace {namespace} does not match the policy's namespaceLabelSelector"
        return None

    def __contains__(self, namespace: object) -> bool:
        return isinstance(namespace, str) and self.why_not(namespace) is None
