"""Side by side with the upstream Go descheduler on the e2e control plane (127.0.0.1, kwok).

    bash bench/descheduler/build.sh          # once: build + cache the descheduler (slow cold)
    python -m bench.compare [--scenarios 4-2-0-0,6-1-0,...] [--out bench/results/compare.json]

Each scenario gets its own kwok nodes (2 per zone, labelled ``bench.rebalancer/scenario``) and,
per tool, a fresh namespace. The skew is created deterministically: the pods are created with
``spec.nodeName`` (no scheduler), then a ReplicaSet with the same selector adopts them, so an
evicted pod is replaced by the ReplicaSet and placed by the real kube-scheduler. Pods select the
scenario's nodes with a nodeSelector, so only those nodes' domains count (nodeAffinityPolicy
Honor, the default, for both tools).

Before pass 1 the decision alone is timed: ``rebalancer plan -n NS`` / the descheduler with
``--dry-run`` ("dry-run" column). One pass:
* rebalancer: ``rebalancer run -n NS`` (one run: plan, evict wave by wave, re-plan between
  waves; its wall time includes waiting for each wave's replacements);
* descheduler: ``descheduler --descheduling-interval 0`` with a policy that enables only
  RemovePodsViolatingTopologySpreadConstraint (constraints [DoNotSchedule], namespaces include
  NS) and a DefaultEvictor like rebalancer's defaults (nodeFit, PVC pods protected, the default
  protections for local storage, DaemonSet, system-critical and failed bare pods).

After each pass the script waits until the ReplicaSet's pods settled (none terminating, all
bound and Running), then counts: evictions (pods gone), evictions whose replacement landed back
in the evicted pod's own domain (same domain for every topology key of the constraints; counted
per domain as min(evicted from it, new pods in it)), and whether every constraint is within
maxSkew. Passes repeat until the spread holds, a pass evicts nothing, or 5 passes ran.

Figures are printed, never asserted. The machine is shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.plan import RESULTS, machine, rebalancer_bin, run_child

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "compare"
BUILD_SH = ROOT / "bench" / "descheduler" / "build.sh"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
SCENARIO_LABEL = "bench.rebalancer/scenario"
MAX_PASSES = 5


@dataclass(frozen=True)
class Scenario:
    slug: str
    #: per zone, per node: pods pinned there at the start
    shape: tuple[tuple[int, ...], ...]
    max_skew: int = 1
    keys: tuple[str, ...] = (ZONE,)

    @property
    def total(self) -> int:
        return sum(sum(z) for z in self.shape)

    def describe(self) -> str:
        zones = [sum(z) for z in self.shape]
        text = f"zones {zones} maxSkew {self.max_skew}"
        if HOST in self.keys:
            text += f" + hostname {[n for z in self.shape for n in z]}"
        return text


def z(*counts: int) -> tuple[tuple[int, ...], ...]:
    """Zone counts, all pods on the zone's first node (each zone has 2 nodes)."""
    return tuple((c, 0) for c in counts)


SCENARIOS = {
    s.slug: s
    for s in (
        Scenario("4-2-0-0", z(4, 2, 0, 0)),
        Scenario("6-1-0", z(6, 1, 0)),
        Scenario("3-9-0-9", z(3, 9, 0, 9), max_skew=3),
        Scenario("8-7-0", z(8, 7, 0)),
        Scenario("zone-host", ((3, 1), (1, 1), (0, 0)), keys=(ZONE, HOST)),
    )
}


def descheduler_policy(namespace: str | None) -> dict[str, Any]:
    """Only RemovePodsViolatingTopologySpreadConstraint (DoNotSchedule), rebalancer-like evictor."""
    plugin_args: dict[str, Any] = {"constraints": ["DoNotSchedule"]}
    if namespace:
        plugin_args["namespaces"] = {"include": [namespace]}
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "topology-spread",
                "pluginConfig": [
                    {
                        "name": "DefaultEvictor",
                        "args": {
                            "nodeFit": True,
                            "podProtections": {"extraEnabled": ["PodsWithPVC"]},
                        },
                    },
                    {
                        "name": "RemovePodsViolatingTopologySpreadConstraint",
                        "args": plugin_args,
                    },
                ],
                "plugins": {
                    "balance": {"enabled": ["RemovePodsViolatingTopologySpreadConstraint"]},
                },
            }
        ],
    }


