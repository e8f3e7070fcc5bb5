"""KerasEstimator on local-cluster[2,1,1024]: a Keras 3 Pipeline fitted on 2 TF nodes and in local mode, saved,
loaded and scored with Spark ML's output columns and evaluators at their defaults; tuning a tf-keras model with
CrossValidator (fitMultiple on one cluster per fold); several inputs, outputs and column kinds; a binary classifier."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from pyspark.ml import Pipeline

from sparkdl.keras import KerasEstimator, KerasModel

import keras_functions as kf

pytestmark = pytest.mark.timeout(420)


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


def _launch_jobs(sc) -> list[str]:
    """Descriptions of the Spark jobs that launched TF nodes, so far."""
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    described = [jobs.apply(i).description() for i in range(jobs.size())]
    return [d.get() for d in described if d.isDefined() and d.get().startswith("sparkdl: run ")]


def _pipeline(model=kf.mlp, **params):
    from pyspark.ml.feature import StandardScaler, VectorAssembler

    estimator = KerasEstimator(
        model=model, feature_cols="features", label_cols="label", predicted_class_col="predicted", **params
    )
    return Pipeline(
        stages=[
            VectorAssembler(inputCols=kf.PIXELS, outputCol="raw"),
            StandardScaler(inputCol="raw", outputCol="features", withMean=True),
            estimator,
        ]
    )


def test_pipeline_on_two_nodes_and_in_local_mode_saves_loads_and_predicts_the_same(spark, tmp_path, monkeypatch):
    import mlflow
    from pyspark.ml import PipelineModel
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.functions import vector_to_array

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file:{tmp_path / 'mlruns'}")
    digits = kf.digits_frame(spark).cache()
    train, test = digits.where("not test"), digits.where("test")
    epochs = 4  # held-out accuracy is about 0.96 by epoch 4 (0.98 by epoch 8): a clear margin over 0.9
    # a Keras 3 model object (import keras), saved and shipped as a .keras file
    pipeline = _pipeline(
        kf.keras3_mlp(), validation=0.2, epochs=epochs, batch_size=32, model_dir=str(tmp_path / "models")
    )

    started = time.perf_counter()
    with mlflow.start_run() as run:  # an active run: the fit logs into it
        fitted = pipeline.fit(train, {pipeline.getStages()[-1].num_workers: 2})
    two_nodes_s = time.perf_counter() - started
    model = fitted.stages[-1]
    assert isinstance(model, KerasModel) and model.getModelPath().startswith(str(tmp_path / "models"))
    history = model.history  # the chief's map_fun return value (TFCluster.shutdown)
    assert set(history) >= {"loss", "accuracy", "val_loss", "val_accuracy"} and len(history["loss"]) == epochs
    assert history["loss"][-1] < history["loss"][0]
    scored = fitted.transform(test).cache()
    # Spark ML's classifier columns: prediction (double), probability and rawPrediction (Vectors)
    assert scored.columns[-4:] == ["prediction", "probability", "rawPrediction", "predicted"]
    kinds = [scored.schema[c].dataType.typeName() for c in scored.columns[-4:]]
    assert kinds == ["double", "vectorudt", "vectorudt", "double"]
    assert scored.where("prediction != predicted").count() == 0
    accuracy_2 = kf.accuracy(scored)
    f1 = MulticlassClassificationEvaluator().evaluate(scored)  # every default: label, prediction, f1
    assert f1 > 0.9, f1

    started = time.perf_counter()
    local = pipeline.fit(train, {pipeline.getStages()[-1].num_workers: 0})
    local_s = time.perf_counter() - started
    accuracy_local = kf.accuracy(local.transform(test))
    print(
        f"held-out accuracy: 2 TF nodes {accuracy_2:.4f} ({two_nodes_s:.1f} s), local mode {accuracy_local:.4f} "
        f"({local_s:.1f} s); 2-node val_accuracy by epoch {[round(a, 3) for a in history['val_accuracy']]}"
    )
    assert accuracy_2 > 0.9 and accuracy_local > 0.9 and abs(accuracy_2 - accuracy_local) < 0.04
    assert len(local.stages[-1].history["val_loss"]) == epochs

    fitted.write().overwrite().save(str(tmp_path / "pipeline"))
    loaded = PipelineModel.load(str(tmp_path / "pipeline"))
    stage = loaded.stages[-1]
    assert isinstance(stage, KerasModel) and stage.getModelPath().startswith(str(tmp_path / "pipeline"))
    assert stage.history == history and stage.getPredictedClassCol() == "predicted"
    before = scored.select("id", "prediction", "probability").toPandas().sort_values("id")
    after = loaded.transform(test).select("id", "prediction", "probability").toPandas().sort_values("id")
    probabilities = np.stack(before["probability"].map(lambda v: v.toArray()))
    np.testing.assert_allclose(np.stack(after["probability"].map(lambda v: v.toArray())), probabilities, atol=1e-6)
    assert after["prediction"].tolist() == before["prediction"].tolist()

    # the model on the driver gives the same probabilities as transform
    features = fitted.stages[1].transform(fitted.stages[0].transform(test)).select("id", "features").toPandas()
    direct = stage.keras_model.predict(
        np.stack(features.sort_values("id")["features"].map(lambda v: v.toArray())), verbose=0
    )
    np.testing.assert_allclose(direct, probabilities, atol=1e-5)

    client = mlflow.tracking.MlflowClient()
    logged = client.get_run(run.info.run_id).data
    assert logged.params["epochs"] == str(epochs) and logged.params["validation"] == "0.2"
    # one value per epoch, then MLflow's copy of the last epoch's, which log_model links to the logged model
    val_loss = client.get_metric_history(run.info.run_id, "val_loss")
    assert [m.step for m in val_loss] == [*range(epochs), epochs - 1]
    # logged by the chief as each epoch ended: every epoch's loss before the chief saved the model, after fit
    saved_ms = os.path.getmtime(model.getModelPath()) * 1000
    stamps = [m.timestamp for m in client.get_metric_history(run.info.run_id, "loss")][:epochs]
    assert len(stamps) == epochs and stamps == sorted(stamps) and stamps[-1] <= saved_ms, (stamps, saved_ms)
    # the model is an MLflow model (Keras 3 flavor) with its signature, and spark_udf scores as transform does
    uri = f"runs:/{run.info.run_id}/model"
    logged_model = mlflow.models.get_model_info(uri)
    assert "keras" in logged_model.flavors and logged_model.signature.inputs.inputs[0].shape == (-1, len(kf.PIXELS))
    udf = mlflow.pyfunc.spark_udf(spark, uri, result_type="array<float>")
    arrays = fitted.stages[1].transform(fitted.stages[0].transform(test)).select("id", vector_to_array("features"))
    udf_scored = arrays.select("id", udf(arrays.columns[1]).alias("p")).toPandas().sort_values("id")
    np.testing.assert_allclose(np.stack(udf_scored["p"]), probabilities, atol=1e-5)


def test_cross_validation_with_default_evaluator_trains_every_param_map_on_one_cluster_and_early_stops(spark, tmp_path):
    """A tf-keras model function (TF_USE_LEGACY_KERAS=1 on the nodes, from the model's flavour) tuned by
    CrossValidator with MulticlassClassificationEvaluator() at its defaults (label, prediction, f1)."""
    from pyspark.ml.evaluation import MulticlassClassificationEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    digits = kf.digits_frame(spark)
    stages = _pipeline().getStages()
    scaled = Pipeline(stages=stages[:2]).fit(digits).transform(digits).cache()  # tune the estimator itself
    estimator = stages[2].setEpochs(4).setNumWorkers(2).setCallbacks([kf.StopAtEpoch(1)])
    grid = ParamGridBuilder().addGrid(estimator.learning_rate, [0.03, 0.00001]).build()
    tuning = CrossValidator(
        estimator=estimator, estimatorParamMaps=grid, evaluator=MulticlassClassificationEvaluator(), numFolds=2, seed=3
    )
    launches = len(_launch_jobs(spark.sparkContext))
    tuned = tuning.fit(scaled)
    # one cluster per fold for both param maps (fitMultiple), one for the final fit with the best of them
    assert len(_launch_jobs(spark.sparkContext)) - launches == 3
    print("cross-validated f1 per learning rate:", dict(zip([0.03, 0.00001], tuned.avgMetrics)))
    assert tuned.avgMetrics[0] > 0.85 > tuned.avgMetrics[1]
    assert tuned.bestModel.getModelPath() and len(tuned.bestModel.history["loss"]) == 2  # StopAtEpoch(1)


def test_several_inputs_outputs_weights_and_column_kinds_in_local_mode(spark, tmp_path):
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    digits = kf.digits_frame(spark, partitions=1).limit(600)
    rows = digits.select("id", F.array(*kf.PIXELS).cast("array<float>").alias("pixels"), "label").collect()
    data = spark.createDataFrame(
        [
            (
                r.id,
                r.pixels,
                Vectors.sparse(2, [0], [float(r.id % 3)]),  # meta: a sparse Vector
                r.label,
                float(r.label % 2),
                2.0 if r.label == 7 else 1.0,
            )
            for r in rows
        ],
        T.StructType(
            [
                T.StructField("id", T.LongType()),
                T.StructField("pixels", T.ArrayType(T.FloatType())),
                T.StructField("meta", VectorUDT()),
                T.StructField("digit", T.LongType()),
                T.StructField("odd", T.DoubleType()),
                T.StructField("weight", T.DoubleType()),
            ]
        ),
    )
    estimator = KerasEstimator(
        model=kf.two_headed,
        loss={"digit": "sparse_categorical_crossentropy", "odd": "binary_crossentropy"},
        optimizer="adam",
        learning_rate=0.01,
        metrics={"digit": ["accuracy"]},
        feature_cols=["meta", "pixels"],
        label_cols=["odd", "digit"],
        sample_weight_col="weight",
        num_workers=0,
        epochs=12,
        model_dir=str(tmp_path),
    )
    model = estimator.fit(data)
    assert model.getInputCols() == {"pixels": ["pixels"], "meta": ["meta"]}
    assert sorted(model.getOutputNames()) == ["digit", "odd"]
    assert {"digit_accuracy", "loss"} <= set(model.history)
    scored = model.transform(data).select("digit", "odd", "prediction_digit", "prediction_odd").toPandas()
    digit_accuracy = np.mean(np.stack(scored["prediction_digit"]).argmax(axis=1) == scored["digit"])
    odd_accuracy = np.mean((scored["prediction_odd"] > 0.5) == (scored["odd"] > 0.5))
    print(f"two-headed model, training rows: digit accuracy {digit_accuracy:.3f}, odd accuracy {odd_accuracy:.3f}")
    assert digit_accuracy > 0.9 and odd_accuracy > 0.8
    # packed_outputs: the 10-value head as packed float32 rows (the same values), the one-value head as it was
    packed = model.copy({model.packed_outputs: True}).transform(data)
    assert packed.schema["prediction_digit"].dataType.simpleString() == "binary"
    assert packed.schema["prediction_odd"].dataType == model.transform(data).schema["prediction_odd"].dataType
    unpacked = np.stack([np.frombuffer(row, "<f4") for row in packed.select("prediction_digit").toPandas().iloc[:, 0]])
    np.testing.assert_allclose(unpacked, np.stack(scored["prediction_digit"]), atol=1e-6)
    assert [p.relative_to(tmp_path).parts[1:] for p in tmp_path.glob("keras-*/run-0/*")] == [("run-0", "model.keras")]
    # rows the user cached exactly as the estimator selects them are used, and stay cached after the fit
    cached = data.select("meta", "pixels", "odd", "digit", "weight").cache()
    estimator.copy({estimator.epochs: 1}).fit(cached)
    assert cached.storageLevel.useMemory


def test_a_binary_keras3_classifier_is_scored_by_spark_mls_binary_evaluator_at_its_defaults(spark, tmp_path):
    """One sigmoid unit: prediction 0/1 at 0.5, probability [1-p, p], rawPrediction [-logit, logit] (local mode)."""
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.sql import functions as F

    digits = kf.digits_frame(spark).withColumn("label", (F.col("label") % 2).cast("double"))
    features = F.array(*kf.PIXELS).cast("array<float>")
    data = digits.select("id", (features).alias("features"), "label", "test").cache()
    estimator = KerasEstimator(
        model=kf.keras3_binary, feature_cols="features", label_cols="label", epochs=3, num_workers=0,
        model_dir=str(tmp_path),
    )  # fmt: skip
    model = estimator.fit(data.where("not test"))
    assert model.resolved_output_kind() == "sigmoid"
    scored = model.transform(data.where("test")).cache()
    auc = BinaryClassificationEvaluator().evaluate(scored)  # every default: rawPrediction, label, areaUnderROC
    assert auc > 0.9, auc
    rows = scored.select("prediction", "probability", "rawPrediction").collect()
    for row in rows:
        p = row.probability.toArray()
        assert abs(p.sum() - 1) < 1e-6 and row.prediction == float(p[1] > 0.5)
        assert row.rawPrediction[1] == -row.rawPrediction[0] and (row.rawPrediction[1] > 0) == (p[1] > 0.5)
