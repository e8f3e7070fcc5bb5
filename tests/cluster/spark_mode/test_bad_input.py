"""Bad input on a live cluster: a clear error naming the problem, or documented behaviour; never a
hang or a silent drop. ``cluster.inference`` returns exactly one result per row or raises."""

from __future__ import annotations

import json
import math
import time

import pytest

from sparkdl import ClusterError, TFCluster
from sparkdl.driver import feeding
from sparkdl.feed.columns import FeedDataError

import feed_functions as feed_fns

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK


@pytest.fixture
def spark(sc2):
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


@pytest.mark.parametrize(
    "answer,message", [("fewer", "got 9 results for a batch of 10 rows"), ("more", "more results than rows were read")]
)
def test_inference_with_a_wrong_number_of_results_raises(sc2, tmp_path, answer, message):
    cluster = TFCluster.run(sc2, feed_fns.infer_wrong_count, {"answer": answer}, 2, input_mode=SPARK)
    results = cluster.inference(sc2.parallelize([(float(i),) for i in range(200)], 4))
    with pytest.raises(Exception, match=r"chief:0|worker:0"):  # the Spark job fails, naming the node
        results.collect()
    with pytest.raises(ClusterError, match=message):  # the node's own error, with its traceback
        cluster.shutdown(timeout=120)


def test_nan_labels_are_fed_unchanged(sc2, spark, tmp_path):
    """Documented behaviour: NaN is a valid float; sparkdl feeds it as is (filter it in Spark, or
    let Keras's TerminateOnNaN stop a diverging fit)."""
    rows = [([1.0, 2.0], float("nan") if i == 7 else 1.0) for i in range(100)]
    frame = spark.createDataFrame(rows, "x array<float>, y double")
    args = {"out": str(tmp_path), "mapping": {"x": "x", "y": "y"}, "label_key": "y"}
    cluster = TFCluster.run(sc2, feed_fns.count_feed, args, 2, input_mode=SPARK)
    cluster.train(frame, 1)
    cluster.shutdown(timeout=120)
    nodes = [json.loads(p.read_text()) for p in tmp_path.glob("node*.json")]
    assert sorted(n["rows"] for n in nodes) == [50, 50]
    assert sorted(math.isnan(n["label_sum"]) for n in nodes) == [False, True]


def test_nulls_are_rejected_naming_the_column_before_any_node_reads(sc2, spark, tmp_path, monkeypatch):
    # The data is the cause: train() raises without waiting for a node failure to explain the
    # failed job (with that wait made longer than the whole test could take, a wait would show).
    monkeypatch.setattr(feeding, "CAUSE_WAIT_S", 120.0)
    frame = spark.createDataFrame([([1.0], 1.0), ([2.0], None)], "x array<float>, y double").coalesce(1)
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    try:
        started = time.monotonic()
        with pytest.raises(FeedDataError, match=r"column 'y', partition 0, row 1: a null value"):
            cluster.train(frame, 1)
        assert time.monotonic() - started < feeding.CAUSE_WAIT_S, "a data error waited for a node report"
    finally:
        cluster.shutdown(timeout=120)
