"""One training run's Keras side, the same on the nodes and in local mode: callbacks, state, export.

``run_callbacks`` gives ``model.fit`` its callbacks in the order that keeps resuming exact: Keras'
``BackupAndRestore`` (when the run keeps a backup) saves the epoch first, then ``RunHistory``
records the epoch's logs and, on the chief, writes ``state.json`` (so the state never claims an
epoch the backup lacks), then, when the fit is tracked, ``EpochMetrics`` logs the epoch into the
driver's MLflow run (on the chief only: ``tracking.EpochLogger``), then ``ModelCheckpoint`` keeps
the best epoch (``monitor``), then the user's callbacks. ``RunHistory`` holds the run's whole
history: the epochs earlier fits of a resumed run completed (from ``state.json``) and those this
fit trains.

Files go through :class:`sparkdl.storage.Storage` (``ctx.storage`` on a node). For a run directory in a
store (``s3a://``, ``gs://``, ``abfss://``, ``hdfs://``), which TensorFlow cannot write, every node keeps
its backup and ``best.keras`` in a private local directory (``scratch``), and the chief publishes the
backup every epoch (``sparkdl/storage/keras_backup.py``) and uploads ``best.keras`` after each save, so only
the chief's copy lands, whole.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from ..common.timeouts import EPOCH_GATE_WAIT_S
from ..storage import Storage, is_remote, keras_backup
from . import run_store, tracking
from .spec import RunSpec


def run_callbacks(
    keras: Any, run: RunSpec, chief: bool, storage: Storage, scratch: Callable[[str], str]
) -> tuple[Any, list]:
    """``(history keeper, callbacks for fit)`` of ``run``; the chief's keeper writes ``state.json``.
    ``scratch(kind)`` makes a private local directory of this process (for a run in a store)."""
    callbacks = []
    if run.backup:
        callbacks.append(_backup(keras, run, chief, storage, scratch))
    keeper = _history_keeper(keras, run, chief, storage)
    callbacks.append(keeper)
    if run.tracking is not None:
        callbacks.append(_epoch_metrics(keras, tracking.EpochLogger(run.tracking, chief)))
    if run.monitor:
        callbacks.extend(_best_model(keras, run, chief, storage, scratch))
    if run.callbacks:
        from pyspark import cloudpickle

        callbacks.extend(cloudpickle.loads(run.callbacks))
    return keeper, callbacks


def _backup(keras: Any, run: RunSpec, chief: bool, storage: Storage, scratch: Callable[[str], str]):
    """Keras' BackupAndRestore on the run's backup directory, kept at the end. In a store: on a local
    directory, restored first from the store's newest generation, each epoch published by the chief
    before the epoch ends for the callbacks after it (``sparkdl/storage/keras_backup.py``, as
    ``ctx.backup_and_restore``; here too for local mode, which has no ``ctx``)."""
    remote = run.paths.backup_dir
    if not is_remote(remote):
        return keras.callbacks.BackupAndRestore(remote, delete_checkpoint=False)
    local = os.path.join(scratch("backup"), "backup")
    return keras_backup.backup_and_restore(
        keras.callbacks.BackupAndRestore, storage, remote, chief, local, delete_checkpoint=False
    )


def _best_model(keras: Any, run: RunSpec, chief: bool, storage: Storage, scratch: Callable[[str], str]) -> list:
    """Keras' ModelCheckpoint keeping the best epoch's model at ``best.keras``; in a store, saved to a
    local path and uploaded by the chief after each save (one object: whole or the previous one)."""
    best = run.paths.best_path
    if not is_remote(best):
        return [keras.callbacks.ModelCheckpoint(best, monitor=run.monitor, mode=run.mode, save_best_only=True)]
    local = os.path.join(scratch("best"), os.path.basename(best))
    checkpoint = keras.callbacks.ModelCheckpoint(local, monitor=run.monitor, mode=run.mode, save_best_only=True)

    class UploadBest(keras.callbacks.Callback):
        """After ModelCheckpoint: the chief uploads ``best.keras`` when this epoch saved a new one."""

        def __init__(self):
            super().__init__()
            self.uploaded = None

        def on_epoch_end(self, epoch, logs=None):
            if not chief or not os.path.exists(local):
                return
            stat = os.stat(local)
            saved = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
            if saved != self.uploaded:
                storage.upload(local, best)
                self.uploaded = saved

    return [checkpoint, UploadBest()]


def _history_keeper(keras: Any, run: RunSpec, chief: bool, storage: Storage):
    class RunHistory(keras.callbacks.Callback):
        """The run's history across fits; on the chief, ``state.json`` after every epoch."""

        def __init__(self):
            super().__init__()
            self.history: dict[str, list[float]] = {}
            self.completed = 0  # epochs of the run completed (by this fit or, resumed, earlier ones)
            self._first = True

        def on_train_begin(self, logs=None):
            self.history = run_store.read_history(storage, run.paths.state_path) if run.backup else {}
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
                document = run_store.state_document(run.config, self.completed, self.history, False)
                run_store.write_state(storage, run.paths.state_path, document)

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


def epoch_gate(keras: Any, server: Any):
    """The chief's callback after its progress report: at each epoch end, wait (bounded) for the
    driver's word (``TFCluster.watch_epochs``); told to stop, the fit trains no further step."""

    class EpochGate(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if not server.await_epoch_gate(epoch, EPOCH_GATE_WAIT_S):
                self.model.stop_training = True  # the driver stops the node; if it has not yet, stop here

    return EpochGate()


def finish(run: RunSpec, keeper: Any, chief: bool, storage: Storage | None = None) -> dict:
    """After the model was saved: the chief marks the run finished; the run's outcome as JSON."""
    if run.backup and chief:
        document = run_store.state_document(run.config, keeper.completed, keeper.history, True)
        run_store.write_state(storage or Storage(), run.paths.state_path, document)
    return {"index": run.index, "epochs_completed": keeper.completed, "history": keeper.history}


def set_seed(flavour: str, seed: int) -> None:
    """Seed Python's, numpy's and TensorFlow's random numbers (initial weights, dropout) for this run."""
    from .shipping import keras_module

    keras_module(flavour).utils.set_random_seed(seed)


def keras_of(model: Any) -> Any:
    """The Keras package (tf-keras or Keras 3) of ``model``."""
    from .shipping import flavour_of, keras_module

    return keras_module(flavour_of(model))
