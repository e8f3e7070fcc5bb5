"""What a model is, on both sides: where it comes from (:class:`ModelSource`), its inputs and
outputs (:class:`TensorInfo`), and a loaded model ready to score (:class:`LoadedModel`).

Plain data, picklable, no TensorFlow: the driver builds a :class:`ModelSource` and reads
:class:`TensorInfo` back from the signature probe; executors load and cache models
(:mod:`.worker`, :mod:`.loaders`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..common.errors import ModelLoadError as ModelLoadError  # re-exported: raised here
from ..storage import StoreSettings
from .model_versions import ModelVersions

GPU_MODES = ("spark", "visible", "none")  #: the ``gpus=`` choices (see :mod:`.worker`)


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: name, numpy dtype name and per-row shape (batch axis dropped).

    ``dtype`` is None where it is not known (``sparkdl.keras`` describes a model by names and
    shapes), ``shape`` None where the rank is not, a dimension None where its size is not.
    ``batch`` is the fixed batch size when the model only accepts one (else None); ``form`` is
    ``"dense"``, ``"sparse"`` (a Keras ``Input(sparse=True)``: ``tf.SparseTensor``) or ``"ragged"``
    (``Input(ragged=True)``: ``tf.RaggedTensor``).
    """

    name: str
    dtype: str | None = None
    shape: tuple[int | None, ...] | None = None
    batch: int | None = None
    form: str = "dense"

    def width(self) -> int | None:
        """Values per row (the product of the shape), None when a dimension is unknown."""
        if self.shape is None or any(d is None for d in self.shape):
            return None
        size = 1
        for dim in self.shape:
            size *= dim
        return size

    def as_dict(self) -> dict:
        """JSON-friendly form (for the driver's signature probe)."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
            "batch": self.batch,
            "form": self.form,
        }

    @classmethod
    def from_dict(cls, value: Mapping) -> "TensorInfo":
        """Inverse of :meth:`as_dict`."""
        shape = value.get("shape")
        return cls(
            value["name"],
            value.get("dtype"),
            None if shape is None else tuple(shape),
            value.get("batch"),
            value.get("form", "dense"),
        )


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: a path (``.keras``/``.h5`` file or SavedModel directory) or a
    user ``make_predict_fn``. Picklable; shipped to executors inside the UDF closure.

    ``path`` is a local path (on every executor: a shared file system) or a path on any store of
    :mod:`sparkdl.storage` (``s3://``/``s3a://``/``s3n://``, ``gs://``, ``abfs[s]://``,
    ``hdfs://``). ``storage`` carries the store settings of the user's Spark (``fs.s3a.*``,
    ``fs.azure.*``, ``fs.gs.*``, read on the driver by :func:`sparkdl.storage.spark_conf.from_spark`)
    to the executors, which read the model through :class:`sparkdl.storage.Storage` made from
    them (its ``repr`` names settings, never their values).

    ``uid`` identifies a ``make_predict_fn`` source in the cache (fixed when the source is made,
    on the driver, so all tasks of all jobs using it share one load per worker). ``safe_mode``
    (default True) refuses Keras files whose config names anything but Keras' own classes and
    functions known to run no code of the file's (:mod:`.model_safety`; tf-keras' ``.h5`` loader
    has no safe mode of its own); False is the opt-in for trusted files.

    ``versions``: a versioned model directory (:class:`~sparkdl.model_versions.ModelVersions`,
    whose ``base`` is then ``path``); executors score with its newest version
    (:func:`.worker.newest_source` gives the source of that version's own path).
    """

    path: str | None = None
    make_predict_fn: Callable[[], Callable] | None = None
    signature: str = "serving_default"
    tags: tuple[str, ...] | None = None
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    safe_mode: bool = True
    versions: ModelVersions | None = None
    storage: StoreSettings = field(default_factory=StoreSettings)

    def __post_init__(self):
        if (self.path is None) == (self.make_predict_fn is None):
            raise ValueError("give exactly one of model (a path) or make_predict_fn")
        if self.versions is not None and self.path != self.versions.base:
            raise ValueError(f"a versioned source's path must be its base {self.versions.base!r}, got {self.path!r}")
        if self.make_predict_fn is not None and not callable(self.make_predict_fn):
            raise ValueError(f"make_predict_fn must be callable, got {type(self.make_predict_fn).__name__}")

    def describe(self) -> str:
        """A short human description for messages."""
        if self.versions is not None:
            return f"model versions in {self.path!r}"
        if self.path is not None:
            return f"model {self.path!r}"
        return f"make_predict_fn {getattr(self.make_predict_fn, '__qualname__', self.make_predict_fn)!r}"


class LoadedModel:
    """A model ready to score numpy batches, with its input/output signature."""

    def __init__(
        self,
        kind: str,
        inputs: list[TensorInfo] | None,
        outputs: list[TensorInfo] | None,
        call: Callable[[list[np.ndarray]], Any],
        keep_alive: Any = None,
        traced: Any = None,
    ):
        self.kind = kind
        self.inputs = inputs
        self.outputs = outputs
        self._call = call
        self._keep_alive = keep_alive  # the object owning the variables (tf.saved_model.load's result)
        self._traced = traced  # the tf.function, for tracing counts

    def __call__(self, arrays: list[np.ndarray]) -> Any:
        """Score one batch: ``arrays`` in input order; returns what the model returns."""
        return self._call(arrays)

    def tracing_count(self) -> int | None:
        """How many times sparkdl's ``tf.function`` traced (1 means no retracing), if it has one."""
        return None if self._traced is None else int(self._traced.experimental_get_tracing_count())

    def signature(self) -> dict:
        """JSON-friendly signature (kind, inputs, outputs)."""
        return {
            "kind": self.kind,
            "inputs": None if self.inputs is None else [t.as_dict() for t in self.inputs],
            "outputs": None if self.outputs is None else [t.as_dict() for t in self.outputs],
        }