class Bench:
    def __init__(self, cp: Any, descheduler: Path) -> None:
        self.cp = cp
        self.descheduler = descheduler
        self.node_domains: dict[str, dict[str, dict[str, str]]] = {}

    # ---- setup ---------------------------------------------------------------------
    def nodes(self, sc: Scenario) -> dict[str, dict[str, str]]:
        """Create the scenario's nodes once: name -> {key: domain}."""
        if sc.slug in self.node_domains:
            return self.node_domains[sc.slug]
        manifests, domains = [], {}
        for zi, zone_nodes in enumerate(sc.shape):
            zone = f"{sc.slug}-z{zi}"
            for ni in range(len(zone_nodes)):
                name = f"{sc.slug}-z{zi}-n{ni}"
                manifests.append(self.cp.node_manifest(name, zone, {SCENARIO_LABEL: sc.slug}))
                domains[name] = {ZONE: zone, HOST: name}
        self.cp.apply(manifests)
        self.cp.wait_for(
            f"{sc.slug} nodes Ready",
            lambda: all(self.cp.node_ready(n) for n in domains) or None,
            timeout=120,
        )
        self.node_domains[sc.slug] = domains
        return domains

    def pod_spec(self, sc: Scenario) -> dict[str, Any]:
        return {
            "nodeSelector": {SCENARIO_LABEL: sc.slug},
            "terminationGracePeriodSeconds": 1,
            "topologySpreadConstraints": [
                {
                    "maxSkew": sc.max_skew,
                    "topologyKey": key,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": sc.slug}},
                }
                for key in sc.keys
            ],
            "containers": [
                {
                    "name": "app",
                    "image": "bench/app:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        }

    def setup(self, sc: Scenario, ns: str) -> None:
        node_names = sorted(self.nodes(sc))
        self.cp.kubectl("create", "namespace", ns)
        self.cp.wait_for(
            f"default ServiceAccount in {ns}",
            lambda: (
                self.cp.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0
                or None
            ),
            timeout=60,
        )
        pods, i = [], 0
        for zi, zone_nodes in enumerate(sc.shape):
            for ni, count in enumerate(zone_nodes):
                node = f"{sc.slug}-z{zi}-n{ni}"
                assert node in node_names
                for _ in range(count):
                    spec = self.pod_spec(sc) | {"nodeName": node}
                    pods.append(
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "metadata": {
                                "name": f"{sc.slug}-pinned-{i}",
                                "namespace": ns,
                                "labels": {"app": sc.slug},
                            },
                            "spec": spec,
                        }
                    )
                    i += 1
        self.cp.apply(pods)
        self.settle(sc, ns, owned=False)
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": sc.slug, "namespace": ns, "labels": {"app": sc.slug}},
            "spec": {
                "replicas": sc.total,
                "selector": {"matchLabels": {"app": sc.slug}},
                "template": {"metadata": {"labels": {"app": sc.slug}}, "spec": self.pod_spec(sc)},
            },
        }
        self.cp.apply(rs)
        self.settle(sc, ns, owned=True)

    # ---- observation -----------------------------------------------------------------
    def settle(self, sc: Scenario, ns: str, *, owned: bool, timeout: float = 180) -> list[Any]:
        """Wait until exactly total pods, none terminating, all bound + Running (+ owned)."""

        def probe() -> list[Any] | None:
            items: list[Any] = self.cp.pods(ns, f"app={sc.slug}")
            if any(p["metadata"].get("deletionTimestamp") for p in items):
                return None
            if len(items) != sc.total:
                return None
            for p in items:
                if not p["spec"].get("nodeName") or p["status"].get("phase") != "Running":
                    return None
                if owned and not any(
                    o.get("controller") for o in p["metadata"].get("ownerReferences") or ()
                ):
                    return None
            return items

        settled: list[Any] = self.cp.wait_for(
            f"{sc.slug} pods settled in {ns}", probe, timeout=timeout
        )
        return settled

    def domain_of(self, sc: Scenario, node: str) -> tuple[str, ...]:
        d = self.node_domains[sc.slug][node]
        return tuple(d[k] for k in sc.keys)

    def spread(self, sc: Scenario, pods: list[Any]) -> dict[str, Any]:
        domains = self.node_domains[sc.slug]
        out: dict[str, Any] = {"within": True, "skew": {}, "counts": {}}
        for key in sc.keys:
            counts = Counter({d[key]: 0 for d in domains.values()})
            for p in pods:
                counts[domains[p["spec"]["nodeName"]][key]] += 1
            skew = max(counts.values()) - min(counts.values())
            out["skew"][key] = skew
            out["counts"][key] = [counts[d] for d in sorted(counts)]
            out["within"] = out["within"] and skew <= sc.max_skew
        return out

    # ---- one pass of each tool -------------------------------------------------------
    def pass_cmd(self, tool: str, ns: str, log_stem: Path, *, dry: bool = False) -> list[str]:
        kc = str(self.cp.kubeconfig)
        if tool == "rebalancer":
            if dry:
                return [rebalancer_bin(), "plan", "-n", ns, "--kubeconfig", kc, "-o", "json"]
            return [rebalancer_bin(), "run", "-n", ns, "--kubeconfig", kc, "-o", "json"]
        policy = log_stem.with_suffix(".policy.json")
        policy.write_bytes(orjson.dumps(descheduler_policy(ns)))
        return [
            str(self.descheduler),
            "--kubeconfig",
            kc,
            "--policy-config-file",
            str(policy),
            "--descheduling-interval",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
            "--v",
            "3",
            *(["--dry-run"] if dry else []),
        ]

    def run(self, sc: Scenario, tool: str) -> dict[str, Any]:
        ns = f"b-{sc.slug}-{tool[:4]}-{os.getpid() % 10000}"
        self.setup(sc, ns)
        pods = self.settle(sc, ns, owned=True)
        start = self.spread(sc, pods)
        result: dict[str, Any] = {
            "scenario": sc.slug,
            "tool": tool,
            "shape": sc.describe(),
            "start": start,
            "passes": [],
        }
        # The decision alone, before pass 1: rebalancer plan / descheduler --dry-run.
        stem = OUT / f"{sc.slug}-{tool}-dry"
        with (
            stem.with_suffix(".out").open("wb") as out,
            stem.with_suffix(".err").open("wb") as err,
        ):
            wall, rss, rc = run_child(self.pass_cmd(tool, ns, stem, dry=True), out, err)
            result["dry_run"] = {"wall_s": round(wall, 3), "peak_rss_bytes": rss, "exit": rc}
        evictions = wasted = 0
        for k in range(1, MAX_PASSES + 1):
            if self.spread(sc, pods)["within"]:
                break
            before = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods}
            stem = OUT / f"{sc.slug}-{tool}-pass{k}"
            with (
                stem.with_suffix(".out").open("wb") as out,
                stem.with_suffix(".err").open("wb") as err,
            ):
                wall, rss, rc = run_child(self.pass_cmd(tool, ns, stem), out, err)
            pods = self.settle(sc, ns, owned=True)
            after = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods}
            gone = [n for u, n in before.items() if u not in after]
            new = [n for u, n in after.items() if u not in before]
            from_d = Counter(self.domain_of(sc, n) for n in gone)
            to_d = Counter(self.domain_of(sc, n) for n in new)
            back = sum(min(c, to_d[d]) for d, c in from_d.items())
            evictions += len(gone)
            wasted += back
            sp = self.spread(sc, pods)
            result["passes"].append(
                {
                    "pass": k,
                    "exit": rc,
                    "wall_s": round(wall, 3),
                    "peak_rss_bytes": rss,
                    "evictions": len(gone),
                    "back_in_own_domain": back,
                    "after": sp,
                }
            )
            print(
                f"  {sc.slug:<10} {tool:<11} pass {k}: exit {rc}, {len(gone)} evicted "
                f"({back} back in own domain), {wall:.2f}s, "
                f"{rss / 2**20:.0f} MiB, counts {sp['counts']}",
                file=sys.stderr,
                flush=True,
            )
            if not gone:
                break
        final = self.spread(sc, pods)
        result.update(
            evictions=evictions,
            back_in_own_domain=wasted,
            passes_run=len(result["passes"]),
            within_max_skew=final["within"],
            end=final,
            pass_s=[p["wall_s"] for p in result["passes"]],
            peak_rss_bytes=max((p["peak_rss_bytes"] for p in result["passes"]), default=0),
        )
        self.cp.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        return result


