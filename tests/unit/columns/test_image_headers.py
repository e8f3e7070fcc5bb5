"""sparkdl.columns.image_headers: an image's size and channels from its header, damage named."""

from __future__ import annotations

import pytest

from sparkdl.columns.image_headers import BadImage, read_header

from image_bombs import gif_frames_bomb, jpeg_frame, jpeg_with_decoy_frame
from image_columns import encoded

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "fmt, mode, channels",
    [("PNG", "RGB", 3), ("PNG", "L", 1), ("PNG", "RGBA", 4), ("JPEG", "RGB", 3), ("GIF", "RGB", 3), ("BMP", "RGB", 3)],
)
def test_image_headers_give_size_and_channels(fmt, mode, channels):
    header = read_header(encoded(5, 7, mode, fmt))
    assert (header.format, header.height, header.width, header.channels) == (fmt.lower(), 5, 7, channels)


@pytest.mark.parametrize("cut", ["truncated", "flipped", "text"])
def test_damaged_images_are_refused_saying_why(cut):
    png = encoded(8, 8)
    data = {
        "truncated": png[: len(png) // 2],
        "flipped": png[:40] + bytes([png[40] ^ 0xFF]) + png[41:],
        "text": b"this is not an image at all",
    }[cut]
    with pytest.raises(
        BadImage, match={"truncated": "truncated PNG", "flipped": "CRC", "text": "not a PNG, JPEG"}[cut]
    ):
        read_header(data)
    jpeg = encoded(8, 8, fmt="JPEG")
    with pytest.raises(BadImage, match="truncated JPEG"):
        read_header(jpeg[: len(jpeg) - 100])


def _jpeg_with(inserted: bytes, height: int = 6, width: int = 9) -> bytes:
    """A whole JPEG of ``height`` x ``width`` with ``inserted`` between its SOI and its first segment."""
    jpeg = encoded(height, width, fmt="JPEG")
    return jpeg[:2] + inserted + jpeg[2:]


def test_a_decoy_frame_behind_a_restart_marker_is_not_taken_for_the_image():
    """RST0 has no length: a parser that read one landed on a 1x1 frame header hidden in a comment,
    while libjpeg skips RST0 and the comment and decodes the real 4000x4000 image (past max_pixels)."""
    real = encoded(4000, 4000, fmt="JPEG")
    header = read_header(jpeg_with_decoy_frame(real, 1, 1))
    assert (header.height, header.width, header.pixels) == (4000, 4000, 16_000_000)


@pytest.mark.parametrize(
    "inserted",
    [
        b"\xff\xd0",  # RST0: stands alone, no length
        b"".join(bytes([0xFF, m]) for m in range(0xD0, 0xD8)) + b"\xff\x01",  # RST0-7 and TEM
        b"\xff\xff\xff\xfe\x00\x04ab",  # fill bytes before a comment
        b"\xff\xdd\x00\x04\x00\x00",  # DRI
        b"\xff\xe5\x00\x02",  # an empty APP5 segment
        b"\xff\xfe\x00\x15" + jpeg_frame(1, 1)[:19],  # a frame header inside a comment
    ],
    ids=["rst0", "rst-tem", "fill", "dri", "empty-app", "frame-in-comment"],
)
def test_jpeg_markers_are_walked_as_the_decoder_walks_them(inserted):
    header = read_header(_jpeg_with(inserted))
    assert (header.format, header.height, header.width, header.channels) == ("jpeg", 6, 9, 3)


def test_the_first_jpeg_frame_header_gives_the_size():
    """libjpeg refuses a second frame header; either way the first is the one it would decode."""
    assert read_header(_jpeg_with(jpeg_frame(2, 3, 0xC2)))[1:3] == (2, 3)


@pytest.mark.parametrize(
    "inserted, why",
    [
        (b"\xff\xda\x00\x02", "marker 0xda"),  # start of scan before any frame
        (b"\xff\xd9", "marker 0xd9"),  # end of image
        (b"\xff\xd8", "marker 0xd8"),  # a second SOI
        (b"\xff\x02\x00\x02", "marker 0x02"),  # reserved
        (b"\xff\xc8\x00\x02", "marker 0xc8"),  # JPG, reserved
        (b"\xff\xf0\x00\x02", "marker 0xf0"),  # JPG0
        (b"\xff\x00", "marker 0x00"),  # a stuffed zero, only valid in entropy-coded data
        (b"\x00\xff\xd0", "no marker at byte 2"),  # garbage libjpeg would skip
        (b"\xff\xfe\x00\x00", "length 0"),  # libjpeg would skip 4 bytes, not 2
        (b"\xff\xfe\x00\x01", "length 1"),
        (b"\xff\xc0\x00\x0b\x08\x00\x01\x00\x01\x03", "frame header of 3 components in 11 bytes"),
        (b"\xff\xc0\x00\x11\x08\x00\x00\x00\x01\x03" + bytes(9), "size 1x0"),
    ],
    ids=[
        "sos",
        "eoi",
        "soi",
        "reserved",
        "jpg",
        "jpg0",
        "stuffed-zero",
        "garbage",
        "length-0",
        "length-1",
        "short-frame",
        "no-height",
    ],
)
def test_a_jpeg_the_decoder_would_read_otherwise_is_refused(inserted, why):
    with pytest.raises(BadImage, match=f"corrupt JPEG: .*{why}"):
        read_header(_jpeg_with(inserted))


@pytest.mark.parametrize("cut", [3, 4, 5, 12])
def test_a_jpeg_cut_before_its_frame_header_is_refused(cut):
    jpeg = encoded(6, 9, fmt="JPEG")
    with pytest.raises(BadImage, match="corrupt JPEG"):
        read_header(jpeg[:cut] + b"\xff\xd9")


def test_a_gif_is_as_large_as_its_tallest_and_widest_frames():
    """TensorFlow ignores a GIF's logical screen and decodes to the tallest frame's height and the
    widest frame's width: two frames of 30,000 pixels (34 kB) on a 1x1 screen decode to
    30000x30000, 2.7 GB, which the screen and the frames' own sizes once let past max_pixels."""
    header = read_header(gif_frames_bomb(((1, 30000), (30000, 1)), screen=(1, 1)))
    assert (header.height, header.width, header.pixels) == (30000, 30000, 900_000_000)
    header = read_header(gif_frames_bomb(((4, 3), (2, 9), (6, 1)), screen=(50, 50)))
    assert (header.height, header.width, header.pixels) == (6, 9, 54)
    header = read_header(gif_frames_bomb(((5, 7),) * 4))  # giflib holds every frame: 4 x 35 pixels
    assert (header.height, header.width, header.pixels) == (5, 7, 140)
    with pytest.raises(BadImage, match="corrupt GIF: no image in it"):
        read_header(gif_frames_bomb((), screen=(5, 7)))
