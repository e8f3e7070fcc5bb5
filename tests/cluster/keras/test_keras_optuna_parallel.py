"""An Optuna study of KerasEstimator fits two trials at a time (``run_study(n_jobs=2)``) on
local-cluster[4,1,768], each trial a 2-node fit, with MedianPruner: concurrent trials' node groups are
disjoint and overlap in time, pruned trials stop at an epoch boundary and free their executors for the
next trial, and every trial finishes. Where each trial's nodes ran, and when, is read from Spark's
status store with test_keras_parallel_tuning.py's helpers (and its 4-executor fixture); each trial's
jobs carry a Spark job tag naming it."""

from __future__ import annotations

import functools
import time

import pytest

from sparkdl.keras import KerasEstimator, tuning

import keras_functions as kf
import node_group_records as records
from node_group_records import spark4  # noqa: F401 - the 4-executor fixture, shared

optuna = pytest.importorskip("optuna")

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(600)]  # about 70 s here

EPOCHS = 4
#: Two good rates (they run first, together, and complete: the pruner waits for two complete trials),
#: then rates too small to learn (pruned) and a good one.
RATES = [0.01, 0.02, 1e-5, 2e-5, 0.05, 1.5e-5]
TAG = "optuna-trial-"


def _trial_of_cluster(sc, clusters) -> dict[str, int]:
    """The trial number of each cluster (by job group): the job tag its launch job carries."""
    store = sc._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    owners = {}
    for i in range(jobs.size()):
        job = jobs.apply(i)
        group, tags = job.jobGroup(), job.jobTags()
        group = group.get() if group.isDefined() else None
        numbers = [int(tags.apply(j)[len(TAG) :]) for j in range(tags.size()) if tags.apply(j).startswith(TAG)]
        if group in clusters and numbers:
            owners[group] = numbers[0]
    return owners


def test_two_trials_at_once_run_on_disjoint_node_groups_and_pruned_ones_free_theirs(
    spark4,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    import mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file:{tmp_path / 'mlruns'}")
    spark = spark4
    sc = spark.sparkContext
    df = records.digits(spark, rows=900)
    seen = {}  # trial number: epochs reported when it ended

    def objective(trial):
        rate = trial.suggest_float("learning_rate", 1e-5, 0.1, log=True)
        estimator = KerasEstimator(
            model=functools.partial(kf.keras3_mlp, rate, 32), feature_cols="features", label_cols="label",
            validation=0.2, epochs=EPOCHS, batch_size=32, num_workers=2, seed=3,
        )  # fmt: skip
        sc.addJobTag(f"{TAG}{trial.number}")  # this thread's jobs, and those of the threads it starts
        try:
            model = tuning.fit_trial(trial, estimator, df, monitor="val_loss")
        finally:
            sc.removeJobTag(f"{TAG}{trial.number}")
            mine = next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)
            seen[trial.number] = len(mine.intermediate_values)
        return model.history["val_loss"][-1]

    storage = str(tmp_path / "study.db")
    study = optuna.create_study(storage=f"sqlite:///{storage}", study_name="digits")
    for rate in RATES:
        study.enqueue_trial({"learning_rate": rate})
    since, started = records.last_job(sc), time.perf_counter()
    study = tuning.run_study(
        objective, len(RATES), study_name="digits", storage=storage, checkpoint_dir=str(tmp_path / "runs"),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0), n_jobs=2,
        log_to_mlflow=True,
    )  # fmt: skip
    clusters = records.clusters(sc, since)
    owners = _trial_of_cluster(sc, clusters)
    trials = {t.number: t for t in study.trials}
    print(f"study of {len(RATES)} trials, 2 at a time: {time.perf_counter() - started:.0f} s; epochs {seen}")
    print({owners.get(name): c for name, c in clusters.items()})

    # every trial finished: the good rates complete, the tiny ones pruned before their last epoch
    states = {n: t.state.name for n, t in trials.items()}
    assert sorted(states) == list(range(len(RATES))) and set(states.values()) <= {"COMPLETE", "PRUNED"}, states
    for number, rate in enumerate(RATES):
        if rate < 1e-3:
            assert states[number] == "PRUNED" and 1 <= seen[number] < EPOCHS, (states, seen)
        elif number < 2:
            assert states[number] == "COMPLETE" and seen[number] == EPOCHS, (states, seen)
    # one 2-node group per trial, read from Spark's executor ids
    assert sorted(owners.values()) == list(range(len(RATES))), owners
    assert all(len(c["executors"]) == 2 for c in clusters.values()), clusters
    by_trial = {owners[name]: c for name, c in clusters.items()}
    pairs = [(a, b) for a in by_trial for b in by_trial if a < b and records.overlap(by_trial[a], by_trial[b])]
    assert (0, 1) in pairs, f"the first two trials did not run at once: {by_trial}"
    for a, b in pairs:
        assert by_trial[a]["executors"].isdisjoint(by_trial[b]["executors"]), f"trials {a}, {b} shared: {by_trial}"
    # a pruned trial's group was released: a later trial launched on its executors once it had stopped
    for number in (n for n, s in states.items() if s == "PRUNED"):
        pruned = by_trial[number]
        later = [c for c in by_trial.values() if c["launched"] >= pruned["fed"] and c is not pruned]
        reused = [c for c in later if c["executors"] & pruned["executors"]]
        assert reused or number == max(by_trial, key=lambda n: by_trial[n]["launched"]), (number, by_trial)
    # MLflow from two threads at once: the parent run, a child per trial with the epochs its chief logged
    client = mlflow.tracking.MlflowClient()
    parent_id = study.user_attrs[tuning.MLFLOW_PARENT_ATTR]
    assert client.get_run(parent_id).info.status == "FINISHED"
    experiment = client.get_run(parent_id).info.experiment_id
    children = client.search_runs([experiment], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    by_number = {int(run.data.tags["optuna.trial_number"]): run for run in children}
    assert sorted(by_number) == sorted(trials), by_number.keys()
    for number, run in by_number.items():
        assert run.info.run_id == trials[number].user_attrs[tuning.MLFLOW_RUN_ATTR]
        assert run.info.status == ("FINISHED" if states[number] == "COMPLETE" else "KILLED"), (number, run.info)
        steps = {m.step for m in client.get_metric_history(run.info.run_id, "val_loss")}
        assert steps == set(trials[number].intermediate_values), (number, steps)
