"""TensorFlowOnSpark's Spark Streaming API: ``cluster.train(dstream)`` and ``cluster.shutdown(ssc)``.

Real DStreams (``ssc.queueStream`` of small RDDs) on the two-executor Spark, fed to two TF nodes
that read them the TFoS way (``next_batch`` until ``should_stop()``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sparkdl import ClusterError, TFCluster

import feed_functions as feed_fns

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK
BATCH_S = 1.0  # the streams' batch interval


def read_ids_then_terminate(args, ctx):
    """TFoS's reading loop: read ids until this node has its share, then end the feed."""
    feed = ctx.get_data_feed(feed_timeout=120)
    ids = []
    while not feed.should_stop():
        ids.extend(int(row) for row in feed.next_batch(4))
        if len(ids) >= args["per_node"]:
            feed.terminate()
    record = {"ids": ids, "should_stop": feed.should_stop()}
    Path(args["out"], f"node{ctx.node_number}.json").write_text(json.dumps(record))


def read_json(directory: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


@pytest.fixture
def streaming(sc2):
    """A StreamingContext on ``sc2`` (stopped afterwards, leaving ``sc2`` running)."""
    from pyspark.streaming import StreamingContext

    ssc = StreamingContext(sc2, BATCH_S)
    yield ssc
    ssc.stop(stopSparkContext=False, stopGraceFully=False)


def test_every_streamed_row_is_read_once_and_shutdown_stops_the_stream(sc2, streaming, tmp_path):
    # 30 ids in two RDDs (even sizes: each node gets half of each, none repeated) and empty ones.
    rdds = [sc2.parallelize(range(0, 10), 2), sc2.parallelize([], 2), sc2.emptyRDD(), sc2.parallelize(range(10, 30), 3)]
    cluster = TFCluster.run(sc2, read_ids_then_terminate, {"out": str(tmp_path), "per_node": 15}, 2, input_mode=SPARK)
    cluster.train(streaming.queueStream(rdds), feed_timeout=60)
    streaming.start()
    started = time.monotonic()
    cluster.shutdown(streaming, timeout=120)
    assert time.monotonic() - started < 150
    assert streaming.awaitTerminationOrTimeout(0)  # shutdown(ssc) stopped the StreamingContext
    nodes = read_json(tmp_path)
    assert sorted(nodes) == ["node0", "node1"]
    assert [len(n["ids"]) for n in nodes.values()] == [15, 15]
    assert sorted(nodes["node0"]["ids"] + nodes["node1"]["ids"]) == list(range(30))
    assert all(n["should_stop"] for n in nodes.values())
    state = cluster._handle.dstream_feed  # the DStreamFeed the handle keeps (driver/cluster_handle.py)
    assert state.fed == 2  # one session per non-empty RDD; the empty ones and later intervals cost none
    assert state.empty >= 2


def test_a_node_failing_mid_stream_fails_shutdown_and_stops_the_stream(sc2, streaming):
    rdds = [sc2.parallelize(range(i * 40, (i + 1) * 40), 2) for i in range(3)]
    cluster = TFCluster.run(sc2, feed_fns.fail_after_first_batch, {}, 2, input_mode=SPARK)
    cluster.train(streaming.queueStream(rdds), feed_timeout=60)
    streaming.start()
    started = time.monotonic()
    # The node fails, and the batch being fed fails with it, before the driver calls shutdown(ssc).
    assert cluster._coordinator.wait_until(lambda c: c.aborted is not None, 60)  # train() stopped the cluster
    with pytest.raises(ClusterError, match="sentinel 91c2") as caught:
        cluster.shutdown(streaming, timeout=120)
    assert time.monotonic() - started < 60
    assert streaming.awaitTerminationOrTimeout(0)
    failure = caught.value.failures[0]
    assert failure.label in ("chief:0", "worker:0") and "RuntimeError" in failure.traceback
    cluster.shutdown(streaming)  # the failure was raised once; the cluster is closed


def test_shutdown_returns_when_the_user_stopped_the_stream(sc2, streaming, tmp_path):
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    cluster.train(streaming.queueStream([sc2.parallelize([(1.0, float(i)) for i in range(20)], 2)]))
    streaming.start()
    # A graceful stop lets the batch due at the next tick (the queued RDD) be fed to the end.
    streaming.stop(stopSparkContext=False, stopGraceFully=True)
    started = time.monotonic()
    cluster.shutdown(streaming, timeout=120)  # nodes that never terminate their feed: it ends here
    assert time.monotonic() - started < 60
    nodes = read_json(tmp_path)
    assert [n["rows"] for n in nodes.values()] == [10, 10]
    assert sum(n["label_sum"] for n in nodes.values()) == sum(range(20))
