"""Reserving a node's TF (and TensorBoard) port until TensorFlow binds it itself.

The supervisor binds a free port, registers it with the driver, and the TF process releases it
just before ``map_fun`` starts its gRPC server. Between the release and TensorFlow's bind
(seconds: importing TensorFlow, building the strategy) another socket may take the port. A port
from the kernel's *ephemeral* range is the one at risk: any outgoing connection on the host
(Spark, Py4J, the feed, TensorFlow's own retries, which may even connect to themselves) can be
given it, and the TF server then fails with "Could not start gRPC server". So ports are picked
below that range, where only explicit binds land, and checked free by binding them.
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
RESERVED_PORTS_FILE = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")
LOWEST_PORT = 10000  # below this, ports belong to well-known and registered services
ATTEMPTS = 200


def ephemeral_range(text: str | None = None) -> tuple[int, int] | None:
    """The kernel's ephemeral port range ``(low, high)``, or None where it cannot be read."""
    try:
        low, high = (text if text is not None else EPHEMERAL_RANGE_FILE.read_text()).split()
        return int(low), int(high)
    except (OSError, ValueError):
        return None


def reserved_ports(text: str | None = None) -> set[int]:
    """Ports the administrator kept out of automatic use (``ip_local_reserved_ports``: "8080,9000-9010")."""
    try:
        text = text if text is not None else RESERVED_PORTS_FILE.read_text()
    except OSError:
        return set()
    ports: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        try:
            ports.update(range(int(first), int(last or first) + 1))
        except ValueError:
            continue
    return ports


def candidate_ports(ephemeral: tuple[int, int] | None, reserved: set[int]) -> list[int]:
    """Ports below the ephemeral range (and not reserved), in random order; empty if there are none."""
    if ephemeral is None or ephemeral[0] <= LOWEST_PORT:
        return []
    ports = [p for p in range(LOWEST_PORT, ephemeral[0]) if p not in reserved]
    return random.sample(ports, min(ATTEMPTS, len(ports)))


def reserve_port(host: str) -> socket.socket:
    """Bind (without listening) a free port on ``host``, outside the ephemeral range when the
    kernel says where that is, and keep it until the socket is closed (inheritable)."""
    for port in candidate_ports(ephemeral_range(), reserved_ports()):
        with contextlib.suppress(OSError):  # taken: try the next one
            return _bind(host, port)
    return _bind(host, 0)  # no free port below the range (or no range known): any free port


def _bind(host: str, port: int) -> socket.socket:
    """An inheritable socket bound to ``host:port``; raises OSError if the port is taken.

    ``SO_REUSEADDR`` is set only *after* the bind. Linux lets two sockets that both had it at
    bind time share a port while neither listens, so two nodes on one host could reserve the
    same port (and the second TF server fail). Set afterwards, it still lets TensorFlow's gRPC
    server (which binds with ``SO_REUSEADDR``) take the port while a copy of this socket lingers.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
