"""Seconds an elastic cluster loses per resize, against a full relaunch of the same cluster.

Three nodes on local-cluster[3,1,1024] train an MLP on the digits (MultiWorkerMirroredStrategy,
``ctx.backup_and_restore``, 4 epochs fed by ``cluster.train``). In each repetition, one after
another (the order turns each repetition):

- ``steady``: nothing happens (the reference);
- ``resize``: ``TFCluster.run(min_executors=2)``; worker:1's executor is removed for good
  (``SparkContext.killExecutor``) at step 2 of epoch 2: the cluster goes on with 2 nodes;
- ``relaunch``: a fixed cluster with ``max_restarts=1``; the same executor is removed and Spark is
  asked for a replacement at once (``requestTotalExecutors``): the cluster relaunches on 3 nodes
  once it arrives (what sparkdl did before elastic training, and still does without a range).

Seconds lost = the train call's wall time minus the steady run's (medians of ``--runs``). The
resize's figure includes ``elastic_wait`` (how long it waits for a replacement before going on
smaller), given here as ``--elastic_wait``; the run's ``cluster.resizes`` gives the relaunch alone.

    .venv/bin/python benchmarks/elastic_resize.py [--runs 3] [--elastic_wait 2] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

SCENARIOS = ("steady", "resize", "relaunch")


def train_digits(args, ctx):
    """The node program: MWMS fit from the feed; on attempt 0 node ``hold_node`` stops at step 2
    of epoch 2, says so (``held``, with its executor id) and waits to be removed (bounded)."""
    import re

    import tensorflow as tf

    out = Path(args["out"])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    dataset = feed.as_dataset(32 * ctx.num_workers, features="x", label="y")

    class Hold(tf.keras.callbacks.Callback):
        epoch = 0

        def on_epoch_begin(self, epoch, logs=None):
            Hold.epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            if ctx.attempt == 0 and ctx.executor_id == args.get("hold_node") and Hold.epoch == 1 and batch == 2:
                found = re.search(r"executorId=([^&]+)", os.environ.get("SPARK_LOG_URL_STDERR", ""))
                (out / "held.partial").write_text(found.group(1) if found else "")
                (out / "held.partial").replace(out / "held")
                time.sleep(120)  # removed with its executor long before

    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((64,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(10)]
        )
        model.compile(
            optimizer=tf.keras.optimizers.SGD(0.05),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    callbacks = [ctx.backup_and_restore(args["backup"]), Hold(), ctx.progress_callback()]
    model.fit(dataset, epochs=feed.num_epochs, verbose=0, callbacks=callbacks)


def _active(sc) -> list[str]:
    from sparkdl.driver.spark_access import spark_access

    return spark_access(sc).active_executors()  # the executors an elastic cluster counts


def _three_executors(sc, timeout_s: float = 120.0) -> None:
    if len(_active(sc)) < 3:
        sc._jsc.sc().requestTotalExecutors(3, 0, sc._jvm.PythonUtils.toScalaMap({}))
    deadline = time.monotonic() + timeout_s
    while len(_active(sc)) < 3:
        if time.monotonic() > deadline:
            raise RuntimeError("Spark did not give back the third executor")
        time.sleep(0.2)


def run_scenario(sc, frame, scenario: str, epochs: int, elastic_wait: float) -> dict:
    """One train call of ``scenario``: its wall time and the cluster's record of what happened."""
    from sparkdl import TFCluster

    _three_executors(sc)
    out = Path(tempfile.mkdtemp(prefix=f"elastic-{scenario}-"))
    args = {"out": str(out), "backup": str(out / "backup"), "hold_node": 2 if scenario != "steady" else None}
    options = {"min_executors": 2, "elastic_wait": elastic_wait} if scenario == "resize" else {}
    if scenario == "relaunch":
        options["max_restarts"] = 1
    cluster = TFCluster.run(sc, train_digits, args, 3, input_mode=TFCluster.InputMode.SPARK, progress=False, **options)
    result: dict = {}
    started = time.perf_counter()
    thread = threading.Thread(target=lambda: result.update(history=cluster.train(frame, num_epochs=epochs)))
    thread.start()
    if scenario != "steady":
        held = out / "held"
        while not held.exists() and thread.is_alive():
            time.sleep(0.05)
        sc._jsc.sc().killExecutor(held.read_text())
        if scenario == "relaunch":
            sc._jsc.sc().requestTotalExecutors(3, 0, sc._jvm.PythonUtils.toScalaMap({}))
    thread.join(600)
    seconds = time.perf_counter() - started
    cluster.shutdown(timeout=120)
    return {
        "seconds": seconds,
        "epochs": len(result["history"].get("loss", [])),
        "resizes": cluster.resizes,
        "restarts": cluster.restarts,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--elastic_wait", type=float, default=2.0)
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from sklearn.datasets import load_digits

    spark = SparkSession.builder.master("local-cluster[3,1,1024]").appName("sparkdl elastic resize").getOrCreate()
    sc = spark.sparkContext
    digits = load_digits()
    rows = [((d / 16.0).astype("float32").tolist(), int(t)) for d, t in zip(digits.data, digits.target)]
    frame = spark.createDataFrame(rows, "x array<float>, y long").repartition(3).cache()
    frame.count()
    run_scenario(sc, frame, "steady", 1, opts.elastic_wait)  # warm-up: fork servers, Python workers
    raw: dict[str, list[dict]] = {name: [] for name in SCENARIOS}
    for repetition in range(opts.runs):
        order = SCENARIOS[repetition % 3 :] + SCENARIOS[: repetition % 3]
        for scenario in order:
            record = run_scenario(sc, frame, scenario, opts.epochs, opts.elastic_wait)
            raw[scenario].append(record)
            print(f"{scenario}: {record['seconds']:.1f} s, {record['epochs']} epochs, resizes {record['resizes']}")
    spark.stop()

    median = {name: statistics.median(r["seconds"] for r in records) for name, records in raw.items()}
    lost_resize, lost_relaunch = median["resize"] - median["steady"], median["relaunch"] - median["steady"]
    relaunch_alone = statistics.median(r["resizes"][0]["seconds"] for r in raw["resize"] if r["resizes"])
    table = [
        ("train, steady (3 nodes)", median["steady"], "s"),
        ("train, a node lost: resize to 2", median["resize"], "s"),
        ("train, a node lost: full relaunch on 3", median["relaunch"], "s"),
        ("seconds lost per resize", lost_resize, "s"),
        ("seconds lost per full relaunch", lost_relaunch, "s"),
        ("of the resize: stopping 3 nodes and starting 2", relaunch_alone, "s"),
    ]
    ratios = {
        "seconds lost: resize / full relaunch": lost_resize / lost_relaunch if lost_relaunch > 0 else float("nan")
    }
    notes = [
        f"medians of {opts.runs}; {opts.epochs} epochs of the digits (1797 rows), 3 nodes of local-cluster[3,1,1024]",
        f"the resize waits elastic_wait={opts.elastic_wait:g} s for a replacement first (default 30 s)",
        "the full relaunch waits for Spark's replacement executor, then starts 3 nodes (one on a fresh executor)",
    ]
    import results_json

    opts_for_json = argparse.Namespace(**{k: v for k, v in vars(opts).items()})
    results_json.finish(
        opts_for_json, "Seconds lost per resize", table, ratios, notes, raw=raw, digits=lambda unit: 1,
        master="local-cluster[3,1,1024]",
    )  # fmt: skip
    if opts.json:
        print(json.dumps({"lost_resize": lost_resize, "lost_relaunch": lost_relaunch}))


if __name__ == "__main__":
    main()
