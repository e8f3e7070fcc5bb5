"""The fork server against what a peer may send: a real server (``fork_server._Server``, started in
its own process, without the TensorFlow import of its ``main``) over its real abstract socket.

Any malformed, oversized or slow request is refused alone and the server serves on; a node whose
supervisor hangs up (before or after the answer) is killed and reaped, never left running
untracked; a supervisor never waits on a server without a deadline.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import selectors
import shutil
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from sparkdl.node import fork_server

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets and SO_PEERCRED"),
]


#: The server's ``main`` without ``_preload``'s TensorFlow import (what it forks does not use it).
_SERVE = """
import sys
from sparkdl.node import fork_server, tf_process
fork_server.REQUEST_TIMEOUT_S = float(sys.argv[3])
fork_server._Server(sys.argv[1], int(sys.argv[2])).serve()
"""


REQUEST_TIMEOUT_S = 3.0  # the test server's, short: a silent connection is closed soon


WAIT_S = 30.0  # the longest any step of these tests waits for the server


SO_SNDBUFFORCE = 32  # Linux's (Python does not name it): a send buffer above the system's maximum


class Server:
    """A running fork server and its log."""

    def __init__(self, tmp_path, name: str):
        self.key = f"unit-{name}-{os.getpid()}"
        self.log_path = tmp_path / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _SERVE, self.key, str(os.getpid()), str(REQUEST_TIMEOUT_S)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        with self.process.stdout:
            assert self.process.stdout.readline().decode().strip() == fork_server.READY

    def connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(WAIT_S)
        sock.connect(fork_server.socket_name(self.key))
        return sock

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def server(tmp_path):
    started = Server(tmp_path, "requests")
    yield started
    started.stop()


class NodeEnds:
    """The descriptors a supervisor passes with a request: the test keeps the other ends. The node
    blocks reading its ProcessConfig from stdin while ``stdin_write`` is open; ``output_read``
    reads EOF once every copy of the node's output (the node's, the server's) is closed."""

    def __init__(self):
        self.stdin_read, self.stdin_write = os.pipe()
        self.output_read, self.output_write = os.pipe()
        self.status_read, self.status_write = os.pipe()
        self.tf_socket = socket.socket()
        self._open = {self.stdin_read, self.stdin_write, self.output_read, self.output_write}
        self._open |= {self.status_read, self.status_write}

    def fds(self) -> list[int]:
        """The node's descriptors in the order of their sorted names: output, socket, status, stdin."""
        return [self.output_write, self.tf_socket.fileno(), self.status_write, self.stdin_read]

    def close(self, *fds: int) -> None:
        """Close ``fds`` (default: every end still open)."""
        for fd in fds or tuple(self._open):
            if fd in self._open:
                self._open.discard(fd)
                os.close(fd)
        if not fds:
            self.tf_socket.close()

    def give_away(self) -> None:
        """Close the ends that belong to the node (it has its own copies now)."""
        self.close(self.stdin_read, self.output_write, self.status_write)
        self.tf_socket.close()

    def output_closed_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as ready:
            ready.register(self.output_read, selectors.EVENT_READ)
            while (remaining := deadline - time.monotonic()) > 0:
                if ready.select(remaining) and not os.read(self.output_read, 65536):
                    return True
        return False


def _request(**changes) -> dict:
    request = {
        "argv": [sys.executable, "-m", "sparkdl.node.tf_process", "--cluster", "unit"],
        "env": {"PATH": os.environ.get("PATH", "/bin"), "PYTHONPATH": os.pathsep.join(sys.path)},
        "cwd": os.getcwd(),
        "supervisor_pid": os.getpid(),
        "fds": ["output", "socket", "status", "stdin"],
    }
    return {**request, **changes}


def _refused(server: Server, payload: bytes, fds: list[int] = ()) -> bool:
    """Send one message; whether the server hung up without answering."""
    with server.connect() as sock:
        try:
            socket.send_fds(sock, [payload], list(fds)) if fds else sock.send(payload)
            return sock.recv(1 << 16) == b""
        except (BrokenPipeError, ConnectionResetError):
            return True


