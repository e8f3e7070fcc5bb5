"""The InputMode.SPARK data plane over real sockets: feeder functions -> FeedServer -> DataFeed.
(``as_dataset``, which needs TensorFlow: tests/cluster/spark_mode/test_node_feed_cluster.py.)"""

import threading

import numpy as np
import pyarrow as pa
import pytest
from feed_servers import (  # noqa: F401 - fixtures
    Worker,
    driver_send,
    feed_rows,
    labelled,
    make_server,
    secret,
    send_end,
    send_plan,
    server,
    target,
)

from sparkdl.feed import feeder
from sparkdl.feed.columns import FeedDataError
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.shares import balanced_shares
from sparkdl.transport import protocol
from sparkdl.transport.clients import FeedClient

from node_feeds import BIG_BATCHES, FRAME_ROWS, ROW_FLOATS, big_batches, start_big_feed

pytestmark = pytest.mark.timeout(120)


SMALL_QUEUE = 64 * 1024


def watch_queue(server):
    """Record the queue's peak size and signal once it is full (wraps its ``put``)."""
    queue = server.queue("input")
    state = {"peak": 0, "frame": 0, "full": threading.Event()}
    put = queue.put

    def tracking_put(item, nbytes=0, timeout=None, **kwargs):
        put(item, nbytes, timeout, **kwargs)
        state["frame"] = max(state["frame"], nbytes)
        state["peak"] = max(state["peak"], queue.nbytes)
        if queue.nbytes >= queue.max_bytes:
            state["full"].set()

    queue.put = tracking_put
    return queue, state


def test_next_batch_rows_in_order(server, secret):
    send_plan(server, secret, 1, 2500)
    assert feed_rows(target(secret, server), labelled(2500)) == (2500, 0)  # 3 frames of <= 1024 rows
    feed = DataFeed(server, feed_timeout=10)
    batches = [feed.next_batch(1000) for _ in range(3)]
    assert [len(b) for b in batches] == [1000, 1000, 500]
    rows = [row for batch in batches for row in batch]
    assert [label for _, label in rows] == list(range(2500))
    assert all(x.tolist() == [i, -i] for i, (x, _) in enumerate(rows))
    assert not feed.should_stop()  # no "end" yet
    send_end(server, secret)
    assert feed.should_stop() and feed.next_batch(10) == []


def test_input_mapping_returns_arrays_by_tensor(server, secret):
    send_plan(server, secret, 1, 7)
    feed_rows(target(secret, server), labelled(7))
    feed = DataFeed(server, input_mapping={"0": "features", "1": "label"}, feed_timeout=10)
    batch = feed.next_batch(5)
    assert set(batch) == {"features", "label"}
    assert batch["features"].dtype == np.float32 and batch["features"].shape == (5, 2)
    assert batch["label"].tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(feed.next_batch(5)["features"], [[5, -5], [6, -6]])


def test_should_stop_only_after_end_and_every_row(server, secret):
    feed_rows(target(secret, server), labelled(10))
    send_end(server, secret)
    feed = DataFeed(server, feed_timeout=10)
    assert not feed.should_stop()
    assert len(feed.next_batch(4)) == 4 and not feed.should_stop()
    assert len(feed.next_batch(6)) == 6
    assert feed.should_stop()


def test_runs_end_their_last_batch_and_never_mix(server, secret):
    tgt = target(secret, server)
    send_plan(server, secret, 1, 10)
    feed_rows(tgt, labelled(10), session=1)
    feed = DataFeed(server, feed_timeout=5)  # waiting for run 2's data would raise TimeoutError
    labels = [[label for _, label in feed.next_batch(4)] for _ in range(3)]
    assert labels == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    send_plan(server, secret, 2, 7)
    feed_rows(tgt, labelled(7, start=100), session=2)
    send_plan(server, secret, 3, 3)
    feed_rows(tgt, labelled(3, start=200), session=3)  # queued right behind run 2
    labels = [[label for _, label in feed.next_batch(4)] for _ in range(3)]
    assert labels == [[100, 101, 102, 103], [104, 105, 106], [200, 201, 202]]


def test_a_read_waiting_when_the_plan_arrives_ends_at_the_run_end(server, secret):
    # map_fun loops on next_batch(64) between two cluster.train calls: the read starts before the
    # second run's plan. It must still return that run's 7 rows without waiting for more (the
    # driver's train() waits for this node to read them: waiting here would deadlock both).
    tgt = target(secret, server)
    send_plan(server, secret, 1, 3)
    feed_rows(tgt, labelled(3), session=1)
    feed = DataFeed(server, feed_timeout=10)
    assert len(feed.next_batch(64)) == 3
    reader = Worker(feed.next_batch, 64)
    send_plan(server, secret, 2, 7)
    feed_rows(tgt, labelled(4, start=100), session=2, partition=0)
    feed_rows(tgt, labelled(3, start=104), session=2, partition=1)
    assert [label for _, label in reader.outcome(timeout=8)] == list(range(100, 107))


