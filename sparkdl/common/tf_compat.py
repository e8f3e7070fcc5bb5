"""TensorFlowOnSpark's ``compat`` module: helpers for ``map_fun`` code across TensorFlow versions.

``from sparkdl import compat`` replaces ``from tensorflowonspark import compat``; TensorFlow is
imported only when a function is called (inside a node), never by importing this module.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any


def export_saved_model(model: Any, export_dir: str, is_chief: bool = False) -> str | None:
    """Save a Keras ``model`` for serving; the chief writes ``export_dir``.

    Under MultiWorkerMirroredStrategy saving is collective, so every node must call this: the
    chief saves to ``export_dir``, the other nodes to a scratch directory that is removed
    afterwards (TensorFlowOnSpark left a ``worker_model`` directory in their working directory).
    A path ending in ``.keras`` or ``.h5`` gets that file format; any other path a SavedModel
    (tf-keras: ``model.save(path, save_format="tf")``; Keras 3: ``model.export(path)``).
    Returns ``export_dir`` on the chief, else None.
    """
    if is_chief:
        _save(model, export_dir)
        return export_dir
    scratch = tempfile.mkdtemp(prefix="sparkdl-worker-model-")
    try:
        _save(model, os.path.join(scratch, os.path.basename(export_dir.rstrip("/")) or "model"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None


def save_keras_file(model: Any, path: str) -> None:
    """``model.save(path)`` in Keras' ``.keras`` (zip) format, whichever thread saves it.

    tf-keras keeps "``.keras`` means the zip format" in a thread-local flag that its own save and
    load leave False in any thread but the one that imported it: a second save in, say, a Spark ML
    tuning thread silently writes HDF5 under the ``.keras`` name, which no ``.keras`` loader reads.
    ``save_format="keras_v3"`` forces the zip; Keras 3 refuses that argument and always writes it.
    """
    if _is_keras3(model):
        model.save(path)
    else:
        model.save(path, save_format="keras_v3")


def _is_keras3(model: Any) -> bool:
    return any((c.__module__ or "").split(".")[0] == "keras" for c in type(model).__mro__)


def _save(model: Any, path: str) -> None:
    if path.endswith(".keras"):
        save_keras_file(model, path)
    elif path.endswith(".h5"):
        model.save(path)
    elif _is_keras3(model):  # Keras 3: model.export
        model.export(path)
    else:  # tf-keras (TF_USE_LEGACY_KERAS=1)
        model.save(path, save_format="tf")


def disable_auto_shard(options: Any) -> Any:
    """Turn tf.data auto-sharding off in ``options`` (a ``tf.data.Options``); returns it.

    Each node already holds only its own rows of a Spark feed, so MultiWorkerMirroredStrategy
    must not shard them again. ``feed.as_dataset()`` does this itself.
    """
    import tensorflow as tf

    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return options


def is_gpu_available() -> bool:
    """Whether TensorFlow sees a GPU in this process."""
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU")) > 0
