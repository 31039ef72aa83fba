"""Write container images as docker-archive tarballs with the standard library only.

No registry and no container tool is needed: the archive (``manifest.json``, one
image config, one ``layer.tar`` per layer) is what ``ctr images import`` loads.
Layers are built from ``Entry`` lists with fixed owners and timestamps, so the same
inputs give the same image ID.

    python -m e2e.image.pack BIN OUT.tar  # the test image from the testimage binary
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEST_IMAGE = "rebalancer.local/e2e/testimage:1"
PAUSE_IMAGE = "rebalancer.local/e2e/pause:1"
_MTIME = 0


@dataclass(frozen=True)
class Entry:
    """One member of a layer: a directory, a regular file (``data``) or a symlink."""

    path: str  # inside the image, without a leading slash
    kind: str = "file"  # "file" | "dir" | "symlink"
    data: bytes = b""
    mode: int = 0o644
    target: str = ""  # symlink target
    uid: int = 0
    gid: int = 0


def layer_bytes(entries: Iterable[Entry]) -> bytes:
    """An uncompressed layer tar, members in the given order (parents first)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            info = tarfile.TarInfo(e.path.lstrip("/"))
            info.mtime = _MTIME
            info.uid, info.gid = e.uid, e.gid
            info.uname = info.gname = ""
            info.mode = e.mode
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = e.target
                tar.addfile(info)
            elif e.kind == "file":
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
            else:
                raise ValueError(f"Entry.kind must be file, dir or symlink, not {e.kind!r}")
    return buf.getvalue()


def write_docker_archive(
    out: Path,
    tags: Sequence[str],
    layers: Sequence[bytes],
    config: dict[str, Any],
    *,
    architecture: str = "amd64",
) -> str:
    """Write a docker-archive tarball; return the image ID (sha256 of its config)."""
    diff_ids = [f"sha256:{hashlib.sha256(layer).hexdigest()}" for layer in layers]
    image_config = {
        "architecture": architecture,
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": "rebalancer e2e/image/pack.py"} for _ in layers],
    }
    config_bytes = json.dumps(image_config, sort_keys=True, separators=(",", ":")).encode()
    config_id = hashlib.sha256(config_bytes).hexdigest()
    layer_names = [f"{d.split(':', 1)[1]}/layer.tar" for d in diff_ids]
    manifest = [{"Config": f"{config_id}.json", "RepoTags": list(tags), "Layers": layer_names}]
    members: list[tuple[str, bytes]] = [(f"{config_id}.json", config_bytes)]
    members += list(zip(layer_names, layers, strict=True))
    members.append(("manifest.json", json.dumps(manifest).encode()))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime = _MTIME
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)
    return f"sha256:{config_id}"


def test_image_layer(binary: Path) -> bytes:
    """The testimage binary as /testimage, plus a world-writable /tmp for readiness files."""
    return layer_bytes(
        [
            Entry("tmp", kind="dir", mode=0o1777),
            Entry("testimage", data=binary.read_bytes(), mode=0o755),
        ]
    )


def write_test_images(binary: Path, out_dir: Path) -> Path:
    """One archive holding the test image and the pause image (the same program)."""
    path = out_dir / "testimage.tar"
    write_docker_archive(
        path,
        [TEST_IMAGE, PAUSE_IMAGE],
        [test_image_layer(binary)],
        {"Entrypoint": ["/testimage"], "WorkingDir": "/"},
    )
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m e2e.image.pack TESTIMAGE_BINARY OUT_DIR", file=sys.stderr)
        return 2
    print(write_test_images(Path(args[0]), Path(args[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
