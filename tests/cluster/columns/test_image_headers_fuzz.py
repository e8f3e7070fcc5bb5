"""Image headers against TensorFlow's own decoders: for thousands of crafted and mutated PNG, JPEG,
GIF and BMP files, whenever ``tf.io.decode_image`` (as :mod:`sparkdl.columns.tensors` calls it)
decodes one, the header read of :mod:`sparkdl.columns.image_headers` either refused it or gave the
size decoded, so ``Image(max_pixels=...)`` limits what is decoded. For JPEG also against libjpeg's
header read alone (``tf.image.extract_jpeg_shape``): TensorFlow allocates the output as soon as it
has read the header, before any pixel, so the sizes must agree even when the pixels then fail.

The mutants: markers that stand alone (RST0-7, TEM), fill bytes, comments and APPn segments holding
decoy frame headers, several frame headers, reserved markers, segment lengths off by a little;
PNG chunks before and after IHDR; GIF screens and frames of other sizes, extension blocks; BMP
sizes, depths and offsets; and everywhere bytes overwritten, inserted and cut. Seeded: the same
files every run. The parser's own cases, without TensorFlow: tests/unit/columns/test_image_headers.py.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from collections import Counter

import numpy as np
import pytest
from PIL import Image as PILImage

from sparkdl.columns.image_headers import BadImage, read_header

from image_bombs import gif_frames_bomb, jpeg_frame, jpeg_with_decoy_frame

pytestmark = [pytest.mark.timeout(120), pytest.mark.cluster]  # TensorFlow decodes

MUTANTS = 500  #: per format
#: Declared sizes the test lets TensorFlow allocate (it allocates the output before it decodes).
DECODE_LIMIT = 1 << 22


def _encode(pixels: np.ndarray, mode: str, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    PILImage.fromarray(pixels, mode).save(out, format=fmt, **options)
    return out.getvalue()


def _seeds(fmt: str) -> list[bytes]:
    """Small whole images of ``fmt`` the mutants start from (several modes and layouts)."""
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (9, 7), dtype=np.uint8)
    if fmt == "JPEG":
        return [_encode(rgb, "RGB", fmt), _encode(rgb, "RGB", fmt, progressive=True), _encode(grey, "L", fmt)]
    if fmt == "PNG":
        rgba = rng.integers(0, 256, (5, 11, 4), dtype=np.uint8)
        palette = PILImage.fromarray(rgb, "RGB").convert("P")
        out = io.BytesIO()
        palette.save(out, format="PNG")
        return [_encode(rgb, "RGB", fmt), _encode(grey, "L", fmt), _encode(rgba, "RGBA", fmt), out.getvalue()]
    if fmt == "GIF":
        frames = [PILImage.fromarray(np.roll(rgb, i, axis=1), "RGB").convert("P") for i in range(3)]
        out = io.BytesIO()
        frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], optimize=False)
        frames_apart = [
            gif_frames_bomb(((1, 30), (30, 1)), (2, 2)),
            gif_frames_bomb(((4, 3), (2, 9), (6, 1)), (50, 50)),
        ]
        return [_encode(rgb, "RGB", fmt), out.getvalue(), *frames_apart]
    rgba = rng.integers(0, 256, (6, 5, 4), dtype=np.uint8)
    return [_encode(rgb, "RGB", fmt), _encode(rgba, "RGBA", fmt)]


# -- generic mutations: bytes overwritten, inserted, cut (the trailer kept, so the end checks pass) --

TRAILERS = {
    "JPEG": b"\xff\xd9",
    "PNG": struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND")),
    "GIF": b";",
    "BMP": b"",
}


def _overwrite(rng: random.Random, data: bytes, fmt: str) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(min(len(out), 80) if rng.random() < 0.8 else len(out))
        out[at] = rng.choice([0x00, 0x01, 0xFF, 0xD0, 0xC0, 0xDA, 0xFE, 0x2C, 0x21, 0x3B, rng.randrange(256)])
    return bytes(out)


def _insert(rng: random.Random, data: bytes, fmt: str) -> bytes:
    at = rng.randrange(2, min(len(data), 80))
    return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + data[at:]


def _cut(rng: random.Random, data: bytes, fmt: str) -> bytes:
    return data[: rng.randrange(2, len(data))] + TRAILERS[fmt]


# -- JPEG: marker sequences between SOI and the frame header --


def _segment(marker: int, payload: bytes, length: int | None = None) -> bytes:
    return (
        bytes([0xFF, marker]) + struct.pack(">H", (len(payload) + 2 if length is None else length) & 0xFFFF) + payload
    )


def _jpeg_token(rng: random.Random) -> bytes:
    kind = rng.randrange(10)
    if kind <= 2:  # parameterless markers, the confusion this file exists for
        return bytes([0xFF, rng.choice([0x01, *range(0xD0, 0xD8)])])
    if kind == 3:
        return b"\xff" * rng.randint(1, 3)  # fill bytes before the next marker
    if kind == 4:  # a comment or APPn segment, its length right or a little off
        payload = bytes(rng.choice([0x00, 0xFF, 0xC0, 0xD0, rng.randrange(256)]) for _ in range(rng.randint(0, 24)))
        length = None if rng.random() < 0.7 else rng.choice([0, 1, len(payload), len(payload) + 1, len(payload) + 3])
        return _segment(rng.choice([0xFE, *range(0xE0, 0xF0)]), payload, length)
    if kind == 5:  # a comment full of decoy frame headers, one every 19 bytes from a random phase
        decoy = jpeg_frame(rng.randint(1, 40), rng.randint(1, 40), rng.choice([0xC0, 0xC1, 0xC2]))
        size = 200 if rng.random() < 0.8 else 0xFFFD
        phase = rng.randrange(len(decoy))
        return _segment(rng.choice([0xFE, 0xE1]), ((b"\x00" * phase) + decoy * (size // len(decoy) + 1))[:size])
    if kind == 6:  # another frame header
        return jpeg_frame(rng.randint(1, 40), rng.randint(1, 40), rng.choice(sorted(range(0xC0, 0xD0))))
    if kind == 7:
        return _segment(0xDD, b"\x00\x00") if rng.random() < 0.5 else _segment(0xDC, b"\x00\x10")  # DRI, DNL
    if kind == 8:  # markers a decoder refuses (or skips with a warning) before the frame header
        return bytes([0xFF, rng.choice([0x00, 0x02, 0xBF, 0xC8, 0xD8, 0xD9, 0xDA, 0xDE, 0xF0, 0xFD])])
    return bytes([rng.randrange(256)])  # a stray byte


def _misread_decoys(rng: random.Random) -> bytes:
    """Parameterless markers, then a large comment or APPn segment with a decoy frame header
    wherever a parser that read a length after one of those markers would land (the bytes after
    it: the next marker), and decoys every 19 bytes around them."""
    standalone = b"".join(bytes([0xFF, rng.choice([0x01, *range(0xD0, 0xD8)])]) for _ in range(rng.randint(1, 3)))
    marker = rng.choice([0xFE, *range(0xE0, 0xF0)])
    head = standalone + bytes([0xFF, marker])
    payload = bytearray(0xFFFD)
    start = len(head) + 2  # the payload's offset in these bytes
    decoy = jpeg_frame(rng.randint(1, 40), rng.randint(1, 40))
    spots = list(range(rng.randrange(len(decoy)), len(payload) - len(decoy), len(decoy)))
    for at in range(0, len(standalone), 2):
        landing = at + 2 + int.from_bytes(head[at + 2 : at + 4], "big") - start
        if 0 <= landing <= len(payload) - len(decoy):
            spots.append(landing)
    for at in spots:
        payload[at : at + len(decoy)] = decoy
    return head + struct.pack(">H", len(payload) + 2) + bytes(payload)


def _jpeg_markers(rng: random.Random, data: bytes, fmt: str) -> bytes:
    tokens = b"".join(_jpeg_token(rng) for _ in range(rng.randint(1, 5)))
    if rng.random() < 0.15:
        tokens += _misread_decoys(rng)
    if rng.random() < 0.5:
        return data[:2] + tokens + data[2:]
    frames = [at for at in (data.find(b"\xff\xc0"), data.find(b"\xff\xc2")) if at >= 0]
    at = min(frames, default=2)  # before the frame header
    return data[:at] + tokens + data[at:]


# -- PNG: chunks around IHDR --


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _ihdr(rng: random.Random) -> bytes:
    body = struct.pack(">IIBBBBB", rng.randint(0, 40), rng.randint(0, 40), 8, rng.choice([0, 2, 6]), 0, 0, 0)
    return _chunk(b"IHDR", body)


def _png_chunks(rng: random.Random, data: bytes, fmt: str) -> bytes:
    after_ihdr = 8 + 25
    kind = rng.randrange(5)
    if kind == 0:  # a chunk before IHDR
        extra = rng.choice([_ihdr(rng), _chunk(b"tEXt", b"k\x00v"), _chunk(b"aBcD", bytes(rng.randint(0, 9)))])
        return data[:8] + extra + data[8:]
    if kind == 1:  # a second IHDR, or an APNG frame control declaring another size
        fctl = struct.pack(">IIIIIHHBB", 0, rng.randint(1, 40), rng.randint(1, 40), 0, 0, 1, 1, 0, 0)
        extra = rng.choice([_ihdr(rng), _chunk(b"fcTL", fctl), _chunk(b"acTL", struct.pack(">II", 1, 0))])
        return data[:after_ihdr] + extra + data[after_ihdr:]
    if kind == 2:  # IHDR of another size, checksum right
        return data[:8] + _ihdr(rng) + data[after_ihdr:]
    if kind == 3:  # IHDR's length field off
        return data[:8] + struct.pack(">I", rng.choice([0, 12, 14, 0xFFFFFFFF])) + data[12:]
    return data[:after_ihdr] + _chunk(b"IDAT", b"") + data[after_ihdr:]  # an empty IDAT


# -- GIF: the screen, frames and extension blocks --


def _gif_blocks(rng: random.Random, data: bytes, fmt: str) -> bytes:
    out = bytearray(data.ljust(14, b"\x00"))  # a cut one too
    kind = rng.randrange(4)
    if kind == 0:  # another screen size
        struct.pack_into("<HH", out, 6, rng.randint(0, 40), rng.randint(0, 40))
        return bytes(out)
    descriptors = [i for i in range(13, len(out) - 10) if out[i] == 0x2C]
    if kind == 1 and descriptors:  # a frame (or a byte that looks like one) of another place and size
        at = rng.choice(descriptors)
        struct.pack_into(
            "<HHHH", out, at + 1, *(rng.randint(0, 20) for _ in range(2)), rng.randint(0, 40), rng.randint(0, 40)
        )
        return bytes(out)
    flags = out[10]
    start = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    sub_blocks = b"".join(
        bytes([n]) + bytes(rng.randrange(256) for _ in range(n)) for n in (rng.randint(1, 9),) * rng.randint(0, 2)
    )
    if kind == 2:  # an extension block (comment, application, graphic control, plain text)
        label = rng.choice([0xFE, 0xFF, 0xF9, 0x01, rng.randrange(256)])
        ending = b"\x00" if rng.random() < 0.8 else b""
        return bytes(out[:start]) + bytes([0x21, label]) + sub_blocks + ending + bytes(out[start:])
    # a frame of its own: descriptor, LZW minimum code size 2, one sub-block, terminator
    width, height = rng.randint(1, 40), rng.randint(1, 40)
    frame = b"\x2c" + struct.pack("<HHHHB", rng.randint(0, 5), rng.randint(0, 5), width, height, 0)
    frame += b"\x02\x02\x4c\x01\x00"
    end = len(out) - 1
    return bytes(out[:end]) + frame + bytes(out[end:])


# -- BMP: fields of its header, the data sized as TensorFlow wants it --


def _bmp_fields(rng: random.Random, data: bytes, fmt: str) -> bytes:
    out = bytearray(data.ljust(54, b"\x00"))  # a cut one too
    width = rng.choice([struct.unpack_from("<i", out, 18)[0], rng.randint(-3, 30)])
    height = rng.choice([struct.unpack_from("<i", out, 22)[0], rng.randint(-30, 30)])
    bits = rng.choice([struct.unpack_from("<H", out, 28)[0], 8, 16, 24, 25, 32, 33, 0])
    offset = rng.choice([struct.unpack_from("<I", out, 10)[0], rng.randint(0, 80)])
    struct.pack_into("<iiHHI", out, 18, width, height, 1, bits, 0)
    struct.pack_into("<I", out, 10, offset)
    row = ((bits // 8) * width + 3) // 4 * 4
    size = max(offset, 30) + max(row, 0) * abs(height)
    if rng.random() < 0.7 and size < 1 << 16:  # as long as TensorFlow requires: the offset, then padded rows
        out = (out + bytes(max(0, size - len(out))))[:size]
        struct.pack_into("<I", out, 2, rng.choice([len(out), len(out) + 1, 0]))
    return bytes(out)


MUTATORS = {
    "JPEG": [_jpeg_markers, _jpeg_markers, _jpeg_markers, _overwrite, _insert, _cut],
    "PNG": [_png_chunks, _png_chunks, _overwrite, _insert, _cut],
    "GIF": [_gif_blocks, _gif_blocks, _overwrite, _insert, _cut],
    "BMP": [_bmp_fields, _bmp_fields, _overwrite, _cut],
}


def _mutants(fmt: str, count: int):
    """``count`` mutants of ``fmt``'s seeds, each one to three mutations deep, and what made them."""
    rng = random.Random(f"image-headers-{fmt}")
    seeds = _seeds(fmt)
    for _ in range(count):
        data, steps = rng.choice(seeds), []
        for _ in range(rng.choice([1, 1, 2, 3])):
            mutate = rng.choice(MUTATORS[fmt])
            data = mutate(rng, data, fmt)
            steps.append(mutate.__name__)
        yield data, steps


