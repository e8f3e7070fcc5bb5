"""A ChannelServer survives what a peer without the secret (or a careless one with it) can throw
at it: a connection flood that exhausts its descriptors, floods of rejections in the log,
oversized control messages, forged frame headers announcing large frames, and more channels
than it should hold."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
import time

import psutil
import pytest
from test_channel import closed_by_peer

from sparkdl import channel as ch
from sparkdl.channel import ChannelError, ChannelServer, Endpoint, connect, new_secret

pytestmark = pytest.mark.timeout(120)

# Runs in its own process: the open-file limit is per process.
FLOOD = r"""
import logging, resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
from sparkdl.channel import ChannelServer, Endpoint, connect, new_secret

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
log = logging.getLogger("sparkdl.channel")
log.addHandler(Keep())
log.setLevel(logging.WARNING)

secret = new_secret()
def answer(channel):
    channel.send({"echo": channel.recv(timeout=10)})
server = ChannelServer(secret, answer, endpoint=Endpoint("test", "node0", "echo"))
flood = []
for _ in range(80):  # silent connections, never a handshake
    try:
        flood.append(socket.create_connection(server.address, timeout=2))
    except OSError:
        pass
deadline = time.monotonic() + 20
while not any("Too many open files" in line for line in lines):  # the server ran out of descriptors
    assert time.monotonic() < deadline, ("the flood never exhausted the server", lines)
    time.sleep(0.05)
for sock in flood:
    sock.close()
answered = None
deadline = time.monotonic() + 30
while answered is None and time.monotonic() < deadline:  # bounded retries while descriptors free up
    try:
        with connect(server.address, secret, timeout=5, endpoint=server.endpoint) as client:
            client.send({"x": 1})
            answered = client.recv(timeout=5)
    except Exception:
        time.sleep(0.1)
print("ANSWER", answered, "FLOOD", len(flood), "WARNINGS", len(lines))
"""


def test_a_descriptor_exhausting_flood_does_not_stop_the_server(tmp_path):
    run = subprocess.run([sys.executable, "-c", FLOOD], capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout.split()
    assert out[out.index("ANSWER") + 1 : out.index("FLOOD")] == ["{'echo':", "{'x':", "1}}"], run.stdout
    # One line for the first refusal, then summaries at most every REJECTION_LOG_S: not one per connection.
    assert int(out[out.index("WARNINGS") + 1]) <= 4, run.stdout


@pytest.fixture
def server():
    secret = new_secret()
    errors, release = [], threading.Event()

    def hold(channel):
        try:
            channel.send({"echo": channel.recv(timeout=10)})
            release.wait(10)
        except ChannelError as exc:
            errors.append(exc)
            raise

    srv = ChannelServer(secret, hold, endpoint=Endpoint("test", "node0", "hold"))
    yield srv, secret, errors
    release.set()
    srv.close()


def test_a_json_frame_over_its_limit_is_refused_unread(server):
    srv, secret, errors = server
    with connect(srv.address, secret, timeout=5, endpoint=srv.endpoint) as client:
        # The server refuses the frame after its header and drops the channel: the rest of the send
        # may already fail (connection reset), else the reply never comes.
        with pytest.raises(OSError):  # ChannelError is one too
            client.send({"blob": "x" * (ch.MAX_JSON_BYTES + 10)})
            client.recv(timeout=5)
    deadline = time.monotonic() + 5
    while not errors:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert "JSON frame of" in str(errors[0]) and "exceeds" in str(errors[0])


def test_channels_beyond_the_cap_are_refused(server, monkeypatch):
    monkeypatch.setattr(ch, "MAX_CHANNELS", 2)
    srv, secret, _ = server
    kept = [connect(srv.address, secret, timeout=5, endpoint=srv.endpoint) for _ in range(2)]
    for client in kept:
        client.send({"n": 1})
        assert client.recv(timeout=5) == {"echo": {"n": 1}}
    with connect(srv.address, secret, timeout=5, endpoint=srv.endpoint) as extra:
        with pytest.raises(OSError):  # closed by the server: the send or the receive fails
            extra.send({"n": 3})
            extra.recv(timeout=5)
    deadline = time.monotonic() + 5
    while srv.rejected < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    for client in kept:
        client.close()


# The receiver runs in its own process, so that its resident memory is its own.
RECEIVER = r"""
import sys
from sparkdl.channel import ChannelServer, Endpoint
secret = sys.stdin.buffer.read(32)
def read_frames(channel):
    while True:
        channel.recv_any(timeout=60)
server = ChannelServer(secret, read_frames, endpoint=Endpoint("test", "node0", "feed"))
print(server.address[1], flush=True)
sys.stdin.buffer.read()  # serve until the test closes our stdin
"""
FORGED_BYTES = 60 << 20  # what each forged header announces: under the 64 MiB limit of binary frames
FORGERS = 4


def test_a_forged_binary_frame_header_costs_the_receiver_no_memory():
    """A peer inside an authenticated channel (or one injecting into it) announces 60 MiB binary
    frames with tags nobody computed: the receiver checks the header's tag before it allocates
    the body, drops the channel, and its resident memory does not grow by the announced size."""
    secret, endpoint = new_secret(), Endpoint("test", "node0", "feed")
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    clients = []
    try:
        receiver.stdin.write(secret)
        receiver.stdin.flush()
        port = int(receiver.stdout.readline())
        clients = [connect(("127.0.0.1", port), secret, timeout=10, endpoint=endpoint) for _ in range(FORGERS)]
        before = psutil.Process(receiver.pid).memory_info().rss
        forged = struct.pack("!I", FORGED_BYTES) + ch.KIND_BYTES + b"B" * (2 * ch.TAG_BYTES) + bytes(1 << 16)
        for client in clients:
            client._sock.setblocking(True)
            client._sock.sendall(forged)  # a header and the start of a body, then the peer waits
        deadline, still_open = time.monotonic() + 10, list(clients)
        while still_open and time.monotonic() < deadline:  # bounded: until the receiver dropped each one
            still_open = [c for c in still_open if not closed_by_peer(c._sock, 0.1)]
        grown = psutil.Process(receiver.pid).memory_info().rss - before
        assert grown < 16 << 20, f"{FORGERS} forged headers grew the receiver by {grown >> 20} MiB"
        assert not still_open, "the receiver kept reading frames whose header failed its check"
    finally:
        for client in clients:
            client.close()
        receiver.stdin.close()
        receiver.stdout.close()
        try:
            receiver.wait(timeout=10)
        except subprocess.TimeoutExpired:
            receiver.kill()
            receiver.wait(timeout=10)
