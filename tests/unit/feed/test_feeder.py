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
import pytest
from feed_servers import Worker, feed_rows, labelled, make_server, secret, send_end, send_plan, server, target  # noqa: F401 - fixtures

from sparkdl.feed import feeder
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.feeder import FeedError
from sparkdl.feed.shares import balanced_shares
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
