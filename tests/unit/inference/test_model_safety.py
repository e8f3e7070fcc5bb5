"""A model path is code: Keras rebuilds a model by calling the classes and functions its config
names, and some of them run Python of the file's (a Lambda layer, tf-keras' RNN cell wrappers,
TFOpLambda calling any TensorFlow symbol...). In safe mode sparkdl loads only files whose config
names nothing but allowlisted Keras classes and functions (sparkdl/inference/model_safety.py).
Here the check before any Keras code runs, on files made with h5py and zipfile; the same gadgets
loaded by TensorFlow's Keras, proving their code does not run: tests/cluster/inference/
test_model_safe_mode_cluster.py."""

from __future__ import annotations

import io
import json
import os
import zipfile

import h5py
import pytest

from sparkdl.inference import loaders, model_safety
from sparkdl.inference.worker import ModelLoadError, ModelSource

from model_files import (
    function,
    functional,
    h5_model,
    input_layer,
    keras3_gadgets,
    keras_archive,
    layer,
    model_file,
    tf_keras_gadgets,
)

pytestmark = pytest.mark.timeout(180)


def _refusal(path, safe_mode=True):
    """The ModelLoadError of loading ``path``: refused before Keras (and TensorFlow) is touched."""
    with pytest.raises(ModelLoadError) as info:
        loaders.load(None, ModelSource(str(path), safe_mode=safe_mode), "keras", None)
    return str(info.value)


def _passes(path, flavour="tf_keras"):
    """The check lets the file through, to be loaded by ``flavour`` (tf-keras or Keras 3)."""
    assert loaders.check_keras_file(str(path), str(path), safe_mode=True) == flavour


K3_FUNCTIONAL = "keras.src.models.functional"


LAMBDA = functional(input_layer(module=None), layer("Lambda", "code", None, None, function="..."), module=None)


@pytest.mark.parametrize("kind", ["h5", "tf_keras"])
@pytest.mark.parametrize("gadget", sorted(tf_keras_gadgets("marker", "h5")))
def test_every_tf_keras_gadget_is_refused_before_keras_runs(tmp_path, kind, gadget):
    """Each way tf-keras runs code of a file (.h5, whose loader has no safe mode, and .keras of
    Keras 2, whose safe mode stops marshalled lambdas only) is refused, naming where it is."""
    config = tf_keras_gadgets(tmp_path / "ran", kind)[gadget]
    message = _refusal(model_file(tmp_path, gadget, kind, config))
    assert "may run code of its own while it loads: model.config.layers[" in message
    assert message.endswith("pass safe_mode=False")
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("gadget", sorted(keras3_gadgets("marker")))
def test_every_keras3_gadget_is_refused_before_keras_runs(tmp_path, gadget):
    message = _refusal(model_file(tmp_path, gadget, "keras", keras3_gadgets(tmp_path / "ran")[gadget]))
    assert "may run code of its own while it loads: model.config.layers[1]" in message


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(LAMBDA, separators=(", ", " : ")),  # a space before the colon
        json.dumps(LAMBDA, indent=4),
        json.dumps(LAMBDA).replace('"Lambda"', '"Lam\\u0062da"'),  # a JSON escape
        json.dumps(LAMBDA).replace('"Lambda"', '"\\u004c\\u0061\\u006d\\u0062\\u0064\\u0061"'),
    ],
    ids=["spaced", "indented", "escaped", "all-escaped"],
)
def test_a_lambda_layer_is_found_however_its_json_is_written(tmp_path, text):
    assert json.loads(text) == LAMBDA  # the same config to tf-keras' json.loads
    assert "model.config.layers[1] is a Lambda layer" in _refusal(h5_model(tmp_path / "model.h5", text))


