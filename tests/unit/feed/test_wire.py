"""Arrow frames from a peer are validated before anything reads them: offsets past their buffers,
dictionary-encoded or compressed batches, several batches in one frame, and bytes that are not
Arrow at all each become a short ``FeedDataError`` (the node's feed server answers the feeder
with it and goes on serving), never heap bytes in ``map_fun`` or a crashed node."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.feed.columns import (
    FeedDataError,
)
from sparkdl.feed.wire import decode_batch, encode_batch

from malformed_frames import offsets_past_the_buffer

pytestmark = pytest.mark.timeout(60)


def _stream(schema, *batches, **options) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(**options)) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _compressed() -> bytes:
    batch = pa.record_batch({"x": pa.array(np.zeros(1 << 20, dtype=np.float32))})  # 4 MiB of zeros
    return _stream(batch.schema, batch, compression="zstd")


def _dictionary() -> bytes:
    batch = pa.record_batch({"s": pa.array(["a", "b"] * 1000).dictionary_encode()})
    return _stream(batch.schema, batch)


def _two_batches() -> bytes:
    batch = pa.record_batch({"x": pa.array([1.0, 2.0])})
    return _stream(batch.schema, batch, batch)


MALFORMED = {
    "offsets past the buffer": (offsets_past_the_buffer, "invalid Arrow frame"),
    "compressed": (_compressed, "compressed record batches are not accepted"),
    "dictionary": (_dictionary, "dictionary-encoded columns are not accepted"),
    "two batches": (_two_batches, "a frame must hold one record batch"),
    "not arrow": (lambda: b"\xff\xff\xff\xff" + b"\x00" * 64, "invalid Arrow frame"),
    "truncated": (
        lambda: encode_batch(pa.record_batch({"x": pa.array([1.0] * 100)})).to_pybytes()[:-40],
        "invalid Arrow frame",
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_frame_is_a_short_feed_data_error(case):
    make, expected = MALFORMED[case]
    with pytest.raises(FeedDataError, match=expected) as caught:
        decode_batch(make())
    assert len(str(caught.value)) < 300


def test_encode_decode_round_trip():
    batch = pa.RecordBatch.from_pydict(
        {"x": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32())), "y": [7, 8], "s": ["a", "b"]}
    )
    buffer = encode_batch(batch)
    back = decode_batch(buffer)
    assert back.equals(batch) and back.schema == batch.schema
    assert decode_batch(bytearray(buffer.to_pybytes())).equals(batch)  # as a channel delivers it
