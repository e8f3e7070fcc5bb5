"""sparkdl.keras.compiling without TensorFlow: the compile Params as JSON-like values, and when they
override how a model was compiled."""

from __future__ import annotations

import pytest

from sparkdl.keras.compiling import CompileSpec, normalise

pytestmark = pytest.mark.timeout(30)


def test_a_spec_overrides_only_where_a_param_is_set():
    assert not CompileSpec().overrides()
    for changed in ({"optimizer": "adam"}, {"loss": "mse"}, {"metrics": []}, {"learning_rate": 0.0}):
        assert CompileSpec(**changed).overrides(), changed  # an empty list or a zero rate is still set


def test_the_fingerprint_names_every_setting():
    spec = CompileSpec("adam", {"y": "mse"}, ["mae"], 0.01)
    assert spec.fingerprint() == {"optimizer": "adam", "loss": {"y": "mse"}, "metrics": ["mae"], "lr": 0.01}
    assert CompileSpec().fingerprint() == {"optimizer": None, "loss": None, "metrics": None, "lr": None}


def test_names_numbers_and_configs_pass_as_json_like_values():
    assert normalise(None, "loss") is None
    assert normalise("adam", "optimizer") == "adam"
    config = {"class_name": "Adam", "config": {"learning_rate": 0.1}}
    assert normalise(config, "optimizer") == config
    assert normalise(("mae", ["mse", 1.5, True]), "metrics") == ["mae", ["mse", 1.5, True]]  # tuples become lists
    assert normalise({1: "mse", "b": ("mae",)}, "loss") == {"1": "mse", "b": ["mae"]}  # keys as JSON has them


@pytest.mark.parametrize("kind", ["optimizer", "loss", "metrics"])
def test_a_function_or_custom_object_is_refused_naming_the_param(kind):
    def my_loss(y_true, y_pred):
        return y_true - y_pred

    with pytest.raises(ValueError, match=rf"^{kind}: function is not a Keras {kind} object, name or config"):
        normalise(my_loss, kind)
    with pytest.raises(ValueError, match=r"compile the model in the function passed as model"):
        normalise({"outputs": [object()]}, kind)  # found however deep it is