def _served(server: Server) -> None:
    """A well-formed request is answered with the node's pid, then its exit status: the node,
    given no ProcessConfig (its stdin closed at once), exits with status 1."""
    ends = NodeEnds()
    try:
        with server.connect() as sock:
            socket.send_fds(sock, [json.dumps(_request()).encode()], ends.fds())
            reply = json.loads(sock.recv(1 << 16))
            assert isinstance(reply["pid"], int) and set(reply["fds"]) == {"output", "socket", "status", "stdin"}
            ends.give_away()
            ends.close(ends.stdin_write)
            assert json.loads(sock.recv(1 << 16)) == {"exit": 1}
    finally:
        ends.close()


#: Whether a value is well-formed for a field of the request (what a malformed case must not be).
_WELL_FORMED = {
    "argv": lambda value: isinstance(value, list) and all(isinstance(arg, str) for arg in value),
    "env": lambda value: isinstance(value, dict) and all(isinstance(v, str) for v in value.values()),
    "cwd": lambda value: isinstance(value, str),
    "supervisor_pid": lambda value: isinstance(value, int),
}


def _malformed_requests(seed: int, count: int) -> list[tuple[str, bytes, int]]:
    """(what, payload, descriptors to pass): handmade cases, then random ones; none is a request."""
    valid = _request()
    request = json.dumps(valid).encode()
    cases = [
        ("nested lists", b"[" * 100_000, 4),
        ("nested objects", b'{"a":' * 20_000, 4),
        ("a request nested too deeply", b'{"argv": ' + b"[" * 20_000, 4),
        ("not UTF-8", b"\xff\xfe{", 4),
        ("not JSON", b"argv env cwd", 4),
        ("a JSON string", b'"request"', 4),
        ("empty", b"", 0),
        ("NaN", b"NaN", 4),
        ("a number of 100,000 digits", b"9" * 100_000, 4),
        ("no descriptors", request, 0),
        ("too few descriptors", request, 3),
        ("too many descriptors", request, 5),
        ("more descriptors than a request may carry", request, 10),
        ("the wrong descriptor names", json.dumps({**valid, "fds": ["a", "b", "c", "d"]}).encode(), 4),
        ("a missing field", json.dumps({k: v for k, v in valid.items() if k != "cwd"}).encode(), 4),
        ("an extra field", json.dumps({**valid, "pickle": "x"}).encode(), 4),
    ]
    for field, well_formed in _WELL_FORMED.items():
        for value in (None, 1, -1.5, True, "x", [], {}, [1], {"a": 1}, [[]], 2**70):
            if not well_formed(value):
                cases.append((f"{field}={value!r}", json.dumps({**valid, field: value}).encode(), 4))
    draw = random.Random(seed)
    for number in range(count):
        if number % 2:  # random bytes
            payload = bytes(draw.randrange(256) for _ in range(draw.randrange(1, 2048)))
        else:  # a request with a few random bytes overwritten
            mutated = bytearray(request)
            for _ in range(draw.randrange(1, 8)):
                mutated[draw.randrange(len(mutated))] = draw.randrange(256)
            payload = bytes(mutated)
        descriptors = draw.randrange(0, 7)
        if descriptors == 4 and _parses_to_a_request(payload):  # a byte changed inside a string
            descriptors = 3
        cases.append((f"random #{number}", payload, descriptors))
    return cases


def _parses_to_a_request(payload: bytes) -> bool:
    try:
        message = json.loads(payload)
    except ValueError:
        return False
    return isinstance(message, dict) and set(message) == set(_request())


