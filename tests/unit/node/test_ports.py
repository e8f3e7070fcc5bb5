"""Node port reservation: ports are taken below the kernel's ephemeral range (real sockets)."""

from __future__ import annotations

import socket

import pytest

from sparkdl.node import ports

pytestmark = pytest.mark.timeout(60)


def test_reading_the_kernel_ranges():
    assert ports.ephemeral_range("32768\t60999\n") == (32768, 60999)
    assert ports.ephemeral_range("garbage") is None
    assert ports.reserved_ports("8080,9000-9002\n") == {8080, 9000, 9001, 9002}
    assert ports.reserved_ports("\n") == set()


def test_candidates_avoid_the_ephemeral_range_and_reserved_ports():
    reserved = set(range(ports.LOWEST_PORT, 30000))
    candidates = ports.candidate_ports((32768, 60999), reserved)
    assert candidates and all(30000 <= p < 32768 for p in candidates)
    assert len(candidates) == len(set(candidates)) == ports.ATTEMPTS
    assert ports.candidate_ports((1024, 65535), set()) == []  # no room below: any free port
    assert ports.candidate_ports(None, set()) == []


def test_reserved_port_is_held_outside_the_ephemeral_range():
    ephemeral = ports.ephemeral_range()
    held = ports.reserve_port("127.0.0.1")
    try:
        port = held.getsockname()[1]
        if ephemeral and ephemeral[0] > ports.LOWEST_PORT:
            assert ports.LOWEST_PORT <= port < ephemeral[0], (port, ephemeral)
        assert held.get_inheritable()
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))  # nobody else gets it while reserved
    finally:
        held.close()
    with socket.socket() as server:  # released: TensorFlow can bind it (on every interface)
        server.bind(("0.0.0.0", port))
        server.listen()


def test_two_nodes_on_one_host_never_reserve_the_same_port(monkeypatch):
    """Both reservations once set ``SO_REUSEADDR`` before binding, which lets Linux bind two idle
    sockets to one port: two nodes of one cluster were given port 21927 and the second TF server
    failed with "Could not start gRPC server"."""
    first = ports.reserve_port("127.0.0.1")
    taken = first.getsockname()[1]
    monkeypatch.setattr(ports, "candidate_ports", lambda *_: [taken])  # the second node draws the same port
    second = ports.reserve_port("127.0.0.1")
    try:
        assert second.getsockname()[1] != taken
    finally:
        first.close()
        second.close()


def test_a_lingering_copy_of_the_reservation_does_not_keep_tensorflow_from_the_port():
    held = ports.reserve_port("127.0.0.1")
    port = held.getsockname()[1]
    try:
        with socket.socket() as server:  # how gRPC binds: SO_REUSEADDR, every interface
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("0.0.0.0", port))
            server.listen()
    finally:
        held.close()