def test_the_driver_hears_once_when_a_run_is_read_in_full(make_server, secret):
    events = []
    server = make_server()
    server.notify = lambda event: events.append((event.TYPE, getattr(event, "session", None)))
    send_plan(server, secret, 1, 5, epochs=2)
    feed_rows(target(secret, server), labelled(5), session=1, epoch=0)
    feed_rows(target(secret, server), labelled(5), session=1, epoch=1)
    feed = DataFeed(server, feed_timeout=10)
    assert len(feed.next_batch(6)) == 6 and events == []
    assert len(feed.next_batch(6)) == 4
    assert events == [("feed_consumed", 1)]
    send_end(server, secret)
    assert feed.next_batch(6) == [] and events == [("feed_consumed", 1)]


def test_a_run_whose_validation_epochs_were_skipped_still_ends(make_server, secret):
    """Keras' validation_freq=2 reads no validation rows in some epochs: once fit ends (the progress
    callback's on_train_end), cluster.train must return."""
    events = []
    server = make_server()
    server.notify = lambda event: events.append(event.TYPE)
    plan = protocol.TrainingPlan(session=1, epochs=2, rows_per_epoch=5, validation_rows=3, cache=False, shuffle=False)
    driver_send(server, secret, protocol.Plan(plan).wire())
    tgt = target(secret, server)
    for epoch in (0, 1):
        feed_rows(tgt, labelled(5), session=1, epoch=epoch)
        header_plan = balanced_shares([3], 1)
        feeder.feed_training_partition(tgt, 1, epoch, 0, header_plan, feeder.rdd_batches(labelled(3)), "validation")
    feed = DataFeed(server, feed_timeout=10)
    assert len(feed.next_batch(10)) == 10  # every training row; no validation row read
    assert events == [], "Keras may still validate the last epoch"
    server.fit_ended()
    assert events == ["feed_consumed"]


def id_batches(ids):
    """Frames of FRAME_ROWS rows (float32[ROW_FLOATS] "x" and "i", both the row's id)."""
    for start in range(0, len(ids), FRAME_ROWS):
        part = np.asarray(ids[start : start + FRAME_ROWS], dtype=np.int64)
        x = pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(part.astype(np.float32), ROW_FLOATS)), ROW_FLOATS)
        yield pa.RecordBatch.from_arrays([x, pa.array(part)], names=["x", "i"])


@pytest.mark.parametrize("cache", [True, False])
def test_validation_rows_of_epochs_keras_did_not_validate_never_hold_up_the_feed(make_server, secret, cache):
    """validation_freq=2 over 3 epochs, a validation share 4x the node's queue: Keras reads no
    validation rows in epochs 1 and 3. Once Keras ends such an epoch (the progress callback's
    on_epoch_end), the node drops its unread validation rows, queued or still to come, so their
    feeding task ends instead of waiting on a queue nobody reads (it was dropped after feed_timeout,
    again and again), epoch 1 still settles the cache, and the run is read in full."""
    events = []
    server = make_server(SMALL_QUEUE)
    server.notify = lambda event: events.append(event.TYPE)
    rows, validation_rows = 2 * FRAME_ROWS, 8 * FRAME_ROWS  # 64 KiB and 256 KiB of rows a node per epoch
    plan = protocol.TrainingPlan(
        session=1, epochs=3, rows_per_epoch=rows, validation_rows=validation_rows, cache=cache, shuffle=False
    )
    driver_send(server, secret, protocol.Plan(plan).wire())
    tgt = target(secret, server, feed_timeout=20)
    client = FeedClient(server.address, secret, server.endpoint, "chief:0")

    def drive():  # the driver: each epoch's training rows, then its validation rows; then the cache
        for epoch in range(1 if cache else 3):
            for split, count in (("train", rows), ("validation", validation_rows)):
                ids = range(epoch * 1000, epoch * 1000 + count)
                got = feeder.feed_training_partition(
                    tgt, 1, epoch, 0, balanced_shares([count], 1), id_batches(ids), split
                )
                assert got == (count, 0), f"{split} rows of epoch {epoch + 1} all delivered"
        if cache:
            assert client.seal_cache("input", 1, 10) is None, "epoch 1's validation rows are cached, read or not"
            client.use_cache("input", 1, True, 10)

    driver = Worker(drive)
    feed = DataFeed(server, input_mapping={"i": "i"}, feed_timeout=30)
    validated = None
    for epoch in range(3):
        assert len(feed.next_batch(rows)["i"]) == rows
        if epoch == 1:  # the one epoch Keras validates
            columns, _, count = feed.reader.read_run(1, "validation", validation_rows)
            validated = np.asarray(columns["i"])
        server.epoch_ended(epoch)
    driver.outcome(30)
    first = 0 if cache else 1000  # from the cache: epoch 1's rows; from Spark: epoch 2's own
    assert validated.tolist() == list(range(first, first + validation_rows))
    assert events == ["feed_consumed"], "every split read in full: the driver's train() returns"


