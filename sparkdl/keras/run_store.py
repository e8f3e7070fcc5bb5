"""The run store: a fit's directory, so a fit with the same ``run_id`` resumes, in any application.

``checkpoint_dir/run_id/`` (a path every node and the driver reach: ``s3a://``, ``gs://``,
``abfss://``, ``hdfs://`` or a shared mounted path) holds::

    backup/       Keras' BackupAndRestore checkpoint of model and optimizer, saved every epoch
                  and kept at the end (the next fit with more epochs continues from it); in a
                  store, generations the chief publishes whole (``sparkdl/storage/keras_backup.py``)
    state.json    written by the chief after each epoch's backup: the run's settings, the
                  epochs completed and the history so far; ``finished`` once model.keras is saved
    model.keras   the trained model (Keras' format), saved by the chief at the end
    best.keras    with ``monitor``: the model of the best epoch so far (Keras' ModelCheckpoint)

A fit without a run store uses the same layout in a directory of its own (under ``model_dir``),
keeping ``backup/`` and ``state.json`` only when ``max_restarts`` may relaunch it.

Every file goes through :class:`sparkdl.storage.Storage` (nodes: ``ctx.storage``; the driver: one made
from the application's store settings), whole or absent on every store; TensorFlow and Keras only
ever write local files, which the chief uploads. The driver opens only paths it chose itself. Fitting again
with a ``run_id`` whose state holds other settings (columns, model shape, batch size, optimizer,
seed...) is refused, naming them, instead of mixing two trainings in one checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..storage import Storage

STATE_VERSION = 1


@dataclass(frozen=True)
class RunPaths:
    """Where one training run keeps its files (qualified: a store URI, e.g. ``s3a://b/runs/r1``, or an
    absolute local path)."""

    run_dir: str

    @property
    def export_path(self) -> str:
        """The trained model."""
        return f"{self.run_dir}/model.keras"

    @property
    def backup_dir(self) -> str:
        """Keras' BackupAndRestore checkpoint."""
        return f"{self.run_dir}/backup"

    @property
    def state_path(self) -> str:
        """The run's state (``state.json``)."""
        return f"{self.run_dir}/state.json"

    @property
    def best_path(self) -> str:
        """The best epoch's model (with ``monitor``)."""
        return f"{self.run_dir}/best.keras"


@dataclass(frozen=True)
class StoredRun:
    """What a run's ``state.json`` says."""

    epochs_completed: int
    history: dict[str, list[float]]
    finished: bool


def state_document(config: dict, epochs_completed: int, history: dict, finished: bool) -> str:
    """The JSON text of ``state.json``."""
    return json.dumps(
        {
            "version": STATE_VERSION,
            "config": config,
            "epochs_completed": epochs_completed,
            "history": history,
            "finished": finished,
        },
        indent=1,
    )


def read_stored_run(storage: Storage, paths: RunPaths, run_id: str, config: dict) -> StoredRun | None:
    """The state of run ``run_id`` (driver side), None if it never completed an epoch.

    ValueError when it was trained with other settings than ``config``, naming them.
    """
    text = storage.read_text(paths.state_path)
    if text is None:
        return None
    try:
        state = json.loads(text)
        stored_config, done = state["config"], int(state["epochs_completed"])
        history, finished = dict(state["history"]), bool(state["finished"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"run_id {run_id!r}: {paths.state_path} is not a state sparkdl wrote ({exc}); use another run_id"
        ) from exc
    differing = sorted(k for k in set(config) | set(stored_config) if config.get(k) != stored_config.get(k))
    if differing:
        changes = "; ".join(f"{k}: stored {stored_config.get(k)!r}, now {config.get(k)!r}" for k in differing)
        raise ValueError(
            f"run_id {run_id!r} under checkpoint_dir was trained with other settings ({changes}): it cannot resume "
            "with these; give this fit a new run_id"
        )
    return StoredRun(done, history, finished)


# -- node side (and local mode) --


def write_state(storage: Storage, path: str, document: str) -> None:
    """Write ``state.json``, whole or not at all (a local file renamed into place, an object in one PUT)."""
    storage.write_text(path, document)


def read_history(storage: Storage, path: str) -> dict[str, list[float]]:
    """The history in ``state.json`` (node side), empty if there is none yet."""
    text = storage.read_text(path)
    return dict(json.loads(text).get("history", {})) if text is not None else {}


def truncated(history: dict[str, Any], epochs: int) -> dict[str, list]:
    """The first ``epochs`` entries of every metric of ``history``."""
    return {name: list(values)[:epochs] for name, values in history.items()}
