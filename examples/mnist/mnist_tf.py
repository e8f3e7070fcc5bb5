"""Train a digits classifier with MultiWorkerMirroredStrategy on Spark executors, export it, score it.

InputMode.TENSORFLOW: every node loads the data itself (scikit-learn's 8x8 digits, which ship
with scikit-learn, so no download). The chief exports a SavedModel; the driver then scores the
held-out split with a distributed ``mapInPandas`` over the Spark cluster and prints accuracy.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]`` (two executor JVMs on this
machine); pass ``--master spark://host:7077`` (or use spark-submit) for a real cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def load_digits_split():
    """The digits data as float32 pixels in [0, 1] and int labels, split 80/20 reproducibly."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    features = (digits.data / 16.0).astype("float32")
    labels = digits.target.astype("int64")
    order = np.random.default_rng(42).permutation(len(labels))
    split = int(0.8 * len(labels))
    train, test = order[:split], order[split:]
    return (features[train], labels[train]), (features[test], labels[test])


def main_fun(args, ctx):
    """One TF node: MWMS training with tf.keras (tf-keras, sparkdl's default), chief exports."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    (train_x, train_y), _ = load_digits_split()
    options = tf.data.Options()
    options.autotune.enabled = False  # tf.data's autotuner can delay fit()'s return at teardown
    # Every node holds the whole array; MWMS's default DATA auto-sharding gives each node 1/N of
    # it, and the batch size here is the global batch across all nodes.
    dataset = (tf.data.Dataset.from_tensor_slices((train_x, train_y)).shuffle(2048, seed=ctx.task_index)
               .batch(args.batch_size).with_options(options))
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.Input((64,), name="pixels"),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(10, activation="softmax"),
        ])
        model.compile(optimizer=tf.keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    model.fit(dataset, epochs=args.epochs, verbose=2 if ctx.job_name == "chief" else 0)

    # Every MWMS node must take part in saving; only the chief writes to the real location.
    is_chief = ctx.job_name == "chief"
    export_dir = args.export_dir if is_chief else tempfile.mkdtemp(prefix=f"export-{ctx.job_name}{ctx.task_index}-")
    model.save(export_dir)
    print(f"{ctx.job_name}:{ctx.task_index} saved the model to {export_dir}", flush=True)


def score_partitions(export_dir):
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


def parse_args(argv=None):
    """Command-line options; every one has a default so the demo runs with none."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--master", default=None,
                        help="Spark master URL (default: the one spark-submit set, else local-cluster[2,1,1024])")
    parser.add_argument("--cluster_size", type=int, default=2, help="number of TF nodes (one per executor)")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch_size", type=int, default=64, help="global batch size across all nodes")
    parser.add_argument("--export_dir", default=os.path.join(tempfile.gettempdir(), "sparkdl_mnist_export"))
    parser.add_argument("--tensorboard", action="store_true", help="start TensorBoard on the chief")
    return parser.parse_args(argv)


def main(argv=None) -> float:
    """Train, export, score; returns the test accuracy."""
    args = parse_args(argv)
    # Executors must run this same interpreter (where sparkdl and TensorFlow are installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    from sparkdl import TFCluster

    builder = SparkSession.builder.appName("sparkdl-mnist-tf")
    if args.master:
        builder = builder.master(args.master)
    elif not SparkConf().contains("spark.master"):  # not under spark-submit: embedded cluster
        builder = builder.master(f"local-cluster[{args.cluster_size},1,1024]")
    spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel("WARN")
    started = time.time()
    cluster = TFCluster.run(sc, main_fun, args, args.cluster_size, tensorboard=args.tensorboard,
                            input_mode=TFCluster.InputMode.TENSORFLOW)
    if args.tensorboard:
        print(f"TensorBoard: {cluster.tensorboard_url()}")
    cluster.shutdown()
    print(f"trained on {args.cluster_size} TF nodes in {time.time() - started:.1f} s; model in {args.export_dir}")

    _, (test_x, test_y) = load_digits_split()
    test_df = spark.createDataFrame([(x.tolist(), int(y)) for x, y in zip(test_x, test_y)],
                                    "pixels array<float>, label long").repartition(args.cluster_size)
    scored = test_df.mapInPandas(score_partitions(args.export_dir), "label long, prediction long")
    correct = scored.filter("label = prediction").count()
    accuracy = correct / len(test_y)
    print(f"test accuracy (distributed inference over {len(test_y)} rows): {accuracy:.4f}")
    spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
