"""Keras model files written by hand (h5py and zipfile, no TensorFlow): the safe-mode tests'
gadgets, each a config that makes Keras run code of the file's while it loads, and the files
that carry them.

A gadget whose name ends in ``_live`` really runs its code in the Keras of this environment when
loaded without safe mode: it writes ``marker`` (tests/cluster/inference/test_model_safe_mode_cluster.py
loads them). The others are refused before Keras sees them (tests/unit/inference/test_model_safety.py).
"""

from __future__ import annotations

import json
import os
import zipfile

TF_KERAS_VERSION = "2.21.0"  # a .keras file of Keras 2: loaded by tf-keras
KERAS_VERSION = "3.15.1"


def h5_model(path, model_config, userblock_size: int = 0) -> str:
    """A tf-keras .h5 file: the model's JSON config in the ``model_config`` attribute, no weights."""
    import h5py

    text = model_config if isinstance(model_config, (str, bytes)) else json.dumps(model_config)
    with h5py.File(path, "w", userblock_size=userblock_size) as handle:
        handle.attrs["model_config"] = text.encode() if isinstance(text, str) else text
        handle.attrs["keras_version"] = TF_KERAS_VERSION.encode()
        handle.attrs["backend"] = b"tensorflow"
        handle.create_group("model_weights")
    return str(path)


def keras_archive(path, config, keras_version: str = KERAS_VERSION, extra: dict | None = None) -> str:
    """A .keras zip archive (``metadata.json`` names the Keras that wrote it, which loads it)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", json.dumps({"keras_version": keras_version, "date_saved": "now"}))
        archive.writestr("config.json", config if isinstance(config, str) else json.dumps(config))
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return str(path)


def model_file(directory, name: str, kind: str, config) -> str:
    """``config`` in a file of ``kind``: ``h5``, ``tf_keras`` (.keras of Keras 2) or ``keras``."""
    if kind == "h5":
        return h5_model(os.path.join(directory, f"{name}.h5"), config)
    version = TF_KERAS_VERSION if kind == "tf_keras" else KERAS_VERSION
    return keras_archive(os.path.join(directory, f"{name}.keras"), config, version)


# -- configs as tf-keras (h5: no "module" keys) and Keras 3 write them, trimmed --


def layer(class_name: str, name: str, inbound_nodes=None, object_module: str | None = "keras.layers", **config) -> dict:
    """A layer entry of a Functional model's ``layers`` list."""
    entry = {"class_name": class_name, "config": {"name": name, "trainable": True, "dtype": "float32", **config}}
    if object_module is not None:
        entry["module"] = object_module
        entry["registered_name"] = None
    entry["name"] = name
    entry["inbound_nodes"] = inbound_nodes or []
    return entry


def input_layer(name: str = "x", module: str | None = "keras.layers") -> dict:
    entry = layer("InputLayer", name, object_module=module, batch_input_shape=[None, 3])
    del entry["config"]["trainable"]
    return entry


def functional(*layers, output: str = "x", module: str | None = "tf_keras.src.engine.functional") -> dict:
    """A tf-keras Functional model config; ``module=None`` for an .h5 file's."""
    model = {
        "class_name": "Functional",
        "config": {
            "name": "model",
            "layers": list(layers),
            "input_layers": [["x", 0, 0]],
            "output_layers": [[output, 0, 0]],
        },
    }
    if module is not None:
        model["module"] = module
        model["registered_name"] = "Functional"
    return model


def on_constant(value, **kwargs) -> list:
    """A tf-keras node calling the layer on a constant (not on a model input): eagerly, at load."""
    return [["_CONSTANT_VALUE", -1, value, kwargs]]


def function(name: str, module: str) -> dict:
    """A function named in a config (Keras looks it up in ``module``)."""
    return {"module": module, "class_name": "function", "config": name, "registered_name": None}


def writes_marker(marker) -> str:
    """Python source that leaves the marker file."""
    return f"open({str(marker)!r}, 'w').write('ran')"


