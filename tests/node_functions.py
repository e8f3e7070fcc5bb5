"""``map_fun``s the integration tests run on real TF nodes.

They live in a plain module (on the executors' PYTHONPATH, see conftest) so that node
processes import only this, not pytest. Each writes what it observed as JSON into the
directory named by its args, for the test to assert on at the driver.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path


def _arg(args, name):
    """Read ``name`` from a Namespace, a dict or an argv list (``--name value``)."""
    if isinstance(args, dict):
        return args[name]
    if isinstance(args, list):
        return args[args.index(f"--{name}") + 1]
    return getattr(args, name)


def _write(args, ctx, record: dict, suffix: str = "") -> None:
    out = Path(_arg(args, "out"))
    (out / f"node{ctx.executor_id}{suffix}.json").write_text(json.dumps(record))


def wait_for_file(path: str, timeout_s: float = 120.0) -> bool:
    """Poll for a flag file the test creates (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def describe_node(args, ctx):
    """Record ctx fields, the args as received, and the environment sparkdl set."""
    _write(
        args,
        ctx,
        {
            "args_type": type(args).__name__,
            "args_out": _arg(args, "out"),
            "executor_id": ctx.executor_id,
            "worker_num": ctx.worker_num,
            "job_name": ctx.job_name,
            "task_index": ctx.task_index,
            "num_workers": ctx.num_workers,
            "cluster_spec": ctx.cluster_spec,
            "defaultFS": ctx.defaultFS,
            "working_dir": ctx.working_dir,
            "cwd": os.getcwd(),
            "absolute_rel": ctx.absolute_path("models/m1"),
            "absolute_abs": ctx.absolute_path("/data/x"),
            "tf_config": os.environ.get("TF_CONFIG"),
            "legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS"),
            "host": ctx.host,
            "port": ctx.port,
            "pid": os.getpid(),
            "ppid": os.getppid(),
        },
    )


def fail_on_worker(args, ctx):
    """Raise on worker:0; the others finish normally."""
    if ctx.job_name == "worker":
        raise ValueError(f"boom from {ctx.job_name}:{ctx.task_index} (sentinel 7f3a)")


def check_port(args, ctx):
    """Whether the node's TF port can be bound before and after ``ctx.release_port()``."""

    def bindable() -> bool:
        probe = socket.socket()
        try:
            probe.bind((ctx.host, ctx.port))
            return True
        except OSError:
            return False
        finally:
            probe.close()

    before = bindable()
    had_socket = ctx.tmp_socket is not None
    ctx.release_port()
    _write(
        args,
        ctx,
        {"bindable_before_release": before, "had_tmp_socket": had_socket, "bindable_after_release": bindable()},
    )


def chatty(args, ctx):
    """Write numbered lines to stdout and stderr, log with Python logging, end without a newline."""
    import logging
    import sys

    label = f"{ctx.job_name}:{ctx.task_index}"
    for i in range(args["lines"]):
        print(f"stdout line {i} of {label}")
        print(f"stderr line {i} of {label}", file=sys.stderr)
    logging.getLogger("user").info("logging line of %s", label)
    sys.stdout.flush()
    sys.stdout.write(f"last words of {label} (no newline)")


def wait_for_flag(args, ctx):
    """Stay up until the test creates the flag file (e.g. while it queries TensorBoard)."""
    if not wait_for_file(_arg(args, "flag")):
        raise TimeoutError("the test never created the flag file")
    _write(args, ctx, {"log_dir": ctx.log_dir})


def serve_until_flag(args, ctx):
    """Start this node's ``tf.distribute.Server`` (its gRPC port from the cluster spec), say so,
    and keep serving until the test creates the flag file."""
    server = ctx.start_server()
    _write(args, ctx, {"target": server.target, "port": ctx.port, "host": ctx.host, "pid": os.getpid()})
    if not wait_for_file(_arg(args, "flag")):
        raise TimeoutError("the test never created the flag file")


