"""The authenticated channel, over real sockets on 127.0.0.1."""

from __future__ import annotations

import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time

import psutil
import pytest

from sparkdl.transport import channel as ch
from sparkdl.transport.channel import (
    AuthenticationError,
    ChannelError,
    ChannelServer,
    ChannelTimeout,
    Endpoint,
    connect,
    new_secret,
)

from raw_peers import closed_by_peer, read_hello, server  # noqa: F401 - server: a fixture

pytestmark = pytest.mark.timeout(60)

ENDPOINT = Endpoint("test-cluster", "node0", "echo")


def wait_until(condition, timeout=5.0):
    """Poll ``condition`` until true or ``timeout``; returns its last value."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


class Echo:
    """A ChannelServer whose handler records every message and exception and echoes messages back."""

    def __init__(self, secret):
        self.received, self.errors, self.invocations = [], [], 0
        self.connected, self.finished = threading.Event(), threading.Event()
        self.server = ChannelServer(secret, self.handle, endpoint=ENDPOINT)

    def handle(self, channel):
        self.invocations += 1
        self.connected.set()
        try:
            while True:
                message = channel.recv()
                self.received.append(message)
                channel.send({"echo": message})
        except Exception as exc:
            self.errors.append(exc)
            raise
        finally:
            self.finished.set()


@pytest.fixture
def secret():
    return new_secret()


@pytest.fixture
def echo(secret):
    server = Echo(secret)
    yield server
    server.server.close()


def raw_client(address):
    """A plain socket that has read the server's hello."""
    sock = socket.create_connection(address, timeout=5)
    read_hello(sock)
    return sock


def frame_bytes(channel, message):
    """The exact bytes ``channel.send(message)`` would write (advances its sequence number)."""
    real, captured = channel._sock, []

    class Capture:
        def send(self, data):
            captured.append(bytes(data))
            return len(data)

    channel._sock = Capture()
    try:
        channel.send(message)
    finally:
        channel._sock = real
    return bytearray(b"".join(captured))


class CreatesFile:
    """Unpickling this creates ``path``: a stand-in for code execution."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def test_round_trip_of_nested_json(echo, secret):
    message = {"a": [1, 2.5, None, True, {"b": "ü\n"}], "c": {"d": {"e": []}}, "n": -3}
    with connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
        client.send(message)
        assert client.recv(timeout=5) == {"echo": message}
    assert echo.received == [message]
    assert echo.invocations == 1


def test_many_messages_arrive_in_order(echo, secret):
    with connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
        for i in range(300):
            client.send({"i": i, "pad": "x" * (i % 17)})
        replies = [client.recv(timeout=5)["echo"]["i"] for _ in range(300)]
    assert replies == list(range(300))
    assert [m["i"] for m in echo.received] == list(range(300))


def test_recv_timeout_raises_channel_error(echo, secret):
    with connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
        with pytest.raises(ChannelError, match="no message within"):
            client.recv(timeout=0.2)


def test_wrong_secret_is_rejected_and_never_reaches_the_handler(echo):
    with pytest.raises(ChannelError):
        connect(echo.server.address, new_secret(), timeout=5, endpoint=ENDPOINT)
    assert wait_until(lambda: echo.server.rejected == 1)
    assert echo.invocations == 0 and echo.received == []


def test_wrong_secret_raises_authentication_error_on_the_client(echo):
    with pytest.raises(AuthenticationError):
        connect(echo.server.address, new_secret(), timeout=5, endpoint=ENDPOINT)


def impostor(sock):
    """Speaks the protocol but cannot prove the secret."""
    sock.sendall(ch.MAGIC + os.urandom(ch.NONCE_BYTES))
    sock.recv(ch.NONCE_BYTES + ch.TAG_BYTES)
    sock.sendall(os.urandom(ch.TAG_BYTES))


def http_server(sock):
    sock.sendall(b"HTTP/1.1 400 Bad Request\r\n" + b"x" * 60)


@pytest.mark.parametrize("answer, error", [(impostor, AuthenticationError), (http_server, ChannelError)])
def test_client_checks_the_server(secret, answer, error):
    """A server that does not know the secret (or speaks another protocol) is refused by the client."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        sock, _ = listener.accept()
        with sock:
            answer(sock)
            try:
                sock.recv(1)  # hold the connection until the client gives up
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(error):
            connect(listener.getsockname(), secret, timeout=5, endpoint=ENDPOINT)
    finally:
        thread.join(timeout=5)
        listener.close()
    assert not thread.is_alive()


