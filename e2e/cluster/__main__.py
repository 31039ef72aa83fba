"""CLI: ``python -m e2e.cluster build`` | ``python -m e2e.cluster up [--nodes N] [--keep]``.

``up`` starts the control plane, prints ``export KUBECONFIG=...`` and runs until
Ctrl-C / SIGTERM, then tears everything down (the run dir is removed unless --keep).
``up --real-nodes N`` adds N real nodes (containerd + kubelet, one per zone; root
only; see realnodes.py); kwok nodes then default to none.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from .controlplane import ControlPlane, ControlPlaneError, build
from .realnodes import RealNodeCluster, build_nodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build/cache the binaries (e2e/cluster/build.sh)")
    up = sub.add_parser("up", help="start a control plane and keep it running")
    up.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="kwok nodes, round-robin over 3 zones (default 6, or 0 with --real-nodes)",
    )
    up.add_argument(
        "--real-nodes",
        type=int,
        default=0,
        help="real kubelet nodes with containerd, round-robin over 3 zones (root only)",
    )
    up.add_argument("--keep", action="store_true", help="keep the run dir after shutdown")
    up.add_argument("--run-dir", type=Path, default=None, help="default: a new temp dir")
    args = parser.parse_args(argv)

    if args.cmd == "build":
        print(f"BIN_DIR={build()}")
        print(f"NODES_BIN_DIR={build_nodes()}")
        return 0
    bin_dir = build()
    nodes_bin_dir = build_nodes() if args.real_nodes else None

    stop = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cp: ControlPlane
    if nodes_bin_dir is not None:
        cp = RealNodeCluster(
            bin_dir,
            nodes_bin_dir,
            real_nodes=args.real_nodes,
            node_count=args.nodes or 0,
            run_dir=args.run_dir,
            keep=args.keep,
        )
    else:
        nodes = 6 if args.nodes is None else args.nodes
        cp = ControlPlane(bin_dir, run_dir=args.run_dir, keep=args.keep, node_count=nodes)
    cp.start()
    try:
        print(f"# control plane up in {cp.startup_seconds}s {cp.startup_phases}", file=sys.stderr)
        print(f"# run dir (logs/, audit/audit.log): {cp.run_dir}", file=sys.stderr)
        print(f"export KUBECONFIG={cp.kubeconfig}")
        print(f"export PATH={bin_dir}:$PATH")
        print("# Ctrl-C or SIGTERM to stop", file=sys.stderr)
        sys.stdout.flush()
        while not stop:
            cp.check_alive()
            time.sleep(1)
    except ControlPlaneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
