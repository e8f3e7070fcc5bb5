"""``map_fun``s of the SPARK-mode scenarios (``test_spark_mode``, ``test_epoch_cache``,
``test_feed_partitions``, ``test_bad_input``, ...): nodes that read the feed, train from it,
answer inference and fail while reading."""

from __future__ import annotations

from pathlib import Path

from node_functions import _arg, _write, wait_for_file


def count_feed(args, ctx):
    """Read the whole feed with next_batch; record what arrived."""
    import numpy as np

    feed = ctx.get_data_feed(input_mapping=args.get("mapping"))
    rows, batches, largest, label_sum, kinds = 0, 0, 0, 0.0, {}
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 50))
        if isinstance(batch, dict):
            size = len(next(iter(batch.values())))
            if size:
                kinds = {k: [str(v.dtype), list(v.shape[1:])] for k, v in batch.items()}
            label_sum += float(np.sum(batch[args["label_key"]])) if size else 0.0
        else:
            size = len(batch)
            label_sum += float(sum(row[-1] for row in batch))
            if size:
                kinds = {"row_type": type(batch[0]).__name__, "first_field": type(batch[0][0]).__name__}
        rows, batches, largest = rows + size, batches + (size > 0), max(largest, size)
    import resource

    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    _write(
        args,
        ctx,
        {
            "rows": rows,
            "batches": batches,
            "largest": largest,
            "label_sum": label_sum,
            "kinds": kinds,
            "peak_rss_mib": peak_rss_mib,
        },
    )


def count_feed_failing_once(args, ctx):
    """Count the rows fed; node ``args['victim']`` fails after one batch on attempt ``args['fail_on_attempt']``."""
    feed = ctx.get_data_feed()
    rows = 0
    while not feed.should_stop():
        rows += len(feed.next_batch(args["batch"]))
        if ctx.executor_id == args["victim"] and ctx.attempt == args["fail_on_attempt"]:
            raise RuntimeError("failing once, to be relaunched")
    _write(args, ctx, {"rows": rows}, suffix=f"-attempt{ctx.attempt}")


def fit_from_feed(args, ctx):
    """MWMS model.fit straight from the feed's tf.data.Dataset; save weights."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    steps = feed.steps_per_epoch(args["batch"])
    all_epochs = bool(args.get("all_epochs"))
    dataset = feed.as_dataset(args["batch"], features="x", label="y", all_epochs=all_epochs)
    validation = (
        feed.as_dataset(args["batch"], features="x", label="y", split="validation") if args.get("validation") else None
    )
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(1)]
        )
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")

    class CountBatches(tf.keras.callbacks.Callback):
        seen = 0

        def on_train_batch_end(self, batch, logs=None):
            CountBatches.seen += 1

    class StopAfter(tf.keras.callbacks.Callback):  # as EarlyStopping would, after epoch args["stop_after_epoch"]
        def on_epoch_end(self, epoch, logs=None):
            if epoch >= args["stop_after_epoch"]:
                self.model.stop_training = True

    callbacks = [CountBatches()] + ([ctx.progress_callback()] if args.get("progress_callback") else [])
    callbacks += [StopAfter()] if args.get("stop_after_epoch") is not None else []
    fit_steps = feed.keras_steps_per_epoch(args["batch"], strategy) if all_epochs else None
    history = model.fit(
        dataset,
        validation_data=validation,
        epochs=args["epochs"],
        steps_per_epoch=fit_steps,
        validation_freq=args.get("validation_freq", 1),
        verbose=0,
        callbacks=callbacks,
    )
    if args.get("stop_after_epoch") is not None:  # read the rows the early stop left, so train() can end
        while feed.next_batch(256):
            pass
    np.savez(Path(args["out"]) / f"weights{ctx.executor_id}.npz", *model.get_weights())
    # Stay up until cluster.train has returned, when asked: its return must not wait for map_fun's.
    train_returned = wait_for_file(args["train_returned"], 120) if args.get("train_returned") else None
    _write(
        args,
        ctx,
        {
            "steps_per_epoch": steps,
            "keras_steps": CountBatches.seen,
            "loss": [float(v) for v in history.history["loss"]],
            "val_loss": [float(v) for v in history.history.get("val_loss", [])],
            "train_returned_first": train_returned,
        },
    )


def fit_runs_validating_every_other_epoch(args, ctx):
    """One MWMS ``model.fit(validation_freq=2)`` per ``cluster.train`` call (``args['runs']``: each with
    its ``all_epochs`` and whether it passes ``ctx.progress_callback()``); record each fit's history."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed(feed_timeout=args["feed_timeout"])
    fits = []
    for run in args["runs"]:
        all_epochs = run["all_epochs"]
        train = feed.as_dataset(args["batch"], features="x", label="y", all_epochs=all_epochs)
        validation = feed.as_dataset(args["batch"], features="x", label="y", split="validation")
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
            model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
        history = model.fit(
            train,
            validation_data=validation,
            epochs=feed.num_epochs,
            steps_per_epoch=feed.keras_steps_per_epoch(args["batch"], strategy) if all_epochs else None,
            validation_freq=2,
            callbacks=[ctx.progress_callback()] if run["progress_callback"] else [],
            verbose=0,
        )
        fits.append({k: [float(v) for v in values] for k, values in history.history.items()})
    _write(args, ctx, {"fits": fits})


