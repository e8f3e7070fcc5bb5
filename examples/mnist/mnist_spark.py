"""Train a digits classifier from a Spark DataFrame (InputMode.SPARK), export it, score it.

The driver builds a DataFrame of (pixels array<float>, label long) and ``cluster.train`` feeds
it to the TF nodes as Arrow batches, balanced so every node gets the same number of rows per
epoch. Each node trains with MultiWorkerMirroredStrategy from ``feed.as_dataset(...)``; the
chief exports a SavedModel, which the driver then uses for a distributed ``mapInPandas`` scoring
job.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; pass ``--master`` or use
spark-submit for a real cluster.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digits_common  # noqa: E402


def main_fun(args, ctx):
    """One TF node: read the fed DataFrame as a tf.data.Dataset and fit with MWMS."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    # Keras treats the dataset's batch as the global batch: per-node batch x number of nodes.
    # One Keras epoch consumes one epoch of the feed; every node runs the same number of steps.
    dataset = feed.as_dataset(args.batch_size * ctx.num_workers, features="pixels", label="label")
    digits_common.fit_and_export(strategy, dataset, ctx, args)


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = digits_common.example_parser(__doc__, cluster_size=2, epochs=15)
    parser.add_argument(
        "--batch_size", type=int, default=32, help="per-worker batch: rows each node trains per step (global: x nodes)"
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the training DataFrame")
    parser.add_argument(
        "--export_dir",
        default=os.path.join(tempfile.gettempdir(), "sparkdl_mnist_spark_export"),
        help="where the chief saves the SavedModel; the driver's scoring job reads it",
    )
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> float:
    """Train from a DataFrame, export, score; returns the test accuracy.

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    spark = digits_common.start_spark("sparkdl-mnist-spark", args.master, args.cluster_size, spark=spark)
    from sparkdl import TFCluster

    (train_x, train_y), _ = digits_common.load_digits_split()
    train_df = digits_common.digits_frame(spark, train_x, train_y, args.partitions).cache()
    started = time.time()
    cluster = TFCluster.run(spark.sparkContext, main_fun, args, args.cluster_size, input_mode=TFCluster.InputMode.SPARK)
    cluster.train(train_df, num_epochs=args.epochs)
    cluster.shutdown()
    print(
        f"trained on {args.cluster_size} TF nodes from a {train_df.count()}-row DataFrame in "
        f"{time.time() - started:.1f} s; model in {args.export_dir}"
    )
    accuracy = digits_common.test_accuracy(spark, args.export_dir, args.cluster_size)
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
