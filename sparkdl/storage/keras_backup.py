"""Keras' BackupAndRestore kept in any store: written locally, then published whole.

TensorFlow 2.21 writes only local paths and ``gs://`` (``s3://``, ``hdfs://``, ``abfss://`` raise
``UnimplementedError``), and a store without rename would show a checkpoint half written. So every
node's Keras ``BackupAndRestore`` (and a stream checkpoint) works in a local directory of the node,
and the chief publishes that directory to the store as a new generation after each save
(:meth:`sparkdl.storage.Storage.publish`: uploaded beside the last, then pointed at). Used by
``ctx.backup_and_restore`` and by KerasEstimator's run store; ``ctx.stream_checkpoint`` publishes the
same way. Keras is handed in (its ``BackupAndRestore`` class): this module imports none. A relaunched
or resized cluster's nodes each download the newest generation before ``fit`` restores from it, so a
node killed mid-upload leaves the previous backup in use, and only the chief's copy ever lands.
"""

from __future__ import annotations

import logging
import os

from .files import Storage

logger = logging.getLogger(__name__)


def restore_local(storage: Storage, remote: str, local_dir: str) -> dict | None:
    """Download the newest generation of ``remote`` into ``local_dir``; its facts, or None if none."""
    facts = storage.fetch(remote, local_dir)
    if facts is not None:
        logger.info("sparkdl: restored the backup of epoch %s from %s", facts.get("epoch"), remote)
    return facts


def backup_and_restore(base, storage: Storage, remote: str, is_chief: bool, local_dir: str, **kwargs):
    """A ``base`` (Keras 3's or tf-keras' ``BackupAndRestore`` class) on ``local_dir``, restored from
    ``remote``'s newest generation now, whose epoch saves the chief publishes to ``remote`` before the
    epoch ends for the callbacks after it (``ctx.progress_callback()`` among them)."""
    restore_local(storage, remote, local_dir)
    delete_at_end = kwargs.get("delete_checkpoint", True)
    every_epoch = kwargs.get("save_freq", "epoch") == "epoch"

    class StoreBackupAndRestore(base):
        """Keras' BackupAndRestore on a local directory, published to the store by the chief every
        time it saves (each epoch, or every ``save_freq`` batches)."""

        published = None  # what the last publish held: (name, size, mtime) of the local files

        def _publish_if_saved(self, epoch: int) -> None:
            if not is_chief:
                return
            held = _files_state(local_dir)
            if held and held != self.published:
                storage.publish(local_dir, remote, epoch=epoch)
                self.published = held

        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            if not every_epoch:  # Keras saved mid-epoch: that backup reaches the store too
                self._publish_if_saved(int(getattr(self, "_current_epoch", 0)))

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)
            self._publish_if_saved(int(epoch) + 1)

        def on_train_end(self, logs=None):
            super().on_train_end(logs)
            if is_chief and delete_at_end:  # Keras deleted its local backup: the fit finished
                storage.remove_generations(remote)

    StoreBackupAndRestore.__name__ = StoreBackupAndRestore.__qualname__ = f"{base.__name__}"
    return StoreBackupAndRestore(local_dir, **kwargs)


def _files_state(directory: str) -> tuple:
    """``(relative name, size, mtime)`` of every file under ``directory`` (what a publish would hold)."""
    state = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue
            state.append((os.path.relpath(path, directory), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(state))
