"""The fork server's pieces that need no TensorFlow: who may use one, its key, the requests it
accepts, the server check a supervisor makes, and ForkedNode's Popen-like end (its server
reports the exit status, or is gone and the node's process group is killed)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from sparkdl.node import fork_server

pytestmark = pytest.mark.timeout(60)
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets and SO_PEERCRED")


def test_nodes_with_gpus_or_the_switch_off_are_never_forked():
    assert fork_server.wanted({}, None) is sys.platform.startswith("linux")
    assert not fork_server.wanted({}, "0")
    assert not fork_server.wanted({fork_server.SWITCH: "0"}, None)


def test_the_key_ignores_tf_config_and_nothing_else():
    env = {"PATH": "/bin", "TF_USE_LEGACY_KERAS": "1"}
    key = fork_server.server_key(env, "/work")
    assert fork_server.server_key({**env, "TF_CONFIG": '{"task": {}}'}, "/work") == key
    assert fork_server.server_key({**env, "TF_USE_LEGACY_KERAS": "0"}, "/work") != key
    assert fork_server.server_key(env, "/elsewhere") != key


def _request(**changes):
    request = {"argv": ["python"], "env": {"A": "1"}, "cwd": "/", "supervisor_pid": 1}
    request["fds"] = ["output", "socket", "status", "stdin"]
    return {**request, **changes}


@pytest.mark.parametrize(
    "message,fds",
    [
        ("not a dict", [3, 4, 5, 6]),
        (_request(extra=1), [3, 4, 5, 6]),
        (_request(env={"A": 1}), [3, 4, 5, 6]),
        (_request(argv="python"), [3, 4, 5, 6]),
        (_request(supervisor_pid="1"), [3, 4, 5, 6]),
        (_request(fds=["stdin"]), [3]),
        (_request(), [3, 4, 5]),  # a descriptor missing
    ],
)
def test_a_request_that_is_not_exactly_what_a_supervisor_sends_is_refused(message, fds):
    assert not fork_server._valid_request(message, fds)
    assert fork_server._valid_request(_request(), [3, 4, 5, 6])


#: A Python that another user may run (this one may sit in root's home): for the squatter.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@linux_only
@pytest.mark.skipif(os.geteuid() != 0 or not SYSTEM_PYTHON, reason="root (to be another user), /usr/bin/python3")
def test_a_server_name_held_by_another_user_is_not_trusted():
    key = f"unit-{os.getpid()}"
    squatter = subprocess.Popen(
        [
            SYSTEM_PYTHON,
            "-c",
            "import socket, sys; s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); "
            "s.bind(b'\\0' + sys.argv[1].encode()); s.listen(); print('ok', flush=True); sys.stdin.read()",
            fork_server.socket_name(key)[1:].decode(),
        ],
        user=65534,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert squatter.stdout.readline() == b"ok\n"
        with pytest.raises(PermissionError, match="another user"):
            fork_server._connect(key)
    finally:
        squatter.kill()
        squatter.wait()
    assert fork_server._connect(key) is None  # nobody listens: the supervisor starts a server


@pytest.fixture
def node_and_server_end():
    """A stand-in node (its own process group) and the server's end of its ForkedNode's connection."""
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], process_group=0)
    server_end, supervisor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield fork_server.ForkedNode(supervisor_end, node.pid), server_end, node
    node.kill()
    node.wait()
    server_end.close()


@linux_only
def test_forked_node_ends_with_the_status_its_server_reports(node_and_server_end):
    forked, server_end, _node = node_and_server_end
    with pytest.raises(subprocess.TimeoutExpired):
        forked.wait(timeout=0.05)
    assert forked.poll() is None
    server_end.send(json.dumps({"exit": -15}).encode())
    assert forked.wait(timeout=30) == -15 and forked.poll() == -15 and not forked.server_lost


@linux_only
def test_forked_node_is_killed_when_its_server_goes_away(node_and_server_end):
    forked, server_end, node = node_and_server_end
    server_end.close()  # the server died without a report
    assert forked.wait(timeout=30) == -9 and forked.server_lost  # the supervisor names that as the cause
    assert node.wait(timeout=30) == -9, "nobody could reap or report it: its process group was killed"
