"""A row larger than the channel carries in one frame (issue 53 item 3): ``cluster.train`` and
``cluster.inference`` fail naming its column, partition and row, instead of losing the node."""

from __future__ import annotations

import pytest

from sparkdl import TFCluster
from sparkdl.driver import feeding
from sparkdl.feed.columns import FeedDataError
from sparkdl.transport.channel import MAX_FRAME_BYTES

import feed_functions as feed_fns

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK
TOO_BIG = r"a row of 67,108,8\d\d bytes, more than a frame of the feed can carry"


def blobs(sc, rows: int, partitions: int, big: int):
    """An RDD of ``rows`` tuples ``(bytes, label)`` in ``partitions`` partitions of consecutive
    numbers: one byte, or ``MAX_FRAME_BYTES + 1`` bytes for row ``big`` (made on the executor)."""
    size = MAX_FRAME_BYTES + 1
    return sc.parallelize(range(rows), partitions).map(lambda i: (bytes(size) if i == big else b"x", float(i)))


def test_a_row_larger_than_a_frame_fails_train_and_inference_naming_column_partition_and_row(
    sc2, tmp_path, monkeypatch
):
    monkeypatch.setattr(feeding, "CAUSE_WAIT_S", 120.0)  # the data is the cause: no wait for a node report
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    try:
        # rows 0..2 in partition 0, 3..5 in partition 1: row 4 is row 1 of partition 1, in column "0"
        with pytest.raises(FeedDataError, match=rf"column '0', partition 1, row 1: {TOO_BIG}"):
            cluster.train(blobs(sc2, 6, 2, big=4), 1)
        # the task fails before it sends a frame: the node, which reads no inference, need not answer
        with pytest.raises(Exception, match=rf"column '0', partition 0, row 2: {TOO_BIG}"):
            cluster.inference(blobs(sc2, 3, 1, big=2)).collect()
    finally:
        cluster.shutdown(timeout=120)
