"""sparkdl.inference: scoring on a real local-cluster, and TensorFlow's setup in a fresh worker.
(Conversions, device and cache rules without Spark or TensorFlow: tests/unit/inference/test_inference_columns.py.)

Scoring tests compare against ``model.predict`` on the same rows in this process. Tolerance:
``atol=1e-5`` on softmax probabilities (same float32 kernels; only the batch composition, and so
the order of some reductions, differs). Models are built once per module into a temp directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sparkdl.inference import InferenceInputError, ModelLoadError, Predictor, map_in_pandas, predict_batch_udf

import inference_models as im

ATOL = 1e-5
TESTS = Path(__file__).resolve().parents[2]  # tests/


# ---------------------------------------------------------------------------------------------
# TensorFlow's setup in a fresh Python worker
# ---------------------------------------------------------------------------------------------


@pytest.mark.cluster  # TensorFlow in a fresh worker process
@pytest.mark.timeout(120)
def test_tensorflow_setup_restores_the_worker_environment():
    # A fresh interpreter (TensorFlow not imported yet), as a new Python worker is.
    code = textwrap.dedent("""
        import json, os
        os.environ["CUDA_VISIBLE_DEVICES"] = "4,5"
        from sparkdl.inference import worker
        setup = worker._set_up_tensorflow("spark", ["1"], "4,5")
        print(json.dumps({"setup": setup, "after": os.environ.get("CUDA_VISIBLE_DEVICES"),
                          "order": os.environ.get("CUDA_DEVICE_ORDER")}))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]
    import json

    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["setup"]["visible"] == ["5"] and record["setup"]["by"] == "sparkdl"
    assert record["after"] == "4,5" and record["order"] is None


