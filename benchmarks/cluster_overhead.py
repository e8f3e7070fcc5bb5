"""What a sparkdl cluster costs on top of TensorFlow: start-up latency and 2-node MWMS training.

Reference (same script, same data, epochs and global batch): one plain TensorFlow process
running the same tf.keras ``model.fit`` in a fresh interpreter. Each run times the cluster twice:
its TF processes forked from the executors' warm fork servers (the default, ``node/fork_server.py``;
a warm-up cluster starts the servers first) and started afresh (``SPARKDL_NODE_FORK_SERVER=0``).
Reports medians of ``--runs`` runs and ratios; absolute numbers depend on the machine.

    .venv/bin/python benchmarks/cluster_overhead.py [--runs 3] [--epochs 10] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS_PER_EPOCH_NOTE = "digits train split: 1437 rows"


def fit_digits(epochs: int, batch_size: int, distributed: bool) -> dict:
    """The workload: an MLP on the digits train split; returns fit time and rows/s."""
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int64")
    x, y = x[: int(0.8 * len(y))], y[: int(0.8 * len(y))]
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if distributed else tf.distribute.get_strategy()
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).with_options(options)
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input((64,)),
                tf.keras.layers.Dense(128, activation="relu"),
                tf.keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(dataset.take(1), epochs=1, verbose=0)  # build and trace outside the timing
    started = time.perf_counter()
    model.fit(dataset, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - started
    return {
        "fit_s": seconds,
        "rows_per_s": len(y) * epochs / seconds,
        "final_weights_sum": float(np.sum([w.sum() for w in model.get_weights()])),
    }


def node_main(args, ctx):
    """map_fun: every node runs the workload under MWMS; the chief writes its timing."""
    result = fit_digits(args["epochs"], args["batch_size"], distributed=True)
    if ctx.job_name == "chief":
        Path(args["out"]).write_text(json.dumps(result))


def single_process(epochs: int, batch_size: int) -> dict:
    """The reference: the same workload in one fresh TensorFlow process."""
    code = (
        "import json, sys; sys.path.insert(0, %r); import cluster_overhead as b; "
        "print(json.dumps(b.fit_digits(%d, %d, False)))" % (str(Path(__file__).parent), epochs, batch_size)
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}  # the nodes' Keras: Keras 3
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - started
    return result


def main() -> None:
    """Run both, print a table of medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.path.insert(0, str(Path(__file__).parent))
    from pyspark.sql import SparkSession

    from sparkdl import TFCluster

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .config("spark.ui.enabled", "false")
        .appName("sparkdl-bench")
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")

    def one_cluster(fresh: bool) -> tuple[float, float, dict]:
        """(until every node registered, run + shutdown, the chief's fit) of one cluster."""
        out = Path(tempfile.mkdtemp()) / "chief.json"
        args = {"epochs": opts.epochs, "batch_size": opts.batch_size, "out": str(out)}
        started = time.perf_counter()
        cluster = TFCluster.run(sc, node_main, args, 2, env={"SPARKDL_NODE_FORK_SERVER": "0"} if fresh else None)
        registered = time.perf_counter() - started
        cluster.shutdown(timeout=600)
        return registered, time.perf_counter() - started, json.loads(out.read_text())

    one_cluster(fresh=False)  # warm-up: starts the executors' fork servers
    reference, startup, cluster_wall, cluster_fit, fresh_wall = [], [], [], [], []
    for _ in range(opts.runs):
        reference.append(single_process(opts.epochs, opts.batch_size))
        registered, wall, fit = one_cluster(fresh=False)
        startup.append(registered)
        cluster_wall.append(wall)
        cluster_fit.append(fit)
        fresh_wall.append(one_cluster(fresh=True)[1])
    spark.stop()

    med = statistics.median
    ref_rows = med(r["rows_per_s"] for r in reference)
    mwms_rows = med(r["rows_per_s"] for r in cluster_fit)
    ref_wall = med(r["wall_s"] for r in reference)
    # (name, value, unit, ratio to its reference): printed, and written with --json
    measures = [
        ("single-process tf.keras fit (reference)", ref_rows, "rows/s", 1.0),
        ("sparkdl 2-node MWMS fit (chief's fit time)", mwms_rows, "rows/s", mwms_rows / ref_rows),
        ("reference wall time (python start + TF import + fit)", ref_wall, "s", 1.0),
        ("sparkdl run() until every node registered", med(startup), "s", med(startup) / ref_wall),
        ("sparkdl run() + shutdown() wall time", med(cluster_wall), "s", med(cluster_wall) / ref_wall),
        ("the same, TF processes started afresh (no fork server)", med(fresh_wall), "s", med(fresh_wall) / ref_wall),
    ]
    print(
        f"\nmedians of {opts.runs} runs, {opts.epochs} epochs, global batch {opts.batch_size}, "
        f"{ROWS_PER_EPOCH_NOTE}, local-cluster[2,1,1024] on {os.cpu_count()} cores"
    )
    width = max(len(m[0]) for m in measures)
    print(f"{'measure'.ljust(width)}  {'value':>14}  ratio")
    for name, value, unit, ratio in measures:
        shown = f"{value:,.0f} rows/s" if unit == "rows/s" else f"{value:.1f} s"
        print(f"{name.ljust(width)}  {shown:>14}  {ratio:>5.2f}")
    if opts.json:
        from results_json import write_results

        write_results(
            opts.json,
            config={
                **vars(opts),
                "cores": os.cpu_count(),
                "master": "local-cluster[2,1,1024]",
                "data": ROWS_PER_EPOCH_NOTE,
            },
            table=[(name, value, unit) for name, value, unit, _ in measures],
            ratios={
                "sparkdl 2-node MWMS fit / single-process fit (rows/s)": measures[1][3],
                "sparkdl run() until every node registered / reference wall time": measures[3][3],
                "sparkdl run() + shutdown() / reference wall time": measures[4][3],
                "run() + shutdown(), forked from warm servers / started afresh": med(cluster_wall) / med(fresh_wall),
            },
            raw={
                "reference": reference,
                "startup_s": startup,
                "cluster_wall_s": cluster_wall,
                "cluster_fit": cluster_fit,
                "fresh_cluster_wall_s": fresh_wall,
            },
        )


if __name__ == "__main__":
    main()
