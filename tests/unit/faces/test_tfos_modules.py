"""TensorFlowOnSpark's modules under TensorFlowOnSpark's names, without Spark or TensorFlow:
``sparkdl.compat`` (imports no TensorFlow), ``sparkdl.gpu_info`` and ``sparkdl.util`` (with a fake
``nvidia-smi``, as in test_gpus.py), ``sparkdl.pipeline`` / ``sparkdl.params``, and the estimator
Params passed to ``TFCluster``. (``compat`` with TensorFlow: tests/cluster/faces/test_tfos_modules_cluster.py.)"""

from __future__ import annotations

import argparse
import os
import stat
import sys

import pytest
from fake_nvidia_smi import write_fake_smi  # free GPUs 0 and 2; 1 and 3 busy
from pyspark.ml.param import Params

from sparkdl import gpu_info, pipeline, util
from sparkdl.common import gpus, single_node
from sparkdl.common.gpus import GPUSelectionError

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


# -- compat --


def test_importing_compat_does_not_import_tensorflow():
    import subprocess

    code = (
        "import sys, sparkdl.compat, sparkdl.pipeline, sparkdl.gpu_info, sparkdl.util; "
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


# -- gpu_info --


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    path = write_fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpus, "RETRY_WAIT_S", 0.0)
    return path


def test_get_gpus_picks_free_gpus_by_worker_index(fake_smi):
    assert gpu_info.is_gpu_available()
    assert gpu_info.get_gpus() in ("0", "2")  # worker_index=-1: at random among the free
    assert gpu_info.get_gpus(1, worker_index=0) == "0"
    assert gpu_info.get_gpus(1, worker_index=1) == "2"
    assert gpu_info.get_gpus(1, worker_index=2) == "0"  # wraps around the free GPUs
    assert gpu_info.get_gpus(2, 0) == "0,2"
    assert gpu_info.get_gpus(2, 0, format=gpu_info.AS_LIST) == ["0", "2"]
    assert gpu_info.get_gpus(0) == ""
    with pytest.raises(ValueError, match="format"):
        gpu_info.get_gpus(1, 0, format="tuple")


def test_get_gpus_asks_again_then_says_which_are_busy(fake_smi, tmp_path):
    with pytest.raises(GPUSelectionError, match=r"asked for 3 GPUs, only 2 of 4 free.*busy"):
        gpu_info.get_gpus(3, 0)
    queries = [line for line in (tmp_path / "calls.log").read_text().splitlines() if "--query-gpu" in line]
    assert len(queries) == gpu_info.MAX_RETRIES + 1


def test_no_nvidia_smi_means_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_info.is_gpu_available() is False
    with pytest.raises(GPUSelectionError, match="not found"):
        gpu_info.get_gpus(1)
    broken = write_fake_smi(tmp_path, script="#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert gpu_info.is_gpu_available(broken) is False


# -- util.single_node_env --


@pytest.fixture
def clean_env(monkeypatch):
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "HADOOP_PREFIX",
        "HADOOP_HOME",
        "CLASSPATH",
        single_node.CLASSPATH_MARK,
        single_node.INHERITED_GPUS,
    ):
        monkeypatch.setenv(name, "")  # recorded, so the test's own settings are undone afterwards
        monkeypatch.delenv(name)
    return monkeypatch


def test_single_node_env_places_gpus_among_the_nodes_of_a_host(fake_smi, clean_env):
    nodes = ["hostA:2222", "hostB:2222", "hostA:2223"]
    assert util.single_node_env(1, worker_index=1, nodes=nodes) == "0"  # first node on hostB
    assert util.single_node_env(1, worker_index=2, nodes=nodes) == "2"  # second node on hostA
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2" and os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert util.single_node_env(2, worker_index=0) == "0,2"
    assert util.single_node_env(0) == "" and os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_single_node_env_without_gpus_uses_the_cpu(tmp_path, clean_env):
    clean_env.setenv("PATH", str(tmp_path))
    assert util.single_node_env() == "" and os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_single_node_env_prefers_the_gpus_spark_assigned(fake_smi, clean_env):
    clean_env.setattr(gpus, "task_gpu_addresses", lambda: ["3", "1"])
    assert util.single_node_env(1) == "3"
    assert util.single_node_env(2) == "3,1"
    clean_env.setattr(gpus, "task_gpu_addresses", lambda: ["1"])
    assert util.single_node_env(1) == "1"  # a reused worker: its own earlier setting does not get in the way


