"""sparkdl/keras/tuning.py without Spark or TensorFlow: the storage it keeps a study in, the trials' run ids,
the pruning decision fed a stream of epochs, a study run again going on where it was, and the study's MLflow
runs (a parent, a child per trial) in a file store under tmp. (Trials that are distributed fits, pruned and
killed: tests/cluster/keras/test_keras_optuna.py and test_keras_optuna_resume.py.)"""

from __future__ import annotations

import math
import warnings

import pytest

from sparkdl.common.errors import TrainingStopped
from sparkdl.keras import tracking, tuning

optuna = pytest.importorskip("optuna")
pytestmark = pytest.mark.timeout(60)


def test_the_study_is_kept_in_a_sqlite_file_under_checkpoint_dir_by_default(tmp_path):
    url = tuning.storage_url(None, str(tmp_path / "tuning"))
    assert url == f"sqlite:///{tmp_path / 'tuning' / 'optuna.db'}" and (tmp_path / "tuning").is_dir()
    assert tuning.storage_url(str(tmp_path / "s.db"), None) == f"sqlite:///{tmp_path / 's.db'}"
    assert tuning.storage_url("postgresql://db/optuna", "s3a://bucket/runs") == "postgresql://db/optuna"
    with pytest.raises(ValueError, match="give storage"):
        tuning.storage_url(None, "s3a://bucket/runs")
    with pytest.raises(ValueError, match="local checkpoint_dir"):
        tuning.storage_url(None, None)


def test_a_trial_run_id_is_the_study_and_number_and_a_retry_inherits_it():
    study = optuna.create_study()
    first = study.ask()
    assert tuning.trial_run_id("digits", first) == "digits-trial-0"
    first.set_user_attr(tuning.RUN_ID_ATTR, "digits-trial-0")
    # a retried trial (RetryFailedTrialCallback) carries the user attributes of the one it retries
    study.add_trial(optuna.create_trial(state=optuna.trial.TrialState.WAITING, user_attrs=first.user_attrs))
    retry = study.ask()
    assert retry.number == 1 and tuning.trial_run_id("digits", retry) == "digits-trial-0"


def _epochs(reporter, values):
    """Feed ``values`` as the epochs' val_loss until the reporter says stop; the epochs fed."""
    for epoch, value in enumerate(values):
        if reporter(epoch, {"val_loss": value, "loss": 0.0}):
            return epoch + 1
    return len(values)


def test_the_epoch_reporter_reports_each_epoch_and_stops_when_the_pruner_prunes():
    study = optuna.create_study(pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0))
    for values in ([1.0, 0.5, 0.3, 0.2], [1.1, 0.6, 0.4, 0.3]):  # two complete trials make the median
        trial = study.ask()
        reporter = tuning.EpochReporter(trial, "val_loss", 4)
        assert _epochs(reporter, values) == 4 and reporter.pruned_at is None
        study.tell(trial, values[-1])
    good = study.ask()
    good_reporter = tuning.EpochReporter(good, "val_loss", 4)
    assert _epochs(good_reporter, [0.9, 0.4, 0.2, 0.1]) == 4 and good_reporter.reported == [0, 1, 2, 3]
    study.tell(good, 0.1)
    slow = study.ask()
    reporter = tuning.EpochReporter(slow, "val_loss", 4)
    assert _epochs(reporter, [2.0, 1.9, 1.8, 1.7]) == 1  # worse than the median at epoch 0: stop there
    assert reporter.pruned_at == 0 and study.trials[slow.number].intermediate_values == {0: 2.0}


def test_the_epoch_reporter_never_stops_after_the_last_epoch_and_skips_epochs_without_the_metric():
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=1.0))
    trial = study.ask()
    reporter = tuning.EpochReporter(trial, "val_loss", 2)
    assert reporter(0, {"loss": 5.0}) is False and reporter(0, {"val_loss": math.nan}) is False
    assert reporter.reported == []
    assert reporter(1, {"val_loss": 5.0}) is False  # over the threshold, but nothing is left to save
    assert reporter.reported == [1] and reporter.pruned_at is None
    early = study.ask()
    assert tuning.EpochReporter(early, "val_loss", 2)(0, {"val_loss": 5.0}) is True


class FakeCluster:
    """A TFCluster's epoch watching: ``train`` feeds the watcher epochs, raising as a stopped cluster does."""

    def __init__(self, values):
        self.values, self.watcher = values, None

    def watch_epochs(self, watcher):
        self.watcher = watcher

    def train(self):
        for epoch, value in enumerate(self.values):
            if self.watcher(epoch, {"val_loss": value}):
                raise TrainingStopped(epoch, "stopped")


def test_pruning_a_tfcluster_raises_trial_pruned_and_removes_its_watcher():
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=1.0))
    cluster = FakeCluster([0.5, 2.0, 0.1])
    with pytest.raises(optuna.TrialPruned, match="after epoch 2"):
        with tuning.pruning(cluster, study.ask(), epochs=3):
            cluster.train()
    assert cluster.watcher is None and study.trials[0].intermediate_values == {0: 0.5, 1: 2.0}
    fine = FakeCluster([0.5, 0.4, 0.3])
    with tuning.pruning(fine, study.ask(), epochs=3) as reporter:
        fine.train()
    assert reporter.reported == [0, 1, 2] and reporter.pruned_at is None


