"""sparkdl.spark_ml.param_table: every Param defined once, and every stage made of the table's Params.

The stages are built without Spark (a Params object needs no SparkContext), so this checks each
stage's real Params, defaults and accessors against the table, and the converters on their own.
"""

from __future__ import annotations

import pytest
from pyspark.ml.param import TypeConverters

from sparkdl.keras import KerasEstimator, KerasModel
from sparkdl.spark_ml import param_table as table
from sparkdl.spark_ml import params as tfos_params
from sparkdl.spark_ml.tf_estimator import TFEstimator, TFModel

pytestmark = pytest.mark.timeout(30)

PARAMS = {spec.name: spec for spec in table.PARAMS}
MIXINS = {mixin.name: mixin for mixin in table.MIXINS}
STAGE_CLASSES = {
    "TFEstimator": TFEstimator,
    "TFModel": TFModel,
    "KerasEstimator": KerasEstimator,
    "KerasModel": KerasModel,
}


def stage_params(stage: table.StageSpec) -> list[str]:
    return [name for mixin in stage.mixins for name in MIXINS[mixin].params]


def test_each_param_mixin_and_stage_is_written_once():
    assert len(PARAMS) == len(table.PARAMS), "a Param defined twice"
    assert len(MIXINS) == len(table.MIXINS), "a mixin defined twice"
    held = [name for mixin in table.MIXINS for name in mixin.params]
    assert sorted(held) == sorted(PARAMS), "every Param in exactly one mixin"
    assert sorted(STAGE_CLASSES) == sorted(stage.name for stage in table.STAGES)
    for stage in table.STAGES:
        assert set(stage.mixins) <= set(MIXINS), stage.name
        assert set(stage.defaults) <= set(stage_params(stage)), f"{stage.name} overrides a Param it does not declare"
    accessors = [spec.camel for spec in table.PARAMS]
    assert len(set(accessors)) == len(accessors), "two Params with one setter"


@pytest.mark.parametrize("stage", table.STAGES, ids=lambda stage: stage.name)
def test_every_param_of_the_table_is_a_param_of_its_stages_with_its_default(stage):
    instance = STAGE_CLASSES[stage.name]()
    names = stage_params(stage)
    assert sorted(p.name for p in instance.params) == sorted(names), "the stage's Params are the table's"
    for name in names:
        spec, param = PARAMS[name], instance.getParam(name)
        assert param.doc == spec.doc and param.typeConverter is spec.converter, name
        default = stage.defaults.get(name, spec.default)
        assert instance.hasDefault(param) and instance.getOrDefault(param) == default, name
        getter, setter = getattr(instance, f"get{spec.camel}"), getattr(instance, f"set{spec.camel}")
        assert getter() == default and getter.__doc__ and setter.__doc__, name
        assert setter(default) is instance and instance.isSet(param), name


def test_defaults_the_stages_documented_before_the_table():
    assert TFEstimator().getBatchSize() == 100 and KerasEstimator().getBatchSize() == 32
    assert TFEstimator().getInputMode() == 1 and TFEstimator().getFeedTimeout() == 600.0
    assert KerasEstimator().getSeed() == table.DEFAULT_SEED and KerasModel().getPredictionCol() == "prediction"
    first, second = KerasEstimator(), KerasEstimator()  # a default list or dict is each stage's own
    assert first.getCallbacks() is not second.getCallbacks() and TFModel().getInputMapping() is not (
        TFModel().getInputMapping()
    )


def test_a_fitted_tfestimator_copies_the_params_its_tfmodel_shares():
    shared = set(stage_params(table.STAGES[0])) & set(stage_params(table.STAGES[1]))
    assert shared == {"input_mapping", "output_mapping", "batch_size", "model_dir", "export_dir"}
    estimator = TFEstimator(batch_size=7, export_dir="/m", input_mapping={"a": "b"}, epochs=3)
    model = estimator._copyValues(TFModel())
    assert (model.getBatchSize(), model.getExportDir(), model.getInputMapping()) == (7, "/m", {"a": "b"})


def test_optional_converters_let_none_through_and_convert_the_rest():
    for name, spec in PARAMS.items():
        if spec.default is None and spec.converter is not table.as_is:
            assert spec.converter(None) is None, f"{name}'s default None cannot be set again"
    assert table.optional_int(2.0) == 2 and table.optional_float(1) == 1.0 and table.optional_string("a") == "a"
    assert table.optional_list_string(("a", "b")) == ["a", "b"] and table.optional_as_is(None) is None
    with pytest.raises(TypeError):
        table.optional_int("two")
    with pytest.raises(TypeError):
        TypeConverters.toInt(None)  # a Param without the optional converter refuses None
    assert table.optional_int.__name__ == "optional_toInt" and table.optional_int.__wrapped__ is TypeConverters.toInt


def test_the_table_converters():
    mapping = {"a": 1}
    assert table.to_dict(mapping) == mapping and table.to_dict(mapping) is not mapping
    with pytest.raises(TypeError, match="expected a dict"):
        table.to_dict([("a", 1)])
    assert table.to_columns("x") == ["x"] and table.to_columns(("x", "y")) == ["x", "y"]
    assert table.to_validation(None) is None and table.to_validation("is_val") == "is_val"
    assert table.to_validation(1) == 1.0 and isinstance(table.to_validation(1), float)
    with pytest.raises(TypeError, match="validation must be a fraction"):
        table.to_validation(True)
    callback = object()
    assert table.to_callbacks(None) == [] and table.to_callbacks(callback) == [callback]
    assert table.to_callbacks((callback,)) == [callback]
    assert table.to_output_kind(None) is None and table.to_output_kind("softmax") == "softmax"
    with pytest.raises(TypeError, match="output_kind must be None or one of"):
        table.to_output_kind("logits")
    thing = object()
    assert table.as_is(thing) is thing


def test_tensorflowonspark_params_module_exports_the_mixins_of_its_stages():
    tfos = {mixin for stage in table.STAGES if stage.name.startswith("TF") for mixin in stage.mixins}
    assert set(tfos_params.__all__) == tfos | {"TFTypeConverters", "Namespace", "TFParams"}
    assert tfos_params.TFTypeConverters.toDict is table.to_dict
