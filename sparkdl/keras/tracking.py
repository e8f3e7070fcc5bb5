"""MLflow tracking of a fit, when MLflow is installed (the optional ``mlflow`` extra) and wanted.

A fit is tracked when ``log_to_mlflow=True`` (which then needs MLflow) or whenever an MLflow run
is active. What is logged when:

- before training, the driver opens the run (``FitRuns``): the active run, or a run of its own;
  ``fitMultiple``'s param maps (several on one cluster) each get a run nested in it;
- during training, the chief node's ``EpochLogger`` logs every epoch's metrics (loss, metrics,
  ``val_*``) into that run with ``step`` = epoch as each epoch ends. The run's tracking URI and
  id reach the node in the run's ``RunSpec`` (``TrackingTarget``); non-chief nodes log nothing,
  and a store the chief cannot reach is warned about once while training goes on;
- after training, the driver logs the Params (the JSON-able ones: not the model, not the
  callbacks), any epoch of the history the run lacks (the store was out of the chief's reach, or
  epochs an earlier application trained), and the model as an MLflow model with its signature
  (``log_model``), then ends the runs it opened.

The chief must reach the tracking store: a tracking server (``http(s)://``, its credentials in
the executors' environment) or a path every executor shares. Without MLflow nothing here runs on
the driver, and nothing else needs it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..common.tf_compat import save_keras_file

logger = logging.getLogger(__name__)

#: Params that are code or objects, not settings a tracking server can show.
UNLOGGED = frozenset({"model", "callbacks"})
#: Where the model is logged in its run: ``runs:/<run_id>/model``.
MODEL_NAME = "model"
#: MLflow environment switches the nodes get from the driver (``node_environment``). A new one
#: belongs in ``node/fork_server.py``'s ``PER_NODE_VARIABLES`` too, or a fit with it set starts
#: fork servers of its own (each importing TensorFlow again).
NODE_SWITCHES = ("MLFLOW_ALLOW_FILE_STORE",)
#: MLflow's tag naming a nested run's parent.
PARENT_RUN_TAG = "mlflow.parentRunId"


def _mlflow():
    try:
        import mlflow
    except ImportError:
        return None
    return mlflow


def wanted(log_to_mlflow: bool) -> bool:
    """Whether to log: asked for (ImportError without MLflow), or an MLflow run is active."""
    mlflow = _mlflow()
    if log_to_mlflow and mlflow is None:
        raise ImportError(
            "log_to_mlflow=True needs MLflow: sparkdl-tf's mlflow extra (pip install 'mlflow-skinny>=3,<4')"
        )
    return mlflow is not None and (log_to_mlflow or mlflow.active_run() is not None)


@dataclass(frozen=True)
class TrackingTarget:
    """The run a node logs its epochs into: the driver's tracking URI (made absolute) and run id."""

    tracking_uri: str
    run_id: str


class EpochLogger:
    """Logs each epoch's metrics into ``target``'s run, on the chief only (the chief's Keras
    callback calls ``log_epoch`` as each epoch ends, ``training.run_callbacks``).

    The first failure (MLflow missing on the node, a store out of reach) is logged once as a
    warning and ends the logging: training never waits on, or fails for, the tracking store.
    """

    def __init__(self, target: TrackingTarget, chief: bool):
        self.target = target
        self.chief = chief
        self.logged_epochs: list[int] = []  #: the epochs this logger logged, in order
        self._client = None
        self._failed = False

    def log_epoch(self, epoch: int, logs: dict | None) -> None:
        """Log ``logs``' numbers with ``step=epoch`` (a non-chief, or after a failure: nothing)."""
        if not self.chief or self._failed:
            return
        metrics = numbers(logs)
        if not metrics:
            return
        try:
            from mlflow.entities import Metric

            if self._client is None:
                from mlflow.tracking import MlflowClient

                self._client = MlflowClient(self.target.tracking_uri)
            now = int(time.time() * 1000)
            batch = [Metric(name, value, now, epoch) for name, value in metrics.items()]
            self._client.log_batch(self.target.run_id, metrics=batch)
        except Exception as exc:  # noqa: BLE001 - any failure of the store: training goes on
            self._failed = True
            logger.warning(
                "sparkdl KerasEstimator: MLflow run %s at %s is out of this chief's reach (%s: %s); no further "
                "epochs are logged from here, the driver logs the history after the fit",
                self.target.run_id, self.target.tracking_uri, type(exc).__name__, exc,
            )  # fmt: skip
            return
        self.logged_epochs.append(epoch)