@pytest.mark.parametrize("kind", ["garbage", "pickle"])
def test_garbage_or_pickle_instead_of_handshake_is_rejected(echo, tmp_path, kind):
    marker = tmp_path / "pwned"
    payload = os.urandom(ch.NONCE_BYTES + ch.TAG_BYTES)
    if kind == "pickle":
        payload = pickle.dumps(CreatesFile(marker))
        pickle.loads(pickle.dumps(CreatesFile(tmp_path / "proof")))  # the payload really is live
        assert (tmp_path / "proof").exists()
    with raw_client(echo.server.address) as sock:
        sock.sendall(payload.ljust(ch.NONCE_BYTES + ch.TAG_BYTES, b"\0"))
        assert closed_by_peer(sock)
    assert wait_until(lambda: echo.server.rejected == 1)
    assert echo.invocations == 0
    assert not marker.exists()


def test_authenticated_pickle_frame_is_not_unpickled(echo, secret, tmp_path):
    """Even a peer holding the secret cannot make the server unpickle: payloads are JSON only."""
    marker = tmp_path / "pwned"
    with connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
        client._send_frame(ch.KIND_JSON, pickle.dumps(CreatesFile(marker)))  # genuinely tagged, not JSON
        assert echo.finished.wait(5)
    assert echo.received == [] and isinstance(echo.errors[0], (ValueError, ChannelError))  # not JSON
    assert not marker.exists()


def test_stalled_handshake_is_dropped_within_the_timeout(echo, monkeypatch):
    monkeypatch.setattr(ch, "HANDSHAKE_TIMEOUT_S", 0.5)
    with raw_client(echo.server.address) as sock:
        sock.sendall(b"\1" * 10)  # part of the answer, then silence
        start = time.monotonic()
        assert closed_by_peer(sock, timeout=5)
        assert time.monotonic() - start < 3
    assert wait_until(lambda: echo.server.rejected == 1)
    assert echo.invocations == 0


@pytest.mark.parametrize("attack", ["tamper", "replay"])
def test_tampered_or_replayed_frame_fails_the_integrity_check(echo, secret, attack):
    with connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
        first = frame_bytes(client, {"x": "hello"})
        client._sock.sendall(bytes(first))  # the captured frame is genuine: it is accepted
        assert client.recv(timeout=5) == {"echo": {"x": "hello"}}
        if attack == "tamper":
            bad = frame_bytes(client, {"x": "hello"})
            bad[-3] ^= 0x01  # "hello" -> "helmo": still valid JSON, only the tag can tell
        else:
            bad = first  # same bytes again, stale sequence number
        client._sock.sendall(bytes(bad))
        assert echo.finished.wait(5)
        assert isinstance(echo.errors[0], AuthenticationError)
        with pytest.raises(ChannelError):  # the server dropped the channel
            client.recv(timeout=5)
    assert echo.received == [{"x": "hello"}]


def test_rejection_log_never_contains_the_secret(echo, secret, caplog):
    wrong = new_secret()
    with caplog.at_level(logging.WARNING, logger="sparkdl.transport.channel"):
        with pytest.raises(ChannelError) as info:
            connect(echo.server.address, wrong, timeout=5, endpoint=ENDPOINT)
        assert wait_until(lambda: any("rejected" in r.getMessage() for r in caplog.records))
    text = caplog.text + str(info.value)
    for key in (secret, wrong):
        for form in (key.hex(), repr(key), key.decode("latin-1"), str(list(key))):
            assert form not in text


