"""Safe mode for Keras model files: before any Keras code runs, the model's config (an ``.h5``
file's ``model_config``, a ``.keras`` archive's ``config.json``) must name only what is known to
run no code of the file's: an allowlist, not a list of known gadgets.

Keras rebuilds a model by looking up every class and function its config names and calling them.
Some rebuild Python from the config (``Lambda``, tf-keras' RNN cell wrappers: marshalled bytecode
or a function of any module looked up by name), call any TensorFlow or Keras API symbol by name
(tf-keras' ``TFOpLambda``: ``tf.io.write_file``, ``tf.load_library``...), create any TensorFlow op
(``TensorFlowOpLayer``), or read files the config names (lookup layers' vocabularies).
tf-keras' ``.h5`` loader has no safe mode at all and tf-keras' ``.keras`` safe mode stops only
marshalled lambdas, so sparkdl checks every Keras file itself, with one rule for both Keras:

- every object (a JSON object with ``class_name``) is a class of
  :mod:`.keras_allowlist` for the Keras that will load the file, from a Keras module, under no
  registered name of its own; a few classes are allowed with a checked argument (``TFOpLambda``
  calling pure tensor math, lookup layers without a vocabulary file);
- every function it names is one of Keras' activations;
- marshalled Python (``__lambda__``) is refused.

The top-level ``compile_config`` is not checked: sparkdl loads with ``compile=False``, with which
both Keras drop it unread.
"""

from __future__ import annotations

import json
from typing import Any

from . import keras_allowlist as allow
from .model import ModelLoadError

#: Which Keras loads a file: ``tf_keras`` (``.h5``, ``.keras`` of Keras 2) or ``keras`` (Keras 3).
FLAVOURS = ("tf_keras", "keras")

# Objects of the serialization formats themselves (tensors, shapes, slices...): data, no code.
_DATA_OBJECTS = frozenset(
    {
        "__tensor__",
        "__numpy__",
        "__bytes__",
        "__ellipsis__",
        "__slice__",
        "__tuple__",
        "__keras_tensor__",
        "TensorShape",
        "CompositeTensor",
    }
)

_LOOKUP_LAYERS = frozenset({"StringLookup", "IntegerLookup", "TextVectorization"})


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing repeated keys (JSON readers differ on which one wins)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ValueError(f"repeated keys in {sorted(key for key, _ in pairs)}")
    return data


def parse_config(path: str, raw: Any, what: str) -> Any:
    """The model config ``raw`` (bytes or text) parsed as Keras parses it; ModelLoadError if it
    is not plain JSON (not UTF-8, repeated keys, nested too deep to check)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if not isinstance(text, str):
            raise ValueError(f"a {type(raw).__name__}, not text")
        return json.loads(text, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise ModelLoadError(
            f"model {path!r}: its {what} is not valid JSON ({str(exc)[:200]}), so whether it holds "
            "code cannot be checked. Load it only if you trust who wrote the file: pass safe_mode=False"
        ) from exc


def refuse_code(path: str, config: Any, flavour: str) -> None:
    """Raise ModelLoadError unless every object and function the parsed ``config`` names is on
    the allowlist of the Keras (``flavour``) that will load it. The whole config is walked:
    nested models, wrapped layers, RNN cells, initializers, a node's arguments."""
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}, not {flavour!r}")
    pending: list[tuple[Any, str]] = [(config, "model")]
    while pending:
        node, where = pending.pop()
        if isinstance(node, dict):
            if "class_name" in node:
                problem = _object_problem(node, flavour)
                if problem:
                    raise ModelLoadError(
                        f"model {path!r} may run code of its own while it loads: {where} is {problem}. "
                        "Safe mode builds only Keras' own classes and functions known to run no code "
                        "of the file's (sparkdl/inference/keras_allowlist.py). Load it only if you trust "
                        "who wrote the file: pass safe_mode=False"
                    )
            for key, value in node.items():
                if where == "model" and key == "compile_config":
                    continue  # dropped unread: sparkdl loads with compile=False
                if isinstance(value, (dict, list)):
                    pending.append((value, f"{where}.{key}"))
        elif isinstance(node, list):
            pending.extend((value, f"{where}[{i}]") for i, value in enumerate(node) if isinstance(value, (dict, list)))


