"""``sparkdl.compat`` with TensorFlow: ``export_saved_model`` on the chief only (tf-keras and
Keras 3), ``disable_auto_shard`` and ``is_gpu_available``. (TensorFlowOnSpark's other modules,
without TensorFlow: tests/unit/faces/ (test_compat.py, test_gpu_info.py, test_util.py, test_pipeline.py).)"""

from __future__ import annotations

import os

import pytest

from sparkdl import compat

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def tiny_model(keras):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    return model


@pytest.mark.cluster  # imports TensorFlow
def test_export_saved_model_on_the_chief_and_nowhere_on_workers(tf, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    model = tiny_model(tf.keras)  # tf-keras, as in sparkdl's nodes
    assert compat.export_saved_model(model, str(tmp_path / "export"), is_chief=True) == str(tmp_path / "export")
    assert (tmp_path / "export" / "saved_model.pb").exists()
    loaded = tf.saved_model.load(str(tmp_path / "export"))
    assert "serving_default" in loaded.signatures
    assert compat.export_saved_model(model, str(tmp_path / "worker-export")) is None  # is_chief=False
    assert not (tmp_path / "worker-export").exists() and not list((tmp_path / "tmp").glob("sparkdl-worker-model-*"))
    assert not os.path.exists("worker_model")  # TFoS left this behind on every worker
    compat.export_saved_model(model, str(tmp_path / "model.keras"), is_chief=True)
    assert (tmp_path / "model.keras").is_file()


@pytest.mark.cluster  # imports TensorFlow
def test_export_saved_model_with_keras_3(tf, tmp_path):
    keras = pytest.importorskip("keras")
    if not keras.__version__.startswith("3."):
        pytest.skip("Keras 3 is not installed")
    compat.export_saved_model(tiny_model(keras), str(tmp_path / "k3"), is_chief=True)
    assert (tmp_path / "k3" / "saved_model.pb").exists()


@pytest.mark.cluster  # imports TensorFlow
def test_disable_auto_shard_and_is_gpu_available(tf):
    options = tf.data.Options()
    assert compat.disable_auto_shard(options) is options
    assert options.experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.OFF
    assert compat.is_gpu_available() == bool(tf.config.list_physical_devices("GPU"))
