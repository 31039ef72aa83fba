"""Reading a policy file: the I/O and the YAML around :mod:`rebalancer.core.policy`, which stays
pure (it validates a decoded document).

The YAML is read with a strict loader: only ``true``/``false`` are booleans (``yes``, ``on`` and
``no`` stay strings, so ``nodeFit: yes`` is reported instead of silently accepted) and a key
written twice in one mapping is an error. Aliases are bounded and the size is capped
(:mod:`rebalancer.cluster.inputs`); ``-`` reads standard input.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from rebalancer.cluster.inputs import DEFAULT_MAX_POLICY_BYTES, read_bytes, yaml_documents
from rebalancer.core.api import InputError, Policy, policy_from_document

__all__ = [
    "load_policy",
    "load_policy_file",
    "policy_document_from_text",
    "read_policy_document",
]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans (only true/false) that records duplicate keys."""

    duplicates: list[str]

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self.duplicates = []


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, str) and key in seen:
            mark = key_node.start_mark
            loader.duplicates.append(
                f"line {mark.line + 1}, column {mark.column + 1}: duplicate key {key[:80]}"
            )
        if isinstance(key, str):
            seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def load_policy(text: str, source: str) -> Policy:
    """Parse and validate a policy document; raise :class:`InputError` listing every problem.

    An empty document (or one holding only comments) is the default :class:`Policy`. Otherwise
    ``apiVersion: rebalancer/v1alpha1`` and ``kind: RebalancerPolicy`` are required.
    """
    documents, loader = yaml_documents(text, source, _StrictLoader)
    if len(documents) > 1:
        raise InputError(source, ["the file must hold one YAML document, found several"])
    document = documents[0] if documents else None
    return policy_from_document(document, source, loader.duplicates)


def _read_text(path: str | os.PathLike[str], max_bytes: int) -> tuple[str, str]:
    """The UTF-8 text at ``path`` (``-`` is standard input) and the name to report it by."""
    source = os.fspath(path)
    data = read_bytes(path, max_bytes)
    if source == "-":
        source = "standard input"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(source, [f"not UTF-8 text: {exc.reason} at byte {exc.start}"]) from exc
    return text, source


def load_policy_file(
    path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_POLICY_BYTES
) -> Policy:
    """Read and validate the policy at ``path`` (``-`` is standard input); raise
    :class:`InputError` naming the file."""
    text, source = _read_text(path, max_bytes)
    return load_policy(text, source)


def read_policy_document(
    path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_POLICY_BYTES
) -> tuple[object, str]:
    """The one YAML document at ``path`` (``-`` is standard input), read as strictly as a
    policy (YAML 1.2 booleans, duplicate keys refused), and the name to report it by; raise
    :class:`InputError` when it is not one readable document. For other tools' policies
    (``rebalancer policy import``)."""
    text, source = _read_text(path, max_bytes)
    return policy_document_from_text(text, source), source


def policy_document_from_text(text: str, source: str) -> object:
    """The one YAML document in ``text``, read as :func:`read_policy_document` reads a file
    (a policy held in a ConfigMap's data, for instance)."""
    documents, loader = yaml_documents(text, source, _StrictLoader)
    if loader.duplicates:
        raise InputError(source, loader.duplicates)
    if len(documents) != 1:
        found = "several" if documents else "none"
        raise InputError(source, [f"the file must hold one YAML document, found {found}"])
    return documents[0]
