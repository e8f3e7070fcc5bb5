"""Streaming training on an elastic cluster (``TFCluster.run(min_executors=...)``) on
local-cluster[3,1,1024]: a node whose executor Spark removes for good mid-stream leaves the query
training on the survivors, as ``cluster.train`` does (tests/cluster/spark_mode/test_elastic.py)."""

from __future__ import annotations

import json
import os
import threading

import pytest
from elastic_checks import set_executors

from sparkdl import TFCluster

import streaming_functions as sf
from node_functions import wait_for_file

# stops_spark: after it, Spark's executors have new ids, which the exactly-once tests on this Spark rely on
pytestmark = [pytest.mark.timeout(420), pytest.mark.stops_spark]
ROWS_PER_BATCH = 12  # shares out evenly over 3 nodes and over 2


def _write(folder, name: str, ids) -> None:
    tmp = folder.parent / f".{name}"
    tmp.write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    # The file source takes files oldest first: one second apart per part, so part-N is micro-batch N
    # (files written in the same instant come in any order).
    stamp = 1_700_000_000 + int(name.split("-")[1].split(".")[0])
    os.utime(tmp, (stamp, stamp))
    tmp.rename(folder / name)  # a file source must never see half a file


def test_a_node_lost_for_good_mid_stream_leaves_the_query_training_on_the_survivors(sc3, tmp_path):
    """Issue 53 item 13c: the lost node failed the query (a ClusterError from awaitTermination);
    now the cluster is resized to the two nodes Spark can host and micro-batch 1, which the lost node
    never read, is trained again on them, then the rest of the stream."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    set_executors(sc3, 3)
    source, out = tmp_path / "source", tmp_path / "out"
    source.mkdir(), out.mkdir()
    for batch in range(3):
        _write(source, f"part-{batch}.json", range(batch * ROWS_PER_BATCH, (batch + 1) * ROWS_PER_BATCH))
    args = {"out": str(out), "hold_node": 2, "hold_batch": 1}
    cluster = TFCluster.run(
        sc3, sf.elastic_ids, args, 3, input_mode=TFCluster.InputMode.SPARK, min_executors=2, elastic_wait=2,
        executor_wait_timeout=3,
    )  # fmt: skip
    try:
        frame = spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(source))
        stream = cluster.train_stream(frame, str(tmp_path / "query"))
        done: dict = {}

        def process() -> None:
            try:
                stream.processAllAvailable()
                done["ok"] = True
            except Exception as exc:  # noqa: BLE001 - the test reports it
                done["error"] = exc

        thread = threading.Thread(target=process, daemon=True)
        thread.start()
        assert wait_for_file(str(out / "held.json"), 180), "worker:1 never reached micro-batch 1"
        victim = json.loads((out / "held.json").read_text())["executor"]
        assert victim, "the node could not tell its Spark executor"
        sc3._jsc.sc().killExecutor(victim)  # for good: Spark starts no replacement
        thread.join(300)
        assert not thread.is_alive(), "processAllAvailable did not return"
        assert done == {"ok": True}, done
        assert stream.isActive
        _write(source, "part-3.json", range(3 * ROWS_PER_BATCH, 4 * ROWS_PER_BATCH))  # one more, on the survivors
        stream.processAllAvailable()
        training = stream.training
        stream.stop()
        cluster.shutdown(timeout=120)
    finally:
        (out / "held-release").touch()
        set_executors(sc3, 3)  # the next tests on this Spark expect three executors

    assert training["batches_trained"] == 4 and training["last_batch_id"] == 3, training
    assert [(r["from_nodes"], r["to_nodes"]) for r in cluster.resizes] == [(3, 2)]
    assert "lost its Spark executor" in cluster.resizes[0]["reason"]
    assert cluster.restarts == 0 and cluster.num_nodes == 2
    # Each micro-batch's rows all reached the nodes of the last attempt that read it, each row once.
    reads = [event for events in sf.read_events(out).values() for event in events if event["event"] == "read"]
    for batch in range(4):
        last = max(event["attempt"] for event in reads if event["batch"] == batch)
        records = [event for event in reads if event["batch"] == batch and event["attempt"] == last]
        assert (last, len(records)) == ((0, 3) if batch == 0 else (1, 2)), (batch, records)
        assert {event["nodes"] for event in records} == {len(records)}
        ids = sorted(i for event in records for i in event["ids"])
        assert ids == list(range(batch * ROWS_PER_BATCH, (batch + 1) * ROWS_PER_BATCH)), (batch, records)
