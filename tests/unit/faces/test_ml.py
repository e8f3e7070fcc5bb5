"""sparkdl.ml's TFEstimator and TFModel Params, without Spark: TensorFlowOnSpark's names and
accessors. (The stages fitted and scoring on local-cluster: tests/cluster/faces/test_ml_cluster.py.)"""

from __future__ import annotations

import pytest

from sparkdl.ml import TFEstimator, TFModel

import inference_models as im


@pytest.mark.timeout(30)
def test_params_keep_tensorflowonspark_names_and_accessors():
    estimator = TFEstimator(im.estimator_train_fn, {"learning_rate": 0.01})
    assert estimator.getClusterSize() == 1 and estimator.getNumPS() == 0 and estimator.getBatchSize() == 100
    estimator.setInputMapping({"pixels": "image"}).setClusterSize(2).setEpochs(3).setExportDir("/tmp/x")
    assert estimator.getInputMapping() == {"pixels": "image"} and estimator.getEpochs() == 3
    assert {p.name for p in estimator.params} >= {
        "input_mapping",
        "output_mapping",
        "cluster_size",
        "num_ps",
        "input_mode",
        "protocol",
        "tensorboard",
        "model_dir",
        "export_dir",
        "tfrecord_dir",
        "batch_size",
        "epochs",
        "readers",
        "steps",
    }
    args = estimator._merge_args(estimator.args)
    assert args.learning_rate == 0.01 and args.cluster_size == 2 and args.export_dir == "/tmp/x"
    model = TFModel({"x": 1}, export_dir="/m", input_mapping={"a": "b"})
    assert {p.name for p in model.params} >= {
        "input_mapping",
        "output_mapping",
        "batch_size",
        "model_dir",
        "export_dir",
        "signature_def_key",
        "tag_set",
    }
    assert model.getExportDir() == "/m" and model.copy().getInputMapping() == {"a": "b"}
    assert TFModel.setSignatureDefKey.__doc__ and TFEstimator.getNumPS.__doc__
    with pytest.raises(TypeError, match="expected a dict"):
        model.setInputMapping(["a"])
    with pytest.raises(ValueError, match="export_dir"):
        TFModel(input_mapping={"a": "b"}).predictor()
