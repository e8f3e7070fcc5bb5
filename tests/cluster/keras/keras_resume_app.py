"""A KerasEstimator application that test_keras_resume.py (beside it) runs twice: killed mid-fit, then again.

It fits the digits MLP (Keras 3) on one TF node with a run store (``--checkpoint_dir``, ``--run_id``); the
nodes log every epoch they train (``keras_functions.Keras3EpochLog``). ``--hold_after N`` holds the node after
epoch N (once that epoch's checkpoint and state are written) until the test kills the application.
Without it the fit runs to the end, then fits again with the same run_id (a finished run: no
training) and prints both histories.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from pyspark.sql import SparkSession

from sparkdl.keras import KerasEstimator

import keras_functions as kf


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--data", "--checkpoint_dir", "--run_id", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--hold_after", type=int)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(name)s %(message)s")
    logging.getLogger("sparkdl.keras").setLevel(logging.INFO)
    spark = (
        SparkSession.builder.master("local-cluster[1,1,1024]")
        .appName("sparkdl-keras-resume")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    estimator = KerasEstimator(
        model=kf.keras3_mlp,  # Keras 3, what users write
        feature_cols="x",
        label_cols="label",
        epochs=args.epochs,
        batch_size=64,
        num_workers=1,
        checkpoint_dir=args.checkpoint_dir,
        run_id=args.run_id,
        callbacks=[kf.Keras3EpochLog(args.out, args.hold_after)],
    )
    data = spark.read.parquet(args.data)
    model = estimator.fit(data)
    print("HISTORY", json.dumps(model.history), flush=True)
    again = estimator.fit(data)  # the run is finished: its model comes back without training
    print("AGAIN", json.dumps(again.history), again.getModelPath() == model.getModelPath(), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
