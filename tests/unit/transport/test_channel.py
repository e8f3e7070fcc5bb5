"""The authenticated channel, over real sockets on 127.0.0.1."""

import logging
import os
import pickle
import socket
import struct
import threading
import time

import pytest

from sparkdl.transport import channel as ch
from sparkdl.transport.channel import AuthenticationError, ChannelError, ChannelServer, Endpoint, connect, new_secret

from raw_peers import closed_by_peer, read_hello

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
