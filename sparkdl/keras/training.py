"""One training run's Keras side, the same on the nodes and in local mode: callbacks, state, export.

``run_callbacks`` gives ``model.fit`` its callbacks in the order that keeps resuming exact: Keras'
``BackupAndRestore`` (when the run keeps a backup) saves the epoch first, then ``RunHistory``
records the epoch's logs and, on the chief, writes ``state.json`` (so the state never claims an
epoch the backup lacks), then, when the fit is tracked, ``EpochMetrics`` logs the epoch into the
driver's MLflow run (on the chief only: ``tracking.EpochLogger``), then ``ModelCheckpoint`` keeps
the best epoch (``monitor``), then the user's callbacks. ``RunHistory`` holds the run's whole
history: the epochs earlier fits of a resumed run completed (from ``state.json``) and those this
fit trains.
"""

from __future__ import annotations

import math
from typing import Any

from . import run_store, tracking
from .spec import RunSpec


def run_callbacks(keras: Any, run: RunSpec, chief: bool) -> tuple[Any, list]:
    """``(history keeper, callbacks for fit)`` of ``run``; the chief's keeper writes ``state.json``."""
    callbacks = []
    if run.backup:
        callbacks.append(keras.callbacks.BackupAndRestore(run.paths.backup_dir, delete_checkpoint=False))
    keeper = _history_keeper(keras, run, chief)
    callbacks.append(keeper)
    if run.tracking is not None:
        callbacks.append(_epoch_metrics(keras, tracking.EpochLogger(run.tracking, chief)))
    if run.monitor:
        best = run.paths.best_path
        callbacks.append(keras.callbacks.ModelCheckpoint(best, monitor=run.monitor, mode=run.mode, save_best_only=True))
    if run.callbacks:
        from pyspark import cloudpickle

        callbacks.extend(cloudpickle.loads(run.callbacks))
    return keeper, callbacks


def _history_keeper(keras: Any, run: RunSpec, chief: bool):
    class RunHistory(keras.callbacks.Callback):
        """The run's history across fits; on the chief, ``state.json`` after every epoch."""

        def __init__(self):
            super().__init__()
            self.history: dict[str, list[float]] = {}
            self.completed = 0  # epochs of the run completed (by this fit or, resumed, earlier ones)
            self._first = True

        def on_train_begin(self, logs=None):
            self.history = run_store.read_history(run.paths.state_path) if run.backup else {}
            self.completed = max((len(v) for v in self.history.values()), default=0)
            self._first = True

        def on_epoch_begin(self, epoch, logs=None):
            if self._first:  # epochs before this one were restored from the backup, not trained now
                self.history = run_store.truncated(self.history, epoch)
                self._first = False

        def on_epoch_end(self, epoch, logs=None):
            for name, value in (logs or {}).items():
                try:
                    number = float(value)
                except (TypeError, ValueError):
                    continue
                values = self.history.setdefault(name, [])
                values.extend([math.nan] * (epoch + 1 - len(values)))
                values[epoch] = number
            self.completed = epoch + 1
            if run.backup and chief:
                run_store.write_state(
                    run.paths.state_path, run_store.state_document(run.config, self.completed, self.history, False)
                )

    return RunHistory()


def _epoch_metrics(keras: Any, epoch_logger: tracking.EpochLogger):
    class EpochMetrics(keras.callbacks.Callback):
        """Each epoch's metrics to MLflow as the epoch ends (``tracking.EpochLogger``: the chief only)."""

        def __init__(self):
            super().__init__()
            self.epoch_logger = epoch_logger

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_logger.log_epoch(epoch, logs)

    return EpochMetrics()


def finish(run: RunSpec, keeper: Any, chief: bool) -> dict:
    """After the model was saved: the chief marks the run finished; the run's outcome as JSON."""
    if run.backup and chief:
        run_store.write_state(
            run.paths.state_path, run_store.state_document(run.config, keeper.completed, keeper.history, True)
        )
    return {"index": run.index, "epochs_completed": keeper.completed, "history": keeper.history}


def set_seed(flavour: str, seed: int) -> None:
    """Seed Python's, numpy's and TensorFlow's random numbers (initial weights, dropout) for this run."""
    from .shipping import keras_module

    keras_module(flavour).utils.set_random_seed(seed)


def keras_of(model: Any) -> Any:
    """The Keras package (tf-keras or Keras 3) of ``model``."""
    from .shipping import flavour_of, keras_module

    return keras_module(flavour_of(model))
