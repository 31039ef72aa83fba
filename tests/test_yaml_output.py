"""``-o yaml`` reads back as the very strings of the plan, as ``-o json`` does, whatever a name
holds: format characters (U+202E, U+200B, tags), control characters, line and paragraph
separators, lone surrogates.

PyYAML wrote a format character raw, in a plain scalar, and the command's last guard turned it
into the six characters ``\\u202e``, which YAML reads as text: a name that was one invisible
character came back as six visible ones. The oracle is the input itself (and ``-o json`` of the
same plan): the output, as the command writes it, loaded by ``yaml.safe_load``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import unicodedata
from collections.abc import Callable

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.cli.common import write
from rebalancer.cli.printable import yaml_text
from rebalancer.cli.render import render_plan
from rebalancer.core.plan import Eviction, Plan, Skip, SkipCode, SkipReason

names = st.text(
    st.characters(
        categories=["Cf", "Zl", "Zp", "Cc", "Cs", "Co", "Zs", "Ll", "Lu", "Nd", "Po", "So"],
        codec=None,
    ),
    min_size=1,
    max_size=12,
)
"""Text of every category that printed wrong or could: format, line and paragraph separators,
controls, surrogates, private use, with ordinary letters and signs between them."""


def shown(produce: Callable[[], str]) -> str:
    """What the command writes to stdout for ``produce()``'s text (its last guard included)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        write(produce())
    return buf.getvalue()


def _plan(namespace: str, name: str, node: str, workload: str, reason: str) -> Plan:
    eviction = Eviction(
        namespace=namespace,
        name=name,
        uid=f"{name}-uid",
        node=node,
        priority=0,
        reason=reason,
        wave=1,
        workload=workload,
        domain=node,
        topology_key="topology.kubernetes.io/zone",
        target_node=node,
        target_domain=name,
        grace_period_seconds=None,
    )
    skip = Skip(namespace, workload, "u2", node, SkipReason(SkipCode.PDB, reason))
    return Plan(evictions=(eviction,), skipped=(skip,), violations=(), after=(), lower_bound=1)


@settings(max_examples=300, deadline=None)
@given(namespace=names, name=names, node=names, workload=names, reason=names)
def test_plan_yaml_reads_back_the_names_exactly(
    namespace: str, name: str, node: str, workload: str, reason: str
) -> None:
    """``plan -o yaml`` as written to stdout: loaded, every name and reason is the plan's, as
    in ``-o json``."""
    plan = _plan(namespace, name, node, workload, reason)
    data = yaml.safe_load(shown(lambda: render_plan(plan, "yaml")))
    eviction = data["evictions"][0]
    assert (eviction["namespace"], eviction["name"], eviction["node"]) == (namespace, name, node)
    assert (eviction["workload"], eviction["reason"], eviction["targetDomain"]) == (
        workload,
        reason,
        name,
    )
    assert (data["skipped"][0]["name"], data["skipped"][0]["reason"]) == (
        workload,
        f"pdb: {reason}",
    )
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in namespace + name + node + workload + reason):
        assert data == json.loads(shown(lambda: render_plan(plan, "json")))


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        names | st.integers() | st.booleans() | st.none(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
        max_leaves=12,
    )
)
def test_any_data_reads_back_the_same(data: object) -> None:
    """Any document of such strings, as keys and values, nested: loaded, it is the same."""
    assert yaml.safe_load(shown(lambda: yaml_text(data))) == data


def test_every_format_character_alone_reads_back() -> None:
    """Each Cf character, and each of C0, C1, U+2028 and U+2029, as a whole name (the case
    found: a name that is only U+202E)."""
    chars = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    chars += [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]]
    document = {f"k{i}": c for i, c in enumerate(chars)}
    text = shown(lambda: yaml_text(document))
    assert yaml.safe_load(text) == document
    assert f'k{chars.index(chr(0))}: "\\0"' in text.splitlines()
    assert f'k{chars.index(chr(0x202E))}: "\\u202e"' in text.splitlines()
