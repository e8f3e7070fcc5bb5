"""sparkdl.pipeline: TensorFlowOnSpark's pipeline names and mixins."""

from __future__ import annotations

import argparse
import sys

import pytest
from pyspark.ml.param import Params

from sparkdl import pipeline
from sparkdl.common import single_node

pytestmark = pytest.mark.timeout(120)


TFOS_PIPELINE_NAMES = [  # tensorflowonspark.pipeline's public names (get_meta_graph_def is TF 1 only)
    "TFEstimator",
    "TFModel",
    "Namespace",
    "TFParams",
    "TFTypeConverters",
    "HasBatchSize",
    "HasClusterSize",
    "HasEpochs",
    "HasGraceSecs",
    "HasInputMapping",
    "HasInputMode",
    "HasMasterNode",
    "HasModelDir",
    "HasNumPS",
    "HasOutputMapping",
    "HasProtocol",
    "HasReaders",
    "HasSteps",
    "HasTensorboard",
    "HasTFRecordDir",
    "HasExportDir",
    "HasSignatureDefKey",
    "HasTagSet",
    "single_node_env",
    "yield_batch",
]


def test_pipeline_has_tfos_names():
    missing = [name for name in TFOS_PIPELINE_NAMES if not hasattr(pipeline, name)]
    assert not missing and set(TFOS_PIPELINE_NAMES) <= set(pipeline.__all__)
    from sparkdl.ml import TFEstimator

    assert pipeline.TFEstimator is TFEstimator
    for mixin in (
        "HasBatchSize",
        "HasClusterSize",
        "HasNumPS",
        "HasInputMapping",
        "HasTensorboard",
        "HasEpochs",
        "HasGraceSecs",
        "HasMasterNode",
        "HasProtocol",
        "HasReaders",
        "HasSteps",
        "HasTFRecordDir",
    ):
        assert issubclass(TFEstimator, getattr(pipeline, mixin)), mixin
    for mixin in ("HasSignatureDefKey", "HasTagSet", "HasOutputMapping", "HasExportDir", "HasModelDir"):
        assert issubclass(pipeline.TFModel, getattr(pipeline, mixin)), mixin


def test_mixins_make_a_custom_stage_with_tfos_accessors():
    class Stage(
        pipeline.TFParams, pipeline.HasBatchSize, pipeline.HasNumPS, pipeline.HasInputMapping, pipeline.HasTFRecordDir
    ):
        def __init__(self, args):
            super().__init__()
            self.args = args
            self._setDefault(batch_size=10, num_ps=0, driver_ps_nodes=False, input_mapping={}, tfrecord_dir=None)

    stage = Stage(pipeline.Namespace({"lr": 0.1}))
    stage.setBatchSize(64).setNumPS(1).setDriverPSNodes(True).setInputMapping({"x": "in"}).setTFRecordDir("/r")
    assert (stage.getBatchSize(), stage.getNumPS(), stage.getDriverPSNodes(), stage.getTFRecordDir()) == (
        64,
        1,
        True,
        "/r",
    )
    merged = stage.merge_args_params()
    assert merged.lr == 0.1 and merged.batch_size == 64 and merged.input_mapping == {"x": "in"}
    assert stage.args.__dict__ == {"lr": 0.1}  # merge_args_params copies
    with pytest.raises(TypeError, match="expected a dict"):
        stage.setInputMapping([("x", "in")])
    assert isinstance(stage, Params) and pipeline.HasBatchSize.setBatchSize.__doc__


def test_namespace_like_tfos():
    ns = pipeline.Namespace({"a": 1, "b": "x"})
    assert ns.a == 1 and "b" in ns and sorted(ns) == ["a", "b"] and repr(ns) == "Namespace(a=1, b='x')"
    assert pipeline.Namespace(ns) == ns and pipeline.Namespace(argparse.Namespace(a=1, b="x")) == ns
    argv = pipeline.Namespace(["--epochs", "3"])
    assert argv.argv == ["--epochs", "3"] and list(argv) == ["--epochs", "3"] and argv == ["--epochs", "3"]
    with pytest.raises(TypeError, match="Namespace needs"):
        pipeline.Namespace(42)


def test_yield_batch_and_single_node_env(monkeypatch):
    rows = [(i, bytearray(b"ab"), -i) for i in range(5)]
    batches = list(pipeline.yield_batch(rows, 2, num_tensors=2))
    assert batches == [[[0, 1], [b"ab", b"ab"]], [[2, 3], [b"ab", b"ab"]], [[4], [b"ab"]]]
    assert list(pipeline.yield_batch(iter([(1,), None, (2,)]), 10)) == [[[1]]]
    calls = []
    monkeypatch.setattr(single_node, "single_node_env", lambda num_gpus: calls.append(num_gpus))
    monkeypatch.setattr(sys, "argv", ["pytest"])
    pipeline.single_node_env(["train.py", "--epochs", "2"])
    assert sys.argv == ["train.py", "--epochs", "2"]
    pipeline.single_node_env(argparse.Namespace(num_gpus=0, argv=None))
    pipeline.single_node_env(pipeline.Namespace({"x": 1}))
    assert calls == [1, 0, 1]
