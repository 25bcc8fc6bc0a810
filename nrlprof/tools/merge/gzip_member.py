"""Writing one gzip member in pieces: raw deflate, with the CRC-32 and length its trailer needs.

A piece compressed elsewhere (another process) can be spliced in: flush this stream fully, copy the
piece's bytes (itself ending in a full flush), and combine its CRC and length with `splice`.
"""

from __future__ import annotations

import struct
import time
import zlib
from typing import BinaryIO


class DeflateStream:
    """Raw deflate of what is written to `file`, keeping the CRC-32 and length of the uncompressed data."""

    def __init__(self, file: BinaryIO, level: int) -> None:
        self._file = file
        self._deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self.crc = 0
        self.size = 0

    def write(self, data: bytes) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self._file.write(self._deflate.compress(data))

    def full_flush(self) -> None:
        """End on a byte boundary with no back-references past it: what follows may be another stream's."""
        self._file.write(self._deflate.flush(zlib.Z_FULL_FLUSH))

    def splice(self, crc: int, size: int) -> None:
        """Count a piece of `size` bytes with CRC `crc` that the caller copied in after `full_flush()`."""
        self.crc = crc32_combine(self.crc, crc, size)
        self.size += size

    def finish(self) -> None:
        self._file.write(self._deflate.flush(zlib.Z_FINISH))


def gzip_header(mtime: int | None = None) -> bytes:
    """A gzip member header: deflate, no name, unknown OS."""
    stamp = int(time.time()) if mtime is None else mtime
    return b"\x1f\x8b\x08\x00" + struct.pack("<I", stamp & 0xFFFFFFFF) + b"\x00\xff"


def gzip_trailer(crc: int, size: int) -> bytes:
    return struct.pack("<II", crc, size & 0xFFFFFFFF)


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A + B from crc32(A), crc32(B) and len(B): zlib's crc32_combine, which Python lacks."""

    def times(matrix: list[int], vector: int) -> int:
        total, i = 0, 0
        while vector:
            if vector & 1:
                total ^= matrix[i]
            vector >>= 1
            i += 1
        return total

    def square(matrix: list[int]) -> list[int]:
        return [times(matrix, row) for row in matrix]

    if length2 <= 0:
        return crc1
    one_bit = [0xEDB88320] + [1 << n for n in range(31)]  # the operator that appends one zero bit
    zero_bytes = square(square(square(one_bit)))  # appends one zero byte; squared, twice as many
    while length2:
        if length2 & 1:
            crc1 = times(zero_bytes, crc1)
        length2 >>= 1
        if length2:
            zero_bytes = square(zero_bytes)
    return crc1 ^ crc2
