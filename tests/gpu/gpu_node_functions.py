"""What the GPU suite runs on executors: ``map_fun``s for TF nodes and functions for scoring tasks.

``gpu_setup`` registers this module with PySpark's cloudpickle, so its functions travel pickled
by value and executors need not import it. Each ``map_fun`` writes what it observed as JSON into
``args["out"]`` for the test to assert on. TensorFlow is imported inside functions only.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def _write(args, ctx, record: dict) -> None:
    (Path(args["out"]) / f"node{ctx.executor_id}.json").write_text(json.dumps(record))


def _nvidia_smi(query: str) -> list[list[str]]:
    """``nvidia-smi --query-...=... --format=csv,noheader`` as rows of stripped fields ([] on failure)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [[field.strip() for field in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def gpu_uuids(visible: str | None) -> list[str]:
    """The UUIDs of the GPUs a ``CUDA_VISIBLE_DEVICES`` value names (nvidia-smi indices or UUIDs)."""
    by_index = {index: uuid for index, uuid in _nvidia_smi("--query-gpu=index,uuid")}
    entries = [entry.strip() for entry in (visible or "").split(",") if entry.strip()]
    return [by_index.get(entry, entry) for entry in entries]


def gpu_uuids_used_by(pid: int) -> list[str]:
    """The GPUs on which process ``pid`` holds a CUDA context, as nvidia-smi reports them
    ([] when it lists no processes, e.g. inside a container's own PID namespace)."""
    return sorted({uuid for app_pid, uuid in _nvidia_smi("--query-compute-apps=pid,gpu_uuid") if app_pid == str(pid)})


def training_data(rows: int = 1024):
    """``(features (rows, 16) float32, labels (rows,) int64)``, the same on every call."""
    import numpy as np

    rng = np.random.default_rng(0)
    features = rng.normal(size=(rows, 16)).astype("float32")
    return features, (features.sum(axis=1) > 0).astype("int64")


def mwms_fit_on_gpu(args, ctx):
    """MultiWorkerMirroredStrategy ``model.fit`` (tf-keras) on the node's GPU, from the feed
    (``args["feed"]``, InputMode.SPARK: columns ``x``, ``y``) or from :func:`training_data`; save
    the weights and record what TensorFlow saw. ``args["ring"]``: ring collectives, for nodes
    sharing one GPU (NCCL refuses two ranks on one device)."""
    import numpy as np
    import tensorflow as tf

    implementation = (
        tf.distribute.experimental.CommunicationImplementation.RING
        if args["ring"]
        else tf.distribute.experimental.CommunicationImplementation.AUTO
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    )
    if args["feed"]:
        dataset = ctx.get_data_feed().as_dataset(64, features="x", label="y")
    else:
        options = tf.data.Options()
        options.autotune.enabled = False
        dataset = tf.data.Dataset.from_tensor_slices(training_data()).batch(64).with_options(options)
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(2)]
        )
        model.compile(
            optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
    history = model.fit(dataset, epochs=args["epochs"], verbose=0)
    np.savez(Path(args["out"]) / f"weights{ctx.executor_id}.npz", *model.get_weights())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    _write(
        args,
        ctx,
        {
            "cuda_visible_devices": visible,
            "ctx_gpus": ctx.gpus,
            "tf_gpus": [device.name for device in tf.config.list_physical_devices("GPU")],
            "variable_devices": sorted({variable.device for variable in model.weights}),
            "worker_devices": list(strategy.extended.worker_devices),
            "loss": [float(value) for value in history.history["loss"]],
            "own_gpu_uuids": gpu_uuids_used_by(os.getpid()),
            "visible_gpu_uuids": gpu_uuids(visible),
        },
    )


def make_device_reporting_predict_fn(path: str):
    """A ``make_predict_fn`` scoring a Keras model and reporting, per row, whether the output
    tensor was computed on a GPU (``on_gpu`` 1.0) or not (0.0)."""

    def make_predict_fn():
        import keras
        import numpy as np

        model = keras.saving.load_model(path, compile=False)

        def predict(x):
            probs = model(x, training=False)  # under sparkdl's tf.device for this task
            on_gpu = 1.0 if "GPU" in probs.device else 0.0
            return {"probs": np.asarray(probs), "on_gpu": np.full(len(x), on_gpu, dtype="float32")}

        return predict

    return make_predict_fn


def with_task_device(score_partition):
    """Wrap a mapInPandas scorer: each output batch also says which device sparkdl scored this
    task on, how many GPUs TensorFlow sees in this Python worker, and which GPUs it was shown."""

    def run(batches):
        from sparkdl.inference import cache_info
        from sparkdl.inference.worker import ensure_tensorflow

        for frame in score_partition(batches):
            _, device = ensure_tensorflow("spark")
            setup = cache_info()["tf_setup"]
            yield frame.assign(
                device=device, tf_gpus=setup.get("gpus", 0), visible=",".join(setup.get("visible") or [])
            )

    return run