def numbers(logs: dict | None) -> dict[str, float]:
    """An epoch's Keras logs as MLflow metrics: the finite numbers, by name."""
    metrics = {}
    for name, value in (logs or {}).items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            metrics[str(name)] = number
    return metrics


def reachable_uri(uri: str) -> str:
    """``uri`` as a node (another process, another working directory) must read it: a local
    path or ``file:`` URI made absolute; every other URI as it is."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file") and not parsed.netloc:
        return "file:" + os.path.abspath(parsed.path or uri)
    if parsed.scheme == "sqlite" and not parsed.netloc and not parsed.path.startswith("//"):
        return "sqlite:///" + os.path.abspath(parsed.path[1:])  # sqlite:///mlflow.db is relative
    return uri


def node_environment() -> dict[str, str]:
    """The driver's MLflow switches a node's client needs to open the same store (MLflow 3 opens a
    ``file:`` store only with ``MLFLOW_ALLOW_FILE_STORE=true``); credentials are not carried."""
    return {name: os.environ[name] for name in NODE_SWITCHES if name in os.environ}


class FitRuns:
    """The MLflow runs of one group of param maps (``fitting.fit_group``), from before training
    to after it; a context manager that ends the runs it opened (FAILED if the fit raised)."""

    def __init__(self, indexes: list[int], log_to_mlflow: bool, log_models: bool = True):
        self._indexes = list(indexes)
        self._log_models = log_models
        self._enabled = wanted(log_to_mlflow)
        self._runs: dict[int, str] = {}
        self._nested: set[int] = set()
        self._owned_parent = False
        self._uri = ""

    def __enter__(self) -> "FitRuns":
        if not self._enabled:
            return self
        mlflow = _mlflow()
        parent = mlflow.active_run()
        if parent is None:
            parent = mlflow.start_run()
            self._owned_parent = True
        self._uri = reachable_uri(mlflow.get_tracking_uri())
        if len(self._indexes) == 1:
            self._runs[self._indexes[0]] = parent.info.run_id
            return self
        client = mlflow.tracking.MlflowClient()
        for index in self._indexes:
            tags = {PARENT_RUN_TAG: parent.info.run_id}
            run = client.create_run(parent.info.experiment_id, tags=tags, run_name=f"param map {index}")
            self._runs[index] = run.info.run_id
            self._nested.add(index)
        return self

    def __exit__(self, kind, error, trace) -> None:
        if not self._enabled:
            return
        mlflow = _mlflow()
        status = "FINISHED" if kind is None else "FAILED"
        client = mlflow.tracking.MlflowClient()
        for index in self._nested:  # those log_fit did not end (the fit failed before)
            if client.get_run(self._runs[index]).info.status == "RUNNING":
                client.set_terminated(self._runs[index], status)
        if self._owned_parent:
            mlflow.end_run(status)

    def target(self, index: int) -> TrackingTarget | None:
        """The run param map ``index``'s chief logs its epochs into (None when not tracking)."""
        return TrackingTarget(self._uri, self._runs[index]) if index in self._runs else None

    def log_fit(self, index: int, settings, model, info) -> None:
        """After training: param map ``index``'s Params (``settings``: a ``FitSettings``), the epochs
        of ``model.history`` its run lacks, and ``model`` (a ``KerasModel`` of a model ``info``
        describes: a ``shipping.ModelInfo``) as an MLflow model."""
        if index not in self._runs:
            return
        from mlflow.entities import Param

        mlflow = _mlflow()
        run_id = self._runs[index]
        client = mlflow.tracking.MlflowClient()
        client.log_batch(run_id, params=[Param(name, value) for name, value in params_of(settings).items()])
        missing = missing_epochs(model.history, _logged_steps(client, run_id, model.history))
        if missing:
            client.log_batch(run_id, metrics=missing)
        if not self._log_models:
            return
        try:
            with _active(mlflow, run_id):
                log_model(model, info)
        except Exception as exc:  # the fit succeeded: a model MLflow cannot take must not undo it
            logger.warning(
                "sparkdl KerasEstimator: MLflow run %s has the Params and metrics but not the model (%s: %s); "
                "the trained model is at %s",
                run_id,
                type(exc).__name__,
                exc,
                model.getModelPath(),
            )
            return
        logger.info("sparkdl KerasEstimator: logged to MLflow run %s", run_id)


