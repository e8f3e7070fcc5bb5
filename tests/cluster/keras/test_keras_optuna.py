"""An Optuna study of KerasEstimator fits on local-cluster[2,1,1024], one 2-node trial at a time, with
MedianPruner: pruned trials stop at an epoch boundary with their nodes ended and executors free, and the
study's MLflow runs (a parent, a child per trial with per-epoch metrics) read back from a local file store."""

from __future__ import annotations

import time

import pytest

from sparkdl.keras import KerasEstimator, tuning

import keras_functions as kf

optuna = pytest.importorskip("optuna")

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

EPOCHS = 4


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


def digits_features(spark):
    """The digits as ``features`` (64 floats in [0, 1]) and ``label``."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rows = [((r / 16).tolist(), int(t)) for r, t in zip(x, y)]
    return spark.createDataFrame(rows, "features array<float>, label long").repartition(2).cache()


def test_a_pruned_study_stops_trials_at_epoch_boundaries_and_tracks_them_in_mlflow(spark, tmp_path, monkeypatch):
    import mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file:{tmp_path / 'mlruns'}")
    sc = spark.sparkContext
    df = digits_features(spark)
    outcomes = {}  # trial number: ("complete", epochs trained) or ("pruned", epochs reported)

    def objective(trial):
        rate = trial.suggest_float("learning_rate", 1e-5, 0.1, log=True)
        estimator = KerasEstimator(
            model=kf.keras3_mlp(rate, trial.suggest_int("hidden", 8, 64)), feature_cols="features",
            label_cols="label", validation=0.2, epochs=EPOCHS, batch_size=32, num_workers=2, seed=3,
        )  # fmt: skip
        try:
            model = tuning.fit_trial(trial, estimator, df, monitor="val_loss")
        except optuna.TrialPruned:
            # the trial's cluster is over: no Spark job left, both executors idle
            assert sc.statusTracker().getActiveJobsIds() == []
            assert all(e.numRunningTasks() == 0 for e in sc._jsc.sc().statusTracker().getExecutorInfos())
            outcomes[trial.number] = ("pruned", len(optuna_trial(trial).intermediate_values))
            raise
        outcomes[trial.number] = ("complete", len(model.history["val_loss"]))
        return model.history["val_loss"][-1]

    def optuna_trial(trial):
        return next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)

    storage = str(tmp_path / "study.db")
    study = optuna.create_study(storage=f"sqlite:///{storage}", study_name="digits")
    for rate in (0.01, 0.02, 1e-5, 2e-5):  # two good rates, then two that learn too slowly to go on
        study.enqueue_trial({"learning_rate": rate, "hidden": 32})
    started = time.perf_counter()
    study = tuning.run_study(
        objective, 4, study_name="digits", storage=storage, checkpoint_dir=str(tmp_path / "runs"),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0), log_to_mlflow=True,
    )  # fmt: skip
    print(f"study of 4 trials: {time.perf_counter() - started:.1f} s; {outcomes}")
    states = [t.state.name for t in study.trials]
    assert states == ["COMPLETE", "COMPLETE", "PRUNED", "PRUNED"], states
    assert outcomes[0] == outcomes[1] == ("complete", EPOCHS)
    for number in (2, 3):  # stopped at the epoch the pruner decided on, before the last
        kind, reported = outcomes[number]
        assert kind == "pruned" and 1 <= reported < EPOCHS
        assert max(study.trials[number].intermediate_values) == reported - 1
    assert study.best_trial.number in (0, 1)

    client = mlflow.tracking.MlflowClient()
    parent_id = study.user_attrs[tuning.CHECKPOINT_DIR_ATTR] and study.user_attrs[tuning.MLFLOW_PARENT_ATTR]
    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED" and parent.data.tags["best_trial"] == str(study.best_trial.number)
    assert parent.data.metrics["best_value"] == pytest.approx(study.best_value)
    assert [a.path for a in client.list_artifacts(parent_id, tuning.BEST_MODEL_ARTIFACT)] == [
        f"{tuning.BEST_MODEL_ARTIFACT}/model.keras"
    ]
    children = client.search_runs([parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    by_trial = {int(run.data.tags["optuna.trial_number"]): run for run in children}
    assert sorted(by_trial) == [0, 1, 2, 3]
    for number, run in by_trial.items():
        trial = study.trials[number]
        assert run.info.run_id == trial.user_attrs[tuning.MLFLOW_RUN_ATTR]
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
        assert set(steps) >= set(trial.intermediate_values)  # every epoch the driver saw, logged by the chief
        assert run.data.tags["optuna.trial_state"] == trial.state.name
        assert run.data.params["trial.learning_rate"] == str(trial.params["learning_rate"])
        if trial.state.name == "COMPLETE":
            assert run.info.status == "FINISHED" and sorted(set(steps)) == list(range(EPOCHS))
            assert run.data.params["epochs"] == str(EPOCHS)  # the estimator's Params
        else:
            # the chief waited at the boundary for the driver's word: it trained no epoch past the last reported
            assert run.info.status == "KILLED" and sorted(set(steps)) == sorted(trial.intermediate_values)
