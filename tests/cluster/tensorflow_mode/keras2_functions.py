"""Keras 2 code as TensorFlowOnSpark's examples wrote it, for ``test_keras2_code_cluster``: a ``map_fun``
that saves the way ``examples/mnist/keras/mnist_spark.py`` did, and the Keras 2 calls Keras 3
refuses (run as a script: ``python keras2_functions.py DIR`` prints each call's traceback, or null
where it ran, as JSON on its last line of output)."""

from __future__ import annotations

import json
import os
import sys
import traceback

from node_functions import _write


def tfos_style_keras(args, ctx):
    """Train on two workers and save as TensorFlowOnSpark's Keras example did: ``tf.keras``,
    ``ModelCheckpoint(save_weights_only=True)`` to a checkpoint prefix, ``model.save`` to a path
    without an extension (a SavedModel in Keras 2; a scratch path on the nodes but the chief)."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf.io.gfile.makedirs(args["model_dir"])
    filepath = args["model_dir"] + "/weights-{epoch:04d}"
    callbacks = [tf.keras.callbacks.ModelCheckpoint(filepath=filepath, save_weights_only=True)]
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2, activation="softmax")])
        model.compile(loss=tf.keras.losses.sparse_categorical_crossentropy, optimizer=tf.keras.optimizers.SGD(0.1))
    x = np.random.RandomState(0).rand(64, 4).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0.5).astype("float32"))).repeat().batch(16)
    model.fit(ds, epochs=2, steps_per_epoch=2, callbacks=callbacks, verbose=0)
    chief = ctx.job_name == "chief"
    model.save(args["export_dir"] if chief else os.path.join(args["out"], f"scratch-{ctx.task_index}"))
    _write(args, ctx, {"job_name": ctx.job_name, "model_module": type(model).__module__})


def keras2_calls(directory: str) -> dict:
    """Each Keras 2 call the node's hint answers, by name; the same names as the test's."""
    import numpy as np
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model(np.zeros((1, 3), "float32"))
    d = directory
    return {  # in order: the loads read what Keras 2 (the first run, TF_USE_LEGACY_KERAS=1) saved
        "ModelCheckpoint weights to a prefix": lambda: tf.keras.callbacks.ModelCheckpoint(
            d + "/weights-{epoch:04d}", save_weights_only=True
        ),
        "ModelCheckpoint to a directory": lambda: tf.keras.callbacks.ModelCheckpoint(d + "/checkpoint"),
        "model.save without an extension": lambda: model.save(d + "/export"),
        "model.save(save_format='tf')": lambda: model.save(d + "/export_tf", save_format="tf"),
        "model.save(signatures=...)": lambda: model.save(d + "/export_signatures", signatures=None),
        "save_weights to a prefix": lambda: model.save_weights(d + "/weights"),
        "save_weights(save_format='h5')": lambda: model.save_weights(d + "/weights.h5", save_format="h5"),
        "load_weights from a checkpoint": lambda: model.load_weights(d + "/weights"),
        "load_model of a SavedModel": lambda: tf.keras.models.load_model(d + "/export"),
        "tf.keras.estimator": lambda: tf.keras.estimator,
        "tf.keras.layers.experimental": lambda: tf.keras.layers.experimental,
        "tf.keras.losses.mean_squared_error": lambda: tf.keras.losses.mean_squared_error,
        "tf.keras.backend.learning_phase": lambda: tf.keras.backend.learning_phase,
    }


def run_keras2_calls(directory: str) -> dict:
    """Run every call: its traceback where it raised, else None."""
    results = {}
    for name, call in keras2_calls(directory).items():
        try:
            call()
            results[name] = None
        except Exception:
            results[name] = traceback.format_exc()
    return results


if __name__ == "__main__":
    print(json.dumps(run_keras2_calls(sys.argv[1])))
