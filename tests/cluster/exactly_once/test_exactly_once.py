"""Exactly-once training data through Spark's normal life, on real multi-executor Spark: a feeding
task that fails part-way and is retried (RDD and DataFrame sources), a retry that sends the rows in
another order (refused), an executor without a node killed during epoch 1 (it costs only time) or
after its pinned blocks of a shuffled frame were stored (train fails, naming the cause), and the
same seed giving the same row orders on two clusters.

Every row carries its id (its label), and each node records what it read in each epoch: every
epoch must hold exactly the node's planned share (cache=True, 3 epochs, shuffle=True), not one
row more or less. Speculative copies are covered over real sockets in test_ledger.py.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkdl import FeedError, TFCluster

import exactly_once_functions as ef
import netns_cluster
from conftest import read_json_files
from feed_shares import planned_labels
from node_functions import wait_for_file

pytestmark = pytest.mark.timeout(420)
SPARK = TFCluster.InputMode.SPARK
EPOCHS = 3
SIZES = [ef.ROWS // ef.PARTITIONS] * ef.PARTITIONS


def node_runs(out: Path) -> list[list[list[list[float]]]]:
    """Per node (in node order): its runs, each a list of epochs, each the labels in reading order."""
    records = read_json_files(out, "node*.json")
    return [records[name]["runs"] for name in sorted(records)]


def assert_exact_epochs(runs_per_node, run: int) -> None:
    for node, share in enumerate(planned_labels(SIZES, 2)):
        epochs = runs_per_node[node][run]
        assert len(epochs) == EPOCHS
        for epoch, labels in enumerate(epochs):
            assert Counter(labels) == share, f"node {node}, run {run + 1}, epoch {epoch + 1}: not its exact share"


def test_retried_feeding_tasks_deliver_every_row_once_and_seeds_repeat_across_clusters(sc2, tmp_path):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    try:
        cluster = TFCluster.run(sc2, ef.record_orders_and_executor, {"out": str(first), "runs": 3}, 2, input_mode=SPARK)
        markers = [str(tmp_path / f"failed-{n}") for n in range(3)]
        train = dict(num_epochs=EPOCHS, cache=True, shuffle=True, seed=7)
        cluster.train(ef.flaky_rdd(sc2, markers[0]), **train)
        cluster.train(ef.flaky_frame(spark, markers[1]), **train)
        cluster.train(ef.flaky_frame(spark, markers[2]), deterministic=True, **train)
        cluster.shutdown(timeout=120)
        assert all(Path(m).exists() for m in markers), "each source failed once, part-way, in a feeding task"

        # A second cluster, same data and seed, no failures.
        again = TFCluster.run(sc2, ef.record_orders_and_executor, {"out": str(second), "runs": 2}, 2, input_mode=SPARK)
        again.train(ef.flaky_frame(spark, markers[1]), **train)
        again.train(ef.flaky_frame(spark, markers[2]), deterministic=True, **train)
        again.shutdown(timeout=120)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    runs, runs_again = node_runs(first), node_runs(second)
    for run in range(3):
        assert_exact_epochs(runs, run)
    for run in range(2):
        assert_exact_epochs(runs_again, run)
    for node in range(2):
        frame_run, deterministic_run = runs[node][1], runs[node][2]
        assert runs_again[node][0][1:] == frame_run[1:], "same seed and data: the same orders in epochs 2..N"
        assert runs_again[node][1] == deterministic_run, "deterministic=True: epoch 1 too"
        assert len({tuple(epoch) for epoch in deterministic_run}) == EPOCHS, "still a new order every epoch"


def test_a_retry_that_sends_a_partition_in_another_order_fails_naming_node_partition_and_attempt(sc2, tmp_path):
    """Issue 40 item 3: partition 1's rows come in another order on every attempt, and attempt 0 fails
    after 1,200 rows (1,024 of them sent). The retries are refused (never a row twice, or missed), and
    train raises FeedDataError naming the node, the partition and the attempt."""
    from sparkdl.feed.columns import FeedDataError

    marker = tmp_path / "failed"
    cluster = TFCluster.run(sc2, ef.record_orders_and_executor, {"out": str(tmp_path), "runs": 1}, 2, input_mode=SPARK)
    source = sc2.parallelize(range(ef.PARTITIONS), ef.PARTITIONS).mapPartitionsWithIndex(
        ef.reordered_on_retry(str(marker))
    )
    with pytest.raises(FeedDataError, match=r"node \w+:[01] rejected partition 1 \(attempt [1-9]\).* not the rows"):
        cluster.train(source, num_epochs=1)
    cluster.shutdown(timeout=120)
    assert marker.exists(), "attempt 0 failed part-way"
    for node, runs in enumerate(node_runs(tmp_path)):
        labels = runs[0][0]
        assert len(labels) == len(set(labels)), f"node {node} read a row twice"


@pytest.mark.stops_spark  # runs last among the sc2 tests: the Spark it leaves short of an executor is stopped
def test_a_shuffled_frame_whose_pinned_blocks_are_lost_in_a_later_epoch_fails_naming_the_cause(
    sc2, spark_holder, tmp_path
):
    """Issue 40 item 11: sparkdl pins a DataFrame that comes out of a shuffle with a local checkpoint,
    whose blocks live on the executors. The executor without a node is lost in epoch 2 (cache off, so
    every epoch reads the pinned validation frame again): Spark cannot read its blocks again, and
    train fails, saying so and what to do."""
    try:
        _lose_pinned_blocks(sc2, tmp_path)
    finally:
        spark_holder.stop()  # Spark does not replace an executor it was told to kill


def _lose_pinned_blocks(sc2, tmp_path):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    cluster = TFCluster.run(sc2, ef.count_feed_noting_executor, {"out": str(tmp_path)}, 1, input_mode=SPARK)
    assert wait_for_file(str(tmp_path / "executor-node0"), 120)
    executors = set(sc2._jsc.sc().getExecutorIds().mkString(",").split(","))  # not 0 and 1 once Spark restarted
    (victim,) = executors - {(tmp_path / "executor-node0").read_text()}
    stalled, released = tmp_path / "stalled", tmp_path / "released"
    features = ef.features_stalling_in_epoch_two(str(stalled), str(released))  # stalls in training epoch 2 only
    data = spark.range(0, 2000, numPartitions=2).mapInPandas(features, "x array<double>, y double")
    # Out of a shuffle: pinned; its row count stores its 8 partitions on both executors.
    validation = spark.range(0, 800, numPartitions=2).repartition(8).mapInPandas(features, "x array<double>, y double")
    outcome: dict = {}

    def train() -> None:
        try:
            cluster.train(data, validation_data=validation, num_epochs=2, cache=False)
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome["error"] = exc
        finally:
            released.touch()

    trainer = threading.Thread(target=train, daemon=True)
    trainer.start()
    try:
        deadline = time.monotonic() + 180
        while not stalled.exists() and trainer.is_alive() and time.monotonic() < deadline:
            trainer.join(0.5)  # wakes when train returns, else polls the marker
        assert stalled.exists(), f"no feeding task of epoch 2 ran: {outcome.get('error')!r}"
        assert sc2._jsc.sc().killExecutor(victim), f"Spark refused to kill executor {victim}"
        released.touch()
        trainer.join(300)
        assert not trainer.is_alive(), "cluster.train did not return after the executor was lost"
    finally:
        released.touch()
    cluster.shutdown(timeout=120)
    error = outcome.get("error")
    assert isinstance(error, FeedError), (
        f"train cannot feed epoch 2's validation rows (their blocks are lost): {error!r}"
    )
    message = str(error)
    assert message.startswith("sparkdl: feed validation epoch 2/2 to 1 TF nodes failed: an executor that held blocks")
    assert "df.persist(StorageLevel.MEMORY_AND_DISK_2)" in message and "Checkpoint block rdd_" in message


@pytest.mark.stops_spark  # runs last among the sc3 tests: the Spark it leaves short of an executor is stopped
def test_an_executor_without_a_node_lost_during_epoch_one_costs_only_time(sc3, spark_holder, tmp_path):
    try:
        _lose_an_executor_without_a_node(sc3, tmp_path)
    finally:
        spark_holder.stop()  # Spark does not replace an executor it was told to kill: the next test needs all 3


def _lose_an_executor_without_a_node(sc3, tmp_path):
    cluster = TFCluster.run(sc3, ef.record_orders_and_executor, {"out": str(tmp_path), "runs": 1}, 2, input_mode=SPARK)
    with_nodes = {(tmp_path / f"executor-node{n}").read_text() for n in range(2)} if _wait_for_nodes(tmp_path) else {}
    assert len(with_nodes) == 2, "each node on its own executor"
    (victim,) = {"0", "1", "2"} - with_nodes
    stalled, released = tmp_path / "stalled", tmp_path / "released"
    source = sc3.parallelize(range(ef.PARTITIONS), ef.PARTITIONS).mapPartitionsWithIndex(
        ef.stalling_on(victim, str(stalled), str(released))
    )
    outcome: dict = {}

    def train() -> None:
        try:
            cluster.train(source, num_epochs=EPOCHS, cache=True, shuffle=True, seed=3)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc
        finally:
            released.touch()  # also frees a stalled task if the test failed before killing it

    trainer = threading.Thread(target=train, daemon=True)
    trainer.start()
    try:
        assert wait_for_file(str(stalled), 180), f"no feeding task ran on executor {victim} (without a node)"
        assert sc3._jsc.sc().killExecutor(victim), f"Spark refused to kill executor {victim}"
        trainer.join(300)
        assert not trainer.is_alive(), "cluster.train did not return after the executor was lost"
    finally:
        released.touch()
    cluster.shutdown(timeout=120)
    assert "error" not in outcome, f"cluster.train failed: {outcome.get('error')!r}"
    assert_exact_epochs(node_runs(tmp_path), 0)


def _wait_for_nodes(out: Path) -> bool:
    return all(wait_for_file(str(out / f"executor-node{n}"), 120) for n in range(2))


@pytest.mark.slow  # a standalone cluster of its own, two Workers in network namespaces: 35 s here
def test_a_speculative_copy_on_another_host_delivers_every_row_once(spark_holder, tmp_path):
    from pyspark.sql import SparkSession

    why_not = netns_cluster.unavailable()
    if why_not:
        pytest.skip(why_not)
    spark_holder.stop()  # one SparkContext per process: this test's runs on a standalone master
    out = tmp_path / "out"
    out.mkdir()
    with netns_cluster.namespaced_standalone(tmp_path) as standalone:
        spark = (
            SparkSession.builder.master(standalone.master_url)
            .appName("sparkdl-speculation")
            .config("spark.driver.host", standalone.driver_host)
            .config("spark.driver.bindAddress", standalone.driver_host)
            .config("spark.executor.memory", "1g")
            .config("spark.ui.enabled", "false")
            .config("spark.speculation", "true")
            .config("spark.speculation.interval", "200ms")
            .config("spark.speculation.quantile", "0.5")
            .config("spark.speculation.multiplier", "1.5")
            .config("spark.speculation.minTaskRuntime", "1s")
            .getOrCreate()
        )
        try:
            sc = spark.sparkContext
            sc.setLogLevel("ERROR")
            cluster = TFCluster.run(
                sc, ef.record_orders_and_executor, {"out": str(out), "runs": 1}, 2, input_mode=SPARK
            )
            source = sc.parallelize(range(ef.PARTITIONS), ef.PARTITIONS).mapPartitionsWithIndex(
                ef.straggling_once(str(out))
            )
            try:
                cluster.train(source, num_epochs=EPOCHS, cache=True, shuffle=True, seed=5)
            finally:
                (out / "released").touch()
            cluster.shutdown(timeout=120)
        finally:
            spark.stop()
    hosts = {p.name: p.read_text() for p in out.glob("attempt-p1-a*")}
    assert len(hosts) >= 2, f"no speculative copy of the straggling partition ran: {sorted(hosts)}"
    assert hosts["attempt-p1-a0"] != hosts["attempt-p1-a1"], "the copy ran on the other host"
    assert_exact_epochs(node_runs(out), 0)