def test_malformed_requests_are_refused_one_by_one_and_the_server_serves_on(server):
    assert _refused(server, b"not json")  # answered from the loop: the server's set-up is complete
    baseline = server.descriptors()
    _served(server)  # (released in the loop turn that sends the exit status, before any refusal below)
    pipes = [os.pipe() for _ in range(5)]
    passed = [fd for pair in pipes for fd in pair]
    started = time.monotonic()
    try:
        for what, payload, count in _malformed_requests(seed=40, count=200):
            assert _refused(server, payload, passed[:count]), what
            assert server.process.poll() is None, f"the server died of {what}"
    finally:
        for fd in passed:
            os.close(fd)
    assert time.monotonic() - started < 60, "each refusal is immediate"
    # not more than before: the first refusal's socket may still have been closing when counted
    assert server.descriptors() <= baseline, "a refused request's descriptors are closed"
    log = server.log()
    assert "nested too deeply" in log and "Traceback" not in log
    _served(server)


def test_an_oversized_request_is_refused(server):
    with server.connect() as sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 4 * fork_server.MAX_MESSAGE_BYTES)
        except PermissionError:
            pytest.skip("needs CAP_NET_ADMIN to send a message larger than the system's send buffer")
        oversized = json.dumps(_request(env={"X": "x" * fork_server.MAX_MESSAGE_BYTES})).encode()
        sock.send(oversized)
        assert sock.recv(1 << 16) == b""
    assert f"a request over {fork_server.MAX_MESSAGE_BYTES} bytes" in server.log()
    _served(server)


def test_a_slow_request_neither_holds_up_others_nor_stays_open(server):
    with server.connect() as silent:  # connects and sends nothing
        started = time.monotonic()
        _served(server)  # the server never waits on one peer
        assert time.monotonic() - started < REQUEST_TIMEOUT_S, "served while the silent connection waits"
        assert silent.recv(1 << 16) == b"", "closed once its request was due"
        waited = time.monotonic() - started
    assert REQUEST_TIMEOUT_S * 0.9 <= waited < WAIT_S
    assert "no request within" in server.log()
    _served(server)


@pytest.mark.parametrize("when", ["before the answer", "after the answer"])
def test_a_node_whose_supervisor_hangs_up_is_killed_and_reaped(server, when):
    ends = NodeEnds()  # the node would wait for its ProcessConfig for as long as stdin stays open
    try:
        with server.connect() as sock:
            socket.send_fds(sock, [json.dumps(_request()).encode()], ends.fds())
            if when == "after the answer":  # e.g. the supervisor gave up waiting for it
                assert isinstance(json.loads(sock.recv(1 << 16))["pid"], int)
        ends.give_away()
        assert ends.output_closed_within(WAIT_S), "the node was killed (its output closed)"
    finally:
        ends.close()
    _served(server)  # after this answer, the server has reaped every node that ended before
    assert psutil.Process(server.process.pid).children() == [], "no node left running or unreaped"
    assert "its supervisor" in server.log()


