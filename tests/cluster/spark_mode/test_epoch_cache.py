"""Training from Spark at TensorFlow's speed, on a real multi-executor Spark: the node-side epoch
cache, per-epoch shuffle, the validation feed and the driver's history."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sparkdl import ClusterError, TFCluster
from sparkdl.feed.columns import FeedDataError

import feed_functions as feed_fns
from conftest import read_json_files
from feed_shares import planned_labels

pytestmark = pytest.mark.timeout(300)
SPARK = TFCluster.InputMode.SPARK


@pytest.fixture
def spark(sc2):
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def labelled_rdd(sc, sizes, start=0):
    """Partition i holds sizes[i] rows ``([4 floats], label)``; labels are global row numbers from ``start``."""
    offsets = np.cumsum([start, *sizes])

    def rows(index, _):
        for row in range(int(offsets[index]), int(offsets[index + 1])):
            yield ([float(row % 7), 1.0, -1.0, 0.5], float(row))

    return sc.parallelize(range(len(sizes)), len(sizes)).mapPartitionsWithIndex(rows)


def feeding_jobs(sc, cluster) -> int:
    """Spark jobs run in the cluster's feed job group (count and feeding jobs)."""
    return len(sc.statusTracker().getJobIdsForGroup(f"sparkdl-{cluster.cluster_id}-feed"))


def test_epochs_are_shuffled_from_the_cache_and_repeat_with_the_same_seed(sc2, tmp_path):
    sizes, epochs = [300, 0, 1, 200], 3
    cluster = TFCluster.run(sc2, feed_fns.record_epoch_orders, {"out": str(tmp_path), "runs": 4}, 2, input_mode=SPARK)
    jobs = []
    for seed, shuffle in ((7, True), (7, True), (8, True), (7, False)):
        before = feeding_jobs(sc2, cluster)
        cluster.train(labelled_rdd(sc2, sizes), num_epochs=epochs, shuffle=shuffle, seed=seed)
        jobs.append(feeding_jobs(sc2, cluster) - before)
    cluster.shutdown(timeout=120)
    assert jobs == [2, 2, 2, 2], "one count job and one feeding job per call: epochs 2..3 came from the cache"
    runs = [node["runs"] for node in read_json_files(tmp_path).values()]
    for node, share in enumerate(planned_labels(sizes, 2)):
        same_seed, again, other_seed, unshuffled = runs[node]
        for run in runs[node]:
            assert [Counter(epoch) for epoch in run] == [share] * epochs, "every planned row, each epoch"
        assert same_seed[0] != same_seed[1] != same_seed[2] != same_seed[0], "a new order every epoch"
        assert same_seed[1:] == again[1:], "the same seed gives the same cached epochs, run after run"
        assert other_seed[1:] != same_seed[1:]
        assert unshuffled[1] == unshuffled[2], "shuffle=False: the cached epochs keep the feed's order"


def test_a_cache_over_its_limit_falls_back_to_feeding_from_spark(sc2, tmp_path):
    sizes, epochs = [120, 80], 3
    cluster = TFCluster.run(sc2, feed_fns.record_epoch_orders, {"out": str(tmp_path), "runs": 1}, 2, input_mode=SPARK)
    cluster.train(labelled_rdd(sc2, sizes), num_epochs=epochs, cache_max_bytes=2000)
    logs = [Path(node["log_path"]).read_text() for node in cluster.cluster_info]
    cluster.shutdown(timeout=120)
    assert feeding_jobs(sc2, cluster) == 1 + epochs, "every epoch fed from Spark"
    for log in logs:
        assert log.count("not caching training run 1 on this node") == 1
        assert "cache limit of 2,000 bytes (cache_max_bytes)" in log
    runs = [node["runs"][0] for node in read_json_files(tmp_path).values()]
    for run, share in zip(runs, planned_labels(sizes, 2)):
        assert [Counter(epoch) for epoch in run] == [share] * epochs


def test_validation_rows_are_shared_equally_over_uneven_partitions(sc2, spark, tmp_path):
    def frame(sizes, start):
        return spark.createDataFrame(labelled_rdd(sc2, sizes, start), "x array<float>, y double")

    train_sizes, validation_sizes, epochs = [90, 0, 7], [31, 0, 0, 2], 2  # 33 validation rows: 17 per node
    cluster = TFCluster.run(
        sc2,
        feed_fns.iterate_train_and_validation,
        {"out": str(tmp_path), "batch": 8, "epochs": epochs},
        2,
        input_mode=SPARK,
    )
    cluster.train(frame(train_sizes, 0), num_epochs=epochs, validation_data=frame(validation_sizes, 1000))
    cluster.shutdown(timeout=120)
    nodes = list(read_json_files(tmp_path).values())
    shares = planned_labels(validation_sizes, 2, start=1000)
    for node, share in zip(nodes, shares):
        assert node["train_rows"] == [49] * epochs
        assert [Counter(labels) for labels in node["validation_labels"]] == [share] * epochs
    assert sum(shares, Counter()).keys() == {1000.0 + i for i in range(33)}, "no validation row dropped"


