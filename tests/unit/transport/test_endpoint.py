"""The handshake is bound to the endpoint a client means to reach (issue 12, finding 7).

Every endpoint of a cluster shares its secret, so without this a man in the middle could splice
a feeder meant for node 0 onto node 1's feed server. The client names the endpoint (cluster,
node, service) and the server answers only for its own: a mismatch fails on both ends. Real
feed servers and a real TCP relay on 127.0.0.1.
"""

from __future__ import annotations

import time

import pytest
from feed_servers import feed_rows, labelled, make_server, secret, target  # noqa: F401

from sparkdl.feed.feeder import FeedError, FeedTarget
from sparkdl.transport.channel import AuthenticationError, Endpoint, connect

from raw_peers import Relay

pytestmark = pytest.mark.timeout(60)


def wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_a_feeder_for_node_0_spliced_onto_node_1_is_refused_on_both_ends(make_server, secret):
    node0, node1 = make_server(), make_server()
    relay = Relay(node1.address)  # what the feeder believes is node 0 is node 1
    try:
        spliced = FeedTarget(secret, (relay.address,), (node0.endpoint,), ("worker:0",), 10.0, "input")
        with pytest.raises(FeedError, match="refused this feeder's credentials") as info:
            feed_rows(spliced, labelled(5))
        assert isinstance(info.value.__cause__, AuthenticationError)
    finally:
        relay.close()
    assert wait_until(lambda: node1._server.rejected == 1), "node 1 accepted a feeder meant for node 0"
    assert node1.queue("input").nbytes == 0 and node1.rows_received == 0
    assert feed_rows(target(secret, node0), labelled(5)) == (5, 0)  # unspliced, it reaches node 0
    assert node0.rows_received == 5


@pytest.mark.parametrize(
    "meant_for",
    [Endpoint.feed("test-cluster", 0), Endpoint.coordinator("test-cluster"), Endpoint.feed("another-cluster", 1)],
    ids=["node 0", "coordinator", "cluster"],
)
def test_a_client_that_authenticates_for_another_endpoint_is_refused(make_server, secret, meant_for):
    make_server()
    node1 = make_server()
    assert node1.endpoint == Endpoint.feed("test-cluster", 1)
    with pytest.raises(AuthenticationError, match="wrong cluster secret, or it is not the"):
        connect(node1.address, secret, timeout=10, endpoint=meant_for)
    assert wait_until(lambda: node1._server.rejected == 1)
    with connect(node1.address, secret, timeout=10, endpoint=node1.endpoint) as channel:  # its own name works
        channel.send({"type": "end", "qname": "input"})
        assert channel.recv(timeout=10) == {"type": "ack"}


def test_endpoint_identities_are_unambiguous():
    assert Endpoint("ab", "c", "feed").encode() != Endpoint("a", "bc", "feed").encode()
    assert Endpoint.feed("c1", 1).encode() != Endpoint.feed("c1", 11).encode()
    assert str(Endpoint.feed("c1", 3)) == "feed of node3 in cluster c1"
