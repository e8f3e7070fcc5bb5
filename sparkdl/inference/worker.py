"""Executor side: set TensorFlow up once per Python worker, load models once, keep them cached.

**The per-worker model cache** (``_WORKER`` below) is sparkdl's one deliberate piece of
module-global mutable state. Loading a model costs seconds; scoring a batch costs milliseconds.
PySpark keeps Python worker processes alive between tasks (``spark.python.worker.reuse``, on by
default), so a model loaded by one task is reused by every later task, batch and job that the
same worker runs. The cache holds up to :data:`CACHE_CAPACITY` models, least recently used out
first. Its key is the model's location plus a fingerprint of its files (size and modification
time of every file), the signature and the device, so overwriting a model at the same path makes
the next task load the new one. What empties it: ``spark.python.worker.reuse=false`` (every task
starts a fresh worker, so every task loads the model), Spark killing workers that stayed idle
(about a minute, ``PythonWorkerFactory``'s idle timeout), an executor restart, or
:func:`clear_cache`. Large models count against the executor's Python memory
(``spark.executor.pyspark.memory`` / ``spark.executor.memoryOverhead``), times the number of
concurrent tasks per executor, since each task slot has its own worker.

**Devices.** The first time a worker needs TensorFlow, it imports it with the GPUs Spark
assigned to the task (``TaskContext.resources()['gpu']``, mapped with
:func:`sparkdl.gpus.map_spark_addresses`) as ``CUDA_VISIBLE_DEVICES``, or none (CPU) when Spark
assigned none, turns memory growth on, and then *restores* the worker's environment, so a later
task in the same worker (for instance a TFCluster launch task) still inherits the executor's
original ``CUDA_VISIBLE_DEVICES``. If TensorFlow was already imported in this worker by other
code, visibility cannot change any more: sparkdl then pins each call with ``tf.device`` to the
assigned GPU when TensorFlow can see it, and warns otherwise. TensorFlow's thread pools are
sized to the task's ``spark.task.cpus`` (TensorFlow would otherwise start one thread per core of
the machine in every worker).

**Keras.** This module never uses ``tf.keras`` and never sets ``TF_USE_LEGACY_KERAS`` (which
would leak into later tasks of the worker). ``.keras`` files are loaded by the Keras that wrote
them, read from the archive's ``metadata.json`` (``keras_version`` 3.x: ``keras``; 2.x:
``tf_keras``); ``.h5`` files by ``tf_keras``; SavedModel directories by
``tf.saved_model.load``, which needs no Keras at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import threading
import time
import uuid
import warnings
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .. import gpus as gpus_mod
from ..errors import SparkDLError

logger = logging.getLogger(__name__)

CACHE_CAPACITY = 3  #: models kept per Python worker (PySpark's predict_batch_udf keeps 3 too)

GPU_MODES = ("spark", "visible", "none")


class ModelLoadError(SparkDLError):
    """The model cannot be loaded or does not have the requested signature."""


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: name, numpy dtype name and per-row shape (batch axis dropped).

    ``batch`` is the fixed batch size when the model only accepts one (else None).
    """

    name: str
    dtype: str | None
    shape: tuple[int | None, ...] | None
    batch: int | None = None

    def as_dict(self) -> dict:
        """JSON-friendly form (for the driver's signature probe)."""
        return {"name": self.name, "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape),
                "batch": self.batch}

    @classmethod
    def from_dict(cls, value: Mapping) -> "TensorInfo":
        """Inverse of :meth:`as_dict`."""
        shape = value.get("shape")
        return cls(value["name"], value.get("dtype"), None if shape is None else tuple(shape), value.get("batch"))


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: a path (``.keras``/``.h5`` file or SavedModel directory) or a
    user ``make_predict_fn``. Picklable; shipped to executors inside the UDF closure.

    ``uid`` identifies a ``make_predict_fn`` source in the cache (fixed when the source is made,
    on the driver, so all tasks of all jobs using it share one load per worker). ``safe_mode``
    (default True) refuses model files that would run their own Python code when loaded: Keras'
    safe mode for ``.keras`` files, and for ``.h5`` files (whose tf-keras loader has no safe
    mode) any ``Lambda`` layer in the saved config; False is the opt-in for trusted files.
    """

    path: str | None = None
    make_predict_fn: Callable[[], Callable] | None = None
    signature: str = "serving_default"
    tags: tuple[str, ...] | None = None
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    safe_mode: bool = True

    def __post_init__(self):
        if (self.path is None) == (self.make_predict_fn is None):
            raise ValueError("give exactly one of model (a path) or make_predict_fn")
        if self.make_predict_fn is not None and not callable(self.make_predict_fn):
            raise ValueError(f"make_predict_fn must be callable, got {type(self.make_predict_fn).__name__}")

    def describe(self) -> str:
        """A short human description for messages."""
        if self.path is not None:
            return f"model {self.path!r}"
        return f"make_predict_fn {getattr(self.make_predict_fn, '__qualname__', self.make_predict_fn)!r}"


class LoadedModel:
    """A model ready to score numpy batches, with its input/output signature."""

    def __init__(self, kind: str, inputs: list[TensorInfo] | None, outputs: list[TensorInfo] | None,
                 call: Callable[[list[np.ndarray]], Any], keep_alive: Any = None, traced: Any = None):
        self.kind = kind
        self.inputs = inputs
        self.outputs = outputs
        self._call = call
        self._keep_alive = keep_alive  # the object owning the variables (tf.saved_model.load's result)
        self._traced = traced          # the tf.function, for tracing counts

    def __call__(self, arrays: list[np.ndarray]) -> Any:
        """Score one batch: ``arrays`` in input order; returns what the model returns."""
        return self._call(arrays)

    def tracing_count(self) -> int | None:
        """How many times sparkdl's ``tf.function`` traced (1 means no retracing), if it has one."""
        return None if self._traced is None else int(self._traced.experimental_get_tracing_count())

    def signature(self) -> dict:
        """JSON-friendly signature (kind, inputs, outputs)."""
        return {"kind": self.kind,
                "inputs": None if self.inputs is None else [t.as_dict() for t in self.inputs],
                "outputs": None if self.outputs is None else [t.as_dict() for t in self.outputs]}