def _object_problem(node: dict, flavour: str) -> str | None:
    """Why the object ``node`` may run code (a phrase), or None if it is known not to."""
    name = node.get("class_name")
    if not isinstance(name, str):
        return f"an object whose class_name is {name!r}"
    if name == "__lambda__":
        return "marshalled Python (a lambda)"
    if name in _DATA_OBJECTS:
        return None
    if name == "__typespec__":
        spec = f"{node.get('module')}.{node.get('spec_name')}"
        ok = spec in allow.TYPE_SPEC_CLASSES and node.get("registered_name") is None
        return None if ok else f"the type spec {spec!r}"
    if name == "TypeSpec":  # tf-keras' JSON decoder: a TensorFlow-registered spec
        spec = node.get("type_spec")
        return None if spec in allow.TYPE_SPECS else f"the type spec {spec!r}"
    if name == "function":
        return _function_problem(node, flavour)
    module, registered = node.get("module"), node.get("registered_name")
    label = f"{name!r}" if module is None else f"{name!r} of module {module!r}"
    if module is not None and not _is_keras_module(module, flavour):
        return f"an instance of {label}, a class not of Keras'"
    if registered not in (None, name):
        return f"an instance of {label} registered as {registered!r}"
    classes = allow.TF_KERAS_CLASSES if flavour == "tf_keras" else allow.KERAS_CLASSES
    if name in classes:
        return _argument_problem(name, node.get("config"))
    if flavour == "tf_keras" and name in _CHECKED_TF_KERAS_CLASSES:
        return _CHECKED_TF_KERAS_CLASSES[name](node.get("config"))
    if name == "Lambda":
        return "a Lambda layer (its Python function would run)"
    return f"an instance of {label}, a class not on safe mode's allowlist"


def _function_problem(node: dict, flavour: str) -> str | None:
    function, module = node.get("config"), node.get("module")
    ok = (
        isinstance(function, str)
        and function in allow.FUNCTIONS
        and (module in (None, "builtins") or (isinstance(module, str) and _is_keras_module(module, flavour)))
        and node.get("registered_name") in (None, function)
    )
    return None if ok else f"the function {function!r} of module {module!r}, not one of Keras' activations"


def _is_keras_module(module: Any, flavour: str) -> bool:
    """Whether ``module`` is within the Keras that loads the file (which imports it by name)."""
    packages = ("keras", "tf_keras") if flavour == "tf_keras" else ("keras",)
    return isinstance(module, str) and any(module == p or module.startswith(p + ".") for p in packages)


def _argument_problem(name: str, config: Any) -> str | None:
    """Lookup layers read a vocabulary file a string names (a file outside the model)."""
    if name in _LOOKUP_LAYERS and isinstance(config, dict):
        for key in ("vocabulary", "idf_weights"):
            if isinstance(config.get(key), str):
                return f"a {name} layer whose {key} is read from the file {config[key]!r}"
    return None


def _tf_op_problem(config: Any) -> str | None:
    symbol = config.get("function") if isinstance(config, dict) else None
    if symbol in allow.TF_OP_SYMBOLS:
        return None
    return f"a TFOpLambda layer calling tf.{symbol}, not a pure tensor function"


def _class_method_problem(config: Any) -> str | None:
    config = config if isinstance(config, dict) else {}
    cls, method = config.get("cls_symbol"), config.get("method_name")
    if cls == "RaggedTensor" and method in allow.RAGGED_CLASS_METHODS:
        return None
    return f"a ClassMethod layer calling tf.{cls}.{method}"


def _attribute_problem(config: Any) -> str | None:
    attribute = config.get("attr_name") if isinstance(config, dict) else None
    if attribute in allow.KERAS_TENSOR_ATTRIBUTES:
        return None
    return f"a layer using the attribute {attribute!r} of its input"


# tf-keras classes that are safe with some arguments only (see scripts/keras_allowlist.py).
_CHECKED_TF_KERAS_CLASSES = {
    "TFOpLambda": _tf_op_problem,
    "SlicingOpLambda": _tf_op_problem,
    "ClassMethod": _class_method_problem,
    "InstanceMethod": _attribute_problem,
    "InstanceProperty": _attribute_problem,
}
