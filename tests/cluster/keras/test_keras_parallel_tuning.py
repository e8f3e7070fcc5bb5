"""Spark ML's ``parallelism`` with KerasEstimator: ``CrossValidator(parallelism=2)`` with
``KerasEstimator(num_workers=2)`` on local-cluster[4,1,768] trains two fits at once on disjoint
executors and picks the model ``parallelism=1`` picks; ``TrainValidationSplit(parallelism=3)`` runs
its third fit once executors are free (it waits: no deadlock, no failure), with 2-node fits on 4
executors (slow tier) and 1-node fits on the shared ``sc2`` (default tier). Where each cluster's nodes
ran and when it lived are read from Spark's own records (its status store), not from sparkdl's."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sparkdl.keras import KerasEstimator

import keras_functions as kf
import node_group_records as records
from node_group_records import spark4  # noqa: F401 - the 4-executor fixture

pytestmark = pytest.mark.timeout(900)

RATES = [0.05, 0.0005, 0.01]  # clearly apart: 0.05 learns the digits in 2 epochs, 0.0005 does not


@pytest.fixture
def spark2(sc2, spark_holder):
    return spark_holder.spark


def _estimator(workers: int = 2):
    return KerasEstimator(
        model=kf.keras3_mlp, feature_cols="features", label_cols="label", epochs=2, batch_size=32, num_workers=workers
    )


@pytest.mark.slow
def test_cross_validator_parallelism_two_fits_at_once_on_disjoint_executors_and_picks_what_one_at_a_time_picks(
    spark4,
):
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    spark = spark4
    sc = spark.sparkContext
    digits = records.digits(spark)
    estimator = _estimator()
    grid = ParamGridBuilder().addGrid(estimator.learning_rate, RATES[:2]).build()
    evaluator = MulticlassClassificationEvaluator(metricName="accuracy")
    tuned = {}
    for parallelism in (2, 1):
        since, started = records.last_job(sc), time.monotonic()
        tuning = CrossValidator(
            estimator=estimator, estimatorParamMaps=grid, evaluator=evaluator, numFolds=2, seed=3,
            parallelism=parallelism,
        )  # fmt: skip
        tuned[parallelism] = (tuning.fit(digits), records.clusters(sc, since))
        seconds, metrics = time.monotonic() - started, tuned[parallelism][0].avgMetrics
        print(f"parallelism={parallelism}: {seconds:.0f} s, avgMetrics {metrics}")

    model, clusters = tuned[2]
    # two clusters per fold, then one for the final fit: 5 clusters of 2 nodes each
    assert len(clusters) == 5 and all(len(c["executors"]) == 2 for c in clusters.values()), clusters
    pairs = [(a, b) for a in clusters.values() for b in clusters.values() if a is not b and records.overlap(a, b)]
    assert pairs, f"no two fits ran at once: {clusters}"
    for a, b in pairs:
        assert a["executors"].isdisjoint(b["executors"]), f"two live clusters shared an executor: {clusters}"
    one_at_a_time, serial_clusters = tuned[1]
    assert len(serial_clusters) == 3  # parallelism=1: one cluster per fold for both param maps, as before
    # The same choice, by a wide margin each time. The metrics themselves vary from run to run, at
    # parallelism=1 too: a node reads epoch 1 in the order its rows arrive (cluster.train's deterministic=False).
    assert np.argmax(model.avgMetrics) == np.argmax(one_at_a_time.avgMetrics) == 0
    for metrics in (model.avgMetrics, one_at_a_time.avgMetrics):
        assert metrics[0] > 0.6 > 0.3 > metrics[1], metrics


@pytest.mark.slow
def test_a_third_concurrent_fit_of_two_nodes_waits_for_free_executors_then_runs(spark4):
    _third_fit_waits(spark4, workers=2)


def test_a_third_concurrent_fit_of_one_node_waits_for_a_free_executor_then_runs(spark2):
    _third_fit_waits(spark2, workers=1)


def _third_fit_waits(spark, workers: int):
    """TrainValidationSplit(parallelism=3) with fits of ``workers`` nodes, on room for two such fits."""
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.tuning import ParamGridBuilder, TrainValidationSplit

    sc = spark.sparkContext
    digits = records.digits(spark, rows=400)
    estimator = _estimator(workers)
    grid = ParamGridBuilder().addGrid(estimator.learning_rate, RATES).build()
    evaluator = MulticlassClassificationEvaluator(metricName="accuracy")
    tuning = TrainValidationSplit(
        estimator=estimator, estimatorParamMaps=grid, evaluator=evaluator, trainRatio=0.75, seed=3, parallelism=3
    )
    since = records.last_job(sc)
    tuned = tuning.fit(digits)
    assert len(tuned.validationMetrics) == 3 and np.argmax(tuned.validationMetrics) in (0, 2)
    clusters = sorted(records.clusters(sc, since).values(), key=lambda c: c["launched"])[:3]  # the final fit's last
    first, second, third = clusters
    assert records.overlap(first, second) and first["executors"].isdisjoint(second["executors"])
    # the third launched only once one of the first two had finished feeding (and then released its executors)
    freed = min(first["fed"], second["fed"])
    assert third["launched"] >= freed, clusters
    for other in (first, second):
        if records.overlap(third, other):
            assert third["executors"].isdisjoint(other["executors"]), clusters
