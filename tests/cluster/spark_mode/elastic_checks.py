"""What the elastic-training tests share (``test_elastic.py``, ``test_elastic_hosts.py``): Spark's
executors as its scheduler sees them, the data, where a node holds, and the checks of each epoch's
rows and of the survivors' weights."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sparkdl.driver.spark_access import spark_access

ROWS, EPOCHS = 240, 4  # 240 rows share out evenly over 2 and 3 nodes: no padding copies


def active_executors(sc) -> list[str]:
    """The executors Spark can give tasks to now (those being removed left out), as sparkdl counts them."""
    return spark_access(sc).active_executors()


def set_executors(sc, count: int, timeout_s: float = 90.0) -> None:
    """Bring the application to ``count`` active executors: kill the extra ones (Spark replaces
    none) or ask Spark for more, and wait (bounded) until it has them."""
    jsc = sc._jsc.sc()
    active = active_executors(sc)
    for executor in active[count:]:
        jsc.killExecutor(executor)
    if len(active) < count:  # the application's executor target, through Spark's API
        jsc.requestTotalExecutors(count, 0, sc._jvm.PythonUtils.toScalaMap({}))
    deadline = time.monotonic() + timeout_s
    while len(active_executors(sc)) != count:
        assert time.monotonic() < deadline, f"Spark did not reach {count} executors in {timeout_s:.0f} s"
        time.sleep(0.2)  # polling the JVM's executor list: no event reaches Python


def frame_of_ids(sc):
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


def check_epochs(out: Path, nodes_per_epoch: list[int]) -> None:
    epochs = _epoch_ids(out)
    assert sorted(epochs) == list(range(EPOCHS))
    for epoch, records in epochs.items():
        assert len(records) == nodes_per_epoch[epoch], f"epoch {epoch}: {len(records)} nodes"
        assert {r["nodes"] for r in records} == {nodes_per_epoch[epoch]}
        ids = sorted(i for r in records for i in r["ids"])
        assert ids == list(range(ROWS)), f"epoch {epoch}: every row exactly once over {len(records)} nodes"


def check_weights(out: Path, attempt: int, nodes: int) -> None:
    digests = {json.loads((out / f"weights-attempt{attempt}-node{n}.json").read_text())["sha"] for n in range(nodes)}
    assert len(digests) == 1, "MWMS keeps every survivor's weights identical"


def hold(attempt: int, node: int, epoch: int, step: int, name: str = "held") -> dict:
    """Where ``elastic_fit`` stops one node until the test releases it (epochs count from 0)."""
    return {"attempt": attempt, "node": node, "epoch": epoch, "step": step, "name": name}
