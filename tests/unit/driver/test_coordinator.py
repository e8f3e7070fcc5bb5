"""The coordinator's side of the control protocol, over real authenticated sockets: a stand-in
supervisor (this test) registers and sends each message a node's supervisor sends, and the
driver's view of the node follows. No Spark and no TF process: the messages are the subject."""

from __future__ import annotations

import threading

import pytest

from sparkdl.common.roles import NodeRole
from sparkdl.driver.coordinator import Coordinator, Listeners, NodeStatus
from sparkdl.transport import protocol
from sparkdl.transport.channel import ChannelError, ChannelTimeout, Endpoint, connect, new_secret

pytestmark = pytest.mark.timeout(60)


ROLES = [NodeRole(0, "chief", 0), NodeRole(1, "worker", 0)]


SECRET = new_secret()


@pytest.fixture
def heard():
    """What the coordinator's listeners heard (given at construction, as TFCluster gives them)."""
    return {"inferred": [], "logged": [], "epochs": [], "fits": []}


@pytest.fixture
def coordinator(heard):
    listeners = Listeners(
        on_inferred=lambda node, event: heard["inferred"].append(event),
        on_log=lambda node, lines: heard["logged"].extend(lines),
        on_epoch_end=lambda node, metrics: heard["epochs"].append(metrics["epoch"]),
        on_fit_begin=lambda node, metrics: heard["fits"].append((node.role.label, metrics["epoch"])),
    )
    coordinator = Coordinator(ROLES, SECRET, "127.0.0.1", cluster_id="msgtest", listeners=listeners)
    yield coordinator
    coordinator.close()


def _register(coordinator: Coordinator, number: int):
    """Connect as node ``number``'s supervisor and register."""
    channel = connect(coordinator.address, SECRET, endpoint=Endpoint.coordinator("msgtest"))
    channel.send(protocol.Register(number, "127.0.0.1", port=2000 + number, pid=10, anchor_pid=9).wire())
    return channel


def _wait(coordinator: Coordinator, predicate) -> None:
    assert coordinator.wait_until(predicate, 10), "the coordinator never got there"


def test_a_node_goes_through_every_status_as_its_messages_arrive(coordinator, heard):
    inferred, logged, epochs = heard["inferred"], heard["logged"], heard["epochs"]
    chief = _register(coordinator, 0)
    node = coordinator.nodes[0]
    _wait(coordinator, lambda c: node.status is NodeStatus.REGISTERED)
    assert coordinator.cluster_spec is None  # the worker has not registered yet
    worker = _register(coordinator, 1)
    for channel in (chief, worker):
        assert protocol.parse(channel.recv(10), protocol.ClusterSpec).cluster_spec == {
            "chief": ["127.0.0.1:2000"],
            "worker": ["127.0.0.1:2001"],
        }
    for message in (
        protocol.Started(pid=11),
        protocol.FeedReady(port=4000),
        protocol.Serving(),
        protocol.TensorBoard("http://127.0.0.1:6006"),
        protocol.Progress({"step": 5, "loss": 0.5}),
        protocol.Progress({"epoch": 2, "fit_begin": True, "awaits_word": False}),
        protocol.Progress({"epoch": 0, "epoch_end": True, "loss": 0.4}),
        protocol.Inferred(run="r", stage=1, partition=0, rows=7),
        protocol.Log(["hello from the chief"]),
        protocol.FeedConsumed(qname="input", session=3, rows_read=30, rows_received=30),  # last: it wakes waiters
    ):
        chief.send(message.wire())
    _wait(coordinator, lambda c: node.feed_consumed.get("input") == 3)  # one channel: in order
    assert (node.status, node.pid, node.feed_port, node.serving) == (NodeStatus.RUNNING, 11, 4000, True)
    assert coordinator.tensorboard_url == "http://127.0.0.1:6006"
    assert node.metrics == {
        **{"step": 5, "loss": 0.4, "epoch": 0, "epoch_end": True, "rows_read": 30, "rows_received": 30},
        **{"fit_begin": True, "awaits_word": False},
    }
    assert epochs == [0] and heard["fits"] == [("chief:0", 2)]
    assert inferred == [protocol.Inferred(run="r", stage=1, partition=0, rows=7)]
    assert logged == ["hello from the chief"]
    chief.send(protocol.Exited(exit_code=0, signal=None, stopped=True, failed=False).wire())
    _wait(coordinator, lambda c: node.finished)
    assert node.status is NodeStatus.EXITED and not coordinator.failures
    worker.send(protocol.Exited(exit_code=1, signal=None, stopped=False, failed=True, traceback="Boom").wire())
    _wait(coordinator, lambda c: c.failures)
    assert coordinator.failures[0].label == "worker:0" and "Boom" in coordinator.failures[0].traceback


def test_a_malformed_message_fails_its_node_naming_the_problem(coordinator):
    chief, worker = _register(coordinator, 0), _register(coordinator, 1)
    chief.recv(10)
    chief.send({"type": "started", "pid": "eleven"})
    _wait(coordinator, lambda c: c.failures)
    failure = coordinator.failures[0]
    assert failure.label == "chief:0"
    assert "'started' message: field 'pid' must be int" in failure.cause
    # The rest of the cluster is told to stop: a collective cannot go on without the chief.
    assert protocol.parse(worker.recv(10), protocol.ClusterSpec)
    assert protocol.parse(worker.recv(10), protocol.Stop) == protocol.Stop(0)


def test_a_second_registration_of_a_node_is_refused(coordinator):
    _register(coordinator, 0)
    _wait(coordinator, lambda c: c.nodes[0].status is NodeStatus.REGISTERED)  # two threads: order them
    again = _register(coordinator, 0)
    reply = protocol.parse(again.recv(10), protocol.Abort)
    assert "node #0 is unknown or already registered" in reply.reason


def _connection_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "sparkdl-coordinator-conn"]


def test_closing_before_every_node_registered_releases_the_waiting_ones():
    """A node that registered waits for the cluster spec; closing the coordinator (no abort:
    e.g. the driver process ends its cluster) must end that wait, tell the node, and end the
    connection's thread, not leave it waiting for a spec that never comes."""
    coordinator = Coordinator(ROLES, SECRET, "127.0.0.1", cluster_id="msgtest")
    before = set(_connection_threads())
    chief = _register(coordinator, 0)
    _wait(coordinator, lambda c: c.nodes[0].status is NodeStatus.REGISTERED)
    coordinator.close()
    try:  # the node is told why, unless the closing server closed its channel first
        assert "shutting down" in protocol.parse(chief.recv(10), protocol.Abort).reason
    except ChannelError as exc:
        assert not isinstance(exc, ChannelTimeout), exc
    for thread in set(_connection_threads()) - before:
        thread.join(10)
        assert not thread.is_alive(), "the registered node's connection thread still waits after close()"