def test_trials_left_counts_finished_trials_only():
    states = optuna.trial.TrialState
    done = [states.COMPLETE, states.PRUNED, states.FAIL, states.WAITING, states.RUNNING]
    # the failed one is retried (WAITING); a killed driver's RUNNING one may never finish: not counted
    assert tuning.trials_left(done, 6) == 4
    assert tuning.trials_left(done, 2) == 0


def test_a_study_run_again_goes_on_and_runs_no_finished_trial_again(tmp_path):
    calls = []

    def objective(trial):
        calls.append(trial.number)
        value = trial.suggest_float("x", -1, 1)
        if trial.number % 3 == 2:
            raise optuna.TrialPruned()
        return value**2

    kept = str(tmp_path / "tuning")
    study = tuning.run_study(objective, 4, study_name="quad", checkpoint_dir=kept)
    assert calls == [0, 1, 2, 3] and study.user_attrs[tuning.CHECKPOINT_DIR_ATTR] == kept
    again = tuning.run_study(objective, 4, study_name="quad", checkpoint_dir=kept)  # finished: nothing to run
    assert calls == [0, 1, 2, 3] and len(again.trials) == 4
    more = tuning.run_study(objective, 6, study_name="quad", checkpoint_dir=kept)
    assert calls == [0, 1, 2, 3, 4, 5] and [t.state.name for t in more.trials].count("PRUNED") == 2


def test_the_study_is_a_parent_run_and_each_trial_a_child_run_across_runs_again(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file:{tmp_path / 'mlruns'}")
    model = tmp_path / "model.keras"
    model.write_bytes(b"a model file")

    def objective(trial):  # what fit_trial does around a fit, the fit a metric per epoch
        x = trial.suggest_float("x", -1, 1)
        with tracking.TrialRun(trial.study.user_attrs[tuning.MLFLOW_PARENT_ATTR], trial) as run:
            for epoch in range(3):
                mlflow.log_metric("val_loss", x**2 + 1 / (epoch + 1), step=epoch)
                if trial.number == 1 and epoch == 1:
                    run.pruned(epoch)
                    raise optuna.TrialPruned()
        trial.set_user_attr(tuning.MODEL_PATH_ATTR, str(model))
        return x**2

    kept = str(tmp_path / "tuning")
    study = tuning.run_study(objective, 3, study_name="quad", checkpoint_dir=kept, log_to_mlflow=True)
    assert mlflow.active_run() is None and tracking.active_run_id() is None
    with mlflow.start_run() as active:  # fit_trial's parent outside run_study: the run active in its thread
        assert tracking.active_run_id() == active.info.run_id
    parent_id = study.user_attrs[tuning.MLFLOW_PARENT_ATTR]
    study = tuning.run_study(objective, 4, study_name="quad", checkpoint_dir=kept, log_to_mlflow=True)
    assert study.user_attrs[tuning.MLFLOW_PARENT_ATTR] == parent_id  # the same parent run, gone on with

    client = mlflow.tracking.MlflowClient()
    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED" and parent.data.tags[tracking.STUDY_TAG] == "quad"
    assert parent.data.tags["best_trial"] == str(study.best_trial.number)
    assert parent.data.metrics["best_value"] == pytest.approx(study.best_value)
    assert [a.path for a in client.list_artifacts(parent_id, "best_model")] == ["best_model/model.keras"]
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'")
    by_trial = {int(run.data.tags[tracking.TRIAL_TAG]): run for run in children}
    assert sorted(by_trial) == [0, 1, 2, 3]
    for number, run in by_trial.items():
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
        pruned = number == 1
        assert steps == ([0, 1] if pruned else [0, 1, 2])
        assert run.info.status == ("KILLED" if pruned else "FINISHED")
        assert run.data.tags[tracking.STATE_TAG] == ("PRUNED" if pruned else "COMPLETE")
        assert run.data.params["trial.x"] == str(study.trials[number].params["x"])
        assert ("objective" in run.data.metrics) is not pruned


def test_threads_of_one_study_never_take_the_same_waiting_trial(tmp_path):
    """With SQLite, Optuna's take of a waiting trial (read WAITING, write RUNNING under a
    ``FOR UPDATE`` SQLite ignores) let two threads of ``n_jobs=2`` run one trial twice."""
    import threading

    storage = tuning.retrying_storage(f"sqlite:///{tmp_path}/study.db", 30, 3)
    study = optuna.create_study(storage=storage, study_name="race")
    for x in range(40):
        study.enqueue_trial({"x": x})
    taken: list[int] = []

    def take_ten():
        for _ in range(10):
            taken.append(study.ask().number)

    threads = [threading.Thread(target=take_ten) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Heartbeat ... used with Study.optimize": ask() alone here
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert sorted(taken) == list(range(40))
