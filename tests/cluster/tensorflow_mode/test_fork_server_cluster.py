"""Warm node starts (``node/fork_server.py``): TF processes forked from one server per executor
that imported TensorFlow once, reused by the next cluster, refusing what is not a request from
this user; ``SPARKDL_NODE_FORK_SERVER=0`` in the node's environment starts them afresh."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import psutil
import pytest

from sparkdl import TFCluster
from sparkdl.node import fork_server
from sparkdl.node.launch import user_root

import cluster_functions as cluster_fns

pytestmark = pytest.mark.timeout(300)
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


def _nodes(sc, tmp_path, name: str, env: dict | None = None) -> list[dict]:
    out = tmp_path / name
    out.mkdir()
    cluster = TFCluster.run(sc, cluster_fns.report_start, {"out": str(out)}, 2, env=env)
    cluster.shutdown(timeout=120)
    return [json.loads((out / f"node{number}.json").read_text()) for number in range(2)]


_SEND = """
import socket, sys
with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
    sock.settimeout(30)
    sock.connect(b"\\0" + sys.argv[1].encode())  # an abstract name: argv cannot hold its NUL
    try:
        sock.send(sys.argv[2].encode())
        answer = sock.recv(1024)
    except (BrokenPipeError, ConnectionResetError):  # it hung up before reading
        answer = b""
    sys.exit(0 if answer == b"" else 1)
"""


def _refused(key: str, payload: str, user: int | None = None) -> bool:
    """Send ``payload`` to the server with ``key`` from a process of ``user`` (default: this one's);
    whether the server hung up without an answer."""
    name = fork_server.socket_name(key)[1:].decode()
    python = sys.executable if user is None else SYSTEM_PYTHON  # one the other user may run
    return subprocess.run([python, "-c", _SEND, name, payload], user=user, timeout=60).returncode == 0


def test_nodes_fork_from_one_warm_server_per_executor_unless_turned_off(sc2, tmp_path, spark_holder):
    first = _nodes(sc2, tmp_path, "first")
    servers = {node["parent_pid"] for node in first}
    assert len(servers) == 2, "one server per executor"
    for node in first:
        assert "sparkdl.node.fork_server" in node["parent"] and node["tensorflow_preloaded"], node
        assert "sparkdl.node.tf_process --cluster" in node["command"], "ps shows a forked node as the node it is"
        # TensorFlow's ~400k objects: a full collection in the node would walk them all (0.3 s)
        assert node["frozen_objects"] > 100_000, "the server froze what it imported before forking"

    key = psutil.Process(min(servers)).cmdline()[-2]
    assert _refused(key, "not json")
    assert _refused(key, "[" * 20_000), "JSON nested too deeply for the parser (it once killed the server)"
    assert _refused(key, json.dumps({"argv": ["x"], "env": {}, "cwd": "/"})), "a request without its descriptors"
    if os.getuid() == 0 and SYSTEM_PYTHON:  # as root, the test can be another user too: that one is refused unread
        assert _refused(key, "{}", user=65534)
        log = user_root(spark_holder.executor_tmpdir) / "fork-servers" / f"{key}.log"
        assert "a request from another user" in log.read_text()
    second = _nodes(sc2, tmp_path, "second")
    assert {node["parent_pid"] for node in second} == servers, "the next cluster reuses both servers"
    draws = {node["draw"] for node in first + second}
    assert len(draws) == 4, "each forked node draws from its own random state, not the server's"

    off = _nodes(sc2, tmp_path, "off", env={fork_server.SWITCH: "0"})
    for node in off:
        assert "sparkdl.node.supervisor" in node["parent"], node  # (multi-worker nodes import Keras 3 before map_fun)
