"""An Optuna study of KerasEstimator fits: learning rate, width and batch size searched on the digits.

Each trial is a distributed fit on ``--cluster_size`` TF nodes (``sparkdl.keras.fit_trial``): every
epoch's ``val_loss`` reaches the trial as the chief ends the epoch, and Optuna's ``MedianPruner`` stops
a trial that trails the others at that epoch boundary (its nodes end, their executors are free for the
next trial). ``run_study`` keeps the study in a SQLite file and each trial's checkpoints in a run store
under ``--work_dir``: run the same command again after the driver died and the study goes on where it was.
It prints the trials table and writes ``val_loss_per_epoch.png`` (the metric per epoch per trial).

Runs with no arguments on an embedded ``local-cluster[2,1,1024]``; see README.md for spark-submit.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "keras_estimator"))
import keras_digits  # noqa: E402


def parse_args(argv=None):
    """Command-line options; every one has a default."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local-cluster)")
    parser.add_argument("--cluster_size", type=int, default=2, help="TF nodes per trial, one per executor")
    parser.add_argument("--epochs", type=int, default=8, help="epochs of a trial that is not pruned")
    parser.add_argument("--trials", type=int, default=12, help="finished trials (complete or pruned) to reach")
    parser.add_argument(
        "--jobs", type=int, default=1, help="trials at a time, each on its own --cluster_size executors"
    )
    parser.add_argument("--work_dir", default=None, help="the study's SQLite file and run store (default: a temp dir)")
    parser.add_argument("--mlflow", default=None, help="an MLflow tracking URI: the study as a parent run")
    return parser.parse_args(argv)


def features(frame):
    """``features`` (the 64 pixels scaled to [0, 1], an array) and ``label``."""
    from pyspark.sql import functions as F

    return frame.select(F.array(*[F.col(p) / 16.0 for p in keras_digits.PIXELS]).alias("features"), "label")


def main(argv=None, spark=None):
    """Run the study; returns it (an ``optuna.Study``).

    ``spark``: use this running session and leave it running (by default the example starts its own).
    """
    import optuna

    from sparkdl.keras import KerasEstimator, fit_trial, run_study

    own_session = spark is None
    args = parse_args(argv)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="sparkdl-tuning-")
    spark = keras_digits.start_spark("sparkdl-tuning", args.master, args.cluster_size * args.jobs, spark=spark)
    train, _ = keras_digits.digits_frames(spark)
    train = features(train).cache()
    if args.mlflow:
        import mlflow

        mlflow.set_tracking_uri(args.mlflow)

    def objective(trial):
        hidden = trial.suggest_int("hidden", 16, 128, step=16)
        estimator = KerasEstimator(
            model=functools.partial(keras_digits.build_model, hidden),  # each node builds it in its strategy
            feature_cols="features",
            label_cols="label",
            learning_rate=trial.suggest_float("learning_rate", 1e-4, 0.1, log=True),
            batch_size=trial.suggest_categorical("batch_size", [16, 32, 64]),
            validation=0.2,
            epochs=args.epochs,
            num_workers=args.cluster_size,
        )
        model = fit_trial(trial, estimator, train, monitor="val_loss")  # optuna.TrialPruned when pruned
        return min(model.history["val_loss"])

    started = time.perf_counter()
    study = run_study(
        objective,
        args.trials,
        study_name="digits",
        checkpoint_dir=os.path.join(work_dir, "runs"),
        storage=os.path.join(work_dir, "study.db"),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1),
        sampler=optuna.samplers.TPESampler(seed=0),
        n_jobs=args.jobs,
        log_to_mlflow=bool(args.mlflow),
    )
    seconds = time.perf_counter() - started
    table = study.trials_dataframe(attrs=("number", "params", "value", "state", "duration"))
    print(table.to_string(index=False))
    states = [t.state.name for t in study.trials]
    print(
        f"{len(study.trials)} trials in {seconds:.1f} s ({states.count('COMPLETE')} complete, "
        f"{states.count('PRUNED')} pruned); best val_loss {study.best_value:.4f} with {study.best_params}"
    )
    print(f"val_loss per epoch per trial: {plot(study, os.path.join(work_dir, 'val_loss_per_epoch.png'))}")
    if own_session:
        spark.stop()
    return study


def plot(study, path: str) -> str:
    """The reported ``val_loss`` of every trial by epoch (pruned trials dashed) as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for trial in study.trials:
        steps = sorted(trial.intermediate_values)
        style = "--" if trial.state.name == "PRUNED" else "-"
        axes.plot([s + 1 for s in steps], [trial.intermediate_values[s] for s in steps], style, label=str(trial.number))
    axes.set(xlabel="epoch", ylabel="val_loss", yscale="log", title="digits: val_loss per epoch (dashed: pruned)")
    axes.legend(title="trial", fontsize="small", ncol=2)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


if __name__ == "__main__":
    main()
