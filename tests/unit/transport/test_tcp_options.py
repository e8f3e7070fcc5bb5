"""sparkdl.transport.tcp_options: both ends of a channel keep TCP alive."""

from __future__ import annotations

import socket

import pytest

from sparkdl.transport import channel as ch
from sparkdl.transport.channel import ChannelServer, Endpoint, connect, new_secret

pytestmark = pytest.mark.timeout(120)


def keepalive_options(sock: socket.socket) -> tuple[int, int, int]:
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
    )


def test_channel_sockets_keep_tcp_alive_on_both_ends():
    secret, server_side = new_secret(), []
    endpoint = Endpoint("test-cluster", "node0", "echo")

    def keep(channel):
        server_side.append(keepalive_options(channel._sock))
        channel.send(channel.recv(timeout=5))

    srv = ChannelServer(secret, keep, endpoint=endpoint)
    try:
        with connect(srv.address, secret, timeout=5, endpoint=endpoint) as client:
            client_side = keepalive_options(client._sock)
            client.send({"x": 1})
            assert client.recv(timeout=5) == {"x": 1}
    finally:
        srv.close()
    expected = (1, ch.KEEPALIVE_IDLE_S, ch.KEEPALIVE_PROBES)
    assert client_side == expected and server_side == [expected]