def test_a_supervisor_waits_for_another_starting_the_server_with_a_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(fork_server, "START_TIMEOUT_S", 1.0)
    monkeypatch.setattr(fork_server, "LOCK_POLL_S", 0.05)
    env, cwd = {"SPARKDL_UNIT": f"hung-starter-{os.getpid()}"}, str(tmp_path)
    key = fork_server.server_key(env, cwd)
    outcome = []

    def start():
        try:
            fork_server.start_node(
                ["x"], env, cwd, {}, supervisor_pid=os.getpid(), lifetime_pid=os.getpid(), log_dir=str(tmp_path)
            )
        except (OSError, RuntimeError) as exc:  # what the supervisor catches to spawn instead
            outcome.append(exc)

    with open(tmp_path / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another supervisor starting this server, and hung
        attempt = threading.Thread(target=start, daemon=True)
        attempt.start()
        attempt.join(WAIT_S)
        assert not attempt.is_alive(), "start_node waited on the start lock without a deadline"
    assert isinstance(outcome[0], TimeoutError) and "within 1 s" in str(outcome[0])


def test_connecting_to_a_server_that_takes_no_connection_has_a_deadline(monkeypatch):
    monkeypatch.setattr(fork_server, "CONNECT_TIMEOUT_S", 0.5)
    key = f"unit-backlog-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as stuck:
        stuck.bind(fork_server.socket_name(key))
        stuck.listen(0)  # a server that accepts nothing: one queued connection fills its backlog
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as first:
            first.connect(fork_server.socket_name(key))
            outcome = []

            def connect():
                try:
                    outcome.append(fork_server._connect(key))
                except OSError as exc:
                    outcome.append(exc)

            attempt = threading.Thread(target=connect, daemon=True)
            attempt.start()
            attempt.join(WAIT_S)
            assert not attempt.is_alive(), "connect waited on a full backlog without a deadline"
    assert isinstance(outcome[0], BlockingIOError)


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets and SO_PEERCRED")


def test_nodes_with_gpus_or_the_switch_off_are_never_forked():
    assert fork_server.wanted({}, None) is sys.platform.startswith("linux")
    assert not fork_server.wanted({}, "0")
    assert not fork_server.wanted({fork_server.SWITCH: "0"}, None)


def test_the_key_ignores_tf_config_and_mlflows_switch_and_nothing_else():
    env = {"PATH": "/bin", "TF_USE_LEGACY_KERAS": "1"}
    key = fork_server.server_key(env, "/work")
    assert fork_server.server_key({**env, "TF_CONFIG": '{"task": {}}'}, "/work") == key
    assert fork_server.server_key({**env, "MLFLOW_ALLOW_FILE_STORE": "true"}, "/work") == key
    assert fork_server.server_key({**env, "TF_USE_LEGACY_KERAS": "0"}, "/work") != key
    assert fork_server.server_key({**env, "TF_USE_LEGACY_KERAS": "True"}, "/work") == key  # on, as TF reads it
    assert fork_server.server_key({**env, "PATH": "/usr/bin"}, "/work") != key
    assert fork_server.server_key(env, "/elsewhere") != key


def test_keras_3_nodes_share_a_server_whether_tf_use_legacy_keras_is_unset_or_off():
    """TFCluster.run's nodes (the variable unset) and a Keras 3 KerasEstimator's (``0``) import the
    same TensorFlow: one server per executor serves both."""
    env = {"PATH": "/bin"}
    key = fork_server.server_key(env, "/work")
    assert fork_server.server_key({**env, "TF_USE_LEGACY_KERAS": "0"}, "/work") == key
    assert fork_server.server_key({**env, "TF_USE_LEGACY_KERAS": "false"}, "/work") == key
    assert fork_server.server_key({**env, "TF_USE_LEGACY_KERAS": "1"}, "/work") != key


def _minimal_request(**changes):
    request = {"argv": ["python"], "env": {"A": "1"}, "cwd": "/", "supervisor_pid": 1}
    request["fds"] = ["output", "socket", "status", "stdin"]
    return {**request, **changes}


@pytest.mark.parametrize(
    "message,fds",
    [
        ("not a dict", [3, 4, 5, 6]),
        (_minimal_request(extra=1), [3, 4, 5, 6]),
        (_minimal_request(env={"A": 1}), [3, 4, 5, 6]),
        (_minimal_request(argv="python"), [3, 4, 5, 6]),
        (_minimal_request(supervisor_pid="1"), [3, 4, 5, 6]),
        (_minimal_request(fds=["stdin"]), [3]),
        (_minimal_request(), [3, 4, 5]),  # a descriptor missing
    ],
)
def test_a_request_that_is_not_exactly_what_a_supervisor_sends_is_refused(message, fds):
    assert not fork_server._valid_request(message, fds)
    assert fork_server._valid_request(_minimal_request(), [3, 4, 5, 6])


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


def test_every_mlflow_switch_a_keras_estimator_passes_its_nodes_stays_out_of_the_key():
    from sparkdl.keras import tracking

    assert set(tracking.NODE_SWITCHES) <= set(fork_server.PER_NODE_VARIABLES)
