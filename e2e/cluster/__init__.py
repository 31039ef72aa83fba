"""Local Kubernetes control plane (real binaries + kwok) for rebalancer's e2e tests."""
