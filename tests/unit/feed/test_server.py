"""sparkdl.feed.server over real sockets: a malformed frame or a silent feeder is answered or
dropped, and the server serves on."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from feed_servers import Worker, make_server, secret, send_end, server, target  # noqa: F401 - fixtures

from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.server import FeedServer
from sparkdl.feed.wire import encode_batch
from sparkdl.transport.channel import ChannelError, Endpoint, connect, new_secret

from malformed_frames import offsets_past_the_buffer
from node_feeds import infer, serve_inference, wait_until

pytestmark = pytest.mark.timeout(60)


def test_the_feed_server_answers_a_malformed_frame_naming_it_and_keeps_serving():
    secret = new_secret()
    server = FeedServer(secret, "127.0.0.1", endpoint=Endpoint.feed("test-cluster", 0))
    try:
        with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
            channel.send(
                {"type": "train", "session": 1, "partition": 7, "epoch": 0, "split": "train", "qname": "input"}
            )
            channel.send_bytes(offsets_past_the_buffer())
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


@pytest.mark.timeout(120)
def test_a_silent_inference_feeder_is_dropped_and_releases_the_nodes_turn(server, secret):
    consumer = serve_inference(DataFeed(server, train_mode=False, feed_timeout=30), lambda b: [v + 1 for v in b])
    silent = connect(server.address, secret, timeout=10, endpoint=server.endpoint)
    try:
        silent.send({"type": "infer", "partition": 0, "qname": "input", "timeout": 1.0})  # ... and nothing more
        assert wait_until(server._inference_turn.locked), "the silent stream never took the node's turn"
        start = time.monotonic()
        served = Worker(infer, target(secret, server, feed_timeout=30.0), 1, [1, 2, 3])
        assert served.outcome(timeout=20) == [2, 3, 4], "the next partition waited on a silent feeder"
        assert time.monotonic() - start < 10
        notice = silent.recv(timeout=5)
        assert notice["type"] == "dropped" and "inference partition 0" in notice["message"]
        assert "feed_timeout" in notice["message"]
        with pytest.raises(ChannelError):  # and its channel is closed
            silent.recv(timeout=5)
    finally:
        silent.close()
    send_end(server, secret)
    consumer.outcome()