@pytest.mark.parametrize(
    "config, where",
    [
        (functional(layer("Functional", "inner", layers=[layer("Lambda", "code")])), "layers[0].config.layers[0]"),
        (
            {
                "class_name": "Sequential",
                "config": {"layers": [layer("Sequential", "t", layers=[layer("Lambda", "c")])]},
            },
            "layers[0].config.layers[0]",
        ),
        (functional(layer("TimeDistributed", "td", layer=layer("Lambda", "code"))), "layers[0].config.layer"),
        (
            functional(layer("Bidirectional", "bi", layer=layer("LSTM", "f"), backward_layer=layer("Lambda", "b"))),
            "layers[0].config.backward_layer",
        ),
        (functional(layer("RNN", "r", cell=layer("DropoutWrapper", "w", cell=layer("LSTMCell", "c")))), "config.cell"),
        (functional(layer("keras.layers.Lambda", "code")), "layers[0]"),  # a module-qualified class name
        (functional({"class_name": "Dense", "registered_name": "Lambda", "config": {}}), "layers[0]"),
        (
            functional(layer("Dense", "d", kernel_initializer={"class_name": "Custom", "config": {}})),
            "kernel_initializer",
        ),
        (functional(layer("Dense", "d", activation=function("relu", "my_package"))), "config.activation"),
    ],
    ids=[
        "nested-functional",
        "nested-sequential",
        "time-distributed",
        "bidirectional",
        "cell-wrapper",
        "qualified",
        "registered",
        "initializer",
        "function-module",
    ],
)
def test_an_unknown_object_is_found_anywhere_in_the_model(tmp_path, config, where):
    message = _refusal(h5_model(tmp_path / "model.h5", json.dumps(config)))
    assert "may run code of its own while it loads: model.config." in message and where in message


@pytest.mark.parametrize(
    "text",
    [b"{not json", b"\xff\xfe", b'{"class_name": "Lambda", "class_name": "Dense"}', b"[" * 100_000],
    ids=["broken", "not-utf8", "duplicate-keys", "too-deep"],
)
def test_a_model_config_that_is_not_plain_json_is_refused(tmp_path, text):
    assert "model_config is not valid JSON" in _refusal(h5_model(tmp_path / "model.h5", text))
    path = keras_archive(tmp_path / "model.keras", text.decode("latin-1"))
    assert "config.json is not valid JSON" in _refusal(path)


def _allowed_tf_keras(modular):
    """A tf-keras model of allowlisted parts: ops on tensors, ragged methods, a lookup layer..."""
    mod = "keras.layers" if modular else None
    node = [[["x", 0, 0, {}]]]
    return functional(
        input_layer(module=mod),
        layer("TFOpLambda", "add", [["x", 0, 0, {"y": 1.0}]], mod, function="math.add"),
        layer(
            "SlicingOpLambda",
            "get",
            [["add", 0, 0, {"slice_spec": [{"start": None, "stop": 2}]}]],
            mod,
            function="__operators__.getitem",
        ),
        layer("ClassMethod", "rt", [["x", 0, 0, {}]], mod, cls_symbol="RaggedTensor", method_name="from_tensor"),
        layer("InstanceMethod", "dense", [["rt", 0, 0, {}]], mod, attr_name="to_tensor"),
        layer("StringLookup", "s", node, mod, vocabulary=["a", "b"]),
        layer(
            "Dense",
            "d",
            node,
            mod,
            units=2,
            activation=function("gelu", "keras.activations") if modular else "gelu",
            kernel_initializer={"class_name": "GlorotUniform", "config": {"seed": None}},
            kernel_regularizer={"class_name": "L2", "config": {"l2": 0.01}},
            dtype={"class_name": "Policy", "config": {"name": "mixed_float16"}},
        ),
        module="tf_keras.src.engine.functional" if modular else None,
    )


def test_a_model_of_allowlisted_parts_goes_on_to_keras(tmp_path):
    _passes(h5_model(tmp_path / "model.h5", json.dumps(_allowed_tf_keras(False), indent=2)))
    config = {**_allowed_tf_keras(True), "compile_config": {"loss": function("my_loss", "evil")}}  # dropped unread
    _passes(keras_archive(tmp_path / "model.keras", config, "2.21.0"))
    h5_model(tmp_path / "weights.h5", "")
    with h5py.File(tmp_path / "weights.h5", "a") as handle:  # weights only: tf-keras builds no model from it
        del handle.attrs["model_config"]
    _passes(tmp_path / "weights.h5")