def _jpeg_shape(data: bytes) -> tuple[int, int] | None:
    """``(height, width)`` as libjpeg's header read gives it (no pixel decoded), or None."""
    tf = _tf()
    try:
        return tuple(tf.image.extract_jpeg_shape(data).numpy().tolist()[:2])
    except tf.errors.OpError:
        return None


def _declared(data: bytes, jpeg_shape: tuple[int, int] | None) -> int:
    """How many pixels TensorFlow allocates (and writes) for ``data`` before it can fail, read as
    the decoders read it: libjpeg's header read; IHDR where libpng wants it; a GIF's screen (giflib's
    frame buffers are written only as far as their few bytes of LZW data decode); a BMP's pixels are
    as many as its bytes (TensorFlow checks)."""
    if jpeg_shape is not None:
        return jpeg_shape[0] * jpeg_shape[1]
    if data.startswith(b"\x89PNG") and len(data) >= 24:
        return int.from_bytes(data[16:20], "big") * int.from_bytes(data[20:24], "big")
    if data.startswith(b"GIF8") and len(data) >= 10:
        width, height = struct.unpack_from("<HH", data, 6)
        return width * height
    return 0


def _tf():
    import tensorflow as tf

    return tf


def _decoded(data: bytes) -> tuple[int, int] | None:
    """The ``(height, width)`` TensorFlow decodes ``data`` to, as the readers decode, or None."""
    tf = _tf()
    try:
        image = tf.io.decode_image(data, channels=3, dtype=tf.uint8, expand_animations=False)
    except tf.errors.OpError:
        return None
    return tuple(image.shape[:2])


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF", "BMP"])
def test_the_header_checked_is_the_image_decoded(fmt):
    seen = Counter()
    for data, steps in [(seed, ["seed"]) for seed in _seeds(fmt)] + list(_mutants(fmt, MUTANTS)):
        try:
            header = read_header(data)
        except BadImage:
            header = None
        where = f"{fmt} made by {steps}, starting {data[:48].hex()}: header {header}"
        jpeg_shape = _jpeg_shape(data) if fmt == "JPEG" else None
        if header is not None and jpeg_shape is not None:
            assert jpeg_shape == (header.height, header.width), f"{where}, libjpeg's header read {jpeg_shape}"
        if _declared(data, jpeg_shape) > DECODE_LIMIT:
            seen["too large to decode here"] += 1
            continue
        decoded = _decoded(data)
        if decoded is None:
            continue
        seen["decoded"] += 1
        if header is None:
            continue
        if fmt == "GIF" and decoded != (header.height, header.width):
            # giflib stops at a frame whose LZW data is damaged and TensorFlow decodes the frames
            # before it (logging "failed to slurp gif file"): smaller than the header, never larger.
            assert decoded[0] <= header.height and decoded[1] <= header.width, f"{where}, decoded {decoded}"
            seen["gif frames dropped by giflib"] += 1
        else:
            assert (header.height, header.width) == decoded, f"{where}, decoded {decoded}"
        assert header.pixels >= decoded[0] * decoded[1]
        seen["decoded, header read" if steps == ["seed"] else "mutants decoded, header read"] += 1
    # The fuzzing reached files both sides accept, not only files one side refuses.
    assert seen["mutants decoded, header read"] >= 20, seen


def test_a_decoy_frame_behind_a_restart_marker_is_refused_past_max_pixels():
    """The regression: libjpeg skips RST0 and a comment and decodes 4000x4000 while the header
    once read a decoy 1x1 frame header in the comment, letting the image past max_pixels."""
    tf = _tf()
    out = io.BytesIO()
    PILImage.new("RGB", (4000, 4000), (20, 120, 220)).save(out, format="JPEG")
    data = jpeg_with_decoy_frame(out.getvalue(), 1, 1)
    assert tf.io.decode_image(data, channels=3, expand_animations=False).shape == (4000, 4000, 3)
    header = read_header(data)
    assert (header.height, header.width) == (4000, 4000)
