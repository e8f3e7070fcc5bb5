"""Node functions of the storage cluster tests: a Keras 3 MWMS fit whose backup and model live in a
bucket, with a worker SIGKILLed mid-epoch on the first attempt."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from node_functions import write_whole


def _record(args, name: str, **fields) -> None:
    write_whole(Path(args["out"]) / f"{name}.json", json.dumps(fields))


def digits_fit_to_store(args, ctx):
    """Fit the digits on the feed with ``ctx.backup_and_restore(args["backup"])`` and save with
    ``ctx.export_path(args["model"])``, then a TensorBoard summary to ``ctx.log_dir``; on attempt 0,
    worker:0 SIGKILLs itself in the middle of epoch
    ``args["kill_epoch"]`` (the chief has published the epoch before it: MWMS steps are collective)."""
    import keras
    import tensorflow as tf

    with tf.distribute.MultiWorkerMirroredStrategy().scope():
        model = keras.Sequential(
            [keras.Input([64]), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10, activation="softmax")]
        )
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    feed = ctx.get_data_feed()
    node = f"attempt{ctx.attempt}-node{ctx.executor_id}"
    _record(args, f"plan-{node}", epochs=feed.num_epochs, first_epoch=feed.first_epoch)
    train = feed.as_dataset(batch_size=32, features="pixels", label="label")
    kill = ctx.attempt == 0 and ctx.job_name == "worker"

    class Observe(keras.callbacks.Callback):
        epoch = None

        def on_epoch_begin(self, epoch, logs=None):
            if Observe.epoch is None:
                _record(args, f"start-{node}", epoch=epoch)
            Observe.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if kill and Observe.epoch == args["kill_epoch"] and batch == 2:
                os.kill(os.getpid(), signal.SIGKILL)

        def on_epoch_end(self, epoch, logs=None):
            _record(args, f"epoch-{node}-{epoch}", loss=float(logs["loss"]))

    callbacks = [ctx.backup_and_restore(args["backup"]), ctx.progress_callback(), Observe()]
    model.fit(train, epochs=feed.num_epochs, verbose=0, callbacks=callbacks)
    with ctx.export_path(args["model"]) as path:
        model.save(path)
    if ctx.is_chief and ctx.log_dir:  # a local directory, copied to the store log_dir by the supervisor
        with tf.summary.create_file_writer(ctx.log_dir).as_default():
            tf.summary.scalar("final_loss", float(model.history.history["loss"][-1]), step=0)


def tf_keras_fit_with_store_backup(args, ctx):
    """An MWMS ``model.fit`` of ``tf.keras`` (tf-keras under ``TF_USE_LEGACY_KERAS=1``) backed up to
    ``args["backup"]`` and kept at the end; returns which Keras ran and the epoch the fit started at."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((x, (x.sum(axis=1) > 0).astype("int64"))).batch(32)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(2)])
        model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    first = []

    class Observe(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            first.append(epoch)

    backup = ctx.backup_and_restore(args["backup"], delete_checkpoint=False)
    model.fit(dataset, epochs=args["epochs"], verbose=0, callbacks=[backup, Observe()])
    return {"keras": tf.keras.__name__.split(".")[0], "first_epoch": first[0] if first else None}


def keras3_fit_to_store(args, ctx):
    """An MWMS ``model.fit`` of Keras 3 on a tiny separable problem (no feed: InputMode.TENSORFLOW),
    backed up to ``args["backup"]`` and kept there (``delete_checkpoint=False``), the model saved with
    ``ctx.export_path(args["model"])``; returns the Keras that ran and the fit's last loss."""
    import keras
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    options = tf.data.Options()
    options.autotune.enabled = False  # avoids a slow iterator teardown at the end of fit()
    dataset = tf.data.Dataset.from_tensor_slices((x, (x.sum(axis=1) > 0).astype("int64"))).batch(32)
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2, activation="softmax")])
        model.compile(keras.optimizers.SGD(0.5), "sparse_categorical_crossentropy")
    backup = ctx.backup_and_restore(args["backup"], delete_checkpoint=False)
    history = model.fit(dataset.with_options(options), epochs=args["epochs"], verbose=0, callbacks=[backup])
    with ctx.export_path(args["model"]) as path:
        model.save(path)
    return {"keras": keras.__version__.split(".")[0], "loss": float(history.history["loss"][-1])}
