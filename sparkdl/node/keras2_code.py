"""Keras 3's own errors for Keras 2 code, recognised in a failed node's traceback.

TensorFlow 2.16+ ships Keras 3 as ``tf.keras``. Keras 2 code (TensorFlowOnSpark's examples among
it) then fails on calls Keras 2 took: ``model.save(path)`` without an extension, ``save_format=``,
``save_weights`` or ``ModelCheckpoint(save_weights_only=True)`` to a TensorFlow checkpoint prefix,
loading a SavedModel or checkpoint, and ``tf.keras`` names Keras 3 dropped. Keras 3's messages
never say that ``TF_USE_LEGACY_KERAS=1`` runs that code unchanged (on tf-keras):
``keras_policy.failure_hint`` does, where :func:`is_keras2_code_error` recognises them.

Each signature is Keras 3.15's exact exception text (``keras/src/saving/saving_api.py``,
``keras/src/callbacks/model_checkpoint.py``, ``keras/src/models/model.py``, and the ``tf.keras``
module ``keras._tf_keras.keras``), for a call that tf-keras 2.21 runs. Loading errors count only
where the path really holds a TensorFlow checkpoint or SavedModel: a wrong path is no Keras 2 code.
"""

from __future__ import annotations

import os
import re

#: Exception lines (as ``traceback.format_exc`` ends them) Keras 3 raises on Keras 2 calls.
_SIGNATURES = tuple(
    re.compile(pattern, re.MULTILINE)
    for pattern in (
        # ModelCheckpoint(save_weights_only=True) to a checkpoint prefix ("weights-{epoch:04d}")
        r"^ValueError: When using `save_weights_only=True` in `ModelCheckpoint`, the filepath provided must "
        r"end in `\.weights\.h5` ",
        # ModelCheckpoint to a SavedModel directory
        r"^ValueError: The filepath provided must end in `\.keras` \(Keras model format\)\. ",
        # model.save(path) without an extension: Keras 2 wrote a SavedModel
        r"^ValueError: Invalid filepath extension for saving\. Please add either a `\.keras` extension ",
        # model.save(path, save_format="tf")
        r"^ValueError: The `save_format` argument is deprecated in Keras 3\. Please remove this argument ",
        # model.save(path, signatures=..., options=..., save_traces=...): SavedModel options
        r"^ValueError: The following argument\(s\) are not supported: "
        r"\['(?:signatures|options|save_traces)'(?:, '(?:signatures|options|save_traces)')*\]$",
        # model.save_weights(prefix): Keras 2 wrote a TensorFlow checkpoint
        r"^ValueError: The filename must end in `\.weights\.h5`\. Received: ",
        # model.save_weights(path, save_format=... / options=...)
        r"^TypeError: Model\.save_weights\(\) got an unexpected keyword argument '(?:save_format|options)'$",
    )
)

#: Keras 3's message on loading a path it cannot read; the path is group 1.
_UNSUPPORTED_LOAD = re.compile(
    r"^ValueError: File format not supported: filepath=(.+?)\. Keras 3 only supports V3 `\.keras` files, ",
    re.MULTILINE,
)

#: ``tf.keras`` names of tf-keras 2.21 that Keras 3.15's ``tf.keras`` (``keras._tf_keras.keras``) lacks,
#: by submodule ("" is ``tf.keras`` itself). Reached as ``tf.keras.<module>.<name>`` only.
_DROPPED_NAMES = {
    module: frozenset(names.split())
    for module, names in {
        "": "dtensor estimator experimental saving",
        "backend": "experimental function in_test_phase in_train_phase learning_phase learning_phase_scope "
        "local_conv1d local_conv2d manual_variable_initialization normalize_batch_in_training placeholder "
        "print_tensor random_binomial reset_uids set_learning_phase",
        "layers": "AbstractRNNCell DenseFeatures LocallyConnected1D LocallyConnected2D experimental",
        "losses": "kl_divergence log_cosh mean_absolute_error mean_absolute_percentage_error mean_squared_error "
        "mean_squared_logarithmic_error",
        "metrics": "MeanRelativeError MeanTensor experimental kl_divergence log_cosh mean_absolute_error "
        "mean_absolute_percentage_error mean_squared_error mean_squared_logarithmic_error",
    }.items()
}
_MISSING_ATTRIBUTE = re.compile(
    r"^AttributeError: module 'keras\._tf_keras\.keras(?:\.(\w+))?' has no attribute '(\w+)'$", re.MULTILINE
)


def is_keras2_code_error(traceback_text: str) -> bool:
    """Whether ``traceback_text`` holds one of Keras 3's exceptions for a call tf-keras runs."""
    if any(signature.search(traceback_text) for signature in _SIGNATURES):
        return True
    if any(_holds_tensorflow_format(m.group(1)) for m in _UNSUPPORTED_LOAD.finditer(traceback_text)):
        return True
    return any(name in _DROPPED_NAMES.get(module, ()) for module, name in _MISSING_ATTRIBUTE.findall(traceback_text))


def _holds_tensorflow_format(path: str) -> bool:
    """A local TensorFlow checkpoint prefix or SavedModel directory: what Keras 2 saved and loaded."""
    return os.path.isfile(path + ".index") or os.path.isfile(os.path.join(path, "saved_model.pb"))
