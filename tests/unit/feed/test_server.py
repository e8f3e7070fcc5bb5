"""sparkdl.feed.server over real sockets: a malformed frame or a silent feeder is answered or
dropped, and the server serves on."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
from feed_servers import Worker, driver_send, make_server, secret, send_end, server, target  # noqa: F401 - fixtures

from sparkdl.feed import feeder
from sparkdl.feed.columns import FeedDataError
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.server import FeedServer
from sparkdl.feed.shares import balanced_shares
from sparkdl.feed.wire import encode_batch
from sparkdl.transport import protocol
from sparkdl.transport.channel import ChannelError, Endpoint, connect, new_secret
from sparkdl.transport.clients import FeedClient

from malformed_frames import offsets_past_the_buffer
from node_feeds import infer, sequences_batch, serve_inference, wait_until

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


def test_a_list_column_is_one_kind_whatever_width_a_frame_has_and_every_epoch_is_read(server, secret):
    """Issue 53, item 1: a DataFrame's ``array<float>`` column reaches the node as a fixed-size list
    per frame whenever the frame's rows agree in length. Validation rows of another width are the
    same column (not "another type"), and the cached epoch 2 serves both splits as epoch 1 did."""
    plan = protocol.TrainingPlan(session=1, epochs=2, rows_per_epoch=16, validation_rows=8, shuffle=False)
    driver_send(server, secret, protocol.Plan(plan).wire())
    tgt = target(secret, server)
    training = balanced_shares([8, 8], 1)
    for partition, width in ((0, 3), (1, 5)):
        batch = sequences_batch(partition * 8, [width] * 8)
        assert feeder.feed_training_partition(tgt, 1, 0, partition, training, [batch]) == (8, 0)
    validation = sequences_batch(100, [4] * 8)
    assert feeder.feed_training_partition(tgt, 1, 0, 0, balanced_shares([8], 1), [validation], "validation") == (8, 0)
    client = FeedClient(server.address, secret, server.endpoint, "chief:0")
    assert client.seal_cache("input", 1, 10) is None
    client.use_cache("input", 1, True, 10)
    feed = DataFeed(server, feed_timeout=10)
    widths = {"train": {i: 3 if i < 8 else 5 for i in range(16)}, "validation": {i: 4 for i in range(100, 108)}}
    for _ in range(2):
        for split, rows in (("train", 16), ("validation", 8)):
            columns, _, count = feed.reader.read_run(1, split, rows)
            assert count == rows
            x = columns["x"].tolist() if isinstance(columns["x"], np.ndarray) else columns["x"].to_pylist()
            assert x == [[float(i)] * widths[split][i] for i in columns["i"]]


def test_rdd_arrays_of_another_shape_in_validation_are_still_refused_naming_the_column(server, secret):
    """An RDD's arrays are tensors of one shape (``rows_to_record_batch``): validation arrays of
    another width are refused, naming the column, as before."""
    plan = protocol.TrainingPlan(session=1, epochs=1, rows_per_epoch=4, validation_rows=4, cache=False, shuffle=False)
    driver_send(server, secret, protocol.Plan(plan).wire())
    tgt = target(secret, server)
    rows = [(np.array([i, -i], np.float32), i) for i in range(4)]
    assert feeder.feed_training_partition(tgt, 1, 0, 0, balanced_shares([4], 1), feeder.rdd_batches(rows)) == (4, 0)
    wider = [(np.array([i, -i, i], np.float32), i) for i in range(4)]
    with pytest.raises(FeedDataError, match=r"validation column '0' is float32\[3\] but the training column is"):
        feeder.feed_training_partition(tgt, 1, 0, 0, balanced_shares([4], 1), feeder.rdd_batches(wider), "validation")
