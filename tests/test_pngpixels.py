"""The test PNG reader: images written here with each of the five row filters read back exactly.

The writer below applies the filters as the PNG specification defines them (the reader undoes
them), so a mistake in either shows as a pixel that does not come back.
"""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from tests.pngpixels import read_png

Pixel = tuple[int, int, int]


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body)
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _write_png(rows: list[list[Pixel]], filters: list[int], alpha: bool) -> bytes:
    channels = 4 if alpha else 3
    raw = bytearray()
    previous = bytes(len(rows[0]) * channels)
    for row, method in zip(rows, filters, strict=True):
        line = bytes(v for p in row for v in ((*p, 255) if alpha else p))
        out = bytearray([method])
        for i, value in enumerate(line):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            predictor = [0, left, up, (left + up) // 2, _paeth(left, up, corner)][method]
            out.append((value - predictor) & 0xFF)
        raw += out
        previous = line
    header = struct.pack(">IIBBBBB", len(rows[0]), len(rows), 8, 6 if alpha else 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(raw)))
        + _chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("alpha", [False, True])
def test_every_filter_reads_back(alpha: bool) -> None:
    rng = random.Random(7)
    rows = [
        [(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(9)]
        for _ in range(10)
    ]
    filters = [0, 1, 2, 3, 4, 4, 3, 2, 1, 0]
    image = read_png(_write_png(rows, filters, alpha))
    assert (image.width, image.height) == (9, 10)
    assert image.pixels == [p for row in rows for p in row]


def test_counts_colours_and_non_white_pixels() -> None:
    white, red = (255, 255, 255), (229, 83, 75)
    rows = [[white, red, white], [red, (250, 250, 250), (0, 0, 0)]]
    image = read_png(_write_png(rows, [1, 2], alpha=False))
    assert image.count(red) == 2
    assert image.count((230, 84, 74), tolerance=1) == 2
    assert image.not_white() == 3  # the two reds and the black; 250 counts as white


def test_rejects_what_it_cannot_read() -> None:
    with pytest.raises(ValueError, match="not a PNG"):
        read_png(b"GIF89a")
