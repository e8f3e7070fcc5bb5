"""Executor side: set TensorFlow up once per Python worker, load models once (:mod:`.loaders`),
keep them cached.

**The per-worker model cache** (``_WORKER`` below) is sparkdl's one deliberate piece of
module-global mutable state. Loading a model costs seconds; scoring a batch costs milliseconds.
PySpark keeps Python worker processes alive between tasks (``spark.python.worker.reuse``, on by
default), so a model loaded by one task is reused by every later task, batch and job that the
same worker runs. The cache holds up to :data:`CACHE_CAPACITY` models, least recently used out
first. Its key is the model's location plus a fingerprint of its files (size and modification
time of every file), the signature and the device, so overwriting a model at the same path makes
the next task load the new one. A versioned model directory
(:class:`~sparkdl.model_versions.ModelVersions`) is listed at most once every
``refresh_seconds`` per worker (:func:`newest_source`); each version has its own path, so old
and new versions are distinct entries under the same capacity. Models on a remote store
(``s3a://``, ``gs://``, ``abfss://``, ``hdfs://``) are listed and read through a
:class:`sparkdl.storage.Storage` made from the settings the driver carried in
:attr:`.model.ModelSource.storage`; the worker keeps one per distinct settings, beside its models
(their store clients are reused by every task). What empties the cache:
``spark.python.worker.reuse=false`` (every task starts a fresh worker, so every task loads the
model), Spark killing workers that stayed idle (about a minute, ``PythonWorkerFactory``'s idle
timeout), an executor restart, or :func:`clear_cache`. Large models count against the
executor's Python memory (``spark.executor.pyspark.memory`` /
``spark.executor.memoryOverhead``), times the number of concurrent tasks per executor, since
each task slot has its own worker.

**Devices.** The first time a worker needs TensorFlow, it imports it with the GPUs Spark
assigned to the task (:func:`sparkdl.common.gpus.task_gpu_addresses`, mapped with
:func:`sparkdl.common.gpus.map_spark_addresses`) as ``CUDA_VISIBLE_DEVICES``, or none (CPU) when Spark
assigned none, turns memory growth on, and then *restores* the worker's environment, so a later
task in the same worker (for instance a TFCluster launch task) still inherits the executor's
original ``CUDA_VISIBLE_DEVICES``. If TensorFlow was already imported in this worker by other
code, visibility cannot change any more: sparkdl then pins each call with ``tf.device`` to the
assigned GPU when TensorFlow can see it, and warns otherwise. TensorFlow's thread pools are
sized to the task's ``spark.task.cpus`` (TensorFlow would otherwise start one thread per core of
the machine in every worker).

**Keras**: see :mod:`.loaders`. The model's types (:class:`~.model.ModelSource`,
:class:`~.model.LoadedModel`, :class:`~.model.ModelLoadError`) live in :mod:`.model`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Mapping

from ..common import gpus as gpus_mod
from ..storage import Storage, StoreSettings, is_remote
from .loaders import fingerprint, load, model_kind
from .model import GPU_MODES, LoadedModel, ModelLoadError, ModelSource

logger = logging.getLogger(__name__)

CACHE_CAPACITY = 3  #: models kept per Python worker (PySpark's predict_batch_udf keeps 3 too)
STORES_CAPACITY = 4  #: Storage objects (one per distinct store settings) kept per Python worker


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
        self.versions: dict[str, tuple[float, tuple[int, str]]] = {}  # base: (listed at, newest)
        self.stores: OrderedDict[StoreSettings, Storage] = OrderedDict()  # settings: their Storage


_WORKER = _WorkerState()


def cache_info() -> dict:
    """This Python worker's cache counters and entries (call it inside a task to observe reuse)."""
    with _WORKER.lock:
        return {
            "pid": os.getpid(),
            "loads": _WORKER.loads,
            "hits": _WORKER.hits,
            "evictions": _WORKER.evictions,
            "capacity": CACHE_CAPACITY,
            "tf_setup": dict(_WORKER.tf_setup or {}),
            "versions": {base: newest[0] for base, (_, newest) in _WORKER.versions.items()},
            "entries": [
                {"key": repr(key), "loaded_s": round(seconds, 3), "tracing_count": model.tracing_count()}
                for key, (model, seconds) in _WORKER.models.items()
            ],
        }


def clear_cache() -> None:
    """Drop every cached model and version listing in this Python worker (counters are kept)."""
    with _WORKER.lock:
        _WORKER.models.clear()
        _WORKER.versions.clear()
        _WORKER.stores.clear()


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------


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
    return "/GPU:0", (
        f"Spark assigned GPU {wanted} to this task, but TensorFlow in this Python worker "
        f"(pid {os.getpid()}) was set up earlier with GPUs {visible}; using /GPU:0. Give each "
        "executor one GPU, or one task slot per GPU, so a worker always gets the same one"
    )


