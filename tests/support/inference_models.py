"""Small models and data for the inference tests, benchmark, example and notebook.

Data: scikit-learn's 8x8 digits (shipped with scikit-learn, no download), upscaled to MNIST's
28x28x1 layout so the models have realistic input shapes. Models are Keras 3 unless the name
says tf-keras. Everything is deterministic (fixed seeds). This module is also imported on
executors (conftest puts every test folder on their PYTHONPATH), so it imports TensorFlow only inside functions.
"""

from __future__ import annotations

import numpy as np

IMAGE_SHAPE = (28, 28, 1)


def digits_28(rows: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(images (n, 28, 28, 1) float32 in [0, 1], labels (n,) int64)``; ``rows`` repeats the
    1797 digits (in a seeded random order) to any length."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = (digits.images / 16.0).astype("float32")  # (1797, 8, 8)
    big = np.kron(small, np.ones((1, 3, 3), dtype="float32"))  # (1797, 24, 24)
    images = np.pad(big, ((0, 0), (2, 2), (2, 2)))[..., None]  # (1797, 28, 28, 1)
    labels = digits.target.astype("int64")
    if rows is None:
        return images, labels
    order = np.random.default_rng(seed).integers(0, len(labels), size=rows)
    return images[order], labels[order]


def digits_frame(spark, rows: int | None = None, partitions: int = 2, seed: int = 0):
    """A DataFrame ``id long, pixels array<float> (784 values), label long`` of digits."""
    import pandas as pd

    images, labels = digits_28(rows, seed)
    frame = pd.DataFrame(
        {"id": np.arange(len(labels), dtype="int64"), "pixels": list(images.reshape(len(labels), -1)), "label": labels}
    )
    return spark.createDataFrame(frame, "id long, pixels array<float>, label long").repartition(partitions)


def mlp(seed: int = 0, hidden: int = 128):
    """A Keras 3 MLP: input ``image`` (28, 28, 1) -> softmax over 10 classes (output ``probs``)."""
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input(IMAGE_SHAPE, name="image"),
            keras.layers.Flatten(),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(10, activation="softmax", name="probs"),
        ],
        name="mlp",
    )


def cnn(seed: int = 0):
    """A small Keras 3 CNN on (28, 28, 1): two conv/pool blocks, softmax over 10 classes."""
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input(IMAGE_SHAPE, name="image"),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax", name="probs"),
        ],
        name="cnn",
    )


def multi_io(seed: int = 0):
    """Two inputs (``image`` (28, 28, 1) float32, ``meta`` (3,) float32) and two outputs
    (``probs`` (10,) softmax, ``score`` one value per row)."""
    import keras

    keras.utils.set_random_seed(seed)
    image = keras.Input(IMAGE_SHAPE, name="image")
    meta = keras.Input((3,), name="meta")
    x = keras.layers.Concatenate()([keras.layers.Flatten()(image), meta])
    x = keras.layers.Dense(32, activation="relu")(x)
    probs = keras.layers.Dense(10, activation="softmax", name="probs")(x)
    score = keras.layers.Dense(1, name="score")(x)
    return keras.Model({"image": image, "meta": meta}, {"probs": probs, "score": score}, name="multi_io")


def scalar_model(seed: int = 0):
    """Inputs ``a`` and ``b`` of one float32 value per row, output ``y = 2a + b`` (one value per row)."""
    import keras

    a = keras.Input((1,), name="a")
    b = keras.Input((1,), name="b")
    dense = keras.layers.Dense(1, name="y")
    model = keras.Model([a, b], dense(keras.layers.Concatenate()([a, b])), name="scalar")
    dense.set_weights([np.array([[2.0], [1.0]], dtype="float32"), np.zeros(1, dtype="float32")])
    return model


def scale_model(factor: float):
    """Input ``x`` of one float32 value per row, output ``y = factor * x``: a model version whose
    predictions say which version it is."""
    import keras

    x = keras.Input((1,), name="x")
    dense = keras.layers.Dense(1, name="y")
    model = keras.Model(x, dense(x), name="scale")
    dense.set_weights([np.array([[factor]], dtype="float32"), np.zeros(1, dtype="float32")])
    return model


