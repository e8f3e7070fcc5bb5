"""An Optuna study of KerasEstimator fits that test_keras_optuna_resume.py (beside it) runs twice: killed while a
trial trains, then again to finish the study.

Each objective call appends ``{"trial", "run_id", "pid"}`` to ``--out/fits.jsonl``; the nodes log every epoch
they train into ``--out/<run_id>/`` (``keras_functions.Keras3EpochLog``). ``--hold_trial N`` holds trial N's
nodes after its first epoch (once that epoch's checkpoint and state are written) until the test kills the
application. At the end it prints every trial's number, state and run id.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from pyspark.sql import SparkSession

from sparkdl.keras import KerasEstimator, tuning

import keras_functions as kf

EPOCHS = 3


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--db", "--checkpoint_dir", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--hold_trial", type=int)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(name)s %(message)s")
    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("sparkdl-optuna-resume")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rows = [((r / 16).tolist(), int(t)) for r, t in zip(x[:900], y[:900])]
    df = spark.createDataFrame(rows, "features array<float>, label long").repartition(2).cache()

    def objective(trial):
        rate = trial.suggest_float("learning_rate", 1e-3, 0.03, log=True)
        run_id = tuning.trial_run_id("digits", trial)
        with open(os.path.join(args.out, "fits.jsonl"), "a") as fits:
            fits.write(json.dumps({"trial": trial.number, "run_id": run_id, "pid": os.getpid()}) + "\n")
        epochs_out = os.path.join(args.out, run_id)
        os.makedirs(epochs_out, exist_ok=True)
        hold = 0 if trial.number == args.hold_trial else None
        estimator = KerasEstimator(
            model=kf.keras3_mlp(rate), feature_cols="features", label_cols="label", validation=0.2,
            epochs=EPOCHS, batch_size=32, num_workers=2, callbacks=[kf.Keras3EpochLog(epochs_out, hold)],
        )  # fmt: skip
        model = tuning.fit_trial(trial, estimator, df, monitor="val_loss")
        return model.history["val_loss"][-1]

    study = tuning.run_study(
        objective, args.trials, study_name="digits", storage=args.db, checkpoint_dir=args.checkpoint_dir,
        heartbeat_interval=1,
    )  # fmt: skip
    for trial in study.trials:
        print("TRIAL", json.dumps([trial.number, trial.state.name, trial.user_attrs.get(tuning.RUN_ID_ATTR)]))
    spark.stop()


if __name__ == "__main__":
    main()