def terminate_early(args, ctx):
    """Read one batch, then terminate the feed."""
    feed = ctx.get_data_feed()
    first = feed.next_batch(10)
    feed.terminate()
    _write(args, ctx, {"first": len(first), "should_stop": feed.should_stop()})


def infer_times_ten(args, ctx):
    """Inference: answer each row with 10 x its value (the first field of a tuple or list row)."""
    feed = ctx.get_data_feed(train_mode=False)
    batches = 0
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 10))
        if batch:
            feed.batch_results([(row[0] if isinstance(row, (tuple, list)) else row) * 10 for row in batch])
            batches += 1
    _write(args, ctx, {"batches": batches})


def fail_after_first_batch(args, ctx):
    """Read one batch, then fail (the driver must hear about it while still feeding)."""
    feed = ctx.get_data_feed()
    feed.next_batch(10)
    raise RuntimeError("model exploded while training (sentinel 91c2)")


def read_after_flag(args, ctx):
    """Wait for the test's flag (created once the feeding job has ended), then read every fed row
    (with ``fail``: raise half-way through them); then wait for the end of the feed."""
    feed = ctx.get_data_feed()
    if not wait_for_file(_arg(args, "flag")):
        raise TimeoutError("the test never created the flag file")
    rows = 0
    while rows < args["rows"]:
        rows += len(feed.next_batch(64))
        if args.get("fail") and rows >= args["rows"] // 2:
            raise RuntimeError("failed while reading the queued rows (sentinel 5e7a)")
    _write(args, ctx, {"rows": rows})
    while not feed.should_stop():
        feed.next_batch(64)


def tfos_style_feed(args, ctx):
    """TensorFlowOnSpark-style code, unchanged: TFNode.DataFeed(ctx.mgr, ...)."""
    from sparkdl import TFNode

    feed = TFNode.DataFeed(ctx.mgr, False)
    while not feed.should_stop():
        batch = feed.next_batch(5)
        if batch:
            feed.batch_results([row + 1 for row in batch])  # an RDD of ints: each row is an int


def infer_wrong_count(args, ctx):
    """Inference that answers one row short per batch ('fewer') or twice per row ('more')."""
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(10)
        if batch:
            answers = [row[0] for row in batch]
            feed.batch_results(answers[:-1] if args["answer"] == "fewer" else answers * 2)


# -- epoch cache, shuffle and validation --


def record_epoch_orders(args, ctx):
    """Read ``args['runs']`` training runs with next_batch; record each epoch's label order."""
    feed = ctx.get_data_feed()
    runs = []
    for _ in range(args["runs"]):
        per_epoch, epochs = feed.steps_per_epoch(1), feed.num_epochs  # rows of this node per epoch
        labels = []
        while len(labels) < per_epoch * epochs:
            batch = feed.next_batch(args.get("batch", 37))
            if not batch:
                break
            labels.extend(float(row[-1]) for row in batch)
        runs.append([labels[e * per_epoch : (e + 1) * per_epoch] for e in range(epochs)])
    _write(args, ctx, {"runs": runs})


