"""sparkdl.columns.image_headers: an image's size and channels from its header, damage named."""

from __future__ import annotations

import pytest

from sparkdl.columns.image_headers import BadImage, read_header

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
