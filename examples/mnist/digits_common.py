"""Shared by the digits examples: the data, a Spark session, and distributed scoring.

The example scripts ship this file to the executors with ``sc.addPyFile``, so node functions
and scoring tasks can import it on any cluster.
"""

from __future__ import annotations

import argparse
import ctypes.util
import os
import sys


def load_digits_split():
    """scikit-learn's 8x8 digits as float32 pixels in [0, 1] and int labels, split 80/20 reproducibly."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    features = (digits.data / 16.0).astype("float32")
    labels = digits.target.astype("int64")
    order = np.random.default_rng(42).permutation(len(labels))
    split = int(0.8 * len(labels))
    train, test = order[:split], order[split:]
    return (features[train], labels[train]), (features[test], labels[test])


def training_shard(ctx) -> tuple[int, int]:
    """``(index, count)``: this node's place among the nodes that train (chief or master, then the
    workers: MultiWorkerMirroredStrategy's own numbering, whatever ps or evaluator nodes the cluster
    has) and how many they are, to give each one its own shard of data it reads itself."""
    trainers = [(job, i) for job in ("chief", "master", "worker") for i in range(len(ctx.cluster_spec.get(job, [])))]
    return trainers.index((ctx.job_name, ctx.task_index)), len(trainers)


def sharded_dataset(tf, ctx, x, y, batch_size: int, options=None):
    """This node's own shard of ``(x, y)`` (its place among the training nodes, not
    ``ctx.task_index``: chief:0 and worker:0 share index 0), shuffled with a seed of its own and
    batched for MultiWorkerMirroredStrategy: Keras takes each batch as the global one and splits it
    over the nodes, so a per-node ``batch_size`` means batches of ``batch_size`` x nodes. MWMS's
    auto-sharding is off: it would shard the shuffled dataset again, by element, which only works
    when every node has the same order."""
    shard, shards = training_shard(ctx)
    options = options or tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shard(shards, shard)
        .shuffle(2048, seed=shard)
        .batch(batch_size * shards)
        .with_options(options)
    )


def example_parser(
    description: str, cluster_size: int = 2, epochs: int = 15, nodes_help: str = "number of TF nodes (one per executor)"
) -> argparse.ArgumentParser:
    """A parser with the options every digits example shares: --master, --cluster_size, --epochs."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL (default: the one spark-submit set, else local-cluster[N,1,1024])",
    )
    parser.add_argument("--cluster_size", type=int, default=cluster_size, help=nodes_help)
    parser.add_argument("--epochs", type=int, default=epochs, help="passes over the training data")
    return parser


def start_spark(app_name: str, master: str | None, cluster_size: int, spark=None):
    """A SparkSession: ``master`` if given, else spark-submit's, else an embedded local cluster;
    or ``spark``, a session already running (a notebook's, a test's), which the caller keeps."""
    # Executors must run this same interpreter (where sparkdl and TensorFlow are installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if spark is not None:
        spark.sparkContext.addPyFile(os.path.abspath(__file__))
        return spark
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    # spark-submit starts the JVM first and hands it over through PYSPARK_GATEWAY_PORT; its
    # --master is in that JVM, not yet in a Python SparkConf(). Plain python: embedded cluster.
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(f"local-cluster[{cluster_size},1,1024]")
    if ctypes.util.find_library("blas") is None:
        # Spark ML's BLAS looks for the system's libblas.so.3 from native code, which says on the
        # console that there is none ("netlib-blas: JNI_OnLoad ... failed"): use its Java BLAS at once.
        builder = builder.config("spark.driver.extraJavaOptions", "-Ddev.ludovic.netlib.blas.allowNative=false")
    spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.sparkContext.addPyFile(os.path.abspath(__file__))
    return spark


def digits_frame(spark, features, labels, partitions: int):
    """A DataFrame ``pixels array<float>, label long``."""
    rows = [(x.tolist(), int(y)) for x, y in zip(features, labels)]
    return spark.createDataFrame(rows, "pixels array<float>, label long").repartition(partitions)


