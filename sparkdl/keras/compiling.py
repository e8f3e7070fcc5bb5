"""The ``optimizer``, ``loss``, ``metrics`` and ``learning_rate`` Params: how a shipped model is compiled.

A compiled model keeps what it was compiled with unless a Param overrides it; an uncompiled model
is compiled from the Params (``loss`` is then required: ``checks.py`` says so on the driver).
Param values travel as JSON-like values: Keras names (``"adam"``), serialized configs, or lists
and dicts of them; an optimizer, loss or metric object given on the driver is serialized there
by its own Keras (``normalise``) and rebuilt on each node by the nodes' (``compile_model``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .shipping import flavour_of, keras_module


@dataclass(frozen=True)
class CompileSpec:
    """The compile overrides of one training run (None: keep the model's own)."""

    optimizer: Any = None
    loss: Any = None
    metrics: Any = None
    learning_rate: float | None = None

    def overrides(self) -> bool:
        """Whether any Param overrides how the model was compiled."""
        return any(v is not None for v in (self.optimizer, self.loss, self.metrics, self.learning_rate))

    def fingerprint(self) -> dict:
        """These settings as JSON (the run store compares them)."""
        return {"optimizer": self.optimizer, "loss": self.loss, "metrics": self.metrics, "lr": self.learning_rate}


def normalise(value: Any, kind: str) -> Any:
    """A Param value as JSON-like data: Keras objects (optimizer, loss or metric) become their
    serialized config, lists and dicts are walked; ValueError naming the Param otherwise."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): normalise(v, kind) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v, kind) for v in value]
    flavour = flavour_of(value)
    if flavour is None:
        raise ValueError(
            f"{kind}: {type(value).__name__} is not a Keras {kind} object, name or config; functions and custom "
            "classes cannot travel as Params: compile the model in the function passed as model instead"
        )
    module = getattr(keras_module(flavour), {"optimizer": "optimizers", "loss": "losses"}.get(kind, "metrics"))
    return module.serialize(value)


def _is_config(value: Any) -> bool:
    return isinstance(value, dict) and "class_name" in value


def _revive(value: Any, getter) -> Any:
    """Configs inside a loss or metrics value rebuilt with ``getter`` (names stay names)."""
    if _is_config(value):
        return getter(value)
    if isinstance(value, dict):
        return {k: _revive(v, getter) for k, v in value.items()}
    if isinstance(value, list):
        return [_revive(v, getter) for v in value]
    return value


def compile_model(model: Any, spec: CompileSpec, keras: Any) -> None:
    """Compile ``model`` (inside the strategy's scope) as it was, with ``spec``'s overrides; a
    model compiled as wanted is left alone (a shipped ``.keras`` file keeps its optimizer's state)."""
    compiled = bool(getattr(model, "compiled", False) or getattr(model, "_is_compiled", False))
    if compiled and not spec.overrides():
        return
    args: dict[str, Any] = {}
    if compiled:
        config = model.get_compile_config()
        if config:
            args = dict(keras.saving.deserialize_keras_object(config))
    if spec.optimizer is not None:
        args["optimizer"] = keras.optimizers.get(spec.optimizer)
    if spec.loss is not None:
        args["loss"] = _revive(spec.loss, keras.losses.get)
    if spec.metrics is not None:
        args["metrics"] = _revive(spec.metrics, keras.metrics.get)
    if spec.learning_rate is not None:
        optimizer = keras.optimizers.get(args.get("optimizer") or "rmsprop")
        config = optimizer.get_config()
        config["learning_rate"] = spec.learning_rate
        args["optimizer"] = type(optimizer).from_config(config)
    model.compile(**args)