def test_runs_never_mix_without_plans(server, secret):
    tgt = target(secret, server)
    feed_rows(tgt, labelled(5), session=1)
    feed_rows(tgt, labelled(5, start=100), session=2)
    feed = DataFeed(server, feed_timeout=5)
    sizes = [[label for _, label in feed.next_batch(4)] for _ in range(3)]
    assert sizes == [[0, 1, 2, 3], [4], [100, 101, 102, 103]]


def test_balanced_plan_over_two_nodes(make_server, secret):
    nodes = [make_server(), make_server()]
    partitions = [list(range(0, 7)), [], list(range(7, 19))]  # 19 rows -> 10 per node
    plan = balanced_shares([len(p) for p in partitions], 2)
    for node in nodes:
        send_plan(node, secret, 1, plan.rows_per_node)
    tgt = target(secret, *nodes)
    for index, rows in enumerate(partitions):
        got = feeder.feed_training_partition(tgt, 1, 0, index, plan, feeder.rdd_batches(rows))
        assert got == (len(rows), 0)
    received = [DataFeed(node, feed_timeout=5).next_batch(100) for node in nodes]  # ints come back bare
    # Rows are striped (even rows to node 0, odd to node 1); node 1 gets one extra copy (row 0).
    assert received == [list(range(0, 19, 2)), [1, 3, 5, 0] + list(range(7, 19, 2))]


def test_backpressure_blocks_the_feeder_and_bounds_the_queue(make_server, secret):
    server = make_server(SMALL_QUEUE)
    queue, state = watch_queue(server)
    produced = []
    total, worker = start_big_feed(secret, server, produced)
    assert state["full"].wait(30), "the queue never filled"
    worker.join(1.0)  # the consumer has not read: the feeder must still be blocked
    assert worker.is_alive() and len(produced) < BIG_BATCHES
    bound = SMALL_QUEUE + state["frame"]
    assert queue.nbytes <= bound
    feed = DataFeed(server, input_mapping={"i": "i"}, feed_timeout=30)
    ids = []
    while sum(map(len, ids)) < total:
        ids.append(feed.next_batch(4096)["i"])
        assert queue.nbytes <= bound
    assert worker.outcome() == (total, 0)
    np.testing.assert_array_equal(np.concatenate(ids), np.arange(total))
    assert state["peak"] <= bound and state["frame"] < 64 * 1024


def test_terminate_stops_a_large_feed(make_server, secret):
    server = make_server(SMALL_QUEUE)
    queue, state = watch_queue(server)
    produced = []
    total, worker = start_big_feed(secret, server, produced)
    assert state["full"].wait(30)
    feed = DataFeed(server, feed_timeout=30)
    assert len(feed.next_batch(10)) == 10 and not feed.should_stop()
    feed.terminate()
    sent, skipped = worker.outcome()  # returns without error, reporting the node as skipped
    assert skipped == 1 and 10 <= sent < total and len(produced) < BIG_BATCHES
    assert feed.should_stop() and queue.nbytes == 0


