"""Node-side streams are bounded in time (issue 12, finding 5), over real sockets on 127.0.0.1.

A feeder names its ``feed_timeout`` in its stream's first message; the node waits no longer than
that for a frame from it, nor for it to take a frame of results. A silent feeder is dropped and
releases the node's inference turn; a feeder that stops reading its results fails its own Spark
task, while ``map_fun``'s ``batch_results`` returns and the node serves the next stream. Channel
sockets keep TCP alive, and a send to a peer that never reads gives up.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import numpy as np
import pytest
from feed_servers import Worker, labelled, make_server, secret, send_end, send_plan, server, target  # noqa: F401

from sparkdl.feed import feeder
from sparkdl.feed.data_feed import DataFeed
from sparkdl.feed.feeder import FeedError
from sparkdl.feed.shares import balanced_shares
from sparkdl.transport import channel as ch
from sparkdl.transport.channel import ChannelError, ChannelServer, ChannelTimeout, Endpoint, connect, new_secret

pytestmark = pytest.mark.timeout(120)

RESULT_FLOATS = 16384  # 64 KiB of results per row: a few batches fill the socket buffers


def wait_until(condition, timeout: float = 10.0) -> bool:
    """Poll ``condition`` until true or ``timeout`` (bounded); returns its last value."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def serve_inference(feed: DataFeed, answer, durations: list | None = None) -> Worker:
    """``map_fun`` of an inference node: read batches and answer each with ``answer(batch)``."""

    def consume():
        while not feed.should_stop():
            batch = feed.next_batch(64)
            if batch:
                start = time.monotonic()
                feed.batch_results(answer(batch))
                if durations is not None:
                    durations.append(time.monotonic() - start)

    return Worker(consume)


def infer(tgt, partition: int, rows: list) -> list:
    """Feed one inference partition to node 0 and return its results."""
    return [r for results in feeder.infer_partition(tgt, 0, partition, feeder.rdd_batches(rows)) for r in results]


def test_a_silent_inference_feeder_is_dropped_and_releases_the_nodes_turn(server, secret):
    consumer = serve_inference(DataFeed(server, train_mode=False, feed_timeout=30), lambda b: [v + 1 for v in b])
    silent = connect(server.address, secret, timeout=10, endpoint=server.endpoint)
    try:
        silent.send({"type": "infer", "partition": 0, "qname": "input", "timeout": 1.0})  # ... and nothing more
        assert wait_until(server._inference_turn.locked), "the silent stream never took the node's turn"
        start = time.monotonic()
        served = Worker(infer, target(secret, server, feed_timeout=30.0), 1, [1, 2, 3])
        assert served.outcome(timeout=20) == [2, 3, 4], "the next partition waited on a silent feeder"
        assert time.monotonic() - start < 10
        notice = silent.recv(timeout=5)
        assert notice["type"] == "dropped" and "inference partition 0" in notice["message"]
        assert "feed_timeout" in notice["message"]
        with pytest.raises(ChannelError):  # and its channel is closed
            silent.recv(timeout=5)
    finally:
        silent.close()
    send_end(server, secret)
    consumer.outcome()


def test_a_feeder_that_stops_reading_its_results_fails_its_task_not_map_fun(server, secret):
    durations: list[float] = []
    consumer = serve_inference(
        DataFeed(server, train_mode=False, feed_timeout=30),
        lambda batch: np.zeros((len(batch), RESULT_FLOATS), np.float32),
        durations,
    )
    stalled = feeder.infer_partition(
        target(secret, server, feed_timeout=2.0), 0, 0, feeder.rdd_batches(list(range(2000)))
    )  # 128 MiB of results
    try:
        assert len(next(stalled)) == 64  # its first results arrive; then its task reads no more
        # map_fun's batch_results gives up on that task after its feed_timeout, answers the rest of the
        # partition without waiting, and serves the next partition.
        rest = Worker(infer, target(secret, server, feed_timeout=30.0), 1, [100, 200])
        results = rest.outcome(timeout=30)
        assert len(results) == 2 and all(r.shape == (RESULT_FLOATS,) for r in results)
        assert consumer.is_alive() and consumer.error is None, "map_fun failed with its feeder"
        assert max(durations) < 10, f"batch_results was held {max(durations):.1f} s by a task that stopped reading"
        # The stalled task fails when it reads again: its node dropped the stream.
        with pytest.raises(FeedError, match="lost node worker:0 during inference on partition 0"):
            Worker(list, stalled).outcome(timeout=30)
    finally:
        stalled.close()
    send_end(server, secret)
    consumer.outcome()


def test_a_training_feeder_that_goes_silent_is_dropped_and_its_task_fails(server, secret, caplog):
    send_plan(server, secret, 1, 20)
    resume = threading.Event()
    first, second = feeder.rdd_batches(labelled(10)), feeder.rdd_batches(labelled(10, start=10))

    def batches():  # a partition whose second half takes long to compute
        yield from first
        resume.wait(30)
        yield from second

    worker = Worker(
        feeder.feed_training_partition,
        target(secret, server, feed_timeout=1.0),
        1,
        0,
        0,
        balanced_shares([20], 1),
        batches(),
    )
    with caplog.at_level(logging.WARNING, logger="sparkdl.feed.server"):
        assert wait_until(lambda: "sent nothing for 1 s" in caplog.text), "the node never dropped a silent feeder"
    resume.set()
    with pytest.raises(FeedError, match=r"dropped partition 0: .*sent nothing for 1 s \(feed_timeout\)"):
        worker.outcome(timeout=30)


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
