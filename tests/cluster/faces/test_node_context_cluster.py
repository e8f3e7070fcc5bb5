"""TensorFlowOnSpark's ``TFNode.start_cluster_server(ctx)`` with TensorFlow, in a process of its own.
(``ctx`` without TensorFlow: tests/unit/node/test_context.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)


START_CLUSTER_SERVER = textwrap.dedent("""
    import json, os
    from sparkdl import TFNode
    from sparkdl.common import roles
    from sparkdl.node.context import NodeContext
    from sparkdl.node.ports import reserve_port

    reserved = reserve_port("127.0.0.1")
    port = reserved.getsockname()[1]
    spec = {"chief": [f"127.0.0.1:{port}"], "evaluator": ["127.0.0.1:1"]}
    os.environ["TF_CONFIG"] = roles.tf_config(spec, "chief", 0)
    events = []
    ctx = NodeContext(node_number=0, job_name="chief", task_index=0, cluster_spec=spec, default_fs="file://",
                      working_dir=".", host="127.0.0.1", port=port, cluster_id="c", tmp_socket=reserved,
                      status_writer=lambda event: events.append(event.TYPE))
    cluster_spec, server = TFNode.start_cluster_server(ctx, num_gpus=0)
    print(json.dumps({"spec": cluster_spec.as_dict(), "target": server.target, "released": ctx.tmp_socket is None,
                      "events": events}), flush=True)
    os._exit(0)  # TensorFlow's threads can stall an orderly exit
""")


@pytest.mark.cluster
def test_start_cluster_server_starts_the_nodes_server_and_leaves_the_evaluator_out():
    """TFoS's ``TFNode.start_cluster_server(ctx)`` (``ctx.start_cluster_server()``) with TensorFlow."""
    done = subprocess.run(
        [sys.executable, "-c", START_CLUSTER_SERVER],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    port = int(result["spec"]["chief"][0].rsplit(":", 1)[1])
    assert result["spec"] == {"chief": [f"127.0.0.1:{port}"]}, "the evaluator is not addressable"
    assert result["target"].endswith(f":{port}") and result["released"] and result["events"] == ["serving"]
