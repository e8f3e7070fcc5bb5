"""``map_fun``s of the TENSORFLOW-mode scenarios (``test_cluster``, ``test_cluster_roles``,
``test_security``, ``test_node_paths``, the console and results tests): lifecycle, roles and
strategies, ports, GPUs, what a node prints and returns."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from node_functions import _arg, _write, supervisor_pid, wait_for_file


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
    record = {"target": server.target, "port": ctx.port, "host": ctx.host, "pid": os.getpid(), "log_dir": ctx.log_dir}
    _write(args, ctx, record)
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


def mwms_fit_with_progress(args, ctx):
    """Two-worker MultiWorkerMirroredStrategy + tf.keras model.fit of 3 epochs with validation data,
    reporting each epoch to the driver; save the final weights and record the Keras history."""
    import numpy as np
    import tensorflow as tf

    strategy, model, dataset = mwms_classifier(metrics=("accuracy",))
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
    np.savez(Path(_arg(args, "out")) / f"weights{ctx.executor_id}.npz", *model.get_weights())
    _write(
        args,
        ctx,
        {
            "job_name": ctx.job_name,
            "replicas": strategy.num_replicas_in_sync,
            "keras": tf.keras.__name__,
            "history": {k: [float(v) for v in values] for k, values in history.history.items()},
        },
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
    _write(args, ctx, {"pid": os.getpid(), "supervisor_pid": supervisor_pid(ctx)}, suffix="-ready")
    wait_for_file(_arg(args, "flag"))


def return_value(args, ctx):
    """Return a value naming the node (numpy included), or ``args["bad"]`` from node ``args["bad_node"]``."""
    import numpy as np

    if ctx.executor_id == args.get("bad_node"):
        return {"node": ctx.executor_id, "oops": {1, 2}}  # a set: no JSON for it
    return {"node": ctx.executor_id, "role": f"{ctx.job_name}:{ctx.task_index}", "mean": np.float32(0.5) * 3}


def report_start(args, ctx):
    """Record how this node's process started: its parent's command line, whether TensorFlow
    was imported before map_fun began (a fork server's node inherits it), and one draw from
    numpy's global random state, and how many objects the cyclic collector was told to leave
    alone (``gc.freeze``)."""
    import gc
    import sys

    import numpy as np
    import psutil

    preloaded = "tensorflow" in sys.modules
    parent = psutil.Process().parent()
    record = {"parent_pid": parent.pid, "parent": parent.cmdline(), "tensorflow_preloaded": preloaded}
    record["command"] = " ".join(psutil.Process().cmdline())
    record["frozen_objects"] = gc.get_freeze_count()
    _write(args, ctx, {**record, "draw": float(np.random.random())})
