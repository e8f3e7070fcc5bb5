"""An elastic KerasEstimator fit (``min_workers``) of a tf-keras model (``TF_USE_LEGACY_KERAS=1`` on
the nodes, from the model's flavour) on local-cluster[3,1,1024]: a node whose executor Spark removes
for good mid-fit leaves the fit going on on the survivors, resumed from the last epoch's backup.
(TFCluster's elastic training with Keras 3: tests/cluster/spark_mode/test_elastic.py.)"""

from __future__ import annotations

import json
import threading

import keras_elastic_functions as kef
import pytest
from elastic_checks import set_executors
from pyspark.ml.feature import VectorAssembler

from sparkdl.keras import KerasEstimator

import keras_functions as kf
from node_functions import wait_for_file

# stops_spark: after it, Spark's executors have new ids, which the exactly-once tests on this Spark rely on
# The slow tier: about 100 s of CI's time for a path test_elastic.py (the resize) and
# test_store_training.py (tf-keras' BackupAndRestore) cover in parts on every run.
pytestmark = [pytest.mark.timeout(480), pytest.mark.stops_spark, pytest.mark.slow]
EPOCHS = 3


def _launches(sc) -> dict[int, str]:
    """The Spark jobs that launched TF nodes so far: their descriptions by job id."""
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    found = {}
    for job in (jobs.apply(i) for i in range(jobs.size())):
        described = job.description()
        if described.isDefined() and described.get().startswith("sparkdl: run "):
            found[job.jobId()] = described.get()
    return found


def test_a_tf_keras_fit_with_min_workers_goes_on_on_the_survivors_when_a_node_is_lost(sc3, spark_holder, tmp_path):
    """Issue 53 item 13d: worker:1 holds before step 1 of epoch 2; its executor is killed for good.
    The fit relaunches on the two nodes Spark can host and ends with every epoch in its history."""
    spark = spark_holder.spark
    set_executors(sc3, 3)
    digits = kf.digits_frame(spark)
    data = VectorAssembler(inputCols=kf.PIXELS, outputCol="features").transform(digits).select("features", "label")
    estimator = KerasEstimator(
        model=kf.mlp, feature_cols="features", label_cols="label", epochs=EPOCHS, batch_size=32, num_workers=3,
        min_workers=2, callbacks=[kef.HoldOnce(str(tmp_path))], model_dir=str(tmp_path / "models"),
    )  # fmt: skip
    launches = set(_launches(sc3))
    fitted: dict = {}

    def fit() -> None:
        try:
            fitted["model"] = estimator.fit(data)
        except Exception as exc:  # noqa: BLE001 - the test reports it
            fitted["error"] = exc

    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    try:
        assert wait_for_file(str(tmp_path / "held.json"), 240), "worker:1 never reached epoch 2"
        held = json.loads((tmp_path / "held.json").read_text())
        assert held["executor"], "the node could not tell its Spark executor"
        sc3._jsc.sc().killExecutor(held["executor"])  # for good: Spark starts no replacement
        thread.join(300)
        assert not thread.is_alive(), "fit did not return"
    finally:
        (tmp_path / "held-release").touch()
        set_executors(sc3, 3)  # the next tests on this Spark expect three executors

    assert "model" in fitted, fitted
    assert held["keras"].startswith("tf_keras"), held  # the nodes trained the model with tf-keras
    started = [" ".join(d.split()[:4]) for job, d in sorted(_launches(sc3).items()) if job not in launches]
    assert started == ["sparkdl: run 3 TensorFlow", "sparkdl: run 2 TensorFlow"], started  # resized to the survivors
    history = fitted["model"].history
    assert len(history["loss"]) == EPOCHS and history["loss"][-1] < history["loss"][0], history
