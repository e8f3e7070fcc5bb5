"""Keras 3 against tf-keras on sparkdl's nodes: the same ``model.fit`` on the same feed, and Keras 3 in memory.

One map_fun builds its model with ``tf.keras``, so the Keras it trains with is the nodes' choice:
Keras 3 (``TF_USE_LEGACY_KERAS`` unset: TensorFlow's default, and sparkdl's) through
``node/keras3_multi_worker.py``, or tf-keras (``env={"TF_USE_LEGACY_KERAS": "1"}``). Both are fed by
``cluster.train`` from the same cached DataFrame (``--rows`` rows of 784 float32, a digit label)
under MultiWorkerMirroredStrategy on ``local-cluster[2,1,1024]``. The reference for the second ratio
is the same Keras 3 model fit in one fresh TensorFlow process on the same rows held in memory
(``tf.data`` from numpy, the same global batch). The variants alternate within each of ``--runs``
rounds; medians are reported.

    .venv/bin/python benchmarks/keras3_train.py [--runs 3] [--rows 30000] [--epochs 3] [--json results.json]
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

WIDTH, CLASSES = 784, 10


def build_and_fit(tf, dataset, epochs: int, steps: int | None, callbacks=()) -> tuple[float, object]:
    """The workload: a 784-256-10 MLP (Adam, sparse categorical cross-entropy); returns ``(fit seconds, History)``."""
    strategy = tf.distribute.get_strategy()
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input((WIDTH,)),
                tf.keras.layers.Dense(256, activation="relu"),
                tf.keras.layers.Dense(CLASSES, activation="softmax"),
            ]
        )
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    started = time.perf_counter()
    history = model.fit(
        dataset, epochs=epochs, steps_per_epoch=steps, callbacks=list(callbacks), verbose=0, shuffle=False
    )
    return time.perf_counter() - started, history


def node_main(args, ctx):
    """map_fun: ``tf.keras`` is the nodes' Keras; the chief writes its fit time and Keras."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    global_batch = args["batch"] * ctx.num_workers
    dataset = feed.as_dataset(global_batch, features="x", label="y", all_epochs=True)
    steps = feed.keras_steps_per_epoch(global_batch, strategy)
    with strategy.scope():
        seconds, history = build_and_fit(tf, dataset, feed.num_epochs, steps, [ctx.progress_callback()])
    if ctx.is_chief:
        keras = tf.keras.__name__.split(".")[0]
        Path(args["out"]).write_text(json.dumps({"fit_s": seconds, "keras": keras, "loss": history.history["loss"]}))


def in_memory(rows: int, epochs: int, batch: int) -> dict:
    """The reference: the Keras 3 model in one fresh process, every row in memory."""
    code = (
        "import json, sys, time; sys.path.insert(0, %r)\n"
        "import numpy as np, tensorflow as tf, keras3_train as b\n"
        "x, y = b.data(%d)\n"
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(%d).prefetch(2)\n"
        "seconds, history = b.build_and_fit(tf, ds, %d, None)\n"
        "print(json.dumps({'fit_s': seconds, 'keras': tf.keras.__name__.split('.')[0]}))\n"
    ) % (str(Path(__file__).resolve().parent), rows, batch, epochs)
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def data(rows: int, seed: int = 0):
    """``rows`` rows of 784 float32 in [0, 1) and a digit label, the argmax of the first 10 values (seeded)."""
    import numpy as np

    x = np.random.default_rng(seed).random((rows, WIDTH), dtype=np.float32)
    return x, x[:, :CLASSES].argmax(axis=1).astype("int64")


def make_frame(spark, rows: int, partitions: int):
    """The same kind of rows as :func:`data`, generated inside the executors (no driver data)."""
    import numpy as np
    import pyarrow as pa

    def generate(batches):
        for batch in batches:
            ids = batch.column(0).to_numpy()
            x, y = data(len(ids), int(ids[0]) if len(ids) else 0)
            offsets = pa.array(np.arange(0, x.size + 1, WIDTH, dtype=np.int32))
            yield pa.RecordBatch.from_arrays(
                [pa.ListArray.from_arrays(offsets, pa.array(x.reshape(-1))), pa.array(y)], names=["x", "y"]
            )

    return spark.range(0, rows, numPartitions=partitions).mapInArrow(generate, "x array<float>, y long")


