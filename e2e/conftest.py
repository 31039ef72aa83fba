"""pytest setup for rebalancer's end-to-end tests (opt-in).

Tests under e2e/ are marked ``e2e`` and skipped unless ``--e2e`` (or ``-m e2e``) is
given: ``pytest e2e --e2e``. The session fixture ``cluster`` builds the control-plane
binaries (cached), starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok on 127.0.0.1 with 6 fake nodes in 3 zones, and tears them
down at the end of the session.

Environment:
  REBALANCER_E2E_KUBECONFIG  use this existing cluster (e.g. kind) instead of starting
                             one; nothing is started or torn down.
  REBALANCER_E2E_KEEP=1      keep the run dir (logs, audit log, kubeconfigs) afterwards.
  REBALANCER_E2E_CACHE       binary cache root (default ~/.cache/rebalancer-e2e).
  REBALANCER_E2E_K8S         Kubernetes minor of the control plane: 1.32, 1.35 (default),
                             1.37 or 1.38 (``--k8s`` sets it). Tests marked ``k8s_versions`` are the
                             scenarios that differ by version: ``pytest e2e --e2e --k8s 1.32
                             -m k8s_versions``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.cluster.controlplane import BUILD_SH, Cluster, ControlPlane, build

E2E_DIR = Path(__file__).resolve().parent
K8S_MINORS = ("1.32", "1.35", "1.37", "1.38")
ZONE_LABEL = "topology.kubernetes.io/zone"
LEASE_NAMESPACE = "rebalancer"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e",
        action="store_true",
        default=False,
        help="run the end-to-end tests in e2e/ (starts a local control plane)",
    )
    parser.addoption(
        "--k8s",
        choices=K8S_MINORS,
        default=None,
        help="Kubernetes minor of the local control plane (default: $REBALANCER_E2E_K8S or 1.35)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: end-to-end test against a real control plane (opt-in: --e2e)"
    )
    config.addinivalue_line(
        "markers",
        "k8s_versions: a scenario that differs by Kubernetes version (run on 1.32 to 1.38)",
    )
    minor = config.getoption("--k8s", default=None)
    if minor:  # build.sh and the fixture read the environment
        os.environ["REBALANCER_E2E_K8S"] = minor


def _e2e_enabled(config: pytest.Config) -> bool:
    if config.getoption("--e2e", default=False):
        return True
    markexpr = config.getoption("-m", default="") or ""
    return "e2e" in markexpr and "not e2e" not in markexpr


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = _e2e_enabled(config)
    skip = pytest.mark.skip(reason="e2e test: run with --e2e (or -m e2e)")
    for item in items:
        if E2E_DIR not in Path(str(item.path)).resolve().parents:
            continue
        item.add_marker(pytest.mark.e2e)
        if not enabled:
            item.add_marker(skip)
    # The audit-log check of scenario e must see every other scenario's requests: run it last.
    items.sort(key=lambda item: item.name.startswith("test_e_audit_log"))


def _existing_cluster(kubeconfig: Path) -> Cluster:
    """Wrap a cluster someone else runs (kind); the guard accepts exactly its server."""
    built = (
        Path(
            subprocess.run(
                ["bash", str(BUILD_SH), "--bin-dir"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout.strip()
        )
        / "kubectl"
    )
    kubectl = str(built) if built.exists() else shutil.which("kubectl")
    if kubectl is None:  # neither: build ours
        kubectl = str(build(quiet=True) / "kubectl")
    run_dir = Path(tempfile.mkdtemp(prefix="rebalancer-e2e-existing-"))
    c = Cluster(kubeconfig=kubeconfig, server="", run_dir=run_dir, kubectl_bin=kubectl)
    c.server = c.server_of(kubeconfig)
    c.allowed_server = c.server
    c.nodes = sorted(n["metadata"]["name"] for n in c.get_json("nodes", "-l", ZONE_LABEL)["items"])
    return c


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A running cluster: our local control plane, or REBALANCER_E2E_KUBECONFIG's."""
    old_kubeconfig = os.environ.get("KUBECONFIG")
    existing = os.environ.get("REBALANCER_E2E_KUBECONFIG")
    if existing:
        c = _existing_cluster(Path(existing).resolve())
        os.environ["KUBECONFIG"] = str(c.kubeconfig)
        _lease_namespace(c)
        try:
            yield c
        finally:
            _restore_env(old_kubeconfig)
            shutil.rmtree(c.run_dir, ignore_errors=True)
        return

    cp = ControlPlane(build(quiet=True))
    cp.start()
    os.environ["KUBECONFIG"] = str(cp.kubeconfig)
    print(
        f"\nrebalancer-e2e: control plane up in {cp.startup_seconds}s "
        f"{cp.startup_phases}; run dir {cp.run_dir}"
    )
    try:
        cp.assert_own_cluster(cp.kubeconfig)
        _lease_namespace(cp)
        yield cp
    finally:
        _restore_env(old_kubeconfig)
        cp.stop()


def _lease_namespace(c: Cluster) -> None:
    """The namespace of rebalancer's Lease (``run`` evicts only while holding it)."""
    if c.kubectl("get", "namespace", LEASE_NAMESPACE, check=False).returncode != 0:
        c.kubectl("create", "namespace", LEASE_NAMESPACE)


def _restore_env(old_kubeconfig: str | None) -> None:
    if old_kubeconfig is None:
        os.environ.pop("KUBECONFIG", None)
    else:
        os.environ["KUBECONFIG"] = old_kubeconfig


@pytest.fixture
def assert_own_cluster(cluster: Cluster):  # type: ignore[no-untyped-def]
    """``assert_own_cluster(kubeconfig)``: refuse kubeconfigs for any other cluster."""
    return cluster.assert_own_cluster


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the test."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    cluster.wait_for(
        f"default ServiceAccount in {name}",
        lambda: cluster.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
        timeout=60,
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
