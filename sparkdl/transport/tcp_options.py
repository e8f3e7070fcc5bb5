"""The TCP options of every channel socket (``channel.py``): no Nagle delay, and keepalive."""

from __future__ import annotations

import socket

from ..common.timeouts import KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S

KEEPALIVE_PROBES = 3  # unanswered keepalive probes before the connection fails (about 60 s in all)


def tune(sock: socket.socket) -> None:
    """No Nagle delay, and TCP keepalive so a vanished peer host is noticed (about a minute)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
    ):
        if hasattr(socket, name):  # Linux; elsewhere the system's keepalive timings apply
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
