"""Check an encoded image before TensorFlow decodes it: its format, size and channels, and whether
it is whole.

TensorFlow's decoders raise from inside the ``tf.data`` pipeline, where nothing says which row
failed, and a pipeline cannot step over a row that fails. So each image's header is read here
first, in Python (a few microseconds: no pixel is decoded), and an image that is not PNG, JPEG,
GIF or BMP, is cut short, or has another size or channel count than asked for becomes a bad row
that names its column, partition and row, or is skipped (``bad_rows="skip"``).

Whole means: a PNG's chunks are all there up to ``IEND``, each with its CRC; a JPEG starts with
SOI, has a frame header, and ends with EOI; a GIF's blocks are all there up to its trailer; a BMP
is as long as its header says. Compressed pixel data that is damaged while every header and
checksum holds still fails in TensorFlow's decoder, with TensorFlow's message.

The header also says how many pixels the decoder will hold (``ImageHeader.pixels``): a few hundred
kilobytes of PNG can declare 20000x20000 pixels, 1.2 GB decoded, so the readers refuse an image
over a limit (``Image(max_pixels=...)``) before any decoder sees it.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG colour type -> channels as decoded (a palette gives RGB).
PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}
#: JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic).
JPEG_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
#: How many bytes may follow a JPEG's EOI marker (some writers pad files).
JPEG_TRAILER_SLACK = 64


class BadImage(ValueError):
    """The bytes are not a whole image of a format TensorFlow decodes; the message says why."""


class ImageHeader(NamedTuple):
    """What an image's header says. ``pixels``: how many the decoder holds at once (height times
    width; a GIF's every frame, which TensorFlow decodes all of even for the first)."""

    format: str
    height: int
    width: int
    channels: int
    pixels: int


def read_header(data: bytes) -> ImageHeader:
    """The format, size and channels of an encoded image (any bytes-like object, e.g. a
    memoryview into an Arrow buffer), after checking it is whole (BadImage if not)."""
    head = bytes(data[:8])
    if head == PNG_SIGNATURE:
        return _png(data)
    if head.startswith(b"\xff\xd8"):
        return _jpeg(data)
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return _gif(data)
    if head.startswith(b"BM"):
        return _bmp(data)
    raise BadImage(f"not a PNG, JPEG, GIF or BMP image ({len(data)} bytes starting {head!r})")


def _png(data: bytes) -> ImageHeader:
    position, header = len(PNG_SIGNATURE), None
    while True:
        if position + 8 > len(data):
            raise BadImage(f"truncated PNG: {len(data)} bytes, no IEND chunk")
        length, kind = struct.unpack_from(">I4s", data, position)
        end = position + 8 + length + 4
        if end > len(data):
            raise BadImage(f"truncated PNG: its {kind.decode('latin-1')!r} chunk ends past the {len(data)} bytes")
        (crc,) = struct.unpack_from(">I", data, end - 4)
        if zlib.crc32(data[position + 4 : end - 4]) != crc:
            raise BadImage(f"corrupt PNG: the CRC of its {kind.decode('latin-1')!r} chunk does not match")
        if header is None:
            if kind != b"IHDR" or length != 13:
                raise BadImage("corrupt PNG: it does not start with an IHDR chunk")
            width, height, _, colour = struct.unpack_from(">IIBB", data, position + 8)
            if colour not in PNG_CHANNELS or not width or not height:
                raise BadImage(f"corrupt PNG: colour type {colour}, size {width}x{height}")
            header = ImageHeader("png", height, width, PNG_CHANNELS[colour], height * width)
        if kind == b"IEND":
            return header
        position = end


def _jpeg(data: bytes) -> ImageHeader:
    if b"\xff\xd9" not in bytes(data[-JPEG_TRAILER_SLACK:]):
        raise BadImage(f"truncated JPEG: {len(data)} bytes without an end-of-image marker")
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            raise BadImage(f"corrupt JPEG: no marker at byte {position}")
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        (length,) = struct.unpack_from(">H", data, position + 2)
        if marker in JPEG_FRAMES:
            if position + 10 > len(data):
                break
            height, width, components = struct.unpack_from(">HHB", data, position + 5)
            if not height or not width or components not in (1, 3, 4):
                raise BadImage(f"corrupt JPEG: size {width}x{height}, {components} components")
            return ImageHeader("jpeg", height, width, components, height * width)
        if marker == 0xDA:  # start of scan before any frame header
            break
        position += 2 + length
    raise BadImage("corrupt JPEG: no frame header")


def _gif(data: bytes) -> ImageHeader:
    if len(data) < 14 or not bytes(data[-16:]).rstrip(b"\x00").endswith(b";"):
        raise BadImage(f"truncated GIF: {len(data)} bytes without its trailer")
    width, height, flags = struct.unpack_from("<HHB", data, 6)
    if not width or not height:
        raise BadImage(f"corrupt GIF: size {width}x{height}")
    return ImageHeader("gif", height, width, 3, _gif_pixels(data, width * height, flags))


def _gif_pixels(data: bytes, screen: int, flags: int) -> int:
    """The pixels a GIF decoder holds: every frame (the larger of its own rectangle and the
    screen), walked block by block up to the trailer (BadImage if the blocks run past the end)."""
    position, pixels = 13 + _colour_table(flags), 0
    while position < len(data):
        block = data[position]
        if block == 0x3B:  # trailer
            return max(pixels, screen)
        if block == 0x21:  # extension: label, then sub-blocks
            position = _skip_sub_blocks(data, position + 2)
        elif block == 0x2C:  # image descriptor: 9 bytes, a local colour table, LZW size, sub-blocks
            if position + 10 > len(data):
                break
            width, height, local = struct.unpack_from("<HHB", data, position + 5)
            pixels += max(width * height, screen)
            position = _skip_sub_blocks(data, position + 10 + _colour_table(local) + 1)
        else:
            raise BadImage(f"corrupt GIF: block {block:#04x} at byte {position}")
    raise BadImage(f"truncated GIF: its blocks run past the {len(data)} bytes")


def _colour_table(flags: int) -> int:
    """The bytes of the colour table a GIF screen or image descriptor's flags announce."""
    return 3 << ((flags & 0x07) + 1) if flags & 0x80 else 0


def _skip_sub_blocks(data: bytes, position: int) -> int:
    """The position after a chain of GIF sub-blocks (each a length byte and data; 0 ends it)."""
    while position < len(data) and data[position]:
        position += 1 + data[position]
    return position + 1


def _bmp(data: bytes) -> ImageHeader:
    if len(data) < 30:
        raise BadImage(f"truncated BMP: {len(data)} bytes")
    (size,) = struct.unpack_from("<I", data, 2)
    width, height, _, bits = struct.unpack_from("<iiHH", data, 18)
    if size > len(data):
        raise BadImage(f"truncated BMP: {len(data)} of its {size} bytes")
    if width <= 0 or height == 0 or bits not in (24, 32):
        raise BadImage(f"unsupported BMP: size {width}x{abs(height)}, {bits} bits per pixel (24 or 32 decode)")
    return ImageHeader("bmp", abs(height), width, 3 if bits == 24 else 4, abs(height) * width)
