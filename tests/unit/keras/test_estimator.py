"""sparkdl.keras.estimator without Spark or TensorFlow: KerasEstimator's Params."""

from __future__ import annotations

import pytest

from sparkdl.keras import KerasEstimator, KerasModel

pytestmark = pytest.mark.timeout(60)


def test_params_have_defaults_setters_and_converters():
    estimator = KerasEstimator(feature_cols="features", label_cols="label", validation=0.25)
    assert estimator.getFeatureCols() == ["features"] and estimator.getLabelCols() == ["label"]
    assert estimator.getBatchSize() == 32 and estimator.getEpochs() == 1 and estimator.getShuffle() is True
    assert estimator.getValidation() == 0.25 and estimator.getNumWorkers() is None and estimator.getMode() == "auto"
    assert estimator.setEpochs(3.0).getEpochs() == 3 and estimator.setValidation("is_val").getValidation() == "is_val"
    assert estimator.setLearningRate(1).getLearningRate() == 1.0 and estimator.getSeed() == KerasEstimator().getSeed()
    with pytest.raises(TypeError, match="validation must be a fraction"):
        estimator.setValidation(True)
    copied = estimator.copy({estimator.learning_rate: 0.5})
    assert copied.getLearningRate() == 0.5 and estimator.getLearningRate() == 1.0
    assert KerasEstimator.getBatchSize.__doc__ and "EACH worker" in estimator.batch_size.doc
    model = KerasModel(model_path="/m.keras", feature_cols=["f"])
    assert model.getPredictionCol() == "prediction" and model.getPredictBatchSize() == 1024 and model.history == {}