@contextlib.contextmanager
def _active(mlflow, run_id: str):
    """``run_id`` as the active run (MLflow's model logging logs into the active run); a run
    resumed here ends when the block does."""
    active = mlflow.active_run()
    if active is not None and active.info.run_id == run_id:
        yield
        return
    with mlflow.start_run(run_id=run_id, nested=active is not None):
        yield


def params_of(settings) -> dict[str, str]:
    """The Params worth logging, as MLflow's strings."""
    logged = {}
    for name, value in vars(settings).items():
        if name in UNLOGGED or value is None:
            continue
        logged[name] = value if isinstance(value, str) else json.dumps(value, default=str)
    return logged


def _logged_steps(client, run_id: str, history: dict) -> dict[str, set[int]]:
    return {name: {m.step for m in client.get_metric_history(run_id, name)} for name in history}


def missing_epochs(history: dict[str, list[float]], logged: dict[str, set[int]]) -> list:
    """The ``Metric``s of ``history`` (finite values, ``step`` = epoch) whose step ``logged`` lacks."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [
        Metric(name, value, now, epoch)
        for name, values in history.items()
        for epoch, value in enumerate(values)
        if math.isfinite(value) and epoch not in logged.get(name, set())
    ]


def signature(info):
    """The MLflow signature of a model ``info`` describes (a ``shipping.ModelInfo``): tensors of
    the dtypes the model declares (float32 where it declares none, or one numpy lacks: bfloat16),
    a batch of any size, named by the model's inputs and outputs where it has several (a DataFrame
    column of that name, of arrays, feeds each input)."""
    import numpy as np
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema, TensorSpec

    def dtype(name: str | None):
        try:
            found = np.dtype(name or np.float32)
        except TypeError:
            return np.dtype(np.float32)
        # bfloat16 is a numpy dtype only once ml_dtypes (TensorFlow's) is imported, and not one MLflow
        # knows: the same float32 either way
        return found if found.kind in "biufc" else np.dtype(np.float32)

    def schema(tensors) -> Any:
        named = len(tensors) > 1
        return Schema(
            [
                TensorSpec(dtype(t.dtype), (-1, *(-1 if d is None else d for d in t.shape or ())),
                           t.name if named else None)
                for t in tensors
            ]
        )  # fmt: skip

    return ModelSignature(schema(info.inputs), schema(info.outputs))


def log_model(model, info) -> None:
    """``model`` (a ``KerasModel``) into the active run as an MLflow model named ``MODEL_NAME``:
    MLflow's ``keras`` flavor for Keras 3, its ``tensorflow`` flavor for tf-keras (where the driver's
    ``tf.keras`` is tf-keras, ``TF_USE_LEGACY_KERAS=1``), loaded from the file the driver copied
    (``KerasModel.keras_model``). MLflow links the run's metrics of the last epoch to the logged
    model (a second entry of that step, with the model's id, in the run's metric history). A
    tf-keras model the driver's TensorFlow does not see as Keras is logged as its ``.keras`` file
    instead, saying why."""
    import mlflow

    from .shipping import KERAS3, flavour_of

    keras_model = model.keras_model
    last = max(0, max(map(len, model.history.values()), default=0) - 1)  # the epoch the model's weights are from
    if flavour_of(keras_model) == KERAS3:
        import mlflow.keras

        requirements = [*mlflow.keras.get_default_pip_requirements(), *_backend_requirements()]
        mlflow.keras.log_model(
            keras_model, name=MODEL_NAME, signature=signature(info), pip_requirements=requirements, step=last
        )
        return
    import tensorflow as tf

    if isinstance(keras_model, tf.keras.Model):
        import mlflow.tensorflow

        requirements = mlflow.tensorflow.get_default_pip_requirements()
        mlflow.tensorflow.log_model(
            keras_model, name=MODEL_NAME, signature=signature(info), pip_requirements=requirements, step=last
        )
        return
    logger.warning(
        "sparkdl KerasEstimator: a tf-keras model is logged as an MLflow model only where the driver's tf.keras is "
        "tf-keras (TF_USE_LEGACY_KERAS=1 before TensorFlow is imported); logged as the file model/model.keras"
    )
    scratch = tempfile.mkdtemp(prefix="sparkdl-mlflow-")
    try:
        local = os.path.join(scratch, "model.keras")
        save_keras_file(keras_model, local)
        mlflow.log_artifact(local, artifact_path=MODEL_NAME)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _backend_requirements() -> list[str]:
    """Keras 3's backend for pyfunc's environment: the installed TensorFlow distribution, pinned
    (given here, MLflow skips inferring requirements in a subprocess that loads the model: ~10 s)."""
    from importlib import metadata

    names = metadata.packages_distributions().get("tensorflow", [])
    return [f"{name}=={metadata.version(name)}" for name in sorted(set(names))[:1]]


# -- tuning (``tuning.py``): a study's parent run, a child run per trial --

#: Tags of a tuning run: the Optuna study, the trial's number and its final state.
STUDY_TAG = "optuna.study_name"
TRIAL_TAG = "optuna.trial_number"
STATE_TAG = "optuna.trial_state"


def active_run_id() -> str | None:
    """The id of the MLflow run active in this thread, None without one (or without MLflow)."""
    mlflow = _mlflow()
    active = mlflow.active_run() if mlflow is not None else None
    return active.info.run_id if active is not None else None


class StudyRun:
    """The MLflow run of an Optuna study (``tuning.run_study``), a context manager: the active run,
    else the run kept in the study's user attribute ``attr`` (a re-run goes on in it), else a new one;
    active in this thread while the study runs, ended (FINISHED or FAILED) if it is not the caller's.
    Nothing happens unless ``enabled`` (ImportError then without MLflow)."""

    def __init__(self, study, study_name: str, attr: str, enabled: bool):
        self._study, self._name, self._attr = study, study_name, attr
        self._enabled = wanted(enabled) if enabled else False
        self._owned = False
        self.run_id: str | None = None  #: the parent run's id (None when not tracking)

    def __enter__(self) -> "StudyRun":
        if not self._enabled:
            return self
        mlflow = _mlflow()
        active = mlflow.active_run()
        if active is None:
            kept = self._study.user_attrs.get(self._attr)
            known = kept is not None and _run_exists(mlflow.tracking.MlflowClient(), kept)
            active = mlflow.start_run(run_id=kept) if known else mlflow.start_run(run_name=f"study {self._name}")
            self._owned = True
        self.run_id = active.info.run_id
        self._study.set_user_attr(self._attr, self.run_id)
        mlflow.set_tag(STUDY_TAG, self._name)
        return self

    def __exit__(self, kind, error, trace) -> None:
        if self._owned:
            _mlflow().end_run("FINISHED" if kind is None else "FAILED")

    def record_trial(self, study, trial) -> None:
        """An Optuna callback: a finished trial's state and value on its child run."""
        child = trial.user_attrs.get(TRIAL_RUN_ATTR) if self._enabled else None
        if child is None:
            return
        client = _mlflow().tracking.MlflowClient()
        client.set_tag(child, STATE_TAG, trial.state.name)
        if trial.value is not None and math.isfinite(trial.value):
            client.log_metric(child, "objective", float(trial.value))

    def log_best(self, study, model_attr: str, artifact_path: str) -> None:
        """The best complete trial on the parent run: its number, params and value, and its model file
        (``model_attr``: the trial's user attribute naming it) when the driver can read it."""
        if not self._enabled:
            return
        complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
        if not complete:
            return
        best = study.best_trial
        client = _mlflow().tracking.MlflowClient()
        client.set_tag(self.run_id, "best_trial", str(best.number))
        for name, value in best.params.items():
            client.set_tag(self.run_id, f"best.{name}", str(value))
        client.log_metric(self.run_id, "best_value", float(best.value))
        child = best.user_attrs.get(TRIAL_RUN_ATTR)
        if child is not None:
            client.set_tag(self.run_id, "best_run_id", child)
        path = best.user_attrs.get(model_attr)
        if path is not None and os.path.isfile(path.removeprefix("file:")):
            client.log_artifact(self.run_id, path.removeprefix("file:"), artifact_path)


