"""Model files that run code of their own while TensorFlow's Keras loads them, loaded as sparkdl's
inference loads them (``worker.get_model(ModelSource(path))``): in safe mode (the default) each is
refused and its code does not run (the marker file it would write is not there); with
``safe_mode=False`` the same file runs it, which proves each gadget real. Files saved by Keras
and files written by hand (tests/support/model_files.py); the check itself, without TensorFlow:
tests/unit/inference/test_model_safety.py."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest

from sparkdl.inference.worker import ModelLoadError, ModelSource, get_model

from model_files import model_file, tf_keras_gadgets

pytestmark = [pytest.mark.timeout(300), pytest.mark.cluster]  # TensorFlow's Keras saves and loads models


def _refused_running_nothing(path, marker):
    with pytest.raises(ModelLoadError, match=r"may run code of its own while it loads: .*pass safe_mode=False"):
        get_model(ModelSource(str(path)), gpus="none")
    assert not marker.exists(), "the file's code ran in safe mode"


def _runs_when_trusted(path, marker):
    """Without safe mode the file's code runs (whatever Keras makes of the rest of the file)."""
    with contextlib.suppress(Exception):
        get_model(ModelSource(str(path), safe_mode=False), gpus="none")
    assert marker.exists(), "the gadget is not live: this test would prove nothing"


@pytest.mark.parametrize(
    "kind, gadget",
    [("h5", "tf_op_write_file_live"), ("tf_keras", "tf_op_write_file_live"), ("tf_keras", "lambda_exec_live")],
)
def test_a_written_gadget_runs_no_code_in_safe_mode(tmp_path, kind, gadget):
    """TFOpLambda calls any TensorFlow symbol a config names (tf.io.write_file here) and tf-keras'
    .keras safe mode lets a Lambda call any function by name (builtins.exec here)."""
    marker = tmp_path / "ran"
    path = model_file(tmp_path, gadget, kind, tf_keras_gadgets(marker, kind)[gadget])
    _refused_running_nothing(path, marker)
    _runs_when_trusted(path, marker)


def _marks(marker):
    """Functions that leave ``marker`` when called (Keras marshals them with their defaults): as a
    Lambda's function, a ResidualWrapper's residual_fn, a DropoutWrapper's state filter."""

    def layer_function(x, marker=str(marker)):
        open(marker, "w").write("ran")
        return x

    def residual_fn(inputs, outputs, marker=str(marker)):
        open(marker, "w").write("ran")
        return outputs

    def state_filter(state, marker=str(marker)):
        open(marker, "w").write("ran")
        return True

    return layer_function, residual_fn, state_filter


def _tf_keras_model(wrapper, marker):
    import tf_keras
    from tf_keras.src.layers.rnn.cell_wrappers import DropoutWrapper, ResidualWrapper

    x = tf_keras.Input((2, 3), name="x")
    layer_function, residual_fn, state_filter = _marks(marker)
    if wrapper == "lambda":
        return tf_keras.Model(x, tf_keras.layers.Lambda(layer_function)(x))
    if wrapper == "residual":
        cell = ResidualWrapper(tf_keras.layers.SimpleRNNCell(3), residual_fn=residual_fn)
    else:
        cell = DropoutWrapper(
            tf_keras.layers.SimpleRNNCell(3), state_keep_prob=0.5, dropout_state_filter_visitor=state_filter
        )
    return tf_keras.Sequential([x, tf_keras.layers.RNN(cell, return_sequences=True), tf_keras.layers.Dense(1)])


@pytest.mark.parametrize("ext", ["h5", "keras"])
@pytest.mark.parametrize("wrapper", ["lambda", "residual", "dropout"])
def test_a_saved_tf_keras_model_with_python_runs_no_code_in_safe_mode(tmp_path, wrapper, ext):
    """A Lambda layer, or an RNN cell wrapper (ResidualWrapper's residual_fn, DropoutWrapper's
    dropout_state_filter_visitor) in an RNN in a Sequential: tf-keras rebuilds their marshalled
    Python while it loads an .h5 file, whatever the caller's safe mode."""
    marker, path = tmp_path / "ran", tmp_path / f"model.{ext}"
    _tf_keras_model(wrapper, marker).save(str(path))
    os.remove(marker)  # building the model called it; only the load may call it again
    _refused_running_nothing(path, marker)
    _runs_when_trusted(path, marker)


def test_a_keras3_model_with_python_runs_no_code_in_safe_mode(tmp_path):
    import keras

    marker, path = tmp_path / "ran", tmp_path / "model.keras"
    x = keras.Input((3,), name="x")
    # Keras 3 saves a named function by its name, a lambda as marshalled bytecode (with its
    # closure; its defaults come back as a list, which the load refuses)
    where = str(marker)
    mark = lambda x: (open(where, "w").write("ran"), x)[1]  # noqa: E731
    keras.Model(x, keras.layers.Lambda(mark, output_shape=(3,))(x)).save(str(path))
    marker.unlink(missing_ok=True)
    _refused_running_nothing(path, marker)
    _runs_when_trusted(path, marker)


def test_a_saved_model_runs_no_python_of_its_own_when_loaded_or_scoring(tmp_path):
    """A SavedModel holds traced graphs, not Python: the Lambda's function ran while it was
    exported, never again (tf.saved_model.load, no Keras)."""
    import keras

    marker, path = tmp_path / "ran", tmp_path / "saved"
    x = keras.Input((3,), name="x")
    keras.Model(x, keras.layers.Lambda(_marks(marker)[0], output_shape=(3,))(x)).export(str(path), verbose=False)
    os.remove(marker)
    model = get_model(ModelSource(str(path)), gpus="none")
    assert model.kind == "saved_model"
    model([np.ones((2, 3), "float32")])
    assert not marker.exists()


