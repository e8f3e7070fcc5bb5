"""sparkdl's inference UDFs score on the GPU Spark assigned each task (placement checked on the device).

Runs only where TensorFlow sees a GPU (see gpu_setup); skipped everywhere else. This process (the
Spark driver) never imports TensorFlow: the model and its CPU predictions (the reference) are
made by a child process that sees no GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys

import gpu_node_functions as gnf
import gpu_setup
import numpy as np
import pytest
from gpu_setup import gpu_sc  # noqa: F401 - the fixture

from sparkdl.inference import map_in_pandas, predict_batch_udf

import inference_models as im
from conftest import TEST_FOLDERS

pytestmark = [pytest.mark.gpu, gpu_setup.requires_gpu, pytest.mark.timeout(600)]
ATOL = 1e-3  # GPU kernels (TF32 matmuls on recent GPUs) against the CPU's
ROWS = 400


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The inference tests' Keras 3 MLP and its CPU predictions for ``im.digits_frame(spark, ROWS)``
    (row ``id`` is digit image ``id``), both made by a child process that sees no GPU."""
    root = tmp_path_factory.mktemp("gpu-model")
    path, reference = root / "mlp.keras", root / "cpu_predictions.npy"
    code = (
        "import numpy as np, inference_models as im; model = im.mlp(); "
        f"model.save({str(path)!r}); images, _ = im.digits_28({ROWS}); "
        f"np.save({str(reference)!r}, model.predict(images, batch_size=64, verbose=0))"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=300,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(map(str, TEST_FOLDERS))},
    )
    return {"path": str(path), "cpu_predictions": np.load(reference)}


@pytest.fixture
def spark(gpu_sc, spark_holder):  # noqa: F811
    return spark_holder.spark


def _stack(frame, column):
    return np.stack(frame[column].to_numpy())


def test_predict_batch_udf_computes_on_the_gpu(spark, model):
    from pyspark.sql.types import ArrayType, FloatType, StructField, StructType

    df = im.digits_frame(spark, ROWS, partitions=2)
    struct = StructType([StructField("probs", ArrayType(FloatType())), StructField("on_gpu", FloatType())])
    udf = predict_batch_udf(
        gnf.make_device_reporting_predict_fn(model["path"]),
        return_type=struct,
        batch_size=64,
        input_tensor_shapes=[[28, 28, 1]],
    )
    out = df.select("id", udf("pixels").alias("p")).select("id", "p.*").toPandas().sort_values("id")
    assert len(out) == ROWS and (out["on_gpu"] == 1.0).all()
    np.testing.assert_allclose(_stack(out, "probs"), model["cpu_predictions"], atol=ATOL)


def test_model_udf_on_the_gpu_matches_the_cpu(spark, model):
    df = im.digits_frame(spark, ROWS, partitions=2)
    udf = predict_batch_udf(model=model["path"], batch_size=64)
    out = df.select("id", udf("pixels").alias("probs")).toPandas().sort_values("id")
    np.testing.assert_allclose(_stack(out, "probs"), model["cpu_predictions"], atol=ATOL)


def test_each_scoring_task_runs_on_the_gpu_spark_assigned_it(spark, model):
    df = im.digits_frame(spark, ROWS, partitions=4)
    fn, schema = map_in_pandas(df, model["path"], input_mapping={"pixels": "image"}, keep_columns=["id"], batch_size=64)
    observed = f"{schema.simpleString()[7:-1]}, device string, tf_gpus long, visible string"
    out = df.mapInPandas(gnf.with_task_device(fn), observed).toPandas().sort_values("id")
    assert len(out) == ROWS
    np.testing.assert_allclose(_stack(out, "prediction"), model["cpu_predictions"], atol=ATOL)
    assert set(out["device"]) == {"/GPU:0"}
    # TensorFlow in each Python worker was shown one GPU (its task's), and sees exactly that one.
    assert set(out["tf_gpus"]) == {1}
    assert all(visible and "," not in visible for visible in out["visible"])