def tf_keras_mlp(seed: int = 0):
    """The MLP built with tf-keras (Keras 2), for the SavedModel/.keras compatibility tests."""
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    return tf_keras.Sequential(
        [
            tf_keras.Input(IMAGE_SHAPE, name="image"),
            tf_keras.layers.Flatten(),
            tf_keras.layers.Dense(64, activation="relu"),
            tf_keras.layers.Dense(10, activation="softmax", name="probs"),
        ]
    )


def train(model, epochs: int = 3, rows: int | None = None, seed: int = 0):
    """Fit ``model`` on the digits (sparse categorical cross-entropy); returns the model."""
    images, labels = digits_28(rows, seed)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(images, labels, epochs=epochs, batch_size=64, verbose=0)
    return model


def make_doubling_predict_fn():
    """A ``make_predict_fn`` with no model at all: returns each row of ``x`` flattened and doubled, and its sum."""

    def predict(x):
        flat = x.reshape(len(x), -1)
        return {"doubled": flat * 2, "total": flat.sum(axis=1)}

    return predict


def observed(score_partition):
    """Wrap a mapInPandas scorer to report, per output batch, this worker's pid, its model loads
    before the task started and after the batch, and the most traces of any cached tf.function."""

    def run(batches):
        import os

        from sparkdl.inference import cache_info

        before = cache_info()["loads"]
        for frame in score_partition(batches):
            info = cache_info()
            traces = max([e["tracing_count"] or 0 for e in info["entries"]] or [0])
            yield frame.assign(pid=os.getpid(), loads_before=before, loads_after=info["loads"], traces=traces)

    return run


def estimator_train_fn(args, ctx):
    """A ``TFEstimator`` train_fn: MWMS over the fed ``pixels``/``label`` columns (Keras 3, the nodes'
    default), the chief saves a SavedModel to ``args.export_dir``."""
    import tensorflow as tf

    from sparkdl import compat

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    dataset = feed.as_dataset(
        args.batch_size * ctx.num_workers, features="pixels", label="label", shapes={"pixels": IMAGE_SHAPE}
    )
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input(IMAGE_SHAPE, name="image"),
                tf.keras.layers.Flatten(),
                tf.keras.layers.Dense(64, activation="relu"),
                tf.keras.layers.Dense(10, activation="softmax", name="probs"),
            ]
        )
        model.compile(optimizer=tf.keras.optimizers.Adam(args.learning_rate), loss="sparse_categorical_crossentropy")
    validation = (
        feed.as_dataset(
            args.batch_size * ctx.num_workers,
            features="pixels",
            label="label",
            shapes={"pixels": IMAGE_SHAPE},
            split="validation",
        )
        if args.validation_indicator_col
        else None
    )
    model.fit(dataset, validation_data=validation, epochs=args.epochs, verbose=0, callbacks=[ctx.progress_callback()])
    # Every MWMS node takes part in saving; only the chief writes to the real location.
    with ctx.export_path(args.export_dir) as target:
        compat.export_saved_model(model, target, is_chief=True)  # Keras 3: model.export (export_path chose target)


def export_marker(args, argv):
    """A ``TFEstimator`` export_fn: record, in ``args.export_dir``, that it ran on an executor."""
    import json
    import os

    with open(os.path.join(args.export_dir, "export_fn.json"), "w") as out:
        json.dump({"pid": os.getpid(), "argv": argv, "epochs": args.epochs}, out)


def digits_estimator_fit(spark, export_dir: str, cluster_size: int = 2):
    """The digits frame (every 5th row held out for validation) and a ``TFEstimator`` of
    ``cluster_size`` nodes fitted on it for 3 epochs (``estimator_train_fn``, ``export_marker``):
    ``(frame, model)``."""
    from pyspark.sql import functions as F

    from sparkdl.ml import TFEstimator

    df = digits_frame(spark, partitions=4).withColumn("held_out", F.col("id") % 5 == 0)
    estimator = (
        TFEstimator(estimator_train_fn, {"learning_rate": 0.005}, export_fn=export_marker)
        .setInputMapping({"pixels": "image", "label": "label"})
        .setClusterSize(cluster_size)
        .setEpochs(3)
        .setBatchSize(32)
        .setExportDir(export_dir)
        .setValidationIndicatorCol("held_out")
    )
    return df, estimator.fit(df)
