"""What the Keras 3 multi-worker tests run on TF nodes: ``import keras`` under MultiWorkerMirroredStrategy.

``fit_from_dataframe`` is a user's Spark-mode program (``feed.as_dataset``, validation, the driver's
history). ``equivalence_suite`` trains, on each worker, its half of every global batch of one fixed
data set, and beside it (outside the strategy, in the same process) one model on the whole global
batches, from the same initial weights: the two must agree. It covers sample and class weights,
a multi-input multi-output model, EarlyStopping, evaluate, predict and saving through
``ctx.export_path``. Both return plain JSON for the driver.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

ROWS, WIDTH, PER_WORKER = 640, 8, 16  # 20 global batches of 32 rows: each worker's half is 16


def weights_hash(model) -> str:
    """A digest of every weight of ``model``, in order."""
    return hashlib.sha256(b"".join(np.asarray(w, np.float32).tobytes() for w in model.get_weights())).hexdigest()[:16]


def fit_from_dataframe(args, ctx):
    """3 epochs of a Keras 3 classifier fed by ``cluster.train`` (x: 8 floats, y: 0/1), with validation."""
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    global_batch = args["batch"] * ctx.num_workers
    train = feed.as_dataset(global_batch, features="x", label="y", all_epochs=True)
    validation = feed.as_dataset(global_batch, features="x", label="y", split="validation")
    with strategy.scope():
        keras.utils.set_random_seed(7)
        model = keras.Sequential(
            [
                keras.Input((WIDTH,)),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(1, activation="sigmoid"),
            ]
        )
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy", metrics=["accuracy"])
    history = model.fit(
        train,
        validation_data=validation,
        epochs=feed.num_epochs,
        steps_per_epoch=feed.keras_steps_per_epoch(global_batch, strategy),
        callbacks=[ctx.progress_callback()],
        verbose=0,
    )
    return {"hash": weights_hash(model), "history": history.history, "keras": keras.__version__}


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, WIDTH)).astype("float32")
    y = (x @ rng.normal(size=(WIDTH, 1)) > 0).astype("float32")
    weights = rng.uniform(0.5, 1.5, size=(ROWS,)).astype("float32")
    return x, y, weights


def _my_rows(task: int) -> np.ndarray:
    """This worker's half of every global batch, in order."""
    batch = PER_WORKER * 2
    return np.concatenate(
        [np.arange(g * batch + task * PER_WORKER, g * batch + (task + 1) * PER_WORKER) for g in range(ROWS // batch)]
    )


def _datasets(tf, parts, task):
    """``(this worker's dataset, the whole data's dataset)`` of the tuple ``parts``: batches of the
    global batch (Keras splits each across the workers); cardinality unknown, as a feed's is."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    mine = tuple(
        p[_my_rows(task)] if not isinstance(p, dict) else {k: v[_my_rows(task)] for k, v in p.items()} for p in parts
    )
    local = tf.data.Dataset.from_tensor_slices(mine).batch(PER_WORKER * 2).filter(lambda *_: True).with_options(options)
    whole = tf.data.Dataset.from_tensor_slices(parts).batch(PER_WORKER * 2)
    return local, whole


def _twin(strategy, build):
    """The model built in ``strategy``'s scope, and the same model (same seed) built outside it."""
    with strategy.scope():
        distributed = build()
    return distributed, build()


def _max_difference(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(a.get_weights(), b.get_weights()))


def _classifier():
    import keras

    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((WIDTH,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="binary_crossentropy", metrics=["accuracy"])
    return model


def _two_headed():
    import keras

    keras.utils.set_random_seed(2)
    left, right = keras.Input((WIDTH // 2,), name="left"), keras.Input((WIDTH // 2,), name="right")
    hidden = keras.layers.Dense(12, activation="relu")(keras.layers.Concatenate()([left, right]))
    odd = keras.layers.Dense(1, activation="sigmoid", name="odd")(hidden)
    size = keras.layers.Dense(1, name="size")(hidden)
    model = keras.Model({"left": left, "right": right}, {"odd": odd, "size": size})
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss={"odd": "binary_crossentropy", "size": "mse"})
    return model


def equivalence_suite(args, ctx):
    """Each check trains twin models (see the module docstring); returns their differences and histories."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    x, y, weights = _data()
    # this worker's place among MWMS's tasks (the chief first): which half of each global batch it gets
    task = 0 if ctx.job_name == "chief" else ctx.task_index + (1 if "chief" in ctx.cluster_spec else 0)
    steps = ROWS // PER_WORKER // 2  # 20 global batches: each worker steps through its 2 pieces of each of 10 batches
    out = {}

    # 1. sample weights, SGD, 20 steps: the workers' weights are the one process's
    mine, whole = _datasets(tf, (x, y, weights), task)
    model, reference = _twin(strategy, _classifier)
    fitted = model.fit(mine, epochs=1, steps_per_epoch=steps, verbose=0).history
    expected = reference.fit(whole, epochs=1, steps_per_epoch=steps, verbose=0).history
    out["weighted"] = {"difference": _max_difference(model, reference), "history": fitted, "expected": expected}
    out["hash"] = weights_hash(model)

    # evaluate and predict: global values, equal to the one process's on the whole data
    evaluation = model.evaluate(mine, verbose=0, return_dict=True)
    expected_evaluation = reference.evaluate(whole, verbose=0, return_dict=True)
    predicted = model.predict(_datasets(tf, (x,), task)[0], verbose=0)
    out["evaluate"] = {"got": evaluation, "expected": expected_evaluation}
    out["predict"] = (
        float(np.max(np.abs(predicted - reference.predict(x, verbose=0)))) if len(predicted) == ROWS else -1.0
    )

    # 2. class weights
    mine, whole = _datasets(tf, (x, y), task)
    model, reference = _twin(strategy, _classifier)
    model.fit(mine, epochs=1, steps_per_epoch=steps, class_weight={0: 1.0, 1: 3.0}, verbose=0)
    reference.fit(whole, epochs=1, steps_per_epoch=steps, class_weight={0: 1.0, 1: 3.0}, verbose=0)
    out["class_weighted"] = _max_difference(model, reference)

    # 3. two inputs, two outputs, per-output losses
    inputs = {"left": x[:, : WIDTH // 2], "right": x[:, WIDTH // 2 :]}
    targets = {"odd": y, "size": x.sum(axis=1, keepdims=True)}
    mine, whole = _datasets(tf, (inputs, targets), task)
    model, reference = _twin(strategy, _two_headed)
    model.fit(mine, epochs=1, steps_per_epoch=steps, verbose=0)
    reference.fit(whole, epochs=1, steps_per_epoch=steps, verbose=0)
    out["multi_io"] = _max_difference(model, reference)

    # 4. EarlyStopping on the global loss: every worker stops after the same epoch (no worker waits)
    import keras

    mine, _ = _datasets(tf, (x, y), task)
    with strategy.scope():
        model = _classifier()
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=10.0)  # no epoch improves by 10
    out["early_stopped"] = len(model.fit(mine, epochs=5, callbacks=[stop], verbose=0).history["loss"])

    # 5. saving: a .keras file and a SavedModel export, through export_path (the chief's is kept)
    with ctx.export_path(os.path.join(args["out"], "model.keras")) as target:
        model.save(target)
    with ctx.export_path(os.path.join(args["out"], "exported")) as target:
        model.export(target, verbose=False)
    out["saved_hash"] = weights_hash(model)
    return out
