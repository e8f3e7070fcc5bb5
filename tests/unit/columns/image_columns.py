"""Image columns for the column tests: encoded images and Spark's image structs."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
from PIL import Image as PILImage


def encoded(height: int, width: int, mode: str = "RGB", fmt: str = "PNG") -> bytes:
    pixels = np.arange(height * width * len(mode), dtype=np.uint8).reshape(height, width, len(mode))
    out = io.BytesIO()
    PILImage.fromarray(pixels.squeeze(-1) if mode == "L" else pixels, mode).save(out, format=fmt)
    return out.getvalue()


def image_structs(shapes: list[tuple[int, int, int]], modes=None) -> pa.Array:
    """Spark's image struct (``spark.read.format("image")``) with BGR pixels of the given shapes."""
    rows = []
    for i, (h, w, c) in enumerate(shapes):
        mode = (modes or {}).get(i, {1: 0, 3: 16, 4: 24}[c])
        data = bytes(np.full(h * w * c, i, np.uint8))
        rows.append(
            {"origin": f"file:/img{i}.png", "height": h, "width": w, "nChannels": c, "mode": mode, "data": data}
        )
    return pa.array(rows)
