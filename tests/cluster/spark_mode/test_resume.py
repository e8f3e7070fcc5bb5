"""Long trainings survive a failure: ``max_restarts`` relaunches the cluster, which resumes from
the last epoch saved by ``ctx.backup_and_restore`` (Keras BackupAndRestore), not from zero."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sparkdl import ClusterError, TFCluster

import fault_functions as ff
import feed_functions as feed_fns
import node_functions as nf

pytestmark = pytest.mark.timeout(300)


def _read(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / f"{name}.json").read_text())


def _resumable_args(tmp_path: Path, epochs: int, crash_after: int, **extra) -> dict:
    """``ff.resumable_fit``'s arguments: the chief crashes once after epoch ``crash_after``."""
    return {
        "out": str(tmp_path),
        "backup_dir": str(tmp_path / "backup"),
        "epochs": epochs,
        "crash_after_epoch": crash_after,
        "chief": 0,
        **extra,
    }


def test_restarts_are_bounded_then_the_failure_is_raised(sc2, tmp_path):
    args = {"out": str(tmp_path), "victim": 1, "fault": "raise"}
    cluster = TFCluster.run(sc2, ff.fault_during_training, args, 2, max_restarts=1)
    with pytest.raises(ClusterError, match="sentinel c0ffee"):
        cluster.shutdown(timeout=120)
    assert cluster.restarts == 1 and len(cluster.failures_survived) == 1


def test_tensorflow_mode_relaunch_after_a_failure_runs_every_node_again_and_returns(sc2, tmp_path):
    """InputMode.TENSORFLOW: shutdown() relaunches the cluster once (max_restarts=1) and returns;
    the Keras resume itself is the SPARK-mode test's below (the same ctx.backup_and_restore)."""
    args = {"out": str(tmp_path), "victim": 1}
    cluster = TFCluster.run(sc2, ff.raise_on_the_first_attempt, args, 2, max_restarts=1)
    cluster.shutdown(timeout=120)
    assert cluster.restarts == 1
    survived = cluster.failures_survived[0].failures[0]
    assert survived.label == "worker:0" and "sentinel 5eed" in survived.traceback
    assert sorted(p.name for p in tmp_path.glob("done-*")) == ["done-attempt1-node0.json", "done-attempt1-node1.json"]


def test_spark_mode_relaunch_feeds_every_epoch_of_an_unfinished_read_again(sc2, tmp_path):
    """Without epoch reports (no ctx.progress_callback), a relaunch feeds the whole call again."""
    args = {"out": str(tmp_path), "batch": 50, "fail_on_attempt": 0, "victim": 1}
    cluster = TFCluster.run(
        sc2, feed_fns.count_feed_failing_once, args, 2, input_mode=TFCluster.InputMode.SPARK, max_restarts=1
    )
    cluster.train(sc2.parallelize([([1.0], 1.0)] * 1000, 4), num_epochs=2)
    cluster.shutdown(timeout=120)
    assert cluster.restarts == 1
    rows = [json.loads(p.read_text())["rows"] for p in tmp_path.glob("node*-attempt1.json")]
    assert rows == [1000, 1000], "after the relaunch each node reads its full share of every epoch"


