"""Arrow frames from a peer are validated before anything reads them: offsets past their buffers,
dictionary-encoded or compressed batches, several batches in one frame, and bytes that are not
Arrow at all each become a short ``FeedDataError`` (the node's feed server answers the feeder
with it and goes on serving), never heap bytes in ``map_fun`` or a crashed node."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparkdl.feed.columns import FeedDataError
from sparkdl.feed.server import FeedServer
from sparkdl.feed.wire import decode_batch, encode_batch
from sparkdl.transport.channel import Endpoint, connect, new_secret

pytestmark = pytest.mark.timeout(60)


def _stream(schema, *batches, **options) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(**options)) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _offsets_past_the_buffer() -> bytes:
    """A valid frame of two lists, its offsets [0, 2, 4] patched to [0, 2, 4000]: the second list
    would end far outside the values buffer (what a malicious peer sends to read heap bytes)."""
    lists = pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32()))
    frame = encode_batch(pa.record_batch([lists], names=["features"])).to_pybytes()
    offsets = np.array([0, 2, 4], dtype=np.int32).tobytes()
    assert frame.count(offsets) == 1
    return frame.replace(offsets, np.array([0, 2, 4000], dtype=np.int32).tobytes())


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
    "offsets past the buffer": (_offsets_past_the_buffer, "invalid Arrow frame"),
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


def test_the_feed_server_answers_a_malformed_frame_naming_it_and_keeps_serving():
    secret = new_secret()
    server = FeedServer(secret, "127.0.0.1", endpoint=Endpoint.feed("test-cluster", 0))
    try:
        with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
            channel.send(
                {"type": "train", "session": 1, "partition": 7, "epoch": 0, "split": "train", "qname": "input"}
            )
            channel.send_bytes(_offsets_past_the_buffer())
            reply = channel.recv(timeout=10)
        assert reply["type"] == "error" and "invalid Arrow frame" in reply["message"]
        assert len(reply["message"]) < 300
        good = pa.record_batch({"x": pa.array([1.0, 2.0, 3.0])})
        # the server goes on serving
        with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
            channel.send(
                {"type": "train", "session": 1, "partition": 8, "epoch": 0, "split": "train", "qname": "input"}
            )
            channel.send_bytes(encode_batch(good))
            channel.send({"type": "done", "rows": 3})
            assert channel.recv(timeout=10) == {"type": "ack", "rows": 3}
    finally:
        server.terminated.set()
        server.close()
