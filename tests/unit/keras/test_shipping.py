"""sparkdl.keras.shipping without TensorFlow: a model's flavour, its description for the driver's
checks, and a model function's trip to the nodes (cloudpickled, called there)."""

from __future__ import annotations

import sys

import pytest

from sparkdl.inference.model import TensorInfo
from sparkdl.keras import shipping
from sparkdl.keras.shipping import KERAS3, TF_KERAS, ModelInfo, ModelPayload

pytestmark = pytest.mark.timeout(30)


def keras_class(module: str, **attributes) -> type:
    """A class that says it comes from ``module``, as Keras' own classes do (no Keras imported)."""
    return type("Functional", (), {"__module__": module, **attributes})


class Shape(tuple):
    """A tensor shape with TensorFlow's ``as_list``."""

    def as_list(self):
        return list(self)


class Tensor:
    def __init__(self, name, *dims, dtype=None):
        self.name, self.shape, self.dtype = name, Shape(dims), dtype


class DType:
    """TensorFlow's DType (tf-keras' tensors): its ``name`` is numpy's."""

    def __init__(self, name):
        self.name = name


def test_the_flavour_is_read_from_the_class_or_its_bases():
    assert shipping.flavour_of(keras_class("keras.src.models.functional")()) == KERAS3
    assert shipping.flavour_of(keras_class("tf_keras.src.engine.functional")()) == TF_KERAS
    subclass = type("Mine", (keras_class("keras.src.models.model"),), {"__module__": "my_models"})
    assert shipping.flavour_of(subclass()) == KERAS3  # a user's subclass of a Keras model
    assert shipping.flavour_of(object()) is None
    assert shipping.flavour_of(keras_class("kerasish.models")()) is None  # the package, not a prefix


def test_a_tensor_s_width_is_its_values_per_row():
    assert TensorInfo("x", shape=(28, 28, 1)).width() == 784
    assert TensorInfo("x", shape=()).width() == 1  # a scalar per row
    assert TensorInfo("x", shape=(None, 3)).width() is None and TensorInfo("x", shape=None).width() is None


def test_a_model_s_fingerprint_names_its_inputs_and_outputs():
    model = ModelInfo(
        KERAS3, (TensorInfo("a", shape=(3,)), TensorInfo("b", shape=None)), (TensorInfo("y", shape=(1,)),), True, True
    )
    assert model.fingerprint() == {"inputs": [["a", [3]], ["b", []]], "outputs": [["y", [1]]]}


def test_a_payload_shows_its_kind_flavour_and_size_not_its_bytes():
    assert repr(ModelPayload(TF_KERAS, file_bytes=b"x" * 2048)) == "ModelPayload(file, tf-keras, 2,048 bytes)"
    assert repr(ModelPayload(KERAS3, builder=b"fn")) == "ModelPayload(function, Keras 3, 2 bytes)"


def test_describe_reads_names_row_shapes_and_the_compile_state():
    model = keras_class(
        "keras.src.models.functional",
        inputs=[Tensor("pixels:0", None, 28, 28, dtype="float32"), Tensor("", None, 4, dtype=DType("int64"))],
        outputs=[Tensor("out", None, 10, dtype="float32")],
        compiled=True,
        loss="categorical_crossentropy",
    )()
    assert shipping.describe(model) == ModelInfo(
        KERAS3,
        (TensorInfo("pixels", "float32", (28, 28)), TensorInfo("input_1", "int64", (4,))),
        (TensorInfo("output_0", "float32", (10,)),),
        compiled=True,
        has_loss=True,
    )
    uncompiled = keras_class("tf_keras.src.engine.sequential", inputs=[], outputs=[], output_names=["y"])()
    assert shipping.describe(uncompiled) == ModelInfo(TF_KERAS, (), (), compiled=False, has_loss=False)


def test_what_is_no_keras_model_or_has_no_inputs_yet_is_refused_saying_what_to_do():
    with pytest.raises(ValueError, match=r"model must be a Keras model \(tf-keras or Keras 3\).*got dict"):
        shipping.describe({})

    def unbuilt_inputs(self):
        raise ValueError("This model has not yet been built")

    unbuilt = keras_class("keras.src.models.sequential", inputs=property(unbuilt_inputs))()
    with pytest.raises(ValueError, match=r"no defined inputs yet: start it with an Input layer.*not yet been built"):
        shipping.describe(unbuilt)
    with pytest.raises(ValueError, match="got str"):
        shipping.ship(lambda: "not a model")  # a function is called once on the driver, to check what it builds


def test_a_function_payload_is_built_by_calling_the_unpickled_function():
    from pyspark import cloudpickle

    made = []
    payload = ModelPayload(KERAS3, builder=cloudpickle.dumps(lambda: made.append(1) or "the model"))
    assert shipping.build(payload) == "the model"
    assert made == [], "the payload carries a copy of the function, not a reference"


def test_keeping_saves_zipped_is_a_no_op_for_keras_3():
    had_tf_keras = "tf_keras" in sys.modules
    shipping.keep_tf_keras_saves_zipped(KERAS3)
    assert ("tf_keras" in sys.modules) == had_tf_keras