def test_relaunch_resumes_model_fit_from_the_saved_epoch_and_feeds_only_the_epochs_not_yet_completed(sc2, tmp_path):
    """worker:0 dies after epoch 2 (the chief has backed it up): the relaunched cluster's model.fit
    starts at epoch 3 (Keras BackupAndRestore; ctx.backup_and_restore is the same callback in
    InputMode.TENSORFLOW) and the feed gives it epochs 3..5 only."""
    from pyspark.sql import SparkSession

    epochs, crash_after = 6, 2
    spark = SparkSession.builder.getOrCreate()
    rng = np.random.default_rng(0)
    features = rng.normal(size=(256, 8)).astype("float32")
    frame = (
        spark.createDataFrame([(row.tolist(), int(row.sum() > 0)) for row in features], "x array<float>, y long")
        .repartition(3)
        .cache()
    )
    args = _resumable_args(tmp_path, epochs, crash_after, from_feed=True)
    cluster = TFCluster.run(sc2, ff.resumable_fit, args, 2, input_mode=TFCluster.InputMode.SPARK, max_restarts=1)
    history = cluster.train(frame, num_epochs=epochs)
    cluster.shutdown(timeout=240)

    assert cluster.restarts == 1
    survived = cluster.failures_survived[0].failures[0]
    assert survived.label == "worker:0" and survived.exit_code == 1
    assert not (tmp_path / "done-attempt0-node0.json").exists(), "the first attempt's chief never finished"
    for node in (0, 1):
        assert _read(tmp_path, f"start-attempt0-node{node}")["epoch"] == 0
        plans = [_read(tmp_path, f"plan-attempt{attempt}-node{node}") for attempt in (0, 1)]
        assert [(plan["epochs"], plan["first_epoch"]) for plan in plans] == [(epochs, 0), (epochs, crash_after + 1)]
        # Epochs 0..2 were completed and backed up: the relaunch is fed epochs 3..5 only, and
        # fit(epochs=feed.num_epochs) resumed by Keras at epoch 3 runs exactly those.
        assert _read(tmp_path, f"start-attempt1-node{node}")["epoch"] == crash_after + 1
        assert _read(tmp_path, f"start-attempt1-node{node}")["keras"] == "keras", "Keras 3's BackupAndRestore"
        assert _read(tmp_path, f"epoch-attempt1-node{node}")["epoch"] == epochs - 1
        assert (tmp_path / f"done-attempt1-node{node}.json").exists()
    assert len(history["loss"]) == epochs and all(np.isfinite(history["loss"]))


@pytest.mark.timeout(420)  # three attempts: the failed one, one stopped as its fit began, the last
def test_a_relaunched_fit_that_starts_again_from_epoch_0_is_fed_every_epoch_again(sc2, tmp_path):
    """``ctx.progress_callback()`` without a backup: worker:0 is SIGKILLed mid epoch 2 of 3, after the
    chief reported epoch 1. The relaunched fit starts at epoch 0 with fresh weights, so it must be fed all
    3 epochs (fed 2, its third ran out of data), and the history holds its epochs only. The relaunch
    first planned from epoch 2 is stopped as its fit begins, and the next one is fed every epoch."""
    from pyspark.sql import SparkSession

    epochs = 3
    spark = SparkSession.builder.getOrCreate()
    features = np.random.default_rng(1).normal(size=(256, 8)).astype("float32")
    frame = spark.createDataFrame([(row.tolist(), int(row.sum() > 0)) for row in features], "x array<float>, y long")
    args = {"out": str(tmp_path), "crash_in_epoch": 1}
    cluster = TFCluster.run(sc2, ff.fit_without_backup, args, 2, input_mode=TFCluster.InputMode.SPARK, max_restarts=1)
    history = cluster.train(frame.repartition(2), num_epochs=epochs)
    cluster.shutdown(timeout=240)

    assert cluster.restarts == 1, "only the node's own failure counts against max_restarts"
    assert cluster.failures_survived[0].failures[0].label == "worker:0"
    finished = sorted(int(p.name.split("-")[1][len("attempt") :]) for p in tmp_path.glob("fit-attempt*-node0.json"))
    assert len(finished) == 1 and finished[0] >= 1, f"one relaunched fit ran to its end, got attempts {finished}"
    final = finished[0]
    for node in (0, 1):
        plan = _read(tmp_path, f"plan-attempt{final}-node{node}")
        assert (plan["epochs"], plan["first_epoch"]) == (epochs, 0), "every epoch is fed again"
        ran = _read(tmp_path, f"fit-attempt{final}-node{node}")["epochs"]
        assert sorted(ran) == ["0", "1", "2"]
        batches = {epoch["batches"] for epoch in ran.values()}
        assert len(batches) == 1 and batches.pop() > 0, f"no epoch ran out of data: {ran}"
    chief = _read(tmp_path, f"fit-attempt{final}-node0")["epochs"]
    assert history["loss"] == pytest.approx([chief[str(e)]["loss"] for e in range(epochs)]), "the final fit's only"


def test_max_restarts_is_validated(sc2, tmp_path):
    with pytest.raises(ValueError, match="max_restarts"):
        TFCluster.run(sc2, nf.describe_node, {"out": str(tmp_path)}, 2, max_restarts=-1)
    with pytest.raises(ValueError, match="stall_timeout"):
        TFCluster.run(sc2, nf.describe_node, {"out": str(tmp_path)}, 2, stall_timeout=0)
