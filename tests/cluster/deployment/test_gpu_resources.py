"""GPU pinning from Spark's resource scheduling, end to end on local-cluster.

There is no GPU on this machine: the workers' GPU discovery script is FAKE (it reports
addresses "0" and "1" on each worker) and nothing touches a real device. What is real is
Spark's resource scheduling handing each task an address, and sparkdl turning that into
CUDA_VISIBLE_DEVICES in the TF process before TensorFlow is imported.
"""

from __future__ import annotations

import stat

import pytest

from sparkdl import TFCluster

import cluster_functions as cluster_fns
from conftest import read_json_files

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def sc_fake_gpus(spark_holder, tmp_path_factory):
    script = tmp_path_factory.mktemp("gpu") / "discover_gpus.sh"
    script.write_text('#!/bin/sh\necho \'{"name": "gpu", "addresses": ["0", "1"]}\'\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    conf = {
        "spark.worker.resource.gpu.amount": "2",
        "spark.worker.resource.gpu.discoveryScript": str(script),
        "spark.executor.resource.gpu.amount": "1",
        "spark.task.resource.gpu.amount": "1",
    }
    yield spark_holder.get(2, conf)
    spark_holder.stop()  # later tests expect plain executors


def test_nodes_use_the_gpu_spark_assigned(sc_fake_gpus, tmp_path):
    cluster = TFCluster.run(sc_fake_gpus, cluster_fns.record_gpus, {"out": str(tmp_path)}, num_executors=2)
    cluster.shutdown(timeout=120)
    nodes = read_json_files(tmp_path)
    assert len(nodes) == 2
    for node in nodes.values():
        assert node["ctx_gpus"] in ("0", "1")
        assert node["cuda_visible_devices"] == node["ctx_gpus"]
        assert node["cuda_device_order"] == "PCI_BUS_ID"
