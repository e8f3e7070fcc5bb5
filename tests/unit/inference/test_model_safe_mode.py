"""A model path is code: a tf-keras ``.h5`` file with a Lambda layer runs its marshalled Python
while it loads (the legacy loader ignores Keras' safe mode). sparkdl refuses such files unless
the caller opts in with ``safe_mode=False``; ``.keras`` files load in Keras' safe mode. Here the
checks before any Keras code runs, on files made with h5py (models saved and loaded by TensorFlow's
Keras: tests/cluster/inference/test_model_safe_mode_cluster.py)."""

from __future__ import annotations

import io
import json
import zipfile

import h5py
import pytest

from sparkdl.inference import loaders
from sparkdl.inference.worker import ModelLoadError, ModelSource

pytestmark = pytest.mark.timeout(180)


# -- the checks before any Keras code runs: files made with h5py, no TensorFlow needed --


def _layer(class_name, name, **config):
    return {"class_name": class_name, "config": {"name": name, **config}}


def _functional(*layers):
    """A tf-keras Functional model config, as ``model.to_json()`` writes it (trimmed)."""
    return {"class_name": "Functional", "config": {"name": "model", "layers": list(layers)}}


def _h5(path, model_config, userblock_size=0):
    """A tf-keras-style .h5 file: the model's JSON config in the ``model_config`` attribute."""
    with h5py.File(path, "w", userblock_size=userblock_size) as handle:
        handle.attrs["model_config"] = model_config.encode() if isinstance(model_config, str) else model_config
        handle.attrs["keras_version"] = b"2.15.0"
        handle.create_group("model_weights")
    return str(path)


def _refusal(path, safe_mode=True):
    """The ModelLoadError of loading ``path``: refused before Keras (and TensorFlow) is touched."""
    with pytest.raises(ModelLoadError) as info:
        loaders.load(None, ModelSource(str(path), safe_mode=safe_mode), "keras", None)
    return str(info.value)


LAMBDA = _functional(_layer("InputLayer", "x"), _layer("Lambda", "code", function="..."), _layer("Dense", "out"))


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
    assert "Lambda layer" in _refusal(_h5(tmp_path / "model.h5", text))


@pytest.mark.parametrize(
    "config",
    [
        _functional(_layer("Functional", "inner", layers=[_layer("Lambda", "code")])),  # a nested model
        {
            "class_name": "Sequential",
            "config": {"name": "s", "layers": [_layer("Sequential", "t", layers=[_layer("Lambda", "code")])]},
        },
        _functional(_layer("TimeDistributed", "td", layer=_layer("Lambda", "code"))),  # a wrapper
        _functional(_layer("Bidirectional", "bi", layer=_layer("LSTM", "f"), backward_layer=_layer("Lambda", "b"))),
        _functional(_layer("keras.layers.Lambda", "code")),  # a module-qualified class name
        _functional({"class_name": "Custom", "registered_name": "Lambda", "config": {}}),  # Keras 3's lookup key
        _functional(_layer("Dense", "d", kernel_initializer=_layer("Lambda", "init"))),  # any dict
    ],
    ids=[
        "nested-functional",
        "nested-sequential",
        "time-distributed",
        "bidirectional",
        "qualified",
        "registered",
        "anywhere",
    ],
)
def test_a_lambda_layer_is_found_anywhere_in_the_model(tmp_path, config):
    assert "Lambda layer" in _refusal(_h5(tmp_path / "model.h5", json.dumps(config)))


@pytest.mark.parametrize(
    "text",
    [b"{not json", b"\xff\xfe", b'{"class_name": "Lambda", "class_name": "Dense"}', b"[" * 100_000],
    ids=["broken", "not-utf8", "duplicate-keys", "too-deep"],
)
def test_a_model_config_that_is_not_plain_json_is_refused(tmp_path, text):
    assert "model_config is not valid JSON" in _refusal(_h5(tmp_path / "model.h5", text))


def test_a_model_without_lambda_layers_passes_the_check(tmp_path):
    config = _functional(_layer("InputLayer", "Lambda"), _layer("TimeDistributed", "td", layer=_layer("Dense", "d")))
    loaders._refuse_code_in_h5("model.h5", _h5(tmp_path / "model.h5", json.dumps(config, indent=2)))


def _zip_bytes(keras_version="2.15.0"):
    """A .keras-looking zip archive (metadata.json names the Keras that wrote it)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("metadata.json", json.dumps({"keras_version": keras_version}))
        archive.writestr("config.json", json.dumps(_functional(_layer("Dense", "d"))))
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["model.keras", "model.h5", "model.hdf5", "model.bin"])
@pytest.mark.parametrize("userblock_size", [0, 512, 4096])
def test_a_file_that_is_both_zip_and_hdf5_is_refused(tmp_path, name, userblock_size):
    """tf-keras loads any HDF5 file (whatever its name) with the legacy loader, while sparkdl
    would check it as a .keras zip: a file that is both is refused, trusted or not."""
    path = _h5(tmp_path / name, json.dumps(LAMBDA), userblock_size)
    with open(path, "ab") as handle:  # zip's directory is at the end, HDF5's superblock at the start
        handle.write(_zip_bytes())
    assert zipfile.is_zipfile(path) and h5py.is_hdf5(path)
    for safe_mode in (True, False):
        assert "both a zip archive and an HDF5 file" in _refusal(path, safe_mode)
