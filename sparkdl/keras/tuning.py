"""Optuna studies of ``KerasEstimator`` fits: each trial a distributed fit, pruned at epoch boundaries.

::

    import optuna
    from sparkdl.keras import KerasEstimator
    from sparkdl.keras.tuning import fit_trial, run_study

    def objective(trial):
        estimator = KerasEstimator(model=build_model, feature_cols="features", label_cols="label",
                                   learning_rate=trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True),
                                   validation=0.2, epochs=8, num_workers=2)
        model = fit_trial(trial, estimator, train_df, monitor="val_loss")   # prunes: optuna.TrialPruned
        return min(model.history["val_loss"])

    study = run_study(objective, n_trials=12, study_name="digits", checkpoint_dir="/shared/tuning",
                      pruner=optuna.pruners.MedianPruner(), log_to_mlflow=True)

``fit_trial`` reports the monitored metric of every epoch the chief ends to the trial, on the
driver (``TFCluster.watch_epochs``); when Optuna's pruner says so, the cluster stops at that epoch
boundary (its nodes end, their executors are free for the next trial) and ``optuna.TrialPruned``
is raised. Each trial trains in the run store (``checkpoint_dir/<study>-trial-<n>``), so it can resume.

``run_study`` keeps the study in Optuna's storage: a SQLite file under ``checkpoint_dir`` by
default, any RDB URL Optuna takes, or a storage object (``mlflow.optuna.MlflowStorage``...). Run
again after the driver died, it goes on: finished trials are not run again, and a trial the dead
driver left running (found by its stale heartbeat, ``heartbeat_interval``) is retried with its
params, resuming from its last epoch. With MLflow, the study is one parent run and each trial a
child run (Params, per-epoch metrics, optionally the model); the best trial's model is logged on
the parent. Optuna is optional (the ``optuna`` extra): nothing imports it until these are called.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from ..common.errors import TrainingStopped
from ..common.timeouts import TRIAL_HEARTBEAT_S
from . import fitting, tracking

#: Trial user attributes: the trial's run-store id and MLflow run, inherited by a retry of the trial.
RUN_ID_ATTR = "sparkdl.run_id"
MLFLOW_RUN_ATTR = tracking.TRIAL_RUN_ATTR
#: The trained model's file (a complete trial).
MODEL_PATH_ATTR = "sparkdl.model_path"
#: Study user attributes: the run store's root and the MLflow parent run.
CHECKPOINT_DIR_ATTR = "sparkdl.checkpoint_dir"
MLFLOW_PARENT_ATTR = "sparkdl.mlflow_parent_run_id"
#: The SQLite file ``run_study`` keeps a study in, under ``checkpoint_dir``, without a storage given.
DEFAULT_DB = "optuna.db"
#: Where the best trial's model file goes in the parent run's artifacts.
BEST_MODEL_ARTIFACT = "best_model"


def _optuna():
    try:
        import optuna
    except ImportError as exc:
        raise ImportError("sparkdl's tuning needs Optuna: sparkdl-tf's optuna extra (pip install 'optuna>=4')") from exc
    return optuna


@dataclass
class EpochReporter:
    """The epoch watcher of one trial's fit (``TFCluster.watch_epochs``): reports ``monitor`` of each
    epoch to ``trial`` and says stop when its pruner prunes it (never after the last epoch)."""

    trial: Any
    monitor: str
    epochs: int
    reported: list[int] = field(default_factory=list)  #: the epochs reported, in order
    pruned_at: int | None = None  #: the epoch after which the trial was pruned

    def __call__(self, epoch: int, logs: dict[str, float]) -> bool:
        value = logs.get(self.monitor)
        if value is None or not math.isfinite(value):
            return False
        self.trial.report(float(value), epoch)
        self.reported.append(epoch)
        if epoch + 1 >= self.epochs or not self.trial.should_prune():
            return False
        self.pruned_at = epoch
        return True


def trial_run_id(study_name: str, trial) -> str:
    """The run-store id of ``trial``: its own (a retry inherits it), else ``<study>-trial-<number>``."""
    inherited = trial.user_attrs.get(RUN_ID_ATTR)
    return inherited or f"{study_name}-trial-{trial.number}"


def storage_url(storage: str | None, checkpoint_dir: str | None) -> str:
    """The storage URL of ``storage`` (an RDB URL as it is; a file path: SQLite there), by default a
    SQLite file ``checkpoint_dir/optuna.db``. ValueError when neither names a local place."""
    if storage is not None:
        return storage if "://" in storage else f"sqlite:///{os.path.abspath(storage)}"
    if checkpoint_dir is None or "://" in checkpoint_dir.replace("file://", ""):
        raise ValueError(
            "run_study keeps the study in a SQLite file under checkpoint_dir, which must then be a local path: "
            "give storage (an RDB URL such as postgresql://..., or an optuna storage object) or a local checkpoint_dir"
        )
    root = checkpoint_dir.removeprefix("file://")
    os.makedirs(root, exist_ok=True)
    return f"sqlite:///{os.path.abspath(os.path.join(root, DEFAULT_DB))}"


def retrying_storage(url: str, heartbeat_interval: int, max_retry: int | None):
    """An Optuna RDB storage at ``url`` whose stale running trials (their driver died) are retried:
    failed, then enqueued again with their params, user attributes and intermediate values."""
    optuna = _optuna()
    storages = optuna.storages
    retry_class = getattr(storages, "RetryHeartbeatStaleTrialCallback", None) or storages.RetryFailedTrialCallback
    keyword = (
        "heartbeat_stale_trial_callback"
        if "heartbeat_stale_trial_callback" in inspect.signature(storages.RDBStorage).parameters
        else "failed_trial_callback"  # Optuna before 4.9
    )
    storage_class = _one_writer_storage(storages.RDBStorage) if url.startswith("sqlite") else storages.RDBStorage
    with _experimental_allowed(optuna):  # heartbeats and retries are Optuna's documented way, still "experimental"
        retry = retry_class(max_retry=max_retry, inherit_intermediate_values=True)
        return storage_class(url, heartbeat_interval=heartbeat_interval, **{keyword: retry})


def _one_writer_storage(rdb_storage: type) -> type:
    """Optuna's RDB storage with its trial state changes made one at a time in this process.

    Optuna takes a waiting trial (enqueued, or a retry) by reading it WAITING and writing it
    RUNNING under ``SELECT ... FOR UPDATE``, which SQLite ignores: with ``n_jobs`` > 1 two threads
    could both take it and run one trial twice (seen: "Cannot tell a COMPLETE trial"). Every
    thread of a study run by ``run_study`` is in this driver, so a lock makes the take atomic.
    """

    class OneWriterStorage(rdb_storage):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._state_lock = threading.Lock()

        def set_trial_state_values(self, trial_id, state, values=None):
            with self._state_lock:
                return super().set_trial_state_values(trial_id, state, values)

    return OneWriterStorage


@contextlib.contextmanager
def _experimental_allowed(optuna):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def trials_left(states: list, n_trials: int) -> int:
    """How many more finished trials a study needs to hold ``n_trials``, its trials in ``states``
    (``TrialState``s): complete and pruned ones are finished. Running ones are not counted: a killed
    driver's may never finish (they are retried once their heartbeat is stale), and waiting ones
    (retries) are among those still to run."""
    finished = {"COMPLETE", "PRUNED"}
    return max(0, n_trials - sum(1 for state in states if state.name in finished))


def fit_trial(trial, estimator, dataset, monitor: str = "val_loss", log_model: bool = False):
    """Fit ``estimator`` on ``dataset`` as Optuna's ``trial``: a ``KerasModel``, or ``optuna.TrialPruned``.

    Every epoch's ``monitor`` (a Keras log: ``val_loss``, ``val_accuracy``, ``loss``...) is reported to
    the trial as the chief ends it; when the study's pruner prunes the trial, its cluster stops at
    that epoch boundary (nodes ended, executors freed) and ``TrialPruned`` is raised. The fit trains
    in the run store when a checkpoint_dir is known (the estimator's, else ``run_study``'s), under
    :func:`trial_run_id` (an estimator's own run_id names the study's trials in place of the study
    name), so a trial retried after its driver died resumes from its last epoch. In a
    study ``run_study`` tracks in MLflow, the fit logs into the trial's child run (Params, every
    epoch's metrics; the model with ``log_model``), as in any MLflow run active in this thread (the
    trial a child run of it). The estimator needs ``num_workers >= 1``.
    """
    optuna = _optuna()
    study_attrs = trial.study.user_attrs
    checkpoint_dir = estimator.getCheckpointDir() or study_attrs.get(CHECKPOINT_DIR_ATTR)
    params = {}
    if checkpoint_dir is not None:
        # One run store per trial: an estimator's own run_id names the study's trials, never one of them.
        run_id = trial_run_id(estimator.getRunId() or trial.study.study_name, trial)
        trial.set_user_attr(RUN_ID_ATTR, run_id)
        params.update(checkpoint_dir=checkpoint_dir, run_id=run_id)
    parent = study_attrs.get(MLFLOW_PARENT_ATTR) or tracking.active_run_id()  # a run active here: the parent
    if parent is not None:
        params["log_to_mlflow"] = True
    settings = fitting.FitSettings.of(estimator.copy({estimator.getParam(k): v for k, v in params.items()}))
    reporter = EpochReporter(trial, monitor, settings.epochs)
    with tracking.TrialRun(parent, trial, MLFLOW_RUN_ATTR) as run:
        try:
            model = fitting.fit_group(
                dataset, [(0, settings)], use_run_store=checkpoint_dir is not None, on_epoch=reporter,
                log_model=log_model,
            )[0]  # fmt: skip
        except TrainingStopped as stopped:
            run.pruned(stopped.epoch)
            raise optuna.TrialPruned(f"pruned after epoch {stopped.epoch + 1} ({monitor})") from stopped
        if reporter.pruned_at is not None:  # the last rows were read as the pruner decided
            run.pruned(reporter.pruned_at)
            raise optuna.TrialPruned(f"pruned after epoch {reporter.pruned_at + 1} ({monitor})")
    trial.set_user_attr(MODEL_PATH_ATTR, model.getModelPath())
    return model


@contextlib.contextmanager
def pruning(cluster, trial, epochs: int, monitor: str = "val_loss"):
    """Prune ``trial`` from a ``TFCluster``'s epochs (``TFCluster.run`` users; KerasEstimator's: :func:`fit_trial`).

    ::

        cluster = TFCluster.run(sc, main_fun, args, 2, input_mode=TFCluster.InputMode.SPARK)
        with pruning(cluster, trial, epochs=args["epochs"]):
            cluster.train(df, args["epochs"])   # the chief's model.fit has ctx.progress_callback()
        cluster.shutdown()

    Each epoch the chief ends reports ``monitor`` to the trial; a pruned trial's cluster is stopped
    there (every node ended) and ``optuna.TrialPruned`` raised. Yields the :class:`EpochReporter`.
    """
    optuna = _optuna()
    reporter = EpochReporter(trial, monitor, epochs)
    cluster.watch_epochs(reporter)
    try:
        yield reporter
    except TrainingStopped as stopped:
        raise optuna.TrialPruned(f"pruned after epoch {stopped.epoch + 1} ({monitor})") from stopped
    finally:
        cluster.watch_epochs(None)


def run_study(
    objective: Callable[[Any], float],
    n_trials: int,
    *,
    study_name: str,
    checkpoint_dir: str | None = None,
    storage: Any = None,
    direction: str = "minimize",
    pruner: Any = None,
    sampler: Any = None,
    n_jobs: int = 1,
    log_to_mlflow: bool = False,
    heartbeat_interval: int = TRIAL_HEARTBEAT_S,
    max_retry: int | None = 3,
    timeout: float | None = None,
):
    """Run ``objective`` (which calls :func:`fit_trial`) until the study holds ``n_trials`` finished
    trials (complete or pruned), ``n_jobs`` at a time; returns the ``optuna.Study``.

    ``storage``: an RDB URL or a SQLite file path (with heartbeats: a killed driver's running trials
    are retried, ``max_retry`` times), or an Optuna storage object as it is; by default the SQLite
    file ``checkpoint_dir/optuna.db``. ``checkpoint_dir`` also holds every trial's run store (a path
    every node and the driver reach). Re-running with the same ``study_name`` and storage goes on
    with the study: finished trials are not run again; a running trial whose heartbeat is older than
    twice ``heartbeat_interval`` seconds is retried, resuming from its last epoch. ``log_to_mlflow``:
    the study is an MLflow run (the active run, or one of its own, kept across re-runs) with a child
    run per trial, and the best trial's model logged on it at the end.
    """
    optuna = _optuna()
    if not isinstance(storage, optuna.storages.BaseStorage):
        storage = retrying_storage(storage_url(storage, checkpoint_dir), heartbeat_interval, max_retry)
    study = optuna.create_study(
        storage=storage, study_name=study_name, direction=direction, pruner=pruner, sampler=sampler,
        load_if_exists=True,
    )  # fmt: skip
    if checkpoint_dir is not None:
        study.set_user_attr(CHECKPOINT_DIR_ATTR, checkpoint_dir)
    with _experimental_allowed(optuna):
        optuna.storages.fail_stale_trials(study)  # a killed driver's trials: failed, and retried as WAITING
    with tracking.StudyRun(study, study_name, MLFLOW_PARENT_ATTR, log_to_mlflow) as parent:
        left = trials_left([t.state for t in study.get_trials(deepcopy=False)], n_trials)
        if left:
            # The trials still needed, at most; fewer once the study holds n_trials finished ones (a
            # killed driver's retried trial counts when it finishes). A failing objective raises.
            enough = optuna.study.MaxTrialsCallback(
                n_trials, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
            )
            study.optimize(
                objective, n_trials=left, n_jobs=n_jobs, timeout=timeout, callbacks=[enough, parent.record_trial]
            )
        parent.log_best(study, MODEL_PATH_ATTR, BEST_MODEL_ARTIFACT)
    return study
