"""Every wait is bounded (issue 22, item 6): a channel's sends without an explicit send timeout,
and a feed queue's ``put`` given a timeout."""

from __future__ import annotations

import threading
import time

import pytest

from sparkdl.feed.queues import END, BoundedQueue
from sparkdl.transport import channel as ch
from sparkdl.transport.channel import ChannelServer, ChannelTimeout, Endpoint, connect, new_secret

pytestmark = pytest.mark.timeout(60)

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


def test_put_on_a_queue_that_stays_full_times_out():
    queue = BoundedQueue(max_bytes=10)
    queue.put("a", nbytes=10)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="stayed full"):
        queue.put("b", nbytes=5, timeout=0.2)
    assert 0.15 < time.monotonic() - start < 2
    queue.put(END, timeout=0.2)  # markers never wait
    assert queue.nbytes == 10 and [queue.get(timeout=1), queue.get(timeout=1)] == ["a", END]


def test_put_with_a_timeout_goes_in_once_a_reader_makes_room():
    queue, done = BoundedQueue(max_bytes=10), []
    queue.put("a", nbytes=10)  # the old signature still works
    writer = threading.Thread(target=lambda: done.append(queue.put("b", nbytes=5, timeout=10)), daemon=True)
    writer.start()
    assert queue.get(timeout=1) == "a"
    writer.join(5)
    assert done == [None] and queue.get(timeout=1) == "b"
