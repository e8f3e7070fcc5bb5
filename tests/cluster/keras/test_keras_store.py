"""A KerasEstimator whose run store is a bucket (``checkpoint_dir="s3a://..."``), on local-cluster[2,1,1024]
against an S3-protocol server (moto) reached by the standard AWS environment alone (``s3_store``): two TF
nodes train, the chief's state.json, model.keras, best.keras and backup generations land in the bucket; a
second fit with the same run_id and more epochs resumes from the bucket (only the epochs left are trained);
the KerasModel scores from the bucket as its model predicts, and saves to and loads from the bucket.
(test_keras_resume.py kills a fit with its run store in a bucket, and resumes it in a new application.)"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

import keras_functions as kf

pytestmark = pytest.mark.timeout(480)
ROWS, FEATURES = 192, 8


def _frame(spark):
    rng = np.random.default_rng(0)
    x = rng.random((ROWS, FEATURES), dtype=np.float32)
    y = (x[:, 0] + x[:, 1] > 1.0).astype("int64")
    rows = [(x[i].tolist(), int(y[i])) for i in range(ROWS)]
    return spark.createDataFrame(rows, "x array<float>, label long").repartition(2)


def tiny_mlp():
    """A tiny Keras 3 classifier of 8 values into 2 classes (seeded)."""
    return kf.keras3_mlp(0.05, hidden=4, inputs=FEATURES)


def _keys(s3_store, prefix: str) -> list[str]:
    listed = s3_store.client.list_objects_v2(Bucket=s3_store.bucket, Prefix=prefix + "/")
    return sorted(item["Key"][len(prefix) + 1 :] for item in listed.get("Contents", []))


def _state(s3_store, prefix: str) -> dict:
    body = s3_store.client.get_object(Bucket=s3_store.bucket, Key=f"{prefix}/state.json")["Body"].read()
    return json.loads(body)


def test_a_run_store_in_a_bucket_trains_resumes_and_scores_from_the_bucket(sc2, s3_store, tmp_path):
    from pyspark.sql import SparkSession

    from sparkdl.keras import KerasEstimator, KerasModel

    spark = SparkSession.builder.getOrCreate()
    data = _frame(spark).cache()
    root = f"runs-{uuid.uuid4().hex[:8]}"
    run = f"{root}/r1"
    out = tmp_path / "epochs"
    out.mkdir()

    def estimator(epochs: int):
        return KerasEstimator(
            model=tiny_mlp,
            feature_cols="x",
            label_cols="label",
            epochs=epochs,
            batch_size=16,
            num_workers=2,
            checkpoint_dir=s3_store.url(root).replace("s3://", "s3a://"),
            run_id="r1",
            monitor="loss",
            callbacks=[kf.Keras3EpochLog(str(out))],
        )

    first = estimator(2).fit(data)
    keys = _keys(s3_store, run)
    state = _state(s3_store, run)
    assert first.getModelPath() == s3_store.url(f"{run}/model.keras").replace("s3://", "s3a://")
    assert {"state.json", "model.keras", "best.keras", "backup/latest.json"} <= set(keys), keys
    assert any(k.startswith("backup/gen-") for k in keys), keys
    assert state["epochs_completed"] == 2 and state["finished"] and len(state["history"]["loss"]) == 2
    pointer = json.loads(
        s3_store.client.get_object(Bucket=s3_store.bucket, Key=f"{run}/backup/latest.json")["Body"].read()
    )
    assert pointer["facts"] == {"epoch": 2}
    trained = kf.read_epoch_logs(out)
    assert sorted(e["epoch"] for e in trained) == [0, 0, 1, 1]  # two nodes, two epochs

    second = estimator(3).fit(data)  # the same run_id, one epoch more: resumed from the bucket
    again = kf.read_epoch_logs(out)[len(trained) :]
    state = _state(s3_store, run)
    print("epochs trained: first fit", [e["epoch"] for e in trained], "second", [e["epoch"] for e in again])
    assert sorted(e["epoch"] for e in again) == [2, 2]  # only the epoch left, on both nodes
    assert state["epochs_completed"] == 3 and state["finished"]
    assert len(second.history["loss"]) == 3
    np.testing.assert_allclose(second.history["loss"][:2], first.history["loss"], rtol=1e-6)

    # Scored from the bucket as the model itself predicts; saved to the bucket and loaded back, the same.
    test = data.limit(24).toPandas()
    expected = second.keras_model.predict(np.stack(test["x"].to_numpy()).astype("float32"), verbose=0)
    scored = second.transform(spark.createDataFrame(test)).toPandas()
    np.testing.assert_allclose(np.stack(scored["probability"].map(lambda v: v.toArray())), expected, atol=1e-5)
    saved = s3_store.url(f"{root}/saved-model").replace("s3://", "s3a://")
    second.write().save(saved)
    assert {"metadata/part-00000", "metadata/_SUCCESS", "model/model.keras"} <= set(
        _keys(s3_store, f"{root}/saved-model")
    )
    with pytest.raises(FileExistsError):
        second.write().save(saved)
    second.write().overwrite().save(saved)
    loaded = KerasModel.load(saved)
    assert loaded.getModelPath() == f"{saved}/model/model.keras" and loaded.history == second.history
    rescored = loaded.transform(spark.createDataFrame(test)).toPandas()
    np.testing.assert_allclose(np.stack(rescored["probability"].map(lambda v: v.toArray())), expected, atol=1e-5)
    data.unpersist()