def test_model_fit_with_validation_data_under_mwms_validating_every_other_epoch(sc2, tmp_path):
    """Two nodes, a new dataset iterator each epoch (all_epochs=False), validation_freq=2 over 3
    epochs: Keras never reads epoch 3's validation rows, and train() still returns when fit ends
    (ctx.progress_callback), while map_fun is still running."""
    fit_with_validation_data(sc2, tmp_path, 2, all_epochs=False, validation_freq=2)


def test_model_fit_with_validation_data_under_mwms_on_three_nodes_over_all_epochs(sc3, tmp_path):
    """Three nodes, one dataset iterator over every epoch (all_epochs=True with
    keras_steps_per_epoch), validating after every epoch."""
    fit_with_validation_data(sc3, tmp_path, 3, all_epochs=True, validation_freq=1)


def fit_with_validation_data(sc, tmp_path, executors: int, all_epochs: bool, validation_freq: int) -> None:
    """model.fit with validation_data on ``executors`` MWMS nodes (the suite's sc2 or sc3: no Spark
    of its own), fed by cluster.train; checks weights, history, that every row trained and that
    train() returned before any map_fun did. 539 training rows and 43 validation rows divide
    evenly over neither 2 nor 3 nodes: every node's share is padded."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    frame = spark.createDataFrame(labelled_rdd(sc, [500, 0, 39]), "x array<float>, y double")
    validation = spark.createDataFrame(labelled_rdd(sc, [40, 3], start=2000), "x array<float>, y double")
    epochs, flag = 3, tmp_path / "train-returned"
    args = {
        "out": str(tmp_path),
        "batch": 32,
        "epochs": epochs,
        "validation": True,
        "validation_freq": validation_freq,
        "progress_callback": True,
        "all_epochs": all_epochs,
        "train_returned": str(flag),
    }
    cluster = TFCluster.run(sc, feed_fns.fit_from_feed, args, executors, input_mode=SPARK, executor_wait_timeout=120)
    returned = cluster.train(frame, num_epochs=epochs, validation_data=validation)
    flag.touch()
    cluster.shutdown(timeout=200)
    nodes = read_json_files(tmp_path)
    assert [node["train_returned_first"] for node in nodes.values()] == [True] * executors
    weights = [np.load(tmp_path / f"weights{i}.npz") for i in range(executors)]
    for other in weights[1:]:
        for name in weights[0].files:
            np.testing.assert_array_equal(weights[0][name], other[name])
    history = cluster.history
    assert returned == history
    validated = [(epoch + 1) % validation_freq == 0 for epoch in range(epochs)]  # Keras's validation_freq
    assert len(history["loss"]) == epochs and len(history["val_loss"]) == epochs
    assert np.isfinite(history["loss"]).all()
    assert np.isfinite(history["val_loss"]).tolist() == validated, "validated after the epochs validation_freq names"
    chief = nodes["node0"]
    assert chief["val_loss"] == pytest.approx([loss for loss, done in zip(history["val_loss"], validated) if done])
    # Every row of every epoch trained: under MWMS each worker steps through every piece of each batch.
    assert chief["steps_per_epoch"] == math.ceil(math.ceil(539 / executors) / 32)
    assert chief["keras_steps"] == chief["steps_per_epoch"] * executors * epochs


def test_a_fit_stopped_early_lets_train_return_without_waiting_for_the_epochs_it_skipped(sc2, tmp_path, monkeypatch):
    """EarlyStopping after epoch 1 of 3: the chief's progress callback reports the fit's end, so
    train() returns once the rows are read instead of waiting LAST_EPOCH_WAIT_S for epoch reports
    that never come (30 s per train call before; a KerasEstimator tuning run paid it per param
    map). Made longer here than map_fun's own wait, the old wait would end only after map_fun did."""
    from pyspark.sql import SparkSession

    from sparkdl.driver import feeding

    monkeypatch.setattr(feeding, "LAST_EPOCH_WAIT_S", 3600.0)
    spark = SparkSession.builder.getOrCreate()
    frame = spark.createDataFrame(labelled_rdd(sc2, [200, 56]), "x array<float>, y double")
    flag = tmp_path / "train-returned"
    args = {
        "out": str(tmp_path),
        "batch": 32,
        "epochs": 3,
        "progress_callback": True,
        "stop_after_epoch": 0,
        "train_returned": str(flag),
    }
    cluster = TFCluster.run(sc2, feed_fns.fit_from_feed, args, 2, input_mode=SPARK, executor_wait_timeout=120)
    history = cluster.train(frame, num_epochs=3)
    flag.touch()
    cluster.shutdown(timeout=200)
    nodes = read_json_files(tmp_path)
    assert [node["train_returned_first"] for node in nodes.values()] == [True, True]
    assert len(history["loss"]) == 1 and [len(node["loss"]) for node in nodes.values()] == [1, 1]


