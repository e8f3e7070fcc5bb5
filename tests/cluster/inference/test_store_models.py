"""sparkdl.inference reads models from an object store: a real S3-protocol server (moto, the session's
``s3_store``; its AWS variables are in the environment of the driver and of every executor) and a
real local-cluster (``sc2``). Executors read through ``sparkdl.storage`` (``pyarrow.fs``), not
``tf.io.gfile``, which has no S3 in TensorFlow 2.21.

Shown here: a ``.keras`` file and a SavedModel directory in the bucket score as their local copies
do (``predict_batch_udf``, ``Predictor``); a directory whose upload has not finished is refused
naming it; the store settings of the user's Spark (``fs.s3a.bucket.<b>.*``) travel to the executors
with the model; a versioned model directory in the bucket switches to a newly published version.
(Without Spark: tests/unit/inference/test_store_model_files.py.)
"""

from __future__ import annotations

import os
import re
import uuid

import numpy as np
import pytest

from sparkdl.inference import ModelLoadError, ModelVersions, Predictor, predict_batch_udf
from sparkdl.model_versions import publish_version
from sparkdl.storage import Storage

import inference_models as im

ATOL = 1e-5
ROWS = 40


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


@pytest.fixture(scope="module")
def local_models(tmp_path_factory):
    """A tiny untrained MLP (seeded): saved as ``.keras`` and exported as a SavedModel, locally."""
    root = tmp_path_factory.mktemp("store-models")
    model = im.mlp(seed=3, hidden=8)
    keras_path, export_path = root / "mlp.keras", root / "mlp_export"
    model.save(keras_path)
    model.export(str(export_path), verbose=False)
    images, _ = im.digits_28(ROWS)
    reference = np.asarray(model.predict(images, verbose=0))
    return {"keras": str(keras_path), "export": str(export_path), "reference": reference}


def _prefix() -> str:
    return f"store-models-{uuid.uuid4().hex[:8]}"


def _s3a(s3_store, key: str, bucket: str | None = None) -> str:
    return f"s3a://{bucket or s3_store.bucket}/{key}"


def _probs(frame, column: str) -> np.ndarray:
    return np.stack(frame.sort_values("id")[column].to_numpy())


@pytest.mark.timeout(600)
def test_a_keras_file_and_a_saved_model_in_the_bucket_score_as_their_local_copies(spark, s3_store, local_models):
    prefix = _prefix()
    s3_store.client.upload_file(local_models["keras"], s3_store.bucket, f"{prefix}/mlp.keras")
    keras_url = _s3a(s3_store, f"{prefix}/mlp.keras")
    df = im.digits_frame(spark, ROWS)

    udf_remote = predict_batch_udf(model=keras_url, batch_size=16)
    udf_local = predict_batch_udf(model=local_models["keras"], batch_size=16)
    scored = df.select("id", udf_remote("pixels").alias("remote"), udf_local("pixels").alias("local")).toPandas()
    np.testing.assert_array_equal(_probs(scored, "remote"), _probs(scored, "local"))
    np.testing.assert_allclose(_probs(scored, "remote"), local_models["reference"], atol=ATOL)

    predictor = Predictor(keras_url, input_mapping="pixels", keep_columns=["id"], batch_size=16)
    remote = predictor.transform(df).toPandas()
    # (mapInArrow batches rows otherwise than the UDF: the order of some float32 sums differs)
    np.testing.assert_allclose(_probs(remote, "prediction"), _probs(scored, "local"), atol=ATOL)

    # A SavedModel directory uploaded by sparkdl's Storage (saved_model.pb last) scores too.
    export_url = _s3a(s3_store, f"{prefix}/mlp_export")
    Storage().upload(local_models["export"], export_url)
    exported = Predictor(export_url, input_mapping="pixels", output_mapping={"output_0": "probs"}, keep_columns=["id"])
    out = exported.transform(df).toPandas()
    np.testing.assert_allclose(_probs(out, "probs"), local_models["reference"], atol=ATOL)


@pytest.mark.timeout(600)
def test_an_unfinished_upload_is_refused_and_store_settings_travel_with_the_model(spark, s3_store, local_models):
    prefix = _prefix()
    df = im.digits_frame(spark, 4)
    # Every file of the SavedModel but saved_model.pb: an upload still running (or one that died).
    for root, _, files in os.walk(local_models["export"]):
        for name in files:
            if name != "saved_model.pb":
                relative = os.path.relpath(os.path.join(root, name), local_models["export"])
                s3_store.client.upload_file(os.path.join(root, name), s3_store.bucket, f"{prefix}/half/{relative}")
    half = _s3a(s3_store, f"{prefix}/half")
    with pytest.raises(ModelLoadError, match=re.escape(f"model directory '{half}': upload not finished")):
        Predictor(half, input_mapping="pixels").plan(df)

    # The Spark session's per-bucket settings reach the executors inside the model's source: wrong
    # keys for one bucket (the environment's keys are right) make the executors' reads fail, with
    # an error that names the path and the setting, never the secret.
    bucket = s3_store.new_bucket()
    s3_store.client.upload_file(local_models["keras"], bucket, "mlp.keras")
    url = _s3a(s3_store, "mlp.keras", bucket)
    secret = f"wrong-secret-{uuid.uuid4().hex}"
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    names = {f"fs.s3a.bucket.{bucket}.access.key": "AKIAWRONGKEY0000", f"fs.s3a.bucket.{bucket}.secret.key": secret}
    for name, value in names.items():
        hadoop.set(name, value)
    try:
        predictor = Predictor(url, input_mapping="pixels")
        assert secret not in repr(predictor.source)
        with pytest.raises(ModelLoadError) as refused:
            predictor.plan(df)
    finally:
        for name in names:
            hadoop.unset(name)
    message = str(refused.value)
    assert url in message and f"fs.s3a.bucket.{bucket}.access.key" in message
    assert secret not in message and s3_store.secret_key not in message
    assert Predictor(url, input_mapping="pixels").plan(df) is not None  # the environment's keys again


@pytest.mark.timeout(600)
def test_a_versioned_model_directory_in_the_bucket_switches_to_a_new_version(spark, s3_store):
    key = f"{_prefix()}/versions"
    base = _s3a(s3_store, key)

    def publish(version: int, factor: float) -> str:
        return publish_version(base, version, lambda d: im.scale_model(factor).save(os.path.join(d, "model.keras")))

    assert publish(1, 2.0) == f"{base}/1/model.keras"
    df = spark.createDataFrame([(i, float(i + 1)) for i in range(6)], "id long, x float").repartition(2)
    predictor = Predictor(
        ModelVersions(base, refresh_seconds=0), input_mapping="x", keep_columns=["id", "x"], version_column="v"
    )
    scored = predictor.transform(df, arrow=False)
    assert {(r["v"], r["prediction"]) for r in scored.collect()} == {(1, 2.0 * (i + 1)) for i in range(6)}

    publish(2, 3.0)
    # A SavedModel version still being uploaded (no saved_model.pb yet) is passed over.
    s3_store.client.put_object(Bucket=s3_store.bucket, Key=f"{key}/3/variables/variables.index", Body=b"")
    assert {(r["v"], r["prediction"]) for r in scored.collect()} == {(2, 3.0 * (i + 1)) for i in range(6)}
    with pytest.raises(FileExistsError, match="versions are immutable"):
        publish(2, 4.0)
