"""sparkdl.transport.clients: the driver's requests to a node's feed server, over real sockets."""

import pytest
from feed_servers import feed_rows, labelled, make_server, secret, target  # noqa: F401 - fixtures

from sparkdl.transport import protocol
from sparkdl.transport.channel import AuthenticationError, Endpoint

pytestmark = pytest.mark.timeout(120)


def test_the_driver_s_requests_go_through_one_client_per_node(make_server, secret):
    """``FeedClient`` writes each request once: a plan, the cache decision after epoch 1, and the end
    of the feed all reach the node's server, and a request to another node's server is refused."""
    from sparkdl.transport.clients import FeedClient

    server = make_server()
    client = FeedClient(server.address, secret, server.endpoint, "chief:0")
    plan = protocol.TrainingPlan(session=1, epochs=2, rows_per_epoch=5, seed=3, qname="q")
    client.plan(plan, timeout=10)
    assert server.known_plan("q", 1) == plan, "the node keeps the plan as the driver built it"
    feed_rows(target(secret, server, qname="q"), labelled(5), session=1, epoch=0)
    assert client.seal_cache("q", 1, timeout=10) is None, "the cache holds the node's whole share"
    client.use_cache("q", 1, True, timeout=10)
    assert server.replay_decision("q", 1, timeout=10) is True
    client.end("q", timeout=10)
    assert server.ended
    stranger = FeedClient(server.address, secret, Endpoint.feed("another-cluster", 0), "chief:0")
    with pytest.raises(AuthenticationError):
        stranger.plan(plan, timeout=10)
