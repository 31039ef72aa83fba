"""Seeded synthetic clusters left skewed by a scale-down, as snapshot files (kind: List).

    python -m bench.gen --nodes 1000 --pods 30000 --seed 1 -o /tmp/c1k.json

Nodes spread over zones with capacity; Deployments and StatefulSets with realistic label sets
and a mix of spread constraints (zone only, zone + hostname, soft only, minDomains,
matchLabelKeys with pod-template-hash); PDBs, PriorityClasses, DaemonSet pods on every node
and a few bare pods. Each workload is first scaled up evenly, then scaled down the way a
ReplicaSet picks victims when one zone was cordoned during the scale-up: the survivors bunch.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

SIZES = {"small": (100, 3_000), "medium": (1_000, 30_000), "large": (5_000, 150_000)}
ZONE_KEY = "topology.kubernetes.io/zone"
HOST_KEY = "kubernetes.io/hostname"
CLASSES = [("batch-low", 1000, False), ("default-prio", 10000, True), ("prod-high", 100000, False)]
TEAMS = ["shop", "payments", "search", "identity", "media", "ads", "data", "ml"]
BASE_TS = 1_760_000_000


def ts(seconds: int) -> str:
    return dt.datetime.fromtimestamp(BASE_TS + seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Gen:
    rng: random.Random
    zones: list[str]

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    used: set[str] = field(default_factory=set)

    def suffix(self, n: int = 5) -> str:
        """A random name suffix like a controller's, never repeated within one cluster."""
        while True:
            text = "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))
            if text not in self.used:
                self.used.add(text)
                return text


