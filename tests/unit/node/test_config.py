"""A node's configuration through its three hops (node/config.py), built without starting a
process: a field one hop reads but no hop writes fails here, not in a child process."""

from __future__ import annotations

import os
import pickle

import pytest

from sparkdl.common.roles import NodeRole
from sparkdl.node.config import LaunchSpec, NodeSettings, ProcessConfig
from sparkdl.node.context import NodeContext
from sparkdl.node.launch import node_config


def _settings(**overrides) -> NodeSettings:
    values = dict(
        fn=b"pickled map_fun",
        roles=(NodeRole(0, "chief", 0), NodeRole(1, "worker", 0)),
        feeds=True,
        set_tf_config=True,
        release_port=True,
        reservation_timeout=30.0,
        tensorboard_node=0,
        log_dir=None,
        num_gpus=None,
        env={"A": "1"},
    )
    return NodeSettings(**{**values, **overrides})


def _launch(settings: NodeSettings) -> LaunchSpec:
    return LaunchSpec(settings, "cfgtest", b"secret", ("10.0.0.1", 5000), "file://", attempt=2)


def test_every_hop_adds_its_part_and_the_node_context_reads_them_all(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    node = node_config(_launch(_settings()), 1, gpus="3", spark_executor="10.0.0.2", anchor_pid=42)
    assert node.role == NodeRole(1, "worker", 0) and node.settings.feeds
    assert node.env["A"] == "1" and node.env["CUDA_VISIBLE_DEVICES"] == "3"
    assert not node.tensorboard and node.log_dir is None  # TensorBoard runs on node 0 only
    assert node.working_dir == str(tmp_path) and os.path.isdir(node.node_dir)
    assert node.node_dir.endswith("node1-worker0-attempt2")
    process = ProcessConfig(node, {"chief": ["h:1"], "worker": ["h:2"]}, "10.0.0.2", 2, 5, 6, "/err.json")
    # Both stdin hops pickle: the configuration must survive them whole.
    process = pickle.loads(pickle.dumps(process))
    assert process.node == node and process.node.launch.secret == b"secret"
    ctx = NodeContext.from_config(process)
    assert (ctx.node_number, ctx.job_name, ctx.task_index) == (1, "worker", 0)
    assert (ctx.host, ctx.port, ctx.cluster_id, ctx.attempt, ctx.gpus) == ("10.0.0.2", 2, "cfgtest", 2, "3")
    assert ctx.num_workers == 2 and ctx.defaultFS == "file://" and ctx.working_dir == str(tmp_path)


def test_the_tensorboard_node_gets_a_log_dir_and_a_user_log_dir_reaches_every_node():
    chief = node_config(_launch(_settings()), 0, gpus=None, spark_executor="", anchor_pid=1)
    assert chief.tensorboard and chief.log_dir.endswith("tensorboard") and "CUDA_VISIBLE_DEVICES" not in chief.env
    launch = _launch(_settings(log_dir="/shared/logs"))
    assert [node_config(launch, i, None, "", 1).log_dir for i in (0, 1)] == ["/shared/logs", "/shared/logs"]
    assert _launch(_settings(log_dir="gs://b/logs")).settings.log_dir == "gs://b/logs"  # TensorFlow writes gs://


def test_a_store_log_dir_is_written_locally_on_each_node_and_copied_to_the_store():
    """TensorFlow writes and TensorBoard reads local paths and gs:// only: with an s3:// or hdfs://
    log_dir each node gets a local one of its own, and its supervisor copies it there."""
    for store in ("hdfs://nn/logs", "s3a://bucket/logs"):
        configs = [node_config(_launch(_settings(log_dir=store)), i, None, "", 1) for i in (0, 1)]
        assert [c.log_store for c in configs] == [store, store]
        assert all(c.log_dir.startswith(c.node_dir) and "://" not in c.log_dir for c in configs)
    gcs = node_config(_launch(_settings(log_dir="gs://b/logs")), 0, None, "", 1)
    assert (gcs.log_dir, gcs.log_store) == ("gs://b/logs", None)


def test_a_mistyped_field_fails_where_it_is_written():
    with pytest.raises(TypeError, match="feed_queue_byte"):
        _settings(feed_queue_byte=1)
    with pytest.raises(AttributeError):
        _launch(_settings()).reservation_timeout  # noqa: B018 - it lives on the settings


def test_secrets_stay_out_of_reprs():
    launch = _launch(_settings())
    assert "b'secret'" not in repr(launch) and "pickled map_fun" not in repr(launch)
