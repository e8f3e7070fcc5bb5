"""Wall time of an Optuna study of KerasEstimator fits, with MedianPruner against without pruning.

Two studies of ``--trials`` trials on local-cluster[2,1,1024], one after another, each trial a 2-node
fit of the digits MLP (``sparkdl.keras.fit_trial``: learning rate, width and batch size searched,
``--epochs`` epochs, ``val_loss`` monitored); the same TPE sampler seed for both. The pruned study
stops a trial trailing the median at an epoch boundary (its nodes end at once). Goal: the pruned
study takes at most 0.6x the unpruned one's time at the same best ``val_loss`` (within noise).

Trials run one at a time here (``n_jobs=1``); two at a time needs disjoint executor groups per trial.

    .venv/bin/python benchmarks/tuning.py [--trials 12] [--epochs 8] [--json results.json]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time


def build_model(hidden: int):
    """The digits MLP: 64 inputs, ``hidden`` ReLU units, 10 classes (Keras 3)."""
    import keras

    layers = [keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(10, activation="softmax")]
    model = keras.Sequential([keras.Input((64,)), *layers])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def run_study(frame, work_dir: str, trials: int, epochs: int, pruned: bool) -> dict:
    """One study; its wall time, best value, states and epochs trained."""
    import optuna

    from sparkdl.keras import KerasEstimator, fit_trial, run_study

    def objective(trial):
        estimator = KerasEstimator(
            model=functools.partial(build_model, trial.suggest_int("hidden", 16, 128, step=16)),
            feature_cols="features",
            label_cols="label",
            learning_rate=trial.suggest_float("learning_rate", 1e-4, 0.1, log=True),
            batch_size=trial.suggest_categorical("batch_size", [16, 32, 64]),
            validation=0.2,
            epochs=epochs,
            num_workers=2,
            seed=1,
        )
        model = fit_trial(trial, estimator, frame, monitor="val_loss")
        return min(model.history["val_loss"])

    pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1) if pruned else optuna.pruners.NopPruner()
    started = time.perf_counter()
    study = run_study(
        objective, trials, study_name="pruned" if pruned else "unpruned", checkpoint_dir=work_dir,
        pruner=pruner, sampler=optuna.samplers.TPESampler(seed=0),
    )  # fmt: skip
    seconds = time.perf_counter() - started
    states = [t.state.name for t in study.trials]
    return {
        "seconds": seconds,
        "best": study.best_value,
        "best_params": study.best_params,
        "pruned": states.count("PRUNED"),
        "epochs_trained": sum(len(t.intermediate_values) for t in study.trials),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import optuna
    from pyspark.sql import SparkSession
    from sklearn.datasets import load_digits

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spark = SparkSession.builder.master("local-cluster[2,1,1024]").appName("sparkdl tuning").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    x, y = load_digits(return_X_y=True)
    rows = [((r / 16).tolist(), int(t)) for r, t in zip(x, y)]
    frame = spark.createDataFrame(rows, "features array<float>, label long").repartition(2).cache()
    frame.count()
    work = tempfile.mkdtemp(prefix="sparkdl-tuning-bench-")
    raw = {}
    for pruned in (False, True):
        name = "pruned" if pruned else "unpruned"
        raw[name] = run_study(frame, os.path.join(work, name), opts.trials, opts.epochs, pruned)
        print(f"{name}: {raw[name]}", flush=True)
    spark.stop()

    off, on = raw["unpruned"], raw["pruned"]
    table = [
        ("study without pruning", off["seconds"], "s"),
        ("study with MedianPruner", on["seconds"], "s"),
        ("epochs trained without pruning", off["epochs_trained"], "epochs"),
        ("epochs trained with MedianPruner", on["epochs_trained"], "epochs"),
        ("trials pruned", on["pruned"], "trials"),
        ("best val_loss without pruning", off["best"], "loss"),
        ("best val_loss with MedianPruner", on["best"], "loss"),
    ]
    ratios = {"wall time: pruned / unpruned (goal <= 0.6)": on["seconds"] / off["seconds"]}
    notes = [
        f"{opts.trials} trials of up to {opts.epochs} epochs, one at a time, each a 2-node fit of the digits MLP",
        "MedianPruner(n_startup_trials=3, n_warmup_steps=1); the same TPESampler(seed=0) in both studies",
    ]
    import results_json

    results_json.finish(
        opts, "Optuna study: pruned against unpruned", table, ratios, notes, raw=raw,
        digits=lambda unit: 4 if unit == "loss" else 1,
    )  # fmt: skip


if __name__ == "__main__":
    main()
