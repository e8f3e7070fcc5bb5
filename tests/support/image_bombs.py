"""Decompression bombs: small image files that declare huge images (tests of ``Image(max_pixels=...)``).

No TensorFlow; made with zlib and struct only, the same bytes every time.
"""

from __future__ import annotations

import functools
import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.lru_cache(maxsize=4)
def png_bomb(height: int = 20000, width: int = 20000) -> bytes:
    """A whole, valid grey PNG of ``height`` x ``width`` black pixels: 388,871 bytes declaring
    20000x20000 (400 MB of grey pixels, 1.2 GB decoded to RGB)."""
    deflate = zlib.compressobj(6)
    row = bytes(1 + width)  # filter type 0, then the row's pixels
    parts = [deflate.compress(row * 256) for _ in range(height // 256)]
    parts += [deflate.compress(row * (height % 256)), deflate.flush()]
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grey, not interlaced
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", b"".join(parts)) + _chunk(b"IEND", b"")