def table(rows: list[dict[str, Any]]) -> str:
    w = max([len(r.get("shape", "")) for r in rows] + [5])
    head = (
        f"{'scenario':<10} {'shape':<{w}} {'tool':<11} {'evict':>5} {'back':>4} {'passes':>6} "
        f"{'within':>6} {'pass time (s)':<22} {'dry-run':>7} {'peak RSS':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['scenario']:<10} {'':<{w}} {r['tool']:<11} ERROR {r['error']}")
            continue
        times = ",".join(f"{t:.2f}" for t in r["pass_s"]) or "-"
        lines.append(
            f"{r['scenario']:<10} {r['shape']:<{w}} {r['tool']:<11} {r['evictions']:>5} "
            f"{r['back_in_own_domain']:>4} {r['passes_run']:>6} "
            f"{'yes' if r['within_max_skew'] else 'no':>6} {times:<22} "
            f"{r.get('dry_run', {}).get('wall_s', 0):>6.2f}s "
            f"{r['peak_rss_bytes'] / 2**20:>5.0f}MiB"
        )
    return "\n".join(lines)


def build_descheduler() -> Path:
    proc = subprocess.run(["bash", str(BUILD_SH)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench/descheduler/build.sh failed:\n{proc.stdout}\n{proc.stderr}")
    line = proc.stdout.strip().splitlines()[-1]
    return Path(line.removeprefix("BIN="))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--tools", default="rebalancer,descheduler")
    ap.add_argument("--out", default=str(RESULTS / "compare.json"))
    args = ap.parse_args(argv)
    from e2e.cluster.controlplane import ControlPlane, build  # noqa: PLC0415

    scenarios = [SCENARIOS[s.strip()] for s in args.scenarios.split(",") if s.strip()]
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    descheduler = build_descheduler() if "descheduler" in tools else Path("/nonexistent")
    version = (
        subprocess.run(
            [str(descheduler), "version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if descheduler.exists()
        else ""
    )
    OUT.mkdir(parents=True, exist_ok=True)
    cp = ControlPlane(build(quiet=True), node_count=0)
    cp.start()
    print(f"control plane up in {cp.startup_seconds}s; run dir {cp.run_dir}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    try:
        cp.assert_own_cluster(cp.kubeconfig)
        cp.kubectl("create", "namespace", "rebalancer")  # where `run` holds its Lease
        bench = Bench(cp, descheduler)
        for sc in scenarios:
            for tool in tools:
                try:
                    rows.append(bench.run(sc, tool))
                except Exception as exc:  # report and go on
                    rows.append({"scenario": sc.slug, "tool": tool, "error": repr(exc)[:300]})
                    print(f"  {sc.slug} {tool}: ERROR {exc!r}", file=sys.stderr)
    finally:
        cp.stop()
    print(table(rows))
    print(f"machine: {os.cpu_count()} cores, {machine()['mem_gib']} GiB, shared: timings are noisy")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(
        orjson.dumps(
            {"machine": machine(), "descheduler": version, "results": rows},
            option=orjson.OPT_INDENT_2,
        )
        + b"\n"
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
