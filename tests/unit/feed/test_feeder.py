"""Node-side streams are bounded in time (issue 12, finding 5), over real sockets on 127.0.0.1.

A feeder names its ``feed_timeout`` in its stream's first message; the node waits no longer than
that for a frame from it, nor for it to take a frame of results. A silent feeder is dropped and
releases the node's inference turn; a feeder that stops reading its results fails its own Spark
task, while ``map_fun``'s ``batch_results`` returns and the node serves the next stream. Channel
sockets keep TCP alive, and a send to a peer that never reads gives up.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from feed_servers import Worker, feed_rows, labelled, make_server, secret, send_end, send_plan, server, target  # noqa: F401 - fixtures

from sparkdl.columns.arrow_rows import ORIGIN
from sparkdl.feed import feeder
from sparkdl.feed.columns import FeedDataError
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.feeder import FeedError
from sparkdl.feed.shares import balanced_shares
from sparkdl.feed.wire import encode_batch
from sparkdl.transport import channel
from sparkdl.transport.channel import (
    AuthenticationError,
    connect,
)

from node_feeds import (
    infer,
    serve_inference,
    start_big_feed,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)


RESULT_FLOATS = 16384  # 64 KiB of results per row: a few batches fill the socket buffers


def test_a_feeder_that_stops_reading_its_results_fails_its_task_not_map_fun(server, secret):
    durations: list[float] = []
    consumer = serve_inference(
        DataFeed(server, train_mode=False, feed_timeout=30),
        lambda batch: np.zeros((len(batch), RESULT_FLOATS), np.float32),
        durations,
    )
    stalled = feeder.infer_partition(
        target(secret, server, feed_timeout=2.0), 0, 0, feeder.rdd_batches(list(range(2000)))
    )  # 128 MiB of results
    try:
        assert len(next(stalled)) == 64  # its first results arrive; then its task reads no more
        # map_fun's batch_results gives up on that task after its feed_timeout, answers the rest of the
        # partition without waiting, and serves the next partition.
        rest = Worker(infer, target(secret, server, feed_timeout=30.0), 1, [100, 200])
        results = rest.outcome(timeout=30)
        assert len(results) == 2 and all(r.shape == (RESULT_FLOATS,) for r in results)
        assert consumer.is_alive() and consumer.error is None, "map_fun failed with its feeder"
        assert max(durations) < 10, f"batch_results was held {max(durations):.1f} s by a task that stopped reading"
        # The stalled task fails when it reads again: its node dropped the stream.
        with pytest.raises(FeedError, match="lost node worker:0 during inference on partition 0"):
            Worker(list, stalled).outcome(timeout=30)
    finally:
        stalled.close()
    send_end(server, secret)
    consumer.outcome()


def test_a_training_feeder_that_goes_silent_is_dropped_and_its_task_fails(server, secret, caplog):
    send_plan(server, secret, 1, 20)
    resume = threading.Event()
    first, second = feeder.rdd_batches(labelled(10)), feeder.rdd_batches(labelled(10, start=10))

    def batches():  # a partition whose second half takes long to compute
        yield from first
        resume.wait(30)
        yield from second

    worker = Worker(
        feeder.feed_training_partition,
        target(secret, server, feed_timeout=1.0),
        1,
        0,
        0,
        balanced_shares([20], 1),
        batches(),
    )
    with caplog.at_level(logging.WARNING, logger="sparkdl.feed.server"):
        assert wait_until(lambda: "sent nothing for 1 s" in caplog.text), "the node never dropped a silent feeder"
    resume.set()
    with pytest.raises(FeedError, match=r"dropped partition 0: .*sent nothing for 1 s \(feed_timeout\)"):
        worker.outcome(timeout=30)


def test_feed_timeout_when_the_node_never_reads(make_server, secret):
    server = make_server(1024)
    start = time.monotonic()
    _, worker = start_big_feed(secret, server, [], feed_timeout=1.0)
    with pytest.raises(FeedError, match="Timeout while feeding partition 0 to node worker:0"):
        worker.outcome(30)
    assert time.monotonic() - start < 20


def test_wrong_secret_is_rejected(server, secret):
    wrong = target(b"not the secret", server)
    with pytest.raises(FeedError, match="refused this feeder's credentials"):  # never mistaken for a gone node
        feed_rows(wrong, labelled(5))
    with pytest.raises(FeedError, match="refused this feeder's credentials") as info:
        list(feeder.infer_partition(wrong, 0, 0, feeder.rdd_batches([1.0, 2.0])))
    assert isinstance(info.value.__cause__, AuthenticationError)
    with pytest.raises(AuthenticationError):
        connect(server.address, b"not the secret", timeout=10, endpoint=server.endpoint)
    assert server._server.rejected == 3
    queue = server.queue("input")
    assert queue.nbytes == 0
    with pytest.raises(TimeoutError):  # nothing was queued
        queue.peek(0)


def blobs(sizes, fill: bool = False) -> pa.RecordBatch:
    """A batch of an int64 ``id`` and a binary ``blob`` of ``sizes[i]`` bytes in row ``i`` (zeros,
    left unwritten unless ``fill``: a gigabyte of them costs no memory until read)."""
    sizes = np.asarray(sizes, np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    data = np.zeros(int(offsets[-1]), np.uint8)
    if fill:
        data[:] = np.resize(np.arange(251, dtype=np.uint8), len(data))
    blob = pa.BinaryArray.from_buffers(pa.binary(), len(sizes), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.RecordBatch.from_arrays([pa.array(np.arange(len(sizes))), blob], names=["id", "blob"])


#: Issue 53 item 3: 9,500 rows of 10 kB and 500 of 2 MB in one batch. Cut by their average size
#: (109.5 kB: 38 rows a frame), the 2 MB rows made 76,000,448-byte frames, past the channel's limit.
SKEWED_ROWS = [10_000] * 9_500 + [2_000_000] * 500


def test_the_reported_skewed_batch_is_cut_into_frames_the_channel_carries():
    batch = blobs(SKEWED_ROWS)
    pieces = feeder.frames(batch)
    assert [p.num_rows for p in pieces] and sum(p.num_rows for p in pieces) == batch.num_rows
    assert pa.concat_arrays([p["id"] for p in pieces]).to_numpy().tolist() == list(range(batch.num_rows))
    largest = max(pieces, key=lambda p: p.nbytes)
    with_origins = largest.append_column(ORIGIN, pa.array(np.zeros(largest.num_rows, np.int64)))  # as training sends it
    assert len(encode_batch(with_origins)) <= channel.MAX_FRAME_BYTES
    assert max(p.nbytes for p in pieces) <= feeder.FRAME_TARGET_BYTES, "rows no larger than the target share frames"
    small = [p.num_rows for p in pieces if p["id"][0].as_py() < 9_000]
    assert min(small) > 300, "the small rows still travel in frames of ~4 MiB, not one or two at a time"


def test_a_skewed_batch_reaches_its_node_whole_in_frames_within_the_limit(server, secret, monkeypatch):
    """The skewed batch above scaled down 64 times, over real sockets, the channel's limit lowered to
    1 MiB and the frame target to 64 KiB (the same ratios). Cut by the average row, a frame of 37
    large rows (1.18 MB) went past the limit and the node dropped the stream."""
    monkeypatch.setattr(channel, "MAX_FRAME_BYTES", 1 << 20)
    monkeypatch.setattr(feeder, "FRAME_TARGET_BYTES", 1 << 16)
    sizes = [size // 64 for size in SKEWED_ROWS]
    batch = blobs(sizes, fill=True)
    send_plan(server, secret, 1, len(sizes))
    sent = feeder.feed_training_partition(target(secret, server), 1, 0, 0, balanced_shares([len(sizes)], 1), [batch])
    assert sent == (len(sizes), 0), "the node took every frame"
    got = DataFeed(server, feed_timeout=10, input_mapping={"id": "id", "blob": "blob"}).next_batch(len(sizes))
    assert got["id"].tolist() == list(range(len(sizes)))
    assert [len(b) for b in got["blob"]] == sizes and got["blob"][-1] == batch["blob"][-1].as_py()


def oversized_batches(first_rows: int = 4, big_row: int = 1):
    """A partition whose second batch holds, at its row ``big_row``, one value larger than a frame."""
    yield blobs([10] * first_rows)
    yield blobs([10, 10, 10][:big_row] + [channel.MAX_FRAME_BYTES + 1] + [10])


def test_a_row_larger_than_a_frame_fails_training_naming_column_partition_and_row(server, secret):
    send_plan(server, secret, 1, 8)
    shares = balanced_shares([0] * 5 + [8], 1)  # partition 5
    with pytest.raises(FeedDataError, match=r"column 'blob', partition 5, row 5: a row of 67,108,8\d\d bytes"):
        feeder.feed_training_partition(target(secret, server, feed_timeout=5.0), 1, 0, 5, shares, oversized_batches())


def test_a_row_larger_than_a_frame_fails_inference_naming_column_partition_and_row(server, secret):
    with pytest.raises(FeedDataError, match=r"column 'blob', partition 7, row 1: a row of 67,108,8\d\d bytes"):
        list(feeder.infer_partition(target(secret, server, feed_timeout=5.0), 0, 7, oversized_batches(0, 1)))
