"""sparkdl.keras.layout: feature and label columns matched to the model's inputs and outputs."""

from __future__ import annotations

import pytest

from sparkdl.keras.layout import plan_layout

from keras_settings import info

pytestmark = pytest.mark.timeout(60)


def test_one_input_takes_every_feature_column_concatenated_and_reshaped():
    model = info([("image", (8, 8, 1))], [("probs", (10,))])
    layout = plan_layout(model, ["a", "b"], ["label"], None, {"a": 60, "b": 4, "label": 1})
    (piece,) = layout.inputs
    assert piece.columns == ("a", "b") and piece.widths == (60, 4) and piece.shape == (8, 8, 1)
    assert layout.labels[0].scalar and not layout.by_name and layout.columns() == ["a", "b", "label"]
    one_hot = plan_layout(model, ["a", "b"], ["onehot"], "w", {"a": 60, "b": 4, "onehot": 10, "w": 1})
    assert one_hot.labels[0].shape == (10,) and one_hot.sample_weight == "w"
    with pytest.raises(ValueError, match=r"feature_cols: the model's input 'image' has shape \(8, 8, 1\) \(64 values"):
        plan_layout(model, ["a"], ["label"], None, {"a": 60, "label": 1})
    with pytest.raises(ValueError, match=r"label_cols: the model's output 'probs' .* hold 3 per row"):
        plan_layout(model, ["a", "b"], ["l3"], None, {"a": 60, "b": 4, "l3": 3})


def test_several_inputs_and_outputs_are_matched_by_name():
    model = info([("pixels", (64,)), ("meta", (2,))], [("digit", (10,)), ("odd", (1,))])
    widths = {"pixels": 64, "meta": 2, "digit": 1, "odd": 1}
    layout = plan_layout(model, ["meta", "pixels"], ["odd", "digit"], None, widths)
    assert layout.by_name and layout.labels_by_name
    assert [(p.name, p.columns) for p in layout.inputs] == [("pixels", ("pixels",)), ("meta", ("meta",))]
    with pytest.raises(ValueError, match=r"feature_cols: the model has 2 inputs, \['pixels', 'meta'\], .* by input"):
        plan_layout(model, ["pixels", "extra"], ["odd", "digit"], None, {**widths, "extra": 2})
    with pytest.raises(ValueError, match=r"label_cols: the model has 2 outputs"):
        plan_layout(model, ["meta", "pixels"], ["digit"], None, widths)


def test_each_input_is_fed_as_the_dtype_the_model_declares_an_integer_column_exactly():
    """An int64 id above 2**24 has no float32 of its own: an Embedding's int64 input gets the ids as they are."""
    model = info([("item", (1,), "int64"), ("x", (3,), "float32"), ("count", (1,))], [("y", (1,))])
    widths = {"item": 1, "x": 3, "count": 1, "y": 1}
    dtypes = {"item": "int64", "x": "float64", "count": "int32", "y": "int64"}
    layout = plan_layout(model, ["item", "x", "count"], ["y"], None, widths, dtypes)
    fed = {piece.name: piece.dtype for piece in layout.inputs}
    assert fed == {"item": "int64", "x": "float32", "count": "int32"}  # no dtype declared: the column's own
    assert layout.labels[0].dtype == "float32"
    # one input of several integer columns without a declared dtype: the integer type that holds them all
    concatenated = plan_layout(info([("ids", (2,))], [("y", (1,))]), ["a", "b"], ["y"], None,
                               {"a": 1, "b": 1, "y": 1}, {"a": "int16", "b": "int64", "y": "float64"})  # fmt: skip
    assert concatenated.inputs[0].dtype == "int64"
    mixed = plan_layout(info([("v", (2,))], [("y", (1,))]), ["a", "b"], ["y"], None,
                        {"a": 1, "b": 1, "y": 1}, {"a": "int64", "b": "float64", "y": "float64"})  # fmt: skip
    assert mixed.inputs[0].dtype == "float32"


def test_a_column_that_cannot_feed_an_integer_input_is_refused_naming_it():
    model = info([("item", (1,), "int64"), ("x", (3,), "float32")], [("y", (1,))])
    widths = {"item": 1, "x": 3, "y": 1}
    with pytest.raises(ValueError, match=r"feature_cols: column 'item' holds float64 values but the model's input "
                                         r"'item' expects int64"):  # fmt: skip
        plan_layout(model, ["item", "x"], ["y"], None, widths, {"item": "float64", "x": "float64", "y": "int64"})
