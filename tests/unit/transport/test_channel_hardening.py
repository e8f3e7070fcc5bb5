"""A ChannelServer survives what a peer without the secret (or a careless one with it) can throw
at it: a connection flood that exhausts its descriptors, idle connections that would hold every
handshake slot, floods of rejections in the log, oversized control messages, forged frame
headers announcing large frames, and more channels than it should hold."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import psutil
import pytest

from sparkdl.transport import channel as ch
from sparkdl.transport.channel import ChannelError, ChannelServer, Endpoint, connect, new_secret

from raw_peers import HELLO_BYTES, Relay, closed_by_peer, read_hello

pytestmark = pytest.mark.timeout(120)

# Runs in its own process: the open-file limit is per process.
FLOOD = r"""
import logging, resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
from sparkdl.transport import channel as ch
from sparkdl.transport.channel import ChannelServer, Endpoint, connect, new_secret
# Admission would hold the server to 8 pending connections from this one address: lift its caps,
# so that the flood's connections pile up in the server until its descriptors run out.
ch.MAX_HANDSHAKES = ch.MAX_HANDSHAKES_PER_SOURCE = 1000

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
log = logging.getLogger("sparkdl.transport.channel")
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
from sparkdl.transport.channel import ChannelServer, Endpoint
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


# -- pre-authentication flooding (issue 22, item 6) --

FLOOD_SIZE = 40


def recv_all(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything ``sock`` receives until the peer closes it (bounded by ``timeout`` in all)."""
    deadline, data = time.monotonic() + timeout, b""
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            sock.settimeout(remaining)
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


@contextlib.contextmanager
def idle_flood(address, count=FLOOD_SIZE, source="127.0.0.1"):
    """``count`` connections from ``source`` that never say a word, held open until the block ends."""
    flood = []
    try:
        for _ in range(count):
            flood.append(socket.create_connection(address, timeout=5, source_address=(source, 0)))
        yield flood
    finally:
        for sock in flood:
            sock.close()


@pytest.fixture
def echo_server(monkeypatch):
    """An echo ChannelServer whose handshake deadline is too long to free any slot during a test:
    only admission can let a client in past a flood."""
    monkeypatch.setattr(ch, "HANDSHAKE_TIMEOUT_S", 60.0)
    secret = new_secret()

    def answer(channel):
        channel.send({"echo": channel.recv(timeout=10)})

    srv = ChannelServer(secret, answer, endpoint=Endpoint("test", "node0", "echo"))
    yield srv, secret
    srv.close()


def test_a_client_is_served_while_idle_connections_from_its_address_are_held(echo_server):
    srv, secret = echo_server
    with idle_flood(srv.address):
        start = time.monotonic()
        with connect(srv.address, secret, timeout=10, endpoint=srv.endpoint) as client:
            client.send({"x": 1})
            assert client.recv(timeout=5) == {"echo": {"x": 1}}
        assert time.monotonic() - start < 3, "the client waited for silent peers' handshakes to expire"


def test_the_oldest_idle_connections_of_one_address_are_evicted_with_a_busy_notice(echo_server):
    srv, _ = echo_server
    with idle_flood(srv.address) as flood:
        evicted = flood[: FLOOD_SIZE - ch.MAX_HANDSHAKES_PER_SOURCE]
        for sock in evicted:  # each got the server's hello, then BUSY in place of its proof, then EOF
            received = recv_all(sock)
            assert received[:HELLO_BYTES].startswith(ch.MAGIC) and received[HELLO_BYTES:] == ch.BUSY
        for sock in flood[len(evicted) :]:  # the newest keep their slots
            read_hello(sock)
            assert not closed_by_peer(sock, 0.05)


def test_a_flood_from_one_address_leaves_another_address_its_slot(monkeypatch):
    """Even when the flood fills every slot of the server, it displaces its own connections."""
    monkeypatch.setattr(ch, "MAX_HANDSHAKES", 4)
    monkeypatch.setattr(ch, "HANDSHAKE_TIMEOUT_S", 60.0)
    secret = new_secret()
    srv = ChannelServer(secret, lambda channel: None, endpoint=Endpoint("test", "node0", "slots"))
    identity = srv.endpoint.encode()
    other = socket.create_connection(srv.address, timeout=5, source_address=("127.0.0.2", 0))
    with contextlib.closing(srv), other:
        hello = read_hello(other)
        with idle_flood(srv.address):
            server_nonce, client_nonce = hello[len(ch.MAGIC) :], os.urandom(ch.NONCE_BYTES)
            other.sendall(client_nonce + ch._mac(secret, b"client", identity, server_nonce, client_nonce))
            proof = recv_all(other, 5)[: ch.TAG_BYTES]
    assert proof == ch._mac(secret, b"server", identity, client_nonce, server_nonce)


class Front(Relay):
    """A relay that turns away its first ``refuse`` connections (``how``: closed before the hello,
    or told BUSY after it), then splices every later one onto ``upstream``."""

    def __init__(self, upstream, refuse: int, how: str):
        self.refuse, self.how = refuse, how
        super().__init__(upstream)

    def intercept(self, client: socket.socket) -> bool:
        if self.connections > self.refuse:
            return False
        if self.how == "busy":
            client.settimeout(5)
            client.sendall(ch.MAGIC + os.urandom(ch.NONCE_BYTES))
            answer = b""
            while len(answer) < ch.NONCE_BYTES + ch.TAG_BYTES:
                answer += client.recv(ch.NONCE_BYTES + ch.TAG_BYTES - len(answer))
            client.sendall(ch.BUSY)
        client.close()
        return True


@pytest.mark.parametrize("how", ["closed", "busy"])
def test_connect_retries_a_connection_the_server_had_no_slot_for(echo_server, how):
    srv, secret = echo_server
    front = Front(srv.address, refuse=3, how=how)
    try:
        with connect(front.address, secret, timeout=10, endpoint=srv.endpoint) as client:
            client.send({"x": 2})
            assert client.recv(timeout=5) == {"echo": {"x": 2}}
        assert front.connections == 4
    finally:
        front.close()


def test_connect_gives_up_on_a_server_that_never_has_a_slot_within_its_timeout(echo_server):
    srv, secret = echo_server
    front = Front(srv.address, refuse=10**6, how="closed")
    try:
        start = time.monotonic()
        with pytest.raises(ChannelError):
            connect(front.address, secret, timeout=1, endpoint=srv.endpoint)
        assert time.monotonic() - start < 2
    finally:
        front.close()


def test_an_idle_connection_is_dropped_within_the_servers_short_handshake_deadline():
    srv = ChannelServer(new_secret(), lambda channel: None, endpoint=Endpoint("test", "node0", "idle"))
    try:
        with socket.create_connection(srv.address, timeout=5) as sock:
            start = time.monotonic()
            read_hello(sock)
            assert closed_by_peer(sock, timeout=8)
            assert time.monotonic() - start < 5
    finally:
        srv.close()
