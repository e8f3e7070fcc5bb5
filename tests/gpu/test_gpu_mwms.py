"""Two MultiWorkerMirroredStrategy nodes on this machine's GPU(s), placed by Spark's resource scheduling.

Runs only where TensorFlow sees a GPU (see gpu_setup); skipped everywhere else. With one GPU both
nodes share it (fractional ``spark.task.resource.gpu.amount``, ring collectives); with two or more
each has its own. In InputMode.SPARK the launch stage asks for a whole executor, its GPU included
(driver/scheduling.py), since each executor has two task slots.
"""

from __future__ import annotations

import gpu_node_functions as gnf
import gpu_setup
import numpy as np
import pandas as pd
import pytest
from gpu_setup import gpu_sc  # noqa: F401 - the fixture

from sparkdl import TFCluster

from conftest import read_json_files

pytestmark = [pytest.mark.gpu, gpu_setup.requires_gpu, pytest.mark.timeout(600)]
EPOCHS = 3


@pytest.mark.parametrize(
    "input_mode", [TFCluster.InputMode.TENSORFLOW, TFCluster.InputMode.SPARK], ids=["tensorflow", "spark"]
)
def test_two_mwms_nodes_train_on_their_gpus_to_identical_weights(
    gpu_sc,
    spark_holder,
    tmp_path,  # noqa: F811
    input_mode,
):
    feeds = input_mode == TFCluster.InputMode.SPARK
    args = {"out": str(tmp_path), "ring": gpu_setup.shared_gpu(), "feed": feeds, "epochs": EPOCHS}
    cluster = TFCluster.run(
        gpu_sc,
        gnf.mwms_fit_on_gpu,
        args,
        num_executors=2,
        input_mode=input_mode,
        env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
    )
    with cluster:  # aborts the nodes if anything below raises
        executors = [node["spark_executor"] for node in cluster.cluster_info]
        if feeds:
            features, labels = gnf.training_data()
            frame = spark_holder.spark.createDataFrame(
                pd.DataFrame({"x": list(features), "y": labels}), "x array<float>, y long"
            )
            cluster.train(frame, num_epochs=EPOCHS)
    nodes = read_json_files(tmp_path)
    assert len(nodes) == 2
    for label, node in nodes.items():
        visible = node["cuda_visible_devices"]
        # Each node runs on the one GPU Spark assigned its launch task, and TensorFlow sees only that.
        assert visible and visible == node["ctx_gpus"] and len(visible.split(",")) == 1, (label, node)
        assert len(node["tf_gpus"]) == 1, (label, node)
        assert all("GPU" in device for device in node["variable_devices"]), (label, node)
        assert all("GPU" in device for device in node["worker_devices"]), (label, node)
        # Where nvidia-smi lists processes, this node's CUDA context is on its assigned GPU only.
        assert set(node["own_gpu_uuids"]) <= set(node["visible_gpu_uuids"]), (label, node)
        assert node["loss"][-1] < node["loss"][0], (label, node)
    if feeds or not gpu_setup.shared_gpu():  # one task per executor: each node has an executor (and GPU) of its own
        assert len(set(executors)) == 2, executors
    if not gpu_setup.shared_gpu():
        assert nodes["node0"]["cuda_visible_devices"] != nodes["node1"]["cuda_visible_devices"]
    first, second = (np.load(tmp_path / f"weights{i}.npz") for i in (0, 1))
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
