"""Train a digits CNN with MultiWorkerMirroredStrategy on Spark executors, export it, score it.

InputMode.TENSORFLOW: every node loads the data itself (scikit-learn's 8x8 digits, which ship
with scikit-learn, so no download) and trains a small convolutional network, a model Spark ML
cannot build. The chief exports a SavedModel; the driver then scores the held-out split with a
distributed ``mapInPandas`` over the Spark cluster, fits Spark ML's own best fit for the task
(``MultilayerPerceptronClassifier``, 64-128-10) on the same split, and prints both.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]`` (two executor JVMs on this
machine); pass ``--master spark://host:7077`` (or use spark-submit) for a real cluster.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digits_common  # noqa: E402


def main_fun(args, ctx):
    """One TF node: MWMS training with Keras 3 (``import keras``, as on one machine), chief exports."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    (train_x, train_y), _ = digits_common.load_digits_split()
    options = tf.data.Options()
    options.autotune.enabled = False  # tf.data's autotuner can delay fit()'s return at teardown
    dataset = digits_common.sharded_dataset(tf, ctx, train_x, train_y, args.batch_size, options)
    digits_common.fit_and_export(strategy, dataset, ctx, args, build=digits_common.build_cnn)


def parse_args(argv=None):
    """Command-line options; every one has a default so the demo runs with none."""
    parser = digits_common.example_parser(__doc__, cluster_size=2, epochs=15)
    parser.add_argument(
        "--batch_size", type=int, default=32, help="per-worker batch: rows each node trains per step (global: x nodes)"
    )
    parser.add_argument(
        "--export_dir",
        default=os.path.join(tempfile.gettempdir(), "sparkdl_mnist_export"),
        help="where the chief saves the SavedModel; the driver's scoring job reads it",
    )
    parser.add_argument("--no_baseline", action="store_true", help="skip Spark ML's MLP on the same split")
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> float:
    """Train, export, score; returns the test accuracy (``spark``: use this running session and leave it running)."""
    own_session = spark is None
    args = parse_args(argv)
    spark = digits_common.start_spark("sparkdl-mnist-tf", args.master, args.cluster_size, spark=spark)
    from sparkdl import TFCluster

    started = time.time()
    cluster = TFCluster.run(
        spark.sparkContext,
        main_fun,
        args,
        args.cluster_size,
        input_mode=TFCluster.InputMode.TENSORFLOW,
    )
    cluster.shutdown()
    seconds = time.time() - started
    print(f"trained on {args.cluster_size} TF nodes in {seconds:.1f} s; model in {args.export_dir}")
    accuracy = digits_common.test_accuracy(spark, args.export_dir, args.cluster_size)
    if not args.no_baseline:
        baseline, baseline_seconds = digits_common.spark_ml_baseline(spark, args.cluster_size)
        print("on the same test split:")
        print(
            f"  sparkdl, CNN on {args.cluster_size} TF nodes:  accuracy {accuracy:.4f}  "
            f"({seconds:.1f} s: cluster start, training, export)"
        )
        print(f"  Spark ML, MLP 64-128-10:    accuracy {baseline:.4f}  ({baseline_seconds:.1f} s of fitting)")
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
