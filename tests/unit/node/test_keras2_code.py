"""Keras 3's errors for Keras 2 code get a hint naming TF_USE_LEGACY_KERAS=1; nothing else does.

The messages are Keras 3.15's own, as its tracebacks end (``test_keras2_code_cluster.py`` checks them
against the installed Keras, in a TensorFlow process).
"""

import pytest

from sparkdl.node.keras2_code import is_keras2_code_error
from sparkdl.node.keras_policy import (
    KERAS2_CODE_HINT,
    KERAS2_CODE_LEGACY_HINT,
    KERAS3_OFF_HINT,
    LEGACY_KERAS_ENV,
    MULTI_WORKER_ENV,
    failure_hint,
)

pytestmark = pytest.mark.timeout(60)

FRAME = 'Traceback (most recent call last):\n  File "/x/site-packages/keras/src/saving/saving_api.py", line 1\n'

KERAS2_CALLS = {
    "ModelCheckpoint(save_weights_only=True) to a prefix": "ValueError: When using `save_weights_only=True` in "
    "`ModelCheckpoint`, the filepath provided must end in `.weights.h5` (Keras weights format). "
    "Received: filepath=/m/weights-{epoch:04d}",
    "ModelCheckpoint to a directory": "ValueError: The filepath provided must end in `.keras` (Keras model format). "
    "Received: filepath=/m/model",
    "model.save without an extension": "ValueError: Invalid filepath extension for saving. Please add either a "
    "`.keras` extension for the native Keras format (recommended) or a `.h5` extension. Use `model.export(filepath)` "
    "if you want to export a SavedModel for use with TFLite/TFServing/etc. Received: filepath=/m/export.",
    "save_format=": "ValueError: The `save_format` argument is deprecated in Keras 3. Please remove this argument "
    "and pass a file path with either `.keras` or `.h5` extension.Received: save_format=tf",
    "SavedModel options": "ValueError: The following argument(s) are not supported: ['signatures', 'options']",
    "save_weights to a prefix": "ValueError: The filename must end in `.weights.h5`. Received: filepath=/m/w",
    "save_weights(save_format=)": "TypeError: Model.save_weights() got an unexpected keyword argument 'save_format'",
    "tf.keras.estimator": "AttributeError: module 'keras._tf_keras.keras' has no attribute 'estimator'",
    "tf.keras.losses.mean_squared_error": "AttributeError: module 'keras._tf_keras.keras.losses' "
    "has no attribute 'mean_squared_error'",
    "tf.keras.backend.learning_phase": "AttributeError: module 'keras._tf_keras.keras.backend' "
    "has no attribute 'learning_phase'",
}

NOT_KERAS2_CODE = {
    "the user's own ValueError": "ValueError: boom",
    "a message quoted in a source line": "    raise ValueError('The filename must end in `.weights.h5`. Received: x')\n"
    "ValueError: x",
    "another model.save argument": "ValueError: The following argument(s) are not supported: ['compression']",
    "another save_weights argument": "TypeError: Model.save_weights() got an unexpected keyword argument 'zip'",
    "a typo in tf.keras": "AttributeError: module 'keras._tf_keras.keras' has no attribute 'layres'",
    # tf.keras.callbacks is keras.callbacks itself: `import keras` code (which the setting does not change) too
    "a name missing from keras.callbacks": "AttributeError: module 'keras.callbacks' has no attribute 'BaseLogger'",
    "a name of another module": "AttributeError: module 'keras._tf_keras.keras.layers' has no attribute 'log_cosh'",
    "Keras 3's other ModelCheckpoint error": "ValueError: Unrecognized save_freq: 3s. Expected save_freq are "
    "'epoch' or integer values",
}


def _unsupported_load(path) -> str:
    return (
        f"ValueError: File format not supported: filepath={path}. Keras 3 only supports V3 `.keras` files, "
        "`.weights.h5` files, legacy H5 format files (`.h5` extension), or Orbax checkpoints."
    )


@pytest.mark.parametrize("call", KERAS2_CALLS)
def test_keras3s_errors_for_keras2_calls_name_the_setting(call):
    trace = FRAME + KERAS2_CALLS[call] + "\n"
    assert is_keras2_code_error(trace)
    hint = failure_hint(trace, {}, 2)
    assert hint == KERAS2_CODE_HINT
    assert "This node runs Keras 3" in hint and "TensorFlow 2.16+" in hint
    assert "TF_USE_LEGACY_KERAS=1" in hint and "env={'TF_USE_LEGACY_KERAS': '1'}" in hint
    assert "sparkdl-tf[tf-keras]" in hint and "docs/migration.md" in hint


@pytest.mark.parametrize("value", ["1", "true", "True"])
def test_on_a_tf_keras_node_the_hint_points_at_import_keras(value):
    trace = FRAME + KERAS2_CALLS["save_weights to a prefix"]
    assert failure_hint(trace, {LEGACY_KERAS_ENV: value}, 2) == KERAS2_CODE_LEGACY_HINT
    assert failure_hint(trace, {LEGACY_KERAS_ENV: "0"}, 2) == KERAS2_CODE_HINT


@pytest.mark.parametrize("case", NOT_KERAS2_CODE)
def test_other_errors_get_no_keras2_hint(case):
    trace = FRAME + NOT_KERAS2_CODE[case] + "\n"
    assert not is_keras2_code_error(trace)
    assert failure_hint(trace, {}, 2) == ""


def test_a_chained_keras2_error_counts():
    trace = FRAME + KERAS2_CALLS["save_format="] + "\n\nDuring handling of the above exception, another exception "
    trace += "occurred:\n\n" + FRAME + "RuntimeError: saving failed\n"
    assert failure_hint(trace, {}, 1) == KERAS2_CODE_HINT


def test_loading_counts_only_where_the_path_holds_tensorflows_format(tmp_path):
    checkpoint, saved_model, other = tmp_path / "weights-0003", tmp_path / "export", tmp_path / "typo"
    (tmp_path / "weights-0003.index").write_text("")
    saved_model.mkdir()
    (saved_model / "saved_model.pb").write_text("")
    assert is_keras2_code_error(FRAME + _unsupported_load(checkpoint))
    assert is_keras2_code_error(FRAME + _unsupported_load(saved_model))
    assert not is_keras2_code_error(FRAME + _unsupported_load(other)), "a wrong path is no Keras 2 code"
    assert not is_keras2_code_error(FRAME + _unsupported_load(tmp_path)), "a directory without a SavedModel"


def test_the_keras2_hint_comes_before_the_multi_worker_one():
    off = {MULTI_WORKER_ENV: "0"}
    assert failure_hint(FRAME + KERAS2_CALLS["save_format="], off, 2) == KERAS2_CODE_HINT
    assert failure_hint(FRAME + "ValueError: boom", off, 2) == KERAS3_OFF_HINT
