"""Write sparkdl/inference/keras_allowlist.py: the Keras classes, functions and TensorFlow symbols
that a model config may name when sparkdl loads it in safe mode.

Run it with the project's environment after a Keras or TensorFlow upgrade, review the diff (a new
name must not load or run code from a config), and commit it:

    .venv/bin/python scripts/keras_allowlist.py > sparkdl/inference/keras_allowlist.py
    .venv/bin/ruff format sparkdl/inference/keras_allowlist.py

Every name comes from the installed tf-keras, Keras 3 and TensorFlow registries, less the
reviewed exclusions below: the classes whose ``from_config`` or call rebuilds Python from the
config (marshalled bytecode or a function looked up by name), creates arbitrary TensorFlow ops, or
reads files named by the config. A name a later version adds is refused until it is reviewed here.
"""

from __future__ import annotations

import inspect
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# tf-keras classes that load code or name Python from the config.
TF_KERAS_EXCLUDED = {
    "Lambda": "rebuilds marshalled bytecode, or looks up a function of any module by name",
    "DropoutWrapper": "rebuilds dropout_state_filter_visitor (marshalled bytecode or a named function)",
    "ResidualWrapper": "rebuilds residual_fn (marshalled bytecode or a named function)",
    "DeviceWrapper": "an RNN cell wrapper (the family above)",
    "_RNNCellWrapper": "the base of the RNN cell wrappers",
    "TFOpLambda": "calls any TensorFlow/Keras API symbol by name: allowed only with TF_OP_SYMBOLS",
    "SlicingOpLambda": "as TFOpLambda",
    "ClassMethod": "calls a named method of any TensorFlow class: allowed only with RAGGED_CLASS_METHODS",
    "InstanceMethod": "calls a named method of its input: allowed only with KERAS_TENSOR_ATTRIBUTES",
    "InstanceProperty": "reads a named attribute of its input: allowed only with KERAS_TENSOR_ATTRIBUTES",
    "TensorFlowOpLayer": "creates any TensorFlow op (WriteFile, PyFunc...) from a NodeDef in the config",
    "DenseFeatures": "feature columns: deserializes normalizer functions by name",
    "SequenceFeatures": "feature columns, as DenseFeatures",
    "LinearModel": "feature columns, as DenseFeatures",
    "WideDeepModel": "holds LinearModel",
}

# Keras 3 classes that load code, files or other models from the config.
KERAS_EXCLUDED = {
    "Lambda": "rebuilds marshalled bytecode, or calls a named function",
    "TFSMLayer": "loads a SavedModel from a path in the config",
    "TorchModuleWrapper": "torch.load (pickle) of bytes in the config",
    "JaxLayer": "calls named functions",
    "FlaxLayer": "calls named functions",
    "Operation": "the base of Keras' operations, not one a model holds",
    "Function": "the base of Functional, not one a model holds",
}

# Keras 3 operations whose arguments are functions (control flow, maps, custom gradients).
_CALLABLE_ARGUMENTS = {"f", "fn", "fun", "body", "body_fun", "cond", "true_fn", "false_fn", "branches", "function"}

# TensorFlow namespaces of pure tensor functions (no files, no Python callbacks, no global state).
TF_PURE_NAMESPACES = ("__operators__", "math", "nn", "linalg", "signal", "bitwise", "image", "strings", "sparse")
TF_PURE_NAMESPACES += ("ragged", "dtypes", "sets")
# Modules of pure tensor functions, for the top-level names (tf.concat, tf.reshape...).
TF_PURE_MODULES = {
    "tensorflow.python.ops." + name
    for name in (
        "array_ops",
        "array_ops_stack",
        "gen_array_ops",
        "math_ops",
        "gen_math_ops",
        "clip_ops",
        "linalg_ops",
        "gen_linalg_ops",
        "gen_nn_ops",
        "sort_ops",
        "special_math_ops",
        "manip_ops",
        "histogram_ops",
        "gen_spectral_ops",
        "gen_string_ops",
        "check_ops",
    )
} | {"tensorflow.python.framework.constant_op", "tensorflow.python.framework.tensor_conversion"}


def _classes(registry) -> set[str]:
    return {name for name, value in registry.items() if inspect.isclass(value)}


def tf_keras_classes() -> set[str]:
    from tf_keras.src import constraints, initializers, regularizers
    from tf_keras.src.layers import serialization

    serialization.populate_deserializable_objects()
    initializers.populate_deserializable_objects()
    names = _classes(serialization.LOCAL.ALL_OBJECTS) | _classes(initializers.LOCAL.ALL_OBJECTS)
    for module in (regularizers, constraints):
        names |= {
            name
            for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == module.__name__
        }
    names |= {"Policy", "PolicyV1"}  # tf_keras.src.mixed_precision.policy.deserialize
    return names - set(TF_KERAS_EXCLUDED)


def _exported_classes(prefixes: tuple[str, ...]) -> set[str]:
    from keras.src import api_export

    return {
        name.rsplit(".", 1)[1]
        for name, value in api_export.REGISTERED_NAMES_TO_OBJS.items()
        if name.startswith(prefixes) and inspect.isclass(value)
    }


