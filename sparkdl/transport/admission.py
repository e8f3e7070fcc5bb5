"""Which unauthenticated connections a ChannelServer handshakes with: its pre-authentication slots.

A peer that has not yet proved the cluster's secret holds a thread and a descriptor, so a server
bounds how many do at once: ``max_total`` in all and ``max_per_source`` from one source address.
A newcomer is never turned away for want of a slot; it takes the slot of the OLDEST pending
connection from its own address, or, when every slot is taken, of the address holding the most.
A legitimate client answers the server's hello within one round trip, while a flood of silent
connections only ever grows older: a flood thus displaces itself and never a client arriving
after it, even from the flooder's own address (as on one host, or behind one NAT). A client is
displaced only if ``max_per_source`` newer connections from its address arrive during its own
round trip; the server then tells it so (``BUSY`` in place of its proof) and the client's
``channel.connect`` retries (``retry_while_no_slot``) after a short growing pause, within its
own timeout; so too when a server closes a connection before its hello (no thread to spare).
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, TypeVar

from ..common.errors import NoSlot as NoSlot  # re-exported: raised here
from ..common.timeouts import BUSY_SEND_S, RETRY_FIRST_S, RETRY_MAX_S

BUSY = b"SPARKDL BUSY".ljust(32, b".")  # sent instead of the server's proof to a connection it evicted

T = TypeVar("T")


def say_busy(sock: socket.socket) -> None:
    """Tell an evicted connection's client to retry (best effort, briefly)."""
    try:
        sock.settimeout(BUSY_SEND_S)
        sock.sendall(BUSY)
    except OSError:
        pass


def retry_while_no_slot(attempt: Callable[[], T], deadline: float) -> T:
    """``attempt()`` until it does not raise ``NoSlot``; the last ``NoSlot`` once the next pause
    would reach ``deadline`` (monotonic). Pauses are jittered: clients turned away together spread out."""
    pause = RETRY_FIRST_S
    while True:
        try:
            return attempt()
        except NoSlot:
            jittered = pause * random.uniform(0.5, 1.0)
            if time.monotonic() + jittered >= deadline:
                raise
            time.sleep(jittered)
            pause = min(2 * pause, RETRY_MAX_S)


@dataclass(eq=False)
class Pending:
    """One connection between accept and the end of its handshake's first read."""

    sock: socket.socket
    source: str  # the peer's IP address
    evicted: bool = False


class Admission:
    """The pending (unauthenticated) connections of a server, and who makes room for whom."""

    def __init__(self, max_total: int, max_per_source: int):
        self.max_total = max_total
        self.max_per_source = max_per_source
        self._lock = threading.Lock()
        self._by_source: dict[str, deque[Pending]] = {}  # oldest first
        self._count = 0

    def admit(self, sock: socket.socket, source: str) -> Pending:
        """Register a new connection from ``source``, evicting an older one if it needs the room."""
        with self._lock:
            if len(self._by_source.get(source, ())) >= self.max_per_source:
                self._evict_oldest(source)
            elif self._count >= self.max_total:
                self._evict_oldest(max(self._by_source, key=lambda s: len(self._by_source[s])))
            pending = Pending(sock, source)
            self._by_source.setdefault(source, deque()).append(pending)
            self._count += 1
            return pending

    def settle(self, pending: Pending) -> bool:
        """Take ``pending`` out of reach of eviction (its handshake answer is in, or it failed);
        returns whether it had been evicted. Idempotent; its socket may be closed only after this."""
        with self._lock:
            if not pending.evicted:
                queue = self._by_source.get(pending.source)
                if queue is not None and pending in queue:
                    self._remove(pending.source, queue, pending)
            return pending.evicted

    def _evict_oldest(self, source: str) -> None:
        queue = self._by_source[source]
        victim = queue[0]
        self._remove(source, queue, victim)
        victim.evicted = True
        try:  # wakes the victim's thread from its read; that thread says BUSY and closes the socket
            victim.sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass

    def _remove(self, source: str, queue: deque[Pending], pending: Pending) -> None:
        queue.remove(pending)
        self._count -= 1
        if not queue:
            del self._by_source[source]