#: The trial user attribute holding its child run's id (a retried trial inherits it, and goes on in it).
TRIAL_RUN_ATTR = "sparkdl.mlflow_run_id"


class TrialRun:
    """One trial's MLflow run (``tuning.fit_trial``), nested in the study's run ``parent``: the run the
    trial (or the trial it retries) had, else a new one; active in this thread during the fit (the fit
    logs into it: Params, the chief's epochs, the model), ended FINISHED, KILLED when pruned, FAILED on
    an error. Nothing happens when ``parent`` is None."""

    def __init__(self, parent: str | None, trial, attr: str = TRIAL_RUN_ATTR):
        self._parent, self._trial, self._attr = parent, trial, attr
        self._pruned = False
        self.run_id: str | None = None  #: the trial's run (None when not tracking)

    def __enter__(self) -> "TrialRun":
        if self._parent is None:
            return self
        mlflow = _mlflow()
        client = mlflow.tracking.MlflowClient()
        kept = self._trial.user_attrs.get(self._attr)
        if kept is None or not _run_exists(client, kept):
            experiment = client.get_run(self._parent).info.experiment_id
            tags = {PARENT_RUN_TAG: self._parent, TRIAL_TAG: str(self._trial.number)}
            kept = client.create_run(experiment, tags=tags, run_name=f"trial {self._trial.number}").info.run_id
            self._trial.set_user_attr(self._attr, kept)
        self.run_id = kept
        from mlflow.entities import Param

        params = [Param(f"trial.{name}", str(value)) for name, value in self._trial.params.items()]
        if params and not client.get_run(kept).data.params:
            client.log_batch(kept, params=params)
        mlflow.start_run(run_id=kept, nested=True)
        return self

    def pruned(self, epoch: int) -> None:
        """The trial was pruned after ``epoch`` (0-based)."""
        self._pruned = True
        if self.run_id is not None:
            client = _mlflow().tracking.MlflowClient()
            client.set_tag(self.run_id, STATE_TAG, "PRUNED")
            client.set_tag(self.run_id, "pruned_after_epoch", str(epoch))

    def __exit__(self, kind, error, trace) -> None:
        if self.run_id is None:
            return
        _mlflow().end_run("KILLED" if self._pruned else "FINISHED" if kind is None else "FAILED")


def _run_exists(client, run_id: str) -> bool:
    try:
        client.get_run(run_id)
    except Exception:  # noqa: BLE001 - MLflow's error for an unknown run differs by store
        return False
    return True
