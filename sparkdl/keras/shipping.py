"""The model on its way from the driver to every node: Keras' own file format, or a function.

``KerasEstimator(model=...)`` takes a compiled Keras model or a function of no arguments that
returns one. A model object is saved on the driver in Keras' ``.keras`` format and its bytes
travel to the nodes, which load it inside their distribution strategy's scope with Keras' safe
mode on (a model file is untrusted input: no Lambda code runs while it loads). A function is
cloudpickled and called inside the scope on every node, which is how models with custom code
(and models too large to build on the driver twice) should be given.

Keras comes in two flavours here: Keras 3 (``import keras``, and ``tf.keras`` on TensorFlow
2.16+) and tf-keras (``import tf_keras``, or ``tf.keras`` with ``TF_USE_LEGACY_KERAS=1``); the
nodes train with the model's (``fitting.py`` sets their ``TF_USE_LEGACY_KERAS``). A model's
flavour is read from its class; ``ModelInfo`` describes it for the driver's checks
(``checks.py``), ``build`` makes it on a node (or in local mode, on the driver).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from ..common.tf_compat import save_keras_file
from ..inference.model import TensorInfo

TF_KERAS, KERAS3 = "tf_keras", "keras"
FLAVOUR_NAMES = {TF_KERAS: "tf-keras", KERAS3: "Keras 3"}


def flavour_of(obj: Any) -> str | None:
    """``"tf_keras"`` or ``"keras"`` (Keras 3): the Keras package ``obj``'s class comes from, or None."""
    for cls in type(obj).__mro__:
        root = (cls.__module__ or "").split(".")[0]
        if root in (TF_KERAS, KERAS3):
            return root
    return None


def keras_module(flavour: str):
    """The Keras package of ``flavour``."""
    if flavour == TF_KERAS:
        import tf_keras

        return tf_keras
    import keras

    return keras


def keep_tf_keras_saves_zipped(flavour: str) -> None:
    """In this thread, make tf-keras' own ``.keras`` saves (``ModelCheckpoint``'s best model) zips,
    as ``compat.save_keras_file`` does for sparkdl's: the thread-local flag it reads is set back to True.
    A no-op for Keras 3, or if a tf-keras release moves the flag."""
    if flavour != TF_KERAS:
        return
    from tf_keras.src.saving import saving_lib  # the flag has no public setter

    flag = getattr(saving_lib, "_SAVING_V3_ENABLED", None)
    if flag is not None:
        flag.value = True


@dataclass(frozen=True)
class ModelInfo:
    """What the driver's checks need to know of a model: its inputs and outputs (names, the dtypes
    they declare, per-row shapes) and whether it is compiled with a loss."""

    flavour: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    compiled: bool
    has_loss: bool

    def fingerprint(self) -> dict:
        """The model's inputs and outputs as JSON (a run store refuses to resume another model)."""
        return {
            "inputs": [[t.name, list(t.shape or ())] for t in self.inputs],
            "outputs": [[t.name, list(t.shape or ())] for t in self.outputs],
        }


@dataclass(frozen=True)
class ModelPayload:
    """The model as it travels to the nodes: a ``.keras`` file's bytes, or a cloudpickled function."""

    flavour: str  # of the model object; for a function, of the model it built on the driver
    file_bytes: bytes | None = None
    builder: bytes | None = None

    def __repr__(self) -> str:
        size = len(self.file_bytes or self.builder or b"")
        kind = "file" if self.file_bytes is not None else "function"
        return f"ModelPayload({kind}, {FLAVOUR_NAMES.get(self.flavour, self.flavour)}, {size:,} bytes)"


def describe(model: Any) -> ModelInfo:
    """The inputs, outputs and compile state of a Keras model (ValueError naming ``model`` if it has none)."""
    flavour = flavour_of(model)
    if flavour is None:
        raise ValueError(
            f"model must be a Keras model (tf-keras or Keras 3) or a function returning one, got {type(model).__name__}"
        )
    try:
        inputs, outputs = list(model.inputs), list(model.outputs)
    except (AttributeError, ValueError) as exc:
        raise ValueError(
            "model has no defined inputs yet: start it with an Input layer (keras.Input(shape=...)), or "
            f"call it once on data, so its input and output shapes are known ({exc})"
        ) from exc
    input_names = list(getattr(model, "input_names", None) or [_tensor_name(t, i) for i, t in enumerate(inputs)])
    output_names = list(getattr(model, "output_names", None) or [f"output_{i}" for i in range(len(outputs))])
    compiled = bool(getattr(model, "compiled", False) or getattr(model, "_is_compiled", False))
    loss = getattr(model, "loss", None) if compiled else None
    return ModelInfo(
        flavour=flavour,
        inputs=tuple(TensorInfo(name, _dtype(t), _row_shape(t.shape)) for name, t in zip(input_names, inputs)),
        outputs=tuple(TensorInfo(name, _dtype(t), _row_shape(t.shape)) for name, t in zip(output_names, outputs)),
        compiled=compiled,
        has_loss=loss is not None,
    )


def _tensor_name(tensor: Any, index: int) -> str:
    return (getattr(tensor, "name", None) or f"input_{index}").split(":")[0]


def _dtype(tensor: Any) -> str | None:
    """The numpy name of a tensor's dtype (Keras 3 gives a string, tf-keras a ``tf.DType``), or None."""
    dtype = getattr(tensor, "dtype", None)
    if dtype is None:
        return None
    return str(getattr(dtype, "name", None) or dtype)


def _row_shape(shape: Any) -> tuple[int | None, ...] | None:
    if shape is None:
        return None
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
    return tuple(None if d is None else int(d) for d in dims[1:])


def ship(model: Any) -> tuple[ModelPayload, ModelInfo]:
    """The payload the nodes build ``model`` from, and its description for the driver's checks.

    A function is called once here, outside any strategy, to check what it builds (so its
    errors surface on the driver, before any node starts); the nodes call it again in their scope.
    """
    from pyspark import cloudpickle

    if flavour_of(model) is None and callable(model):
        built = model()
        info = describe(built)
        del built
        try:
            return ModelPayload(info.flavour, builder=cloudpickle.dumps(model)), info
        except Exception as exc:  # noqa: BLE001 - pickling fails in many ways; say which Param
            raise ValueError(f"model: the function {model!r} cannot be pickled to travel to the nodes: {exc}") from exc
    info = describe(model)
    scratch = tempfile.mkdtemp(prefix="sparkdl-model-")
    try:
        path = os.path.join(scratch, "model.keras")
        try:
            save_keras_file(model, path)
        except Exception as exc:  # noqa: BLE001 - e.g. a subclassed model without get_config
            raise ValueError(
                f"model: Keras cannot save this {type(model).__name__} in its .keras format ({exc}); pass a function "
                "that builds and compiles the model instead (model=lambda: build_model())"
            ) from exc
        with open(path, "rb") as saved:
            return ModelPayload(info.flavour, file_bytes=saved.read()), info
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build(payload: ModelPayload) -> Any:
    """The model a payload describes: called inside the distribution strategy's scope on a node.

    A ``.keras`` file is loaded with Keras' safe mode on (compiled as it was saved).
    """
    if payload.builder is not None:
        from pyspark import cloudpickle

        return cloudpickle.loads(payload.builder)()
    keras = keras_module(payload.flavour)
    scratch = tempfile.mkdtemp(prefix="sparkdl-model-")
    try:
        path = os.path.join(scratch, "model.keras")
        with open(path, "wb") as out:
            out.write(payload.file_bytes)
        return keras.models.load_model(path, safe_mode=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
