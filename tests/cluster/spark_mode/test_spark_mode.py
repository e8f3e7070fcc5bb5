"""InputMode.SPARK on a real two-executor Spark: feeding RDDs and DataFrames to TF nodes."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from sparkdl import ClusterError, ClusterStateError, InputModeError, TFCluster
from sparkdl.feed.columns import FeedDataError

import feed_functions as feed_fns
import node_functions as nf
from conftest import read_json_files

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK


@pytest.fixture
def spark(sc2):
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def skewed_rdd(sc, sizes):
    """An RDD whose partition i holds sizes[i] rows ``([4 floats], label)``, label = global row number."""
    offsets = np.cumsum([0, *sizes])

    def rows(index, _):
        for row in range(int(offsets[index]), int(offsets[index + 1])):
            yield ([float(row % 7), 1.0, -1.0, 0.5], float(row))

    return sc.parallelize(range(len(sizes)), len(sizes)).mapPartitionsWithIndex(rows)


def test_train_feeds_rdd_and_dataframe_evenly_over_epochs(sc2, spark, tmp_path):
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path), "batch": 64}, 2, input_mode=SPARK)
    cluster.train(skewed_rdd(sc2, [300, 0, 1, 200]), num_epochs=2)  # 501 rows: 251 per node per epoch
    frame = spark.createDataFrame([([1.0, 2.0], float(i)) for i in range(100)], "x array<float>, y double")
    cluster.train(frame.repartition(3), num_epochs=1)
    cluster.shutdown(timeout=120)
    nodes = read_json_files(tmp_path)
    assert [n["rows"] for n in nodes.values()] == [2 * 251 + 50, 2 * 251 + 50]
    total_labels = sum(n["label_sum"] for n in nodes.values())
    # Every row was fed each epoch; 1 row per epoch is repeated so both nodes get 251.
    assert 2 * sum(range(501)) <= total_labels - sum(range(100)) <= 2 * sum(range(501)) + 2 * 500
    assert all(n["largest"] <= 64 for n in nodes.values())


def test_input_mapping_and_vectors_become_dense_arrays(sc2, spark, tmp_path):
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("v", VectorUDT()),
            T.StructField("x", T.ArrayType(T.FloatType())),
            T.StructField("y", T.LongType()),
        ]
    )
    frame = spark.createDataFrame([(Vectors.dense([float(i), 1.0, 2.0]), [float(i)] * 5, i) for i in range(40)], schema)
    args = {
        "out": str(tmp_path),
        "batch": 16,
        "mapping": {"v": "vec", "x": "features", "y": "label"},
        "label_key": "label",
    }
    cluster = TFCluster.run(sc2, feed_fns.count_feed, args, 2, input_mode=SPARK)
    cluster.train(frame, 1)
    cluster.shutdown(timeout=120)
    nodes = read_json_files(tmp_path)
    assert sum(n["rows"] for n in nodes.values()) == 40
    assert sum(n["label_sum"] for n in nodes.values()) == sum(range(40))
    kinds = nodes["node0"]["kinds"]
    assert kinds == {"vec": ["float64", [3]], "features": ["float32", [5]], "label": ["int64", []]}


def test_rdd_rows_arrive_as_they_were(sc2, tmp_path):
    """``([4 floats], label)`` tuples arrive as tuples whose first field is still a list (TFoS's
    types; more kinds of elements in test_element_fidelity.py)."""
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    cluster.train(skewed_rdd(sc2, [10, 10]), 1)
    cluster.shutdown(timeout=120)
    kinds = read_json_files(tmp_path)["node1"]["kinds"]
    assert kinds == {"row_type": "tuple", "first_field": "list"}


def test_terminate_skips_the_rest_of_the_feed(sc2, tmp_path):
    cluster = TFCluster.run(sc2, feed_fns.terminate_early, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    started = time.monotonic()
    cluster.train(skewed_rdd(sc2, [20000, 20000]), num_epochs=5)
    assert time.monotonic() - started < 90
    cluster.shutdown(timeout=120)
    for node in read_json_files(tmp_path).values():
        assert node == {"first": 10, "should_stop": True}


def test_empty_input_is_a_clear_error_and_the_cluster_stays_usable(sc2, tmp_path):
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    with pytest.raises(FeedDataError, match="empty RDD"):
        cluster.train(sc2.parallelize([], 3), 1)
    cluster.train(skewed_rdd(sc2, [0, 3, 0, 1]), 1)
    cluster.shutdown(timeout=120)
    assert [n["rows"] for n in read_json_files(tmp_path).values()] == [2, 2]
    shut = f"cluster.train\\(\\) on cluster {cluster.cluster_id}, which was shut down: start a new one"
    with pytest.raises(ClusterStateError, match=shut):  # a SparkDLError (and a RuntimeError, as it was)
        cluster.train(skewed_rdd(sc2, [1, 1]), 1)


def test_unsupported_column_type_is_rejected_before_feeding_and_ragged_arrays_are_fed(sc2, spark, tmp_path):
    frame = spark.createDataFrame([({"a": 1.0}, 1.0)], "m map<string,double>, y double")
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    try:
        with pytest.raises(FeedDataError, match=r"column 'm' has type map<string,double>"):
            cluster.train(frame, 1)
        rows = [([1.0, 2.0], 1.0), ([1.0, 2.0], 2.0), ([1.0], 3.0), ([1.0], 4.0)]  # each node gets lengths 2 and 1
        ragged = spark.createDataFrame(rows, "x array<double>, y double").coalesce(1)
        cluster.train(ragged, 1)  # arrays of varying length are fed (next_batch rows keep their lengths)
    finally:
        cluster.shutdown(timeout=120)
    assert sum(n["rows"] for n in read_json_files(tmp_path).values()) == 4


@pytest.mark.parametrize("source", ["rdd", "dataframe"])
def test_inference_results_align_with_uneven_partitions(sc2, spark, tmp_path, source):
    sizes = [0, 5, 123, 37, 1]
    values = list(range(sum(sizes)))
    rdd = sc2.parallelize(
        [values[sum(sizes[:i]) : sum(sizes[: i + 1])] for i in range(len(sizes))], len(sizes)
    ).flatMap(lambda rows: rows)
    assert rdd.glom().map(len).collect() == sizes
    data = rdd if source == "rdd" else spark.createDataFrame(rdd.map(lambda v: (v,)), "v long")
    cluster = TFCluster.run(sc2, feed_fns.infer_times_ten, {"out": str(tmp_path), "batch": 10}, 2, input_mode=SPARK)
    results = cluster.inference(data).collect()
    cluster.shutdown(timeout=120)
    assert results == [v * 10 for v in values]


def test_node_failure_during_feeding_surfaces_quickly(sc2, tmp_path):
    cluster = TFCluster.run(sc2, feed_fns.fail_after_first_batch, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    started = time.monotonic()
    with pytest.raises(ClusterError) as caught:
        cluster.train(skewed_rdd(sc2, [50000, 50000]), num_epochs=3, feed_timeout=300)
    elapsed = time.monotonic() - started
    assert elapsed < 30, f"took {elapsed:.1f} s to report the failure"
    assert "model exploded while training (sentinel 91c2)" in str(caught.value)
    cluster.shutdown(timeout=60)  # train() already stopped the failed cluster: nothing left to raise


def flag_when_feeding_jobs_end(sc, cluster, jobs: int, flag, timeout_s: float = 120.0) -> threading.Thread:
    """Create ``flag`` once ``jobs`` Spark jobs of the cluster's feeding (count + epochs) have
    succeeded: the rows are then queued in the nodes, not yet read."""

    def watch():
        group, tracker = f"sparkdl-{cluster.cluster_id}-feed", sc.statusTracker()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            infos = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
            if sum(1 for info in infos if info and info.status == "SUCCEEDED") >= jobs:
                break
            time.sleep(0.05)
        flag.touch()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("fail", [False, True], ids=["reads", "fails"])
def test_train_returns_once_every_node_has_read_its_rows(sc2, tmp_path, fail):
    # 1,000 small rows fit in the nodes' queues: the feeding job ends before map_fun reads them.
    flag = tmp_path / "flag"
    cluster = TFCluster.run(
        sc2,
        feed_fns.read_after_flag,
        {"out": str(tmp_path), "flag": str(flag), "rows": 500, "fail": fail},
        2,
        input_mode=SPARK,
    )
    watcher = flag_when_feeding_jobs_end(sc2, cluster, jobs=2, flag=flag)
    if fail:
        with pytest.raises(ClusterError, match="sentinel 5e7a"):
            cluster.train(sc2.parallelize([([1.0], 1.0)] * 1000, 2), 1)
        cluster.shutdown(timeout=60)  # train() already stopped the failed cluster
    else:
        cluster.train(sc2.parallelize([([1.0], 1.0)] * 1000, 2), 1)
        assert flag.exists(), "train returned before its feeding job ended"
        assert [n["metrics"].get("rows_read") for n in cluster.cluster_info] == [500, 500]
        cluster.shutdown(timeout=120)
        assert [n["rows"] for n in read_json_files(tmp_path).values()] == [500, 500]
    watcher.join(5)


def test_feeding_needs_spark_mode(sc2, tmp_path):
    cluster = TFCluster.run(sc2, nf.describe_node, {"out": str(tmp_path)}, 2)
    try:
        with pytest.raises(InputModeError, match="InputMode.SPARK"):  # a ValueError too, as it was
            cluster.train(sc2.parallelize([1, 2]), 1)
    finally:
        cluster.shutdown(timeout=120)


def test_tfos_style_datafeed_from_ctx_mgr(sc2):
    cluster = TFCluster.run(sc2, feed_fns.tfos_style_feed, {}, 2, input_mode=SPARK)
    results = cluster.inference(sc2.parallelize(range(23), 4)).collect()
    cluster.shutdown(timeout=120)
    assert results == [v + 1 for v in range(23)]


def test_skewed_partitions_train_in_lockstep_with_small_queues_to_identical_weights(sc2, spark, tmp_path):
    """One partition holds most rows, one is empty: both MWMS workers still run the same steps to
    identical weights. Tiny node queues (16 KiB, a node's share of an epoch is about 40 KiB) and
    more partitions than task slots: every feeding task must feed every node as it goes, or a full
    queue on one node starves the other and MWMS waits forever."""
    sizes = [1500, 0, 37, 200, 200, 200]  # 2,137 rows in 6 partitions, for 2 task slots
    frame = spark.createDataFrame(skewed_rdd(sc2, sizes), "x array<float>, y double")
    started = time.monotonic()
    cluster = TFCluster.run(
        sc2,
        feed_fns.fit_from_feed,
        {"out": str(tmp_path), "batch": 16, "epochs": 2},
        2,
        input_mode=SPARK,
        feed_queue_bytes=16 * 1024,
    )
    cluster.train(frame, num_epochs=2, feed_timeout=60)
    cluster.shutdown(timeout=200)
    assert time.monotonic() - started < 200
    nodes = read_json_files(tmp_path)
    assert [n["steps_per_epoch"] for n in nodes.values()] == [67, 67]  # ceil(ceil(2137 / 2) / 16)
    assert nodes["node0"]["keras_steps"] == nodes["node1"]["keras_steps"] == 67 * 2 * 2  # every piece, every epoch
    first, second = (np.load(tmp_path / f"weights{i}.npz") for i in (0, 1))
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