def _models():
    """Small models of Keras' own parts (TF ops and slicing on KerasTensors, ragged inputs, an RNN,
    a lookup layer, activations, initializers, regularizers, constraints), compiled."""
    import keras
    import tensorflow as tf
    import tf_keras as k

    x = k.Input((8,), name="x")
    r = k.layers.LSTM(3, return_sequences=True)(k.layers.Embedding(20, 4)(tf.cast(x, "int32")))
    r = k.layers.TimeDistributed(
        k.layers.Dense(2, kernel_regularizer="l2", kernel_constraint=k.constraints.MaxNorm(2))
    )(r)
    r = tf.concat([r[:, -1], tf.math.reduce_mean(r[:, -1], axis=-1, keepdims=True)], axis=-1) * 2.0
    tfk = k.Model(x, k.layers.BatchNormalization()(k.layers.Dense(4, activation="gelu")(r)))
    tfk.compile("adam", "mse", metrics=["mae"])
    ragged = k.Input((None,), ragged=True, name="ragged")
    words = k.Input((), dtype="string", name="words")
    lookup = k.layers.CategoryEncoding(5, output_mode="one_hot")(k.layers.StringLookup(vocabulary=["a", "b"])(words))
    parts = k.Model([ragged, words], [ragged.to_tensor(), lookup])

    x3 = keras.Input((8,), name="x")
    r3 = keras.layers.SimpleRNN(3)(keras.ops.expand_dims(x3, -1))
    r3 = keras.ops.concatenate([r3, keras.ops.mean(r3, axis=-1, keepdims=True)], axis=-1)[:, :3] * 2.0
    k3 = keras.Model(x3, keras.layers.Dense(2, activation="gelu")(keras.layers.BatchNormalization()(r3)))
    k3.compile("adam", "mse", metrics=["mae"])
    return {"tf_keras.h5": tfk, "tf_keras.keras": tfk, "parts.h5": parts, "parts.keras": parts, "keras3.keras": k3}


def test_models_of_keras_own_parts_load_in_safe_mode(tmp_path):
    for name, model in _models().items():
        model.save(str(tmp_path / name))
        assert get_model(ModelSource(str(tmp_path / name)), gpus="none").kind == "keras", name


def test_a_remote_model_is_checked_on_the_bytes_that_load(tmp_path, s3_store):
    """A remote file (here in the session's S3-protocol server, read through sparkdl.storage) is
    downloaded once, checked, and loaded from that copy (before, safe mode could not read a remote
    .h5 file at all)."""
    import tf_keras

    prefix = f"safe-mode-{os.getpid()}-{tmp_path.name}"
    marker = tmp_path / "ran"
    gadget = model_file(tmp_path, "gadget", "h5", tf_keras_gadgets(marker, "h5")["tf_op_write_file_live"])
    s3_store.client.upload_file(str(gadget), s3_store.bucket, f"{prefix}/gadget.h5")
    _refused_running_nothing(f"s3a://{s3_store.bucket}/{prefix}/gadget.h5", marker)
    tf_keras.Sequential([tf_keras.Input((3,)), tf_keras.layers.Dense(2)]).save(str(tmp_path / "plain.h5"))
    s3_store.client.upload_file(str(tmp_path / "plain.h5"), s3_store.bucket, f"{prefix}/plain.h5")
    assert get_model(ModelSource(f"s3a://{s3_store.bucket}/{prefix}/plain.h5"), gpus="none").kind == "keras"


@pytest.mark.parametrize("ext", ["h5", "keras"])
def test_a_file_swapped_after_the_check_is_not_what_loads(tmp_path, monkeypatch, ext):
    """Whoever can write a model path could replace the file between safe mode's check and Keras'
    load (the check takes milliseconds, importing Keras seconds). The seam: right after the check
    passes, the path is replaced (an atomic rename, as an attacker would) by a model whose
    TFOpLambda writes a file while tf-keras loads it. What loads is still the checked model, from a
    private copy, and the gadget's code never runs."""
    import tf_keras

    from sparkdl.inference import model_safety

    marker, path = tmp_path / "ran", tmp_path / f"model.{ext}"
    tf_keras.Sequential([tf_keras.Input((3,), name="x"), tf_keras.layers.Dense(2, name="checked")]).save(str(path))
    kind = "h5" if ext == "h5" else "tf_keras"
    gadget = model_file(tmp_path, "gadget", kind, tf_keras_gadgets(marker, kind)["tf_op_write_file_live"])
    check = model_safety.refuse_code
    swapped = []

    def check_then_swap(*args, **kwargs):
        check(*args, **kwargs)  # passed: the checked model goes on to Keras
        os.replace(gadget, path)
        swapped.append(path)

    monkeypatch.setattr(model_safety, "refuse_code", check_then_swap)
    try:
        loaded = [info.name for info in get_model(ModelSource(str(path)), gpus="none").outputs]
    except Exception as exc:  # whatever Keras made of the gadget: the marker decides first
        loaded = exc
    assert swapped, "the seam was not reached: this test would prove nothing"
    assert not marker.exists(), "Keras loaded the file swapped in after the check, and its code ran"
    assert loaded == ["checked"], loaded
