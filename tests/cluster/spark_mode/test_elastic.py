"""Elastic training (``TFCluster.run(min_executors=...)``) on local-cluster[3,1,1024]: a node whose
executor Spark removes for good (``SparkContext.killExecutor``, no replacement) leaves the cluster
training on the survivors; an executor Spark adds joins at the next epoch boundary. Each epoch's
rows reach the nodes of the attempt that completed it exactly once, and MWMS keeps the nodes'
weights identical whatever their count."""

from __future__ import annotations

import json
import time
from pathlib import Path

import elastic_functions as ef
import pytest

from sparkdl import TFCluster

from node_functions import wait_for_file

pytestmark = pytest.mark.timeout(420)

ROWS, EPOCHS = 240, 4  # 240 rows share out evenly over 2 and 3 nodes: no padding copies


def _active_executors(sc) -> list[str]:
    """The executors Spark can give tasks to now (those being removed left out)."""
    jsc = sc._jsc.sc()
    backend, ids = jsc.schedulerBackend(), jsc.getExecutorIds()
    return [ids.apply(i) for i in range(ids.size()) if backend.isExecutorActive(ids.apply(i))]


def _executors(sc, count: int, timeout_s: float = 90.0) -> None:
    """Bring the application to ``count`` active executors: kill the extra ones (Spark replaces
    none) or ask Spark for more, and wait (bounded) until it has them."""
    jsc = sc._jsc.sc()
    active = _active_executors(sc)
    for executor in active[count:]:
        jsc.killExecutor(executor)
    if len(active) < count:  # the application's executor target, through Spark's API
        jsc.requestTotalExecutors(count, 0, sc._jvm.PythonUtils.toScalaMap({}))
    deadline = time.monotonic() + timeout_s
    while len(_active_executors(sc)) != count:
        assert time.monotonic() < deadline, f"Spark did not reach {count} executors in {timeout_s:.0f} s"
        time.sleep(0.2)  # polling the JVM's executor list: no event reaches Python


def _frame(sc):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    rows = [(i, [float(i % 7), float(i % 5), float(i % 3), 1.0], i % 2) for i in range(ROWS)]
    return spark.createDataFrame(rows, "id long, x array<float>, y long").repartition(3).cache()


def _epoch_ids(out: Path) -> dict[int, list[dict]]:
    """For each epoch, the id records of the attempt that completed it last."""
    by_epoch: dict[int, dict[int, list[dict]]] = {}
    for path in out.glob("ids-attempt*-node*-epoch*.json"):
        attempt = int(path.name.split("-")[1][len("attempt") :])
        epoch = int(path.stem.rsplit("epoch", 1)[1])
        by_epoch.setdefault(epoch, {}).setdefault(attempt, []).append(json.loads(path.read_text()))
    return {epoch: attempts[max(attempts)] for epoch, attempts in by_epoch.items()}


def _check_epochs(out: Path, nodes_per_epoch: list[int]) -> None:
    epochs = _epoch_ids(out)
    assert sorted(epochs) == list(range(EPOCHS))
    for epoch, records in epochs.items():
        assert len(records) == nodes_per_epoch[epoch], f"epoch {epoch}: {len(records)} nodes"
        assert {r["nodes"] for r in records} == {nodes_per_epoch[epoch]}
        ids = sorted(i for r in records for i in r["ids"])
        assert ids == list(range(ROWS)), f"epoch {epoch}: every row exactly once over {len(records)} nodes"


def _check_weights(out: Path, attempt: int, nodes: int) -> None:
    digests = {json.loads((out / f"weights-attempt{attempt}-node{n}.json").read_text())["sha"] for n in range(nodes)}
    assert len(digests) == 1, "MWMS keeps every survivor's weights identical"


def hold(attempt: int, node: int, epoch: int, step: int, name: str = "held") -> dict:
    """Where ``elastic_fit`` stops one node until the test releases it (epochs count from 0)."""
    return {"attempt": attempt, "node": node, "epoch": epoch, "step": step, "name": name}


def _run(sc, out: Path, *holds: dict):
    args = {"out": str(out), "backup_dir": str(out / "backup"), "holds": holds}
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


def test_a_node_lost_for_good_mid_epoch_2_leaves_the_survivors_training_epochs_2_to_4(sc3, tmp_path):
    _executors(sc3, 3)
    frame = _frame(sc3)
    cluster = _run(sc3, tmp_path, hold(attempt=0, node=2, epoch=1, step=2))
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
        _executors(sc3, 3)  # the next tests on this Spark expect three executors

    history = training["history"]
    assert history["nodes"] == [3.0, 2.0, 2.0, 2.0]  # epoch 2 was cut short: it ran again on the survivors
    assert len(history["loss"]) == EPOCHS
    assert [(r["from_nodes"], r["to_nodes"]) for r in cluster.resizes] == [(3, 2)]
    assert "lost its Spark executor" in cluster.resizes[0]["reason"]
    assert cluster.restarts == 0 and cluster.num_nodes == 2  # max_restarts=0: a lost executor is not counted
    _check_epochs(tmp_path, [3, 2, 2, 2])
    _check_weights(tmp_path, attempt=1, nodes=2)


def test_an_executor_spark_adds_during_epoch_2_joins_for_epoch_3(sc3, tmp_path):
    _executors(sc3, 2)
    frame = _frame(sc3)
    cluster = _run(sc3, tmp_path, hold(attempt=0, node=0, epoch=1, step=1))
    assert cluster.num_nodes == 2, "it starts on the two executors Spark has"
    import threading

    training = {}
    thread = threading.Thread(target=lambda: training.update(history=cluster.train(frame, num_epochs=EPOCHS)))
    thread.start()
    try:
        assert wait_for_file(str(tmp_path / "held.json"), 180), "the chief never reached epoch 2"
        _executors(sc3, 3)  # Spark adds one
        (tmp_path / "held-release").touch()
        thread.join(300)
        assert not thread.is_alive() and "history" in training, "cluster.train did not return"
        cluster.shutdown(timeout=120)
    finally:
        (tmp_path / "held-release").touch()
        _executors(sc3, 3)

    history = training["history"]
    assert history["nodes"] == [2.0, 2.0, 3.0, 3.0]
    assert [(r["from_nodes"], r["to_nodes"]) for r in cluster.resizes] == [(2, 3)]
    assert cluster.resizes[0]["epochs_done"] == 2
    _check_epochs(tmp_path, [2, 2, 3, 3])
    _check_weights(tmp_path, attempt=1, nodes=3)