def test_close_closes_open_channels_and_stops_accepting(echo, secret):
    client = connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT)
    try:
        assert echo.connected.wait(5)
        address = echo.server.address
        echo.server.close()
        start = time.monotonic()
        with pytest.raises(ChannelError):
            client.recv(timeout=5)
        assert time.monotonic() - start < 2
        assert echo.finished.wait(5)
    finally:
        client.close()
    with pytest.raises(OSError):  # ChannelError is an OSError too
        connect(address, secret, timeout=2, endpoint=ENDPOINT)
    assert echo.invocations == 1


def test_oversized_frames_are_rejected(echo, secret, monkeypatch):
    monkeypatch.setattr(ch, "MAX_FRAME_BYTES", 64)
    with connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
        client.send({"d": "x" * 30})  # fits
        assert client.recv(timeout=5) == {"echo": {"d": "x" * 30}}
        client.send({"d": "x" * 50})  # fits one way; its echo does not
        with pytest.raises(ChannelError, match="exceeds"):
            client.recv(timeout=5)
        client.send({"d": "x" * 100})  # too big for the server
        assert echo.finished.wait(5)
    assert len(echo.received) == 2
    assert isinstance(echo.errors[0], ChannelError) and "exceeds" in str(echo.errors[0])


def test_oversized_length_is_rejected_before_reading_the_payload(echo, secret):
    with connect(echo.server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
        client._sock.setblocking(True)
        client._sock.sendall(struct.pack("!I", ch.MAX_FRAME_BYTES + 1))  # a header, and no payload at all
        assert echo.finished.wait(5)
    assert "exceeds" in str(echo.errors[0])


def test_close_waits_for_the_handlers_it_ended(secret):
    """close() returns once the threads serving its channels are done (bounded by
    CLOSE_JOIN_S), so nothing of a closed server runs on behind its owner's back."""
    entered, cleaned_up = threading.Event(), threading.Event()

    def handler(channel):
        entered.set()
        try:
            channel.recv()
        finally:
            time.sleep(0.3)  # a handler's cleanup after its channel closed, which takes a moment
            cleaned_up.set()

    server = ChannelServer(secret, handler, endpoint=ENDPOINT)
    client = connect(server.address, secret, timeout=5, endpoint=ENDPOINT)
    try:
        assert entered.wait(5)
        server.close()
        assert cleaned_up.is_set(), "close() returned while a handler was still running"
        assert not [t for t in threading.enumerate() if t.name.startswith("sparkdl-channel")]
    finally:
        client.close()


@pytest.mark.timeout(120)
def test_a_send_to_a_peer_that_never_reads_gives_up_and_closes_the_channel():
    secret, release = new_secret(), threading.Event()
    endpoint = Endpoint("test-cluster", "node0", "sink")
    srv = ChannelServer(secret, lambda channel: release.wait(30), endpoint=endpoint)  # never reads
    try:
        with connect(srv.address, secret, timeout=5, endpoint=endpoint) as client:
            client.set_send_timeout(0.5)
            start = time.monotonic()
            with pytest.raises(ChannelTimeout, match="accepted no data"):
                for _ in range(1000):  # 1 GiB at most: far past any socket buffer
                    client.send_bytes(bytes(1 << 20))
            assert time.monotonic() - start < 10
            with pytest.raises(ChannelError, match="closed"):  # a partial frame cannot be taken back
                client.send({"more": 1})
    finally:
        release.set()
        srv.close()


FRAME = bytes(4 << 20)  # a few of these fill any loopback socket's buffers


def send_until_stuck(channel, outcome: list) -> None:
    """Send binary frames to a peer that reads nothing, until a send fails (recorded in ``outcome``)."""
    try:
        for _ in range(64):
            channel.send_bytes(FRAME)
        outcome.append("the peer took 256 MiB without reading")
    except Exception as exc:  # the error is the outcome under test
        outcome.append(exc)


@pytest.mark.parametrize("side", ["client", "server"])
def test_a_send_without_an_explicit_timeout_is_bounded(monkeypatch, side):
    """Channels start with DEFAULT_SEND_TIMEOUT_S: a peer that stops reading cannot hold a sender forever."""
    monkeypatch.setattr(ch, "DEFAULT_SEND_TIMEOUT_S", 0.5)
    secret, release, outcome = new_secret(), threading.Event(), []

    def handler(channel):
        if side == "server":
            send_until_stuck(channel, outcome)
        release.wait(30)  # a client's peer that reads nothing

    server = ChannelServer(secret, handler, endpoint=Endpoint("test", "node0", "sink"))
    client = connect(server.address, secret, timeout=5, endpoint=server.endpoint)
    sender = None
    try:
        if side == "client":
            sender = threading.Thread(target=send_until_stuck, args=(client, outcome), daemon=True)
            sender.start()
            sender.join(20)
            assert not sender.is_alive(), "a send waited on a peer that reads nothing for 20 s"
        else:
            deadline = time.monotonic() + 20
            while not outcome:
                assert time.monotonic() < deadline, "the server's send waited on a client that reads nothing"
                time.sleep(0.05)
        assert isinstance(outcome[0], ChannelTimeout), outcome
    finally:
        client.close()  # also ends a send still stuck (old code)
        release.set()
        server.close()


def test_set_send_timeout_none_restores_the_bounded_default(monkeypatch):
    monkeypatch.setattr(ch, "DEFAULT_SEND_TIMEOUT_S", 7.0)
    secret = new_secret()
    server = ChannelServer(secret, lambda channel: channel.recv(timeout=5), endpoint=Endpoint("test", "node0", "n"))
    try:
        with connect(server.address, secret, timeout=5, endpoint=server.endpoint) as client:
            client.set_send_timeout(1.0)
            client.set_send_timeout(None)
            assert client._send_timeout == 7.0
    finally:
        server.close()


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


@pytest.mark.timeout(120)
def test_a_descriptor_exhausting_flood_does_not_stop_the_server(tmp_path):
    run = subprocess.run([sys.executable, "-c", FLOOD], capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout.split()
    assert out[out.index("ANSWER") + 1 : out.index("FLOOD")] == ["{'echo':", "{'x':", "1}}"], run.stdout
    # One line for the first refusal, then summaries at most every REJECTION_LOG_S: not one per connection.
    assert int(out[out.index("WARNINGS") + 1]) <= 4, run.stdout


@pytest.mark.timeout(120)
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


@pytest.mark.timeout(120)
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


def test_a_binary_frame_lands_in_the_buffer_the_receiver_allocates(secret):
    """``recv_any(allocate=...)`` takes a binary frame's bytes into the receiver's own buffer (the
    feed server's: Arrow's memory pool); JSON frames, and binary ones by default, stay bytearrays."""
    import numpy as np

    from sparkdl.feed import aligned

    got, done = [], threading.Event()

    def handle(channel):
        sizes = []
        allocate = lambda size: sizes.append(size) or np.empty(size, np.uint8)  # noqa: E731
        try:
            got.append((channel.recv_any(timeout=5, allocate=allocate), sizes))
            got.append(channel.recv_any(timeout=5, allocate=allocate))
            got.append(channel.recv_any(timeout=5))
            got.append(channel.recv_any(timeout=5, allocate=aligned.pooled))  # the feed server's
        finally:
            done.set()

    server = ChannelServer(secret, handle, endpoint=ENDPOINT)
    try:
        with connect(server.address, secret, timeout=5, endpoint=ENDPOINT) as client:
            client.send_bytes(b"\x01\x02\x03")
            client.send({"json": True})
            client.send_bytes(b"abc")
            client.send_bytes(bytes(range(256)) * 8)
            assert done.wait(10)
    finally:
        server.close()
    (first, sizes), message, default, arrow = got
    assert arrow.tobytes() == bytes(range(256)) * 8, "Arrow's memory is written by recv_into"
    assert isinstance(first, np.ndarray) and first.tobytes() == b"\x01\x02\x03" and sizes == [3]
    assert message == {"json": True}, "JSON frames are not the allocator's"
    assert isinstance(default, bytearray) and default == b"abc"
