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
over a limit (``Image(max_pixels=...)``) before any decoder sees it. That only holds if the size
read here is the size TensorFlow's decoders read, so each format is read as its decoder reads it:
PNG's IHDR (libpng), BMP's fields at their fixed offsets (TensorFlow's own decoder), a JPEG's
markers walked as libjpeg walks them (markers that stand alone, fill bytes; anything libjpeg would
read another way is refused), a GIF's frames rather than its logical screen (TensorFlow decodes
to the tallest and widest frame). tests/cluster/columns/test_image_headers_fuzz.py holds this
against TensorFlow on thousands of crafted and mutated files. One way apart is left, never
upwards: giflib stops at a frame whose LZW data is damaged, and TensorFlow decodes the frames
before it, so such a GIF decodes smaller than its header says.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG colour type -> channels as decoded (a palette gives RGB).
PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}
#: JPEG start-of-frame markers: SOF0-15 but DHT (0xC4), JPG (0xC8) and DAC (0xCC). libjpeg decodes
#: SOF0, 1, 2, 9 and 10 and refuses the others; any of them gives the size it would decode.
JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
#: JPEG markers that stand alone, with no length (ITU T.81 B.1.1.3): TEM and RST0-7. libjpeg skips
#: them before the frame header (SOI and EOI stand alone too, but end the walk: see ``_jpeg``).
JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})
#: JPEG marker segments (a length, then that many bytes) libjpeg reads past before the frame
#: header: DHT, DAC, DNL, DQT, DRI, APP0-15 and COM. Any other marker there makes it fail.
JPEG_SEGMENTS = frozenset({0xC4, 0xCC, 0xDB, 0xDC, 0xDD, 0xFE, *range(0xE0, 0xF0)})
#: How many bytes may follow a JPEG's EOI marker (some writers pad files).
JPEG_TRAILER_SLACK = 64


class BadImage(ValueError):
    """The bytes are not a whole image of a format TensorFlow decodes; the message says why."""


class ImageHeader(NamedTuple):
    """What an image's header says, as TensorFlow's decoder reads it. ``pixels``: how many the
    decoder holds at once (height times width; for a GIF the larger of that and its every frame
    together, which giflib reads all of even for the first)."""

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
    """The frame header libjpeg would decode: markers walked as its ``read_markers`` walks them
    (ITU T.81 B.1.1), and anything it would read otherwise refused, so the size checked is the size
    decoded. Stricter than libjpeg, never looser: where libjpeg skips bytes that are not a marker or
    stuffed zeros (``FF 00``), or reads a segment length under 2 as 2, this refuses the image."""
    if b"\xff\xd9" not in bytes(data[-JPEG_TRAILER_SLACK:]):
        raise BadImage(f"truncated JPEG: {len(data)} bytes without an end-of-image marker")
    position = 2  # after SOI
    while position + 2 <= len(data):
        if data[position] != 0xFF:
            raise BadImage(f"corrupt JPEG: no marker at byte {position} (before its frame header)")
        if data[position + 1] == 0xFF:  # a fill byte: any number may come before a marker
            position += 1
            continue
        marker = data[position + 1]
        if marker in JPEG_STANDALONE:
            position += 2
            continue
        if marker not in JPEG_FRAMES and marker not in JPEG_SEGMENTS:  # SOS, EOI, SOI, reserved...
            raise BadImage(f"corrupt JPEG: marker {marker:#04x} at byte {position}, before any frame header")
        if position + 4 > len(data):
            break
        (length,) = struct.unpack_from(">H", data, position + 2)
        if length < 2 or position + 2 + length > len(data):
            raise BadImage(f"corrupt JPEG: segment {marker:#04x} at byte {position} of length {length}")
        if marker in JPEG_FRAMES:
            return _jpeg_frame(data, position, length)
        position += 2 + length
    raise BadImage("corrupt JPEG: no frame header")


def _jpeg_frame(data: bytes, position: int, length: int) -> ImageHeader:
    """The size and components of the frame header at ``position``, checked as libjpeg checks it."""
    if length < 8:
        raise BadImage(f"corrupt JPEG: frame header of {length} bytes at byte {position}")
    height, width, components = struct.unpack_from(">HHB", data, position + 5)
    if length != 8 + 3 * components:
        raise BadImage(f"corrupt JPEG: frame header of {components} components in {length} bytes")
    if not height or not width or components not in (1, 3, 4):
        raise BadImage(f"corrupt JPEG: size {width}x{height}, {components} components")
    return ImageHeader("jpeg", height, width, components, height * width)


def _gif(data: bytes) -> ImageHeader:
    if len(data) < 14 or not bytes(data[-16:]).rstrip(b"\x00").endswith(b";"):
        raise BadImage(f"truncated GIF: {len(data)} bytes without its trailer")
    width, height, flags = struct.unpack_from("<HHB", data, 6)
    if not width or not height:
        raise BadImage(f"corrupt GIF: size {width}x{height}")
    height, width, pixels = _gif_frames(data, flags)
    return ImageHeader("gif", height, width, 3, pixels)


def _gif_frames(data: bytes, flags: int) -> tuple[int, int, int]:
    """``(height, width, pixels)`` as TensorFlow decodes the GIF: the tallest frame's height and
    the widest frame's width (not the logical screen's, which it ignores), and the larger of
    that canvas and giflib's buffers of every frame together (it reads them all, even for the
    first), from the blocks walked up to the trailer (BadImage if they run past the end)."""
    position, height, width, frames = 13 + _colour_table(flags), 0, 0, 0
    while position < len(data):
        block = data[position]
        if block == 0x3B:  # trailer
            if not frames:
                raise BadImage("corrupt GIF: no image in it")
            return height, width, max(height * width, frames)
        if block == 0x21:  # extension: label, then sub-blocks
            position = _skip_sub_blocks(data, position + 2)
        elif block == 0x2C:  # image descriptor: 9 bytes, a local colour table, LZW size, sub-blocks
            if position + 10 > len(data):
                break
            frame_width, frame_height, local = struct.unpack_from("<HHB", data, position + 5)
            if not frame_width or not frame_height:
                raise BadImage(f"corrupt GIF: a frame of {frame_width}x{frame_height} at byte {position}")
            height, width = max(height, frame_height), max(width, frame_width)
            frames += frame_width * frame_height
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