def test_the_keras_that_loads_the_file_decides_what_it_may_name(tmp_path):
    """A Keras 3 operation is not a tf-keras class (and tf-keras' TFOpLambda not Keras 3's)."""
    op = {"module": "keras.src.ops.numpy", "class_name": "Exp", "registered_name": "Exp", "config": {"name": "a"}}
    config = functional(input_layer(), {**op, "name": "a", "inbound_nodes": []}, module=K3_FUNCTIONAL)
    _passes(keras_archive(tmp_path / "k3.keras", config, "3.15.1"), "keras")
    assert "'Exp' of module 'keras.src.ops.numpy'" in _refusal(keras_archive(tmp_path / "k2.keras", config, "2.21.0"))
    tf_op = functional(input_layer(), layer("TFOpLambda", "add", function="math.add"), module=K3_FUNCTIONAL)
    assert "'TFOpLambda'" in _refusal(keras_archive(tmp_path / "k3-tfop.keras", tf_op, "3.15.1"))


def test_a_keras_file_whose_config_cannot_be_read_is_refused(tmp_path):
    (tmp_path / "not-a-zip.keras").write_bytes(b"neither zip nor HDF5")
    assert "no config.json" in _refusal(tmp_path / "not-a-zip.keras")
    with pytest.warns(UserWarning, match="Duplicate name"):
        path = keras_archive(tmp_path / "twice.keras", "{}", extra={"config.json": json.dumps(LAMBDA)})
    assert "holds config.json twice" in _refusal(path)
    (tmp_path / "dir.keras").mkdir()  # Keras 3 also loads a directory holding an archive's files
    with open(tmp_path / "dir.keras" / "config.json", "w") as handle:
        json.dump(functional(input_layer(), layer("Lambda", "code"), module=K3_FUNCTIONAL), handle)
    assert "is a Lambda layer" in _refusal(tmp_path / "dir.keras")
    os.remove(tmp_path / "dir.keras" / "config.json")
    assert "no config.json" in _refusal(tmp_path / "dir.keras")


def test_the_message_names_where_the_code_is(tmp_path):
    config = functional(
        input_layer(), layer("RNN", "r", cell=layer("ResidualWrapper", "w", cell=layer("GRUCell", "c")))
    )
    message = _refusal(keras_archive(tmp_path / "model.keras", config, "2.21.0"))
    assert (
        f"model '{tmp_path / 'model.keras'}' may run code of its own while it loads: "
        "model.config.layers[1].config.cell is an instance of 'ResidualWrapper' of module 'keras.layers', "
        "a class not on safe mode's allowlist"
    ) in message
    with pytest.raises(ValueError, match="flavour"):
        model_safety.refuse_code("m", config, "keras2")


def _zip_bytes(keras_version="2.15.0"):
    """A .keras-looking zip archive (metadata.json names the Keras that wrote it)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("metadata.json", json.dumps({"keras_version": keras_version}))
        archive.writestr("config.json", json.dumps(functional(layer("Dense", "d"))))
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["model.keras", "model.h5", "model.hdf5", "model.bin"])
@pytest.mark.parametrize("userblock_size", [0, 512, 4096])
def test_a_file_that_is_both_zip_and_hdf5_is_refused(tmp_path, name, userblock_size):
    """tf-keras loads any HDF5 file (whatever its name) with the legacy loader, while sparkdl
    would check it as a .keras zip: a file that is both is refused, trusted or not."""
    path = h5_model(tmp_path / name, json.dumps(LAMBDA), userblock_size)
    with open(path, "ab") as handle:  # zip's directory is at the end, HDF5's superblock at the start
        handle.write(_zip_bytes())
    assert zipfile.is_zipfile(path) and h5py.is_hdf5(path)
    for safe_mode in (True, False):
        assert "both a zip archive and an HDF5 file" in _refusal(path, safe_mode)
