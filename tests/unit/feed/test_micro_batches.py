"""``feed.micro_batches()`` over real sockets, without TensorFlow: each micro-batch (a training run
whose plan carries Spark's batch id) read with ``MicroBatch.next_batch`` in a loop ends at its own
end. (With a model and its checkpoint: tests/cluster/streaming/test_stream_training.py.)"""

import threading

import pytest
from feed_servers import Worker, driver_send, feed_rows, labelled, make_server, secret, send_end, server, target  # noqa: F401

from sparkdl.feed.data_feed import DataFeed
from sparkdl.transport import protocol

pytestmark = pytest.mark.timeout(60)

ROWS = 1000


def send_micro_batch(server, secret, session: int, batch_id: int, rows: int) -> None:
    """The driver's plan of one micro-batch: a training run of one epoch carrying ``batch_id``."""
    plan = protocol.TrainingPlan(
        session=session, epochs=1, rows_per_epoch=rows, cache=False, shuffle=False, batch_id=batch_id
    )
    driver_send(server, secret, protocol.Plan(plan).wire())


def test_next_batch_in_a_loop_ends_at_the_micro_batch_end(server, secret):
    """Issue 40 item 5: after the batch's last rows, next_batch moved on to the next run and waited
    feed_timeout for it (while the driver waited for this batch's save): it now returns an empty batch."""
    send_micro_batch(server, secret, session=1, batch_id=0, rows=ROWS)
    feed_rows(target(secret, server), labelled(ROWS), session=1)
    read, body_ended = [], threading.Event()

    def loop():
        feed = DataFeed(server, feed_timeout=5)
        for batch in feed.micro_batches():
            try:
                while rows := batch.next_batch(300):
                    read.append(len(rows))
            finally:
                body_ended.set()

    reader = Worker(loop)
    assert body_ended.wait(30), f"the loop body did not end (read {read})"
    send_end(server, secret)
    reader.outcome(30)  # raised TimeoutError: the loop waited 5 s (feed_timeout) for the next run's rows
    assert read == [300, 300, 300, 100]


def test_next_batch_with_input_mapping_gives_empty_arrays_at_the_micro_batch_end(server, secret):
    send_micro_batch(server, secret, session=1, batch_id=4, rows=10)
    feed_rows(target(secret, server), labelled(10), session=1)
    feed = DataFeed(server, feed_timeout=5, input_mapping={"0": "x", "1": "y"})
    batch = next(iter(feed.micro_batches()))
    assert batch.batch_id == 4 and len(batch.next_batch(8)["y"]) == 8
    assert len(batch.next_batch(8)["y"]) == 2
    assert {name: len(column) for name, column in batch.next_batch(8).items()} == {"x": 0, "y": 0}