def score_partitions(export_dir: str):
    """A mapInPandas function: load the SavedModel once per task, predict each Arrow batch."""

    def predict(batches):
        import numpy as np
        import pandas as pd
        import tensorflow as tf

        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        for batch in batches:
            pixels = np.stack(batch["pixels"].to_numpy()).astype("float32")
            (probabilities,) = serve(tf.constant(pixels)).values()
            yield pd.DataFrame({"label": batch["label"], "prediction": np.argmax(probabilities, axis=1)})

    return predict


def test_accuracy(spark, export_dir: str, partitions: int) -> float:
    """Score the held-out split with a distributed mapInPandas job; print and return the accuracy."""
    _, (test_x, test_y) = load_digits_split()
    scored = digits_frame(spark, test_x, test_y, partitions).mapInPandas(
        score_partitions(export_dir), "label long, prediction long"
    )
    accuracy = scored.filter("label = prediction").count() / len(test_y)
    print(f"test accuracy (distributed inference over {len(test_y)} rows): {accuracy:.4f}")
    return accuracy


def build_model(keras):
    """The digits MLP, compiled, built with the Keras module ``keras``: Keras 3 (``import keras``)
    in the MWMS examples; ``ps_strategy/ps_digits.py`` passes ``tf.keras``, which is tf-keras there."""
    model = keras.Sequential(
        [
            keras.Input((64,), name="pixels"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def build_cnn(keras):
    """A small convolutional network on the 8x8 images, compiled; it takes the same 64 pixels as
    ``build_model`` (reshaped inside the model), so scoring and serving are unchanged."""
    model = keras.Sequential(
        [
            keras.Input((64,), name="pixels"),
            keras.layers.Reshape((8, 8, 1)),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.25),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def spark_ml_baseline(spark, partitions: int) -> tuple[float, float]:
    """What Spark ML alone does on the same split: its MultilayerPerceptronClassifier (64-128-10,
    L-BFGS, Spark's defaults). Returns (test accuracy, seconds of fitting)."""
    import time

    from pyspark.ml.classification import MultilayerPerceptronClassifier
    from pyspark.ml.linalg import Vectors

    (train_x, train_y), (test_x, test_y) = load_digits_split()

    def frame(features, labels):
        rows = [(Vectors.dense(x.tolist()), float(y)) for x, y in zip(features, labels)]
        return spark.createDataFrame(rows, ["features", "label"]).repartition(partitions).cache()

    train, test = frame(train_x, train_y), frame(test_x, test_y)
    train.count()
    started = time.time()
    model = MultilayerPerceptronClassifier(layers=[64, 128, 10], seed=42).fit(train)
    seconds = time.time() - started
    accuracy = model.transform(test).filter("label = prediction").count() / len(test_y)
    train.unpersist()
    test.unpersist()
    return accuracy, seconds


def fit_and_export(strategy, dataset, ctx, args, build=build_model) -> None:
    """Build the model (``build(keras)``, Keras 3) under ``strategy``, fit it on ``dataset`` (chief
    prints progress), export it."""
    import keras

    with strategy.scope():
        model = build(keras)
    # ctx.progress_callback() shows the chief's step and loss in the driver's progress display.
    model.fit(dataset, epochs=args.epochs, verbose=2 if ctx.is_chief else 0, callbacks=[ctx.progress_callback()])
    export(model, ctx, args.export_dir)


def export(model, ctx, export_dir: str) -> None:
    """Save the model as a SavedModel: every MWMS node must take part; only the chief writes to
    ``export_dir`` (the others save to a scratch path that ``ctx.export_path`` removes afterwards)."""
    import keras

    with ctx.export_path(export_dir) as target:
        if isinstance(model, keras.Model):  # Keras 3: model.save writes only .keras and .h5 files
            model.export(target, verbose=False)
        else:  # tf-keras (ps_strategy/ps_digits.py): model.save writes a SavedModel directory
            model.save(target)
    if ctx.is_chief:
        print(f"{ctx.job_name}:{ctx.task_index} saved the model to {target}", flush=True)
