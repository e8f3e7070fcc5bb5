"""Callbacks for the elastic KerasEstimator test (``test_keras_elastic.py``), run on the TF nodes:
one node holds at a known step the first time it gets there, so the test can take its Spark
executor away. Module-level classes of the model's Keras (tf-keras here), so they pickle."""

from __future__ import annotations

import json
import os
from pathlib import Path

import tf_keras
from elastic_functions import executor_id

from node_functions import wait_for_file, write_whole


class HoldOnce(tf_keras.callbacks.Callback):
    """Stops the node of TF_CONFIG task ``task`` before step ``step`` of epoch ``epoch`` (0-based) the
    first time any node gets there (``<out>/held.json``: its Spark executor and its model's Keras),
    and waits (bounded) for ``<out>/held-release``."""

    def __init__(self, out: str, task: tuple[str, int] = ("worker", 1), epoch: int = 1, step: int = 1):
        super().__init__()
        self.out, self.task, self.epoch, self.step = out, tuple(task), epoch, step
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
        held = Path(self.out) / "held.json"
        here = ((task.get("type"), task.get("index")), self._epoch, batch)
        if here != (self.task, self.epoch, self.step) or held.exists():
            return
        record = {"executor": executor_id(), "keras": type(self.model).__module__}
        write_whole(held, json.dumps(record))
        wait_for_file(str(Path(self.out) / "held-release"), 180)