# ---------------------------------------------------------------------------------------------
# The per-worker state (the one deliberate module global, see the module docstring)
# ---------------------------------------------------------------------------------------------

class _WorkerState:
    def __init__(self):
        self.lock = threading.RLock()
        self.models: OrderedDict[tuple, tuple[LoadedModel, float]] = OrderedDict()
        self.loads = 0
        self.hits = 0
        self.evictions = 0
        self.tf_setup: dict | None = None  # how this worker's TensorFlow was set up
        self.warned: set[str] = set()


_WORKER = _WorkerState()


def cache_info() -> dict:
    """This Python worker's cache counters and entries (call it inside a task to observe reuse)."""
    with _WORKER.lock:
        return {"pid": os.getpid(), "loads": _WORKER.loads, "hits": _WORKER.hits, "evictions": _WORKER.evictions,
                "capacity": CACHE_CAPACITY, "tf_setup": dict(_WORKER.tf_setup or {}),
                "entries": [{"key": repr(key), "loaded_s": round(seconds, 3), "tracing_count": model.tracing_count()}
                            for key, (model, seconds) in _WORKER.models.items()]}


def clear_cache() -> None:
    """Drop every cached model in this Python worker (counters are kept)."""
    with _WORKER.lock:
        _WORKER.models.clear()


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------

def task_gpu_addresses() -> list[str]:
    """GPU addresses Spark assigned to the running task ([] outside a task or without GPUs)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return []
    context = TaskContext.get()
    if context is None:
        return []
    resource = context.resources().get("gpu")
    return list(resource.addresses) if resource is not None else []


def task_cpus() -> int | None:
    """``spark.task.cpus`` of the running task (None outside a task)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return None
    context = TaskContext.get()
    return int(context.cpus()) if context is not None else None


