"""Models, data and callbacks for the KerasEstimator tests (imported on the TF nodes too: conftest puts
every test folder on their PYTHONPATH). Models come in both Keras: Keras 3 (``import keras``, what users write on
TensorFlow 2.16+) and tf-keras (``TF_USE_LEGACY_KERAS=1``); callback classes are module-level classes of the model's
Keras, so they pickle."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import keras
import numpy as np
import tf_keras

PIXELS = [f"p{i}" for i in range(64)]


def digits_frame(spark, partitions: int = 2):
    """scikit-learn's digits as ``id``, 64 pixel columns ``p0..p63`` (doubles) and ``label``, the
    1797 rows with a fixed train/test split column ``test`` (one row in five)."""
    import pandas as pd
    from sklearn.datasets import load_digits

    digits = load_digits()
    frame = pd.DataFrame(digits.data, columns=PIXELS)
    frame.insert(0, "id", np.arange(len(frame), dtype="int64"))
    frame["label"] = digits.target.astype("int64")
    frame["test"] = np.random.default_rng(0).random(len(frame)) < 0.2
    return spark.createDataFrame(frame).repartition(partitions)


def mlp(learning_rate: float = 0.01, hidden: int = 32, inputs: int = 64, package=tf_keras):
    """A compiled MLP for the 10 digit classes (seeded), of ``package``'s Keras (tf-keras by default)."""
    package.utils.set_random_seed(1)
    model = package.Sequential(
        [
            package.Input((inputs,), name="features"),
            package.layers.Dense(hidden, activation="relu"),
            package.layers.Dense(10, activation="softmax", name="digit"),
        ]
    )
    model.compile(
        optimizer=package.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    return model


def keras3_mlp(learning_rate: float = 0.01, hidden: int = 32, inputs: int = 64):
    """The same MLP in Keras 3 (``import keras``)."""
    return mlp(learning_rate, hidden, inputs, package=keras)


def keras3_binary(inputs: int = 64):
    """A Keras 3 binary classifier: one sigmoid unit (is the digit odd?)."""
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((inputs,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    return model


def two_headed():
    """Two inputs (``pixels`` 64 values, ``meta`` 2) and two outputs (``digit`` 10 classes, ``odd`` 1), uncompiled."""
    pixels = tf_keras.Input((64,), name="pixels")
    meta = tf_keras.Input((2,), name="meta")
    hidden = tf_keras.layers.Dense(32, activation="relu")(tf_keras.layers.Concatenate()([pixels, meta]))
    digit = tf_keras.layers.Dense(10, activation="softmax", name="digit")(hidden)
    odd = tf_keras.layers.Dense(1, activation="sigmoid", name="odd")(hidden)
    return tf_keras.Model({"pixels": pixels, "meta": meta}, {"digit": digit, "odd": odd})


def accuracy(scored, label: str = "label", predicted: str = "predicted") -> float:
    """The share of rows whose ``predicted`` class is the ``label``."""
    rows = scored.select(label, predicted).collect()
    return sum(r[label] == r[predicted] for r in rows) / len(rows)


class StopAtEpoch(tf_keras.callbacks.Callback):
    """Stops training at the end of epoch ``epoch`` (0-based), as EarlyStopping would."""

    def __init__(self, epoch: int):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch >= self.epoch:
            self.model.stop_training = True


class _EpochLogging:
    """Appends each epoch this node trains to ``out/epochs-<pid>.jsonl``; holds (prints HOLDING, then
    sleeps until killed) after epoch ``hold_after`` if given, once its backup and state are written."""

    def __init__(self, out: str, hold_after: int | None = None):
        super().__init__()
        self.out = out
        self.hold_after = hold_after

    def on_epoch_end(self, epoch, logs=None):
        with open(Path(self.out) / f"epochs-{os.getpid()}.jsonl", "a") as log:
            log.write(json.dumps({"epoch": epoch, "loss": float(logs["loss"]), "pid": os.getpid()}) + "\n")
        if self.hold_after is not None and epoch >= self.hold_after:
            print("HOLDING", flush=True)
            sys.stdout.flush()
            time.sleep(600)


class EpochLog(_EpochLogging, tf_keras.callbacks.Callback):
    """``_EpochLogging`` for a tf-keras model."""


class Keras3EpochLog(_EpochLogging, keras.callbacks.Callback):
    """``_EpochLogging`` for a Keras 3 model."""


def read_epoch_logs(out) -> list[dict]:
    """Every epoch any node logged, in order of time."""
    records = []
    # By when each file was last written, not by name: a later process may have a lower pid.
    for path in sorted(Path(out).glob("epochs-*.jsonl"), key=lambda p: (p.stat().st_mtime_ns, p.name)):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


def small_model(inputs: int = 4, compiled: bool = True):
    """A tiny tf-keras classifier of ``inputs`` values into 3 classes."""
    model = tf_keras.Sequential([tf_keras.Input((inputs,)), tf_keras.layers.Dense(3, activation="softmax")])
    if compiled:
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


class LockedCallback(tf_keras.callbacks.Callback):
    """A callback holding a lock: it cannot be pickled, so it cannot travel to the nodes."""

    def __init__(self):
        super().__init__()
        import threading

        self.lock = threading.Lock()
