"""Generate the Python code of rebalancer's trimmed protobuf schema with grpcio-tools' protoc.

``rebalancer/cluster/read/protodecode/schema.proto`` -> ``schema_pb2.py`` (the message classes) and
``schema_pb2.pyi`` (their types, for mypy), next to it. grpcio-tools is a dev extra (pinned, so
the output is reproducible): an installed rebalancer needs only the ``protobuf`` runtime.
tests/test_protodecode.py regenerates into a temporary directory and checks nothing changed.

Usage: ``python scripts/gen_proto.py [--out DIR]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "rebalancer" / "cluster" / "read" / "protodecode"
SCHEMA = "schema.proto"
GENERATED = ("schema_pb2.py", "schema_pb2.pyi")


def generate(out: Path) -> list[Path]:
    """Run protoc on the schema, writing into ``out``; returns the files written."""
    from grpc_tools import protoc  # noqa: PLC0415  # a dev extra, imported on use

    out.mkdir(parents=True, exist_ok=True)
    code = protoc.main(
        [
            "protoc",
            f"-I{SCHEMA_DIR}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            str(SCHEMA_DIR / SCHEMA),
        ]
    )
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")
    return [out / name for name in GENERATED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help="where to write the code")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