def on_cluster(sc, frame, keras: str, epochs: int, batch: int) -> dict:
    """One cluster: start, ``train`` (timed on the driver), shutdown; the chief's fit time."""
    from sparkdl import TFCluster

    out = Path(tempfile.mkdtemp(prefix="keras3-bench-")) / "chief.json"
    env = {"TF_USE_LEGACY_KERAS": "1"} if keras == "tf-keras" else {}
    cluster = TFCluster.run(
        sc, node_main, {"out": str(out), "batch": batch}, 2, input_mode=TFCluster.InputMode.SPARK, env=env
    )
    started = time.perf_counter()
    cluster.train(frame, num_epochs=epochs)
    train_s = time.perf_counter() - started
    cluster.shutdown(timeout=600)
    result = json.loads(out.read_text())
    return {**result, "train_s": train_s}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=30000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=128, help="rows per worker per step")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--json", help="write the results as JSON to this path")
    opts = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    os.environ.pop("TF_USE_LEGACY_KERAS", None)  # the driver's choice would reach the nodes
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors run this interpreter (sparkdl, TensorFlow)
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    master = "local-cluster[2,1,1024]"
    spark = SparkSession.builder.master(master).appName("keras3-train-bench").getOrCreate()
    sc = spark.sparkContext
    frame = make_frame(spark, opts.rows, opts.partitions).cache()
    frame.count()
    samples: dict[str, list[dict]] = {"keras3": [], "tf-keras": [], "in_memory": []}
    for run in range(opts.runs):
        order = ("keras3", "tf-keras") if run % 2 == 0 else ("tf-keras", "keras3")
        for variant in order:
            samples[variant].append(on_cluster(sc, frame, variant, opts.epochs, opts.batch))
        samples["in_memory"].append(in_memory(opts.rows, opts.epochs, opts.batch * 2))
        print(f"run {run + 1}/{opts.runs}: " + ", ".join(f"{k} fit {v[-1]['fit_s']:.1f} s" for k, v in samples.items()))
    spark.stop()
    assert {s["keras"] for s in samples["keras3"] + samples["in_memory"]} == {"keras"}, "Keras 3 ran"
    assert {s["keras"] for s in samples["tf-keras"]} == {"tf_keras"}, "tf-keras ran"

    rows_epochs = opts.rows * opts.epochs
    rate = {k: statistics.median(rows_epochs / s["fit_s"] for s in v) for k, v in samples.items()}
    train = {
        k: statistics.median(rows_epochs / s["train_s"] for s in v) for k, v in samples.items() if k != "in_memory"
    }
    table = [
        ("Keras 3 MWMS fit fed by cluster.train", rate["keras3"], "rows/s"),
        ("tf-keras MWMS fit fed by cluster.train", rate["tf-keras"], "rows/s"),
        ("Keras 3 one process, in memory", rate["in_memory"], "rows/s"),
        ("Keras 3 cluster.train wall time, rows x epochs / s", train["keras3"], "rows/s"),
        ("tf-keras cluster.train wall time, rows x epochs / s", train["tf-keras"], "rows/s"),
    ]
    ratios = {
        "Keras 3 / tf-keras, fit fed by sparkdl (goal >= 0.95)": rate["keras3"] / rate["tf-keras"],
        "Keras 3 / tf-keras, cluster.train wall time": train["keras3"] / train["tf-keras"],
        "Keras 3 on 2 nodes fed by sparkdl / Keras 3 one process in memory": rate["keras3"] / rate["in_memory"],
    }
    for name, value, unit in table:
        print(f"{name}: {value:,.0f} {unit}")
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    if opts.json:
        sys.path.insert(0, here)
        from results_json import write_results

        config = {**vars(opts), "cores": os.cpu_count(), "master": master}
        config.pop("json")
        write_results(opts.json, config=config, table=table, ratios=ratios, raw=samples)


if __name__ == "__main__":
    main()
