"""A compact YAML language for planner cases: nodes by zone, workloads by placement.

A case names zones with their node counts, constraint templates, workloads placed as
``{node: count}``, extra pods, PDBs, PriorityClasses, volumes and a policy (the real policy
YAML contract), and what the plan must contain. See tests/data/planner_cases.yaml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rebalancer.core.model import (
    HARD,
    HONOR,
    HOSTNAME_KEY,
    IF_HEALTHY_BUDGET,
    IGNORE,
    ZONE_KEY,
    Controller,
    Deployment,
    LabelSelector,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    Requirement,
    Snapshot,
    SpreadConstraint,
    Taint,
    Toleration,
)

KEY_ALIASES = {"zone": ZONE_KEY, "hostname": HOSTNAME_KEY}
GIB = 1024**3

# The keys each part of a case may hold: anything else is a typo that would silently test
# nothing, so check_case reports it.
_SELECTOR = frozenset({"matchLabels", "matchExpressions"})
_EXPRESSION = frozenset({"key", "operator", "values"})
_TOLERATION = frozenset({"key", "operator", "value", "effect"})
_TERM = frozenset({"matchExpressions", "matchFields"})
_POD_FIELDS = frozenset(
    {
        "app",
        "labels",
        "namespace",
        "constraints",
        "owner",
        "node",
        "created",
        "phase",
        "terminating",
        "priority",
        "priorityClassName",
        "nodeSelector",
        "affinity",
        "tolerations",
        "cpu",
        "pvcs",
        "emptyDir",
        "mirror",
        "ready",
        "disruptionTarget",
        "resourceClaims",
        "evictAnnotation",
        "preferNoEviction",
    }
)
CASE_KEYS: Final = {
    "case": frozenset(
        {
            "name",
            "zones",
            "nodeDefaults",
            "nodes",
            "constraints",
            "workloads",
            "pods",
            "pdbs",
            "priorityClasses",
            "pvs",
            "pvcs",
            "controllers",
            "deployments",
            "policy",
            "expect",
        }
    ),
    "node": frozenset(
        {"name", "zone", "labels", "cpu", "pods", "taints", "unschedulable", "ready"}
    ),
    "constraint": frozenset(
        {
            "topologyKey",
            "maxSkew",
            "whenUnsatisfiable",
            "minDomains",
            "nodeAffinityPolicy",
            "nodeTaintsPolicy",
            "labelSelector",
            "matchLabelKeys",
        }
    ),
    "workload": _POD_FIELDS - {"node"} | {"place"},
    "pod": _POD_FIELDS | {"name"},
    "pdb": frozenset(
        {
            "name",
            "namespace",
            "app",
            "selector",
            "allowed",
            "currentHealthy",
            "desiredHealthy",
            "generation",
            "observedGeneration",
            "unhealthyPodEvictionPolicy",
        }
    ),
    "priorityClass": frozenset({"name", "value", "globalDefault"}),
    "pv": frozenset({"name", "affinity"}),
    "pvc": frozenset({"name", "namespace", "volume"}),
    "controller": frozenset(
        {
            "kind",
            "name",
            "namespace",
            "selector",
            "owner",
            "revision",
            "currentRevision",
            "updateRevision",
        }
    ),
    "deployment": frozenset(
        {
            "name",
            "namespace",
            "revision",
            "generation",
            "observedGeneration",
            "paused",
            "progressing",
        }
    ),
    "expect": frozenset(
        {
            "evictions",
            "evicted",
            "notEvicted",
            "skipped",
            "within",
            "after",
            "lowerBound",
            "minimal",
            "waves",
            "waveSizes",
            "grace",
            "reasonContains",
            "priorities",
        }
    ),
}


def _unknown(value: object, allowed: frozenset[str], where: str) -> list[str]:
    if not isinstance(value, Mapping):
        return [f"{where}: must be a mapping, got {value!r}"]
    return [f"{where}.{key}: unknown key" for key in value if key not in allowed]


def _selector_problems(value: object, where: str) -> list[str]:
    if value is None:
        return []
    found = _unknown(value, _SELECTOR, where)
    if isinstance(value, Mapping):
        for i, expr in enumerate(value.get("matchExpressions", [])):
            found += _unknown(expr, _EXPRESSION, f"{where}.matchExpressions[{i}]")
    return found


def _pod_problems(spec: Mapping[str, Any], where: str) -> list[str]:
    found: list[str] = []
    for i, toleration in enumerate(spec.get("tolerations", [])):
        found += _unknown(toleration, _TOLERATION, f"{where}.tolerations[{i}]")
    for i, term in enumerate(spec.get("affinity") or []):
        found += _unknown(term, _TERM, f"{where}.affinity[{i}]")
        for key in ("matchExpressions", "matchFields"):
            for j, expr in enumerate(term.get(key, []) if isinstance(term, Mapping) else []):
                found += _unknown(expr, _EXPRESSION, f"{where}.affinity[{i}].{key}[{j}]")
    return found


def check_case(case: Mapping[str, Any]) -> list[str]:
    """Every key of ``case`` that the DSL does not read, at any depth it defines."""
    name = case.get("name", "?")
    found = _unknown(case, CASE_KEYS["case"], name)
    found += _unknown(case.get("nodeDefaults", {}), CASE_KEYS["node"], f"{name}.nodeDefaults")
    for template, spec in (case.get("constraints") or {}).items():
        where = f"{name}.constraints.{template}"
        found += _unknown(spec, CASE_KEYS["constraint"], where)
        found += _selector_problems(spec.get("labelSelector"), f"{where}.labelSelector")
    sections = (
        ("nodes", "node"),
        ("workloads", "workload"),
        ("pods", "pod"),
        ("pdbs", "pdb"),
        ("priorityClasses", "priorityClass"),
        ("pvs", "pv"),
        ("pvcs", "pvc"),
        ("controllers", "controller"),
        ("deployments", "deployment"),
    )
    for section, kind in sections:
        for i, item in enumerate(case.get(section, [])):
            where = f"{name}.{section}[{i}]"
            found += _unknown(item, CASE_KEYS[kind], where)
            if kind in ("workload", "pod"):
                found += _pod_problems(item, where)
            if kind in ("pdb", "controller"):
                found += _selector_problems(item.get("selector"), f"{where}.selector")
            if kind == "pv":
                found += _pod_problems({"affinity": item.get("affinity")}, where)
    found += _unknown(case.get("expect"), CASE_KEYS["expect"], f"{name}.expect")
    return found


def _taint(text: str) -> Taint:
    kv, effect = text.rsplit(":", 1)
    key, _, value = kv.partition("=")
    return Taint(key, value, effect)


def build_nodes(case: Mapping[str, Any]) -> list[Node]:
    nodes: list[Node] = []
    defaults = case.get("nodeDefaults", {})
    for zone, count in (case.get("zones") or {}).items():
        for k in range(1, count + 1):
            nodes.append(_node({"name": f"{zone}{k}", "zone": zone, **defaults}))
    for spec in case.get("nodes", []):
        nodes.append(_node({**defaults, **spec}))
    return nodes


def _node(spec: Mapping[str, Any]) -> Node:
    labels = {HOSTNAME_KEY: spec["name"]}
    if spec.get("zone") is not None:
        labels[ZONE_KEY] = spec["zone"]
    labels.update(spec.get("labels", {}))
    return Node(
        name=spec["name"],
        labels=labels,
        allocatable={
            "cpu": spec.get("cpu", 64_000),
            "memory": 256 * GIB,
            "pods": spec.get("pods", 110),
        },
        taints=tuple(_taint(t) for t in spec.get("taints", [])),
        unschedulable=spec.get("unschedulable", False),
        ready=spec.get("ready", True),
    )


def _selector(spec: Mapping[str, Any] | None) -> LabelSelector | None:
    if spec is None:
        return None
    return LabelSelector(
        tuple(sorted(spec.get("matchLabels", {}).items())),
        tuple(
            Requirement(e["key"], e["operator"], tuple(e.get("values", ())))
            for e in spec.get("matchExpressions", [])
        ),
    )


def _constraint(spec: Mapping[str, Any], app: str, labels: Mapping[str, str]) -> SpreadConstraint:
    selector = _selector(spec.get("labelSelector", {"matchLabels": {"app": app}}))
    keys = tuple(spec.get("matchLabelKeys", ()))
    if selector is not None:
        extra = tuple(Requirement(k, "In", (labels[k],)) for k in keys if k in labels)
        selector = LabelSelector(selector.match_labels, selector.match_expressions + extra)
    return SpreadConstraint(
        max_skew=spec.get("maxSkew", 1),
        topology_key=KEY_ALIASES.get(spec["topologyKey"], spec["topologyKey"]),
        when_unsatisfiable=spec.get("whenUnsatisfiable", HARD),
        selector=selector,
        min_domains=spec.get("minDomains", 1),
        node_affinity_policy=spec.get("nodeAffinityPolicy", HONOR),
        node_taints_policy=spec.get("nodeTaintsPolicy", IGNORE),
        match_label_keys=keys,
    )


def _affinity(spec: list[Mapping[str, Any]] | None) -> NodeSelector | None:
    if spec is None:
        return None
    terms = []
    for term in spec:
        exprs = tuple(
            NodeSelectorRequirement(
                KEY_ALIASES.get(e["key"], e["key"]), e["operator"], tuple(e.get("values", ()))
            )
            for e in term.get("matchExpressions", [])
        )
        fields = tuple(
            NodeSelectorRequirement(e["key"], e["operator"], tuple(e.get("values", ())))
            for e in term.get("matchFields", [])
        )
        terms.append(NodeSelectorTerm(exprs, fields))
    return NodeSelector(tuple(terms))


def _owner(text: str | None) -> OwnerRef | None:
    if text is None:
        return None
    kind, name = text.split("/", 1)
    return OwnerRef(kind, name, f"uid-{name}")


def _pod(spec: Mapping[str, Any], templates: Mapping[str, Any], serial: int) -> Pod:
    app = spec.get("app", "web")
    labels = {"app": app, **spec.get("labels", {})}
    namespace = spec.get("namespace", "default")
    constraints = tuple(
        _constraint(templates[name], app, labels) for name in spec.get("constraints", [])
    )
    owner = _owner(spec.get("owner", f"ReplicaSet/{app}-rs"))
    return Pod(
        namespace=namespace,
        name=spec["name"],
        uid=f"uid-{namespace}-{spec['name']}",
        labels=labels,
        node_name=spec.get("node"),
        created=float(spec.get("created", 1000 + serial)),
        phase=spec.get("phase", "Running" if spec.get("node") else "Pending"),
        terminating=spec.get("terminating", False),
        priority=spec.get("priority"),
        priority_class_name=spec.get("priorityClassName"),
        owner=owner,
        node_selector={KEY_ALIASES.get(k, k): v for k, v in spec.get("nodeSelector", {}).items()},
        required_affinity=_affinity(spec.get("affinity")),
        tolerations=tuple(
            Toleration(
                t.get("key", ""),
                t.get("operator", "Equal"),
                t.get("value", ""),
                t.get("effect", ""),
            )
            for t in spec.get("tolerations", [])
        ),
        constraints=constraints,
        requests={"cpu": spec.get("cpu", 100)},
        pvc_names=tuple(spec.get("pvcs", ())),
        local_storage=spec.get("emptyDir", False),
        mirror=spec.get("mirror", False),
        ready=spec.get("ready", True),
        disruption_target=spec.get("disruptionTarget", False),
        resource_claims=tuple(spec.get("resourceClaims", ())),
        evict_requested=spec.get("evictAnnotation", False),
        prefer_no_eviction=spec.get("preferNoEviction", False),
    )


def build_pods(case: Mapping[str, Any]) -> list[Pod]:
    templates = case.get("constraints", {})
    specs: list[dict[str, Any]] = []
    for wl in case.get("workloads", []):
        app = wl["app"]
        extra = {k: v for k, v in wl.items() if k not in ("place", "app")}
        for node_name, count in wl["place"].items():
            for k in range(count):
                specs.append(
                    {"name": f"{app}-{node_name}-{k}", "node": node_name, "app": app, **extra}
                )
    specs.extend(case.get("pods", []))
    return [_pod(s, templates, n) for n, s in enumerate(specs)]


def build_snapshot(case: Mapping[str, Any]) -> Snapshot:
    pdbs = tuple(
        PodDisruptionBudget(
            namespace=p.get("namespace", "default"),
            name=p["name"],
            selector=_selector(p.get("selector", {"matchLabels": {"app": p.get("app", "web")}})),
            disruptions_allowed=p["allowed"],
            current_healthy=p.get("currentHealthy", 0),
            desired_healthy=p.get("desiredHealthy", 0),
            generation=p.get("generation", 1),
            observed_generation=p.get("observedGeneration", p.get("generation", 1)),
            unhealthy_pod_eviction_policy=p.get("unhealthyPodEvictionPolicy", IF_HEALTHY_BUDGET),
        )
        for p in case.get("pdbs", [])
    )
    classes = tuple(
        PriorityClass(c["name"], c["value"], c.get("globalDefault", False))
        for c in case.get("priorityClasses", [])
    )
    pvs = tuple(
        PersistentVolume(v["name"], _affinity(v.get("affinity"))) for v in case.get("pvs", [])
    )
    pvcs = tuple(
        PersistentVolumeClaim(c.get("namespace", "default"), c["name"], c.get("volume"))
        for c in case.get("pvcs", [])
    )
    controllers = tuple(
        Controller(
            kind=c["kind"],
            namespace=c.get("namespace", "default"),
            name=c["name"],
            selector=_selector(c.get("selector")),
            owner=_owner(c.get("owner")),
            revision=c.get("revision"),
            current_revision=c.get("currentRevision", ""),
            update_revision=c.get("updateRevision", ""),
        )
        for c in case.get("controllers", [])
    )
    deployments = tuple(
        Deployment(
            namespace=d.get("namespace", "default"),
            name=d["name"],
            revision=d.get("revision"),
            generation=d.get("generation", 1),
            observed_generation=d.get("observedGeneration", d.get("generation", 1)),
            paused=d.get("paused", False),
            progressing_status=d.get("progressing", ["", ""])[0],
            progressing_reason=d.get("progressing", ["", ""])[1],
        )
        for d in case.get("deployments", [])
    )
    return Snapshot(
        nodes=tuple(build_nodes(case)),
        pods=tuple(build_pods(case)),
        pdbs=pdbs,
        priority_classes=classes,
        pvcs=pvcs,
        pvs=pvs,
        controllers=controllers,
        deployments=deployments,
    )