def test_single_node_env_adds_hadoop_classpath_once(tmp_path, clean_env):
    hadoop = tmp_path / "hadoop" / "bin" / "hadoop"
    hadoop.parent.mkdir(parents=True)
    hadoop.write_text(f"#!/bin/sh\necho run >> {tmp_path}/hadoop.log\necho '/opt/hadoop/share/a.jar:/opt/b.jar'\n")
    hadoop.chmod(hadoop.stat().st_mode | stat.S_IXUSR)
    clean_env.setenv("PATH", str(tmp_path / "empty"))
    clean_env.setenv("HADOOP_PREFIX", str(tmp_path / "hadoop"))
    clean_env.setenv("CLASSPATH", "/app.jar")
    util.single_node_env()
    util.single_node_env()
    assert os.environ["CLASSPATH"] == f"/app.jar{os.pathsep}/opt/hadoop/share/a.jar:/opt/b.jar"
    assert (tmp_path / "hadoop.log").read_text().count("run") == 1


# -- pipeline and params --


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


class _FakeCluster:
    def __init__(self, record):
        self.record = record

    def train(self, data, num_epochs, **kwargs):
        self.record["train"] = (num_epochs, kwargs)
        return {}

    def shutdown(self, **kwargs):
        self.record["shutdown"] = kwargs


class _FakeFrame:
    """Just enough of a DataFrame for TFEstimator.fit in InputMode.SPARK."""

    columns = ["x", "y"]
    sparkSession = type("S", (), {"sparkContext": None})()

    def select(self, *columns):
        return self


def test_estimator_params_reach_tfcluster(monkeypatch):
    from sparkdl.driver import run as run_module
    from sparkdl.ml import TFEstimator

    record = {}

    def fake_run(sc, map_fun, tf_args, num_executors, num_ps, tensorboard, input_mode, **kwargs):
        record["run"] = (tf_args, num_executors, kwargs)
        return _FakeCluster(record)

    monkeypatch.setattr(run_module, "run", fake_run)
    estimator = (
        TFEstimator(lambda args, ctx: None, {"lr": 0.5})
        .setInputMapping({"x": "x"})
        .setClusterSize(3)
        .setFeedTimeout(30)
        .setStallTimeout(120)
        .setMaxRestarts(2)
        .setNumGPUs(0)
        .setMasterNode("master")
        .setGraceSecs(5)
        .setEpochs(4)
    )
    estimator.fit(_FakeFrame())
    tf_args, size, kwargs = record["run"]
    assert size == 3 and tf_args.lr == 0.5 and tf_args.feed_timeout == 30.0
    assert kwargs == {
        "master_node": "master",
        "driver_ps_nodes": False,
        "num_gpus": 0,
        "stall_timeout": 120.0,
        "max_restarts": 2,
    }
    assert record["train"] == (4, {"feed_timeout": 30.0, "validation_data": None})
    assert record["shutdown"] == {"grace_secs": 5.0}
    defaults = TFEstimator(lambda args, ctx: None, ["--lr", "0.5"]).setInputMapping({"x": "x"})
    defaults.fit(_FakeFrame())
    tf_args, _, kwargs = record["run"]
    assert tf_args == ["--lr", "0.5"]  # an argv list reaches train_fn as is, as in TFoS
    assert kwargs == {
        "master_node": "chief",
        "driver_ps_nodes": False,
        "num_gpus": None,
        "stall_timeout": None,
        "max_restarts": 0,
    }
    assert record["train"][1]["feed_timeout"] == 600.0 and record["shutdown"] == {"grace_secs": 0.0}