def node_obj(g: Gen, i: int) -> dict[str, Any]:
    zone = g.zones[i % len(g.zones)]
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": g.uid(),
            "creationTimestamp": ts(i),
            "labels": {
                HOST_KEY: name,
                ZONE_KEY: zone,
                "topology.kubernetes.io/region": "eu-west-1",
                "node.kubernetes.io/instance-type": "m6i.4xlarge",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24",
            "providerID": f"aws:///{zone}/i-{i:017x}",
        },
        "status": {
            "allocatable": {
                "cpu": "15890m",
                "memory": "62Gi",
                "pods": "110",
                "ephemeral-storage": "95Gi",
            },
            "capacity": {
                "cpu": "16",
                "memory": "64Gi",
                "pods": "110",
                "ephemeral-storage": "100Gi",
            },
            "conditions": [
                {
                    "type": "MemoryPressure",
                    "status": "False",
                    "reason": "KubeletHasSufficientMemory",
                },
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                },
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.35.7",
                "containerRuntimeVersion": "containerd://2.1.4",
                "osImage": "Bottlerocket OS 1.40.0",
                "architecture": "amd64",
                "operatingSystem": "linux",
            },
            "addresses": [
                {"type": "InternalIP", "address": f"10.{i // 256 % 256}.{i % 256}.10"},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def constraints_for(kind: int, labels: dict[str, str]) -> list[dict[str, Any]]:
    sel = {"matchLabels": {"app.kubernetes.io/name": labels["app.kubernetes.io/name"]}}
    zone = {
        "maxSkew": 1,
        "topologyKey": ZONE_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": sel,
    }
    host = {
        "maxSkew": 2,
        "topologyKey": HOST_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": sel,
    }
    if kind == 0:
        return [zone]
    if kind == 1:
        return [zone, host]
    if kind == 2:
        return [
            {**zone, "whenUnsatisfiable": "ScheduleAnyway"},
            {**host, "whenUnsatisfiable": "ScheduleAnyway"},
        ]
    if kind == 3:
        return [{**zone, "minDomains": 3}]
    if kind == 4:
        return [{**zone, "matchLabelKeys": ["pod-template-hash"]}]
    return []


def pod_obj(
    g: Gen,
    *,
    namespace: str,
    name: str,
    labels: dict[str, str],
    node: str,
    owner: tuple[str, str, str, str] | None,
    constraints: list[dict[str, Any]],
    cpu: str,
    memory: str,
    priority_class: str | None,
    created: int,
    image: str,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": g.uid(),
        "resourceVersion": str(g.rng.randrange(10**6, 10**8)),
        "creationTimestamp": ts(created),
        "labels": labels,
        "annotations": {
            "kubectl.kubernetes.io/restartedAt": ts(created - 60),
            "prometheus.io/scrape": "true",
        },
    }
    if owner is not None:
        api, kind, oname, ouid = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": api,
                "kind": kind,
                "name": oname,
                "uid": ouid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    container = {
        "name": "main",
        "image": image,
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {"name": "LOG_LEVEL", "value": "info"},
        ],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
        },
        "volumeMounts": [
            {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            }
        ],
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    }
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "volumes": [
            {
                "name": "kube-api-access",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
                    ],
                },
            }
        ],
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if constraints:
        spec["topologySpreadConstraints"] = constraints
    if priority_class:
        spec["priorityClassName"] = priority_class
    status = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(created)},
            {"type": "Initialized", "status": "True", "lastTransitionTime": ts(created + 1)},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": ts(created + 5)},
            {"type": "Ready", "status": "True", "lastTransitionTime": ts(created + 5)},
        ],
        "hostIP": "10.0.0.10",
        "podIP": f"100.64.{g.rng.randrange(256)}.{g.rng.randrange(256)}",
        "startTime": ts(created),
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "image": image,
                "imageID": f"{image}@sha256:{g.uid().replace('-', '')}",
                "containerID": f"containerd://{g.uid().replace('-', '')}",
                "state": {"running": {"startedAt": ts(created + 2)}},
            }
        ],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def generate(nodes: int, pods: int, seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    zone_count = 3 if nodes < 3000 else 6
    g = Gen(rng, [f"eu-west-1{chr(97 + z)}" for z in range(zone_count)])
    node_objs = [node_obj(g, i) for i in range(nodes)]
    yield from node_objs
    for name, value, default in CLASSES:
        yield {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "uid": g.uid()},
            "value": value,
            "globalDefault": default,
        }
    by_zone: dict[str, list[str]] = {z: [] for z in g.zones}
    for n in node_objs:
        by_zone[n["metadata"]["labels"][ZONE_KEY]].append(n["metadata"]["name"])
    made = 0
    # DaemonSets: two per cluster, a pod on every node.
    for ds in ("node-exporter", "log-shipper"):
        ds_uid = g.uid()
        for n in node_objs:
            node = n["metadata"]["name"]
            labels = {"app.kubernetes.io/name": ds, "controller-revision-hash": "6d4b7c9f8"}
            yield pod_obj(
                g,
                namespace="monitoring",
                name=f"{ds}-{g.suffix()}",
                labels=labels,
                node=node,
                owner=("apps/v1", "DaemonSet", ds, ds_uid),
                constraints=[],
                cpu="50m",
                memory="64Mi",
                priority_class="prod-high",
                created=100,
                image=f"registry.example/{ds}:1.8.0",
            )
            made += 1
    # Bare pods.
    for k in range(max(1, nodes // 100)):
        node = node_objs[rng.randrange(nodes)]["metadata"]["name"]
        yield pod_obj(
            g,
            namespace="default",
            name=f"debug-{k}",
            labels={"app.kubernetes.io/name": "debug"},
            node=node,
            owner=None,
            constraints=[],
            cpu="10m",
            memory="16Mi",
            priority_class=None,
            created=5000,
            image="registry.example/toolbox:1",
        )
        made += 1
    w = 0
    while made < pods:
        w += 1
        team = TEAMS[w % len(TEAMS)]
        app = f"{team}-svc-{w}"
        replicas = min(pods - made, rng.choice([2, 3, 3, 5, 6, 8, 10, 12, 20, 30, 50]))
        stateful = rng.random() < 0.05
        kind = rng.choices([0, 1, 2, 3, 4, 5], weights=[35, 20, 15, 5, 15, 10])[0]
        hash_ = g.suffix(9)
        labels = {
            "app.kubernetes.io/name": app,
            "app.kubernetes.io/part-of": team,
            "app.kubernetes.io/version": f"1.{w % 9}.0",
            "team": team,
        }
        if stateful:
            owner = ("apps/v1", "StatefulSet", app, g.uid())
            yield {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": app, "namespace": team, "uid": owner[3]},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
                },
            }
        else:
            labels["pod-template-hash"] = hash_
            rs = f"{app}-{hash_}"
            deploy_uid = g.uid()
            owner = ("apps/v1", "ReplicaSet", rs, g.uid())
            yield {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs,
                    "namespace": team,
                    "uid": owner[3],
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": app,
                            "uid": deploy_uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {
                        "matchLabels": {"app.kubernetes.io/name": app, "pod-template-hash": hash_}
                    },
                },
            }
        yield {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": app, "namespace": team, "uid": g.uid()},
            "spec": {
                "selector": {"app.kubernetes.io/name": app},
                "ports": [{"port": 80, "targetPort": 8080}],
            },
        }
        if rng.random() < 0.5:
            allowed = rng.choice([0, 1, 1, 1, 2])
            yield {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": app, "namespace": team, "uid": g.uid(), "generation": 1},
                "spec": {
                    "maxUnavailable": 1,
                    "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
                },
                "status": {
                    "observedGeneration": 1,
                    "disruptionsAllowed": allowed,
                    "currentHealthy": replicas,
                    "desiredHealthy": replicas - 1,
                    "expectedPods": replicas,
                },
            }
        # Scale-up while one zone was cordoned, then scale-down: survivors bunch up.
        cordoned = rng.randrange(len(g.zones))
        open_zones = [z for k, z in enumerate(g.zones) if k != cordoned]
        skewed = rng.random() < 0.3
        cpu = rng.choice(["50m", "100m", "250m"])
        for r in range(replicas):
            zone = open_zones[r % len(open_zones)] if skewed else g.zones[r % len(g.zones)]
            node = rng.choice(by_zone[zone])
            name = f"{app}-{r}" if stateful else f"{app}-{hash_}-{g.suffix()}"
            pclass = rng.choice(["batch-low", None, "prod-high"])
            yield pod_obj(
                g,
                namespace=team,
                name=name,
                labels=dict(labels),
                node=node,
                owner=owner,
                constraints=constraints_for(kind, labels),
                cpu=cpu,
                memory="128Mi",
                priority_class=pclass,
                created=10_000 + w * 10 + r,
                image=f"registry.example/{team}/{app}:1.{w % 9}.0",
            )
            made += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), help="preset: small, medium, large")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", required=True, help="snapshot file (.json or .yaml)")
    args = ap.parse_args(argv)
    nodes, pods = SIZES[args.size] if args.size else (args.nodes, args.pods)
    items = list(generate(nodes, pods, args.seed))
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    out = Path(args.output)
    if out.suffix in (".yaml", ".yml"):
        out.write_text(yaml.safe_dump(doc, sort_keys=False))
    else:
        out.write_bytes(orjson.dumps(doc))
    pod_count = sum(1 for i in items if i["kind"] == "Pod")
    size_mb = out.stat().st_size / 1e6
    print(f"wrote {out}: {nodes} nodes, {pod_count} pods, {size_mb:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
