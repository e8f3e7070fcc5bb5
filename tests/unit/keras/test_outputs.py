"""Which kind of output a model has (Spark ML's output columns follow it), read from its Keras config."""

import pytest

from sparkdl.keras.outputs import REGRESSION, SIGMOID, SIGMOID_LOGITS, SOFTMAX, SOFTMAX_LOGITS, output_kind

pytestmark = pytest.mark.timeout(30)


def _dense(name, activation, units=3):
    return {"class_name": "Dense", "config": {"name": name, "units": units, "activation": activation}}


def _sequential(*layers, loss=None):
    saved = {"class_name": "Sequential", "config": {"layers": [{"class_name": "InputLayer", "config": {}}, *layers]}}
    if loss is not None:
        saved["compile_config"] = {"loss": loss}
    return saved


def _loss(class_name, name, from_logits):
    return {"class_name": class_name, "config": {"name": name, "from_logits": from_logits}}


@pytest.mark.parametrize(
    "saved, kind",
    [
        (_sequential(_dense("d", "softmax")), SOFTMAX),
        (_sequential(_dense("d", "sigmoid", 1), loss="binary_crossentropy"), SIGMOID),
        (_sequential(_dense("d", "relu"), {"class_name": "Softmax", "config": {"name": "s"}}), SOFTMAX),
        (_sequential(_dense("d", {"class_name": "function", "config": "softmax"})), SOFTMAX),
        (_sequential(_dense("d", "linear"), loss="sparse_categorical_crossentropy"), SOFTMAX),
        (_sequential(_dense("d", "linear"), loss=_loss("SparseCategoricalCrossentropy", "x", True)), SOFTMAX_LOGITS),
        (
            _sequential(_dense("d", "linear", 1), loss=_loss("BinaryCrossentropy", "binary_crossentropy", True)),
            SIGMOID_LOGITS,
        ),
        (
            _sequential(_dense("d", "linear"), loss=[_loss("X", "sparse_categorical_crossentropy", True)]),
            SOFTMAX_LOGITS,
        ),
        (_sequential(_dense("d", "linear", 1), loss="mse"), REGRESSION),
        (_sequential(_dense("d", "relu", 1)), REGRESSION),
        ({}, REGRESSION),  # a subclassed model's file says nothing: set output_kind
        ({"config": "garbage", "compile_config": {"loss": 3}}, REGRESSION),
    ],
)
def test_output_kind_from_the_saved_config(saved, kind):
    assert output_kind(saved) == kind


def test_a_functional_models_output_layer_is_the_named_one_not_the_last_listed():
    saved = {
        "config": {
            "layers": [_dense("head", "softmax"), _dense("side", "relu")],
            "output_layers": [["head", 0, 0]],
        }
    }
    assert output_kind(saved) == SOFTMAX


@pytest.mark.parametrize(
    "saved, kind",
    [
        (_sequential(_dense("d", "sigmoid", 1), loss="mse"), REGRESSION),  # a bounded regressor, not a classifier
        (_sequential(_dense("d", "softmax"), loss="kl_divergence"), REGRESSION),
        (_sequential(_dense("d", "log_softmax")), SOFTMAX_LOGITS),
        (_sequential(_dense("d", "linear"), loss={"class_name": "function", "config": "binary_crossentropy"}), SIGMOID),
        (_sequential(_dense("d", "linear"), loss={"head": "sparse_categorical_crossentropy"}), SOFTMAX),
        # Keras 3 writes one output's output_layers flat: [name, 0, 0]
        (
            {"config": {"layers": [_dense("head", "softmax"), _dense("x", "relu")], "output_layers": ["head", 0, 0]}},
            SOFTMAX,
        ),
    ],
)
def test_the_loss_decides_before_the_activation_and_keras3s_other_config_forms(saved, kind):
    assert output_kind(saved) == kind