def test_inference_routes_results_per_partition(server, secret):
    tgt = target(secret, server)
    partitions = {p: [float(p * 10000 + i) for i in range(2500)] for p in (0, 1)}
    feed = DataFeed(server, train_mode=False, feed_timeout=30)
    batches = []

    def consume():
        while not feed.should_stop():
            batch = feed.next_batch(300)
            if batch:  # the RDD's floats, bare
                batches.append(batch)
                feed.batch_results(np.array([value * 2 for value in batch]))

    consumer = Worker(consume)

    def infer(p):
        return [r for results in feeder.infer_partition(tgt, 0, p, feeder.rdd_batches(partitions[p])) for r in results]

    inferrers = {p: Worker(infer, p) for p in partitions}
    for p, worker in inferrers.items():
        assert worker.outcome() == [2 * v for v in partitions[p]]
    send_end(server, secret)
    consumer.outcome()
    assert all(len({int(v) // 10000 for v in batch}) == 1 for batch in batches), "a batch mixed partitions"
    assert sorted(v for batch in batches for v in batch) == sorted(partitions[0] + partitions[1])
    assert max(map(len, batches)) == 300


def test_a_partition_left_unread_does_not_break_the_node(server, secret):
    """``first()`` / ``take(n)`` stop reading a partition's results early: the node drops the rest
    of that partition's results and serves the next partition."""
    tgt = target(secret, server)
    feed = DataFeed(server, train_mode=False, feed_timeout=30)

    def consume():
        while not feed.should_stop():
            batch = feed.next_batch(10)
            if batch:
                feed.batch_results([value + 1 for value in batch])

    consumer = Worker(consume)
    partial = feeder.infer_partition(tgt, 0, 0, feeder.rdd_batches(list(range(3000))))
    assert next(partial)[0] == 1
    partial.close()  # as PySpark does once take(1) has its row
    rest = [r for results in feeder.infer_partition(tgt, 0, 1, feeder.rdd_batches([100, 200])) for r in results]
    assert rest == [101, 201]
    send_end(server, secret)
    consumer.outcome()  # map_fun never saw an error


def test_batch_results_rejects_extra_results(server, secret):
    feed = DataFeed(server, train_mode=False, feed_timeout=5)
    with pytest.raises(ValueError, match="more results than rows"):
        feed.batch_results([1.0])


def test_data_error_names_the_column(server, secret):
    batch = pa.RecordBatch.from_pydict({"label": [1, 2, 3], "feature": pa.array([1.0, None, 3.0], pa.float32())})
    plan = balanced_shares([3], 1)
    with pytest.raises(FeedDataError, match=r"'feature'.*null"):
        feeder.feed_training_partition(target(secret, server), 1, 0, 0, plan, [batch])
    assert server.queue("input").nbytes == 0


def test_data_error_behind_a_full_queue_names_the_column(make_server, secret):
    server = make_server(SMALL_QUEUE)
    _, state = watch_queue(server)
    bad = pa.RecordBatch.from_pydict(
        {"x": next(big_batches(1)).column(0), "i": pa.array([None] + list(range(1, FRAME_ROWS)), pa.int64())}
    )

    def batches():  # the bad frame sits behind a full queue, with far more data behind it
        yield from big_batches(3)
        yield bad
        yield from big_batches(BIG_BATCHES)

    total = (4 + BIG_BATCHES) * FRAME_ROWS
    worker = Worker(
        feeder.feed_training_partition, target(secret, server), 1, 0, 0, balanced_shares([total], 1), batches()
    )
    assert state["full"].wait(30)
    worker.join(1.0)  # let the feeder fill the socket buffers: it is blocked in a send
    assert worker.is_alive()
    feed = DataFeed(server, feed_timeout=30)
    assert len(feed.next_batch(3 * FRAME_ROWS)) == 3 * FRAME_ROWS  # the node now reads the bad frame
    with pytest.raises(FeedDataError, match=r"'i'.*null"):
        worker.outcome()


def test_rows_edited_in_place_leave_later_cached_epochs_as_fed(server, secret):
    """TFoS node code may scale next_batch's rows in place. Epochs 2..N replay the node's cache, and
    an epoch that fits one replay window is served from the same buffer again: the rows handed out
    must be their own, so every epoch reads the rows as fed (DataFrame rows: no element metadata)."""
    rows = 20
    plan = protocol.TrainingPlan(session=1, epochs=3, rows_per_epoch=rows, cache=True, shuffle=False)
    driver_send(server, secret, protocol.Plan(plan).wire())
    x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    frame = pa.RecordBatch.from_arrays(
        [pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 4), pa.array(np.arange(rows))], names=["x", "i"]
    )
    assert feeder.feed_training_partition(target(secret, server), 1, 0, 0, balanced_shares([rows], 1), [frame]) == (
        rows,
        0,
    )
    client = FeedClient(server.address, secret, server.endpoint, "chief:0")
    assert client.seal_cache("input", 1, 10) is None
    client.use_cache("input", 1, True, 10)
    feed = DataFeed(server, feed_timeout=10)
    for epoch in range(3):
        batch = feed.next_batch(8) + feed.next_batch(8) + feed.next_batch(4)
        assert [i for _, i in batch] == list(range(rows))
        assert all(features.tolist() == x[i].tolist() for features, i in batch), f"epoch {epoch + 1} as fed"
        for features, _ in batch:
            features *= -1  # map_fun's in-place preprocessing
