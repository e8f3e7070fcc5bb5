"""``FeedReader``'s waits over real sockets: a read that waits longer than the feed's ``feed_timeout``
raises ``FeedTimeout``, a SparkDLError that is still a TimeoutError, naming what it waited for.
(Reading itself: test_data_feed.py, test_micro_batches.py.)"""

import pyarrow as pa
import pytest
from feed_servers import driver_send, feed_rows, labelled, make_server, secret, send_plan, server, target  # noqa: F401

from sparkdl.common.errors import FeedTimeout, SparkDLError
from sparkdl.feed import feeder
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.shares import balanced_shares
from sparkdl.transport import protocol

pytestmark = pytest.mark.timeout(60)


def test_next_batch_with_nothing_fed_raises_a_feed_timeout_naming_the_wait(server):
    """Issue 53 item 13a: it was a bare TimeoutError('no data arrived within 0.3 s')."""
    feed = DataFeed(server, feed_timeout=0.3)
    with pytest.raises(FeedTimeout) as raised:
        feed.next_batch(10)
    error = raised.value
    assert isinstance(error, SparkDLError) and isinstance(error, TimeoutError)  # user code catching either still does
    assert "waited 0.3 s (feed_timeout) for the driver's next training run or its rows" in str(error)
    assert "ctx.get_data_feed(feed_timeout=...)" in str(error)


def test_waiting_for_the_plan_names_the_training_run_and_cluster_train(server):
    feed = DataFeed(server, feed_timeout=0.3)
    plan = r"for the plan of training run 1 \(cluster.train call 1\) \(has the driver called cluster.train\(\)\?\)"
    with pytest.raises(FeedTimeout, match=plan):
        feed.steps_per_epoch(8)


def test_rows_that_stop_coming_mid_run_name_the_run_and_how_many_were_read(server, secret):
    send_plan(server, secret, 1, 10)
    feed_rows(target(secret, server), labelled(4), session=1)  # 4 of the 10 planned rows
    feed = DataFeed(server, feed_timeout=0.3)
    assert len(feed.next_batch(4)) == 4
    with pytest.raises(FeedTimeout, match=r"for more rows of training run 1 \(4 of its 10 read\)"):
        feed.next_batch(4)


def test_an_inference_read_names_the_partition_wait(server):
    feed = DataFeed(server, train_mode=False, feed_timeout=0.3)
    with pytest.raises(FeedTimeout, match=r"for the feed's next rows \(an inference partition's or a training run's\)"):
        feed.next_batch(4)  # it waits for whatever the feed sends next


def test_validation_rows_that_differ_from_training_only_in_nullability_are_read(server, secret):
    """Issue 53 item 13b, on the node: ``cluster.train`` accepts validation_data whose types differ
    only in what they declare nullable (``check_same_columns``), so the node must too. A column that
    stays Arrow (strings, arrays of varying length) was refused there as "validation column 'tokens'
    is list<element: string not null> but the training column is list<element: string>"."""

    def batch(rows: int, nullable: bool) -> pa.RecordBatch:
        item = pa.field("element", pa.string(), nullable=nullable)
        tokens = pa.array([["a"] * (i % 3 + 1) for i in range(rows)], pa.list_(item))
        return pa.RecordBatch.from_arrays([tokens, pa.array(range(rows), pa.int64())], names=["tokens", "i"])

    plan = protocol.TrainingPlan(session=1, epochs=1, rows_per_epoch=4, validation_rows=3, cache=False, shuffle=False)
    driver_send(server, secret, protocol.Plan(plan).wire())
    tgt = target(secret, server)
    assert feeder.feed_training_partition(tgt, 1, 0, 0, balanced_shares([4], 1), [batch(4, True)]) == (4, 0)
    validation = [batch(3, False)]
    assert feeder.feed_training_partition(tgt, 1, 0, 0, balanced_shares([3], 1), validation, "validation") == (3, 0)
    reader = DataFeed(server, feed_timeout=10).reader
    columns, _, count = reader.read_run(1, "validation", 3)
    assert count == 3 and columns["tokens"].to_pylist() == [["a"], ["a", "a"], ["a", "a", "a"]]
