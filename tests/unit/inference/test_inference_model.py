"""sparkdl.inference.model's TensorInfo: the one description of a model's input or output, for
inference's signature probe and the Keras estimator's checks alike."""

from __future__ import annotations

import pytest

from sparkdl.inference.model import TensorInfo
from sparkdl.keras import shipping

pytestmark = pytest.mark.timeout(30)


def test_one_tensor_info_serves_inference_and_keras():
    assert shipping.TensorInfo is TensorInfo
    keras_view = TensorInfo("image", shape=(8, 8, 1))
    assert keras_view.dtype is None and keras_view.form == "dense" and keras_view.width() == 64
    assert TensorInfo("seq", "int64", (None, 4)).width() is None and TensorInfo("x").width() is None
    probed = TensorInfo("vec", "float32", (3,), batch=16, form="sparse")
    assert TensorInfo.from_dict(probed.as_dict()) == probed
    assert TensorInfo.from_dict(keras_view.as_dict()) == keras_view
