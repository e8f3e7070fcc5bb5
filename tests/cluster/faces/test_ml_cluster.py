"""sparkdl.ml: TFModel and TFEstimator as Spark ML pipeline stages, on local-cluster[2,1,1024].
(Their Params without Spark: tests/unit/faces/test_ml.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from sparkdl.ml import TFModel

import inference_models as im

ATOL = 1e-5


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


@pytest.mark.timeout(180)
def test_tfmodel_in_a_pipeline_saved_and_loaded(spark, tmp_path):
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import SQLTransformer

    model_path = tmp_path / "mlp.keras"
    keras_model = im.mlp(seed=3)
    keras_model.save(model_path)
    df = im.digits_frame(spark, 300).withColumnRenamed("pixels", "raw")
    pipeline = Pipeline(
        stages=[
            SQLTransformer(statement="SELECT *, raw AS pixels FROM __THIS__"),
            TFModel(
                input_mapping={"pixels": "image"},
                output_mapping={"probs": "probabilities"},
                export_dir=str(model_path),
                batch_size=64,
            ),
        ]
    )
    fitted = pipeline.fit(df)
    scored = fitted.transform(df)
    assert scored.columns == ["id", "raw", "label", "pixels", "probabilities"]  # appended, Spark ML style
    first = scored.select("id", "probabilities").toPandas().sort_values("id")
    expected = keras_model.predict(im.digits_28(300)[0], verbose=0)
    np.testing.assert_allclose(np.stack(first["probabilities"].to_numpy()), expected, atol=ATOL)

    fitted.write().overwrite().save(str(tmp_path / "pipeline"))
    loaded = PipelineModel.load(str(tmp_path / "pipeline"))
    stage = loaded.stages[-1]
    assert isinstance(stage, TFModel) and stage.getOutputMapping() == {"probs": "probabilities"}
    again = loaded.transform(df).select("id", "probabilities").toPandas().sort_values("id")
    np.testing.assert_allclose(np.stack(again["probabilities"].to_numpy()), expected, atol=ATOL)

    # A pyspark.ml vector column cannot pass through mapInArrow: the pandas UDF path takes over.
    from pyspark.ml.feature import VectorAssembler

    with_vector = VectorAssembler(inputCols=["id", "label"], outputCol="features").transform(df)
    scored = stage.transform(with_vector.withColumnRenamed("raw", "pixels"))
    assert scored.columns == ["id", "pixels", "label", "features", "probabilities"]
    third = scored.select("id", "features", "probabilities").toPandas().sort_values("id")
    np.testing.assert_allclose(np.stack(third["probabilities"].to_numpy()), expected, atol=ATOL)
    assert third["features"].iloc[5].toArray().tolist() == [5.0, float(im.digits_28(300)[1][5])]


@pytest.mark.timeout(300)
def test_tfestimator_fit_trains_on_a_tfcluster_and_returns_a_working_tfmodel(spark, tmp_path):
    images, labels = im.digits_28()
    df, model = im.digits_estimator_fit(spark, str(tmp_path / "export"))
    assert isinstance(model, TFModel) and model.getExportDir() == str(tmp_path / "export")
    import json
    import os

    exported = json.loads((tmp_path / "export" / "export_fn.json").read_text())
    assert exported["epochs"] == 3 and exported["pid"] != os.getpid()  # ran once, on an executor
    assert len(model.history["loss"]) == 3 and len(model.history["val_loss"]) == 3
    assert (tmp_path / "export" / "saved_model.pb").exists()
    # The fitted model maps only the model's inputs; the label column was for training.
    # the nodes export with Keras 3 (model.export), whose SavedModel names its one output output_0
    model.setInputMapping({"pixels": "image"}).setOutputMapping({"output_0": "probabilities"})
    scored = model.transform(df).select("label", "probabilities").toPandas()
    accuracy = (np.stack(scored["probabilities"].to_numpy()).argmax(axis=1) == scored["label"].to_numpy()).mean()
    assert accuracy > 0.8, accuracy
