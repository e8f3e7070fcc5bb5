"""Optuna studies of KerasEstimator fits: trials per hour with k trials at a time against one, and
the wall time of a study with MedianPruner against without pruning.

Every trial is a 2-node fit of the digits MLP (``sparkdl.keras.fit_trial``, ``val_loss`` monitored)
on local-cluster[4,1,768]: four executors, so two trials run at once on disjoint 2-node groups
(``run_study(n_jobs=2)``). An untimed warm-up study (two 1-epoch trials at once) starts every
executor's processes first. Two measurements, on the same Spark application:

- throughput: ``--throughput-trials`` trials of ``--throughput-epochs`` epochs, the MLP fixed (64 units,
  batch 32, only the learning rate searched), no pruning: once with ``n_jobs=1``, once with
  ``n_jobs=--jobs``. Goal: at least 1.5x the trials per hour at ``--jobs 2``. The machine's cores cap
  it: on 2 cores, two trials' four TF nodes share the cores that one trial's two nodes leave idle
  while they wait on each other (the MLP is latency-bound), not more.
- pruning: two studies of ``--trials`` trials of up to ``--epochs`` epochs, ``--jobs`` at a time,
  learning rate, width and batch size searched with the same TPE sampler seed (at k=2 two threads
  draw from it in turn, so the two studies try different params: compare best scores within noise); one with
  ``MedianPruner(n_startup_trials=3, n_warmup_steps=1)``, one without. Goal: the pruned study takes at
  most 0.6x the unpruned one's time at the same best ``val_loss`` (within noise).

Options::

    .venv/bin/python benchmarks/tuning.py [--only throughput|pruning] [--jobs 2] [--trials 12] [--epochs 8]
        [--throughput-trials 8] [--throughput-epochs 4] [--json results.json]
    .venv/bin/python benchmarks/tuning.py --quick   # a smoke run: 2 epochs, 2 or 3 trials per study

``--jobs``: trials at a time (k; each needs 2 of the 4 executors, so k <= 2 runs them all at once).
``--quick``: tiny sizes whose figures mean nothing; it checks the script runs (about 3 minutes here).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

#: The application: four executors, room for two 2-node trials at once.
MASTER = "local-cluster[4,1,768]"
#: Each trial's TF nodes (``num_workers``).
NODES = 2


def build_model(hidden: int):
    """The digits MLP: 64 inputs, ``hidden`` ReLU units, 10 classes (Keras 3)."""
    import keras

    layers = [keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(10, activation="softmax")]
    model = keras.Sequential([keras.Input((64,)), *layers])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def run_study(frame, work_dir: str, trials: int, epochs: int, pruned: bool, jobs: int, fixed: bool = False) -> dict:
    """One study of ``trials`` trials, ``jobs`` at a time; its wall time, trials per hour, best value,
    states and epochs trained. ``fixed``: only the learning rate searched (64 units, batch 32)."""
    import optuna

    from sparkdl.keras import KerasEstimator, fit_trial, run_study

    def objective(trial):
        hidden = 64 if fixed else trial.suggest_int("hidden", 16, 128, step=16)
        estimator = KerasEstimator(
            model=functools.partial(build_model, hidden),
            feature_cols="features",
            label_cols="label",
            learning_rate=trial.suggest_float("learning_rate", 1e-4, 0.1, log=True),
            batch_size=32 if fixed else trial.suggest_categorical("batch_size", [16, 32, 64]),
            validation=0.2,
            epochs=epochs,
            num_workers=NODES,
            seed=1,
        )
        model = fit_trial(trial, estimator, frame, monitor="val_loss")
        return min(model.history["val_loss"])

    pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1) if pruned else optuna.pruners.NopPruner()
    started = time.perf_counter()
    study = run_study(
        objective, trials, study_name=os.path.basename(work_dir), checkpoint_dir=work_dir, pruner=pruner,
        sampler=optuna.samplers.TPESampler(seed=0), n_jobs=jobs,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    states = [t.state.name for t in study.trials]
    return {
        "seconds": seconds,
        "trials_per_hour": len(states) / seconds * 3600,
        "best": study.best_value,
        "best_params": study.best_params,
        "states": states,
        "pruned": states.count("PRUNED"),
        "epochs_trained": sum(len(t.intermediate_values) for t in study.trials),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("throughput", "pruning"), help="run one measurement only")
    parser.add_argument("--jobs", type=int, default=2, help="trials at a time (k)")
    parser.add_argument("--trials", type=int, default=12, help="trials of each pruning study")
    parser.add_argument("--epochs", type=int, default=8, help="epochs of each pruning study's trials")
    parser.add_argument("--throughput-trials", type=int, default=8, help="trials of each throughput study")
    parser.add_argument("--throughput-epochs", type=int, default=4, help="epochs of each throughput study's trials")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, meaningless figures")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.trials, opts.epochs, opts.throughput_trials, opts.throughput_epochs = 3, 2, 2, 2

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import optuna
    from pyspark.sql import SparkSession
    from sklearn.datasets import load_digits

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spark = (
        SparkSession.builder.master(MASTER)
        .appName("sparkdl tuning")
        .config("spark.executor.memory", "768m")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    x, y = load_digits(return_X_y=True)
    if opts.quick:
        x, y = x[:600], y[:600]
    rows = [((r / 16).tolist(), int(t)) for r, t in zip(x, y)]
    frame = spark.createDataFrame(rows, "features array<float>, label long").repartition(2).cache()
    frame.count()
    work = tempfile.mkdtemp(prefix="sparkdl-tuning-bench-")
    raw = {}
    studies = []
    if opts.only in (None, "throughput"):
        studies += [(f"throughput k={jobs}", opts.throughput_trials, opts.throughput_epochs, False, jobs, True)
                    for jobs in (1, opts.jobs)]  # fmt: skip
    if opts.only in (None, "pruning"):
        studies += [(name, opts.trials, opts.epochs, pruned, opts.jobs, False)
                    for name, pruned in (("unpruned", False), ("pruned", True))]  # fmt: skip
    # untimed: every executor starts its TF nodes' processes once, so k=1 (measured first) pays no more of it
    raw["warm-up"] = run_study(frame, os.path.join(work, "warm-up"), 2, 1, False, 2, True)
    for name, trials, epochs, pruned, jobs, fixed in studies:
        place = os.path.join(work, name.replace(" ", "-").replace("=", ""))
        raw[name] = run_study(frame, place, trials, epochs, pruned, jobs, fixed)
        print(f"{name}: {raw[name]}", flush=True)
    spark.stop()

    table, ratios, notes = (
        [],
        {},
        [f"{MASTER}; each trial a {NODES}-node fit of the digits MLP; {os.cpu_count()} cores"],
    )
    if opts.only in (None, "throughput"):
        one, many = raw["throughput k=1"], raw[f"throughput k={opts.jobs}"]
        table += [
            ("trials per hour, one at a time", one["trials_per_hour"], "trials/h"),
            (f"trials per hour, {opts.jobs} at a time", many["trials_per_hour"], "trials/h"),
        ]
        ratios[f"trials per hour: k={opts.jobs} / k=1 (goal >= 1.5)"] = many["trials_per_hour"] / one["trials_per_hour"]
        notes.append(
            f"throughput: {opts.throughput_trials} trials of {opts.throughput_epochs} epochs, 64 units, batch 32, "
            "no pruning; the cores cap the gain: two trials' nodes share the machine's cores"
        )
    if opts.only in (None, "pruning"):
        off, on = raw["unpruned"], raw["pruned"]
        table += [
            ("study without pruning", off["seconds"], "s"),
            ("study with MedianPruner", on["seconds"], "s"),
            ("epochs trained without pruning", off["epochs_trained"], "epochs"),
            ("epochs trained with MedianPruner", on["epochs_trained"], "epochs"),
            ("trials pruned", on["pruned"], "trials"),
            ("best val_loss without pruning", off["best"], "loss"),
            ("best val_loss with MedianPruner", on["best"], "loss"),
        ]
        ratios["wall time: pruned / unpruned (goal <= 0.6)"] = on["seconds"] / off["seconds"]
        notes += [
            f"pruning: {opts.trials} trials of up to {opts.epochs} epochs, {opts.jobs} at a time",
            "MedianPruner(n_startup_trials=3, n_warmup_steps=1); the same TPESampler(seed=0) in both studies",
        ]
    if opts.quick:
        notes.append("--quick: a smoke run, the figures mean nothing")
    import results_json

    results_json.finish(
        opts, "Optuna studies: concurrent trials, pruned against unpruned", table, ratios, notes, raw=raw,
        digits=lambda unit: 4 if unit == "loss" else 1, master=MASTER,
    )  # fmt: skip


if __name__ == "__main__":
    main()
