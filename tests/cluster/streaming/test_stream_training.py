"""Structured Streaming into a live cluster (cluster.train_stream) on a real two-executor Spark.
(The schema drift check without Spark: tests/unit/driver/test_streaming.py.)"""

from __future__ import annotations

import json
import os

import pytest

from sparkdl import ClusterError, TFCluster
from sparkdl.feed.columns import FeedDataError

import streaming_functions as sf

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK
SCHEMA = "id long, x array<double>, y double"


def write_file(folder, name: str, ids, null_x: bool = False) -> None:
    """One JSON-lines file of rows ``{id, x: [id % 5, 1.0], y: id % 3}`` (``x`` null with ``null_x``)."""
    rows = [{"id": i, "x": None if null_x else [float(i % 5), 1.0], "y": float(i % 3)} for i in ids]
    tmp = folder.parent / f".{name}"
    tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))
    tmp.rename(folder / name)  # a file source must never see half a file


@pytest.fixture
def spark(sc2):
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def stream_of(spark, folder):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(folder))


def test_micro_batches_train_under_mwms_and_a_drifted_batch_stops_the_query(sc2, spark, tmp_path):
    source, out = tmp_path / "source", tmp_path / "out"
    source.mkdir(), out.mkdir()
    for index in range(3):
        write_file(source, f"part-{index}.json", range(index * 24, index * 24 + 24))
    args = {"out": str(out), "model_dir": str(tmp_path / "model")}
    cluster = TFCluster.run(sc2, sf.mwms_stream, args, 2, input_mode=SPARK)
    with pytest.raises(TypeError, match="train_stream"):
        cluster.train(stream_of(spark, source))
    stream = cluster.train_stream(stream_of(spark, source), str(tmp_path / "query"))
    stream.processAllAvailable()
    assert stream.isActive
    assert stream.training["batches_trained"] == 3 and stream.training["rows_trained"] == 72
    assert stream.training["last_batch_id"] == 2
    write_file(source, "part-3.json", [])  # an empty micro-batch: counted, never sent to the nodes
    stream.processAllAvailable()
    assert stream.training["empty_batches"] == 1 and stream.training["batches_trained"] == 3
    write_file(source, "part-4.json", range(72, 80), null_x=True)  # JSON without a usable x: nulls
    with pytest.raises(FeedDataError, match=r"micro-batch 4: .*'x'.*null"):
        stream.processAllAvailable()
    assert not stream.isActive
    cluster.shutdown(timeout=120)
    events = sf.read_events(out)
    for node in (0, 1):
        trained = [e for e in events[node] if e["event"] == "trained"]
        assert [e["batch"] for e in trained] == [0, 1, 2]
        assert [e["rows"] for e in trained] == [12, 12, 12]  # each batch shared out evenly
        assert trained[-1]["steps"] > trained[0]["steps"] > 0
        assert events[node][-1] == {"event": "end", "batch": 2, "steps": trained[-1]["steps"]}


def test_a_node_failure_stops_the_query_with_its_traceback(sc2, spark, tmp_path):
    source, out = tmp_path / "source", tmp_path / "out"
    source.mkdir(), out.mkdir()
    for index in range(2):
        write_file(source, f"part-{index}.json", range(index * 8, index * 8 + 8))
    # The failure is the node's, not TensorFlow's: a map_fun without TensorFlow (no TF import per node).
    args = {"out": str(out), "fail_at": 1}
    cluster = TFCluster.run(sc2, sf.failing_stream, args, 2, input_mode=SPARK)
    stream = cluster.train_stream(stream_of(spark, source), str(tmp_path / "query"))
    with pytest.raises(ClusterError, match="failing on micro-batch 1") as failure:
        stream.awaitTermination(240)
    assert "RuntimeError" in str(failure.value)
    assert not stream.isActive and stream.training["last_batch_id"] == 0
    with pytest.raises(ClusterError):
        cluster.shutdown(timeout=60)