def ensure_tensorflow(mode: str = "spark") -> tuple[Any, str]:
    """Import TensorFlow for this task with the right devices; returns ``(tf, device)``.

    The first call in a worker decides what TensorFlow can see (see the module docstring); later
    calls only choose the device for the current task.
    """
    addresses = gpus_mod.task_gpu_addresses()
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    with _WORKER.lock:
        if _WORKER.tf_setup is None:
            _WORKER.tf_setup = _set_up_tensorflow(mode, addresses, inherited)
        setup = _WORKER.tf_setup
    import tensorflow as tf

    if setup.get("mode") != mode and f"mode:{mode}" not in _WORKER.warned:
        _WORKER.warned.add(f"mode:{mode}")
        warnings.warn(
            f"sparkdl: this Python worker set TensorFlow up with gpus={setup.get('mode')!r}; "
            f"gpus={mode!r} cannot change that any more",
            RuntimeWarning,
            stacklevel=2,
        )
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
            raise ModelLoadError(
                f"TensorFlow is not installed in this executor's Python ({sys.executable}); "
                "install sparkdl-tf[cpu] or sparkdl-tf[gpu] there, or point spark.pyspark.python "
                f"at an environment that has it ({exc})"
            ) from exc

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
    return {
        "mode": mode,
        "by": "preexisting" if already else "sparkdl",
        "visible": visible,
        "gpus": len(physical),
        "threads": threads,
    }


# ---------------------------------------------------------------------------------------------
# The cache
# ---------------------------------------------------------------------------------------------


def _tensorflow_or_none(mode: str) -> tuple[Any, str | None]:
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        return None, None
    return ensure_tensorflow(mode)


def storage_for(source: ModelSource) -> Storage:
    """The :class:`~sparkdl.storage.Storage` made from ``source.storage`` in this worker (one per
    distinct settings, kept with the cache so that store clients are reused across tasks)."""
    settings = source.storage
    with _WORKER.lock:
        storage = _WORKER.stores.get(settings)
        if storage is None:
            storage = _WORKER.stores[settings] = Storage(settings)
            while len(_WORKER.stores) > STORES_CAPACITY:
                _WORKER.stores.popitem(last=False)
        else:
            _WORKER.stores.move_to_end(settings)
        return storage


def newest_source(source: ModelSource) -> tuple[int | None, ModelSource]:
    """``(version, source)`` to score with now: for a versioned source, its newest version (the
    base listed at most once every ``refresh_seconds`` in this worker) as a source of that
    version's own path; any other source as it is, with version None."""
    versions = source.versions
    if versions is None:
        return None, source
    now = time.monotonic()
    with _WORKER.lock:
        seen = _WORKER.versions.get(versions.base)
    if seen is None or now - seen[0] >= versions.refresh_seconds:
        # one listing; raises naming the base when it has none
        seen = (now, versions.newest(storage_for(source) if is_remote(versions.base) else None))
        with _WORKER.lock:
            _WORKER.versions[versions.base] = seen
    version, path = seen[1]
    return version, replace(source, path=path, versions=None)


def get_model(source: ModelSource, gpus: str = "spark") -> LoadedModel:
    """The model for ``source`` on this task's device, from this worker's cache or loaded now
    (a versioned source: its newest version, see :func:`newest_source`)."""
    if source.versions is not None:
        source = newest_source(source)[1]
    storage = storage_for(source) if source.path is not None and is_remote(source.path) else None
    if source.path is not None:
        tf, device = ensure_tensorflow(gpus)
        digest = fingerprint(source.path, storage)  # first: it says clearly when the path does not exist
        kind = model_kind(source.path, storage)
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
    model = load(tf, source, kind, device, storage)
    seconds = time.perf_counter() - started
    logger.info("sparkdl: loaded %s in %.2f s on %s (worker pid %d)", source.describe(), seconds, device, os.getpid())
    with _WORKER.lock:
        _WORKER.loads += 1
        _WORKER.models[key] = (model, seconds)
        _WORKER.models.move_to_end(key)
        # Older versions of a path whose files changed can never be hit again: drop them first.
        for stale in [
            k for k in _WORKER.models if k != key and source.path is not None and k[:2] == key[:2] and k[3:] == key[3:]
        ]:
            del _WORKER.models[stale]
            _WORKER.evictions += 1
        while len(_WORKER.models) > CACHE_CAPACITY:
            _WORKER.models.popitem(last=False)
            _WORKER.evictions += 1
    return model
