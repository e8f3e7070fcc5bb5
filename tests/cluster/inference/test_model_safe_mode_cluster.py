"""Models saved and loaded by TensorFlow's Keras: a tf-keras ``.h5`` file with a Lambda layer runs
its marshalled Python while it loads, so sparkdl refuses it unless the caller opts in with
``safe_mode=False``; a plain ``.h5`` model loads in safe mode. (The checks before any Keras code
runs, on files made with h5py: tests/unit/inference/test_model_safe_mode.py.)"""

from __future__ import annotations

import os

import pytest

from sparkdl.inference.worker import ModelLoadError, ModelSource, get_model

pytestmark = pytest.mark.timeout(180)


tensorflow = pytest.mark.cluster  # TensorFlow's Keras saves and loads models


def _lambda_model_h5(path, marker):
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tf_keras

    def leave_a_mark(x, marker=str(marker)):  # runs whenever the layer is called: at load too
        open(marker, "w").write("ran")
        return x

    inputs = tf_keras.Input((3,), name="x")
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(tf_keras.layers.Lambda(leave_a_mark)(inputs)))
    model.save(path)
    os.remove(marker)  # building the model called it once; only the load may call it again


@tensorflow
def test_an_h5_model_with_python_code_is_refused_unless_trusted(tmp_path):
    path, marker = tmp_path / "model.h5", tmp_path / "ran"
    _lambda_model_h5(str(path), marker)
    with pytest.raises(ModelLoadError, match=r"Lambda layer.*pass safe_mode=False"):
        get_model(ModelSource(str(path)), gpus="none")
    assert not marker.exists(), "no code of the file ran"
    model = get_model(ModelSource(str(path), safe_mode=False), gpus="none")  # the explicit opt-in
    assert model.kind == "keras" and marker.exists()


@tensorflow
def test_a_plain_h5_model_loads_in_safe_mode(tmp_path):
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tf_keras

    path = tmp_path / "plain.h5"
    tf_keras.Sequential([tf_keras.Input((3,), name="x"), tf_keras.layers.Dense(2)]).save(str(path))
    assert get_model(ModelSource(str(path)), gpus="none").kind == "keras"