def test_a_micro_batch_whose_feeding_task_fails_part_way_is_trained_once(sc2, spark, tmp_path):
    source, out, marker = tmp_path / "source", tmp_path / "out", tmp_path / "failed-once"
    source.mkdir(), out.mkdir()
    for index in range(2):
        write_file(source, f"part-{index}.json", range(index * 2000, (index + 1) * 2000))
    flaky = stream_of(spark, source).mapInPandas(sf.flaky_rows(str(marker), 1000, 250), SCHEMA)
    # What the feed delivers is the question, not training: the node counts ids without TensorFlow.
    args = {"out": str(out), "ids": 4000}
    cluster = TFCluster.run(sc2, sf.counting_ids, args, 1, input_mode=SPARK)
    stream = cluster.train_stream(flaky, str(tmp_path / "query"))
    stream.processAllAvailable()
    stream.stop()
    cluster.shutdown(timeout=120)
    assert marker.exists()  # micro-batch 0's first feeding task failed after 1,000 rows, and was retried
    events = sf.read_events(out)[0]
    assert [e["batch"] for e in events if e["event"] == "trained"] == [0, 1]
    assert events[-1]["event"] == "end" and events[-1]["seen"] == [1] * 4000  # every id trained once


def test_a_first_micro_batch_cut_short_is_rolled_back_before_its_replay(sc2, spark, tmp_path):
    """Issue 40 item 4: micro-batch 0's query fails part-way (its feeding task fails after 3,000 of 4,000
    rows, its retries at once), so the node trained part of it; the restarted query replays it. No
    checkpoint existed yet to roll back to, so the saved model held batch 0's first rows twice; the
    node now goes back to its state before the batch."""
    source, out, failing = tmp_path / "source", tmp_path / "out", tmp_path / "failing"
    source.mkdir(), out.mkdir()
    write_file(source, "part-0.json", range(4000))
    failing.touch()
    args = {"out": str(out), "ids": 4000, "model_dir": str(tmp_path / "model")}
    cluster = TFCluster.run(sc2, sf.counting_stream, args, 1, input_mode=SPARK)
    # Frames of 500 rows: Spark's 64 KiB stream buffer passes some to the feeding task before the failure.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        for run in range(2):
            flaky = stream_of(spark, source).mapInPandas(sf.failing_while(str(failing), 3000), SCHEMA)
            stream = cluster.train_stream(flaky, str(tmp_path / "query"))
            if run == 0:
                with pytest.raises(FeedDataError, match="micro-batch 0: .*failing source"):
                    stream.awaitTermination(240)
                failing.unlink()
            else:
                stream.processAllAvailable()
                stream.stop()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    cluster.shutdown(timeout=120)
    events = sf.read_events(out)[0]
    trained = [e for e in events if e["event"] == "trained"]
    assert [e["batch"] for e in trained] == [0, 0]
    assert 0 < len(trained[0]["ids"]) < 4000 and len(trained[1]["ids"]) == 4000, "cut short, then replayed whole"
    assert trained[1]["iterations"] == 1, "the replay started from the state before the batch"
    assert events[-1]["event"] == "end" and events[-1]["batch"] == 0
    assert events[-1]["seen"] == [1] * 4000, "the saved model holds every row of batch 0 once"


def test_nodes_that_end_their_feed_stop_the_query_quietly_leaving_the_batch_uncommitted(sc2, spark, tmp_path):
    source, out = tmp_path / "source", tmp_path / "out"
    source.mkdir(), out.mkdir()
    for index in range(3):
        write_file(source, f"part-{index}.json", range(index * 4, index * 4 + 4))
    args = {"out": str(out), "ids": 12, "stop_at": 1}
    cluster = TFCluster.run(sc2, sf.counting_ids, args, 1, input_mode=SPARK)  # no TensorFlow needed
    stream = cluster.train_stream(stream_of(spark, source), str(tmp_path / "query"))
    stream.awaitTermination(240)  # ends without raising: map_fun returned
    assert not stream.isActive and stream.exception() is None
    assert stream.training["last_batch_id"] == 0
    commits = sorted(name for name in os.listdir(tmp_path / "query" / "commits") if not name.startswith("."))
    assert commits == ["0"]  # batch 1 stays for a later run (Hadoop's .crc files aside)
    cluster.shutdown(timeout=120)