def _operation_classes() -> set[str]:
    import importlib
    import pkgutil

    import keras.src.ops
    from keras.src.ops.operation import Operation

    names = set()
    for info in pkgutil.iter_modules(keras.src.ops.__path__, "keras.src.ops."):
        if info.name.endswith("_test"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, Operation) and value.__module__ == info.name):
                continue
            parameters = set(inspect.signature(value.call).parameters) | set(inspect.signature(value).parameters)
            if not parameters & _CALLABLE_ARGUMENTS:
                names.add(name)
    return names


def keras_classes() -> set[str]:
    names = _exported_classes(
        ("keras.layers.", "keras.initializers.", "keras.regularizers.", "keras.constraints.", "keras.dtype_policies.")
    )
    names |= {"Functional", "Sequential", "Model", "DTypePolicy", "FloatDTypePolicy", "DTypePolicyMap"}
    names |= _operation_classes()
    return names - set(KERAS_EXCLUDED)


def activation_functions() -> set[str]:
    import keras
    import tf_keras

    names = {name for name in dir(keras.activations) if not name.startswith("_")}
    names |= {name for name in dir(tf_keras.activations) if not name.startswith("_")}
    return {
        name
        for name in names
        if inspect.isfunction(getattr(keras.activations, name, None) or getattr(tf_keras.activations, name, None))
        and name not in {"get", "serialize", "deserialize"}
    }


def tf_op_symbols() -> set[str]:
    import tensorflow  # noqa: F401  (fills the registry)
    from tensorflow.python.util import tf_export

    names = set()
    for name, symbol in tf_export._NAME_TO_SYMBOL_MAPPING.items():
        if name.startswith(("compat.", "keras.", "raw_ops.")) or not callable(symbol):
            continue
        if "." in name:
            if name.split(".", 1)[0] in TF_PURE_NAMESPACES:
                names.add(name)
        elif getattr(symbol, "__module__", None) in TF_PURE_MODULES:
            names.add(name)
    return names


def type_specs() -> tuple[set[str], set[str]]:
    """``(registered TypeSpec names, (module, class) of the specs Keras' __typespec__ names)``."""
    import tensorflow as tf
    from tensorflow.python.framework import type_spec_registry

    specs = (tf.TensorSpec, tf.SparseTensorSpec, tf.RaggedTensorSpec)
    return set(type_spec_registry._NAME_TO_TYPE_SPEC), {f"{spec.__module__}.{spec.__name__}" for spec in specs}


def ragged_class_methods() -> set[str]:
    from tf_keras.src.layers.core import tf_op_layer  # noqa: F401  (registers the dispatchers)

    return {
        "from_value_rowids",
        "from_row_splits",
        "from_row_lengths",
        "from_row_starts",
        "from_row_limits",
        "from_uniform_row_length",
        "from_nested_value_rowids",
        "from_nested_row_splits",
        "from_nested_row_lengths",
        "from_tensor",
        "from_sparse",
    }


# The attributes tf-keras delegates from a ragged or sparse KerasTensor (tf_op_layer.py).
KERAS_TENSOR_ATTRIBUTES = {
    "values",
    "flat_values",
    "row_splits",
    "nested_row_splits",
    "value_rowids",
    "nested_value_rowids",
    "nrows",
    "row_starts",
    "row_limits",
    "row_lengths",
    "nested_row_lengths",
    "bounding_shape",
    "with_values",
    "with_flat_values",
    "with_row_splits_dtype",
    "merge_dims",
    "to_tensor",
    "to_sparse",
    "indices",
    "dense_shape",
}


def _frozenset(name: str, values: set[str], doc: str) -> str:
    lines = [f"# {doc}", f"{name} = frozenset(", '    """']
    line = ""
    for value in sorted(values):
        if line and len(line) + len(value) + 1 > 100:
            lines.append("    " + line)
            line = ""
        line = f"{line} {value}" if line else value
    lines += ["    " + line, '    """.split()', ")", ""]
    return "\n".join(lines)


def main() -> None:
    import keras
    import tensorflow as tf
    import tf_keras

    registered_specs, spec_classes = type_specs()
    out = [
        '"""The names a model config may hold when sparkdl loads it in safe mode',
        f"(tf-keras {tf_keras.__version__}, Keras {keras.__version__}, TensorFlow {tf.__version__}).",
        "",
        "Written by scripts/keras_allowlist.py (which says what is left out and why); do not edit by hand.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        _frozenset(
            "TF_KERAS_CLASSES", tf_keras_classes(), "Classes tf-keras may build (.h5 files, .keras files of Keras 2)."
        ),
        _frozenset(
            "KERAS_CLASSES", keras_classes(), "Classes Keras 3 may build (layers, operations, initializers...)."
        ),
        _frozenset("FUNCTIONS", activation_functions(), "Functions a config may name (Keras' activations)."),
        _frozenset("TF_OP_SYMBOLS", tf_op_symbols(), "TensorFlow functions a TFOpLambda may call: pure tensor math."),
        _frozenset("RAGGED_CLASS_METHODS", ragged_class_methods(), "tf.RaggedTensor methods a ClassMethod may call."),
        _frozenset("KERAS_TENSOR_ATTRIBUTES", KERAS_TENSOR_ATTRIBUTES, "What InstanceMethod/InstanceProperty may use."),
        _frozenset("TYPE_SPECS", registered_specs, "Registered TypeSpec names (tf-keras' JSON decoder)."),
        _frozenset("TYPE_SPEC_CLASSES", spec_classes, "module.Class of the specs Keras' __typespec__ objects name."),
    ]
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
