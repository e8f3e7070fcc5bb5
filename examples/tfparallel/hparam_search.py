"""Hyper-parameter search with TFParallel: every Spark executor trains its own model, independently.

``TFParallel.run`` starts one TensorFlow process per executor with no TF_CONFIG and no
collective: node ``i`` trains the digits MLP with the learning rates ``i, i + N, i + 2N, ...`` of
``--learning_rates`` (N = ``--cluster_size``), scores each on the held-out split, and writes one
JSON line per trial to ``--output_dir``. The driver then reads the trials back with Spark and
prints a result per node and the best learning rate.

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; pass ``--master`` or use
spark-submit for a real cluster (then ``--output_dir`` must be storage that every executor and
the driver can reach: a shared filesystem or ``hdfs://...``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mnist"))
import digits_common  # noqa: E402


def map_fn(args, ctx):
    """One independent node: train and score the digits MLP for each learning rate it owns."""
    import socket

    import keras

    (train_x, train_y), (test_x, test_y) = digits_common.load_digits_split()
    mine = args.learning_rates[ctx.executor_id :: args.cluster_size]
    lines = []
    for learning_rate in mine:
        keras.utils.set_random_seed(0)  # the trials differ only in their learning rate
        model = digits_common.build_model(keras)
        model.optimizer.learning_rate.assign(learning_rate)
        model.fit(train_x, train_y, batch_size=args.batch_size, epochs=args.epochs, verbose=0)
        _, accuracy = model.evaluate(test_x, test_y, verbose=0)
        trial = {
            "node": ctx.executor_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "learning_rate": learning_rate,
            "accuracy": float(accuracy),
        }
        print(f"trial {trial}", flush=True)  # also in the node's log
        lines.append(json.dumps(trial))
    # ctx.storage writes local and shared paths, s3://, gs://, abfss:// and hdfs:// alike (whole or not at all).
    ctx.storage.write_text(f"{args.output_dir.rstrip('/')}/node{ctx.executor_id}.json", "\n".join(lines) + "\n")


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = digits_common.example_parser(
        __doc__, cluster_size=2, epochs=10, nodes_help="number of independent TF nodes"
    )
    parser.add_argument(
        "--learning_rates",
        type=lambda s: [float(v) for v in s.split(",")],
        default=[0.0003, 0.003, 0.03, 0.3],
        help="comma-separated values to try",
    )
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--output_dir", default=None, help="where the nodes write their trials (default: a temp dir)")
    return parser.parse_args(argv)


def main(argv=None, spark=None) -> dict:
    """Run the search; return the best trial (a dict with learning_rate and accuracy).

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    own_session = spark is None
    args = parse_args(argv)
    args.output_dir = args.output_dir or tempfile.mkdtemp(prefix="sparkdl-hparam-")
    spark = digits_common.start_spark("sparkdl-tfparallel-hparam-search", args.master, args.cluster_size, spark=spark)
    from sparkdl import TFParallel

    started = time.time()
    TFParallel.run(spark.sparkContext, map_fn, args, args.cluster_size)
    print(
        f"{len(args.learning_rates)} trials on {args.cluster_size} independent TF nodes in "
        f"{time.time() - started:.1f} s; trials in {args.output_dir}"
    )
    trials = [row.asDict() for row in spark.read.json(args.output_dir).orderBy("node", "learning_rate").collect()]
    for trial in trials:
        print(
            f"node {trial['node']} ({trial['host']}, pid {trial['pid']}): learning_rate={trial['learning_rate']:g} "
            f"held-out accuracy={trial['accuracy']:.4f}"
        )
    best = max(trials, key=lambda t: t["accuracy"])
    print(f"best: learning_rate={best['learning_rate']:g} held-out accuracy={best['accuracy']:.4f}")
    if own_session:
        spark.stop()
    return best


if __name__ == "__main__":
    main()
