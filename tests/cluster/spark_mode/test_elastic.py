"""Elastic training (``TFCluster.run(min_executors=...)``) on local-cluster[3,1,1024]: a node whose
executor Spark removes for good (``SparkContext.killExecutor``, no replacement) leaves the cluster
training on the survivors; an executor Spark adds joins at the next epoch boundary. Each epoch's
rows reach the nodes of the attempt that completed it exactly once, and MWMS keeps the nodes'
weights identical whatever their count."""

from __future__ import annotations

import json
from pathlib import Path

import elastic_functions as ef
import pytest
from elastic_checks import EPOCHS, check_epochs, check_weights, frame_of_ids, hold, set_executors

from sparkdl import TFCluster

from node_functions import wait_for_file

# stops_spark: after these, Spark's executors have new ids, which the exactly-once tests on this Spark rely on
pytestmark = [pytest.mark.timeout(420), pytest.mark.stops_spark]


def _run(sc, out: Path, *holds: dict, backup_dir: str | None = None):
    args = {"out": str(out), "backup_dir": backup_dir or str(out / "backup"), "holds": holds}
    return TFCluster.run(
        sc,
        ef.elastic_fit,
        args,
        3,
        input_mode=TFCluster.InputMode.SPARK,
        min_executors=2,
        elastic_wait=2,
        executor_wait_timeout=3,
    )


def test_a_node_lost_for_good_mid_epoch_2_leaves_the_survivors_training_epochs_2_to_4(sc3, tmp_path, s3_store):
    """The backup is in a bucket (``s3_store``): the resized cluster restores epoch 1's from there."""
    set_executors(sc3, 3)
    frame = frame_of_ids(sc3)
    backup = s3_store.url(f"elastic-{tmp_path.name}/backup")
    cluster = _run(sc3, tmp_path, hold(attempt=0, node=2, epoch=1, step=2), backup_dir=backup)
    try:
        training = {}
        import threading

        thread = threading.Thread(target=lambda: training.update(history=cluster.train(frame, num_epochs=EPOCHS)))
        thread.start()
        assert wait_for_file(str(tmp_path / "held.json"), 180), "worker:1 never reached epoch 2"
        victim = json.loads((tmp_path / "held.json").read_text())["executor"]
        assert victim, "the node could not tell its Spark executor"
        sc3._jsc.sc().killExecutor(victim)  # for good: Spark starts no replacement
        thread.join(300)
        assert not thread.is_alive() and "history" in training, "cluster.train did not return"
        cluster.shutdown(timeout=120)
    finally:
        set_executors(sc3, 3)  # the next tests on this Spark expect three executors

    history = training["history"]
    assert history["nodes"] == [3.0, 2.0, 2.0, 2.0]  # epoch 2 was cut short: it ran again on the survivors
    assert len(history["loss"]) == EPOCHS
    assert [(r["from_nodes"], r["to_nodes"]) for r in cluster.resizes] == [(3, 2)]
    assert "lost its Spark executor" in cluster.resizes[0]["reason"]
    assert cluster.restarts == 0 and cluster.num_nodes == 2  # max_restarts=0: a lost executor is not counted
    check_epochs(tmp_path, [3, 2, 2, 2])
    check_weights(tmp_path, attempt=1, nodes=2)


def test_an_executor_spark_adds_during_epoch_2_joins_for_epoch_3(sc3, tmp_path):
    set_executors(sc3, 2)
    frame = frame_of_ids(sc3)
    cluster = _run(sc3, tmp_path, hold(attempt=0, node=0, epoch=1, step=1))
    assert cluster.num_nodes == 2, "it starts on the two executors Spark has"
    import threading

    training = {}
    thread = threading.Thread(target=lambda: training.update(history=cluster.train(frame, num_epochs=EPOCHS)))
    thread.start()
    try:
        assert wait_for_file(str(tmp_path / "held.json"), 180), "the chief never reached epoch 2"
        set_executors(sc3, 3)  # Spark adds one
        (tmp_path / "held-release").touch()
        thread.join(300)
        assert not thread.is_alive() and "history" in training, "cluster.train did not return"
        cluster.shutdown(timeout=120)
    finally:
        (tmp_path / "held-release").touch()
        set_executors(sc3, 3)

    history = training["history"]
    assert history["nodes"] == [2.0, 2.0, 3.0, 3.0]
    assert [(r["from_nodes"], r["to_nodes"]) for r in cluster.resizes] == [(2, 3)]
    assert cluster.resizes[0]["epochs_done"] == 2
    check_epochs(tmp_path, [2, 2, 3, 3])
    check_weights(tmp_path, attempt=1, nodes=3)