def mwms_classifier(rows: int = 512, hidden: int = 16, metrics: tuple = ()):
    """(strategy, compiled classifier, dataset) for MultiWorkerMirroredStrategy model.fit tests."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    rng = np.random.default_rng(0)
    features = rng.normal(size=(rows, 8)).astype("float32")
    labels = (features.sum(axis=1) > 0).astype("int64")
    options = tf.data.Options()
    options.autotune.enabled = False  # avoids a slow iterator teardown at the end of fit()
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(64).with_options(options)
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((8,)), tf.keras.layers.Dense(hidden, activation="relu"), tf.keras.layers.Dense(2)]
        )
        model.compile(
            optimizer=tf.keras.optimizers.SGD(0.1),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=list(metrics),
        )
    return strategy, model, dataset


def mwms_fit(args, ctx):
    """Two-worker MultiWorkerMirroredStrategy + tf.keras model.fit; save the final weights."""
    import numpy as np
    import tensorflow as tf

    strategy, model, dataset = mwms_classifier()
    history = model.fit(dataset, epochs=3, verbose=0)
    out = Path(_arg(args, "out"))
    np.savez(out / f"weights{ctx.executor_id}.npz", *model.get_weights())
    _write(
        args,
        ctx,
        {
            "replicas": strategy.num_replicas_in_sync,
            "keras": tf.keras.__name__,
            "loss": [float(v) for v in history.history["loss"]],
            "job_name": ctx.job_name,
        },
    )


def mwms_fit_with_progress(args, ctx):
    """MWMS tf.keras fit of 3 epochs with validation data, reporting each epoch to the driver."""
    import numpy as np
    import tensorflow as tf

    _, model, dataset = mwms_classifier(rows=256, hidden=8, metrics=("accuracy",))
    rng = np.random.default_rng(1)
    features = rng.normal(size=(128, 8)).astype("float32")
    labels = (features.sum(axis=1) > 0).astype("int64")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.autotune.enabled = False
    validation = tf.data.Dataset.from_tensor_slices((features, labels)).batch(32).with_options(options)
    history = model.fit(
        dataset,
        epochs=3,
        validation_data=validation,
        validation_steps=4,
        verbose=0,
        callbacks=[ctx.progress_callback()],
    )
    _write(
        args,
        ctx,
        {"job_name": ctx.job_name, "history": {k: [float(v) for v in values] for k, values in history.history.items()}},
    )


def parameter_server_model(learning_rate: float):
    """(strategy, compiled linear model, DatasetCreator) for ParameterServerStrategy, on the chief."""
    import numpy as np
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate), loss="mse")

    def dataset_fn(_input_context):
        x = np.random.default_rng(1).random((256, 4)).astype("float32")
        return tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).repeat().batch(32)

    return strategy, model, tf.keras.utils.experimental.DatasetCreator(dataset_fn)


def parameter_server_fit(args, ctx):
    """ParameterServerStrategy: ps and workers serve, the chief coordinates model.fit."""
    if ctx.job_name in ("ps", "worker"):
        _write(args, ctx, {"job_name": ctx.job_name, "served": True})
        ctx.serve()
        return
    strategy, model, data = parameter_server_model(0.05)
    history = model.fit(data, epochs=3, steps_per_epoch=10, verbose=0)
    _write(
        args,
        ctx,
        {
            "job_name": ctx.job_name,
            "loss": [float(v) for v in history.history["loss"]],
            "num_ps": strategy._num_ps if hasattr(strategy, "_num_ps") else None,
        },
    )


def evaluator_layout(args, ctx):
    """Chief + worker train with MWMS; the evaluator records what it sees, outside the collective
    (before importing TensorFlow: shutdown stops the evaluator once the others are done)."""
    if ctx.job_name == "evaluator":
        _write(
            args,
            ctx,
            {"job_name": ctx.job_name, "tf_config": os.environ.get("TF_CONFIG"), "cluster_spec": ctx.cluster_spec},
        )
        return
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        total = tf.Variable(0.0)

    @tf.function
    def step():
        return strategy.run(lambda: tf.constant(1.0))

    result = strategy.reduce(tf.distribute.ReduceOp.SUM, step(), axis=None)
    total.assign(result)
    _write(
        args, ctx, {"job_name": ctx.job_name, "replicas": strategy.num_replicas_in_sync, "sum": float(total.numpy())}
    )


def parallel_task(args, ctx):
    """TFParallel: independent nodes, no TF_CONFIG."""
    _write(
        args,
        ctx,
        {
            "executor_id": ctx.executor_id,
            "tf_config": os.environ.get("TF_CONFIG"),
            "job_name": ctx.job_name,
            "pid": os.getpid(),
        },
    )


def record_gpus(args, ctx):
    """Record the GPUs sparkdl pinned for this node (no TensorFlow import needed)."""
    _write(
        args,
        ctx,
        {
            "ctx_gpus": ctx.gpus,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER"),
        },
    )


def keras3_custom_loop(args, ctx):
    """With TF_USE_LEGACY_KERAS=0 (Keras 3), a custom loop with strategy.run still trains under MWMS."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        weight = tf.Variable(0.0)
        optimizer = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def train_step(x):
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((weight * x - 2.0 * x) ** 2)
            optimizer.apply_gradients([(tape.gradient(loss, weight), weight)])
            return loss

        return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(step, args=(x,)), axis=None)

    x = tf.constant(np.linspace(0.5, 1.5, 8, dtype="float32"))
    for _ in range(30):
        train_step(x)
    _write(
        args,
        ctx,
        {
            "keras": tf.keras.__name__ if hasattr(tf.keras, "__name__") else str(tf.keras),
            "keras_version": tf.keras.__version__ if hasattr(tf.keras, "__version__") else "",
            "weight": float(weight.numpy()),
        },
    )


# -- InputMode.SPARK --


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

    callbacks = [CountBatches()] + ([ctx.progress_callback()] if args.get("progress_callback") else [])
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


def tensorflow_chatter(args, ctx):
    """Import TensorFlow and run an op (its real start-up chatter), log at INFO and WARNING on
    TensorFlow's logger, and print a line of the user's own."""
    import logging

    import tensorflow as tf

    tf.reduce_sum(tf.ones((2, 2))).numpy()
    logging.getLogger("tensorflow").info("Collective all_reduce tensors: a chatter line")
    logging.getLogger("tensorflow").warning("a tensorflow warning for the user")
    print(f"the user's own line from {ctx.job_name}:{ctx.task_index}", flush=True)


def print_text(args, ctx):
    """Print ``args['text']`` ``args['times']`` times (the console's problem, not the node's)."""
    for _ in range(args.get("times", 1)):
        print(args["text"], flush=True)
    _write(args, ctx, {"printed": True})


def print_then_wait(args, ctx):
    """Print a marker line, say so in a file, then wait for the flag file (the test kills the node)."""
    print(f"marker line of {ctx.job_name}:{ctx.task_index} before the loss", flush=True)
    _write(args, ctx, {"pid": os.getpid(), "supervisor_pid": os.getppid()}, suffix="-ready")
    wait_for_file(_arg(args, "flag"))


def return_value(args, ctx):
    """Return a value naming the node (numpy included), or ``args["bad"]`` from node ``args["bad_node"]``."""
    import numpy as np

    if ctx.executor_id == args.get("bad_node"):
        return {"node": ctx.executor_id, "oops": {1, 2}}  # a set: no JSON for it
    return {"node": ctx.executor_id, "role": f"{ctx.job_name}:{ctx.task_index}", "mean": np.float32(0.5) * 3}