def tf_keras_gadgets(marker, kind: str) -> dict[str, dict]:
    """Model configs that run code while tf-keras loads them (``kind``: ``h5`` or ``tf_keras``)."""
    modular = kind != "h5"  # .keras files of tf-keras name each object's module
    mod = "keras.layers" if modular else None
    inp = input_layer(module=mod)

    def model(*layers):
        return functional(inp, *layers, module="tf_keras.src.engine.functional" if modular else None)

    gadgets = {
        # TF symbols by name: the call runs eagerly on a constant input while the model is rebuilt
        "tf_op_write_file_live": model(
            layer("TFOpLambda", "w", on_constant(str(marker), contents="ran"), mod, function="io.write_file")
        ),
        "tf_op_load_library": model(layer("TFOpLambda", "l", on_constant("evil.so"), mod, function="load_library")),
        "tf_op_keras_api": model(layer("TFOpLambda", "k", on_constant("x"), mod, function="keras.models.load_model")),
        "tf_op_raw_op": model(layer("SlicingOpLambda", "r", on_constant("x"), mod, function="raw_ops.WriteFile")),
        "class_method": model(
            layer("ClassMethod", "c", on_constant("x"), mod, cls_symbol="io.gfile.GFile", method_name="__init__")
        ),
        "instance_method": model(layer("InstanceMethod", "i", on_constant("x"), mod, attr_name="__reduce__")),
        "tf_op_layer": model(
            layer("TFOpLambda", "c", on_constant(str(marker)), mod, function="convert_to_tensor"),  # allowed
            layer(
                "TensorFlowOpLayer",
                "t",
                [[["c", 0, 0, {}]]],
                mod,
                node_def={"name": "WriteFile", "op": "WriteFile", "input": ["f", "c"]},
                constants={"1": "ran"},
            ),
        ),
        # a function of any module, named in the config
        "lambda_exec_live": model(
            layer(
                "Lambda",
                "l",
                on_constant(writes_marker(marker)),
                mod,
                function=function("exec", "builtins"),
                function_type="function",
                module="builtins",
                output_shape=None,
                output_shape_type="raw",
                output_shape_module=None,
                arguments={},
            )
        ),
        "activation_named_function": model(
            layer("Dense", "d", [[["x", 0, 0, {}]]], mod, units=2, activation=function("exec", "os"))
        ),
        "text_vectorization_split": model(
            layer("TextVectorization", "t", [[["x", 0, 0, {}]]], mod, split=function("system", "os"))
        ),
        "initializer_of_any_module": model(
            layer(
                "Dense",
                "d",
                [[["x", 0, 0, {}]]],
                mod,
                units=2,
                kernel_initializer={
                    "class_name": "Popen",
                    "module": "subprocess",
                    "config": {"args": ["true"]},
                },
            )
        ),
        # files outside the model
        "lookup_vocabulary_file": model(layer("StringLookup", "s", [[["x", 0, 0, {}]]], mod, vocabulary="/etc/passwd")),
        # classes whose configs hold functions or feature columns, and custom classes
        "time_distributed_lambda": model(
            layer("TimeDistributed", "td", [[["x", 0, 0, {}]]], mod, layer={"class_name": "Lambda", "config": {}})
        ),
        "registered_custom_class": model(
            {**layer("Dense", "d", [[["x", 0, 0, {}]]], mod, units=2), "registered_name": "evil>Dense"}
        ),
        "dense_features": model(layer("DenseFeatures", "f", [[["x", 0, 0, {}]]], mod, feature_columns=[])),
        "unknown_class": model(layer("MyLayer", "m", [[["x", 0, 0, {}]]], mod)),
        "marshalled_lambda_object": model(
            layer(
                "Dense", "d", [[["x", 0, 0, {}]]], mod, units=2, activation={"class_name": "__lambda__", "config": {}}
            )
        ),
        "typespec_any_module": model(
            layer(
                "InputLayer",
                "s",
                mod,
                type_spec={
                    "class_name": "__typespec__",
                    "spec_name": "system",
                    "module": "os",
                    "registered_name": None,
                },
            )
        ),
    }
    return gadgets


def keras3_gadgets(marker) -> dict[str, dict]:
    """Keras 3 model configs that would run code or read files (Keras' own safe mode refuses most)."""

    def keras_tensor(layer_name):
        return {
            "class_name": "__keras_tensor__",
            "config": {"shape": [None, 3], "dtype": "float32", "keras_history": [layer_name, 0, 0]},
        }

    def model(extra):
        extra = {**extra, "inbound_nodes": [{"args": [keras_tensor("x")], "kwargs": {}}]}
        inp = {
            "module": "keras.layers",
            "class_name": "InputLayer",
            "registered_name": None,
            "name": "x",
            "config": {"batch_shape": [None, 3], "dtype": "float32", "name": "x"},
            "inbound_nodes": [],
        }
        return {
            "module": "keras.src.models.functional",
            "class_name": "Functional",
            "registered_name": "Functional",
            "config": {
                "name": "m",
                "trainable": True,
                "layers": [inp, extra],
                "input_layers": [["x", 0, 0]],
                "output_layers": [["x", 0, 0]],
            },
        }

    def k3_layer(class_name, module="keras.layers", **config):
        return {
            "module": module,
            "class_name": class_name,
            "registered_name": None,
            "name": "g",
            "config": {"name": "g", **config},
        }

    return {
        "lambda_marshalled": model(k3_layer("Lambda", function={"class_name": "__lambda__", "config": {"code": ""}})),
        "lambda_named_keras_function": model(k3_layer("Lambda", function=function("set_floatx", "keras.config"))),
        "tfsm_layer": model(k3_layer("TFSMLayer", module="keras.layers", filepath=str(marker))),
        "torch_module": model(k3_layer("TorchModuleWrapper", module="keras.layers", module_bytes="gASV")),
        "map_op_callable": model(k3_layer("Map", module="keras.src.ops.core")),
        "vocabulary_file": model(k3_layer("StringLookup", vocabulary="/etc/passwd")),
        "other_package": model(k3_layer("Dense", module="keras_hub.layers", units=2)),
        "activation_other_module": model(k3_layer("Dense", units=2, activation=function("get_file", "keras.utils"))),
    }
