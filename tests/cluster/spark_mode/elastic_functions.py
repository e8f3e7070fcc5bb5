"""The ``map_fun`` of the elastic-training tests (``test_elastic.py``): an MWMS Keras fit from the
feed that records, per attempt, node and epoch, the row ids it trained on, and can hold one node
at a chosen step of the first attempt until the test has changed Spark's executors."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from node_functions import wait_for_file, write_whole


def executor_id() -> str:
    """This node's Spark executor id, as standalone (local-cluster) writes it in the executor's log URL."""
    match = re.search(r"executorId=([^&]+)", os.environ.get("SPARK_LOG_URL_STDERR", ""))
    return match.group(1) if match else ""


def elastic_fit(args, ctx):
    """``model.fit`` under MultiWorkerMirroredStrategy from ``feed.as_dataset`` with
    ``ctx.backup_and_restore`` and ``ctx.progress_callback``; 16 rows per worker per step, whatever
    the node count. Each of ``holds`` (attempt, node, epoch, step, name) stops that node before that
    step, says so (``<name>.json``: its Spark executor and host) and waits for ``<name>-release``
    (bounded), so the test can change Spark's executors at a known point."""
    import numpy as np
    import tensorflow as tf

    out = Path(args["out"])
    tag = f"attempt{ctx.attempt}-node{ctx.executor_id}"
    write_whole(out / f"executor-{tag}.json", json.dumps({"executor": executor_id(), "host": ctx.host}))
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    seen: dict[int, list[int]] = {}
    epoch_now = [0]

    def note_ids(ids):
        seen.setdefault(epoch_now[0], []).extend(int(i) for i in ids.numpy())
        return np.int64(0)

    def drop_id(features, label):
        noted = tf.py_function(note_ids, [features["id"]], Tout=tf.int64)
        with tf.control_dependencies([noted]):
            return tf.identity(features["x"]), label

    dataset = feed.as_dataset(16 * ctx.num_workers, features={"x": "x", "id": "id"}, label="y").map(drop_id)

    class Observe(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            epoch_now[0] = epoch

        def on_train_batch_begin(self, batch, logs=None):
            for hold in args.get("holds", ()):
                here = (ctx.attempt, ctx.executor_id, epoch_now[0], batch)
                if here == (hold["attempt"], hold["node"], hold["epoch"], hold["step"]):
                    record = {"executor": executor_id(), "node": ctx.executor_id, "host": ctx.host}
                    write_whole(out / f"{hold['name']}.json", json.dumps(record))
                    wait_for_file(str(out / f"{hold['name']}-release"), 180)

        def on_epoch_end(self, epoch, logs=None):
            ids = {"nodes": ctx.num_workers, "ids": seen.pop(epoch, [])}
            write_whole(out / f"ids-{tag}-epoch{epoch}.json", json.dumps(ids))

    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(2)]
        )
        model.compile(
            optimizer=tf.keras.optimizers.SGD(0.05),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    # BackupAndRestore before the progress report: the driver counts an epoch once it is backed up.
    callbacks = [ctx.backup_and_restore(args["backup_dir"]), Observe(), ctx.progress_callback()]
    model.fit(dataset, epochs=feed.num_epochs, verbose=0, callbacks=callbacks)
    weights = np.concatenate([np.ravel(w) for w in model.get_weights()]).astype("float32")
    write_whole(out / f"weights-{tag}.json", json.dumps({"sha": hashlib.sha256(weights.tobytes()).hexdigest()}))