def plan_visible_devices(mode: str, addresses: list[str], inherited: str | None) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` for a worker's first TensorFlow import, or None to leave it.

    ``"spark"``: the task's Spark GPUs (mapped through ``inherited``), ``""`` (CPU) when none;
    ``"visible"``: leave the environment alone; ``"none"``: ``""``.
    """
    if mode not in GPU_MODES:
        raise ValueError(f"gpus must be one of {GPU_MODES}, got {mode!r}")
    if mode == "visible":
        return None
    if mode == "none" or not addresses:
        return ""
    return ",".join(gpus_mod.map_spark_addresses(addresses, inherited))


def task_device(setup: Mapping, addresses: list[str], inherited: str | None) -> tuple[str, str | None]:
    """The ``tf.device`` string for a task, and a warning when it cannot have its own GPU.

    ``setup`` is the worker's TensorFlow set-up record: ``visible`` (the CUDA devices made visible,
    or None when unknown) and ``gpus`` (how many GPUs TensorFlow sees).
    """
    if setup.get("gpus", 0) == 0:
        return "/CPU:0", None
    if setup.get("mode") == "none" or (setup.get("mode") == "spark" and not addresses):
        return "/CPU:0", None
    if not addresses:
        return "/GPU:0", None
    wanted = gpus_mod.map_spark_addresses(addresses, inherited)[0]
    visible = setup.get("visible")
    if visible is not None and wanted in visible:
        return f"/GPU:{visible.index(wanted)}", None
    if visible is None and wanted.isdigit() and int(wanted) < setup["gpus"]:
        return f"/GPU:{int(wanted)}", None
    return "/GPU:0", (f"Spark assigned GPU {wanted} to this task, but TensorFlow in this Python worker "
                      f"(pid {os.getpid()}) was set up earlier with GPUs {visible}; using /GPU:0. Give each "
                      "executor one GPU, or one task slot per GPU, so a worker always gets the same one")


def ensure_tensorflow(mode: str = "spark") -> tuple[Any, str]:
    """Import TensorFlow for this task with the right devices; returns ``(tf, device)``.

    The first call in a worker decides what TensorFlow can see (see the module docstring); later
    calls only choose the device for the current task.
    """
    addresses = task_gpu_addresses()
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    with _WORKER.lock:
        if _WORKER.tf_setup is None:
            _WORKER.tf_setup = _set_up_tensorflow(mode, addresses, inherited)
        setup = _WORKER.tf_setup
    import tensorflow as tf

    if setup.get("mode") != mode and f"mode:{mode}" not in _WORKER.warned:
        _WORKER.warned.add(f"mode:{mode}")
        warnings.warn(f"sparkdl: this Python worker set TensorFlow up with gpus={setup.get('mode')!r}; "
                      f"gpus={mode!r} cannot change that any more", RuntimeWarning, stacklevel=2)
    device, warning = task_device(setup, addresses if mode == "spark" else [], inherited)
    if mode == "none":
        device = "/CPU:0"
    if warning and warning not in _WORKER.warned:
        _WORKER.warned.add(warning)
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    return tf, device


def _set_up_tensorflow(mode: str, addresses: list[str], inherited: str | None) -> dict:
    """Import TensorFlow for this worker (see the module docstring); returns the set-up record."""
    already = "tensorflow" in sys.modules
    visible_value = None if already else plan_visible_devices(mode, addresses, inherited)
    saved = {name: os.environ.get(name) for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    try:
        if visible_value is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible_value
            if visible_value:
                os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # nvidia-smi's numbering
        try:
            import tensorflow as tf
        except ImportError as exc:
            raise ModelLoadError(f"TensorFlow is not installed in this executor's Python ({sys.executable}); "
                                 "install sparkdl-tf[cpu] or sparkdl-tf[gpu] there, or point spark.pyspark.python "
                                 f"at an environment that has it ({exc})") from exc

        # Enumerating devices initialises CUDA, which reads CUDA_VISIBLE_DEVICES now, once.
        physical = tf.config.list_physical_devices("GPU")
        threads = task_cpus() if not already else None
        if threads:
            # TensorFlow would start one thread per core of the machine in every Python worker;
            # Spark gave this task spark.task.cpus cores, so that is what it uses.
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        for gpu in physical:
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except RuntimeError:  # runtime already initialised by earlier code in this worker
                pass
    finally:
        # Restore the worker's environment: later tasks (e.g. a TFCluster launch) inherit it.
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if already:
        visible = None
    elif visible_value is None:
        visible = [d.strip() for d in (inherited or "").split(",") if d.strip()] or None
    else:
        visible = [d for d in visible_value.split(",") if d]
    return {"mode": mode, "by": "preexisting" if already else "sparkdl", "visible": visible,
            "gpus": len(physical), "threads": threads}


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------

def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def fingerprint(path: str) -> str:
    """A digest of a model file or directory's files (relative path, size, mtime): it changes
    when the model is overwritten. Remote paths (``hdfs://``, ``gs://``...) use ``tf.io.gfile``."""
    entries = []
    if _is_remote(path):
        import tensorflow as tf

        if not tf.io.gfile.isdir(path):
            stat = tf.io.gfile.stat(path)
            entries.append(("", stat.length, stat.mtime_nsec))
        else:
            for root, _, files in tf.io.gfile.walk(path):
                for name in files:
                    full = f"{root.rstrip('/')}/{name}"
                    stat = tf.io.gfile.stat(full)
                    entries.append((full[len(path):], stat.length, stat.mtime_nsec))
    else:
        local = _local(path)
        if not os.path.exists(local):
            raise ModelLoadError(f"model path {path!r} does not exist on this executor (host "
                                 f"{os.uname().nodename}); executors need a path they can all read "
                                 "(a shared file system, HDFS, or a cloud store)")
        if os.path.isfile(local):
            stat = os.stat(local)
            entries.append(("", stat.st_size, stat.st_mtime_ns))
        else:
            for root, dirs, files in os.walk(local):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    stat = os.stat(full)
                    entries.append((os.path.relpath(full, local), stat.st_size, stat.st_mtime_ns))
    return hashlib.sha256(json.dumps(sorted(entries)).encode()).hexdigest()[:16]


def _keras_module_for(path: str):
    """The Keras package that can read this file: from ``.keras``'s metadata, ``tf_keras`` for .h5."""
    if path.endswith(".h5") or path.endswith(".hdf5"):
        import tf_keras

        return tf_keras
    version = ""
    try:
        with zipfile.ZipFile(_local(path)) as archive:
            version = json.loads(archive.read("metadata.json")).get("keras_version", "")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        pass  # remote or unusual file: fall back to Keras 3
    if version.startswith("2."):
        import tf_keras

        return tf_keras
    import keras

    return keras


def _numpy_dtype(dtype: Any) -> str | None:
    if dtype is None:
        return None
    name = getattr(dtype, "name", None) or str(dtype)
    return "str" if name == "string" else name


def _shape_info(shape: Any) -> tuple[tuple[int | None, ...] | None, int | None]:
    """``(per-row shape, fixed batch size or None)`` of a TensorShape or tuple (None if unknown)."""
    if shape is None:
        return None, None
    if hasattr(shape, "rank"):
        if shape.rank is None:
            return None, None
        shape = shape.as_list()
    dims = list(shape)
    if not dims:
        return (), None
    return tuple(dims[1:]), dims[0]


def _layer_name(tensor: Any, index: int) -> str:
    """The name of the layer producing a Keras output tensor (what users named it)."""
    history = getattr(tensor, "_keras_history", None)
    layer = getattr(history, "operation", None) or getattr(history, "layer", None)
    return getattr(layer, "name", None) or f"output_{index}"


def _refuse_code_in_h5(path: str, local: str) -> None:
    """Raise ModelLoadError if the ``.h5`` file's model config holds a ``Lambda`` layer.

    tf-keras rebuilds an .h5 model by calling its layers, so a Lambda layer's marshalled Python
    runs during the load: Keras' safe mode covers ``.keras`` files only.
    """
    import h5py

    with h5py.File(local, "r") as handle:
        config = handle.attrs.get("model_config")
    if isinstance(config, bytes):
        config = config.decode("utf-8", errors="replace")
    layers = re.findall(r'"class_name":\s*"(Lambda)"', config or "")
    if layers:
        raise ModelLoadError(f"model {path!r} has a Lambda layer: its Python code would run while the .h5 file "
                             "loads. Load it only if you trust who wrote the file: pass safe_mode=False")


def _load_keras(tf, path: str, device: str, safe_mode: bool = True) -> LoadedModel:
    module = _keras_module_for(path)
    local = _local(path) if not _is_remote(path) else path
    if path.endswith((".h5", ".hdf5")):
        if safe_mode:
            _refuse_code_in_h5(path, local)
        options = {}
    else:
        options = {"safe_mode": safe_mode}
    with tf.device(device):
        try:
            model = module.models.load_model(local, compile=False, **options)
        except ValueError as exc:
            if safe_mode and "safe_mode" in str(exc):  # Keras refused code in a .keras file
                raise ModelLoadError(f"model {path!r}: {exc}") from exc
            raise
    inputs = []
    for tensor in model.inputs:
        shape, batch = _shape_info(tensor.shape)
        inputs.append(TensorInfo(getattr(tensor, "name", None) or f"input_{len(inputs)}",
                                 _numpy_dtype(tensor.dtype), shape, batch))
    names = [t.name.split(":")[0] for t in inputs]
    try:
        structure = model.input
    except (AttributeError, ValueError):  # a Sequential model that was never called
        structure = None
    output_names = [_layer_name(t, i) for i, t in enumerate(model.outputs)]
    if len(set(output_names)) != len(output_names):
        output_names = [f"output_{i}" for i in range(len(output_names))]

    def arrange(xs):
        by_name = dict(zip(names, xs))
        if isinstance(structure, dict):
            return {key: by_name[getattr(value, "name", key).split(":")[0]] for key, value in structure.items()}
        if isinstance(structure, (list, tuple)) and len(names) > 1:
            return [by_name[getattr(value, "name", "").split(":")[0]] for value in structure]
        return xs[0]

    # One trace for every batch size: the batch axis is None in the signature.
    specs = [tf.TensorSpec(None if t.shape is None else (t.batch or None, *t.shape), t.dtype) for t in inputs]

    @tf.function(input_signature=specs)
    def serve(*xs):
        result = model(arrange(list(xs)), training=False)
        if isinstance(result, dict):
            return dict(result)
        if isinstance(result, (list, tuple)):
            return dict(zip(output_names, result))
        return {output_names[0]: result}

    # The traced function's own output structure gives names, dtypes and shapes as returned.
    returned = serve.get_concrete_function().structured_outputs
    outputs = []
    for name in returned:
        shape, batch = _shape_info(returned[name].shape)
        outputs.append(TensorInfo(name, _numpy_dtype(returned[name].dtype), shape, None))

    def call(arrays):
        with tf.device(device):
            return {name: value.numpy() for name, value in serve(*arrays).items()}

    return LoadedModel("keras", inputs, outputs, call, keep_alive=model, traced=serve)


def _load_saved_model(tf, path: str, source: ModelSource, device: str) -> LoadedModel:
    with tf.device(device):
        loaded = tf.saved_model.load(_local(path) if not _is_remote(path) else path,
                                     tags=list(source.tags) if source.tags else None)
    signatures = dict(loaded.signatures)
    if source.signature not in signatures:
        raise ModelLoadError(f"SavedModel {path!r} has no signature {source.signature!r}; it has "
                             f"{sorted(signatures) or 'none'} (export it with model.export() or "
                             "tf.saved_model.save(..., signatures=...))")
    function = signatures[source.signature]
    input_specs = function.structured_input_signature[1]
    # Keep the signature's own order when it is stable: sorted by name (SavedModel stores a map).
    inputs = []
    for name in sorted(input_specs):
        shape, batch = _shape_info(input_specs[name].shape)
        inputs.append(TensorInfo(name, _numpy_dtype(input_specs[name].dtype), shape, batch))
    outputs = []
    for name in sorted(function.structured_outputs):
        spec = function.structured_outputs[name]
        shape, batch = _shape_info(spec.shape)
        outputs.append(TensorInfo(name, _numpy_dtype(spec.dtype), shape, batch))
    names = [t.name for t in inputs]

    def call(arrays):
        with tf.device(device):
            result = function(**{name: tf.constant(array) for name, array in zip(names, arrays)})
        return {name: value.numpy() for name, value in result.items()}

    return LoadedModel("saved_model", inputs, outputs, call, keep_alive=loaded)


def _load_function(tf, source: ModelSource, device: str | None) -> LoadedModel:
    if device is None:
        predict = source.make_predict_fn()
        return LoadedModel("function", None, None, lambda arrays: predict(*arrays))
    with tf.device(device):
        predict = source.make_predict_fn()

    def call(arrays):
        with tf.device(device):
            return predict(*arrays)

    return LoadedModel("function", None, None, call)


def _resolve_kind(path: str) -> str:
    if path.endswith((".keras", ".h5", ".hdf5")):
        return "keras"
    if _is_remote(path):
        return "saved_model"
    local = _local(path)
    if os.path.isdir(local):
        if os.path.exists(os.path.join(local, "saved_model.pb")) or os.path.exists(
                os.path.join(local, "saved_model.pbtxt")):
            return "saved_model"
        raise ModelLoadError(f"{path!r} is a directory without saved_model.pb; give a SavedModel directory "
                             "(model.export(path) or tf.saved_model.save) or a .keras file")
    if os.path.isfile(local) and zipfile.is_zipfile(local):
        return "keras"
    raise ModelLoadError(f"cannot tell what kind of model {path!r} is: use a .keras/.h5 file or a "
                         "SavedModel directory")


def _tensorflow_or_none(mode: str) -> tuple[Any, str | None]:
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        return None, None
    return ensure_tensorflow(mode)


def get_model(source: ModelSource, gpus: str = "spark") -> LoadedModel:
    """The model for ``source`` on this task's device, from this worker's cache or loaded now."""
    if source.path is not None:
        tf, device = ensure_tensorflow(gpus)
        digest = fingerprint(source.path)  # first: it says clearly when the path does not exist
        kind = _resolve_kind(source.path)
        key = (kind, source.path, digest, source.signature, source.tags, device, source.safe_mode)
    else:
        tf, device = _tensorflow_or_none(gpus)
        kind = "function"
        key = ("function", source.uid, device)
    with _WORKER.lock:
        cached = _WORKER.models.get(key)
        if cached is not None:
            _WORKER.models.move_to_end(key)
            _WORKER.hits += 1
            return cached[0]
    started = time.perf_counter()
    if kind == "keras":
        model = _load_keras(tf, source.path, device, source.safe_mode)
    elif kind == "saved_model":
        model = _load_saved_model(tf, source.path, source, device)
    else:
        model = _load_function(tf, source, device)
    seconds = time.perf_counter() - started
    logger.info("sparkdl: loaded %s in %.2f s on %s (worker pid %d)", source.describe(), seconds, device, os.getpid())
    with _WORKER.lock:
        _WORKER.loads += 1
        _WORKER.models[key] = (model, seconds)
        _WORKER.models.move_to_end(key)
        # Older versions of a path whose files changed can never be hit again: drop them first.
        for stale in [k for k in _WORKER.models if k != key and source.path is not None
                      and k[:2] == key[:2] and k[3:] == key[3:]]:
            del _WORKER.models[stale]
            _WORKER.evictions += 1
        while len(_WORKER.models) > CACHE_CAPACITY:
            _WORKER.models.popitem(last=False)
            _WORKER.evictions += 1
    return model