def test_validation_epochs_keras_skips_never_hold_up_the_feed_cache_on_or_off(sc2, spark, tmp_path):
    """validation_freq=2 over 3 epochs with a node's validation share several times its feed queue:
    Keras reads no validation rows in epochs 1 and 3. Those rows once blocked their feeding tasks on
    the full queue until feed_timeout, attempt after attempt; now each node drops an epoch's unread
    validation rows once Keras is done with the epoch. Cache on (one iterator over all epochs,
    ctx.progress_callback says when an epoch ends), then off (a new iterator each epoch says it, no
    callback; the last epoch's rows wait for map_fun's end): both calls return with every epoch."""

    def frame(sizes, start):
        return spark.createDataFrame(labelled_rdd(sc2, sizes, start), "x array<float>, y double")

    runs = [{"all_epochs": True, "progress_callback": True}, {"all_epochs": False, "progress_callback": False}]
    args = {"out": str(tmp_path), "batch": 16, "feed_timeout": 60, "runs": runs}
    cluster = TFCluster.run(
        sc2, feed_fns.fit_runs_validating_every_other_epoch, args, 2, input_mode=SPARK, feed_queue_bytes=4096
    )
    train, validation = frame([60, 60], 0), frame([100] * 8, 1000)  # 400 validation rows a node: ~13 KB
    try:
        for cache in (True, False):
            cluster.train(train, num_epochs=3, validation_data=validation, cache=cache, feed_timeout=20)
    finally:
        cluster.shutdown(timeout=120)
    for node in read_json_files(tmp_path).values():
        for fit in node["fits"]:
            assert len(fit["loss"]) == 3 and len(fit["val_loss"]) == 1, "validated after epoch 2 only"
            assert np.isfinite(fit["val_loss"]).all()


def test_validation_that_differs_from_the_training_data_is_rejected_before_any_job(sc2, spark, tmp_path):
    train = spark.createDataFrame([([1.0, 2.0], 1.0)], "x array<float>, y double")
    cluster = TFCluster.run(sc2, feed_fns.count_feed, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    try:
        for validation, column in (
            (spark.createDataFrame([([1.0, 2.0], 1)], "x array<float>, y long"), "'y'"),
            (spark.createDataFrame([([1.0], 1.0)], "z array<float>, y double"), "'x'"),
        ):
            with pytest.raises(FeedDataError, match=column):
                cluster.train(train, 2, validation_data=validation)
        assert feeding_jobs(sc2, cluster) == 0
        with pytest.raises(FeedDataError, match="same kind"):
            cluster.train(train, 2, validation_data=sc2.parallelize([([1.0, 2.0], 1.0)]))
    finally:
        cluster.shutdown(timeout=120)


def test_rdd_validation_rows_of_another_shape_are_rejected_naming_the_column(sc2, tmp_path):
    cluster = TFCluster.run(sc2, feed_fns.record_epoch_orders, {"out": str(tmp_path), "runs": 1}, 2, input_mode=SPARK)
    try:
        with pytest.raises((FeedDataError, ClusterError), match="validation column '0'"):
            cluster.train(labelled_rdd(sc2, [20, 20]), 2, validation_data=sc2.parallelize([([1.0, 2.0], 1.0)] * 10, 2))
    finally:
        cluster.shutdown(timeout=120)


def test_asking_for_validation_without_validation_data_names_the_call(sc2, spark, tmp_path):
    frame = spark.createDataFrame([([1.0], 1.0)] * 10, "x array<float>, y double")
    cluster = TFCluster.run(sc2, feed_fns.ask_for_missing_validation, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    with pytest.raises(ClusterError, match=r"as_dataset\(split='validation'\) needs validation data"):
        cluster.train(frame, 2)
