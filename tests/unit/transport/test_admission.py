"""A ChannelServer's admission of unauthenticated peers (``transport/admission.py``): idle
connections that would hold every handshake slot, floods from one address, more channels than it
should hold, and clients that retry for a slot."""

from __future__ import annotations

import contextlib
import os
import socket
import time

import pytest

from sparkdl.transport import channel as ch
from sparkdl.transport.channel import ChannelError, ChannelServer, Endpoint, connect, new_secret

from raw_peers import HELLO_BYTES, Relay, closed_by_peer, read_hello, server  # noqa: F401 - server: a fixture

pytestmark = pytest.mark.timeout(120)


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
