"""sparkdl.util without Spark or TensorFlow: TensorFlowOnSpark's ``single_node_env`` (with a fake
``nvidia-smi``). (``compat`` with TensorFlow: tests/cluster/faces/test_tfos_modules_cluster.py.)"""

from __future__ import annotations

import os
import stat

import pytest

from sparkdl import util
from sparkdl.common import gpus, single_node

from fake_nvidia_smi import fake_smi_on_path  # noqa: F401 - fixture: free GPUs 0 and 2; 1 and 3 busy

pytestmark = pytest.mark.timeout(120)


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


def test_single_node_env_places_gpus_among_the_nodes_of_a_host(fake_smi_on_path, clean_env):
    nodes = ["hostA:2222", "hostB:2222", "hostA:2223"]
    assert util.single_node_env(1, worker_index=1, nodes=nodes) == "0"  # first node on hostB
    assert util.single_node_env(1, worker_index=2, nodes=nodes) == "2"  # second node on hostA
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2" and os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert util.single_node_env(2, worker_index=0) == "0,2"
    assert util.single_node_env(0) == "" and os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_single_node_env_without_gpus_uses_the_cpu(tmp_path, clean_env):
    clean_env.setenv("PATH", str(tmp_path))
    assert util.single_node_env() == "" and os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_single_node_env_prefers_the_gpus_spark_assigned(fake_smi_on_path, clean_env):
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
