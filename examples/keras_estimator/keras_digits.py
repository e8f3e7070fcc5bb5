"""Shared by the KerasEstimator example, its notebook and benchmarks/keras_estimator.py: the digits
data as a DataFrame of 64 pixel columns, the Keras model, the Spark ML pipeline, and Spark ML's own
MultilayerPerceptronClassifier on the same split for comparison.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
import time

PIXELS = [f"p{i}" for i in range(64)]


def start_spark(app_name: str, master: str | None = None, executors: int = 2, spark=None):
    """A SparkSession: ``master`` if given, else spark-submit's, else an embedded local-cluster;
    or ``spark``, a session already running (a notebook's, a test's), which the caller keeps."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter
    if spark is not None:
        spark.sparkContext.addPyFile(os.path.abspath(__file__))  # build_model travels by reference
        return spark
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain python, not spark-submit
        builder = builder.master(f"local-cluster[{executors},1,1024]")
    if ctypes.util.find_library("blas") is None:
        # Spark ML's BLAS looks for the system's libblas.so.3 from native code, which says on the
        # console that there is none ("netlib-blas: JNI_OnLoad ... failed"): use its Java BLAS at once.
        builder = builder.config("spark.driver.extraJavaOptions", "-Ddev.ludovic.netlib.blas.allowNative=false")
    spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.sparkContext.addPyFile(os.path.abspath(__file__))  # build_model travels by reference to this module
    return spark


def digits_frames(spark, partitions: int = 2):
    """``(train, test)`` DataFrames of scikit-learn's digits: ``p0..p63`` (pixel values 0..16) and
    ``label``, split 80/20 with a fixed seed (1437 and 360 rows)."""
    import numpy as np
    import pandas as pd
    from sklearn.datasets import load_digits

    digits = load_digits()
    frame = pd.DataFrame(digits.data, columns=PIXELS)
    frame["label"] = digits.target.astype("int64")
    order = np.random.default_rng(42).permutation(len(frame))
    split = int(0.8 * len(frame))
    train, test = frame.iloc[order[:split]], frame.iloc[order[split:]]
    return (
        spark.createDataFrame(train).repartition(partitions).cache(),
        spark.createDataFrame(test).repartition(partitions).cache(),
    )


def build_model(hidden: int = 64):
    """The Keras model: an MLP of 64 inputs (the scaled pixels), ``hidden`` ReLU units, 10 classes.

    Passed to the estimator as a function: every TF node builds it inside its distribution strategy.
    It is a Keras 3 model (``import keras``), and the estimator's nodes train with the model's Keras
    (``import tf_keras as keras`` here would make them train with tf-keras).
    """
    import keras

    model = keras.Sequential(
        [
            keras.Input((64,), name="features"),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(10, activation="softmax", name="digit"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def pipeline(estimator):
    """VectorAssembler -> StandardScaler -> ``estimator`` (reading ``features``, writing ``prediction``)."""
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import StandardScaler, VectorAssembler

    return Pipeline(
        stages=[
            VectorAssembler(inputCols=PIXELS, outputCol="pixels"),
            StandardScaler(inputCol="pixels", outputCol="features", withMean=True, withStd=True),
            estimator,
        ]
    )


def keras_estimator(epochs: int, num_workers: int | None, **params):
    """sparkdl's KerasEstimator for the digits: per-worker batches of 32, 10% of the rows for validation."""
    from sparkdl.keras import KerasEstimator

    return KerasEstimator(
        model=build_model,
        feature_cols="features",
        label_cols="label",
        validation=0.1,
        batch_size=32,
        epochs=epochs,
        num_workers=num_workers,
        **params,
    )


def accuracy(scored) -> float:
    """The share of rows whose predicted class (``prediction``, Spark ML's column) is the label."""
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator

    return MulticlassClassificationEvaluator(metricName="accuracy").evaluate(scored)


def spark_ml_mlp(train, test, hidden: int = 64, seed: int = 42) -> tuple[float, float]:
    """Spark ML's MultilayerPerceptronClassifier (64-``hidden``-10, L-BFGS) in the same pipeline on the
    same split: ``(test accuracy, seconds of fitting)``."""
    from pyspark.ml.classification import MultilayerPerceptronClassifier

    mlp = MultilayerPerceptronClassifier(layers=[64, hidden, 10], seed=seed, labelCol="label")
    started = time.perf_counter()
    fitted = pipeline(mlp).fit(train)
    seconds = time.perf_counter() - started
    return accuracy(fitted.transform(test)), seconds
