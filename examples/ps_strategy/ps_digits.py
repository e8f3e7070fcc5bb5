"""Train the digits classifier with ParameterServerStrategy on Spark executors, export it, score it.

InputMode.TENSORFLOW with ``num_ps=1``: with ``--cluster_size 3`` (the default) sparkdl assigns
the roles in TensorFlowOnSpark's order, node 0 ``ps:0``, node 1 ``chief:0``, node 2
``worker:0``. The parameter server holds the variables and the worker runs the training steps;
both just serve (``ctx.serve()``) until ``cluster.shutdown()`` stops them. The chief is the
coordinator: it builds the model under ``ParameterServerStrategy``, drives ``model.fit`` by
dispatching steps to the workers, and exports a SavedModel. The driver then scores the held-out
split with a distributed ``mapInPandas`` job and prints the accuracy. ``--cluster_size 4`` adds a
second worker (``worker:1``); ``--num_ps 2`` a second parameter server.

The nodes train with tf-keras (``TFCluster.run(..., env={"TF_USE_LEGACY_KERAS": "1"})``, so
``tf.keras`` is tf-keras there): Keras 3's ``model.fit`` does not support ParameterServerStrategy
(it has no ``ClusterCoordinator`` and no ``DatasetCreator``), tf-keras' ``model.fit`` does.

Needs one executor slot per node: runs with no arguments on an embedded
``local-cluster[3,1,1024]``; pass ``--master`` or use spark-submit for a real cluster.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mnist"))
import digits_common  # noqa: E402


def main_fun(args, ctx):
    """One TF node: ps and workers serve; the chief coordinates training and exports the model."""
    if ctx.job_name in ("ps", "worker"):
        ctx.serve()  # runs a tf.distribute.Server until the cluster shuts down
        return
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()  # TF_CONFIG is set by sparkdl
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = digits_common.build_model(tf.keras)  # tf-keras (main's env); variables live on the ps

    def dataset_fn(input_context):
        """Runs on each worker: its own shard of the training split, repeated (fit counts the steps)."""
        (train_x, train_y), _ = digits_common.load_digits_split()
        options = tf.data.Options()
        options.autotune.enabled = False
        return (
            tf.data.Dataset.from_tensor_slices((train_x, train_y))
            .shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            .shuffle(2048, seed=input_context.input_pipeline_id)
            .repeat()
            .batch(input_context.get_per_replica_batch_size(args.batch_size))
            .with_options(options)
        )

    (train_x, _), _ = digits_common.load_digits_split()
    steps_per_epoch = -(-len(train_x) // args.batch_size)
    model.fit(
        tf.keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args.epochs,
        steps_per_epoch=steps_per_epoch,
        verbose=2,
    )
    digits_common.export(model, ctx, args.export_dir)


def parse_args(argv=None):
    """Command-line options; every one has a default so the example runs with none."""
    parser = digits_common.example_parser(
        __doc__, cluster_size=3, epochs=10, nodes_help="TF nodes: ps + chief + workers"
    )
    parser.add_argument("--num_ps", type=int, default=1, help="parameter servers among the nodes")
    parser.add_argument("--batch_size", type=int, default=64, help="global batch size per step")
    parser.add_argument("--export_dir", default=os.path.join(tempfile.gettempdir(), "sparkdl_ps_export"))
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> float:
    """Train with ParameterServerStrategy, export, score; returns the test accuracy.

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    spark = digits_common.start_spark("sparkdl-ps-strategy", args.master, args.cluster_size, spark=spark)
    from sparkdl import TFCluster

    started = time.time()
    cluster = TFCluster.run(
        spark.sparkContext,
        main_fun,
        args,
        args.cluster_size,
        num_ps=args.num_ps,
        input_mode=TFCluster.InputMode.TENSORFLOW,
        # tf-keras on the nodes: Keras 3's model.fit does not support ParameterServerStrategy (it
        # fails with "To use this dataset, you need to pass this dataset to
        # ClusterCoordinator.create_per_worker_dataset"), and has no DatasetCreator.
        env={"TF_USE_LEGACY_KERAS": "1"},
    )
    nodes = sorted(cluster.cluster_info, key=lambda node: node["executor_id"])
    roles = ", ".join(f"{node['job_name']}:{node['task_index']}" for node in nodes)
    cluster.shutdown()  # waits for the chief, then stops the ps and worker servers
    print(
        f"trained with ParameterServerStrategy on {roles} in {time.time() - started:.1f} s; model in {args.export_dir}"
    )
    accuracy = digits_common.test_accuracy(spark, args.export_dir, args.cluster_size)
    if own_session:
        spark.stop()
    return accuracy


if __name__ == "__main__":
    main()
