"""CLI: ``python -m e2e.cluster build`` | ``python -m e2e.cluster up [--nodes N] [--keep]``.

``up`` starts the control plane, prints ``export KUBECONFIG=...`` and runs until
Ctrl-C / SIGTERM, then tears everything down (the run dir is removed unless --keep).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from .controlplane import ControlPlane, ControlPlaneError, build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build/cache the binaries (e2e/cluster/build.sh)")
    up = sub.add_parser("up", help="start a control plane and keep it running")
    up.add_argument("--nodes", type=int, default=6, help="kwok nodes, round-robin over 3 zones")
    up.add_argument("--keep", action="store_true", help="keep the run dir after shutdown")
    up.add_argument("--run-dir", type=Path, default=None, help="default: a new temp dir")
    args = parser.parse_args(argv)

    bin_dir = build()
    if args.cmd == "build":
        print(f"BIN_DIR={bin_dir}")
        return 0

    stop = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cp = ControlPlane(bin_dir, run_dir=args.run_dir, keep=args.keep, node_count=args.nodes)
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