def iterate_train_and_validation(args, ctx):
    """Iterate the training and validation datasets epoch by epoch, as model.fit does; record rows."""
    feed = ctx.get_data_feed()
    train = feed.as_dataset(args["batch"], features="x", label="y")
    validation = feed.as_dataset(args["batch"], features="x", label="y", split="validation")
    record = {"train_rows": [], "validation_labels": []}
    for _ in range(args["epochs"]):
        record["train_rows"].append(sum(int(y.shape[0]) for _, y in train))
        record["validation_labels"].append(sorted(float(v) for _, y in validation for v in y.numpy()))
    _write(args, ctx, record)


def ask_for_missing_validation(args, ctx):
    """Ask for the validation split of a run that has none (the node must fail, naming the call)."""
    ctx.get_data_feed().as_dataset(16, features="x", label="y", split="validation")


# -- element fidelity (TensorFlowOnSpark's next_batch and batch_results types) --


def _describe(value) -> str:
    """A value's structure and types, e.g. ``tuple(list[float,float], int)``, ``ndarray[float32](3,)``."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"ndarray[{value.dtype}]{tuple(value.shape)}"
    if isinstance(value, tuple):
        return "tuple(" + ", ".join(_describe(v) for v in value) + ")"
    if isinstance(value, list):
        return "list[" + ",".join(_describe(v) for v in value) + "]"
    return type(value).__name__


def _plain(value):
    import numpy as np

    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def describe_elements(args, ctx):
    """Read ``args['runs']`` training runs with next_batch; record each run's element types and values."""
    feed = ctx.get_data_feed()
    runs = []
    for _ in range(args["runs"]):
        wanted = feed.steps_per_epoch(1) * feed.num_epochs
        elements = []
        while len(elements) < wanted:
            batch = feed.next_batch(min(7, wanted - len(elements)))
            if not batch:
                break
            elements.extend(batch)
        runs.append({"types": sorted({_describe(e) for e in elements}), "values": [_plain(e) for e in elements]})
    _write(args, ctx, {"runs": runs})


def answer_in_kind(args, ctx):
    """Inference that answers as TFoS programs do, by the kind of row it reads: one-item lists
    ``[x]`` get their squares as one numpy array (TFoS's test_inputmode_spark), ints ``x`` get
    Python ints ``2x``, strings their upper case, floats a float32 array (numpy scalars per row),
    ``(features, label)`` tuples ``(numpy float32 sum, str(label))``."""
    import numpy as np

    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 10))
        if not batch:
            continue
        first = batch[0]
        if isinstance(first, list):
            feed.batch_results(np.square(np.array(batch, dtype=np.int32)))
        elif isinstance(first, tuple):
            feed.batch_results([(np.float32(sum(features)), str(label)) for features, label in batch])
        elif isinstance(first, str):
            feed.batch_results([row.upper() for row in batch])
        elif isinstance(first, float):
            feed.batch_results(np.array(batch, dtype=np.float32))
        else:
            feed.batch_results([2 * row for row in batch])


def read_tfrecords(args, ctx):
    """Read the TFRecord files sparkdl.dfutil wrote with tf.data.TFRecordDataset; record what they hold."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(args["dir"] + "/part-r-*"))
    spec = {
        "id": tf.io.FixedLenFeature([], tf.int64),
        "x": tf.io.FixedLenFeature([3], tf.float32),
        "name": tf.io.FixedLenFeature([], tf.string),
    }
    dataset = tf.data.TFRecordDataset(files).map(lambda record: tf.io.parse_single_example(record, spec))
    ids, x_sum, names = [], 0.0, set()
    for example in dataset:
        ids.append(int(example["id"]))
        x_sum += float(tf.reduce_sum(example["x"]))
        names.add(example["name"].numpy().decode())
    _write(args, ctx, {"files": len(files), "ids": sorted(ids), "x_sum": x_sum, "names": sorted(names)})
