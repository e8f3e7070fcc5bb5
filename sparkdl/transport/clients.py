"""The requests sent to a node's services, each written once (as Horovod's service/client pairs).

``FeedClient`` is the driver's side of one node's feed server (``feed/server.py``): each method
is one request and its answer, on one short connection bounded by one ``Deadline``.
``SupervisorClient`` is the coordinator's side of one node's supervisor (``node/supervisor.py``),
on the channel the supervisor opened when it registered. Adding a request is a message class in
``protocol.py``, its handler in the service's ``_handlers`` table, and one method here.
"""

from __future__ import annotations

from ..common.timeouts import Deadline
from . import protocol
from .channel import Channel, ChannelError, Endpoint, connect


class FeedClient:
    """The driver's requests to one node's feed server (InputMode.SPARK)."""

    def __init__(self, address: tuple[str, int], secret: bytes, endpoint: Endpoint, label: str):
        self.address = address
        self.endpoint = endpoint  #: who the server must be (the handshake is bound to it)
        self.label = label  #: the node, as errors name it (``worker:1``)
        self._secret = secret

    def plan(self, plan: protocol.TrainingPlan, timeout: float) -> None:
        """Tell the node what one ``cluster.train`` call feeds it."""
        self._request(protocol.Plan(plan), timeout, protocol.Ack)

    def seal_cache(self, qname: str, session: int, timeout: float) -> str | None:
        """After epoch 1: None when the node's cache holds its whole share of the run, else why not."""
        return self._request(protocol.CacheSeal(session, qname), timeout, protocol.CacheStatus).problem

    def use_cache(self, qname: str, session: int, use: bool, timeout: float) -> None:
        """The driver's decision, the same for every node: epochs 2..N from the caches, or from Spark."""
        self._request(protocol.CacheUse(session, use, qname), timeout, protocol.Ack)

    def epoch_gate(self, epoch: int, go_on: bool, timeout: float, fit_begin: bool = False) -> None:
        """An elastic cluster's chief waits at the end of ``epoch`` (with ``fit_begin``: a relaunched
        chief as its first fit begins ``epoch``): go on, or not (a relaunch comes)."""
        self._request(protocol.EpochGate(epoch, go_on, fit_begin=fit_begin), timeout, protocol.Ack)

    def end(self, qname: str, timeout: float) -> None:
        """No more data will come on ``qname`` (shutdown). The node may finish, and close, as soon as
        it reads this: its answer is not awaited beyond the send."""
        self._request(protocol.End(qname), timeout, protocol.Ack, answer_needed=False)

    def _request(
        self, message: protocol.Message, timeout: float, answer: type[protocol.Message], answer_needed: bool = True
    ):
        """Send ``message`` on a new connection and return the node's ``answer`` (ChannelError or
        TimeoutError when it does not come within ``timeout`` in all)."""
        deadline = Deadline(timeout, f"the {message.TYPE!r} request to {self.label}")
        with connect(self.address, self._secret, timeout=timeout, endpoint=self.endpoint) as channel:
            channel.send(message.wire())
            deadline.check("waiting for the answer")
            try:
                return protocol.parse(channel.recv(deadline.remaining()), answer)
            except ChannelError:  # ProtocolError included
                if answer_needed:
                    raise
                return None


class SupervisorClient:
    """The coordinator's commands to one node's supervisor, on the node's registration channel.
    A supervisor that cannot be reached any more is reported by the coordinator, not here."""

    def __init__(self, channel: Channel):
        self._channel = channel

    def stop(self, grace_s: float) -> bool:
        """End the TF process (SIGTERM, then SIGKILL after ``grace_s``); whether the command was sent."""
        return self._command(protocol.Stop(grace_s))

    def stall(self, reason: str) -> bool:
        """The node made no progress: dump its stacks, then end it as failed; whether it was sent."""
        return self._command(protocol.Stall(reason))

    def _command(self, message: protocol.Message) -> bool:
        try:
            self._channel.send(message.wire())
            return True
        except (OSError, ChannelError):
            return False
