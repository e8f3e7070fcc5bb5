"""Frames a malicious or broken peer could send a feed server."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkdl.feed.wire import encode_batch


def offsets_past_the_buffer() -> bytes:
    """A valid frame of two lists, its offsets [0, 2, 4] patched to [0, 2, 4000]: the second list
    would end far outside the values buffer (what a malicious peer sends to read heap bytes)."""
    lists = pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32()))
    frame = encode_batch(pa.record_batch([lists], names=["features"])).to_pybytes()
    offsets = np.array([0, 2, 4], dtype=np.int32).tobytes()
    assert frame.count(offsets) == 1
    return frame.replace(offsets, np.array([0, 2, 4000], dtype=np.int32).tobytes())
