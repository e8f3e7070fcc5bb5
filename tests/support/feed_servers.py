"""A node's feed server over real sockets, for tests: fixtures that start FeedServers (closed
after the test), a driver's messages to them, a feeder's target, and labelled rows to feed."""

import threading

import numpy as np
import pytest

from sparkdl.feed import feeder
from sparkdl.feed.feeder import FeedTarget
from sparkdl.feed.server import FeedServer
from sparkdl.feed.shares import balanced_shares
from sparkdl.transport import protocol
from sparkdl.transport.channel import Endpoint, connect, new_secret


class Worker(threading.Thread):
    """Runs ``fn(*args)`` on a daemon thread and keeps its result or exception."""

    def __init__(self, fn, *args):
        super().__init__(daemon=True)
        self.fn, self.args, self.result, self.error = fn, args, None, None
        self.start()

    def run(self):
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # noqa: BLE001 - re-raised by outcome()
            self.error = exc

    def outcome(self, timeout=60.0):
        self.join(timeout)
        assert not self.is_alive(), f"{self.fn.__name__} did not finish within {timeout} s"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def secret():
    return new_secret()


@pytest.fixture
def make_server(secret):
    servers = []

    def make(max_queue_bytes=64 * 1024 * 1024):
        servers.append(
            FeedServer(
                secret,
                "127.0.0.1",
                max_queue_bytes=max_queue_bytes,
                endpoint=Endpoint.feed("test-cluster", len(servers)),
            )
        )
        return servers[-1]

    yield make
    for server in servers:  # release handler threads blocked on a full queue, then stop
        server.terminated.set()
        for queue in list(server._queues.values()):
            queue.drop_data()
        server.close()


@pytest.fixture
def server(make_server):
    return make_server()


def driver_send(server, secret, message):
    with connect(server.address, secret, timeout=10, endpoint=server.endpoint) as channel:
        channel.send(message)
        assert channel.recv(10) == {"type": "ack"}


def send_plan(server, secret, session, rows_per_epoch, epochs=1):
    plan = protocol.TrainingPlan(
        session=session, epochs=epochs, rows_per_epoch=rows_per_epoch, cache=False, shuffle=False
    )
    driver_send(server, secret, protocol.Plan(plan).wire())


def send_end(server, secret):
    driver_send(server, secret, {"type": "end", "qname": "input"})


def target(secret, *servers, feed_timeout=30.0, qname="input"):
    return FeedTarget(
        secret,
        tuple(s.address for s in servers),
        tuple(s.endpoint for s in servers),
        tuple(f"worker:{i}" for i in range(len(servers))),
        feed_timeout,
        qname,
    )


def feed_rows(tgt, rows, session=1, epoch=0, partition=0):
    """Feed RDD rows as one partition to a single node; returns (rows read, mask of skipped nodes)."""
    plan = balanced_shares([0] * partition + [len(rows)], 1)
    return feeder.feed_training_partition(tgt, session, epoch, partition, plan, feeder.rdd_batches(rows))


def labelled(n, start=0):
    return [(np.array([i, -i], np.float32), i) for i in range(start, start + n)]
