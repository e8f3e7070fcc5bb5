"""A Spark ML Pipeline with sparkdl's TFEstimator: fit on one DataFrame, score another.

``Pipeline([TFEstimator(...)]).fit(train_df)`` starts a TFCluster of ``--cluster_size`` nodes,
feeds the ``pixels``/``label`` columns to them (InputMode.SPARK) for ``--epochs`` epochs; each
node trains the digits MLP with MultiWorkerMirroredStrategy and the chief exports a SavedModel
to ``--export_dir``. The fitted ``PipelineModel`` ends in a ``TFModel``: it is saved and loaded
back (as a user would ship it to a scoring job), then ``transform(test_df)`` appends the
model's output to the held-out DataFrame with sparkdl's vectorised inference, and Spark
computes the accuracy.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; pass ``--master`` or use
spark-submit for a real cluster (then ``--export_dir`` and ``--pipeline_dir`` must be on storage
every executor and the driver can read).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mnist"))
import digits_common  # noqa: E402


def train_fn(args, ctx):
    """One TF node: MWMS over the fed columns; ``args`` carries the estimator's Params."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    # Keras treats the dataset's batch as the global batch: per-node batch x number of nodes.
    dataset = ctx.get_data_feed().as_dataset(args.batch_size * ctx.num_workers, features="pixels", label="label")
    digits_common.fit_and_export(strategy, dataset, ctx, args)


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = digits_common.example_parser(__doc__, cluster_size=2, epochs=15)
    parser.add_argument("--batch_size", type=int, default=32, help="rows per node per step")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each DataFrame")
    parser.add_argument(
        "--work_dir", default=None, help="where the exported model and the saved PipelineModel go (default: a temp dir)"
    )
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> float:
    """Fit the pipeline, save and load it, score the held-out DataFrame; returns the accuracy.

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="sparkdl-pipeline-")
    spark = digits_common.start_spark("sparkdl-ml-pipeline", args.master, args.cluster_size, spark=spark)
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.sql import functions as F

    from sparkdl.ml import TFEstimator, TFModel

    (train_x, train_y), (test_x, test_y) = digits_common.load_digits_split()
    train_df = digits_common.digits_frame(spark, train_x, train_y, args.partitions).cache()
    test_df = digits_common.digits_frame(spark, test_x, test_y, args.partitions)

    estimator = (
        TFEstimator(train_fn, {})
        .setInputMapping({"pixels": "pixels", "label": "label"})
        .setClusterSize(args.cluster_size)
        .setEpochs(args.epochs)
        .setBatchSize(args.batch_size)
        .setExportDir(os.path.join(work_dir, "export"))
    )
    started = time.time()
    fitted = Pipeline(stages=[estimator]).fit(train_df)
    print(
        f"fitted the pipeline on {args.cluster_size} TF nodes from a {train_df.count()}-row DataFrame in "
        f"{time.time() - started:.1f} s"
    )

    # The estimator fed both columns while training; to score, the TFModel maps only the model's
    # input. With no output_mapping, the model's single output (10 class probabilities) is
    # appended as the column "prediction".
    fitted.stages[-1].setInputMapping({"pixels": "pixels"})
    pipeline_dir = os.path.join(work_dir, "pipeline_model")
    fitted.write().overwrite().save(pipeline_dir)
    loaded = PipelineModel.load(pipeline_dir)
    assert isinstance(loaded.stages[-1], TFModel)
    print(
        f"saved and reloaded the PipelineModel ({pipeline_dir}); its TFModel reads {loaded.stages[-1].getExportDir()}"
    )

    scored = loaded.transform(test_df).withColumn(
        "predicted_label", F.array_position("prediction", F.array_max("prediction")) - 1
    )
    accuracy = scored.filter("predicted_label = label").count() / len(test_y)
    print(f"test accuracy (distributed inference over {len(test_y)} rows): {accuracy:.4f}")
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
