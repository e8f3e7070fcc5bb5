"""What of a node's output reaches the driver's console, on a live cluster: TensorFlow's start-up
and INFO chatter stays in node.log unless verbose; the user's lines and TensorFlow's warnings always
come through. (Which lines are chatter, without a cluster: tests/unit/node/test_node_console.py.)"""

from __future__ import annotations

import re

import pytest

from sparkdl import TFCluster
from sparkdl.node import fork_server

import cluster_functions as cluster_fns

pytestmark = pytest.mark.timeout(300)


def _printed(capsys) -> str:
    return capsys.readouterr().out


@pytest.mark.parametrize("verbose", [False, True])
def test_the_driver_console_leaves_tensorflow_chatter_in_node_log(sc2, tmp_path, capsys, verbose):
    # One node: the filter is each node's supervisor's, the same code on every node (and one
    # TensorFlow import per case instead of two). Started afresh, not forked from a fork server,
    # so that TensorFlow's import-time C++ chatter is in this node's own output (a forked node's
    # TensorFlow was imported by its server, whose log has that chatter).
    fresh = {fork_server.SWITCH: "0"}
    cluster = TFCluster.run(sc2, cluster_fns.tensorflow_chatter, {"out": str(tmp_path)}, 1, verbose=verbose, env=fresh)
    cluster.shutdown(timeout=200)
    printed = _printed(capsys)
    label = "chief:0"
    assert [node["job_name"] for node in cluster.cluster_info] == ["chief"]
    assert f"[{label}] the user's own line from {label}" in printed
    assert re.search(rf"\[{label}\] .*WARNING tensorflow: a tensorflow warning for the user", printed)
    cpp_info = re.compile(r"^\[\w+:\d\] I\d{4} ", re.MULTILINE)
    if verbose:
        assert cpp_info.search(printed) and "INFO tensorflow: Collective all_reduce tensors" in printed
    else:
        assert not cpp_info.search(printed), "TensorFlow's C++ INFO lines stay off the console"
        assert "INFO tensorflow:" not in printed and "absl::InitializeLog" not in printed
    for node in cluster.cluster_info:  # node.log keeps every line either way
        log = open(node["log_path"]).read()
        assert re.search(r"^I\d{4} ", log, re.MULTILINE) and "INFO tensorflow: Collective all_reduce tensors" in log


def test_a_forked_node_logs_tensorflow_in_the_one_format_the_filter_knows(sc2, tmp_path, capsys):
    # Forked from its executor's fork server (the default), which imported TensorFlow before the
    # node's logging was configured: TensorFlow's logger must not keep a handler of its own
    # (``INFO:tensorflow:...``, a second copy of each of its lines, in a format the filter does not know).
    cluster = TFCluster.run(sc2, cluster_fns.tensorflow_chatter, {"out": str(tmp_path)}, 1)
    cluster.shutdown(timeout=200)
    printed = _printed(capsys)
    assert "[chief:0] the user's own line from chief:0" in printed
    assert re.search(r"\[chief:0\] .*WARNING tensorflow: a tensorflow warning for the user", printed)
    assert "INFO:tensorflow:" not in printed and "WARNING:tensorflow:" not in printed
    assert "INFO tensorflow:" not in printed
    log = open(cluster.cluster_info[0]["log_path"]).read()
    assert log.count("Collective all_reduce tensors: a chatter line") == 1, "once, in the node's format"
    assert log.count("a tensorflow warning for the user") == 1
