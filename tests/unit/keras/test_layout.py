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
