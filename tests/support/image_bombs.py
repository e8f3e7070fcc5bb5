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


def jpeg_frame(height: int, width: int, marker: int = 0xC0) -> bytes:
    """A JPEG frame header (SOF segment) of ``height`` x ``width``, three components."""
    components = b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return bytes([0xFF, marker]) + struct.pack(">HBHHB", 8 + len(components), 8, height, width, 3) + components


#: Where a parser that reads a length after RST0 (``FF D0``, which has none) lands in
#: :func:`jpeg_with_decoy_frame`'s comment: it takes the next marker ``FF D1`` as the length 0xFFD1.
_DECOY_AT = 2 + 2 + 0xFFD1


def jpeg_with_decoy_frame(jpeg: bytes, height: int = 1, width: int = 1) -> bytes:
    """``jpeg`` (a whole JPEG) that libjpeg decodes as it is, and a parser that mistakes RST0 for a
    marker segment reads as ``height`` x ``width``: after SOI come RST0 and RST1 (parameterless
    markers, skipped by the decoder), then a comment (COM, 65535 bytes) holding a decoy frame header
    where such a parser lands, then the rest of ``jpeg``."""
    comment_start = 2 + 4 + 4  # SOI, RST0 RST1, COM's marker and length
    payload = bytearray(0xFFFF - 2)
    decoy = jpeg_frame(height, width)
    offset = _DECOY_AT - comment_start
    payload[offset : offset + len(decoy)] = decoy
    return b"\xff\xd8" + b"\xff\xd0\xff\xd1" + b"\xff\xfe" + struct.pack(">H", 0xFFFF) + bytes(payload) + jpeg[2:]


def _lzw_black(pixels: int) -> bytes:
    """GIF LZW data (minimum code size 2) of ``pixels`` pixels of colour 0, as sub-blocks: a clear
    code before every pair of pixels keeps every code 3 bits long, as giflib reads them."""
    codes = [4, 0, 0] * (pixels // 2) + [4, 0] * (pixels % 2) + [5]  # clear, pixels..., end
    bits = sum(code << (3 * i) for i, code in enumerate(codes))
    data = bits.to_bytes((3 * len(codes) + 7) // 8, "little")
    blocks = b"".join(bytes([len(data[i : i + 255])]) + data[i : i + 255] for i in range(0, len(data), 255))
    return b"\x02" + blocks + b"\x00"


def gif_frames_bomb(frames=((1, 30000), (30000, 1)), screen=(1, 1)) -> bytes:
    """A whole, valid GIF of black frames of ``(height, width)`` each on a logical screen of
    ``screen``: TensorFlow ignores the screen and decodes to the tallest and widest frame, so
    the default's two frames of 30,000 pixels each (34 kB) decode to 30000x30000 (2.7 GB)."""
    head = b"GIF89a" + struct.pack("<HHBBB", screen[1], screen[0], 0x81, 0, 0) + bytes(12)  # 4 black colours
    body = b"".join(
        b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0) + _lzw_black(height * width) for height, width in frames
    )
    return head + body + b";"