# ---------------------------------------------------------------------------------------------
# Scoring on local-cluster[2,1,1024]
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Models saved once: Keras 3 .keras and SavedModel, tf-keras SavedModel and .keras, multi-IO."""
    import tf_keras

    root = tmp_path_factory.mktemp("models")
    images, _ = im.digits_28(300)
    mlp = im.train(im.mlp(), epochs=1, rows=600)
    multi = im.multi_io()
    scalar = im.scalar_model()
    legacy = im.tf_keras_mlp()
    paths = {
        "mlp": root / "mlp.keras",
        "mlp_export": root / "mlp_export",
        "multi": root / "multi.keras",
        "scalar": root / "scalar.keras",
        "legacy_sm": root / "legacy_sm",
        "legacy_keras": root / "legacy.keras",
    }
    mlp.save(paths["mlp"])
    mlp.export(str(paths["mlp_export"]), verbose=False)
    multi.save(paths["multi"])
    scalar.save(paths["scalar"])
    legacy.save(str(paths["legacy_sm"]), save_format="tf")
    legacy.save(paths["legacy_keras"])
    assert isinstance(legacy, tf_keras.Model)
    return {
        "paths": {k: str(v) for k, v in paths.items()},
        "mlp": mlp,
        "multi": multi,
        "scalar": scalar,
        "legacy": legacy,
    }


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


def _reference(model, images):
    return np.asarray(model.predict(images, batch_size=256, verbose=0))


def _probs(frame, column="prediction"):
    return np.stack(frame[column].to_numpy())


@pytest.mark.timeout(180)
def test_map_in_pandas_matches_model_predict_across_arrow_batches(spark, models):
    df = im.digits_frame(spark, 1500, partitions=3)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "300")  # several Arrow batches per task
    try:
        fn, schema = map_in_pandas(
            df, models["paths"]["mlp"], input_mapping={"pixels": "image"}, keep_columns=["id", "label"], batch_size=128
        )
        assert schema.simpleString() == "struct<id:bigint,label:bigint,prediction:array<float>>"
        out = df.mapInPandas(fn, schema).toPandas().sort_values("id")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    images, labels = im.digits_28(1500)
    assert out["id"].tolist() == list(range(1500)) and (out["label"].to_numpy() == labels).all()
    np.testing.assert_allclose(_probs(out), _reference(models["mlp"], images), atol=ATOL)


@pytest.mark.timeout(180)
def test_saved_models_from_keras3_and_tf_keras_and_arrow_form(spark, models):
    df = im.digits_frame(spark, 400)
    images, _ = im.digits_28(400)
    exported = Predictor(
        models["paths"]["mlp_export"],
        input_mapping="pixels",
        output_mapping={"output_0": "probs"},
        keep_columns=["id"],
        batch_size=100,
    )
    out = exported.transform(df).toPandas().sort_values("id")  # mapInArrow
    np.testing.assert_allclose(_probs(out, "probs"), _reference(models["mlp"], images), atol=ATOL)
    for key in ("legacy_sm", "legacy_keras"):  # tf-keras (Keras 2) files: SavedModel and .keras
        predictor = Predictor(models["paths"][key], input_mapping="pixels", keep_columns=["id"])
        out = predictor.transform(df, arrow=False)
        np.testing.assert_allclose(
            _probs(out.toPandas().sort_values("id")), _reference(models["legacy"], images), atol=ATOL, err_msg=key
        )


@pytest.mark.timeout(180)
def test_multi_input_multi_output_and_scalars(spark, models):
    images, _ = im.digits_28(300)
    meta = np.random.default_rng(1).random((300, 3), dtype=np.float32)
    frame = pd.DataFrame(
        {
            "id": np.arange(300),
            "pixels": list(images.reshape(300, -1)),
            "meta": list(meta),
            "a": meta[:, 0].astype("float64"),
            "b": np.arange(300, dtype="int64"),
        }
    )
    df = spark.createDataFrame(frame, "id long, pixels array<float>, meta array<float>, a double, b long")
    out = Predictor(
        models["paths"]["multi"],
        input_mapping={"pixels": "image", "meta": "meta"},
        output_mapping={"probs": "probabilities", "score": "score"},
        keep_columns=["id"],
        batch_size=64,
    ).transform(df)
    assert out.schema.simpleString() == "struct<id:bigint,probabilities:array<float>,score:float>"
    got = out.toPandas().sort_values("id")
    expected = models["multi"].predict({"image": images, "meta": meta}, verbose=0)
    np.testing.assert_allclose(_probs(got, "probabilities"), expected["probs"], atol=ATOL)
    np.testing.assert_allclose(got["score"].to_numpy(), expected["score"].ravel(), atol=ATOL)
    # Scalar columns (double and long, cast to the model's float32) into inputs of shape (1,).
    scalar = (
        Predictor(
            models["paths"]["scalar"], input_mapping={"a": "a", "b": "b"}, output_mapping="y", keep_columns=["id"]
        )
        .transform(df)
        .toPandas()
        .sort_values("id")
    )
    expected = models["scalar"].predict({"a": meta[:, :1], "b": np.arange(300, dtype="float32")[:, None]}, verbose=0)
    np.testing.assert_allclose(scalar["y"].to_numpy(), expected.ravel(), rtol=1e-5, atol=1e-4)


@pytest.mark.timeout(240)
def test_input_mapping_in_any_order_feeds_each_input_by_name(spark, models, tmp_path):
    # y = 2a + b: a mapping listing b before a must still give 12 (not 21) for a=1, b=10.
    from sparkdl.ml import TFModel

    df = spark.createDataFrame([(i, float(i), 10.0 * i) for i in (1, 2, 3)], "id long, a double, b double")
    expected = [12.0, 24.0, 36.0]
    exported = str(tmp_path / "scalar_export")  # a SavedModel: its inputs are fed by keyword
    models["scalar"].export(exported, verbose=False)

    results = {}

    def check(frame, form, column="y"):
        results[form] = frame.toPandas().sort_values("id")[column].tolist()

    for kind, path in (("keras", models["paths"]["scalar"]), ("saved_model", exported)):
        predictor = Predictor(path, input_mapping={"b": "b", "a": "a"}, output_mapping="y", keep_columns=["id"])
        check(predictor.transform(df), f"mapInArrow {kind}")
        check(predictor.transform(df, arrow=False), f"mapInPandas {kind}")
    udf = predict_batch_udf(model=models["paths"]["scalar"], input_names=["b", "a"])
    check(df.select("id", udf("b", "a").alias("y")), "predict_batch_udf")
    # TFModel sorts its mapping by column: w (-> b) comes before x (-> a).
    tf_model = TFModel(input_mapping={"x": "a", "w": "b"}, export_dir=models["paths"]["scalar"])
    check(tf_model.transform(df.toDF("id", "x", "w")), "TFModel", "prediction")
    wrong = {form: got for form, got in results.items() if not np.allclose(got, expected, rtol=1e-6)}
    assert not wrong, f"expected {expected}, got {wrong}"


@pytest.mark.timeout(120)
def test_empty_partitions_and_empty_frames(spark, models):
    images, _ = im.digits_28(3)
    rows = [(i, images[i].ravel().tolist()) for i in range(3)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 6), "id long, pixels array<float>")
    predictor = Predictor(models["paths"]["mlp"], input_mapping="pixels", keep_columns=["id"])
    for arrow in (False, True):
        out = predictor.transform(df, arrow=arrow).toPandas().sort_values("id")
        np.testing.assert_allclose(_probs(out), _reference(models["mlp"], images), atol=ATOL)
    empty = df.filter("id < 0")
    assert predictor.transform(empty, arrow=False).count() == 0
    assert predictor.transform(empty, arrow=True).count() == 0


@pytest.mark.timeout(120)
def test_schema_problems_fail_on_the_driver_naming_the_column(spark, models):
    df = spark.createDataFrame(
        [(1, ["x"] * 784, 2.0, [1.0] * 784)], "id long, words array<string>, v double, pixels array<double>"
    )
    path = models["paths"]["mlp"]
    with pytest.raises(InferenceInputError, match=r"column 'words'.*holds str values but the model expects float32"):
        map_in_pandas(df, path, input_mapping={"words": "image"})
    with pytest.raises(InferenceInputError, match=r"column 'v'.*one value per row.*\(28, 28, 1\)"):
        map_in_pandas(df, path, input_mapping={"v": "image"})
    with pytest.raises(InferenceInputError, match=r"model input 'pic'.*its inputs are \['image'\]"):
        map_in_pandas(df, path, input_mapping={"pixels": "pic"})
    with pytest.raises(InferenceInputError, match=r"'nope'.*not in the DataFrame"):
        map_in_pandas(df, path, input_mapping={"nope": "image"})
    with pytest.raises(InferenceInputError, match=r"output 'logits'.*its outputs are \['probs'\]"):
        map_in_pandas(df, path, input_mapping="pixels", output_mapping={"logits": "x"})
    with pytest.raises(ModelLoadError, match="does not exist"):
        map_in_pandas(df, path + ".missing", input_mapping="pixels")
    # array<double> feeds a float32 input (same-kind cast): accepted.
    fn, schema = map_in_pandas(df, path, input_mapping="pixels")
    assert schema.names == ["prediction"]


@pytest.mark.timeout(120)
def test_bad_rows_fail_the_task_naming_the_column(spark, models):
    from pyspark.errors import PythonException

    # One Predictor for both jobs: it reads the model's signature once, while the executors' Python
    # workers are alive. A failed task ends its worker, so a second probe would import TensorFlow
    # and load the model again in a fresh one.
    predictor = Predictor(models["paths"]["mlp"], input_mapping="pixels")
    short = spark.createDataFrame([(1, [0.5] * 100)], "id long, pixels array<float>")
    with pytest.raises(
        PythonException,
        match=r"column 'pixels' \(model input 'image'\): each row holds 100 values "
        r"but the model expects 784",
    ):
        predictor.transform(short, arrow=False).collect()
    # (Each failing job costs Spark's 4 task attempts, so the pandas form's null check is unit-tested.)
    nulls = spark.createDataFrame([(1, [0.5] * 784), (2, None)], "id long, pixels array<float>").coalesce(1)
    with pytest.raises(PythonException, match=r"column 'pixels' \(model input 'image'\) has 1 null value"):
        predictor.transform(nulls, arrow=True).collect()


@pytest.mark.timeout(180)
def test_model_is_loaded_once_per_worker_and_reloaded_when_the_file_changes(spark, models, tmp_path):
    path = tmp_path / "model.keras"
    im.mlp(seed=1).save(path)
    df = im.digits_frame(spark, 600, partitions=6)
    images, _ = im.digits_28(600)

    def run():
        predictor = Predictor(str(path), input_mapping="pixels", keep_columns=["id"], batch_size=96)
        fn, schema = predictor.map_in_pandas_fn(df)
        observed_schema = f"{schema.simpleString()[7:-1]}, pid long, loads_before long, loads_after long, traces long"
        return df.mapInPandas(im.observed(fn), observed_schema).toPandas().sort_values("id")

    first = run()
    np.testing.assert_allclose(_probs(first), _reference(im.mlp(seed=1), images), atol=ATOL)
    tasks = first.groupby(["pid", "loads_before"]).loads_after.max().reset_index()
    # Six tasks on two single-slot executors: each worker loads the model in its first task only.
    per_worker = first.groupby("pid").agg(lo=("loads_before", "min"), hi=("loads_after", "max"))
    assert ((per_worker.hi - per_worker.lo) <= 1).all(), tasks
    assert len(tasks) >= 2  # several tasks observed
    # Partial chunks (600 / 6 = 100 rows = 96 + 4) never retraced the tf.function.
    assert first.traces.max() == 1

    second = run()  # same file: served from the cache, no load at all
    again = second.merge(per_worker, left_on="pid", right_index=True)
    assert len(again) and (again.loads_after == again.hi).all()

    im.mlp(seed=2).save(path)  # same path, new weights
    os.utime(path, ns=(1, 1))  # a different mtime even on coarse file systems
    third = run()
    np.testing.assert_allclose(_probs(third), _reference(im.mlp(seed=2), images), atol=ATOL)
    reloaded = third.merge(per_worker, left_on="pid", right_index=True)
    assert (reloaded.loads_after == reloaded.hi + 1).all()


@pytest.mark.timeout(180)
def test_predict_batch_udf_matches_pyspark_and_accepts_a_model(spark, models):
    from pyspark.ml.functions import predict_batch_udf as pyspark_udf
    from pyspark.sql.types import ArrayType, DoubleType, FloatType, StructField, StructType

    images, _ = im.digits_28(200)
    df = im.digits_frame(spark, 200)
    struct = StructType([StructField("doubled", ArrayType(FloatType())), StructField("total", DoubleType())])
    kwargs = dict(return_type=struct, batch_size=50, input_tensor_shapes=[[28, 28, 1]])
    theirs = df.select("id", pyspark_udf(im.make_doubling_predict_fn, **kwargs)("pixels").alias("p"))
    ours = df.select("id", predict_batch_udf(im.make_doubling_predict_fn, **kwargs)("pixels").alias("p"))
    theirs, ours = (f.select("id", "p.*").toPandas().sort_values("id") for f in (theirs, ours))
    np.testing.assert_allclose(_probs(ours, "doubled"), _probs(theirs, "doubled"))
    np.testing.assert_allclose(ours["total"], theirs["total"], rtol=1e-6)

    udf = predict_batch_udf(model=models["paths"]["mlp"], batch_size=64)
    scored = df.withColumn("probs", udf("pixels")).toPandas().sort_values("id")
    np.testing.assert_allclose(_probs(scored, "probs"), _reference(models["mlp"], images), atol=ATOL)
    multi = predict_batch_udf(model=models["paths"]["multi"], batch_size=64)
    meta = spark.createDataFrame(
        [(i, images[i].ravel().tolist(), [0.1, 0.2, 0.3]) for i in range(5)],
        "id long, pixels array<float>, meta array<float>",
    )
    row = meta.select(multi("pixels", "meta").alias("out")).select("out.*").first()
    assert len(row["probs"]) == 10 and isinstance(row["score"], float)


@pytest.mark.timeout(180)
def test_the_example_scores_digits_accurately(spark, tmp_path):
    sys.path.insert(0, str(TESTS.parent / "examples" / "inference"))
    try:
        import score_digits
    finally:
        sys.path.pop(0)
    accuracy = score_digits.main(
        ["--rows", "2000", "--epochs", "3", "--work_dir", str(tmp_path), "--output", str(tmp_path / "out.parquet")],
        spark=spark,
    )
    assert accuracy > 0.85
    assert spark.read.parquet(str(tmp_path / "out.parquet")).columns == ["id", "label", "probabilities", "prediction"]


@pytest.mark.timeout(180)
def test_packed_pixels_score_as_their_arrays_packed_outputs_and_a_wrong_shape_names_the_column(spark, models):
    from sparkdl.columns import Packed
    from sparkdl.dfutil import pack_tensors

    df = pack_tensors(im.digits_frame(spark, 300), "pixels")
    assert df.schema["pixels"].dataType.simpleString() == "binary"
    images, _ = im.digits_28(300)
    path = models["paths"]["mlp"]
    # packed in and out: packed_outputs writes each row's probabilities as its float32 bytes
    packed = Predictor(
        path,
        input_mapping={"pixels": "image"},
        keep_columns=["id"],
        columns={"pixels": Packed(784)},
        packed_outputs=True,
    )
    assert packed.output_schema(df)["prediction"].dataType.simpleString() == "binary"
    for arrow in (True, False):
        out = packed.transform(df, arrow=arrow).toPandas().sort_values("id")
        unpacked = np.stack([np.frombuffer(row, dtype="<f4") for row in out["prediction"]])
        np.testing.assert_allclose(unpacked, _reference(models["mlp"], images), atol=ATOL)
    with pytest.raises(ValueError, match=r"packed_outputs names \['probs'\], which are not result columns"):
        Predictor(
            path, input_mapping={"pixels": "image"}, columns={"pixels": Packed(784)}, packed_outputs=["probs"]
        ).plan(df)
    wrong = Predictor(path, input_mapping={"pixels": "image"}, columns={"pixels": Packed((28, 28, 1), "float64")})
    with pytest.raises(Exception, match=r"column 'pixels' \(model input 'image'\) is read as Packed"):
        wrong.transform(df).collect()
