"""Raw-socket peers for the channel tests: read a server's hello by hand, and a relay that splices
connections onto another server byte for byte (a man in the middle, or a front that turns some away)."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

from sparkdl.transport import channel as ch

HELLO_BYTES = len(ch.MAGIC) + ch.NONCE_BYTES


def read_hello(sock: socket.socket) -> bytes:
    """The server's hello, read from a raw socket."""
    sock.settimeout(5)
    hello = b""
    while len(hello) < HELLO_BYTES:
        chunk = sock.recv(HELLO_BYTES - len(hello))
        assert chunk, "closed before the hello"
        hello += chunk
    assert hello.startswith(ch.MAGIC)
    return hello


class Relay:
    """Accepts connections and splices each onto ``upstream``, byte for byte; a subclass may
    handle a connection itself instead (``intercept`` returning True)."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def intercept(self, client: socket.socket) -> bool:
        """Whether this connection was dealt with here rather than spliced (default: never)."""
        return False

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            self.connections += 1
            self.sockets.append(client)
            if self.intercept(client):
                continue
            server = socket.create_connection(self.upstream, timeout=10)
            self.sockets.append(server)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()


def closed_by_peer(sock, timeout=5.0):
    """Whether the peer closes ``sock`` within ``timeout`` (EOF or reset)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.fixture
def server():
    """A ChannelServer whose handler echoes one message, then holds its channel until the test
    ends; yields (server, secret, the ChannelErrors its handlers raised)."""
    secret = ch.new_secret()
    errors, release = [], threading.Event()

    def hold(channel):
        try:
            channel.send({"echo": channel.recv(timeout=10)})
            release.wait(10)
        except ch.ChannelError as exc:
            errors.append(exc)
            raise

    srv = ch.ChannelServer(secret, hold, endpoint=ch.Endpoint("test", "node0", "hold"))
    yield srv, secret, errors
    release.set()
    srv.close()
