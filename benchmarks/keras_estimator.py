"""KerasEstimator against the code it replaces, and against Spark ML's own neural network.

(a) Overhead: ``KerasEstimator.fit(df)`` against a hand-written ``TFCluster`` ``main_fun`` doing the
same training the way the README recommends (MultiWorkerMirroredStrategy, ``feed.as_dataset(...,
all_epochs=True)``, ``ctx.progress_callback()``, the chief saving the model with
``ctx.export_path``): the same model, data (scikit-learn's digits repeated ``--repeat`` times, 64
float32 features), 2 nodes, epochs and per-worker batch, runs alternating, wall time from the
call to the saved model. The estimator also checks the columns and model, persists and scans the
selected rows (one Spark job), ships the model and brings the history back.

(b) Side by side on the digits split of examples/keras_estimator (1437 training rows, 360
held out): the example's ``Pipeline(VectorAssembler -> StandardScaler -> KerasEstimator)`` on 2
TF nodes and in local mode (``num_workers=0``), and Spark ML's MultilayerPerceptronClassifier
(64-64-10, L-BFGS) in the same pipeline: held-out accuracy and fitting time.

    .venv/bin/python benchmarks/keras_estimator.py [--runs 3] [--epochs 5] [--repeat 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "keras_estimator"))
import keras_digits  # noqa: E402


def hand_written(args, ctx):
    """The reference ``map_fun``: what a user writes without the estimator (README's fastest form)."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    batch = args["batch_size"] * ctx.num_workers  # Keras treats a dataset's batch as the global batch
    with strategy.scope():
        model = keras_digits.build_model()
    dataset = feed.as_dataset(batch, features="features", label="label", all_epochs=True)
    steps = feed.keras_steps_per_epoch(batch, strategy)
    model.fit(dataset, epochs=feed.num_epochs, steps_per_epoch=steps, callbacks=[ctx.progress_callback()], verbose=0)
    with ctx.export_path(args["export"]) as target:
        model.save(target)


def overhead_frame(spark, repeat: int):
    """The digits' 64 pixels (scaled to [0, 1]) as ``features array<float>`` and ``label``, ``repeat`` times."""
    import numpy as np
    import pandas as pd
    from sklearn.datasets import load_digits

    digits = load_digits()
    features = np.tile((digits.data / 16.0).astype("float32"), (repeat, 1))
    frame = pd.DataFrame({"features": list(features), "label": np.tile(digits.target, repeat).astype("int64")})
    df = spark.createDataFrame(frame, "features array<float>, label long").repartition(4).cache()
    return df, df.count()


def time_hand_written(spark, df, epochs: int, batch_size: int, work: str) -> float:
    from sparkdl import TFCluster

    export = os.path.join(work, f"hand-{time.time_ns()}", "model.keras")
    os.makedirs(os.path.dirname(export))
    started = time.perf_counter()
    cluster = TFCluster.run(
        spark, hand_written, {"batch_size": batch_size, "export": export}, 2, input_mode=TFCluster.InputMode.SPARK
    )
    cluster.train(df, epochs)
    cluster.shutdown()
    seconds = time.perf_counter() - started
    assert os.path.exists(export), export
    return seconds


def time_estimator(df, epochs: int, batch_size: int, work: str) -> float:
    from sparkdl.keras import KerasEstimator

    estimator = KerasEstimator(
        model=keras_digits.build_model, feature_cols="features", label_cols="label", epochs=epochs,
        batch_size=batch_size, num_workers=2, model_dir=work,
    )  # fmt: skip
    started = time.perf_counter()
    model = estimator.fit(df)
    seconds = time.perf_counter() - started
    assert len(model.history["loss"]) == epochs
    return seconds


def side_by_side(spark, epochs: int, work: str) -> dict:
    """(b): accuracy and seconds of the example's pipeline on 2 nodes, in local mode, and Spark ML's MLP."""
    train, test = keras_digits.digits_frames(spark)
    results = {}
    for name, workers in (("2 TF nodes", 2), ("local mode", 0)):
        estimator = keras_digits.keras_estimator(epochs, workers, model_dir=work)
        started = time.perf_counter()
        fitted = keras_digits.pipeline(estimator).fit(train)
        seconds = time.perf_counter() - started
        results[name] = (keras_digits.accuracy(fitted.transform(test)), seconds)
    results["Spark ML MLP"] = keras_digits.spark_ml_mlp(train, test)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5, help="epochs of (a)")
    parser.add_argument("--repeat", type=int, default=20, help="copies of the 1797 digits in (a)")
    parser.add_argument("--batch_size", type=int, default=64, help="rows per worker per step in (a)")
    parser.add_argument("--side_epochs", type=int, default=15, help="epochs of the Keras fits in (b)")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    spark = keras_digits.start_spark("sparkdl-bench-keras-estimator")
    keras_digits.build_model()  # the driver imports TensorFlow once, outside the timings (see the notes)
    work = tempfile.mkdtemp(prefix="sparkdl-bench-keras-")
    df, rows = overhead_frame(spark, opts.repeat)
    hand, estimator = [], []
    for _ in range(opts.runs):
        hand.append(time_hand_written(spark, df, opts.epochs, opts.batch_size, work))
        estimator.append(time_estimator(df, opts.epochs, opts.batch_size, work))
        print(f"run: hand-written {hand[-1]:.1f} s, KerasEstimator {estimator[-1]:.1f} s", flush=True)
    side = side_by_side(spark, opts.side_epochs, work)
    spark.stop()

    from results_json import finish

    med = statistics.median
    table = [
        ("(a) hand-written TFCluster main_fun: run + train + shutdown (reference)", med(hand), "s"),
        ("(a) KerasEstimator.fit, same model, data and nodes", med(estimator), "s"),
    ]
    for name, (accuracy, seconds) in side.items():
        table += [(f"(b) {name}: held-out accuracy", 100 * accuracy, "%"), (f"(b) {name}: fitting time", seconds, "s")]
    nodes, local, mlp = side["2 TF nodes"], side["local mode"], side["Spark ML MLP"]
    ratios = {
        "(a) KerasEstimator.fit / hand-written main_fun, wall time (goal <= 1.1)": med(estimator) / med(hand),
        "(b) KerasEstimator on 2 TF nodes / Spark ML MLP, held-out accuracy": nodes[0] / mlp[0],
        "(b) KerasEstimator on 2 TF nodes / Spark ML MLP, fitting time": nodes[1] / mlp[1],
        "(b) local mode / 2 TF nodes, held-out accuracy": local[0] / nodes[0],
    }
    notes = [
        f"(a): {rows:,} rows (the digits x {opts.repeat}), {opts.epochs} epochs, {opts.batch_size} rows per worker "
        f"per step, 2 nodes on local-cluster[2,1,1024], {opts.runs} runs each, alternating; medians. The driver "
        "imported TensorFlow before the timings (the estimator builds a model function once on the driver to check "
        "it; the first import costs a few seconds once per application).",
        f"(b): {opts.side_epochs} epochs for the Keras fits (10% of the training rows for validation); Spark ML's "
        "MultilayerPerceptronClassifier with its defaults (L-BFGS, 100 iterations) and the same 64-64-10 layers.",
    ]
    finish(
        opts, "KerasEstimator: overhead and side by side", table, ratios, notes,
        raw={"hand_written_s": hand, "estimator_s": estimator, "side_by_side": side}, digits=lambda unit: 1,
        data=f"digits x {opts.repeat}: {rows} rows",
    )  # fmt: skip


if __name__ == "__main__":
    main()
