"""A streaming model's state and the last micro-batch it trained on, saved together.

Exactly-once streaming training rests on one fact: the model checkpoint *names* the last
micro-batch it holds. ``StreamCheckpoint`` keeps that number in a variable of the same
``tf.train.Checkpoint`` as the model (and optimizer, whose ``iterations`` is the step counter),
so both are written by one save and a crash leaves either the old pair or the new one.
A restarted application restores the pair; the driver then skips the micro-batches the model
already holds and feeds the rest (``cluster.train_stream``, see docs/reliability.md).
"""

from __future__ import annotations

import os
from typing import Any, Callable

#: The checkpoint's name for the micro-batch counter (kept stable: old checkpoints must restore).
BATCH_KEY = "sparkdl_stream_batch"


class StreamCheckpoint:
    """Saves and restores ``trackables`` (e.g. ``model=model``) with the id of the last micro-batch trained.

    Built by ``ctx.stream_checkpoint(directory, model=model)`` on every data node. On creation it
    restores the newest checkpoint in ``directory`` (the chief's), if any. ``save(batch_id)`` is a
    collective call under MultiWorkerMirroredStrategy, as every checkpoint write is: each node
    calls it; only the chief writes to ``directory``, the others to their ``scratch_dir``.
    ``feed.micro_batches(checkpoint)`` calls ``save`` after each micro-batch.
    """

    def __init__(
        self,
        directory: str,
        is_chief: bool,
        scratch_dir: str,
        max_to_keep: int = 3,
        published: Callable[[int], object] | None = None,
        **trackables: Any,
    ):
        """``published`` (called after each save with its batch id) sends the checkpoint on:
        ``ctx.stream_checkpoint`` passes it for a store path, where ``directory`` is a local copy the
        chief publishes (:func:`newest_only`, ``Storage.publish``)."""
        import tensorflow as tf

        if not trackables:
            raise ValueError("stream_checkpoint needs what to save, e.g. ctx.stream_checkpoint(path, model=model)")
        if BATCH_KEY in trackables:
            raise ValueError(f"{BATCH_KEY!r} is the name sparkdl saves the micro-batch id under; pick another")
        self.directory = directory
        self._published = published
        self._manager = None
        self._batch = tf.Variable(-1, dtype=tf.int64, trainable=False, name=BATCH_KEY)
        self._checkpoint = tf.train.Checkpoint(**{BATCH_KEY: self._batch}, **trackables)
        self.restored_from = self.restore_last()
        target = directory if is_chief else os.path.join(scratch_dir, "stream-checkpoint")
        self._manager = tf.train.CheckpointManager(self._checkpoint, target, max_to_keep=max_to_keep)
        # Whether a checkpoint holds the state the next micro-batch starts from (the same on every node:
        # they restore the same one and save together), and where that state is kept while none does.
        self._in_checkpoint = self.restored_from is not None
        self._before_first = os.path.join(scratch_dir, "before-first-batch", "state")
        self._kept: str | None = None

    def restore_last(self) -> str | None:
        """Restore the newest checkpoint in ``directory`` (the chief's), if any; returns its path."""
        import tensorflow as tf

        # Once this node has saved, its own manager holds the state every node saved together (MWMS
        # saves are collective): a worker rolls back to it, never to a copy of the chief's that an
        # upload may not have finished. Before that, the chief's directory (or a store's copy of it).
        own = self._manager.latest_checkpoint if self._manager is not None else None
        latest = own or tf.train.latest_checkpoint(self.directory)
        if latest:
            # Optimizer slots that do not exist yet are restored when created (deferred restoration).
            self._checkpoint.restore(latest).expect_partial()
        return latest

    @property
    def last_batch_id(self) -> int | None:
        """The last micro-batch the restored (or last saved) state holds; None before the first."""
        value = int(self._batch.numpy())
        return None if value < 0 else value

    def save(self, batch_id: int) -> str:
        """Save the state as holding every micro-batch up to ``batch_id``; returns the checkpoint path."""
        self._batch.assign(int(batch_id))
        path = self._manager.save(checkpoint_number=int(batch_id))
        if self._published is not None:
            self._published(int(batch_id))
        self._in_checkpoint = True
        return path

    def before_batch(self) -> None:
        """Keep the state a micro-batch starts from, so that :meth:`roll_back` can return to it.

        Once a checkpoint holds it (one was restored or saved) there is nothing to do. Before the
        first one, the state is written to this node's scratch directory (every node calls this at
        the same point, as it calls ``save``). ``feed.micro_batches`` calls it before each batch."""
        if not self._in_checkpoint:
            self._kept = self._checkpoint.write(self._before_first)

    def roll_back(self) -> None:
        """Return to the state before the current micro-batch (one cut short, which no checkpoint may
        hold): the newest checkpoint, or before the first one the state :meth:`before_batch` kept.
        Variables the cut-short batch created (an optimizer's slots, on its first step) keep their values."""
        if self._in_checkpoint:
            self.restore_last()
        elif self._kept is not None:
            self._checkpoint.read(self._kept).expect_partial()


def newest_only(directory: str, staging: str) -> str:
    """``staging`` filled with hard links to the newest checkpoint of ``directory`` and its
    ``checkpoint`` state file (what a restore reads), for publishing one checkpoint, not every kept one."""
    import shutil

    import tensorflow as tf

    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    latest = tf.train.latest_checkpoint(directory)
    prefix = os.path.basename(latest) + "." if latest else None
    for name in os.listdir(directory):
        if name == "checkpoint" or (prefix and name.startswith(prefix)):
            os.link(os.path.join(directory, name), os.path.join(staging, name))
    return staging
